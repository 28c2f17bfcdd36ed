"""What the plots draw, prepared without matplotlib: deliveries, retry delay counts, dead letters per bin, steps.

Events come from real Sessions on a virtual clock, and from small hand-made frames where one rule is pinned."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, read_stream
from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.tabular.plot_data import (
    MAX_DISTINCT_DELAYS,
    attempt_counts,
    auto_freq,
    dead_letter_bins,
    deliveries,
    frame_kind,
    retry_delay_counts,
    round_bins,
    steps_of,
    time_unit,
)

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def events(actions, delays, *, seconds=None, transport="file", written_at=None) -> pd.DataFrame:
    """A hand-made events frame: one row per action, one second apart unless ``seconds`` says when."""
    n = len(actions)
    at = seconds if seconds is not None else range(n)
    frame = pd.DataFrame(
        {
            "time": [T0 + pd.Timedelta(seconds=s) for s in at],
            "transport": [transport] * n,
            "attempt": list(range(1, n + 1)),
            "action": actions,
            "delay": delays,
        }
    )
    if written_at is not None:
        frame["written_at"] = [None if w is None else T0 + pd.Timedelta(seconds=w) for w in written_at]
    return frame


@pytest.fixture
def orders(tmp_path) -> Session:
    """Three orders retried after 5 s then 10 s, dead-lettered at the third attempt (at +15 s)."""
    broker = FileBroker(tmp_path / "orders.ss")
    broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")(
        lambda d: HandlerOutcome.retry_after(5 if d.attempt == 1 else 10)
    )
    session = Session(App(broker))
    for i in range(3):
        broker.publish("orders", f"order {i}")
    session.run()
    return session


def test_preparing_the_data_imports_no_matplotlib():
    code = "import sys, nbkit.tabular.plot_data; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_deliveries_of_an_events_frame_read_the_vocabulary(orders):
    d = deliveries(orders.events)
    assert d.attrs["kind"] == "events" and d.attrs["transports"] == ["file"] and d["delivered"].all()
    assert sorted(d["delay"].dropna()) == [5, 5, 5, 10, 10, 10]
    assert d["is_dead_letter"].sum() == 3 and d.loc[d.is_dead_letter, "delay"].isna().all()
    assert (d.loc[d.is_dead_letter, "time"] == T0 + pd.Timedelta(seconds=15)).all()  # when the copy was written
    assert d.attrs["span"] == (T0, T0 + pd.Timedelta(seconds=15))


def test_a_copy_now_is_a_zero_second_delay_and_other_actions_have_none():
    d = deliveries(events(["copy", "delayed-copy", "unsupported", "rejected"], [None, 3.0, 7.0, None]))
    assert d["delay"].tolist()[:2] == [0.0, 3.0] and d["delay"].iloc[2:].isna().all()


def test_a_dead_letter_is_at_its_written_copy_else_at_its_settlement():
    d = deliveries(events(["dead-letter", "dead-letter"], [None, None], written_at=[4, None]))
    assert d["time"].tolist() == [T0 + pd.Timedelta(seconds=4), T0 + pd.Timedelta(seconds=1)]


def test_deliveries_of_a_messages_frame_and_a_counted_one(orders, tmp_path):
    messages = read_stream(tmp_path / "orders.ss")
    d = deliveries(messages, by=None)
    assert d.attrs["kind"] == "messages" and set(d["group"]) == {"all"}
    assert d["is_dead_letter"].sum() == 3 and (d["delivered"] == ~d["is_dead_letter"]).all()
    assert d["delay"].isna().all()
    assert deliveries(messages, dead_letter_keys=[])["is_dead_letter"].sum() == 0
    counted = pd.DataFrame({"stream_key": ["a", "a.dead"], "attempt": [1, 2], "retry_count": [0, 1], "count": [5, 2]})
    assert deliveries(counted, by=None)["weight"].tolist() == [5, 2]
    with pytest.raises(ValueError, match="'count' column"):
        deliveries(counted.assign(count=[1, -1]), by=None)


def test_a_redriven_message_is_marked_by_its_header():
    frame = pd.DataFrame(
        {
            "stream_key": ["orders", "orders"],
            "attempt": [1, 1],
            "retry_count": [0, 0],
            "headers": [{}, {REDRIVEN_FROM_HEADER: "orders.dead"}],
        }
    )
    assert deliveries(frame, by=None)["redriven"].tolist() == [False, True]


@pytest.mark.parametrize(
    ("frame", "error", "match"),
    [
        ([1, 2], TypeError, "expected a DataFrame"),
        (pd.DataFrame({"x": [1]}), ValueError, "'attempt'"),
        (pd.DataFrame({"attempt": [1]}), ValueError, "'action'"),
    ],
)
def test_frame_kind_names_what_is_missing(frame, error, match):
    with pytest.raises(error, match=match):
        frame_kind(frame)


def test_deliveries_are_counted_per_attempt(orders, tmp_path):
    counted = attempt_counts(orders.events)
    assert not counted.reason and counted.groups == ["file"] and not counted.pipe_copies_only
    assert counted.table.index.tolist() == [1, 2, 3] and counted.table["file"].tolist() == [3, 3, 3]
    assert attempt_counts(read_stream(tmp_path / "orders.ss")).table["file"].tolist() == [3, 3, 3]  # dead letters not


def test_a_pipe_capture_without_first_deliveries_is_copies_only():
    frame = pd.DataFrame(
        {
            "stream_key": ["jobs", "jobs.retry", "jobs.retry"],
            "transport": ["file", "pipe", "pipe"],
            "attempt": [1, 2, 3],
            "retry_count": [0, 1, 2],
        }
    )
    counted = attempt_counts(frame)
    assert counted.pipe_copies_only and counted.table.index.tolist() == [1, 2, 3]
    assert counted.table["pipe"].tolist() == [0, 1, 1]
    assert not attempt_counts(frame.assign(attempt=[1, 1, 2])).pipe_copies_only
    assert attempt_counts(frame[frame.stream_key == "x"]).reason == "no message outside dead-letter keys"


def test_few_distinct_delays_are_counted_per_delay(orders):
    counted = retry_delay_counts(orders.events)
    assert not counted.observed and not counted.reason and counted.groups == ["file"]
    assert counted.table is not None
    assert counted.table.index.tolist() == [5.0, 10.0] and counted.table["file"].tolist() == [3, 3]


def test_many_delays_or_given_bins_make_a_histogram():
    many = MAX_DISTINCT_DELAYS + 1
    counted = retry_delay_counts(events(["delayed-copy"] * many, [float(s) for s in range(1, many + 1)]))
    assert counted.table is None and counted.bins == "auto" and len(counted.values[0]) == many
    assert retry_delay_counts(events(["delayed-copy"], [5.0]), bins=4).bins == 4


def test_no_delay_says_why(orders, tmp_path):
    assert retry_delay_counts(read_stream(tmp_path / "orders.ss")).reason.startswith("a file or a pipe does not")
    assert retry_delay_counts(events(["unsupported"], [None])).reason == "no retry copy was scheduled"


def test_round_bins_cut_observed_delays_at_round_widths():
    edges = round_bins(np.array([0.26, 0.29, 0.61]))
    assert np.allclose(np.diff(edges), 0.05) and edges[0] <= 0.26 and edges[-1] >= 0.61


def test_dead_letters_are_binned_over_the_whole_run(orders):
    binned = dead_letter_bins(orders.events)
    assert not binned.reason and binned.width == pd.Timedelta(seconds=1) and binned.n_bins == 16
    assert binned.counts["file"].tolist() == [0] * 15 + [3] and binned.redriven is None
    assert dead_letter_bins(orders.events, freq="5s").counts["file"].tolist() == [0, 0, 0, 3]


def test_redriven_rows_are_binned_beside_the_dead_letters():
    frame = events(["dead-letter", "unsupported"], [None, None], seconds=[0, 3]).assign(redriven=[False, True])
    binned = dead_letter_bins(frame)
    assert binned.counts["file"].tolist() == [1, 0, 0, 0] and binned.redriven is not None
    assert binned.redriven.tolist() == [0, 0, 0, 1]


@pytest.mark.parametrize(("freq", "match"), [("often", "pandas frequency"), ("1MS", "not a fixed bin width")])
def test_a_bin_width_must_be_a_fixed_frequency(orders, freq, match):
    with pytest.raises(ValueError, match=match):
        dead_letter_bins(orders.events, freq=freq)


def test_no_dead_letter_says_why():
    assert dead_letter_bins(events(["copy"], [None])).reason.startswith("no dead letter")
    assert dead_letter_bins(events([], [])).reason == "nothing recorded yet"


def test_bin_widths_and_time_units_follow_the_span():
    assert [auto_freq(pd.Timedelta(x)) for x in ("0s", "300ms", "3h", "10000D")] == ["1s", "100ms", "15min", "28D"]
    assert [time_unit(s)[1] for s in (5, 3600, 4 * 3600, 4 * 86400)] == ["s", "min", "h", "days"]


def test_steps_of_reads_events_and_refuses_a_messages_frame(orders, tmp_path):
    steps = steps_of(orders.events)
    assert steps["message"].cat.categories.tolist() == [f"file orders #{i}" for i in range(1, 4)]
    assert steps.groupby("message", observed=True)["state"].last().eq("dead-letter").all()
    with pytest.raises(ValueError, match="does not say which records are one message"):
        steps_of(read_stream(tmp_path / "orders.ss"))
