"""Settlement events: the record's fields are the events schema, the module docstring's table and the
record's Parameters are made from it, and each field holds what the settlement records (the frame made of
these records is tested in tests/tabular/test_events.py)."""

from __future__ import annotations

import re

import pytest
from numpydoc.docscrape import NumpyDocString

import nbkit.runtime.events as events_module
from nbkit import App, HandlerOutcome, SettlementEvent, StdioBroker
from nbkit.runtime.events import EVENT_COLUMNS, EVENT_SCHEMA, Column
from nbkit.wire.envelope import encode

from .helpers import START, drain


def _documented_schema() -> list[tuple[str, str, str]]:
    """(column, dtype, meaning) rows of the table in the module docstring (between its 2nd and 3rd rule)."""
    rows = []
    rules = 0
    for line in events_module.__doc__.splitlines():
        if line.startswith("====="):
            rules += 1
            continue
        if rules == 2 and line.strip():
            m = re.match(r"^(\w+)\s{2,}(.+?)\s{2,}(\S.*)$", line)
            assert m, line
            rows.append((m[1], m[2].strip(), m[3]))
    return rows


def _table_dtype(column: Column) -> str:
    return f"{column.dtype} ({', '.join(column.categories)})" if column.categories else column.dtype


def test_the_record_fields_are_the_schema_columns():
    """The record's fields, in order, are the schema's columns: the settlement makes it from values in that order."""
    assert SettlementEvent._fields == EVENT_COLUMNS == tuple(EVENT_SCHEMA)
    assert all(isinstance(column, Column) and column.dtype and column.doc for column in EVENT_SCHEMA.values())
    assert EVENT_SCHEMA["time"] == Column("datetime64[ms, UTC]", "when the delivery was settled")


def test_the_docstring_table_is_the_schema():
    assert _documented_schema() == [(name, _table_dtype(c), c.doc) for name, c in EVENT_SCHEMA.items()]


def test_the_record_parameters_are_the_schema():
    documented = NumpyDocString(SettlementEvent.__doc__)["Parameters"]
    assert [p.name for p in documented] == list(EVENT_COLUMNS)
    assert [" ".join(p.desc).rstrip(".").lower() for p in documented] == [c.doc.lower() for c in EVENT_SCHEMA.values()]
    types = {p.name: p.type for p in documented}
    assert types["time"] == "float" and types["delay"] == "float, optional" and types["abandoned"] == "bool"
    assert types["transport"] == '{"file", "pipe"}' and types["outcome"] == '{"ack", "drop", "retry", "retry_after"}'


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


def test_each_action_records_its_values(mixed_app):
    """What the settlement records for every action: delays, destinations, due and written times, the
    abandoned copy (shutdown_timeout=10 publishes the 1 s and 2.5 s copies and abandons the 100 s one)."""
    events = mixed_app.events
    t0 = START
    assert [e.outcome for e in events] == ["ack", "drop", "retry", "retry_after", "retry_after", "retry_after", "retry"]
    assert [e.action for e in events] == [
        "unsupported",
        "unsupported",
        "copy",
        "delayed-copy",
        "delayed-copy",
        "delayed-copy",
        "dead-letter",
    ]
    assert {e.subscription for e in events} == {"jobs"} and {e.time for e in events} == {t0}
    assert [e.seq for e in events] == [0, 1, 2, 3, 4, 5, 6]
    assert [e.attempt for e in events] == [1] * 6 + [5]
    assert [e.delay for e in events] == [None, None, 0.0, 2.5, 100.0, 1.0, 0.0]
    assert [e.destination for e in events] == [None, None] + ["jobs.retry"] * 4 + ["jobs.dead"]
    assert [e.due for e in events][3:6] == [t0 + 2.5, t0 + 100, t0 + 1]
    assert [e.written_at for e in events][2:] == [t0, t0 + 2.5, None, t0 + 1, t0]
    assert [e.abandoned for e in events] == [False] * 4 + [True] + [False] * 2
    assert [e.copy_seq for e in events][2:] == [0, 2, None, 1, 0]  # per destination key, from 0
    assert [e.error for e in events][:3] == [None, "KeyError: 'k'", None]


def _record_twins():
    """new_record's pure twin, and the compiled one where the compiled core is built."""
    from nbkit.wire.core import compiled_module

    compiled = compiled_module()
    return [events_module.new_record_pure] + ([] if compiled is None else [compiled.new_record])


@pytest.mark.parametrize("make", _record_twins())
def test_new_record_is_tuple_new_of_the_class(make):
    from nbkit.runtime.broker import Published

    values = tuple(range(len(EVENT_SCHEMA)))
    event = make(SettlementEvent, values)
    assert type(event) is SettlementEvent and event == SettlementEvent(*values)
    # each value lands in the schema's column of its place
    assert [getattr(event, name) for name in EVENT_SCHEMA] == list(values)
    published = make(Published, ("jobs.retry", 3, 1.5))
    assert type(published) is Published and published.seq == 3
    assert make(Published, ["k", 1, 2.0]) == ("k", 1, 2.0)  # any iterable, as tuple.__new__ takes
    assert type(make(tuple, (1, 2))) is tuple
    with pytest.raises(TypeError, match=r"tuple.__new__\(int\): int is not a subtype of tuple"):
        make(int, (1,))
