"""Redriven dead letters show as such in the plots: ``dead_letters`` counts them beside the dead letters (events
and messages frames), and their timeline lanes say "(redriven)"."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest

import nbkit.plot as nkp
from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, read_stream, redrive


@pytest.fixture
def cycle(tmp_path):
    """Orders 1-4; 2 and 4 fail until the fix, end under orders.dead, and are redriven a minute later."""
    path = tmp_path / "shop.ss"
    broker = FileBroker(path)
    options = {"max_attempts": 2, "dead_letter": "orders.dead"}
    broker.subscriber("orders", start_at=FilePosition.beginning(), **options)(
        lambda d: HandlerOutcome.retry_after(5) if d.json()["id"] % 2 == 0 else None
    )
    buggy = Session(App(broker))
    for i in range(1, 5):
        broker.publish("orders", json.dumps({"id": i}))
        buggy.run()
    buggy.close()
    fixed_broker = FileBroker(path)
    fixed_broker.subscriber("orders", **options)(lambda d: None)
    fixed = Session(App(fixed_broker), clock=buggy.clock)
    fixed.advance(60)
    fixed.step()
    redrive(path, source="orders.dead", target="orders", clock=fixed.clock)
    fixed.run()
    yield path, buggy, fixed
    plt.close("all")


def redriven_points(ax) -> list[float]:
    return [y for line in ax.get_lines() if line.get_gid() == "redriven" for y in line.get_ydata()]


def test_dead_letters_counts_redriven_deliveries_of_an_events_frame(cycle):
    _, buggy, fixed = cycle
    events = fixed.events
    assert events["redriven"].tolist() == [True, True]
    both = pd.concat([buggy.events, events], ignore_index=True)
    ax = nkp.dead_letters(both, ax=plt.figure().add_subplot())
    assert sum(redriven_points(ax)) == 2
    assert "redrive" in ax.get_title()
    assert "redriven" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_dead_letters_counts_redriven_messages_of_a_file(cycle):
    path, _, _ = cycle
    ax = nkp.dead_letters(read_stream(path), ax=plt.figure().add_subplot())
    assert sum(redriven_points(ax)) == 2
    bars = [p.get_height() for p in ax.patches]
    assert sum(bars) == 2  # the two dead letters, in their own bins


def test_no_redriven_line_without_redriven_rows(cycle):
    _, buggy, _ = cycle
    ax = nkp.dead_letters(buggy.events, ax=plt.figure().add_subplot())
    assert redriven_points(ax) == [] and "redrive" not in ax.get_title()


def test_timeline_lanes_of_redriven_messages_say_so(cycle):
    _, _, fixed = cycle
    ax = nkp.timeline(fixed.events, ax=plt.figure().add_subplot())
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 2 and all(label.endswith("(redriven)") for label in labels), labels
