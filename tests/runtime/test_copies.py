"""Retry and dead-letter copies on both transports: the cap decision (§1.5), the upstream test
scenarios, what a copy carries (§2), and delayed copies on the virtual clock."""

from __future__ import annotations

import logging

import pytest

from nbkit import HandlerOutcome

from .helpers import ACK_TEXT, RETRY, SEQ, START, dispatch_records, drain, records, settle_all

EXHAUSTED_DLQ = "retry attempts exhausted; publishing the delivery to the dead-letter destination"
EXHAUSTED_REJECT = "retry attempts exhausted and no dead-letter destination is declared; rejecting the delivery"
ACK_FAILED = "ack / nack failed"


def _recorder(outcome):
    seen = []

    def handler(d):
        seen.append(d)
        return outcome(d) if callable(outcome) else outcome

    return seen, handler


# ---------------------------------------------------------------- upstream scenarios (§1.5)


def test_cap_three_with_dead_letter_and_always_retry_after(rig, caplog, clock):
    """max_attempts=3 + dead_letter: the handler sees the header absent, "1", "2"; the dead-letter
    copy carries "3", is written at once (the delay ignored), and nothing more is published."""
    r = rig(loop=True, key="parcels")
    seen, handler = _recorder(HandlerOutcome.retry_after(5))
    r.sub(max_attempts=3, dead_letter="parcels.dead")(handler)
    app = r.start()
    r.inject(b'{"parcel":7}')
    with caplog.at_level(logging.INFO, logger="nbkit"):
        events = settle_all(app)
    assert [d.headers.get(RETRY) for d in seen] == [None, "1", "2"]
    assert [d.attempt for d in seen] == [1, 2, 3]
    assert [d.payload for d in seen] == [b'{"parcel":7}'] * 3
    assert [(e.action, e.time) for e in events] == [
        ("delayed-copy", START),
        ("delayed-copy", START + 5),
        ("dead-letter", START + 10),
    ]
    assert events[2].delay == 0.0 and events[2].written_at == START + 10
    assert [(h[RETRY], p) for h, p in r.written("parcels")] == [
        ("1", b'{"parcel":7}'),
        ("2", b'{"parcel":7}'),
    ]
    assert [(h[RETRY], p) for h, p in r.written("parcels.dead")] == [("3", b'{"parcel":7}')]
    # nothing more: no copy pending, nothing delivered, nothing else written
    assert app.pending == []
    assert app.step() is None
    assert len(r.all_written()) == 3
    [warn] = dispatch_records(caplog, EXHAUSTED_DLQ)
    assert warn.levelno == logging.WARNING
    assert warn.nbkit_fields == {"subscription": "parcels", "attempt": 3, "dead_letter": "parcels.dead"}
    assert dispatch_records(caplog, ACK_FAILED) == []


def test_cap_two_without_dead_letter_runs_twice_and_writes_one_copy(rig, caplog):
    r = rig(loop=True, key="parcels")
    seen, handler = _recorder(HandlerOutcome.retry_after(1))
    r.sub(max_attempts=2)(handler)
    app = r.start()
    r.inject(b"p")
    with caplog.at_level(logging.INFO, logger="nbkit"):
        events = settle_all(app)
    assert [d.attempt for d in seen] == [1, 2]
    assert [e.action for e in events] == ["delayed-copy", "rejected"]
    assert events[1].destination is None
    # the stream key holds the injected message plus exactly one copy
    if r.transport == "file":
        keys = [(rec.key, rec.headers.get(RETRY)) for rec in records(r.path) if rec.key != "ruststream-internal"]
        assert keys == [("parcels", None), ("parcels", "1")]
    assert [h[RETRY] for h, _ in r.written("parcels")] == ["1"]
    assert len(r.all_written()) == 1
    [reject] = dispatch_records(caplog, EXHAUSTED_REJECT)
    assert reject.levelno == logging.ERROR  # upstream: WARN; a loss is an ERROR in nbkit (--log-level ERROR shows it)
    assert reject.nbkit_fields == {"subscription": "parcels", "attempt": 2}
    # Reject: the ERROR, then nack(false) fails with Unsupported -> a WARN
    logged = [(rec.levelno, rec.nbkit_text) for rec in dispatch_records(caplog) if rec.levelno >= logging.WARNING]
    assert logged == [(logging.ERROR, EXHAUSTED_REJECT), (logging.WARNING, ACK_FAILED)]
    assert str(dispatch_records(caplog, ACK_FAILED)[0].nbkit_fields["error"]) == ACK_TEXT


def test_no_declaration_circulates_forever(rig):
    r = rig(loop=True)
    seen, handler = _recorder(HandlerOutcome.retry_after(2))
    r.sub()(handler)
    app = r.start()
    r.inject(b"again")
    rounds = 30
    for _ in range(rounds):
        assert app.step() is not None
        assert len(app.pending) == 1  # always exactly one copy in flight
        app.fire_due(app.next_due())
    assert [d.attempt for d in seen] == list(range(1, rounds + 1))
    assert [h[RETRY] for h, _ in r.written(r.key)] == [str(n) for n in range(1, rounds + 1)]
    assert {e.action for e in app.events} == {"delayed-copy"}


def test_dead_letter_without_a_cap_sends_every_retry_there(rig, caplog):
    r = rig(loop=True)
    seen, handler = _recorder(lambda d: HandlerOutcome.retry() if d.payload == b"a" else HandlerOutcome.retry_after(60))
    r.sub(dead_letter="jobs.dead")(handler)
    app = r.start()
    r.inject(b"a")
    r.inject(b"b")
    with caplog.at_level(logging.INFO, logger="nbkit"):
        events = drain(app)
    assert [(e.outcome, e.action, e.destination, e.delay) for e in events] == [
        ("retry", "dead-letter", "jobs.dead", 0.0),
        ("retry_after", "dead-letter", "jobs.dead", 0.0),
    ]
    assert app.pending == []  # the delay is not applied
    assert [(h[RETRY], p) for h, p in r.written("jobs.dead")] == [("1", b"a"), ("1", b"b")]
    assert r.written(r.key) == []
    assert dispatch_records(caplog, EXHAUSTED_DLQ) == []  # not "at cap": no exhausted warning
    assert [d.attempt for d in seen] == [1, 1]


def test_reject_writes_nothing(rig, caplog):
    r = rig()
    r.sub(max_attempts=1)(lambda d: HandlerOutcome.retry())
    app = r.start()
    r.inject(b"x")
    with caplog.at_level(logging.INFO, logger="nbkit"):
        ev = app.step()
    assert (ev.action, ev.destination, ev.written_at, ev.copy_seq) == ("rejected", None, None, None)
    assert r.all_written() == []
    assert [rec.nbkit_text for rec in dispatch_records(caplog) if rec.levelno >= logging.WARNING] == [
        EXHAUSTED_REJECT,
        ACK_FAILED,
    ]
    assert app.counts.rejected == 1


def test_incoming_retry_counts_are_honoured(rig):
    """The cap reads the counter header of the delivery: "2" is attempt 3; junk reads as 0."""
    r = rig(loop=True)
    seen, handler = _recorder(HandlerOutcome.retry())
    r.sub(max_attempts=3, dead_letter="jobs.dead")(handler)
    app = r.start()
    r.inject(b"two", {RETRY: "2"})
    r.inject(b"junk", {RETRY: "x1"})
    events = drain(app)
    assert [(d.payload, d.attempt) for d in seen] == [(b"two", 3), (b"junk", 1), (b"junk", 2), (b"junk", 3)]
    assert [e.action for e in events] == ["dead-letter", "copy", "copy", "dead-letter"]
    assert [(h[RETRY], p) for h, p in r.written("jobs.dead")] == [("3", b"two"), ("3", b"junk")]


TOP = str(2**64 - 1)  # u64::MAX, the largest count the header can carry


def test_a_retry_count_at_the_top_of_its_range_saturates_instead_of_wrapping(rig):
    """A copy of a delivery at count u64::MAX carries u64::MAX again: it stays past any cap (here: dead
    letter at once) and, uncapped, at the top; it never wraps to a count that reads back as attempt 1."""
    r = rig(loop=True)
    seen, handler = _recorder(HandlerOutcome.retry())
    r.sub(max_attempts=3, dead_letter="jobs.dead")(handler)
    app = r.start()
    r.inject(b"top", {RETRY: TOP})
    drain(app)
    assert [d.attempt for d in seen] == [2**64]
    assert [(h[RETRY], p) for h, p in r.written("jobs.dead")] == [(TOP, b"top")]


def test_an_uncapped_copy_at_the_top_stays_at_the_top(rig):
    r = rig(loop=True)
    seen, handler = _recorder(lambda d: HandlerOutcome.retry_after(0) if len(seen) < 3 else None)
    r.sub()(handler)
    app = r.start()
    r.inject(b"top", {RETRY: TOP})
    drain(app)
    assert [d.headers[RETRY] for d in seen] == [TOP, TOP, TOP]
    assert [d.attempt for d in seen] == [2**64] * 3


# ---------------------------------------------------------------- what a copy carries (§2)


@pytest.mark.parametrize(
    "payload",
    [b"plain text", b"\x00\xff\x80binary\r\n\x01", b"multi\nline", b"  padded  ", b"rs1:look-alike", b""],
    ids=["text", "binary", "multiline", "padded", "lookalike", "empty"],
)
def test_copy_payload_is_unchanged_and_headers_are_cloned_plus_count(rig, payload):
    r = rig()
    seen, handler = _recorder(HandlerOutcome.retry())
    r.sub(max_attempts=5)(handler)
    app = r.start()
    r.inject(payload, {"tenant": "acme", "Trace-ID": "t-1"})
    ev = app.step()
    [d] = seen
    assert d.payload == payload
    assert d.headers == {"tenant": "acme", "trace-id": "t-1", SEQ: str(d.seq)}
    [(headers, copy_payload)] = r.written(r.retry_key)
    assert copy_payload == payload
    # a clone of the delivered headers (the ORIGINAL sequence travels inside), plus the count;
    # nothing else: no error text, no reason, no timestamp header
    assert headers == {"tenant": "acme", "trace-id": "t-1", SEQ: str(d.seq), RETRY: "1"}
    assert ev.action == "copy"


def test_copy_of_a_verbatim_original_is_always_enveloped_rs1(rig):
    r = rig()
    r.sub(max_attempts=2)(lambda d: HandlerOutcome.retry())
    app = r.start()
    r.inject(b"verbatim")
    app.step()
    [copy] = r.all_written()
    if r.transport == "file":
        original = [rec for rec in records(r.path, "jobs") if rec.seq in r.injected]
        assert [rec.raw for rec in original] == [b"verbatim"]  # the original is stored verbatim
        assert copy.raw.startswith(b"rs1:")
    else:
        assert copy.enveloped and copy.text.startswith("rs1:")
    assert copy.payload == b"verbatim"


def test_the_sequence_header_is_the_original_inside_and_the_copy_own_when_read_back(rig):
    r = rig(loop=True)
    seen, handler = _recorder(lambda d: HandlerOutcome.retry() if d.attempt < 3 else None)
    r.sub(max_attempts=5)(handler)
    app = r.start()
    r.inject(b"x")
    r.inject(b"y")
    drain(app)
    by_payload = [(d.payload, d.seq, d.headers[SEQ], d.attempt) for d in seen]
    # every delivery carries its OWN sequence in stream-sequence
    assert all(str(seq) == header for _, seq, header, _ in by_payload)
    # each copy's envelope carries the sequence of the delivery it was made from
    written = r.written(r.key)
    for (headers, payload), source in zip(written, [d for d in seen if d.attempt < 3], strict=True):
        assert (payload, headers[SEQ], headers[RETRY]) == (
            source.payload,
            str(source.seq),
            str(source.attempt),
        )
    # and reading a copy back gives it the copy's own sequence, not the one inside
    copies_seen = [d for d in seen if d.attempt > 1]
    assert len(copies_seen) == 4
    assert len({d.seq for d in seen}) == len(seen)


def test_dead_letter_copy_is_the_delivery_as_it_arrived_plus_one(rig):
    r = rig()
    r.sub(max_attempts=4, dead_letter="jobs.dead")(lambda d: HandlerOutcome.retry_after(9))
    app = r.start()
    r.inject(b"\x00bin", {RETRY: "3", "k": "v"})
    ev = app.step()
    assert (ev.attempt, ev.action, ev.destination) == (4, "dead-letter", "jobs.dead")
    [(headers, payload)] = r.written("jobs.dead")
    assert payload == b"\x00bin"
    assert headers == {"k": "v", RETRY: "4", SEQ: str(ev.seq)}
    assert app.pending == []


# ---------------------------------------------------------------- delayed copies, virtual clock


def test_delayed_copies_fire_in_due_order(rig, clock):
    r = rig()
    delays = {b"thirty": 30, b"ten": 10, b"twenty": 20, b"ten-again": 10}
    r.sub()(lambda d: HandlerOutcome.retry_after(delays[d.payload]))
    app = r.start()
    for p in delays:
        r.inject(p)
    assert len(drain(app)) == 4
    assert [p.due - START for p in app.pending] == [10, 10, 20, 30]
    assert app.next_due() == START + 10
    assert r.written(r.retry_key) == []
    fired = app.fire_due(START + 20)
    assert clock.now() == START + 20
    assert [e.written_at - START for e in fired] == [10, 10, 20]
    assert [p for _, p in r.written(r.retry_key)] == [b"ten", b"ten-again", b"twenty"]
    assert app.next_due() == START + 30
    app.fire_due(START + 100)
    assert [p for _, p in r.written(r.retry_key)] == [b"ten", b"ten-again", b"twenty", b"thirty"]
    assert app.pending == [] and app.next_due() is None
    if r.transport == "file":
        stamps = [rec.ts_ms // 1000 - int(START) for rec in records(r.path, "jobs") if rec.seq not in r.injected]
        assert stamps == [10, 10, 20, 30]  # each copy is written at its due time
    else:
        assert [ln.ts for ln in r.all_written()] == [
            "2024-01-01T00:00:10",
            "2024-01-01T00:00:10",
            "2024-01-01T00:00:20",
            "2024-01-01T00:00:30",
        ]


def test_step_fires_copies_that_are_due_on_the_clock(rig, clock):
    r = rig(loop=True)
    seen, handler = _recorder(lambda d: HandlerOutcome.retry_after(4) if d.attempt == 1 else None)
    r.sub()(handler)
    app = r.start()
    r.inject(b"m")
    app.step()
    assert app.step() is None
    clock.advance(3.9)
    assert app.step() is None
    clock.advance(0.1)
    ev = app.step()  # publishes the due copy, then delivers it
    assert (ev.attempt, ev.outcome, ev.time) == (2, "ack", START + 4)
    assert [d.attempt for d in seen] == [1, 2]


def test_copy_publish_failure_is_logged_and_the_message_lost(rig, caplog):
    r = rig()
    r.sub()(lambda d: HandlerOutcome.retry_after(5))
    app = r.start()
    r.inject(b"m")
    app.step()
    r.broker.shutdown()  # the transport goes away before the timer fires
    with caplog.at_level(logging.WARNING, logger="nbkit"):
        [ev] = app.fire_due(START + 5)
    assert ev.error == "copy lost: stream transport is not connected"
    assert (ev.written_at, ev.copy_seq) == (None, None)
    [warn] = dispatch_records(caplog, "publishing the retry copy failed; message lost")
    assert warn.name == "nbkit.dispatch" and warn.levelno == logging.ERROR  # upstream: WARN
    assert app.counts.copies_lost == 1
    assert warn.nbkit_fields["subscription"] == "jobs"
    assert warn.nbkit_fields["destination"] == r.retry_key
    assert str(warn.nbkit_fields["error"]) == "stream transport is not connected"
