"""The steps frame the timeline draws, read from events frames through the public functions: lanes, states,
copy continuation on a file (same subscription) and on a pipe (any subscription, loopback), and lane order.

Events come from real Sessions on a virtual clock where a run shows the behaviour, and from small hand-made
frames where one rule is pinned on its own."""

from __future__ import annotations

import end_states
import pandas as pd
import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, StdioBroker, lineage, read_stream
from nbkit.runtime.vocabulary import END_STATES, STEP_STATES
from nbkit.tabular.timeline_steps import (
    STEP_COLUMNS,
    STEP_READERS,
    file_lanes_first,
    steps_from_events,
    steps_from_lineage,
)

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def seconds(values: pd.Series) -> list[float | None]:
    """UTC times as seconds since T0 (None for NaT)."""
    return [None if pd.isna(v) else (v - T0).total_seconds() for v in pd.to_datetime(values, utc=True)]


def lane_of_each_row(steps: pd.DataFrame) -> list[str]:
    return [str(m) for m in steps["message"]]


def file_retries(tmp_path) -> Session:
    """Two orders on a file, retried after 5 s then 10 s, dead-lettered at the third attempt."""
    broker = FileBroker(tmp_path / "orders.ss")

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    def handle(d):
        return HandlerOutcome.retry_after(5 if d.attempt == 1 else 10)

    session = Session(App(broker))
    for i in range(2):
        broker.publish("orders", f"order {i}")
    session.run()
    return session


def test_a_files_copies_continue_their_messages_lane(tmp_path):
    steps = steps_from_events(file_retries(tmp_path).events)
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert list(steps["message"].cat.categories) == ["file orders #1", "file orders #2"]
    assert lane_of_each_row(steps) == ["file orders #1", "file orders #2"] * 3  # deliveries in time order
    assert steps["attempt"].tolist() == [1, 1, 2, 2, 3, 3]
    assert seconds(steps["time"]) == [0, 0, 5, 5, 15, 15]
    assert steps["state"].tolist() == ["retried"] * 4 + ["dead-letter"] * 2
    assert steps["delay"].tolist()[:4] == [5.0, 5.0, 10.0, 10.0] and steps["delay"].iloc[4:].isna().all()
    assert seconds(steps["copy_at"]) == [5, 5, 15, 15, 15, 15]  # copies written, then the dead letters
    assert steps["destination"].tolist() == ["orders"] * 4 + ["orders.dead"] * 2
    assert set(steps["state"]) <= set(STEP_STATES) and steps["note"].eq("").all()
    assert steps["transport"].eq("file").all() and str(steps["attempt"].dtype) == "Int64"


def test_every_kind_of_end_and_a_handlers_exception_as_a_note(tmp_path):
    session = end_states.first_deliveries(tmp_path)
    waits = steps_from_events(session.events).iloc[3]
    assert (waits["message"], waits["state"], waits["destination"], waits["delay"]) == (
        "file orders #4", "waiting", "orders", 0.0,
    )  # fmt: skip
    steps = steps_from_events(end_states.every_end(session).events)
    last = steps.groupby("message", observed=True).tail(1).sort_values("message").set_index("message")  # the ends
    assert last["state"].to_dict() == {
        "file orders #1": "handled",
        "file orders #2": "dropped",
        "file orders #3": "dropped",
        "file orders #4": "rejected",
        "file orders #5": "handled",
        "file orders #6": "pending",
    }
    assert last["note"].tolist() == ["", "", "exception", "", "", ""]
    assert seconds(last["copy_at"]) == [None, None, None, None, None, 30]  # the slow copy is due at 30 s
    assert steps["state"].tolist().count("retried") == 2  # "never" and "once" came back in their lanes
    assert set(steps["state"]) | {"waiting", "dead-letter", "lost", "copy-out", "no further copy"} == set(STEP_STATES)


def test_a_copy_abandoned_at_a_crash_is_lost_when_the_process_died(tmp_path):
    steps = steps_from_events(end_states.crashed_in_the_delay_window(tmp_path).events)
    assert steps["state"].tolist() == ["lost"] and seconds(steps["copy_at"]) == [12]
    assert steps["delay"].tolist() == [30.0]


def pipe_and_file(tmp_path) -> Session:
    """A pipe stage (two input lines, copies out to ``orders.retry``) beside a file with one order."""
    pipe = StdioBroker(stdin=["[orders] a", "[orders] b"], stdout=[])
    pipe.subscriber("orders", max_attempts=3, dead_letter="orders.dlq", out_retry="orders.retry")(
        lambda d: HandlerOutcome.retry_after(2)
    )
    file = FileBroker(tmp_path / "orders.ss")
    file.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")(
        lambda d: HandlerOutcome.retry_after(5)
    )
    session = Session(App(pipe, file))
    file.publish("orders", "c")
    session.run()
    return session


def test_a_pipes_copy_leaves_on_stdout_and_each_input_line_is_a_lane(tmp_path):
    steps = steps_from_events(pipe_and_file(tmp_path).events)
    pipe = steps[steps["transport"] == "pipe"]
    assert lane_of_each_row(pipe) == ["pipe orders #0", "pipe orders #1"]
    assert pipe["state"].tolist() == ["copy-out", "copy-out"]
    assert pipe["destination"].tolist() == ["orders.retry"] * 2 and seconds(pipe["copy_at"]) == [2, 2]
    file = steps[steps["transport"] == "file"]
    assert lane_of_each_row(file) == ["file orders #1"] * 2 and file["state"].tolist() == ["retried", "dead-letter"]


def test_file_lanes_first_keeps_rows_and_reorders_only_the_lanes(tmp_path):
    steps = steps_from_events(pipe_and_file(tmp_path).events)
    assert list(steps["message"].cat.categories)[0].startswith("pipe")  # the pipe stage was registered first
    ordered = file_lanes_first(steps)
    assert list(ordered["message"].cat.categories) == ["file orders #1", "pipe orders #0", "pipe orders #1"]
    pd.testing.assert_series_equal(ordered["message"].astype(str), steps["message"].astype(str))
    assert ordered.drop(columns="message").equals(steps.drop(columns="message"))
    empty = steps.iloc[:0]
    assert file_lanes_first(empty) is empty


def test_a_loopback_pipe_follows_its_own_copies_across_subscriptions():
    session = end_states.loopback_pipe()
    steps = steps_from_events(session.events)
    # read back under jobs.retry by another subscription, and still one lane per input line
    assert list(steps["message"].cat.categories) == ["pipe jobs #0", "pipe jobs #1"]
    assert lane_of_each_row(steps) == ["pipe jobs #0", "pipe jobs #1"] * 3
    assert steps["state"].tolist() == ["retried"] * 4 + ["dead-letter"] * 2
    assert seconds(steps["time"]) == [0, 0, 2, 2, 4, 4]


def copied(transport: str, subscription: str, seq: int, copy_seq: int) -> dict:
    """An events row: attempt 1 of ``orders #seq`` copied at once to ``orders #copy_seq``."""
    return {"time": T0, "transport": transport, "subscription": subscription, "stream_key": "orders", "seq": seq,
            "attempt": 1, "outcome": "retry", "action": "copy", "delay": 0.0, "destination": "orders",
            "copy_seq": copy_seq, "written_at": T0}  # fmt: skip


def acked(transport: str, subscription: str, seq: int, attempt: int, **more: object) -> dict:
    """An events row: attempt ``attempt`` of ``orders #seq`` handled."""
    return {"time": T0, "transport": transport, "subscription": subscription, "stream_key": "orders", "seq": seq,
            "attempt": attempt, "outcome": "ack", "action": "unsupported", **more}  # fmt: skip


def test_on_a_file_only_the_same_subscription_continues_a_lane():
    frame = pd.DataFrame([copied("file", "a", 1, 2), acked("file", "b", 2, 2), acked("file", "a", 2, 2)])
    steps = steps_from_events(frame)
    assert lane_of_each_row(steps) == ["file orders #1", "file orders #2", "file orders #1"]
    assert steps["state"].tolist() == ["retried", "handled", "handled"]


def test_on_a_pipe_any_subscription_continues_a_lane():
    steps = steps_from_events(pd.DataFrame([copied("pipe", "a", 0, 5), acked("pipe", "b", 5, 2)]))
    assert lane_of_each_row(steps) == ["pipe orders #0"] * 2 and steps["state"].tolist() == ["retried", "handled"]


def test_a_copy_continues_only_at_the_next_attempt_and_a_redriven_lane_says_so():
    steps = steps_from_events(pd.DataFrame([copied("file", "a", 1, 2), acked("file", "a", 2, 3, redriven=True)]))
    assert lane_of_each_row(steps) == ["file orders #1", "file orders #2 (redriven)"]
    assert steps["state"].tolist() == ["waiting", "handled"]  # attempt 3 is not the copy's attempt 2


def test_no_events_give_no_steps_and_a_missing_column_is_named(tmp_path):
    broker = FileBroker(tmp_path / "o.ss")
    broker.subscriber("orders", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.ack())
    steps = steps_from_events(Session(App(broker)).events)
    assert steps.empty and list(steps.columns) == list(STEP_COLUMNS)
    with pytest.raises(ValueError, match="missing column 'action' in this events frame"):
        steps_from_events(pd.DataFrame({"time": [T0], "transport": ["file"], "stream_key": ["k"], "seq": [1]}))


def test_a_lineage_frames_steps_have_the_same_columns_and_states(tmp_path):
    assert {"events": steps_from_events, "lineage": steps_from_lineage} == STEP_READERS
    file_retries(tmp_path)
    steps = steps_from_lineage(lineage(read_stream(tmp_path / "orders.ss")))
    assert list(steps.columns) == list(STEP_COLUMNS)
    assert set(steps["state"]) <= set(STEP_STATES) and "no further copy" in END_STATES
