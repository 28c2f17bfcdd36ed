"""DelayedCopies on its own: copies held until due, fired in due order (the clock reaching each due time, the
settlement's event updated in the history), abandoned with their events marked, and the backpressure cap."""

from __future__ import annotations

import logging

from nbkit import FileBroker, StdioBroker
from nbkit.runtime.delayed import DelayedCopies
from nbkit.runtime.events import EventHistory, SettlementEvent
from nbkit.runtime.run_summary import RunCounts

from .helpers import START, records, unenvelope


def _event(seq: int, due: float) -> SettlementEvent:
    return SettlementEvent(
        START, "file", "orders", "orders", 0, seq, 1, "retry_after", "delayed-copy", due - START, "orders", due
    )


def _held(broker, clock, dues: list[float], keep: int | None = None) -> tuple[DelayedCopies, EventHistory]:
    """DelayedCopies holding one copy per due time (seq 1, 2, ...), each settlement's event in the history."""
    counts = RunCounts()
    history = EventHistory(keep)
    delayed = DelayedCopies(clock, counts, history, max_pending=None)
    for seq, due in enumerate(dues, 1):
        event = _event(seq, due)
        number = history.append(event)
        delayed.hold(
            due, broker, "orders", b"copy %d" % seq, {"x-ruststream-retry-count": "1"}, event, number, 1, None, None
        )
    return delayed, history


def test_copies_fire_in_due_order_and_update_their_events(tmp_path, clock):
    path = tmp_path / "orders.ss"
    broker = FileBroker(path)
    broker.bind_clock(clock)
    delayed, history = _held(broker, clock, [START + 9, START + 3, START + 6])
    assert len(delayed) == 3 and delayed.next_due() == START + 3 and delayed.last_due() == START + 9
    assert [c.due for c in delayed.sorted()] == [START + 3, START + 6, START + 9]

    fired = delayed.fire_due(START + 6)
    assert [e.seq for e in fired] == [2, 3] and clock.now() == START + 6  # the clock reached each due time
    assert [e.written_at for e in fired] == [START + 3, START + 6]
    assert list(history.events) == [_event(1, START + 9), *fired]  # updated in place, the order kept
    assert delayed.counts.copies == 2 and delayed.next_due() == START + 9
    broker.shutdown()
    assert [(r.key, unenvelope(r.payload)[1]) for r in records(path)] == [("orders", b"copy 2"), ("orders", b"copy 3")]


def test_abandoned_copies_mark_their_events_and_are_logged(clock, caplog):
    broker = StdioBroker(stdin=[], stdout=[])
    delayed, history = _held(broker, clock, [START + 5, START + 1], keep=1)  # the first event is no longer kept
    with caplog.at_level(logging.ERROR, logger="nbkit"):
        assert delayed.abandon(reason="gone") == 2
    assert len(delayed) == 0 and delayed.counts.abandoned == 2 and history.settled == 2
    assert list(history.events) == [_event(2, START + 1)._replace(abandoned=True, lost_at=clock.now())]
    assert [(r.getMessage().split()[0], r.seq) for r in caplog.records] == [("gone", 2), ("gone", 1)]


def test_the_cap_is_counted_once_per_time_it_is_reached(tmp_path, clock):
    broker = FileBroker(tmp_path / "orders.ss")
    broker.bind_clock(clock)
    delayed, _ = _held(broker, clock, [START + 1, START + 2])
    delayed.max_pending = 2
    assert delayed.full and delayed.full and delayed.counts.backpressure == 1
    delayed.fire_due(START + 1)
    assert not delayed.full
    delayed.max_pending = 1
    assert delayed.full and delayed.counts.backpressure == 2
