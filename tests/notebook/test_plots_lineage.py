"""The plots accept a lineage frame (nbkit.lineage): observed delays, attempts, dead letters and one
timeline lane per message, from the file alone. Artists are inspected, as in test_plots.py."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, read_stream
from nbkit.notebook import plots
from nbkit.notebook.session import Session
from nbkit.tabular.lineage import lineage

NOTEBOOK_DATA = Path(__file__).resolve().parents[2] / "notebooks" / "data"


@pytest.fixture()
def service_lineage(tmp_path):
    """Three orders on a virtual clock: retry_after(2), then 4, max_attempts=3, dead letters to
    orders.dead; order 2 is handled at attempt 2."""
    path = tmp_path / "orders.ss"
    broker = FileBroker(str(path), end_with_eos=True)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    def handle(d):
        if d.json()["id"] == 2 and d.attempt == 2:
            return HandlerOutcome.ack()
        return HandlerOutcome.retry_after(2 * d.attempt)

    session = Session(App(broker))
    for i in (1, 2, 3):
        broker.publish("orders", f'{{"id": {i}}}')
    session.run()
    session.close()
    return lineage(read_stream(path))


def bar_heights(ax, label: str) -> list[float]:
    containers = [c for c in ax.containers if c.get_label() == label]
    assert containers, [c.get_label() for c in ax.containers]
    return [p.get_height() for p in containers[0]]


def test_attempts_count_deliveries_not_dead_letter_copies(service_lineage):
    ax = plots.attempts(service_lineage, ax=plt.gca())
    assert bar_heights(ax, "file") == [3, 3, 2]


def test_retry_delays_draws_the_observed_delays(service_lineage):
    ax = plots.retry_delays(service_lineage, ax=plt.gca())
    assert ax.get_title() == "Observed retry delays"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2 s", "4 s"]
    assert bar_heights(ax, "file") == [3, 2]  # the dead-letter copies (written at once) are left out


def test_retry_delays_bins_a_real_clocks_delays_at_round_edges():
    lin = lineage(read_stream(NOTEBOOK_DATA / "real-clock-orders.ss"))
    ax = plots.retry_delays(lin, ax=plt.gca())
    bars = [p for p in ax.patches if p.get_height() > 0]
    copies = int((lin["delay"].notna() & ~lin["dead_letter"]).sum())
    assert sum(p.get_height() for p in bars) == copies
    assert all(round(p.get_x() / 0.05, 6).is_integer() for p in bars)  # edges on multiples of 50 ms


def test_dead_letters_counts_the_dead_letter_copies(service_lineage):
    ax = plots.dead_letters(service_lineage, ax=plt.gca())
    total = sum(p.get_height() for p in ax.patches) or sum(sum(line.get_ydata()) for line in ax.get_lines())
    assert total == 2


def test_timeline_one_lane_per_message_from_the_file(service_lineage):
    ax = plots.timeline(service_lineage, ax=plt.gca())
    assert [t.get_text() for t in ax.get_yticklabels()] == ["file orders #1", "file orders #2", "file orders #3"]
    right = ax.child_axes[0]  # the end labels, one per lane
    assert [t.get_text() for t in right.get_yticklabels()] == [
        "dead letter → orders.dead",
        "no further copy",
        "dead letter → orders.dead",
    ]
    labels = {t.get_text() for t in ax.texts}
    assert {"2 s", "4 s"} <= labels


def test_timeline_refuses_a_plain_messages_frame(service_lineage, tmp_path):
    with pytest.raises(ValueError, match="lineage"):
        plots.timeline(read_stream(NOTEBOOK_DATA / "real-clock-orders.ss"), ax=plt.gca())
