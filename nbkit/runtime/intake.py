"""Taking deliveries: the next one from the subscriptions, handed to its subscription's settlement.

:class:`Intake` is how an :class:`~nbkit.App` takes a delivery, whichever way it is driven: one at a time
(:meth:`Intake.step`, :meth:`Intake.astep`) or the burst of ready deliveries :meth:`Intake.burst` hands to
the subscription's :meth:`Settlement.burst <nbkit.runtime.settlement.Settlement.burst>`. Each way hands the
delivery to the subscription's :class:`~nbkit.runtime.settlement.Settlement`, which calls the handler
(:meth:`~nbkit.runtime.settlement.Settlement.handle`, the one place it is called) and settles it.
Subscriptions take turns (round robin); due delayed copies are published before a delivery is taken, and
none is taken while ``max_pending`` copies wait (backpressure). An async handler is awaited on the
caller's event loop (``astep``); a synchronous ``step`` outside any loop runs it on the intake's own loop,
and inside one holds the delivery for the next ``astep``. No thread is ever started.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from nbkit.errors import ConfigurationError
from nbkit.runtime.broker import Subscription
from nbkit.runtime.delayed import DelayedCopies
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import SettlementEvent
from nbkit.runtime.outcome import HandlerOutcome
from nbkit.runtime.settlement import Settlement, poll
from nbkit.runtime.stopping import Stop
from nbkit.transport.polling import NEED_MORE

if TYPE_CHECKING:
    import asyncio

__all__ = ["Intake", "loop_running"]


class Intake:
    """Takes an app's deliveries to their subscriptions' settlements, which call the handlers and settle them.

    Parameters
    ----------
    delayed : DelayedCopies
        The app's delayed copies: those due are published before a delivery is taken.
    stop : Stop
        The app's stop state: a burst ends when a stop is requested.
    """

    __slots__ = (
        "subscriptions",
        "settlements",
        "delayed",
        "_pending",
        "stop",
        "last_delivery",
        "held",
        "_rr",
        "_loop",
    )

    def __init__(self, delayed: DelayedCopies, stop: Stop) -> None:
        self.subscriptions: list[Subscription] = []
        self.settlements: dict[Subscription, Settlement] = {}  # each subscription's settlement
        self.delayed = delayed
        self._pending = delayed.heap  # the same list, never replaced: "is a copy pending" at one look-up
        #: the app's stop state: a burst ends when a stop is requested
        self.stop = stop
        #: the delivery most recently handed to a handler (set by :meth:`Settlement.handle`)
        self.last_delivery: Delivery | None = None
        #: a delivery whose async handler step() could not run (a loop was running): astep() settles it
        self.held: tuple[Subscription, Delivery, Awaitable[Any]] | None = None
        self._rr = 0  # the subscription whose turn is next
        self._loop: asyncio.AbstractEventLoop | None = None  # for async handlers under step() outside a loop

    def open(self, settlements: dict[Subscription, Settlement]) -> None:
        """Take deliveries from these subscriptions from now on, each settled by its settlement."""
        self.settlements = settlements
        self.subscriptions[:] = settlements  # (the app's ``subscriptions`` is this list)

    def next_delivery(self) -> tuple[Subscription, Delivery] | None:
        """The next delivery from any subscription, round robin; None if none is ready now."""
        subs = self.subscriptions
        n = len(subs)
        for i in range(n):
            sub = subs[(self._rr + i) % n]
            if sub.ended:
                continue
            item = poll(sub)
            if item is None or item is NEED_MORE:
                continue
            self._rr = (self._rr + i + 1) % n
            return sub, item
        return None

    def step(self) -> SettlementEvent | None:
        """Publish due copies, then take and settle one delivery; None if none was ready (see ``App.step``)."""
        if self.held is None and not self._pending:  # the usual case, take()'s work inline
            subs = self.subscriptions
            if len(subs) == 1:  # next_delivery() of one subscription
                sub = subs[0]
                if sub.ended:
                    return None
                delivery = poll(sub)
                if delivery is None or delivery is NEED_MORE:
                    return None
            else:
                got = self.next_delivery()
                if got is None:
                    return None
                sub, delivery = got
            settlement = self.settlements[sub]
            result = settlement.handle(self, delivery)
        else:
            taken = self.take()
            if taken is None:
                return None
            sub, delivery, result = taken
            settlement = self.settlements[sub]
        if result is None or type(result) is HandlerOutcome:  # the usual results: settled at once
            return settlement.settle(delivery, result)
        return self.complete(sub, delivery, result)

    async def astep(self) -> SettlementEvent | None:
        """:meth:`step` in an event loop: an async handler is awaited on that loop."""
        taken = self.take()
        if taken is None:
            return None
        sub, delivery, result = taken
        if result is not None and type(result) is not HandlerOutcome and inspect.isawaitable(result):
            result = await _capture(result)
        return self.settlements[sub].settle(delivery, result)

    def burst(self) -> int | None:
        """Take and settle the deliveries ready now: how many (0: none was ready), or None when :meth:`step`
        must take the next one (more than one subscription, a delayed copy pending, a held delivery)."""
        subs = self.subscriptions
        if self.held is not None or self._pending or len(subs) != 1:
            return None
        return self.settlements[subs[0]].burst(self)

    def take(self) -> tuple[Subscription, Delivery, Any] | None:
        """Publish due copies and hand the next delivery to its handler: (sub, delivery, result).

        The result may still be awaitable. A delivery held back by :meth:`step` comes first; none is taken
        while ``max_pending`` copies wait.
        """
        if self.held is not None:
            held, self.held = self.held, None
            return held
        delayed = self.delayed
        delayed.fire_due()
        if delayed.full:
            return None  # backpressure: no delivery until copies are due
        got = self.next_delivery()
        if got is None:
            return None
        sub, delivery = got
        return sub, delivery, self.settlements[sub].handle(self, delivery)

    def complete(self, sub: Subscription, delivery: Delivery, result: Any) -> SettlementEvent:
        """:meth:`step` after the handler ran: an async handler's result is awaited on the intake's own loop (or
        the delivery is held for :meth:`astep` when a loop runs here), then the delivery is settled."""
        if result is not None and type(result) is not HandlerOutcome and inspect.isawaitable(result):
            if loop_running():
                self.held = (sub, delivery, result)
                raise ConfigurationError(
                    f"the handler of {sub.name!r} is async and an event loop is running here (a notebook "
                    "cell, an async def): step() cannot wait for it without blocking that loop; use "
                    "`await session.astep()` / `await session.arun()` (or `await app.astep()`) instead"
                )
            if self._loop is None or self._loop.is_closed():
                import asyncio  # only for async handlers: `nbkit run` of a sync service never loads it

                self._loop = asyncio.new_event_loop()
            result = self._loop.run_until_complete(_capture(result))
        return self.settlements[sub].settle(delivery, result)

    def release(self) -> None:
        """Close the intake's own event loop, and a held async handler that will never be awaited now."""
        if self.held is not None:
            awaitable = self.held[2]
            self.held = None
            if inspect.iscoroutine(awaitable):
                awaitable.close()
        if self._loop is not None:
            self._loop.close()


async def _capture(awaitable: Awaitable[Any]) -> Any:
    """Await an async handler's result; its exception is returned, as :meth:`Settlement.handle
    <nbkit.runtime.settlement.Settlement.handle>` does for a sync one."""
    try:
        return await awaitable
    except Exception as exc:
        return exc


def loop_running() -> bool:
    """Whether an asyncio event loop is running in this thread (in a notebook's kernel it always is).

    Where one runs, async handlers must be awaited on it (``astep``); a sync ``step`` cannot.

    Returns
    -------
    bool

    Examples
    --------
    >>> import asyncio
    >>> from nbkit.runtime.intake import loop_running
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
