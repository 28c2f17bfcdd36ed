"""Every row of runtime-semantics §1.2, end to end on both transports, plus the outcome value type.

Rows with ``Result<..>`` have no Python analogue: a handler returns ``None`` or a ``HandlerOutcome``,
and an exception plays the part of ``Err`` (it drops).
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from nbkit import AckError, HandlerOutcome
from nbkit.runtime.outcome import as_outcome

from .helpers import ACK_TEXT, RETRY, START, dispatch_records

ACK_FAILED = "ack / nack failed"

# ---------------------------------------------------------------- the value type


def test_constructors_and_predicates():
    ack, drop, retry, later = (
        HandlerOutcome.ack(),
        HandlerOutcome.drop(),
        HandlerOutcome.retry(),
        HandlerOutcome.retry_after(2.5),
    )
    assert (ack.kind, drop.kind, retry.kind, later.kind) == ("ack", "drop", "retry", "retry_after")
    assert [o.is_ack for o in (ack, drop, retry, later)] == [True, False, False, False]
    assert [o.is_drop for o in (ack, drop, retry, later)] == [False, True, False, False]
    assert [o.is_retry for o in (ack, drop, retry, later)] == [False, False, True, True]
    assert (ack.delay, retry.delay, later.delay) == (None, None, 2.5)
    assert [repr(o) for o in (ack, drop, retry, later)] == [
        "HandlerOutcome.ack()",
        "HandlerOutcome.drop()",
        "HandlerOutcome.retry()",
        "HandlerOutcome.retry_after(2.5)",
    ]


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [(0, 0.0), (3, 3.0), (0.25, 0.25), (dt.timedelta(minutes=2), 120.0), (dt.timedelta(0), 0.0)],
)
def test_retry_after_takes_seconds_or_timedelta(delay, seconds):
    outcome = HandlerOutcome.retry_after(delay)
    assert outcome.delay == seconds
    assert isinstance(outcome.delay, float)


@pytest.mark.parametrize(
    ("delay", "error"),
    [
        (-1, ValueError),
        (float("nan"), ValueError),
        (dt.timedelta(seconds=-1), ValueError),
        ("5", TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_retry_after_refuses_bad_delays(delay, error):
    with pytest.raises(error):
        HandlerOutcome.retry_after(delay)


def test_outcomes_are_frozen_values():
    assert HandlerOutcome.retry_after(1) == HandlerOutcome.retry_after(1.0)
    assert HandlerOutcome.retry_after(1) != HandlerOutcome.retry_after(2)
    with pytest.raises(AttributeError):
        HandlerOutcome.ack().kind = "drop"  # type: ignore[misc]


def test_as_outcome():
    assert as_outcome(None) == HandlerOutcome.ack()
    assert as_outcome(HandlerOutcome.drop()) == HandlerOutcome.drop()
    with pytest.raises(TypeError, match="returns None or a HandlerOutcome, not int"):
        as_outcome(5)


# ---------------------------------------------------------------- §1.2 rows, both transports


def _run_one(rig, handler, caplog, **options):
    r = rig()
    r.sub(**options)(handler)
    app = r.start()
    r.inject(b"payload-1")
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        ev = app.step()
    assert ev is not None
    return r, app, ev


def _ack_failed(caplog, level: int = logging.WARNING) -> list:
    recs = dispatch_records(caplog, ACK_FAILED)
    for rec in recs:
        assert rec.name == "nbkit.dispatch"
        assert rec.levelno == level
        assert rec.nbkit_fields["subscription"] == "jobs"
        assert str(rec.nbkit_fields["error"]) == ACK_TEXT
        assert f'error="{ACK_TEXT}"' in rec.getMessage()
    return recs


@pytest.mark.parametrize(
    ("result", "kind"),
    [(HandlerOutcome.ack(), "ack"), (None, "ack"), (HandlerOutcome.drop(), "drop")],
    ids=["ack", "none", "drop"],
)
def test_ack_drop_and_none_log_unsupported_and_write_nothing(rig, caplog, result, kind, transport):
    r, app, ev = _run_one(rig, lambda d: result, caplog)
    assert (ev.transport, ev.outcome, ev.action, ev.destination, ev.delay, ev.error) == (
        transport,
        kind,
        "unsupported",
        None,
        None,
        None,
    )
    assert len(_ack_failed(caplog)) == 1
    assert r.all_written() == []
    assert app.pending == []
    assert app.step() is None  # nothing redelivered


def test_drop_never_goes_to_the_dead_letter_key(rig, caplog):
    r, app, ev = _run_one(rig, lambda d: HandlerOutcome.drop(), caplog, max_attempts=1, dead_letter="jobs.dead")
    assert (ev.outcome, ev.action, ev.destination) == ("drop", "unsupported", None)
    assert r.written("jobs.dead") == []
    assert r.all_written() == []
    assert len(_ack_failed(caplog)) == 1


def test_retry_without_a_declaration_is_not_redelivered(rig, caplog):
    calls = []
    r, app, ev = _run_one(rig, lambda d: calls.append(d.attempt) or HandlerOutcome.retry(), caplog)
    assert (ev.outcome, ev.action, ev.destination) == ("retry", "unsupported", None)
    # upstream's ack / nack text, but at ERROR (the message is lost) and saying which outcome it was
    [rec] = _ack_failed(caplog, logging.ERROR)
    assert rec.nbkit_fields["outcome"] == "retry"
    assert "outcome=retry" in rec.getMessage() and "requeues nothing" in rec.getMessage()
    assert app.counts.requeued_nothing == 1
    assert app.step() is None
    assert app.fire_due(START + 10**6) == []
    assert app.step() is None
    assert calls == [1]
    assert r.all_written() == []


@pytest.mark.parametrize("options", [{"max_attempts": 3}, {"max_attempts": 5, "dead_letter": "jobs.dead"}])
def test_retry_with_a_declaration_publishes_a_copy_at_once(rig, caplog, options):
    r, app, ev = _run_one(rig, lambda d: HandlerOutcome.retry(), caplog, **options)
    assert (ev.outcome, ev.action, ev.destination, ev.delay) == ("retry", "copy", r.retry_key, 0.0)
    assert ev.written_at == START
    copies = r.written(r.retry_key)
    assert [(h[RETRY], p) for h, p in copies] == [("1", b"payload-1")]
    assert ev.copy_seq is not None
    assert app.pending == []
    assert _ack_failed(caplog) == []  # publish_copy accepts Unsupported silently


def test_retry_after_publishes_the_copy_after_the_delay(rig, caplog, clock):
    r, app, ev = _run_one(rig, lambda d: HandlerOutcome.retry_after(dt.timedelta(seconds=90)), caplog)
    assert (ev.outcome, ev.action, ev.destination, ev.delay, ev.due) == (
        "retry_after",
        "delayed-copy",
        r.retry_key,
        90.0,
        START + 90,
    )
    assert ev.written_at is None
    assert r.written(r.retry_key) == []
    assert [p.due for p in app.pending] == [START + 90]
    assert app.fire_due(START + 89.999) == []
    assert r.written(r.retry_key) == []
    assert [e.seq for e in app.fire_due(START + 90)] == [ev.seq]
    assert clock.now() == START + 90
    assert [(h[RETRY], p) for h, p in r.written(r.retry_key)] == [("1", b"payload-1")]
    done = app.events[0]
    assert (done.written_at, done.action, done.abandoned) == (START + 90, "delayed-copy", False)
    assert done.copy_seq is not None
    assert _ack_failed(caplog) == []


def test_retry_after_zero_publishes_on_the_dispatch_path(rig, caplog):
    r, app, ev = _run_one(rig, lambda d: HandlerOutcome.retry_after(0), caplog, max_attempts=4)
    assert (ev.outcome, ev.action, ev.delay, ev.due, ev.written_at) == (
        "retry_after",
        "copy",
        0.0,
        None,
        START,
    )
    assert app.pending == []
    assert [(h[RETRY], p) for h, p in r.written(r.retry_key)] == [("1", b"payload-1")]
    assert _ack_failed(caplog) == []


def test_an_exception_drops_and_logs_the_traceback(rig, caplog):
    def handler(d):
        raise ValueError("boom")

    r, app, ev = _run_one(rig, handler, caplog, max_attempts=3, dead_letter="jobs.dead")
    assert (ev.outcome, ev.action, ev.error, ev.destination) == (
        "drop",
        "unsupported",
        "ValueError: boom",
        None,
    )
    failed = [rec for rec in caplog.records if rec.levelno == logging.ERROR and rec.name == "nbkit.dispatch"]
    assert len(failed) == 1
    assert failed[0].exc_info is not None and failed[0].exc_info[0] is ValueError
    assert "subscription=jobs" in failed[0].getMessage()
    assert "Traceback (most recent call last)" in caplog.text
    assert 'raise ValueError("boom")' in caplog.text
    assert len(_ack_failed(caplog)) == 1  # the drop's nack(false) is unsupported too
    assert r.all_written() == []


def test_a_non_outcome_return_value_drops(rig, caplog):
    r, app, ev = _run_one(rig, lambda d: "done", caplog)
    assert (ev.outcome, ev.action) == ("drop", "unsupported")
    assert ev.error.startswith("TypeError: a handler returns None or a HandlerOutcome, not str")
    [failed] = [rec for rec in caplog.records if rec.levelno == logging.ERROR]
    assert (failed.name, failed.nbkit_fields["subscription"]) == ("nbkit.dispatch", "jobs")
    assert r.all_written() == []


def test_delivery_ack_and_nack_raise_unsupported(rig):
    seen = []

    def handler(d):
        for call in (d.ack, d.nack, lambda: d.nack(True)):
            with pytest.raises(AckError) as info:
                call()
            seen.append((info.value.kind, str(info.value)))

    r = rig()
    r.sub()(handler)
    app = r.start()
    r.inject("x")
    assert app.step().outcome == "ack"
    assert seen == [("unsupported", ACK_TEXT)] * 3


def test_ack_error_kinds():
    assert str(AckError()) == ACK_TEXT
    assert str(AckError("rejected")) == "broker rejected the acknowledgement"
    assert str(AckError("timeout")) == "acknowledgement timed out"
    with pytest.raises(ValueError):
        AckError("nope")


@pytest.mark.parametrize("delay", [float("inf"), 1e12, dt.timedelta(days=10**7)])
def test_retry_after_refuses_delays_no_timestamp_can_hold(delay):
    with pytest.raises(ValueError, match="at most 1e\\+11 s"):
        HandlerOutcome.retry_after(delay)


def test_retry_after_accepts_the_longest_delay():
    from nbkit.runtime.outcome import MAX_DELAY_SECONDS

    assert HandlerOutcome.retry_after(MAX_DELAY_SECONDS).delay == MAX_DELAY_SECONDS


# ---------------------------------------------------------------- the constructor checks what it is given


def test_an_unknown_kind_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="unknown outcome kind 'retyr'.*'ack', 'drop', 'retry', 'retry_after'"):
        HandlerOutcome("retyr")


@pytest.mark.parametrize(
    ("kind", "delay", "message"),
    [
        ("retry_after", None, "needs a delay"),
        ("retry_after", -1, "zero or positive"),
        ("retry_after", float("inf"), "too long"),
        ("ack", 5, "only retry_after takes a delay"),
        ("retry", 0.0, "only retry_after takes a delay"),
    ],
)
def test_a_delay_is_checked_by_the_constructor(kind, delay, message):
    with pytest.raises(ValueError, match=message):
        HandlerOutcome(kind, delay)


def test_the_constructor_makes_what_the_class_methods_make():
    assert HandlerOutcome("ack") == HandlerOutcome.ack()
    assert HandlerOutcome("retry_after", 2) == HandlerOutcome.retry_after(2)
    assert HandlerOutcome("retry_after", 2).delay == 2.0 and isinstance(HandlerOutcome("retry_after", 2).delay, float)
    assert HandlerOutcome.retry_after(dt.timedelta(minutes=1)).delay == 60.0
