"""The app: connects brokers and drives the loop; taking deliveries and settling them are delegated.

One engine serves every way of driving it: ``run()`` (blocking, real clock, signals),
``run_async()``, and step by step (``step``/``astep``/``fire_due``) for tests and notebook sessions.
:class:`~nbkit.runtime.intake.Intake` takes each delivery to its handler (round robin, async handlers,
backpressure), and every delivery ends in the subscription's
:class:`~nbkit.runtime.settlement.Settlement` (the action, the copy, the log lines, the event and the
checkpoint); delayed copies are held by :class:`~nbkit.runtime.delayed.DelayedCopies`. The app keeps the
lifecycle and the loop. The clock owns waiting (:class:`~nbkit.runtime.clock.Clock`), so the app never
asks which clock it has. The app starts no threads.
"""

from __future__ import annotations

import logging
import select
import time
from collections import deque

from nbkit.errors import ConfigurationError, NbkitError
from nbkit.runtime import logs, run_log
from nbkit.runtime.broker import Broker, Subscription
from nbkit.runtime.clock import Clock, RealClock
from nbkit.runtime.delayed import DelayedCopies, PendingCopy
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import EventHistory, SettlementEvent
from nbkit.runtime.intake import Intake
from nbkit.runtime.run_summary import RunCounts, RunSummary
from nbkit.runtime.settlement import Settlement
from nbkit.runtime.stopping import BROKEN_PIPE, Stop

__all__ = [
    "KEEP_EVENTS",
    "MAX_PENDING",
    "App",
]


_IDLE_MIN = 0.001
_IDLE_MAX = 0.1
KEEP_EVENTS = 10_000  # settlement events an App keeps by default: a service runs for ever
#: Delayed copies an App holds by default before it stops taking input until some are due (backpressure).
#: A small payload's pending copy takes about 800 bytes (the copy, its headers and its event), so about 8 MB.
MAX_PENDING = 10_000


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
        #: What the run has done, counted over the whole run (:meth:`summary` says it in one line).
        self.counts = RunCounts()
        self._stop = Stop()  # whether a stop was asked for, why, and whether it is graceful
        self.brokers = brokers
        self.shutdown_timeout = shutdown_timeout
        self._clock: Clock = clock or RealClock()
        self._history = EventHistory(keep_events)  # the settlement events and their count
        self._delayed = DelayedCopies(self._clock, self.counts, self._history, max_pending)
        self._pending = self._delayed.heap  # the same list, never replaced: "is a copy pending" at one look-up
        self._intake = Intake(self._delayed, self._stop)  # takes deliveries to handlers, then to settlements
        self.subscriptions: list[Subscription] = self._intake.subscriptions
        self.started = False
        self.stopped = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the clock, connect every broker and open the subscriptions (idempotent)."""
        if self.started:
            return
        for b in self.brokers:
            b.bind_clock(self.clock)
            b.on_output_closed = self._stop.output_closed
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
        self._intake.open({s: Settlement(s, self.clock, self.counts, self._history, self._delayed) for s in subs})
        self.started = True

    @property
    def clock(self) -> Clock:
        """The app's clock (a :class:`~nbkit.Session` sets its virtual clock before the app starts)."""
        return self._clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._clock = self._delayed.clock = clock
        for settlement in self._intake.settlements.values():
            settlement.clock = clock

    @property
    def events(self) -> deque[SettlementEvent]:
        """The most recent settlement events, oldest first (at most ``keep_events`` of them)."""
        return self._history.events

    @property
    def settled(self) -> int:
        """How many settlements this app has recorded, including those no longer in ``events``."""
        return self._history.settled

    @property
    def keep_events(self) -> int | None:
        """How many settlement events ``events`` keeps (None: all)."""
        return self._history.keep

    @keep_events.setter
    def keep_events(self, keep: int | None) -> None:
        _check_keep(keep)
        self._history.keep = keep

    @property
    def max_pending(self) -> int | None:
        """How many delayed copies may be pending before input waits (None: no cap)."""
        return self._delayed.max_pending

    @max_pending.setter
    def max_pending(self, max_pending: int | None) -> None:
        self._delayed.max_pending = max_pending

    @property
    def pending(self) -> list[PendingCopy]:
        """Delayed copies not yet published, soonest first.

        Returns
        -------
        list of PendingCopy
            Each with ``due``, ``destination``, ``subscription`` and ``attempt``.
        """
        return self._delayed.sorted()

    def all_ended(self) -> bool:
        """Every subscription has ended (or, under loopback, can only receive this app's own copies).

        Returns
        -------
        bool
        """
        return all(s.exhausted for s in self.subscriptions)

    def request_stop(self) -> None:
        """Ask a running app to shut down gracefully (what SIGINT/SIGTERM do)."""
        self._stop.requested = True

    @property
    def stop_signal(self) -> int | None:
        """The signal that stopped :meth:`run` (None: none did)."""
        return self._stop.signal

    @property
    def stop_reason(self) -> str:
        """What ended the run, as :meth:`summary` says it: "input ended", a signal's name, "broken pipe"."""
        return self._stop.reason

    @stop_reason.setter
    def stop_reason(self, reason: str) -> None:
        self._stop.reason = reason

    # -- taking a delivery (the intake's work) -----------------------------------------------------
    @property
    def last_delivery(self) -> Delivery | None:
        """The delivery most recently handed to a handler."""
        return self._intake.last_delivery

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
        if not self.started:
            self.start()
        return self._intake.step()

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
        self.start()
        return await self._intake.astep()

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
        return self._delayed.fire_due(until)

    @property
    def pending_full(self) -> bool:
        """Whether ``max_pending`` delayed copies are pending: the app then takes no delivery until some are due.

        Returns
        -------
        bool
        """
        return self._delayed.full

    def next_due(self) -> float | None:
        """When the soonest delayed copy is due, if any.

        Returns
        -------
        float or None
            Epoch seconds on the app's clock.
        """
        return self._delayed.next_due()

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
        return self._delayed.abandon(log=log, reason=reason)

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
        """
        self.start()
        restore = self._stop.install_signals()
        try:
            idle = _IDLE_MIN
            told_waiting = False
            while True:
                if self._stop.requested and not self._stop.keep_going(self.brokers, len(self._pending)):
                    break
                settled = self._intake.burst()
                if settled is None:
                    settled = self.step() is not None
                if settled:
                    idle = _IDLE_MIN
                    continue
                if self.all_ended():
                    if not self._pending or self._stop.stopping:  # stopping: shutdown() waits, within its timeout
                        break
                    if not told_waiting:
                        told_waiting = True
                        logs.emit(
                            logs.APP,
                            logging.INFO,
                            logs.INPUT_ENDED_WAITING,
                            copies=len(self._pending),
                            seconds=round(max(0.0, self.clock.sleep_time(self._delayed.last_due())), 3),
                        )
                self._flush()
                pause, deadline = self._pause(idle)
                self._wait(pause)
                if deadline is not None:
                    self.clock.reach(deadline)
                idle = min(idle * 2, _IDLE_MAX)
        except NbkitError as exc:  # a stream error (a bad stdin line, a damaged file) ends the run
            if self._stop.reason != BROKEN_PIPE:
                self._stop.reason = f"{type(exc).__name__}"
            raise
        finally:
            try:
                self.shutdown()
            finally:
                restore()

    async def run_async(self) -> None:
        """The asyncio form of :meth:`run`: async handlers are awaited on the running loop."""
        self.start()
        try:
            idle = _IDLE_MIN
            while not self._stop.requested:
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
        run_log.flush_run_logs()
        for b in self.brokers:
            if not b.closed and not b.output_closed:
                try:
                    b.flush()
                except NbkitError:
                    if not b.output_closed:
                        raise  # (a broken pipe has stopped the app already: its summary says what was lost)

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
        return RunSummary.collect(
            self.counts, self.brokers, stop=self._stop.reason, signal=self._stop.signal, pending=len(self._pending)
        )

    def shutdown(self) -> None:
        """Wait for delayed copies (up to ``shutdown_timeout``), abandon the rest, close the brokers.

        After a second signal or a broken pipe nothing is waited for: every pending copy is abandoned and
        named (ERROR), and lines read but not delivered are counted and logged.
        """
        if self.stopped:
            return
        stop = self._stop
        try:
            if self.started:
                if stop.stopping or stop.at_once:
                    stop.count_unread(self.brokers)
                self._delayed.wait_out(
                    self.shutdown_timeout,
                    loud=stop.stopping,
                    at_once=stop.at_once,
                    flush=self._flush,
                    cut_short=self._cut_short,
                )
        finally:
            self.stopped = True
            errors = []
            for b in self.brokers if self.started else ():
                try:
                    b.shutdown()
                except NbkitError as exc:
                    errors.append(exc)
            self._intake.release()
            if errors:
                raise errors[0]

    def _cut_short(self) -> str | None:
        """Why the wait for delayed copies ends now (a broken pipe, a second signal), as the abandoned copies' line."""
        if self._stop.reason == BROKEN_PIPE:
            return logs.COPY_ABANDONED_BROKEN_PIPE
        if self._stop.abandon:
            self._stop.count_unread(self.brokers)
            return logs.COPY_ABANDONED_SIGNAL
        return None

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
        self._intake.release()
        return lost


def _check_keep(keep: int | None) -> None:
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 0):
        raise ConfigurationError(f"keep_events must be a whole number >= 0 or None, not {keep!r}")


async def _sleep(seconds: float) -> None:
    """``asyncio.sleep`` (asyncio is imported where it is used: a sync service never loads it)."""
    import asyncio

    await asyncio.sleep(seconds)
