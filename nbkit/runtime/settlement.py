"""Settlement: one object per subscription turns a delivery and its handler's result into what the runtime does.

:class:`Settlement` is where every way of taking a delivery ends (``App.step``, ``App.astep`` and the
burst of ready deliveries ``App.run`` settles, :meth:`Settlement.burst`, on a file or a pipe). It calls the
handler (:meth:`Settlement.handle`, the one place a handler is called). From the handler's result it
works out the outcome (a raise or a wrong return drops, and is logged), asks the pure rule
(:func:`~nbkit.runtime.settle.decide`, cached per outcome) for the action and the copy's destination,
writes the copy now or hands it to :class:`~nbkit.runtime.delayed.DelayedCopies`, logs the settlement's
lines, and records it: :meth:`Settlement.record` makes the one
:class:`~nbkit.runtime.events.SettlementEvent`, adds it to the app's history and saves the checkpoint.

The burst is the same settlement written tightly for the commonest cases, a first attempt whose outcome
writes no copy and logs nothing but the ``ack / nack failed`` WARNING (a file or pipe service's every
ack), and a first attempt whose copy is written now and logs nothing (a pipe stage's ``retry_after(0)``):
that line is written by the settlement's :class:`~nbkit.runtime.run_log.AckLog`, that copy by the broker's
:meth:`~nbkit.runtime.broker.Broker.write_copy` at the settlement's time, both as :meth:`~Settlement.settle`
writes them, and the event is made by the same :meth:`~Settlement.record`. Anything else goes to
:meth:`~Settlement.settle`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import partial
from typing import Any, Protocol

from nbkit.errors import NbkitError
from nbkit.runtime import logs
from nbkit.runtime.broker import Subscription
from nbkit.runtime.clock import Clock
from nbkit.runtime.delayed import DelayedCopies, copy_lost
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import EventHistory, SettlementEvent, new_record
from nbkit.runtime.outcome import HandlerOutcome, OutcomeKind, as_outcome
from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.runtime.run_log import AckLog
from nbkit.runtime.run_summary import RunCounts
from nbkit.runtime.settle import Action, Decision, decide
from nbkit.runtime.stopping import Stop
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire.envelope import RETRY_COUNT_HEADER, copy_retry_count, retry_count

__all__ = ["Driver", "Settlement", "poll"]

_COUNT_TEXTS = [str(n) for n in range(64)]  # str(attempt) of the usual attempts, made once
_MAX_DECISIONS = 64  # a few (outcome, delay) pairs per handler; the cache is bounded anyway
# the actions a settlement tests for, read once: on Python 3.11 ``Action.COPY`` goes through the enum
# metaclass's __getattr__ hook (about ten times a module global's cost), and settle() tests two or three a delivery
_UNSUPPORTED, _REJECTED = Action.UNSUPPORTED, Action.REJECTED
_DELAYED_COPY, _DEAD_LETTER = Action.DELAYED_COPY, Action.DEAD_LETTER


class Driver(Protocol):
    """What :meth:`Settlement.burst` asks of what takes the deliveries (an app's
    :class:`~nbkit.runtime.intake.Intake`), delivery by delivery."""

    last_delivery: Delivery | None
    #: the app's stop state: the burst ends when a stop is requested
    stop: Stop

    @property
    def held(self) -> object | None:
        """A delivery held for ``astep`` (not None: the burst ends)."""
        ...

    def complete(self, sub: Subscription, delivery: Delivery, result: Any) -> SettlementEvent:
        """Settle a delivery whose handler's result may still be awaitable."""
        ...


class Settlement:
    """Settles one subscription's deliveries: the action, the copy, the log lines, the event and the checkpoint.

    Parameters
    ----------
    sub : Subscription
        The subscription whose deliveries this settles.
    clock : Clock
        The app's clock (the time of each event).
    counts : RunCounts
        The run's counts.
    history : EventHistory
        The app's settlement events, where each event is recorded.
    delayed : DelayedCopies
        The app's delayed copies, where a delayed copy is held.
    """

    __slots__ = (
        "sub",
        "broker",
        "registration",
        "name",
        "transport",
        "checkpointer",
        "clock",
        "counts",
        "history",
        "delayed",
        "handler",
        "ack_log",
        "_decisions",
    )

    def __init__(
        self, sub: Subscription, clock: Clock, counts: RunCounts, history: EventHistory, delayed: DelayedCopies
    ) -> None:
        self.sub = sub
        self.broker = sub.broker
        self.registration = sub.registration  # frozen: its handler, name and declaration stay
        self.name = sub.registration.name
        self.transport = sub.broker.transport
        self.checkpointer = sub.checkpointer
        self.clock = clock
        self.counts = counts
        self.history = history
        self.delayed = delayed
        self.handler = sub.registration.handler
        #: how this subscription's ``ack / nack failed`` WARNING is written
        self.ack_log = AckLog(self.name)
        # per (outcome, delay, at the cap): the decision and its copy's key (None: no copy)
        self._decisions: dict[tuple[OutcomeKind, float | None, bool], tuple[Decision, str | None]] = {}

    def decision(self, kind: OutcomeKind, delay: float | None, attempt: int) -> tuple[Decision, str | None]:
        """:func:`~nbkit.runtime.settle.decide` for this subscription, and the key its copy goes to (None: no copy).

        Kept per (outcome, delay, at the cap): a subscription's declaration, transport and destinations never
        change, and a Decision is immutable.
        """
        decl = self.registration.declaration
        key = (kind, delay, decl.max_attempts is not None and attempt >= decl.max_attempts)
        found = self._decisions.get(key)
        if found is None:
            decision = decide(kind, delay, attempt, decl, self.transport)
            if decision.destination == "retry":
                destination: str | None = self.broker.retry_destination(self.registration)
            elif decision.destination == "dead_letter":
                destination = decl.dead_letter
            else:
                destination = None
            found = (decision, destination)
            if len(self._decisions) < _MAX_DECISIONS:
                self._decisions[key] = found
        return found

    def handle(self, driver: Driver, delivery: Delivery) -> Any:
        """Hand ``delivery`` to the subscription's handler, noting it as ``driver.last_delivery``: the handler's
        result (maybe awaitable), or the exception it raised. The one place a handler is called: ``App.step``,
        ``App.astep``, the burst and the pipe all come here."""
        driver.last_delivery = delivery
        try:
            return self.handler(delivery)
        except Exception as exc:  # a failing handler drops the delivery, like an Err from Rust
            return exc

    def settle(
        self, delivery: Delivery, result: Any, decided: tuple[Decision, str | None] | None = None
    ) -> SettlementEvent:
        """Apply the handler's result (None, a HandlerOutcome or an exception) to the delivery; record the event.

        The copy a decision writes now is published here, before the event is made (the event says where
        it went, or why it was lost); a delayed copy is held by :class:`~nbkit.runtime.delayed.DelayedCopies`.
        ``decided``: what :meth:`decision` gives for this result's outcome and the delivery's attempt, when the
        caller has it already (the burst).
        """
        if type(result) is HandlerOutcome:
            outcome, error = result, None
        else:
            outcome, error = self._outcome(delivery, result)
        headers = delivery.headers
        attempt = 1 if RETRY_COUNT_HEADER not in headers else retry_count(headers) + 1  # delivery.attempt
        kind = outcome.kind
        decision, destination = self.decision(kind, outcome.delay, attempt) if decided is None else decided
        action = decision.action
        now = self.clock.now()
        name = self.name
        counts = self.counts
        outcomes = counts.outcomes
        outcomes[kind] = outcomes.get(kind, 0) + 1
        due = written_at = copy_seq = None
        copy_headers = None
        if destination is None:  # unsupported, or rejected: nothing is written
            settled = self.settled_delivery(delivery, attempt)
            if action is _REJECTED:
                counts.rejected += 1
                logs.emit(  # a loss: ERROR (upstream: WARN), so --log-level ERROR shows it
                    logs.DISPATCH,
                    logging.ERROR,
                    logs.EXHAUSTED_REJECT,
                    delivery=settled,
                    subscription=name,
                    attempt=attempt,
                )
            if kind == "retry" and decision.unsupported_call == "nack(requeue=true)":
                counts.requeued_nothing += 1  # upstream's ack / nack text, at ERROR, saying the outcome
                logs.emit(
                    logs.DISPATCH,
                    logging.ERROR,
                    logs.ACK_FAILED,
                    delivery=settled,
                    subscription=name,
                    error=logs.UNSUPPORTED,
                    outcome="retry",
                    lost=logs.REQUEUE_NOTHING,
                )
            else:  # the ack / nack WARNING: the burst writes it as here, or hands the delivery here
                ack_log = self.ack_log
                if ack_log.logger.isEnabledFor(logging.WARNING) and not ack_log.write(
                    delivery.stream_key, delivery.seq, attempt, delivery.line
                ):
                    # something other than the run handler could see the record: made here, naming settle()
                    ack_log.logger.warning(ack_log.message, extra=ack_log.extra(settled))
        else:
            if action is _DEAD_LETTER and decision.at_cap:
                logs.emit(
                    logs.DISPATCH,
                    logging.WARNING,
                    logs.EXHAUSTED_DLQ,
                    delivery=self.settled_delivery(delivery, attempt),
                    subscription=name,
                    attempt=attempt,
                    dead_letter=destination,
                )
            copy_headers = dict(headers)
            # the retry count of the copy: this attempt's
            copy_headers[RETRY_COUNT_HEADER] = _COUNT_TEXTS[attempt] if attempt < 64 else str(copy_retry_count(attempt))
            if action is _DELAYED_COPY and decision.delay is not None:
                due = now + decision.delay
            else:  # written now, before the event is made: it records where the copy went (or why it was lost)
                copy_seq, written_at, lost = self.write_now(
                    delivery, attempt, destination, copy_headers, now, action is _DEAD_LETTER
                )
                if lost is not None:  # why the copy was lost takes the place of the handler's error
                    error = lost
        return self.record(
            delivery, now, attempt, kind, decision, destination, due, written_at, copy_seq, error, copy_headers
        )

    def write_now(
        self, delivery: Delivery, attempt: int, destination: str, copy_headers: dict[str, str], now: float, dead: bool
    ) -> tuple[int | None, float | None, str | None]:
        """Write a copy of ``delivery`` to ``destination`` now, through the broker at the settlement's time, and
        count it (``dead``: as a dead letter); returns its (seq, written_at, None), or (None, None, why it was
        lost). :meth:`settle` and the burst both write a copy that is not delayed here."""
        try:
            published = self.broker.write_copy(destination, delivery.payload, copy_headers, now)
        except NbkitError as exc:
            return (
                None,
                None,
                copy_lost(self.counts, self.broker, self.settled_delivery(delivery, attempt), destination, exc),
            )
        if dead:
            self.counts.dead_letters += 1
        else:
            self.counts.copies += 1
        return published.seq, published.time, None

    def record(
        self,
        delivery: Delivery,
        now: float,
        attempt: int,
        kind: OutcomeKind,
        decision: Decision,
        destination: str | None = None,
        due: float | None = None,
        written_at: float | None = None,
        copy_seq: int | None = None,
        error: str | None = None,
        copy_headers: dict[str, str] | None = None,
    ) -> SettlementEvent:
        """Make the settlement's event, hold its delayed copy (``due`` and ``copy_headers`` given), add the event
        to the history and save the checkpoint; returns the event. The one place an event is made: :meth:`settle`
        and the burst both end here."""
        stream_key = delivery.stream_key
        seq = delivery.seq
        # values in SettlementEvent's field order (tests/runtime/test_events.py pins the order)
        event = new_record(
            SettlementEvent,
            (
                now,  # time
                self.transport,
                self.name,  # subscription
                stream_key,
                delivery.shard_id,
                seq,
                attempt,
                kind,  # outcome
                decision.action_name,  # action
                decision.delay,  # delay
                destination,
                due,
                written_at,
                copy_seq,
                False,  # abandoned
                error,
                REDRIVEN_FROM_HEADER in delivery.headers,  # redriven
                None,  # lost_at
            ),
        )
        history = self.history
        held = False
        if due is not None and destination is not None and copy_headers is not None:
            held = True
            self.delayed.hold(
                due,
                self.broker,
                destination,
                delivery.payload,
                copy_headers,
                event,
                history.settled,
                attempt,
                self.checkpointer,
                delivery.line,
            )
        history.events.append(event)
        history.settled += 1
        checkpointer = self.checkpointer
        if checkpointer is not None:
            checkpointer.settled(stream_key, seq, copy_pending=held)
        return event

    def settled_delivery(self, delivery: Delivery, attempt: int) -> logs.SettledDelivery:
        """The delivery as this settlement's log records name it."""
        return new_record(logs.SettledDelivery, (self.name, delivery.stream_key, delivery.seq, attempt, delivery.line))

    def _outcome(self, delivery: Delivery, result: Any) -> tuple[HandlerOutcome, str | None]:
        """The outcome a handler's result stands for, and the error to record (a raise or a wrong return drops)."""
        if type(result) is HandlerOutcome:
            return result, None
        settled = self.settled_delivery(delivery, delivery.attempt)
        name = self.name
        if isinstance(result, BaseException) and self.broker.output_closed:
            # the handler's publish hit the closed pipe: the stage stops (no traceback: not the handler's fault)
            return HandlerOutcome.drop(), f"stopped: {result}"
        if isinstance(result, BaseException):
            self.counts.raised += 1
            logs.DISPATCH.error(
                "%s subscription=%s",
                logs.HANDLER_FAILED,
                name,
                exc_info=(type(result), result, result.__traceback__),
                extra={
                    "nbkit_text": logs.HANDLER_FAILED,
                    "nbkit_fields": {"subscription": name},
                    **logs.delivery_extra(settled),
                },
            )
            return HandlerOutcome.drop(), f"{type(result).__name__}: {result}"
        try:
            return as_outcome(result), None
        except TypeError as exc:
            logs.DISPATCH.error(
                "%s subscription=%s error=%s",
                logs.HANDLER_FAILED,
                name,
                exc,
                extra={
                    "nbkit_text": logs.HANDLER_FAILED,
                    "nbkit_fields": {"subscription": name, "error": exc},
                    **logs.delivery_extra(settled),
                },
            )
            return HandlerOutcome.drop(), f"TypeError: {exc}"

    def burst(self, driver: Driver) -> int:
        """Take and settle the deliveries ready now, one after another, while no stop is requested, no delayed
        copy is pending and no delivery is held: how many.

        Each delivery is what ``App.step`` would take next, handed to :meth:`handle` and settled as
        :meth:`settle` settles it. Those the reader has scanned already (:meth:`Subscription.ready`) skip the
        polling layers. A HandlerOutcome (or None) on a first attempt is settled here when its decision logs
        nothing but the ``ack / nack failed`` WARNING, written by :meth:`AckLog.write
        <nbkit.runtime.run_log.AckLog.write>` (as in :meth:`settle`), or writes its copy now and logs nothing
        (``retry_after(0)`` with ``out_retry``, or a dead letter before any cap): the copy is written by the
        broker's :meth:`~nbkit.runtime.broker.Broker.write_copy` at the settlement's time, as in :meth:`settle`.
        Either way the event is made by :meth:`record`. Anything else goes to :meth:`settle` (or, a result that
        may be awaitable, to ``driver.complete``).
        """
        sub = self.sub
        stop = driver.stop
        heap = self.delayed.heap  # (never replaced: a copy held during the burst is seen here)
        handle = self.handle
        record = self.record
        ack_line = self.ack_log.write
        warns = partial(self.ack_log.logger.isEnabledFor, logging.WARNING)  # asked per delivery, as settle() does
        write_now = self.write_now
        retry_header = RETRY_COUNT_HEADER
        first_count = _COUNT_TEXTS[1]  # a first attempt's copy: retry count 1
        ack = HandlerOutcome.ack()
        # what settling ``last`` records (its outcome and decision); ``quiet``: it writes no copy and logs
        # nothing but the ack / nack WARNING; ``copies``: it writes its copy now (to ``destination``) and logs
        # nothing; ``dead``: that copy is a dead letter
        last: HandlerOutcome | None = None
        kind: OutcomeKind = "ack"
        decision: Decision | None = None
        decided: tuple[Decision, str | None] | None = None  # decision() for ``last``
        destination: str | None = None
        quiet = copies = dead = False
        counts = self.counts
        quiet_n = 0  # settlements of ``kind`` made here, not yet added to counts.outcomes
        scans_ahead = sub.scans_ahead
        ready: Iterator[Delivery] = iter(())
        taken = 0
        try:  # (a stream error may end the loop: what was settled is still counted)
            # ``while True`` and a break, not ``while not (...)``: Python 3.11 specializes a function's bytecode
            # after a few calls or unconditional backward jumps, and this one is called once a burst; with the
            # test as the loop's condition it ran unspecialized for the whole burst (a generic look-up per name)
            while True:
                if stop.requested or heap or driver.held is not None or sub.ended:
                    break
                delivery = next(ready, None) if scans_ahead else None
                if delivery is None:
                    polled = poll(sub)
                    if polled is None or polled is NEED_MORE:
                        break
                    delivery = polled
                    if scans_ahead:
                        ready = sub.ready()
                taken += 1
                result = handle(driver, delivery)
                if result is None:
                    result = ack  # what settle() makes of None
                if type(result) is not HandlerOutcome or retry_header in delivery.headers:
                    driver.complete(sub, delivery, result)
                    continue
                if result is not last:  # (a HandlerOutcome is immutable; the attempt here is always 1)
                    if quiet_n:
                        counts.outcome(kind, quiet_n)
                        quiet_n = 0
                    decided = self.decision(result.kind, result.delay, 1)
                    decision, destination = decided
                    kind = result.kind
                    action = decision.action
                    # (a retry() that requeues nothing logs its own ERROR line: settle() does that)
                    quiet = destination is None and action is _UNSUPPORTED and kind != "retry"
                    copies = destination is not None and action is not _DELAYED_COPY and not decision.at_cap
                    dead = action is _DEAD_LETTER
                    last = result
                if decision is None or destination is None:
                    if not quiet or decision is None:
                        self.settle(delivery, result, decided)
                        continue
                    if warns() and not ack_line(delivery.stream_key, delivery.seq, 1, delivery.line):  # settle()'s
                        self.settle(delivery, result, decided)  # a record to make, naming settle(): settle() logs it
                        continue
                    quiet_n += 1
                    record(delivery, self.clock.now(), 1, kind, decision)  # (the app's clock may be replaced meanwhile)
                    continue
                if not copies:
                    self.settle(delivery, result, decided)
                    continue
                now = self.clock.now()
                copy_headers = dict(delivery.headers)
                copy_headers[retry_header] = first_count
                quiet_n += 1
                copy_seq, written_at, error = write_now(delivery, 1, destination, copy_headers, now, dead)
                record(delivery, now, 1, kind, decision, destination, None, written_at, copy_seq, error)
        finally:
            if quiet_n:
                counts.outcome(kind, quiet_n)
        return taken


def poll(sub: Subscription) -> Delivery | NeedMore | None:
    """``sub.poll()``; a stream error is logged (ERROR, as upstream's subscriber does) before it propagates."""
    try:
        return sub.poll()
    except NbkitError as exc:
        logs.emit(logs.SUBSCRIBER, logging.ERROR, logs.STREAM_ERROR, subscription=sub.name, error=exc)
        raise
