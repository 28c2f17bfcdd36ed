"""The events frame (``nbkit.events_frame``): its columns and dtypes are the events schema's, and its values
those each settlement recorded."""

from __future__ import annotations

import pandas as pd
import pytest

from nbkit import Action, App, HandlerOutcome, StdioBroker, VirtualClock
from nbkit.runtime.events import EVENT_COLUMNS, EVENT_SCHEMA
from nbkit.tabular.events import events_frame
from nbkit.wire.envelope import encode


def _drain(app: App) -> None:
    for _ in range(1000):
        if app.step() is None:
            return
    raise AssertionError("still delivering after 1000 steps")


@pytest.fixture
def mixed_app():
    """One event of every action, on a pipe; a 100 s delayed copy abandoned at shutdown."""
    cap = encode({"x-ruststream-retry-count": "4"}, b"cap", force_text=True).decode()
    stdin = ["[jobs] ack", "[jobs] boom", "[jobs] now", "[jobs] later", "[jobs] lost", "[jobs] soon", f"[jobs] {cap}"]
    broker = StdioBroker(stdin=stdin, stdout=[])
    behaviour = {
        b"ack": lambda: None,
        b"now": HandlerOutcome.retry,
        b"later": lambda: HandlerOutcome.retry_after(2.5),
        b"lost": lambda: HandlerOutcome.retry_after(100),
        b"soon": lambda: HandlerOutcome.retry_after(1),
        b"cap": HandlerOutcome.retry,
    }

    def handler(d):
        if d.payload == b"boom":
            raise KeyError("k")
        return behaviour[d.payload]()

    broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=5, dead_letter="jobs.dead")(handler)
    app = App(broker, clock=VirtualClock(), shutdown_timeout=10)
    app.start()
    _drain(app)
    app.shutdown()
    return app


def _schema_of(frame: pd.DataFrame) -> list[tuple[str, str, tuple[str, ...]]]:
    """(column, dtype, fixed categories) of each column of ``frame``."""
    fixed = {name for name, column in EVENT_SCHEMA.items() if column.categories}
    return [
        (name, str(frame[name].dtype), tuple(frame[name].cat.categories) if name in fixed else ())
        for name in frame.columns
    ]


SCHEMA = [(name, column.dtype, column.categories) for name, column in EVENT_SCHEMA.items()]


def test_the_frame_columns_and_dtypes_are_the_schema(mixed_app):
    frame = events_frame(mixed_app.events)
    assert list(frame.columns) == list(EVENT_COLUMNS)
    assert _schema_of(frame) == SCHEMA
    assert list(frame["transport"].cat.categories) == ["file", "pipe"]
    assert list(frame["action"].cat.categories) == [str(action) for action in Action]


def test_an_empty_frame_has_the_same_schema():
    empty = events_frame([])
    assert len(empty) == 0
    assert _schema_of(empty) == SCHEMA


def test_any_iterable_of_events_and_the_public_name(mixed_app):
    import nbkit

    assert nbkit.events_frame is events_frame
    pd.testing.assert_frame_equal(events_frame(iter(mixed_app.events)), events_frame(list(mixed_app.events)))


def test_events_frame_values(mixed_app):
    frame = events_frame(mixed_app.events)
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    assert frame["outcome"].tolist() == [
        "ack",
        "drop",
        "retry",
        "retry_after",
        "retry_after",
        "retry_after",
        "retry",
    ]
    assert frame["action"].tolist() == [
        "unsupported",
        "unsupported",
        "copy",
        "delayed-copy",
        "delayed-copy",
        "delayed-copy",
        "dead-letter",
    ]
    assert frame["subscription"].tolist() == ["jobs"] * 7
    assert frame["seq"].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert frame["attempt"].tolist() == [1] * 6 + [5]
    assert frame["delay"].tolist()[2:] == [0.0, 2.5, 100.0, 1.0, 0.0]
    assert frame["delay"].isna().tolist() == [True, True, False, False, False, False, False]
    assert frame["destination"].tolist()[2:] == ["jobs.retry"] * 4 + ["jobs.dead"]
    assert frame["due"].tolist()[3:6] == [
        t0 + pd.Timedelta(seconds=2.5),
        t0 + pd.Timedelta(seconds=100),
        t0 + pd.Timedelta(seconds=1),
    ]
    # shutdown_timeout=10 published the 1 s and 2.5 s copies and abandoned the 100 s one
    assert frame["written_at"].tolist()[2:] == [
        t0,
        t0 + pd.Timedelta(seconds=2.5),
        pd.NaT,
        t0 + pd.Timedelta(seconds=1),
        t0,
    ]
    assert frame["abandoned"].tolist() == [False] * 4 + [True] + [False] * 2
    assert frame["copy_seq"].tolist()[2:] == [0, 2, pd.NA, 1, 0]  # per destination key, from 0
    assert frame["error"].tolist()[:3] == [pd.NA, "KeyError: 'k'", pd.NA]
    assert (frame["time"] == t0).all()
