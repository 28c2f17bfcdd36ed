"""Settlement events and ``events_frame()``: the columns and dtypes documented in
:mod:`nbkit.runtime.events`, and the values each settlement records."""

from __future__ import annotations

import re

import pandas as pd
import pytest

import nbkit.runtime.events as events_module
from nbkit import App, HandlerOutcome, SettlementEvent, StdioBroker
from nbkit.wire.envelope import encode

from .helpers import drain

NS = 10**9


def _documented_schema() -> list[tuple[str, str]]:
    """(column, dtype) rows of the table in the module docstring (between its 2nd and 3rd rule)."""
    rows = []
    rules = 0
    for line in events_module.__doc__.splitlines():
        if line.startswith("====="):
            rules += 1
            continue
        if rules == 2 and line.strip():
            m = re.match(r"^(\w+)\s{2,}(.+?)\s{2,}\S", line)
            assert m, line
            rows.append((m[1], m[2].strip()))
    return rows


def _dtype_name(doc: str) -> str:
    return "category" if doc.startswith("category") else doc


def test_the_docstring_table_is_parsed():
    schema = _documented_schema()
    assert len(schema) == 18
    assert schema[0] == ("time", "datetime64[ms, UTC]")
    assert schema[-1] == ("lost_at", "datetime64[ms, UTC]")


@pytest.fixture
def mixed_app(clock):
    """One event of every action, on a pipe."""
    cap = encode({"x-ruststream-retry-count": "4"}, b"cap", force_text=True).decode()
    stdin = [
        "[jobs] ack",
        "[jobs] boom",
        "[jobs] now",
        "[jobs] later",
        "[jobs] lost",
        "[jobs] soon",
        f"[jobs] {cap}",
    ]
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
    app = App(broker, clock=clock, shutdown_timeout=10)
    app.start()
    drain(app)
    app.shutdown()
    return app


def test_events_frame_columns_and_dtypes_match_the_docstring(mixed_app):
    frame = mixed_app.events_frame()
    schema = _documented_schema()
    assert list(frame.columns) == [name for name, _ in schema] == list(events_module.EVENT_COLUMNS)
    assert [(c, str(frame[c].dtype)) for c in frame.columns] == [(n, _dtype_name(d)) for n, d in schema]
    assert list(frame["transport"].cat.categories) == ["file", "pipe"]


def test_an_empty_frame_has_the_same_schema():
    from nbkit.runtime.events import events_frame

    empty = events_frame([])
    assert len(empty) == 0
    assert [(c, str(empty[c].dtype)) for c in empty.columns] == [(n, _dtype_name(d)) for n, d in _documented_schema()]


def test_events_frame_values(mixed_app):
    frame = mixed_app.events_frame()
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


def test_settlement_event_describe():
    ev = SettlementEvent(
        time=0.0,
        transport="file",
        subscription="s",
        stream_key="jobs",
        shard_id=0,
        seq=3,
        attempt=2,
        outcome="retry_after",
        action="delayed-copy",
        delay=5.0,
        destination="jobs",
    )
    assert ev.describe() == (
        "file jobs #3 attempt 2: retry_after -> copy to 'jobs' due in 5 s, to be delivered as attempt 3"
    )
    written = ev._replace(written_at=5.0, copy_seq=4)
    assert written.describe().endswith("copy to 'jobs' written after 5 s, to be delivered as attempt 3")
    dead = ev._replace(action="dead-letter", delay=0.0, destination="jobs.dead", attempt=3)
    assert dead.describe() == (
        "file jobs #3 attempt 3: retry_after -> copy written to dead-letter key 'jobs.dead' "
        "with retry count 3 (the 3 attempts made)"
    )
    with pytest.raises(AttributeError):
        ev.seq = 4  # type: ignore[misc]


def test_the_event_fields_are_in_the_documented_order():
    """The app builds each event from its values in field order (``SettlementEvent._make``): pin that order."""
    assert SettlementEvent._fields == events_module.EVENT_COLUMNS


def test_each_event_field_holds_what_its_name_says(mixed_app):
    """An event built from values in field order: every field by name, for a delayed copy written later."""
    [later] = [e for e in mixed_app.events if e.outcome == "retry_after" and e.delay == 2.5]
    assert (later.transport, later.subscription, later.stream_key, later.shard_id) == ("pipe", "jobs", "jobs", 0)
    assert (later.attempt, later.outcome, later.action, later.destination) == (
        1,
        "retry_after",
        "delayed-copy",
        "jobs.retry",
    )
    assert later.due == later.time + 2.5 == later.written_at
    assert later.copy_seq is not None and later.abandoned is False and later.error is None and later.redriven is False
    assert later.lost_at is None


def _record_twins():
    """new_record's pure twin, and the compiled one where the compiled core is built."""
    from nbkit.wire.core import compiled_module

    compiled = compiled_module()
    return [events_module.new_record_pure] + ([] if compiled is None else [compiled.new_record])


@pytest.mark.parametrize("make", _record_twins())
def test_new_record_is_tuple_new_of_the_class(make):
    from nbkit.runtime.broker import Published

    values = tuple(range(len(SettlementEvent._fields)))
    event = make(SettlementEvent, values)
    assert type(event) is SettlementEvent and event == SettlementEvent(*values) and event.lost_at == 17
    published = make(Published, ("jobs.retry", 3, 1.5))
    assert type(published) is Published and published.seq == 3
    assert make(Published, ["k", 1, 2.0]) == ("k", 1, 2.0)  # any iterable, as tuple.__new__ takes
    assert type(make(tuple, (1, 2))) is tuple
    with pytest.raises(TypeError, match=r"tuple.__new__\(int\): int is not a subtype of tuple"):
        make(int, (1,))
