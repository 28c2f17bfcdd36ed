"""The events frame (``nbkit.events_frame``): its columns and dtypes are the events schema's, and each value is
the record's, converted by its column's dtype (what a settlement records is tested in tests/runtime/test_events.py)."""

from __future__ import annotations

import pandas as pd
import pytest

from nbkit import Action, SettlementEvent
from nbkit.runtime.events import EVENT_COLUMNS, EVENT_SCHEMA
from nbkit.tabular.events import events_frame

T0 = pd.Timestamp("2024-01-01", tz="UTC").timestamp()


@pytest.fixture
def events() -> list[SettlementEvent]:
    """Three records as a settlement makes them: no copy, a delayed copy written later, an abandoned dead letter."""
    first = SettlementEvent(T0, "file", "orders", "orders", 0, 1, 1, "ack", "unsupported")
    later = SettlementEvent(T0 + 0.0016, "pipe", "jobs", "jobs", 2, 7, 1, "retry_after", "delayed-copy")
    later = later._replace(delay=2.5, destination="jobs.retry", due=T0 + 2.5, written_at=T0 + 2.5, copy_seq=3)
    dead = SettlementEvent(T0 + 60, "pipe", "jobs", "jobs", 0, 8, 5, "retry", "dead-letter", delay=0.0)
    dead = dead._replace(destination="jobs.dead", abandoned=True, error="KeyError: 'k'", redriven=True, lost_at=T0 + 61)
    return [first, later, dead]


def _schema_of(frame: pd.DataFrame) -> list[tuple[str, str, tuple[str, ...]]]:
    """(column, dtype, fixed categories) of each column of ``frame``."""
    fixed = {name for name, column in EVENT_SCHEMA.items() if column.categories}
    return [
        (name, str(frame[name].dtype), tuple(frame[name].cat.categories) if name in fixed else ())
        for name in frame.columns
    ]


SCHEMA = [(name, column.dtype, column.categories) for name, column in EVENT_SCHEMA.items()]


def test_the_frame_columns_and_dtypes_are_the_schema(events):
    frame = events_frame(events)
    assert list(frame.columns) == list(EVENT_COLUMNS)
    assert _schema_of(frame) == SCHEMA
    assert list(frame["transport"].cat.categories) == ["file", "pipe"]
    assert list(frame["action"].cat.categories) == [str(action) for action in Action]


def test_an_empty_frame_has_the_same_schema():
    empty = events_frame([])
    assert len(empty) == 0
    assert _schema_of(empty) == SCHEMA


def test_any_iterable_of_events_and_the_public_name(events):
    import nbkit

    assert nbkit.events_frame is events_frame
    pd.testing.assert_frame_equal(events_frame(iter(events)), events_frame(list(events)))


def test_each_value_is_the_records_in_its_columns_dtype(events):
    """Times become UTC datetimes to the millisecond, a missing value <NA> (NaT for a time)."""
    frame = events_frame(events)
    t0 = pd.Timestamp("2024-01-01", tz="UTC")
    assert frame["time"].tolist() == [t0, t0 + pd.Timedelta(milliseconds=2), t0 + pd.Timedelta(seconds=60)]
    assert frame["transport"].tolist() == ["file", "pipe", "pipe"]
    assert frame["subscription"].tolist() == ["orders", "jobs", "jobs"]
    assert (frame["shard_id"].tolist(), frame["seq"].tolist(), frame["attempt"].tolist()) == (
        [0, 2, 0],
        [1, 7, 8],
        [1, 1, 5],
    )
    assert frame["outcome"].tolist() == ["ack", "retry_after", "retry"]
    assert frame["action"].tolist() == ["unsupported", "delayed-copy", "dead-letter"]
    assert frame["delay"].tolist() == [pd.NA, 2.5, 0.0]
    assert frame["destination"].isna().tolist() == [True, False, False]
    assert frame["destination"].tolist()[1:] == ["jobs.retry", "jobs.dead"]
    assert frame["due"].tolist() == [pd.NaT, t0 + pd.Timedelta(seconds=2.5), pd.NaT]
    assert frame["written_at"].tolist() == [pd.NaT, t0 + pd.Timedelta(seconds=2.5), pd.NaT]
    assert frame["copy_seq"].tolist() == [pd.NA, 3, pd.NA]
    assert frame["abandoned"].tolist() == [False, False, True]
    assert frame["error"].tolist() == [pd.NA, pd.NA, "KeyError: 'k'"]
    assert frame["redriven"].tolist() == [False, False, True]
    assert frame["lost_at"].tolist() == [pd.NaT, pd.NaT, t0 + pd.Timedelta(seconds=61)]
