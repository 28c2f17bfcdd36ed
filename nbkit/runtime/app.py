"""The app: connects brokers, delivers messages to handlers, settles them and keeps delayed copies.

One engine serves every way of driving it: ``run()`` (blocking, real clock, signals),
``run_async()``, and step by step (``step``/``astep``/``fire_due``) for tests and notebook sessions.
The clock owns waiting (:class:`~nbkit.runtime.clock.Clock`), so the app never asks which clock it has.
Async handlers are awaited on the caller's event loop (``astep``, ``run_async``); a synchronous ``step``
outside any loop runs them on the app's own loop. The app starts no threads.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import logging
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from types import FrameType
from typing import TYPE_CHECKING, Any

from nbkit.errors import ConfigurationError, NbkitError
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker, Subscription
from nbkit.runtime.checkpoint import Checkpointer
from nbkit.runtime.clock import Clock, RealClock
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import SettlementEvent, events_frame
from nbkit.runtime.outcome import HandlerOutcome, OutcomeKind, as_outcome
from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.runtime.registration import Registration
from nbkit.runtime.run_summary import RunCounts, RunSummary, signal_name
from nbkit.runtime.settle import Action, Decision, decide
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire.envelope import RETRY_COUNT_HEADER, copy_retry_count, retry_count

if TYPE_CHECKING:
    import asyncio

    import pandas as pd

_COUNT_TEXTS = [str(n) for n in range(64)]  # str(attempt) of the usual attempts, made once
_new_event = partial(tuple.__new__, SettlementEvent)  # one per delivery: made from a tuple at C speed
_IDLE_MIN = 0.001
_IDLE_MAX = 0.1
KEEP_EVENTS = 10_000  # settlement events an App keeps by default: a service runs for ever
#: Delayed copies an App holds by default before it stops taking input until some are due (backpressure).
#: A small payload's pending copy takes about 800 bytes (the copy, its headers and its event), so about 8 MB.
MAX_PENDING = 10_000
#: The signals that stop ``run()`` gracefully (a second one stops it at once); SIGHUP where it exists
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@dataclass(order=True, slots=True)
class PendingCopy:
    """A delayed retry copy held in this process until ``due`` (lost if the process dies first)."""

    due: float
    order: int
    broker: Broker = field(compare=False)
    destination: str = field(compare=False)
    payload: bytes = field(compare=False, repr=False)
    headers: dict[str, str] = field(compare=False, repr=False)
    event: SettlementEvent = field(compare=False, repr=False)  # as recorded when the copy was scheduled
    event_number: int = field(compare=False)  # the event's place among all the app's settlements
    subscription: str = field(compare=False)
    attempt: int = field(compare=False)
    #: told when the copy is in the file, so an at-least-once checkpoint can move past its original
    checkpointer: Checkpointer | None = field(compare=False, default=None)
    line: int | None = field(compare=False, default=None)  # the stdin line of the delivery (a pipe)


class App:
    """Runs the handlers registered on one or more brokers.

    ``shutdown_timeout`` bounds how long a graceful shutdown waits for delayed copies (None: wait
    them all out, as upstream). ``max_pending`` caps the delayed copies held in memory: at the cap the
    app takes no more deliveries until copies are due (backpressure, never loss). ``clock`` defaults
    to the real clock; sessions pass a virtual one.
    ``keep_events`` is how many settlement events ``events`` keeps, the most recent ones (None:
    all of them, as a :class:`~nbkit.Session` does); ``settled`` counts every
    settlement. A service settles for ever, so an unbounded history would grow without end.

    ``run()`` is what ``nbkit run MODULE:APP`` calls (``await run_async()`` inside an event loop);
    ``step()``, ``astep()``, ``fire_due()`` and the methods under them are the engine a
    :class:`~nbkit.Session` drives cell by cell. Async handlers run on the caller's event loop: inside
    one (a notebook cell, an ``async def``), use ``await app.astep()``; ``step()`` runs them on the app's
    own loop when no loop is running. No thread is ever started.

    Parameters
    ----------
    *brokers : FileBroker or StdioBroker
        The brokers whose registrations this app runs (at least one).
    shutdown_timeout : float, optional
        Seconds a graceful shutdown waits for delayed copies (None: all of them).
    clock : Clock, optional
        The time source, which also does the waiting (default: the real clock; sessions pass a
        :class:`~nbkit.VirtualClock`).
    keep_events : int, optional
        How many recent settlement events to keep (None: all).
    max_pending : int, optional
        How many delayed copies may be pending before input waits (None: no cap; default
        :data:`MAX_PENDING`).

    See Also
    --------
    nbkit.FileBroker : The transport over a stream file.
    nbkit.StdioBroker : The transport over a pipe.
    nbkit.Session : An app's brokers stepped cell by cell on a virtual clock.
    nbkit.HandlerOutcome : What a handler returns.

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, VirtualClock
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning())
    ... def handle(delivery):
    ...     return HandlerOutcome.ack()
    >>> app = App(broker, clock=VirtualClock(), shutdown_timeout=10)
    >>> app.start()
    >>> _ = broker.publish("orders", '{"id": 1}')
    >>> app.step().describe()
    'file orders #1 attempt 1: ack -> acknowledgement unsupported (logged); nothing written'
    >>> app.settled
    1
    """

    def __init__(
        self,
        *brokers: Broker,
        shutdown_timeout: float | None = None,
        clock: Clock | None = None,
        keep_events: int | None = KEEP_EVENTS,
        max_pending: int | None = MAX_PENDING,
    ) -> None:
        if not brokers:
            raise ConfigurationError("App needs at least one broker: App(FileBroker(path)) or App(StdioBroker())")
        for b in brokers:
            if not isinstance(b, Broker):
                raise ConfigurationError(f"App takes brokers (FileBroker, StdioBroker), not {b!r}")
        if shutdown_timeout is not None and shutdown_timeout < 0:
            raise ConfigurationError(f"shutdown_timeout must be >= 0 seconds or None, not {shutdown_timeout}")
        _check_keep(keep_events)
        if max_pending is not None and (
            isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 1
        ):
            raise ConfigurationError(f"max_pending must be a whole number >= 1 or None, not {max_pending!r}")
        self.max_pending = max_pending
        #: What the run has done, counted over the whole run (:meth:`summary` says it in one line).
        self.counts = RunCounts()
        #: The signal that stopped :meth:`run` (None: none did).
        self.stop_signal: int | None = None
        #: What ended the run, as :meth:`summary` says it: "input ended", a signal's name, "broken pipe".
        self.stop_reason = "input ended"
        self._stopping = False  # a graceful stop is under way: the brokers stop or drain their input
        self._was_full = False  # max_pending was reached at the last check
        self.brokers = brokers
        self.shutdown_timeout = shutdown_timeout
        self.clock: Clock = clock or RealClock()
        #: The most recent settlement events, oldest first (at most ``keep_events`` of them).
        self.events: deque[SettlementEvent] = deque(maxlen=keep_events)
        #: How many settlements this app has recorded, including those no longer in ``events``.
        self.settled = 0
        self.subscriptions: list[Subscription] = []
        self._pending: list[PendingCopy] = []
        self._order = itertools.count()
        self._rr = 0
        self.started = False
        self.stopped = False
        self._stop_requested = False
        self._abandon_requested = False
        self._loop: asyncio.AbstractEventLoop | None = None  # for async handlers under step() outside a loop
        # a delivery whose async handler step() could not run (a loop was running): astep() settles it
        self._held: tuple[Subscription, Delivery, Awaitable[Any]] | None = None
        self.last_delivery: Delivery | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the clock, connect every broker and open the subscriptions (idempotent).

        Returns
        -------
        None
        """
        if self.started:
            return
        for b in self.brokers:
            b.bind_clock(self.clock)
            b.on_output_closed = self._output_closed
        subs: list[Subscription] = []
        for b in self.brokers:
            subs.extend(b.connect())
            for reg in b.registrations:
                if not reg.declaration.declares_nothing:
                    logs.emit(
                        logs.RETRY,
                        logging.INFO,
                        logs.DECLARATION,
                        subscription=reg.name,
                        max_attempts=reg.declaration.max_attempts,
                        dead_letter=reg.declaration.dead_letter,
                        applied_by="runtime",
                    )
        self.subscriptions = subs
        self.started = True

    @property
    def keep_events(self) -> int | None:
        """How many settlement events ``events`` keeps (None: all)."""
        return self.events.maxlen

    @keep_events.setter
    def keep_events(self, keep: int | None) -> None:
        _check_keep(keep)
        self.events = deque(self.events, maxlen=keep)

    @property
    def pending(self) -> list[PendingCopy]:
        """Delayed copies not yet published, soonest first.

        Returns
        -------
        list of PendingCopy
            Each with ``due``, ``destination``, ``subscription`` and ``attempt``.
        """
        return sorted(self._pending)

    def events_frame(self) -> pd.DataFrame:
        """The settlement events as a pandas DataFrame (one row per :class:`~nbkit.SettlementEvent`).

        Returns
        -------
        pandas.DataFrame
            The events kept in ``events``, with UTC times.
        """
        return events_frame(self.events)

    def all_ended(self) -> bool:
        """Every subscription has ended (or, under loopback, can only receive this app's own copies).

        Returns
        -------
        bool
        """
        return all(s.exhausted for s in self.subscriptions)

    def request_stop(self) -> None:
        """Ask a running app to shut down gracefully (what SIGINT/SIGTERM do).

        Returns
        -------
        None
        """
        self._stop_requested = True

    # -- one delivery ------------------------------------------------------------------------------
    def next_delivery(self) -> tuple[Subscription, Delivery] | None:
        """The next delivery from any subscription, round robin; None if none is ready now.

        Returns
        -------
        tuple of (Subscription, Delivery) or None
        """
        subs = self.subscriptions
        n = len(subs)
        for i in range(n):
            sub = subs[(self._rr + i) % n]
            if sub.ended:
                continue
            item = _poll(sub)
            if item is None or item is NEED_MORE:
                continue
            self._rr = (self._rr + i + 1) % n
            return sub, item
        return None

    def invoke(self, sub: Subscription, delivery: Delivery) -> Any:
        """Call the handler; returns its result (maybe awaitable) or the exception it raised.

        Parameters
        ----------
        sub : Subscription
            The subscription the delivery came from.
        delivery : Delivery
            What the handler receives.

        Returns
        -------
        object
            The handler's return value, or the exception it raised.
        """
        try:
            return sub.registration.handler(delivery)
        except Exception as exc:  # a failing handler drops the delivery, like an Err from Rust
            return exc

    def settle(self, sub: Subscription, delivery: Delivery, result: Any) -> SettlementEvent:
        """Apply the outcome (or the exception) to the delivery; record and return the event.

        Parameters
        ----------
        sub : Subscription
            The subscription the delivery came from.
        delivery : Delivery
            The delivery being settled.
        result : object
            What :meth:`invoke` returned (awaited, for an async handler): None, a HandlerOutcome or an
            exception.

        Returns
        -------
        SettlementEvent
            What the runtime did.
        """
        if type(result) is HandlerOutcome:
            outcome, error = result, None
        else:
            outcome, error = self._outcome(sub, delivery, result)
        reg = sub.registration
        broker = sub.broker
        transport = broker.transport
        headers = delivery.headers
        attempt = 1 if RETRY_COUNT_HEADER not in headers else retry_count(headers) + 1  # delivery.attempt
        kind = outcome.kind
        decl = reg.declaration
        found = sub.decisions.get((kind, outcome.delay, decl.max_attempts is not None and attempt >= decl.max_attempts))
        decision, destination = self._decision(sub, kind, outcome.delay, attempt) if found is None else found
        action = decision.action
        now = self.clock.now()
        name = reg.name
        stream_key = delivery.stream_key
        seq = delivery.seq
        settled = (name, stream_key, seq, attempt, delivery.line)  # what the log records name
        counts = self.counts
        outcomes = counts.outcomes
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if destination is None:  # unsupported, or rejected: nothing is written
            if action is Action.REJECTED:
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
            else:
                logs.ack_failed(logs.DISPATCH, name, settled)
            due = written_at = copy_seq = None
        else:
            if action is Action.DEAD_LETTER and decision.at_cap:
                logs.emit(
                    logs.DISPATCH,
                    logging.WARNING,
                    logs.EXHAUSTED_DLQ,
                    delivery=settled,
                    subscription=name,
                    attempt=attempt,
                    dead_letter=destination,
                )
            copy_headers = dict(headers)
            # the retry count of the copy: this attempt's
            copy_headers[RETRY_COUNT_HEADER] = _COUNT_TEXTS[attempt] if attempt < 64 else str(copy_retry_count(attempt))
            if action is Action.DELAYED_COPY and decision.delay is not None:
                due = now + decision.delay
                written_at = copy_seq = None
            else:  # written now, before the event is made: it records where the copy went (or why it was lost)
                due = None
                try:
                    _, copy_seq, written_at = broker.publish(destination, delivery.payload, copy_headers)
                except NbkitError as exc:
                    written_at = copy_seq = None
                    error = self._copy_lost(broker, settled, destination, exc)
                else:
                    if action is Action.DEAD_LETTER:
                        counts.dead_letters += 1
                    else:
                        counts.copies += 1
        # values in SettlementEvent's field order, made as a tuple (tests/runtime/test_events.py pins the order)
        event = _new_event(
            (
                now,  # time
                transport,
                name,  # subscription
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
                REDRIVEN_FROM_HEADER in headers,  # redriven
                None,  # lost_at
            )
        )
        if due is not None and destination is not None:
            copy = PendingCopy(
                due,
                next(self._order),
                broker,
                destination,
                delivery.payload,
                copy_headers,
                event,
                self.settled,
                name,
                attempt,
                sub.checkpointer,
                delivery.line,
            )
            heapq.heappush(self._pending, copy)
        self.events.append(event)
        self.settled += 1
        if sub.checkpointer is not None:
            sub.checkpointer.settled(stream_key, seq, copy_pending=due is not None and destination is not None)
        return event

    def _decision(
        self, sub: Subscription, kind: OutcomeKind, delay: float | None, attempt: int
    ) -> tuple[Decision, str | None]:
        """:func:`~nbkit.runtime.settle.decide` for this subscription, and the key its copy goes to (None: no
        copy), kept in ``sub.decisions`` per (outcome, delay, at the cap), where :meth:`settle` looks first: a
        subscription's declaration, transport and destinations never change, and a Decision is immutable."""
        reg = sub.registration
        decl = reg.declaration
        key = (kind, delay, decl.max_attempts is not None and attempt >= decl.max_attempts)
        decisions = sub.decisions
        found = decisions.get(key)
        if found is None:
            decision = decide(kind, delay, attempt, decl, sub.broker.transport)
            destination = None if decision.destination is None else self._destination(decision, sub.broker, reg)
            found = (decision, destination)
            if len(decisions) < 64:  # a few (outcome, delay) pairs per handler; bounded anyway
                decisions[key] = found
        return found

    def _outcome(self, sub: Subscription, delivery: Delivery, result: Any) -> tuple[HandlerOutcome, str | None]:
        """The outcome a handler's result stands for, and the error to record (a raise or a wrong return drops)."""
        if type(result) is HandlerOutcome:
            return result, None
        settled = (sub.name, delivery.stream_key, delivery.seq, delivery.attempt, delivery.line)
        if isinstance(result, BaseException) and sub.broker.output_closed:
            # the handler's publish hit the closed pipe: the stage stops (no traceback: not the handler's fault)
            return HandlerOutcome.drop(), f"stopped: {result}"
        if isinstance(result, BaseException):
            self.counts.raised += 1
            logs.DISPATCH.error(
                "%s subscription=%s",
                logs.HANDLER_FAILED,
                sub.name,
                exc_info=(type(result), result, result.__traceback__),
                extra={
                    "nbkit_text": logs.HANDLER_FAILED,
                    "nbkit_fields": {"subscription": sub.name},
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
                sub.name,
                exc,
                extra={
                    "nbkit_text": logs.HANDLER_FAILED,
                    "nbkit_fields": {"subscription": sub.name, "error": exc},
                    **logs.delivery_extra(settled),
                },
            )
            return HandlerOutcome.drop(), f"TypeError: {exc}"

    @staticmethod
    def _destination(decision: Decision, broker: Broker, reg: Registration) -> str | None:
        """The key the decision's copy goes to (the retry destination or the dead-letter key); None: no copy."""
        if decision.destination == "retry":
            return broker.retry_destination(reg)
        if decision.destination == "dead_letter":
            return reg.declaration.dead_letter
        return None

    def _copy_lost(self, broker: Broker, settled: logs.Delivery, destination: str, exc: NbkitError) -> str:
        """Count and log (ERROR; upstream: WARN) that a copy could not be published; returns the event's
        error. A broken pipe is logged once, in the run's summary, not per copy: the stage stops there."""
        self.counts.copies_lost += 1
        if not broker.output_closed:
            logs.emit(
                logs.DISPATCH,
                logging.ERROR,
                logs.COPY_FAILED,
                delivery=settled,
                subscription=settled[0],
                destination=destination,
                error=exc,
            )
        return f"copy lost: {exc}"

    def step(self) -> SettlementEvent | None:
        """Publish due copies, then deliver and settle one message; None if none was ready.

        An async handler runs on the app's own event loop. Inside a running loop (a notebook cell, an
        ``async def``) it cannot: use ``await app.astep()`` there.

        Returns
        -------
        SettlementEvent or None

        Raises
        ------
        ConfigurationError
            If the handler is async and an event loop is running in this thread; the delivery is kept,
            and the next :meth:`astep` settles it.
        """
        if self.started and self._held is None and not self._pending:  # the usual case, _take's work inline
            subs = self.subscriptions
            if len(subs) == 1:  # next_delivery() of one subscription
                sub = subs[0]
                if sub.ended:
                    return None
                delivery = _poll(sub)
                if delivery is None or delivery is NEED_MORE:
                    return None
            else:
                got = self.next_delivery()
                if got is None:
                    return None
                sub, delivery = got
            self.last_delivery = delivery
            try:  # invoke(), inline
                result = sub.registration.handler(delivery)
            except Exception as exc:  # a failing handler drops the delivery, like an Err from Rust
                result = exc
        else:
            taken = self._take()
            if taken is None:
                return None
            sub, delivery, result = taken
        if result is None or type(result) is HandlerOutcome:  # the usual results: settled at once
            return self.settle(sub, delivery, result)
        return self._complete(sub, delivery, result)

    def _complete(self, sub: Subscription, delivery: Delivery, result: Any) -> SettlementEvent:
        """:meth:`step` after the handler ran: an async handler's result is awaited on the app's own loop (or the
        delivery is held for :meth:`astep` when a loop runs here), then the delivery is settled."""
        if result is not None and type(result) is not HandlerOutcome and inspect.isawaitable(result):
            if loop_running():
                self._held = (sub, delivery, result)
                raise ConfigurationError(
                    f"the handler of {sub.name!r} is async and an event loop is running here (a notebook "
                    "cell, an async def): step() cannot wait for it without blocking that loop; use "
                    "`await session.astep()` / `await session.arun()` (or `await app.astep()`) instead"
                )
            if self._loop is None or self._loop.is_closed():
                import asyncio  # only for async handlers: `nbkit run` of a sync service never loads it

                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(_capture(result))
        return self.settle(sub, delivery, result)

    def _settle_ready(self) -> int | None:
        """:meth:`run`'s steps while deliveries are ready: how many were settled (0: none was ready), or None
        when :meth:`step` must take the next one (more than one subscription, a delayed copy pending, a held
        delivery).

        Each delivery is what :meth:`step` would take next and is settled as :meth:`settle` does, one after
        the other, with :meth:`run`'s stop check before each; only the work that is the same for every
        delivery of the subscription is done once. Those taken from the reader's scanned batch
        (:meth:`Subscription.ready`) skip the polling layers. A HandlerOutcome result on a first attempt whose
        decision writes no copy (an unsupported ack / nack: a file or pipe service's every settlement) is
        settled here, its "ack / nack failed" WARNING handed to the run log handler's writer when
        :func:`~nbkit.runtime.logs.sole_run_handler` says, per delivery, that it is the only place the record
        would go; anything else (another outcome, a retry, a handler that raised or returned something else,
        an awaitable, a WARNING record to make) goes to :meth:`settle` or :meth:`_complete` as from
        :meth:`step`. Once a delayed copy is pending or a delivery held, :meth:`step` takes over.
        """
        subs = self.subscriptions
        if not self.started or self._held is not None or self._pending or len(subs) != 1:
            return None
        sub = subs[0]
        reg = sub.registration  # a Registration is frozen: its handler, name and declaration stay
        handler = reg.handler
        name = reg.name
        transport = sub.broker.transport
        checkpointer = sub.checkpointer
        dispatch = logs.DISPATCH
        warns = partial(dispatch.isEnabledFor, logging.WARNING)  # asked per delivery, as logs.ack_failed() does
        message = logs.ack_failed_message(name)
        sole_run_handler = logs.sole_run_handler
        retry_header, redriven_header = RETRY_COUNT_HEADER, REDRIVEN_FROM_HEADER
        ack = HandlerOutcome.ack()
        # what settling ``last`` records: its event's outcome, action and delay; ``quiet``: it writes no copy
        # and logs nothing but the ack / nack WARNING
        last: HandlerOutcome | None = None
        kind: str = ""
        action = ""
        delay: float | None = None
        quiet = False
        log_handler: logs.RunLogHandler | None = None  # the run log handler ``write`` is for
        write: Callable[..., None] = _write_nothing
        counts = self.counts
        quiet_n = 0  # quiet settlements of ``kind`` not yet added to counts.outcomes
        write_key = ""
        scans_ahead = sub.scans_ahead
        ready: Iterator[Delivery] = iter(())
        settled = 0
        try:  # (a stream error may end the loop: what was settled is still counted)
            while not self._stop_requested:
                if sub.ended or self._pending or self._held is not None:
                    break
                delivery = next(ready, None) if scans_ahead else None
                if delivery is None:
                    polled = _poll(sub)
                    if polled is None or polled is NEED_MORE:
                        break
                    delivery = polled
                    if scans_ahead:
                        ready = sub.ready()
                settled += 1
                self.last_delivery = delivery
                try:  # invoke(), inline
                    result = handler(delivery)
                except Exception as exc:  # a failing handler drops the delivery, like an Err from Rust
                    result = exc
                if result is None:
                    result = ack  # what settle() makes of None
                headers = delivery.headers
                if type(result) is not HandlerOutcome or retry_header in headers:
                    self._complete(sub, delivery, result)
                    continue
                if result is not last:  # (a HandlerOutcome is immutable; the attempt here is always 1)
                    if quiet_n:
                        counts.outcome(kind, quiet_n)
                        quiet_n = 0
                    decision, destination = self._decision(sub, result.kind, result.delay, 1)
                    kind, action, delay = result.kind, decision.action_name, decision.delay
                    # (a retry() that requeues nothing logs its own ERROR line: settle() does that)
                    quiet = destination is None and decision.action is Action.UNSUPPORTED and kind != "retry"
                    last = result
                if not quiet:
                    self.settle(sub, delivery, result)
                    continue
                stream_key = delivery.stream_key
                seq = delivery.seq
                if warns():  # logs.ack_failed()'s checks, per delivery
                    run_handler = sole_run_handler(dispatch, logging.WARNING)
                    if run_handler is None:  # a record to make, naming settle() as its source: settle() logs it
                        self.settle(sub, delivery, result)
                        continue
                    if run_handler is not log_handler or stream_key != write_key:
                        write = run_handler.settlement_writer(dispatch.name, logging.WARNING, message, stream_key, 1)
                        log_handler, write_key = run_handler, stream_key
                    now = self.clock.now()
                    write(seq, delivery.line)
                else:
                    now = self.clock.now()
                quiet_n += 1
                # what settle() records for it, in SettlementEvent's field order
                event = _new_event(
                    (
                        now,
                        transport,
                        name,
                        stream_key,
                        delivery.shard_id,
                        seq,
                        1,  # attempt
                        kind,  # outcome
                        action,
                        delay,
                        None,  # destination
                        None,  # due
                        None,  # written_at
                        None,  # copy_seq
                        False,  # abandoned
                        None,  # error
                        redriven_header in headers,  # redriven
                        None,  # lost_at
                    )
                )
                self.events.append(event)
                self.settled += 1
                if checkpointer is not None:
                    checkpointer.settled(stream_key, seq, copy_pending=False)
        finally:
            if quiet_n:
                counts.outcome(kind, quiet_n)
        return settled

    async def astep(self) -> SettlementEvent | None:
        """:meth:`step` for code running in an event loop: an async handler is awaited on that loop.

        Returns
        -------
        SettlementEvent or None
            The settlement, or None if no message was ready.

        Examples
        --------
        >>> import asyncio
        >>> from nbkit import App, StdioBroker, VirtualClock
        >>> broker = StdioBroker(stdin=["[jobs] hello"], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs.retry")
        ... async def handle(delivery):
        ...     await asyncio.sleep(0)  # e.g. an HTTP call
        >>> app = App(broker, clock=VirtualClock())
        >>> asyncio.run(app.astep()).describe()
        'pipe jobs #0 attempt 1: ack -> acknowledgement unsupported (logged); nothing written'
        """
        got = self._take()
        if got is None:
            return None
        sub, delivery, result = got
        if _is_awaitable(result):
            result = await _capture(result)
        return self.settle(sub, delivery, result)

    def _take(self) -> tuple[Subscription, Delivery, Any] | None:
        """Start, publish due copies, and hand the next delivery to its handler: (sub, delivery, result).

        The result may still be awaitable. A delivery held back by :meth:`step` comes first.
        """
        self.start()
        if self._held is not None:
            held, self._held = self._held, None
            return held
        self.fire_due()
        if self.pending_full:
            return None  # backpressure: no delivery until copies are due
        got = self.next_delivery()
        if got is None:
            return None
        sub, delivery = got
        self.last_delivery = delivery
        return sub, delivery, self.invoke(sub, delivery)

    # -- delayed copies ----------------------------------------------------------------------------
    def fire_due(self, until: float | None = None) -> list[SettlementEvent]:
        """Publish every delayed copy due by ``until`` (default: now), in due order.

        Each copy's due time is a deadline the clock reaches as the copy is written (a virtual clock
        jumps to it, so a copy is written at its due time).

        Parameters
        ----------
        until : float, optional
            Epoch seconds on the app's clock.

        Returns
        -------
        list of SettlementEvent
            The (updated) settlement events of the copies written.
        """
        if not self._pending:
            return []
        limit = self.clock.now() if until is None else until
        fired = []
        while self._pending and self._pending[0].due <= limit:
            copy = heapq.heappop(self._pending)
            self.clock.reach(copy.due)
            fired.append(self._fire(copy))
        return fired

    def _fire(self, copy: PendingCopy) -> SettlementEvent:
        event = copy.event
        settled = (copy.subscription, event.stream_key, event.seq, event.attempt, copy.line)
        try:
            published = copy.broker.publish(copy.destination, copy.payload, copy.headers)
        except NbkitError as exc:
            event = event._replace(error=self._copy_lost(copy.broker, settled, copy.destination, exc))
        else:
            self.counts.copies += 1
            event = event._replace(written_at=published.time, copy_seq=published.seq)
            if copy.checkpointer is not None:
                copy.checkpointer.copy_written(event.stream_key, event.seq)
        self._update_event(copy.event_number, event)
        return event

    def _update_event(self, number: int, event: SettlementEvent) -> None:
        """Put the new state of settlement ``number`` into ``events``, if it is still kept there."""
        i = number - (self.settled - len(self.events))
        if i >= 0:
            self.events[i] = event

    @property
    def pending_full(self) -> bool:
        """Whether ``max_pending`` delayed copies are pending: the app then takes no delivery until some are due.

        Returns
        -------
        bool
        """
        full = self.max_pending is not None and len(self._pending) >= self.max_pending
        if full and not self._was_full:
            self.counts.backpressure += 1
            if self.counts.backpressure == 1:  # once: the summary counts the rest
                logs.emit(logs.APP, logging.WARNING, logs.PENDING_FULL, max_pending=self.max_pending)
        self._was_full = full
        return full

    def next_due(self) -> float | None:
        """When the soonest delayed copy is due, if any.

        Returns
        -------
        float or None
            Epoch seconds on the app's clock.
        """
        return self._pending[0].due if self._pending else None

    def abandon_pending(self, *, log: bool = True, reason: str = logs.COPY_ABANDONED) -> int:
        """Give up every delayed copy (they are lost); returns how many.

        Parameters
        ----------
        log : bool
            Log one ERROR line per abandoned copy (upstream: WARN), naming it.
        reason : str
            The line's text: why the copies are abandoned (the shutdown timeout, by default).

        Returns
        -------
        int
            How many copies were abandoned.
        """
        n = 0
        while self._pending:
            copy = heapq.heappop(self._pending)
            self.counts.abandoned += 1
            if log:
                logs.emit(
                    logs.DISPATCH,
                    logging.ERROR,
                    reason,
                    delivery=(copy.subscription, copy.event.stream_key, copy.event.seq, copy.attempt, copy.line),
                    subscription=copy.subscription,
                    destination=copy.destination,
                    attempt=copy.attempt,
                )
            self._update_event(copy.event_number, copy.event._replace(abandoned=True, lost_at=self.clock.now()))
            n += 1
        return n

    # -- running -----------------------------------------------------------------------------------
    def run(self) -> None:
        """Run until every subscription has ended and no delayed copy is pending, or until SIGINT, SIGTERM
        or SIGHUP, or until a pipe stage's stdout reader goes away.

        On a signal a pipe stage whose stdin is a pipe reads on until the stage before closes it (the
        whole pipeline got the signal, and that stage may still write the copies it waits out); one
        reading a terminal or a file stops reading and delivers the lines it has read; other brokers end
        their subscriptions at once. Then it shuts down gracefully (waiting for copies within
        ``shutdown_timeout``). A second signal stops at once: every pending copy is abandoned and named,
        and lines read and not delivered are counted. A broken pipe stops the stage at once too.
        ``stop_signal``, ``stop_reason`` and :meth:`summary` say how it ended.

        Returns
        -------
        None
        """
        self.start()
        restore = self._install_signals()
        try:
            idle = _IDLE_MIN
            told_waiting = False
            while True:
                if self._stop_requested and not self._keep_stopping():
                    break
                settled = self._settle_ready()
                if settled is None:
                    settled = self.step() is not None
                if settled:
                    idle = _IDLE_MIN
                    continue
                if self.all_ended():
                    if not self._pending or self._stopping:  # stopping: shutdown() waits, within its timeout
                        break
                    if not told_waiting:
                        told_waiting = True
                        logs.emit(
                            logs.APP,
                            logging.INFO,
                            logs.INPUT_ENDED_WAITING,
                            copies=len(self._pending),
                            seconds=round(max(0.0, self.clock.sleep_time(max(self._pending).due)), 3),
                        )
                self._flush()
                pause, deadline = self._pause(idle)
                self._wait(pause)
                if deadline is not None:
                    self.clock.reach(deadline)
                idle = min(idle * 2, _IDLE_MAX)
        except NbkitError as exc:  # a stream error (a bad stdin line, a damaged file) ends the run
            if self.stop_reason != "broken pipe":
                self.stop_reason = f"{type(exc).__name__}"
            raise
        finally:
            try:
                self.shutdown()
            finally:
                restore()

    async def run_async(self) -> None:
        """The asyncio form of :meth:`run`: async handlers are awaited on the running loop.

        Returns
        -------
        None
        """
        self.start()
        try:
            idle = _IDLE_MIN
            while not self._stop_requested:
                if await self.astep() is not None:
                    idle = _IDLE_MIN
                    continue
                if self.all_ended() and not self._pending:
                    break
                self._flush()
                pause, deadline = self._pause(idle)
                await _sleep(pause)
                if deadline is not None:
                    self.clock.reach(deadline)
                idle = min(idle * 2, _IDLE_MAX)
        finally:
            self.shutdown()

    def _pause(self, idle: float) -> tuple[float, float | None]:
        """How long to wait for input now (at most ``idle`` s, as the clock says), and the next copy's due
        time if that wait reaches it (the clock is then told it has come)."""
        due = self.next_due()
        if due is not None:
            pause = self.clock.sleep_time(due)
            if pause <= idle:
                return pause, due
        return idle, None

    def _wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` of real time for input on the subscriptions' file descriptors (only for the
        time, when ``max_pending`` copies are pending: no input is taken then)."""
        if seconds <= 0:
            return
        fds = [fd for s in self.subscriptions if not s.ended and (fd := s.fileno()) is not None]
        if fds and not self.pending_full:
            select.select(fds, [], [], seconds)
        else:
            time.sleep(seconds)

    def _flush(self) -> None:
        """The app is idle: write out the gathered log lines, then the brokers' buffered output."""
        logs.flush_run_logs()
        for b in self.brokers:
            if not b.closed and not b.output_closed:
                try:
                    b.flush()
                except NbkitError:
                    if not b.output_closed:
                        raise  # (a broken pipe has stopped the app already: its summary says what was lost)

    def _install_signals(self) -> Callable[[], None]:
        """Make SIGINT/SIGTERM/SIGHUP request a stop (in the main thread); returns what puts the old handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous: dict[signal.Signals, Any] = {}

        def handler(signum: int, frame: FrameType | None) -> None:
            if self.stop_signal is not None or self._stopping:  # a second signal: stop at once
                self._abandon_requested = True
            else:
                self.stop_signal = signum
            self._stop_requested = True

        for sig in _STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def _keep_stopping(self) -> bool:
        """A stop was requested: whether :meth:`run` goes on (the brokers stop or drain their input) or ends now.

        The first request asks each broker to stop its input (:meth:`Broker.stop_input`) and says what the
        stage now waits for; a second one (a second signal), a broken pipe, or a broker without such a stop
        (a file's subscriptions end at once, as before) ends the loop.
        """
        if self._abandon_requested or self.stop_reason == "broken pipe":
            return False
        if self._stopping:  # request_stop() again: nothing new
            self._stop_requested = False
            return True
        self._stopping = True
        self.stop_reason = signal_name(self.stop_signal) if self.stop_signal is not None else "request_stop()"
        stops = [b.stop_input() for b in self.brokers]
        if any(stop is None for stop in stops):
            return False
        self._stop_requested = False
        pending = len(self._pending)
        if any(stops):
            logs.emit(
                logs.APP,
                logging.WARNING,
                logs.SHUTDOWN_DRAINING,
                signal=self.stop_reason,
                pending=pending,
                then="a second signal stops at once and abandons every pending copy",
            )
        else:
            logs.emit(logs.APP, logging.WARNING, logs.SHUTDOWN_STOPPING, signal=self.stop_reason, pending=pending)
        return True

    def _output_closed(self, broker: Broker) -> None:
        """A broker's output is gone (a pipe's reader left): stop at once; the summary says what was lost."""
        self.stop_reason = "broken pipe"
        self._stop_requested = True

    def summary(self) -> RunSummary:
        """What the run did, counted (the line ``nbkit run`` writes at exit, and its exit status).

        Returns
        -------
        RunSummary
            ``to_text()`` is the line; ``exit_status`` the documented status.

        Examples
        --------
        >>> from nbkit import App, HandlerOutcome, StdioBroker
        >>> broker = StdioBroker(stdin=["[jobs] a", "[jobs] b", "[other] c"], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs.retry")
        ... def work(delivery):
        ...     return HandlerOutcome.retry_after(0)
        >>> app = App(broker)
        >>> app.run()
        >>> print(*app.summary().to_text().split("; "), sep="\\n")
        run summary: input ended
        2 deliveries (retry_after 2)
        2 copies published
        stdout: 2 lines written
        3 lines read (1 for no subscription)
        """
        lines: dict[str, int | bool] | None = None
        written = lost = 0
        for b in self.brokers:
            counts = b.input_counts()
            if counts is not None:
                if lines is None:
                    lines = dict(counts)
                else:
                    for k, v in counts.items():
                        lines[k] = (lines[k] and v) if isinstance(v, bool) else int(lines[k]) + v
            w, lo = b.output_counts()
            written += w
            lost += lo
        return RunSummary(
            self.counts,
            stop=self.stop_reason,
            signal=self.stop_signal,
            lines=lines,
            stdout_written=written,
            stdout_lost=lost,
            pending=len(self._pending),
        )

    def shutdown(self) -> None:
        """Wait for delayed copies (up to ``shutdown_timeout``), abandon the rest, close the brokers.

        After a second signal or a broken pipe nothing is waited for: every pending copy is abandoned and
        named (ERROR), and lines read but not delivered are counted and logged.

        Returns
        -------
        None
        """
        if self.stopped:
            return
        try:
            if self.started:
                if self._stopping or self._abandon_requested or self.stop_reason == "broken pipe":
                    self._count_unread()
                deadline = None if self.shutdown_timeout is None else self.clock.now() + self.shutdown_timeout
                if self._pending and not self._abandon_requested and self.stop_reason != "broken pipe":
                    last = max(self._pending).due
                    wait = max(0.0, self.clock.sleep_time(last))
                    logs.emit(
                        logs.APP,
                        logging.WARNING if self._stopping else logging.INFO,
                        logs.SHUTDOWN_WAITING,
                        copies=len(self._pending),
                        seconds=round(wait if deadline is None else min(wait, self.shutdown_timeout or 0.0), 3),
                        shutdown_timeout=self.shutdown_timeout,
                        then="a second signal abandons them",
                    )
                while self._pending:
                    due = self._pending[0].due
                    if self.stop_reason == "broken pipe":
                        self.abandon_pending(reason=logs.COPY_ABANDONED_BROKEN_PIPE)
                        break
                    if self._abandon_requested:
                        self._count_unread()
                        self.abandon_pending(reason=logs.COPY_ABANDONED_SIGNAL)
                        break
                    late = deadline is not None and due > deadline  # waited for until the deadline, as upstream
                    until = deadline if late and deadline is not None else due
                    pause = self.clock.sleep_time(until)
                    if pause > 0:
                        self._flush()
                        # short naps, so a second signal can cut the wait short
                        time.sleep(min(_IDLE_MAX, pause))
                    if pause <= _IDLE_MAX:
                        self.clock.reach(until)
                        if late:
                            self.abandon_pending(reason=logs.COPY_ABANDONED)
                            break
                    self.fire_due()
        finally:
            self.stopped = True
            errors = []
            for b in self.brokers if self.started else ():
                try:
                    b.shutdown()
                except NbkitError as exc:
                    errors.append(exc)
            self._release_loop()
            if errors:
                raise errors[0]

    def _count_unread(self) -> None:
        """The stage stops before its input ends: each broker counts (and drops) what it read and did not
        deliver, logged as a loss (ERROR), and what it never read (in the summary)."""
        for b in self.brokers:
            undelivered = b.count_unread()
            if undelivered and self.stop_reason != "broken pipe":  # (a broken pipe's summary says it)
                logs.emit(logs.APP, logging.ERROR, logs.LINES_NOT_DELIVERED, count=undelivered, stop=self.stop_reason)

    def crash(self) -> int:
        """Simulate the process dying: pending delayed copies are lost, nothing is flushed or closed gracefully.

        No EOS is written.

        Returns
        -------
        int
            How many copies were lost.
        """
        lost = self.abandon_pending(log=False)
        self.stopped = True
        for b in self.brokers:
            b.abort()
        self._release_loop()
        return lost

    def _release_loop(self) -> None:
        """Close the app's own event loop, and a held async handler that will never be awaited now."""
        if self._held is not None:
            awaitable = self._held[2]
            self._held = None
            if inspect.iscoroutine(awaitable):
                awaitable.close()
        if self._loop is not None:
            self._loop.close()


def _poll(sub: Subscription) -> Delivery | NeedMore | None:
    """``sub.poll()``; a stream error is logged (ERROR, as upstream's subscriber does) before it propagates."""
    try:
        return sub.poll()
    except NbkitError as exc:
        logs.emit(logs.SUBSCRIBER, logging.ERROR, logs.STREAM_ERROR, subscription=sub.name, error=exc)
        raise


def _write_nothing(seq: int, line: int | None = None) -> None:
    """The settlement writer :meth:`App._settle_ready` starts with: replaced before its first line is due."""


def _check_keep(keep: int | None) -> None:
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise ConfigurationError(f"keep_events must be a whole number >= 0 or None, not {keep!r}")


async def _capture(awaitable: Awaitable[Any]) -> Any:
    """Await an async handler's result; its exception is returned, as :meth:`App.invoke` does for a sync one."""
    try:
        return await awaitable
    except Exception as exc:
        return exc


def _is_awaitable(result: Any) -> bool:
    """Whether a handler's result must be awaited (a HandlerOutcome or None, the usual results, never is)."""
    return result is not None and type(result) is not HandlerOutcome and inspect.isawaitable(result)


def loop_running() -> bool:
    """Whether an asyncio event loop is running in this thread (in a notebook's kernel it always is).

    Where one runs, async handlers must be awaited on it (``astep``); a sync ``step`` cannot.

    Returns
    -------
    bool

    Examples
    --------
    >>> import asyncio
    >>> from nbkit.runtime.app import loop_running
    >>> loop_running()
    False
    >>> async def inside() -> bool:
    ...     return loop_running()
    >>> asyncio.run(inside())
    True
    """
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:  # not even imported: no loop can be running
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _sleep(seconds: float) -> None:
    """``asyncio.sleep`` (asyncio is imported where it is used: a sync service never loads it)."""
    import asyncio

    await asyncio.sleep(seconds)
