"""The app: connects brokers, delivers messages to handlers, settles them and keeps delayed copies.

One engine serves every way of driving it: ``run()`` (blocking, real clock, signals),
``run_async()``, and step by step (``step``/``advance``) for tests and notebook sessions.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
import logging
import select
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from nbkit.errors import ConfigurationError, NbkitError
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker, Subscription
from nbkit.runtime.clock import Clock, RealClock
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import SettlementEvent, events_frame
from nbkit.runtime.outcome import HandlerOutcome, as_outcome
from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.runtime.settle import Action, decide
from nbkit.transport.polling import NEED_MORE
from nbkit.wire.envelope import RETRY_COUNT_HEADER

_IDLE_MIN = 0.001
_IDLE_MAX = 0.1
# the actions settle() tells apart, as plain names: an enum member lookup costs ~0.15 µs (Python 3.11)
_UNSUPPORTED, _DELAYED_COPY, _REJECTED, _DEAD_LETTER = (
    Action.UNSUPPORTED,
    Action.DELAYED_COPY,
    Action.REJECTED,
    Action.DEAD_LETTER,
)
_DECISIONS_MAX = 4096  # memoized settlement decisions per app (decide() is pure)
KEEP_EVENTS = 10_000  # settlement events an App keeps by default: a service runs for ever


#: ``SettlementEvent`` from a tuple of all its fields, at C speed (the runtime makes one per delivery).
_event = partial(tuple.__new__, SettlementEvent)
_WRITTEN_AT = SettlementEvent._fields.index("written_at")  # written_at, copy_seq: set once a copy is out
_COPY_DONE = _WRITTEN_AT + 2


def _copied(event: SettlementEvent, written_at: float, copy_seq: int) -> SettlementEvent:
    """``event._replace(written_at=written_at, copy_seq=copy_seq)``, without its per-field work."""
    return _event((*event[:_WRITTEN_AT], written_at, copy_seq, *event[_COPY_DONE:]))


@dataclass(order=True, slots=True)
class PendingCopy:
    """A delayed retry copy held in this process until ``due`` (lost if the process dies first)."""

    due: float
    order: int
    broker: Broker = field(compare=False)
    destination: str = field(compare=False)
    payload: bytes = field(compare=False, repr=False)
    headers: dict = field(compare=False, repr=False)
    event: SettlementEvent = field(compare=False, repr=False)  # as recorded when the copy was scheduled
    event_number: int = field(compare=False)  # the event's place among all the app's settlements
    subscription: str = field(compare=False)
    attempt: int = field(compare=False)


class App:
    """Runs the handlers registered on one or more brokers.

    ``shutdown_timeout`` bounds how long a graceful shutdown waits for delayed copies (None: wait
    them all out, as upstream). ``clock`` defaults to the real clock; sessions pass a virtual one.
    ``keep_events`` is how many settlement events ``events`` keeps, the most recent ones (None:
    all of them, as a :class:`~nbkit.Session` does); ``settled`` counts every
    settlement. A service settles for ever, so an unbounded history would grow without end.

    ``run()`` is what ``nbkit run MODULE:APP`` calls; ``step()``, ``fire_due()`` and the methods under them
    are the engine a :class:`~nbkit.Session` drives cell by cell.

    Parameters
    ----------
    *brokers : FileBroker or StdioBroker
        The brokers whose registrations this app runs (at least one).
    shutdown_timeout : float, optional
        Seconds a graceful shutdown waits for delayed copies (None: all of them).
    clock : RealClock or VirtualClock, optional
        The time source (default: the real clock).
    keep_events : int, optional
        How many recent settlement events to keep (None: all).

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
    ):
        if not brokers:
            raise ConfigurationError("App needs at least one broker: App(FileBroker(path)) or App(StdioBroker())")
        for b in brokers:
            if not isinstance(b, Broker):
                raise ConfigurationError(f"App takes brokers (FileBroker, StdioBroker), not {b!r}")
        if shutdown_timeout is not None and shutdown_timeout < 0:
            raise ConfigurationError(f"shutdown_timeout must be >= 0 seconds or None, not {shutdown_timeout}")
        _check_keep(keep_events)
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self.last_delivery: Delivery | None = None
        self._decisions: dict[tuple, tuple] = {}

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

    def events_frame(self):
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
            try:
                item = sub.poll()
            except NbkitError as exc:
                logs.emit(logs.SUBSCRIBER, logging.ERROR, logs.STREAM_ERROR, subscription=sub.name, error=exc)
                raise
            if item is None or item is NEED_MORE:
                continue
            self._rr = (self._rr + i + 1) % n
            return sub, item  # type: ignore[return-value]
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
            What :meth:`invoke` returned: None, a HandlerOutcome or an exception.

        Returns
        -------
        SettlementEvent
            What the runtime did.
        """
        error = None
        if type(result) is HandlerOutcome:
            outcome = result
        elif isinstance(result, BaseException):
            logs.DISPATCH.error(
                "%s subscription=%s",
                logs.HANDLER_FAILED,
                sub.name,
                exc_info=(type(result), result, result.__traceback__),
                extra={
                    "nbkit_text": logs.HANDLER_FAILED,
                    "nbkit_fields": {"subscription": sub.name},
                    **logs.delivery_extra((sub.name, delivery.stream_key, delivery.seq, delivery.attempt)),
                },
            )
            outcome = HandlerOutcome.drop()
            error = f"{type(result).__name__}: {result}"
        else:
            try:
                outcome = as_outcome(result)
            except TypeError as exc:
                logs.DISPATCH.error(
                    "%s subscription=%s error=%s",
                    logs.HANDLER_FAILED,
                    sub.name,
                    exc,
                    extra={
                        "nbkit_text": logs.HANDLER_FAILED,
                        "nbkit_fields": {"subscription": sub.name, "error": exc},
                        **logs.delivery_extra((sub.name, delivery.stream_key, delivery.seq, delivery.attempt)),
                    },
                )
                outcome, error = HandlerOutcome.drop(), f"TypeError: {exc}"
        reg = sub.registration
        broker = sub.broker
        transport = broker.transport
        attempt = delivery.attempt
        decision, action_name = self._decide(outcome.kind, outcome.delay, attempt, reg.declaration, transport)
        now = self.clock.now()
        action = decision.action
        redriven = REDRIVEN_FROM_HEADER in delivery.headers
        settled = (reg.name, delivery.stream_key, delivery.seq, attempt)  # what the log records name
        if action is _UNSUPPORTED:
            event = _event(
                (
                    now,
                    transport,
                    reg.name,
                    delivery.stream_key,
                    delivery.shard_id,
                    delivery.seq,
                    attempt,
                    outcome.kind,
                    action_name,
                    None,
                    None,
                    None,
                    None,
                    None,
                    False,
                    error,
                    redriven,
                )
            )
            self._unsupported(reg.name, settled)
        else:
            destination = None
            if decision.destination == "retry":
                destination = broker.retry_destination(reg)
            elif decision.destination == "dead_letter":
                destination = reg.declaration.dead_letter
            delay = decision.delay
            due = now + delay if action is _DELAYED_COPY else None
            event = _event(
                (
                    now,
                    transport,
                    reg.name,
                    delivery.stream_key,
                    delivery.shard_id,
                    delivery.seq,
                    attempt,
                    outcome.kind,
                    action_name,
                    delay,
                    destination,
                    due,
                    None,
                    None,
                    False,
                    error,
                    redriven,
                )
            )
            if action is _REJECTED:
                logs.emit(
                    logs.DISPATCH,
                    logging.WARNING,
                    logs.EXHAUSTED_REJECT,
                    delivery=settled,
                    subscription=reg.name,
                    attempt=attempt,
                )
                self._unsupported(reg.name, settled)
            else:
                if action is _DEAD_LETTER and decision.at_cap:
                    logs.emit(
                        logs.DISPATCH,
                        logging.WARNING,
                        logs.EXHAUSTED_DLQ,
                        delivery=settled,
                        subscription=reg.name,
                        attempt=attempt,
                        dead_letter=destination,
                    )
                headers = dict(delivery.headers)
                headers[RETRY_COUNT_HEADER] = str(attempt)  # the retry count of the copy: this attempt's
                if due is not None:
                    heapq.heappush(
                        self._pending,
                        PendingCopy(
                            due,
                            next(self._order),
                            broker,
                            destination,
                            delivery.payload,
                            headers,
                            event,
                            self.settled,
                            reg.name,
                            attempt,
                        ),
                    )
                else:
                    event = self._publish_copy(event, broker, reg.name, destination, delivery.payload, headers)
        self.events.append(event)
        self.settled += 1
        if reg.checkpoint is not None:
            reg.checkpoint.save(delivery.stream_key, delivery.seq + 1)
        return event

    def _decide(self, kind: str, delay: float | None, attempt: int, decl: Any, transport: str) -> tuple[Any, str]:
        """:func:`~nbkit.runtime.settle.decide` and its action's name, memoized: it is pure, and a
        service settles the same few cases over and over."""
        key = (kind, delay, attempt, id(decl), transport)
        hit = self._decisions.get(key)
        if hit is not None and hit[0] is decl:
            return hit[1]
        decision = decide(kind, delay, attempt, decl, transport)
        found = (decision, decision.action.value)
        if len(self._decisions) < _DECISIONS_MAX:
            self._decisions[key] = (decl, found)
        return found

    def _unsupported(self, name: str, settled: logs.Delivery) -> None:
        logs.ack_failed(logs.DISPATCH, name, settled)

    def _publish_copy(
        self,
        event: SettlementEvent,
        broker: Broker,
        name: str,
        destination: str,
        payload: bytes,
        headers: dict,
    ) -> SettlementEvent:
        try:
            published = broker.publish(destination, payload, headers)
        except NbkitError as exc:
            logs.emit(
                logs.DISPATCH,
                logging.WARNING,
                logs.COPY_FAILED,
                delivery=(name, event.stream_key, event.seq, event.attempt),
                subscription=name,
                destination=destination,
                error=exc,
            )
            return event._replace(error=f"copy lost: {exc}")
        return _copied(event, published.time, published.seq)

    def step(self) -> SettlementEvent | None:
        """Publish due copies, then deliver and settle one message; None if none was ready.

        Returns
        -------
        SettlementEvent or None
        """
        self.start()
        self.fire_due()
        got = self.next_delivery()
        if got is None:
            return None
        sub, delivery = got
        self.last_delivery = delivery
        result = self.invoke(sub, delivery)
        if result is not None and type(result) is not HandlerOutcome and inspect.isawaitable(result):
            result = self._resolve(result)
        return self.settle(sub, delivery, result)

    def _resolve(self, awaitable: Any) -> Any:
        """Run an async handler to completion from synchronous code (also inside Jupyter's loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            try:
                return self._loop.run_until_complete(_capture(awaitable))
            except Exception as exc:  # pragma: no cover - _capture returns exceptions
                return exc
        box: list[Any] = []
        worker = threading.Thread(target=lambda: box.append(asyncio.run(_capture(awaitable))))
        worker.start()
        worker.join()
        return box[0]

    # -- delayed copies ----------------------------------------------------------------------------
    def fire_due(self, until: float | None = None) -> list[SettlementEvent]:
        """Publish every delayed copy due by ``until`` (default: now), in due order.

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
            if getattr(self.clock, "virtual", False):
                self.clock.set(copy.due)
            fired.append(self._fire(copy))
        return fired

    def _fire(self, copy: PendingCopy) -> SettlementEvent:
        event = self._publish_copy(
            copy.event, copy.broker, copy.subscription, copy.destination, copy.payload, copy.headers
        )
        self._update_event(copy.event_number, event)
        return event

    def _update_event(self, number: int, event: SettlementEvent) -> None:
        """Put the new state of settlement ``number`` into ``events``, if it is still kept there."""
        i = number - (self.settled - len(self.events))
        if i >= 0:
            self.events[i] = event

    def next_due(self) -> float | None:
        """When the soonest delayed copy is due, if any.

        Returns
        -------
        float or None
            Epoch seconds on the app's clock.
        """
        return self._pending[0].due if self._pending else None

    def abandon_pending(self, *, log: bool = True) -> int:
        """Give up every delayed copy (they are lost); returns how many.

        Parameters
        ----------
        log : bool
            Log one WARN line per abandoned copy.

        Returns
        -------
        int
            How many copies were abandoned.
        """
        n = 0
        while self._pending:
            copy = heapq.heappop(self._pending)
            if log:
                logs.emit(
                    logs.DISPATCH,
                    logging.WARNING,
                    logs.COPY_ABANDONED,
                    delivery=(copy.subscription, copy.event.stream_key, copy.event.seq, copy.attempt),
                    subscription=copy.subscription,
                    destination=copy.destination,
                    attempt=copy.attempt,
                )
            self._update_event(copy.event_number, copy.event._replace(abandoned=True))
            n += 1
        return n

    # -- running -----------------------------------------------------------------------------------
    def run(self) -> None:
        """Run until every subscription has ended and no delayed copy is pending, or until SIGINT/SIGTERM.

        Then shut down gracefully (waiting for copies within ``shutdown_timeout``). A second signal stops
        waiting at once.

        Returns
        -------
        None
        """
        self.start()
        restore = self._install_signals()
        try:
            idle = _IDLE_MIN
            while not self._stop_requested:
                if self.step() is not None:
                    idle = _IDLE_MIN
                    continue
                if self.all_ended() and not self._pending:
                    break
                self._flush()
                wait = idle
                due = self.next_due()
                if due is not None:
                    wait = max(0.0, min(wait, due - self.clock.now()))
                self._wait(wait)
                idle = min(idle * 2, _IDLE_MAX)
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
                self.fire_due()
                got = self.next_delivery()
                if got is not None:
                    sub, delivery = got
                    result = self.invoke(sub, delivery)
                    if inspect.isawaitable(result):
                        result = await _capture(result)
                    self.settle(sub, delivery, result)
                    idle = _IDLE_MIN
                    continue
                if self.all_ended() and not self._pending:
                    break
                self._flush()
                due = self.next_due()
                if due is not None and getattr(self.clock, "virtual", False):
                    self.clock.set(due)  # as run() does: a virtual clock jumps to the next due copy
                wait = idle if due is None else max(0.0, min(idle, due - self.clock.now()))
                await asyncio.sleep(wait)
                idle = min(idle * 2, _IDLE_MAX)
        finally:
            self.shutdown()

    def _wait(self, seconds: float) -> None:
        if getattr(self.clock, "virtual", False):
            due = self.next_due()
            if due is not None:
                self.clock.set(due)
                return
            # nothing scheduled: only new input can change anything, so wait for it in real time
        fds = [fd for s in self.subscriptions if not s.ended and (fd := s.fileno()) is not None]
        if fds:
            select.select(fds, [], [], seconds)
        elif seconds > 0:
            time.sleep(seconds)

    def _flush(self) -> None:
        for b in self.brokers:
            if not b.closed:
                b.flush()

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {}

        def handler(signum, frame):
            if self._stop_requested:  # a second signal: stop waiting for delayed copies
                self._abandon_requested = True
            self._stop_requested = True

        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def shutdown(self) -> None:
        """Wait for delayed copies (up to ``shutdown_timeout``), abandon the rest, close the brokers.

        Returns
        -------
        None
        """
        if self.stopped:
            return
        try:
            if self.started:
                deadline = None if self.shutdown_timeout is None else self.clock.now() + self.shutdown_timeout
                while self._pending:
                    due = self._pending[0].due
                    if self._abandon_requested or (deadline is not None and due > deadline):
                        self.abandon_pending()
                        break
                    if getattr(self.clock, "virtual", False):
                        self.clock.set(due)
                    else:
                        self._flush()
                        # short naps, so a second SIGINT/SIGTERM can cut the wait short
                        time.sleep(min(_IDLE_MAX, max(0.0, due - self.clock.now())))
                    self.fire_due()
        finally:
            self.stopped = True
            errors = []
            for b in self.brokers if self.started else ():
                try:
                    b.shutdown()
                except NbkitError as exc:
                    errors.append(exc)
            if self._loop is not None:
                self._loop.close()
            if errors:
                raise errors[0]

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
        return lost


def _check_keep(keep: int | None) -> None:
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise ConfigurationError(f"keep_events must be a whole number >= 0 or None, not {keep!r}")


async def _capture(awaitable: Any) -> Any:
    try:
        return await awaitable
    except Exception as exc:
        return exc
