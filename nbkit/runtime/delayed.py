"""Delayed copies: the ``retry_after`` copies an app holds in memory until they are due.

A settlement that decides on a delayed copy hands it to :class:`DelayedCopies` (:meth:`~DelayedCopies.hold`);
the app's loop asks it when the next one is due, fires the due ones (publishing each and updating its
settlement's event), and at shutdown or a crash abandons the rest (they are lost: the process held them).
``max_pending`` bounds how many are held: at the cap the app takes no delivery until some are due
(backpressure, never loss).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nbkit.errors import NbkitError
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker
from nbkit.runtime.checkpoint import Checkpointer
from nbkit.runtime.clock import Clock
from nbkit.runtime.events import EventHistory, SettlementEvent
from nbkit.runtime.run_summary import RunCounts

__all__ = ["DelayedCopies", "PendingCopy", "copy_lost"]

#: The longest nap while copies are waited out in real time, so that a second signal can cut the wait short
_NAP = 0.1


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

    @property
    def settled(self) -> logs.SettledDelivery:
        """The delivery this copy is of, as its log records name it."""
        event = self.event
        return logs.SettledDelivery(self.subscription, event.stream_key, event.seq, self.attempt, self.line)


class DelayedCopies:
    """An app's delayed copies, soonest first: held, fired when due, or abandoned.

    Parameters
    ----------
    clock : Clock
        The app's clock: what "due" is measured on, and what firing a copy moves to its due time.
    counts : RunCounts
        The run's counts (copies written, lost, abandoned; backpressure).
    history : EventHistory
        The app's settlement events: a copy's event is updated there when it is written or abandoned.
    max_pending : int, optional
        How many copies may be held before :attr:`full` says input waits (None: no cap).
    """

    __slots__ = ("clock", "counts", "history", "max_pending", "heap", "_order", "_was_full")

    def __init__(self, clock: Clock, counts: RunCounts, history: EventHistory, max_pending: int | None) -> None:
        self.clock = clock
        self.counts = counts
        self.history = history
        self.max_pending = max_pending
        #: the pending copies as a heap (``heap[0]`` is due first); never replaced, so it may be held on to
        self.heap: list[PendingCopy] = []
        self._order = itertools.count()
        self._was_full = False  # max_pending was reached at the last check

    def __len__(self) -> int:
        return len(self.heap)

    def hold(
        self,
        due: float,
        broker: Broker,
        destination: str,
        payload: bytes,
        headers: dict[str, str],
        event: SettlementEvent,
        event_number: int,
        attempt: int,
        checkpointer: Checkpointer | None,
        line: int | None,
    ) -> None:
        """Keep the copy a settlement decided on until ``due`` (``event`` is that settlement's, number
        ``event_number`` of the app's)."""
        copy = PendingCopy(
            due,
            next(self._order),
            broker,
            destination,
            payload,
            headers,
            event,
            event_number,
            event.subscription,
            attempt,
            checkpointer,
            line,
        )
        heapq.heappush(self.heap, copy)

    def sorted(self) -> list[PendingCopy]:
        """The pending copies, soonest first."""
        return sorted(self.heap)

    def next_due(self) -> float | None:
        """When the soonest copy is due (None: none is pending)."""
        return self.heap[0].due if self.heap else None

    def last_due(self) -> float:
        """When the last pending copy is due (at least one must be pending)."""
        return max(self.heap).due

    @property
    def full(self) -> bool:
        """Whether ``max_pending`` copies are pending: input then waits. The first time the cap is reached is
        logged (WARNING) and every time is counted (``counts.backpressure``)."""
        full = self.max_pending is not None and len(self.heap) >= self.max_pending
        if full and not self._was_full:
            self.counts.backpressure += 1
            if self.counts.backpressure == 1:  # once: the summary counts the rest
                logs.emit(logs.APP, logging.WARNING, logs.PENDING_FULL, max_pending=self.max_pending)
        self._was_full = full
        return full

    def fire_due(self, until: float | None = None) -> list[SettlementEvent]:
        """Publish every copy due by ``until`` (default: now), in due order; the clock reaches each due time
        as its copy is written. Returns the copies' updated events."""
        heap = self.heap
        if not heap:
            return []
        limit = self.clock.now() if until is None else until
        fired = []
        while heap and heap[0].due <= limit:
            copy = heapq.heappop(heap)
            self.clock.reach(copy.due)
            fired.append(self._fire(copy))
        return fired

    def _fire(self, copy: PendingCopy) -> SettlementEvent:
        """Publish one copy; its event records where it was written (or why it was lost)."""
        try:
            published = copy.broker.publish(copy.destination, copy.payload, copy.headers)
        except NbkitError as exc:
            error = copy_lost(self.counts, copy.broker, copy.settled, copy.destination, exc)
            return self.history.copy_lost(copy.event_number, copy.event, error)
        self.counts.copies += 1
        if copy.checkpointer is not None:
            copy.checkpointer.copy_written(copy.event.stream_key, copy.event.seq)
        return self.history.copy_written(copy.event_number, copy.event, published.time, published.seq)

    def abandon(self, *, log: bool = True, reason: str = logs.COPY_ABANDONED) -> int:
        """Give up every pending copy (they are lost), logging one ERROR line each when ``log``; returns how many."""
        n = 0
        heap = self.heap
        while heap:
            copy = heapq.heappop(heap)
            self.counts.abandoned += 1
            if log:
                logs.emit(
                    logs.DISPATCH,
                    logging.ERROR,
                    reason,
                    delivery=copy.settled,
                    subscription=copy.subscription,
                    destination=copy.destination,
                    attempt=copy.attempt,
                )
            self.history.copy_abandoned(copy.event_number, copy.event, self.clock.now())
            n += 1
        return n

    def wait_out(
        self,
        timeout: float | None,
        *,
        loud: bool,
        at_once: bool,
        flush: Callable[[], None],
        cut_short: Callable[[], str | None],
    ) -> None:
        """Wait for the pending copies and fire each as it falls due, for at most ``timeout`` seconds (None: all
        of them, as upstream); the ones still pending then are abandoned (and named).

        The wait is said first (INFO; WARNING when ``loud``, a stop under way; nothing when ``at_once``, a stop
        that waits for nothing). Before each copy
        ``cut_short()`` may end it at once: it returns the line the abandoned copies are named with (a broken
        pipe, a second signal), else None. ``flush`` writes out what was gathered before each real-time nap.
        """
        clock = self.clock
        heap = self.heap
        deadline = None if timeout is None else clock.now() + timeout
        if heap and not at_once:
            wait = max(0.0, clock.sleep_time(self.last_due()))
            logs.emit(
                logs.APP,
                logging.WARNING if loud else logging.INFO,
                logs.SHUTDOWN_WAITING,
                copies=len(heap),
                seconds=round(wait if deadline is None else min(wait, timeout or 0.0), 3),
                shutdown_timeout=timeout,
                then="a second signal abandons them",
            )
        while heap:
            due = heap[0].due
            reason = cut_short()
            if reason is not None:
                self.abandon(reason=reason)
                break
            late = deadline is not None and due > deadline  # waited for until the deadline, as upstream
            until = deadline if late and deadline is not None else due
            pause = clock.sleep_time(until)
            if pause > 0:
                flush()
                time.sleep(min(_NAP, pause))  # short naps, so a second signal can cut the wait short
            if pause <= _NAP:
                clock.reach(until)
                if late:
                    self.abandon(reason=logs.COPY_ABANDONED)
                    break
            self.fire_due()


def copy_lost(
    counts: RunCounts, broker: Broker, settled: logs.SettledDelivery, destination: str, exc: NbkitError
) -> str:
    """Count and log (ERROR; upstream: WARN) that a copy could not be published; returns the event's error.

    A broken pipe is logged once, in the run's summary, not per copy: the stage stops there.
    """
    counts.copies_lost += 1
    if not broker.output_closed:
        logs.emit(
            logs.DISPATCH,
            logging.ERROR,
            logs.COPY_FAILED,
            delivery=settled,
            subscription=settled.subscription,
            destination=destination,
            error=exc,
        )
    return f"copy lost: {exc}"
