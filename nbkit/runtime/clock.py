"""Injected time: a real clock for services, a virtual clock for tests and notebooks.

The clock owns waiting, as Trio's ``MockClock`` does: the app asks the clock how long to really sleep
before a deadline (:meth:`Clock.sleep_time`) and tells it when a deadline has come
(:meth:`Clock.reach`), so the app never asks which clock it has. A real clock sleeps the time out and
does nothing when the deadline comes; a virtual clock never sleeps and jumps to the deadline instead.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_VIRTUAL_START",
    "Clock",
    "RealClock",
    "VirtualClock",
    "utc",
]


@runtime_checkable
class Clock(Protocol):
    """What the runtime needs of time: the time now, how long to wait for a deadline, and its arrival.

    Times are seconds since the Unix epoch; the runtime never reads time any other way.
    :class:`RealClock` and :class:`VirtualClock` implement it (their methods are documented here, once);
    any object with these three methods will do.

    Examples
    --------
    >>> from nbkit import Clock, RealClock, VirtualClock
    >>> def wait_for(clock: Clock, deadline: float) -> float:
    ...     pause = clock.sleep_time(deadline)  # real seconds to sleep (a virtual clock: none)
    ...     clock.reach(deadline)  # the deadline has come (a virtual clock jumps to it)
    ...     return pause
    >>> clock = VirtualClock(100.0)
    >>> wait_for(clock, 160.0), clock.now()
    (0.0, 160.0)
    >>> isinstance(RealClock(), Clock), isinstance(clock, Clock)
    (True, True)
    """

    def now(self) -> float:
        """The time now.

        Returns
        -------
        float
            Epoch seconds.
        """
        ...

    def sleep_time(self, deadline: float) -> float:
        """How many real seconds to sleep before ``deadline`` comes on this clock.

        Parameters
        ----------
        deadline : float
            Epoch seconds.

        Returns
        -------
        float
            Seconds, 0 if the deadline has come (or if the clock jumps to it instead).
        """
        ...

    def reach(self, deadline: float) -> None:
        """``deadline`` has come: a clock that does not move by itself moves to it (never backwards).

        Parameters
        ----------
        deadline : float
            Epoch seconds.

        Returns
        -------
        None
        """
        ...


class RealClock(Clock):
    """Wall-clock time (``time.time``): what ``App`` uses unless told otherwise.

    :meth:`~Clock.now` is ``time.time()``; :meth:`~Clock.sleep_time` is the time left until the deadline
    (never negative); :meth:`~Clock.reach` does nothing: real time reaches a deadline by itself.

    Examples
    --------
    >>> from nbkit import RealClock
    >>> clock = RealClock()
    >>> clock.now() > 1_700_000_000
    True
    >>> clock.sleep_time(clock.now() - 5)  # a deadline already past: no sleep
    0.0
    """

    def __init__(self) -> None:  # a Protocol's subclass would otherwise show (*args, **kwargs)
        pass

    def now(self) -> float:
        return time.time()

    def sleep_time(self, deadline: float) -> float:
        return max(0.0, deadline - time.time())

    def reach(self, deadline: float) -> None:
        pass

    def __repr__(self) -> str:
        return "RealClock()"


#: Where virtual clocks start by default: 2024-01-01T00:00:00Z, so notebook outputs are reproducible.
DEFAULT_VIRTUAL_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class VirtualClock(Clock):
    """Time that moves only when told to, so every run is reproducible.

    It moves with :meth:`advance`, :meth:`set`, or when the app reaches a deadline (:meth:`~Clock.reach`:
    the clock jumps to it instead of sleeping, so :meth:`~Clock.sleep_time` is always 0). It never goes
    backwards, except to its start on :meth:`reset`; :meth:`~Clock.now` is the start plus every move so far.

    Parameters
    ----------
    start : float or datetime.datetime
        Epoch seconds or a datetime (UTC when it has no timezone; default 2024-01-01T00:00:00Z).

    Examples
    --------
    >>> import datetime as dt
    >>> from nbkit import VirtualClock
    >>> clock = VirtualClock(dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    >>> clock.advance(90) - clock.start
    90.0
    >>> clock
    VirtualClock(2024-01-01T00:01:30+00:00)
    >>> clock.sleep_time(clock.now() + 3600)  # waiting takes no real time: the clock jumps instead
    0.0
    >>> clock.reach(clock.start + 3600), clock.reach(clock.start)  # the second is already past: no move
    (None, None)
    >>> clock.now() - clock.start
    3600.0
    """

    def __init__(self, start: float | dt.datetime = DEFAULT_VIRTUAL_START) -> None:
        if isinstance(start, dt.datetime):
            if start.tzinfo is None:  # naive times are UTC, as everywhere nbkit takes a time
                start = start.replace(tzinfo=dt.UTC)
            start = start.timestamp()
        self._now = float(start)
        self.start = self._now

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0); returns the new time.

        Parameters
        ----------
        seconds : float
            How far to move; a negative value is refused.

        Returns
        -------
        float
            The new time, in epoch seconds.
        """
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self._now += seconds
        return self._now

    def reset(self) -> None:
        """Go back to the start time (a Session's reset).

        Returns
        -------
        None
        """
        self._now = self.start

    def set(self, t: float) -> None:
        """Move forward to ``t``; an earlier time is refused, as :meth:`advance` refuses a negative step.

        Parameters
        ----------
        t : float
            Epoch seconds, not before :meth:`now`.

        Returns
        -------
        None

        Raises
        ------
        ValueError
            If ``t`` is earlier than the clock's time.

        Examples
        --------
        >>> clock = VirtualClock(100.0)
        >>> clock.set(130.0)
        >>> clock.now()
        130.0
        >>> clock.set(120.0)
        Traceback (most recent call last):
        ...
        ValueError: a clock cannot go back: set(120.0) is 10 s before its time 130.0; use reset() to start over
        """
        if t < self._now:
            raise ValueError(
                f"a clock cannot go back: set({t!r}) is {self._now - t:g} s before its time {self._now!r}; "
                "use reset() to start over"
            )
        self._now = float(t)

    def sleep_time(self, deadline: float) -> float:
        return 0.0

    def reach(self, deadline: float) -> None:
        if deadline > self._now:
            self._now = deadline

    def __repr__(self) -> str:
        return f"VirtualClock({utc(self._now).isoformat()})"


def utc(seconds: float) -> dt.datetime:
    """An aware UTC datetime from epoch seconds."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)
