"""Drive an app cell by cell on a virtual clock: step, run, advance time, look at what happened.

A Session starts no threads and never sleeps: time moves only with ``advance`` (or ``run``, which
jumps to the next delayed copy when nothing else is left), so every notebook run is reproducible.
Async handlers run on the notebook's own event loop: ``await session.astep()`` / ``await session.arun()``.
"""

from __future__ import annotations

import datetime as dt
import functools
import html
import math
import os
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import pandas as pd

from nbkit.errors import ConfigurationError
from nbkit.runtime import logs
from nbkit.runtime.app import App
from nbkit.runtime.clock import DEFAULT_VIRTUAL_START, VirtualClock, utc
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import SettlementEvent
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.settle import Action
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.runtime.vocabulary import ACTION_TERMS
from nbkit.tabular.events import events_frame
from nbkit.transport.file_info import summarize
from nbkit.wire.timestamps import isoformat_z

__all__ = [
    "ACTIONS",
    "Advanced",
    "Pending",
    "PendingView",
    "Session",
    "Steps",
]


ACTIONS = tuple(action.value for action in Action)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _iso(seconds: float | dt.datetime) -> str:
    """A clock time as ISO 8601 with a ``Z``."""
    when = seconds if isinstance(seconds, dt.datetime) else utc(seconds)
    return isoformat_z(when)


def _table(cls: str, head: tuple[str, ...], rows: Sequence[tuple[object, ...]], caption: str = "") -> str:
    """An HTML table of plain values (escaped), left-aligned like a DataFrame's."""
    cells = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in rows
    )
    top = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    heads = "".join(f"<th style='text-align:left'>{h}</th>" for h in head)
    return f"<table class='{cls}'>{top}<tr>{heads}</tr>{cells}</table>"


def _then(e: SettlementEvent) -> str:
    """What the settlement wrote or will write, and which attempt comes of it."""
    if e.error and e.error.startswith("copy lost"):
        return f"copy lost: {e.error.removeprefix('copy lost: ')}"
    if e.abandoned:
        return "delayed copy lost (not written)"
    terms = ACTION_TERMS.get(e.action)
    if terms is not None and terms.copies:
        when = f"written as #{e.copy_seq}" if e.written_at is not None else f"due {_iso(e.due or e.time)}"
        return f"{when}; delivered next as attempt {e.attempt + 1}"
    if terms is not None and terms.dead_letter:
        return f"retry count {e.attempt} = the attempts made"
    return ""


class Steps(list[SettlementEvent]):
    """The events one call produced; shows as a table in a notebook and as sentences in text.

    The last column, "then", says what the settlement wrote: a retry copy and the attempt it will
    be delivered as (the copy of attempt n carries retry count n, so it arrives as attempt n + 1), or
    the retry count a dead-letter copy carries (the attempts made)."""

    def __repr__(self) -> str:
        if not self:
            return "(nothing delivered)"
        return "\n".join(e.describe() for e in self)

    def _repr_html_(self) -> str:
        if not self:
            return "<p>(nothing delivered)</p>"
        head = ("transport", "key", "seq", "attempt", "outcome", "action", "destination", "then")
        rows = [
            (e.transport, e.stream_key, e.seq, e.attempt, e.outcome, e.action, e.destination or "", _then(e))
            for e in self
        ]
        return _table("nbkit-steps", head, rows)


class Advanced(Steps):
    """What :meth:`Session.advance` did: the clock moved, and the delayed copies that fell due were
    written. Each item is the settlement whose copy was written (updated with ``written_at`` and
    ``copy_seq``); the display lists the copies -- when, where, and the attempt each will be
    delivered as -- not the deliveries, which happened before."""

    def __init__(self, fired: list[SettlementEvent], *, start: float, end: float, next_due: float | None) -> None:
        super().__init__(fired)
        self.start = start
        self.end = end
        self.next_due = next_due

    def _headline(self) -> str:
        n = len(self)
        moved = f"clock {_iso(self.start)} -> {_iso(self.end)} (+{self.end - self.start:g} s)"
        if n:
            return f"{moved}: {n} delayed cop{'y' if n == 1 else 'ies'} written"
        later = f"next due {_iso(self.next_due)}" if self.next_due is not None else "none pending"
        return f"{moved}: no delayed copy fell due ({later})"

    def _copy_line(self, e: SettlementEvent) -> tuple[str, str, str, str, int, int]:
        written = _iso(e.written_at) if e.written_at is not None else "not written"
        to = f"{e.destination} #{e.copy_seq}" if e.copy_seq is not None else f"{e.destination} (lost)"
        return (written, e.transport, f"{e.stream_key} #{e.seq}, attempt {e.attempt}", to, e.attempt, e.attempt + 1)

    def __repr__(self) -> str:
        lines = [self._headline()]
        for e in self:
            written, transport, source, to, count, next_attempt = self._copy_line(e)
            if e.copy_seq is None:
                lines.append(f"  {transport}: copy of {source} to {e.destination!r}: {_then(e)}")
            else:
                lines.append(
                    f"  {written} {transport}: copy of {source} written to {to} "
                    f"(retry count {count}), to be delivered as attempt {next_attempt}"
                )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        if not self:
            return f"<p>{html.escape(self._headline())}</p>"
        head = ("written at", "transport", "copy of", "written to", "retry count", "delivered next as attempt")
        return _table("nbkit-advanced", head, [self._copy_line(e) for e in self], caption=self._headline())


@dataclass(frozen=True, slots=True)
class PendingView:
    """A delayed copy waiting in the process: when it is due, where it goes, and the attempt it will
    be delivered as (``attempt``: the copy of attempt 1 carries retry count 1 and arrives as attempt
    2); ``copy_of`` names the delivery it copies ("orders #1, attempt 1")."""

    due: dt.datetime
    destination: str
    subscription: str
    attempt: int
    copy_of: str = ""

    def __repr__(self) -> str:
        return f"PendingView(due={_iso(self.due)}, destination={self.destination!r}, attempt={self.attempt})"

    def describe(self) -> str:
        """One line: "due ...: copy of orders #1, attempt 1 -> 'orders', to be delivered as attempt 2"."""
        return (
            f"due {_iso(self.due)}: copy of {self.copy_of} -> {self.destination!r}, "
            f"to be delivered as attempt {self.attempt}"
        )


class Pending(list["PendingView"]):
    """The delayed copies waiting in the process, earliest first; each shows the attempt it will be
    delivered as."""

    def __repr__(self) -> str:
        if not self:
            return "(no delayed copy pending)"
        return "\n".join(p.describe() for p in self)

    def _repr_html_(self) -> str:
        if not self:
            return "<p>(no delayed copy pending)</p>"
        head = ("due", "destination", "copy of", "delivered next as attempt")
        return _table("nbkit-pending", head, [(_iso(p.due), p.destination, p.copy_of, p.attempt) for p in self])


def _logged(method: Callable[Concatenate[Session, _P], _R]) -> Callable[Concatenate[Session, _P], _R]:
    """Run a Session method with the runtime's log lines going to ``session.log``."""

    @functools.wraps(method)
    def wrapper(self: Session, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            with logs.capture_lines(self.log):
                return method(self, *args, **kwargs)
        finally:
            self._changed()

    return wrapper


def _alogged(
    method: Callable[Concatenate[Session, _P], Awaitable[_R]],
) -> Callable[Concatenate[Session, _P], Coroutine[Any, Any, _R]]:
    """:func:`_logged` for a coroutine method: the log lines are captured until it returns."""

    @functools.wraps(method)
    async def wrapper(self: Session, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            with logs.capture_lines(self.log):
                return await method(self, *args, **kwargs)
        finally:
            self._changed()

    return wrapper


def _default_start(app: App) -> float:
    """Where a session's default clock starts: 2024-01-01, or just after the latest record of an existing file."""
    start = DEFAULT_VIRTUAL_START.timestamp()
    for broker in app.brokers:
        if isinstance(broker, FileBroker) and os.path.exists(broker.path) and os.path.getsize(broker.path):
            streams = summarize(broker.path).streams
            latest_ms = max((st.last_timestamp_ms for st in streams), default=0)
            start = max(start, float(math.floor(latest_ms / 1000) + 1))
    return start


class Session:
    """Step an :class:`~nbkit.App` through its deliveries on a virtual clock.

    Nothing happens until you call :meth:`step`, :meth:`advance` or :meth:`run`, so every output is
    reproducible. With async handlers, use ``await session.astep()`` and ``await session.arun()`` in a
    notebook cell: they await the handlers on the notebook's event loop (no thread is started). The
    session keeps every settlement (``events``), the runtime's log lines (``log``) and can start over
    (:meth:`reset`). ``nbkit.widgets.SessionPanel(session)`` puts buttons on it.

    Parameters
    ----------
    app : App
        A fresh (not started) app; the session gives it the virtual clock.
    clock : VirtualClock, optional
        The clock (default: one starting at 2024-01-01T00:00:00Z, or at the next whole second after the
        latest record of a broker's existing file, whichever is later: copies and publishes are stamped
        with this clock, and must not come out earlier than what the file already holds).
    max_deliveries : int
        The most deliveries :meth:`run` makes (a handler that always retries never ends).

    See Also
    --------
    nbkit.widgets.SessionPanel : A panel that follows a session: log, pending copies, timeline.
    nbkit.VirtualClock : The clock a session moves.
    nbkit.App : The same brokers run on the real clock, until a signal.
    nbkit.plot.dashboard : Attempts, retry delays and dead letters of a session's events.

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")
    ... def handle(delivery):
    ...     return HandlerOutcome.retry_after(5)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", '{"id": 1}')
    >>> session.step()
    file orders #1 attempt 1: retry_after -> copy to 'orders' due in 5 s, to be delivered as attempt 2
    >>> session.advance(5)
    clock 2024-01-01T00:00:00Z -> 2024-01-01T00:00:05Z (+5 s): 1 delayed copy written
      2024-01-01T00:00:05Z file: copy of orders #1, attempt 1 written to orders #2 (retry count 1), ...
    >>> session.run()
    file orders #2 attempt 2: retry_after -> copy written to dead-letter key 'orders.dead' with retry count 2 (...)
    >>> session.counts()["dead-letter"], str(session.now)
    (1, '2024-01-01 00:00:05+00:00')
    """

    def __init__(self, app: App, *, clock: VirtualClock | None = None, max_deliveries: int = 10_000) -> None:
        if not isinstance(app, App):
            raise ConfigurationError(f"Session takes an nbkit.App, not {app!r}")
        if app.started:
            raise ConfigurationError("the app has already started; give Session a fresh App")
        self.app = app
        self.clock = clock or VirtualClock(_default_start(app))
        self.max_deliveries = max_deliveries
        app.clock = self.clock
        app.keep_events = None  # a session shows every settlement
        for broker in app.brokers:
            broker.bind_clock(self.clock)
        self._snapshot: dict[str, int] | None = None
        #: The runtime's log lines (INFO and up) from every call on this session, oldest first.
        self.log: list[str] = []
        self._watchers: list[Callable[[], Callable[[], None] | None]] = []

    # -- watching ----------------------------------------------------------------------------------
    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` after every call that may change the session.

        That is after :meth:`step`, :meth:`astep`, :meth:`run`, :meth:`arun`, :meth:`advance`,
        :meth:`crash`, :meth:`close` and :meth:`reset`, whether they were called from a cell, a magic or
        a widget's button. A bound method is held weakly (a widget that is gone stops being called); an
        exception in a callback propagates to the caller of the session method.

        Parameters
        ----------
        callback : callable
            Called with no arguments.

        Returns
        -------
        callable
            Call it to stop watching.

        Examples
        --------
        >>> from nbkit import App, FileBroker, Session
        >>> session = Session(App(FileBroker("watched.ss")))  # a new file: the clock starts at 2024-01-01
        >>> calls = []
        >>> stop = session.watch(lambda: calls.append(str(session.now)))
        >>> _ = session.advance(5)
        >>> stop()
        >>> _ = session.advance(5)
        >>> calls
        ['2024-01-01 00:00:05+00:00']
        """
        ref: Callable[[], Callable[[], None] | None]
        if hasattr(callback, "__self__") and hasattr(callback, "__func__"):
            ref = weakref.WeakMethod(callback)
        else:
            ref = lambda: callback  # noqa: E731  (a plain function is held as it is)
        self._watchers.append(ref)

        def stop() -> None:
            if ref in self._watchers:
                self._watchers.remove(ref)

        return stop

    def _changed(self) -> None:
        """Tell the watchers (see :meth:`watch`); forget those whose widget is gone."""
        for ref in list(self._watchers):
            callback = ref()
            if callback is None:
                self._watchers.remove(ref)
            else:
                callback()

    # -- doing -------------------------------------------------------------------------------------
    def _begin(self) -> None:
        if self._snapshot is None:
            self._snapshot = {
                b.path: os.path.getsize(b.path) if os.path.exists(b.path) else 0
                for b in self.app.brokers
                if isinstance(b, FileBroker)
            }
            self.app.start()

    @_logged
    def step(self, n: int = 1) -> Steps:
        """Deliver and settle up to ``n`` messages that are ready now; returns their events.

        Parameters
        ----------
        n : int
            The most deliveries to make.

        Returns
        -------
        Steps
            A list of :class:`~nbkit.SettlementEvent` that shows one line per event.

        Raises
        ------
        ConfigurationError
            If a handler is async and an event loop is running (a notebook cell): ``await session.astep()``
            there instead; the delivery waits for it.
        """
        return self._deliver(n, copies=False)

    @_alogged
    async def astep(self, n: int = 1) -> Steps:
        """:meth:`step` for async handlers: ``await session.astep()`` in a notebook cell.

        The handlers are awaited on the running event loop (the notebook's), as ``step`` runs sync ones.

        Parameters
        ----------
        n : int
            The most deliveries to make.

        Returns
        -------
        Steps
            A list of :class:`~nbkit.SettlementEvent` that shows one line per event.

        Examples
        --------
        >>> import asyncio
        >>> from nbkit import App, StdioBroker, Session
        >>> broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs.retry")
        ... async def handle(delivery):
        ...     await asyncio.sleep(0)  # e.g. a call to another service
        >>> session = Session(App(broker))
        >>> asyncio.run(session.astep(2))  # in a notebook cell: await session.astep(2)
        pipe jobs #0 attempt 1: ack -> acknowledgement unsupported (logged); nothing written
        pipe jobs #1 attempt 1: ack -> acknowledgement unsupported (logged); nothing written
        """
        return await self._adeliver(n, copies=False)

    @_logged
    def run(self, *, max_deliveries: int | None = None) -> Steps:
        """Deliver until nothing is ready and no delayed copy is pending, jumping the clock to each copy's due time.

        Stops after ``max_deliveries`` (a handler that always retries never ends).

        Parameters
        ----------
        max_deliveries : int, optional
            The most deliveries (default: the session's ``max_deliveries``).

        Returns
        -------
        Steps
            The settlement events of this run.
        """
        return self._deliver(self.max_deliveries if max_deliveries is None else max_deliveries, copies=True)

    @_alogged
    async def arun(self, *, max_deliveries: int | None = None) -> Steps:
        """:meth:`run` for async handlers: ``await session.arun()`` in a notebook cell.

        Parameters
        ----------
        max_deliveries : int, optional
            The most deliveries (default: the session's ``max_deliveries``).

        Returns
        -------
        Steps
            The settlement events of this run.

        Examples
        --------
        >>> import asyncio
        >>> from nbkit import App, HandlerOutcome, StdioBroker, Session
        >>> broker = StdioBroker(stdin=["[jobs] a"], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs", max_attempts=2, dead_letter="jobs.dead")
        ... async def handle(delivery):
        ...     return HandlerOutcome.retry_after(5)
        >>> session = Session(App(broker))
        >>> asyncio.run(session.arun())  # in a notebook cell: await session.arun()
        pipe jobs #0 attempt 1: retry_after -> copy to 'jobs' due in 5 s, to be delivered as attempt 2
        >>> len(session.output()), str(session.now)  # the copy was written at its due time
        (1, '2024-01-01 00:00:05+00:00')
        """
        return await self._adeliver(self.max_deliveries if max_deliveries is None else max_deliveries, copies=True)

    def _deliver(self, limit: int, *, copies: bool) -> Steps:
        """Up to ``limit`` settlements: :meth:`step` (``copies`` False: stop when nothing is ready) and
        :meth:`run` (``copies`` True: then jump the clock to the next delayed copy and go on)."""
        self._begin()
        out = Steps()
        while len(out) < limit:
            event = self.app.step()
            if event is not None:
                out.append(event)
            elif not (copies and self._fire_next_copy()):
                break
        return out

    async def _adeliver(self, limit: int, *, copies: bool) -> Steps:
        """:meth:`_deliver` for :meth:`astep` and :meth:`arun`: the handlers awaited on the running loop."""
        self._begin()
        out = Steps()
        while len(out) < limit:
            event = await self.app.astep()
            if event is not None:
                out.append(event)
            elif not (copies and self._fire_next_copy()):
                break
        return out

    def _fire_next_copy(self) -> bool:
        """Nothing is ready: jump the clock to the next delayed copy and write it; False if none is pending."""
        due = self.app.next_due()
        if due is None:
            return False
        self.app.fire_due(until=due)
        return True

    @_logged
    def advance(self, seconds: float | dt.timedelta) -> Advanced:
        """Move the clock forward and publish the delayed copies that fall due, in due order.

        Returns what happened meanwhile (an :class:`Advanced`, a list of the settlements whose copies
        were written): it shows each copy written -- when, to which key and sequence number, and the
        attempt it will be delivered as -- or, when none fell due, when the next one is.

        Parameters
        ----------
        seconds : float or datetime.timedelta
            How far to move the clock.

        Returns
        -------
        Advanced
            The (updated) settlement events of the copies written.
        """
        self._begin()
        if isinstance(seconds, dt.timedelta):
            seconds = seconds.total_seconds()
        if seconds < 0:
            raise ValueError(f"time only moves forward; got {seconds} s")
        start = self.clock.now()
        target = start + seconds
        fired = self.app.fire_due(until=target)
        self.clock.set(target)
        return Advanced(fired, start=start, end=target, next_due=self.app.next_due())

    @_logged
    def crash(self) -> int:
        """Kill the service as a crash would: delayed copies still waiting are lost.

        Returns
        -------
        int
            How many copies were lost.
        """
        self._begin()
        return self.app.crash()

    @_logged
    def close(self) -> None:
        """Shut down gracefully: wait out (on the virtual clock) the delayed copies, write EOS if asked.

        Returns
        -------
        None
        """
        self._begin()
        self.app.shutdown()

    def reset(self) -> None:
        """Start over: files are cut back to their size at the first step, the clock goes back.

        Copies the session wrote are removed, captured pipe output is cleared and events are forgotten.

        Returns
        -------
        None
        """
        if self._snapshot is not None:
            if not self.app.stopped:
                self.app.crash()
            for path, size in self._snapshot.items():
                if os.path.exists(path) and os.path.getsize(path) > size:
                    os.truncate(path, size)
        for broker in self.app.brokers:
            broker.reset()
        fresh = App(*self.app.brokers, shutdown_timeout=self.app.shutdown_timeout, clock=self.clock, keep_events=None)
        self.clock.reset()
        self.app = fresh
        self._snapshot = None
        self.log.clear()
        self._changed()

    # -- looking -----------------------------------------------------------------------------------
    @property
    def now(self) -> dt.datetime:
        """The virtual clock's time, as an aware UTC datetime."""
        return utc(self.clock.now())

    @property
    def events(self) -> pd.DataFrame:
        """Every settlement so far as a DataFrame, one row per :class:`~nbkit.SettlementEvent`."""
        return events_frame(self.app.events)

    @property
    def pending(self) -> Pending:
        """The delayed copies waiting in the process, earliest first, each with the attempt it will
        be delivered as (one more than the attempt it copies)."""
        return Pending(
            PendingView(
                utc(c.due),
                c.destination,
                c.subscription,
                c.attempt + 1,
                f"{c.event.stream_key} #{c.event.seq}, attempt {c.attempt}",
            )
            for c in self.app.pending
        )

    @property
    def has_async_handlers(self) -> bool:
        """Whether a handler registered on the app's brokers is an ``async def`` (a coroutine function).

        Such a session is driven with ``await session.astep()`` / ``await session.arun()`` inside a
        running event loop (a notebook cell); the notebook's panel and magics look here to choose.
        A plain function that returns an awaitable is not seen here: ``step()`` says so when it meets one.

        Returns
        -------
        bool
            True if any registered handler is a coroutine function.

        Examples
        --------
        >>> from nbkit import App, StdioBroker, Session
        >>> broker = StdioBroker(stdin=[], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs.retry")
        ... async def handle(delivery):
        ...     return None
        >>> Session(App(broker)).has_async_handlers
        True
        """
        return any(r.is_async for b in self.app.brokers for r in b.registrations)

    @property
    def last_event(self) -> SettlementEvent | None:
        """The latest settlement (updated once its delayed copy is written)."""
        return self.app.events[-1] if self.app.events else None

    @property
    def last_delivery(self) -> Delivery | None:
        """The latest :class:`~nbkit.Delivery` handed to a handler, or None."""
        return self.app.last_delivery

    def counts(self) -> dict[str, int]:
        """How many settlements took each action so far.

        Returns
        -------
        dict of str to int
            Every :class:`~nbkit.Action` value, with 0 for those not taken.
        """
        c = Counter(e.action for e in self.app.events)
        return {a: c.get(a, 0) for a in ACTIONS}

    def output(self) -> list[str]:
        """Lines captured from every pipe broker's stdout (when stdout was a list).

        Returns
        -------
        list of str
            The lines, in the order they were written.
        """
        lines: list[str] = []
        for b in self.app.brokers:
            if isinstance(b, StdioBroker) and b.sink.lines is not None:
                lines.extend(b.sink.lines)
        return lines

    def summary(self) -> str:
        """One line: the time, how many settled and pending, the counts per action, the subscriptions.

        Returns
        -------
        str
        """
        c = self.counts()
        subs = ", ".join(f"{r.name} ({b.transport})" for b in self.app.brokers for r in b.registrations)
        return (
            f"Session at {self.now.isoformat().replace('+00:00', 'Z')}: {self.app.settled} settled, "
            f"{len(self.app.pending)} pending; "
            + ", ".join(f"{k} {v}" for k, v in c.items())
            + f"; subscriptions: {subs}"
        )

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        c = self.counts()
        rows = "".join(f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>" for k, v in c.items())
        pend = "".join(f"<li>{html.escape(p.describe())}</li>" for p in self.pending)
        return (
            f"<div class='nbkit-session'><p><b>Session</b> at {self.now.isoformat().replace('+00:00', 'Z')}, "
            f"{self.app.settled} settled</p><table>{rows}</table>"
            f"<p>pending copies: {len(self.app.pending)}</p><ul>{pend}</ul></div>"
        )
