"""App.events keeps the most recent ``keep_events`` settlements; delayed copies still update theirs."""

from __future__ import annotations

import pytest

from nbkit import App, ConfigurationError, HandlerOutcome
from nbkit.notebook.session import Session
from nbkit.runtime.app import KEEP_EVENTS
from nbkit.runtime.events import EventHistory, SettlementEvent
from nbkit.tabular.events import events_frame

from .helpers import START, drain, settle_all


def test_default_history_is_bounded(rig):
    r = rig()
    r.sub()(lambda d: HandlerOutcome.ack())
    app = r.start()
    assert app.keep_events == KEEP_EVENTS and app.events.maxlen == KEEP_EVENTS


def test_only_the_latest_events_are_kept_and_all_are_counted(rig):
    r = rig()
    r.sub()(lambda d: HandlerOutcome.ack())
    app = r.start(keep_events=3)
    for i in range(10):
        r.inject(f"m{i}")
    events = drain(app)
    assert len(events) == 10 and app.settled == 10
    assert list(app.events) == events[-3:]
    assert len(events_frame(app.events)) == 3


def test_delayed_copies_update_kept_events_and_survive_evicted_ones(rig):
    """A copy whose event left the history is still published, and fire_due returns its new event."""
    r = rig(loop=True)
    r.sub(max_attempts=2)(lambda d: HandlerOutcome.retry_after(5) if d.attempt == 1 else HandlerOutcome.ack())
    app = r.start(keep_events=2)
    for i in range(4):
        r.inject(f"m{i}")
    first = drain(app)
    assert [e.action for e in first] == ["delayed-copy"] * 4 and len(app.pending) == 4
    fired = app.fire_due(START + 5)
    assert [e.seq for e in fired] == [e.seq for e in first]
    assert all(e.written_at == START + 5 and e.copy_seq is not None for e in fired)
    assert list(app.events) == fired[-2:]  # the two kept events show their copies as written
    assert len(r.written(r.retry_key)) == 4  # every copy was published, evicted event or not
    rest = settle_all(app)
    assert [d.action for d in rest] == ["unsupported"] * 4
    assert app.settled == 8 and list(app.events) == rest[-2:]


def test_abandoned_copies_are_marked_where_still_kept(rig):
    r = rig()
    r.sub(max_attempts=3)(lambda d: HandlerOutcome.retry_after(60))
    app = r.start(keep_events=1)
    r.inject("a")
    r.inject("b")
    drain(app)
    assert app.crash() == 2
    [kept] = app.events
    assert kept.abandoned and kept.written_at is None


def test_keep_none_keeps_everything_and_can_be_changed(rig):
    r = rig()
    r.sub()(lambda d: HandlerOutcome.ack())
    app = r.start(keep_events=None)
    for i in range(5):
        r.inject(f"m{i}")
    drain(app)
    assert len(app.events) == 5
    app.keep_events = 2
    assert len(app.events) == 2 and app.settled == 5


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_bad_keep_events(rig, bad):
    r = rig()
    with pytest.raises(ConfigurationError, match="keep_events must be a whole number"):
        App(r.broker, keep_events=bad)


def test_a_session_keeps_every_event(rig):
    r = rig()
    r.sub()(lambda d: HandlerOutcome.ack())
    session = Session(App(r.broker, keep_events=1))
    assert session.app.keep_events is None
    session.reset()
    assert session.app.keep_events is None


def _held(seq: int) -> SettlementEvent:
    return SettlementEvent(0.0, "file", "s", "jobs", 0, seq, 1, "retry_after", "delayed-copy", 5.0, "jobs", 5.0)


def test_a_delayed_copy_is_recorded_by_name_on_its_settlement():
    """copy_written, copy_lost and copy_abandoned update the settlement they are given, kept or not."""
    history = EventHistory(keep=2)
    held = [_held(seq) for seq in range(3)]
    numbers = [history.append(event) for event in held]
    assert numbers == [0, 1, 2]
    written = history.copy_written(2, held[2], 6.0, 9)
    assert (written.written_at, written.copy_seq, written.error, written.abandoned) == (6.0, 9, None, False)
    lost = history.copy_lost(1, held[1], "copy lost: disk full")
    assert (lost.error, lost.written_at, lost.copy_seq) == ("copy lost: disk full", None, None)
    assert list(history.events) == [lost, written]
    gone = history.copy_abandoned(0, held[0], 7.5)  # no longer kept: returned, not stored
    assert (gone.abandoned, gone.lost_at, gone.seq) == (True, 7.5, 0)
    assert list(history.events) == [lost, written] and history.settled == 3
