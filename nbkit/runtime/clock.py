"""Injected time: a real clock for services, a virtual clock for tests and notebooks."""

from __future__ import annotations

import datetime as dt
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds since the Unix epoch; the runtime never reads time any other way."""

    virtual: bool

    def now(self) -> float: ...


class RealClock:
    """Wall-clock time (``time.time``): what ``App`` uses unless told otherwise.

    Examples
    --------
    >>> from nbkit import RealClock
    >>> RealClock().now() > 1_700_000_000
    True
    """

    virtual = False

    def now(self) -> float:
        """Seconds since the Unix epoch, now.

        Returns
        -------
        float
            ``time.time()``.
        """
        return time.time()

    def __repr__(self) -> str:
        return "RealClock()"


#: Where virtual clocks start by default: 2024-01-01T00:00:00Z, so notebook outputs are reproducible.
DEFAULT_VIRTUAL_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class VirtualClock:
    """Time that moves only when told to (``advance``), so every run is reproducible.

    Parameters
    ----------
    start : float or datetime.datetime
        Epoch seconds or an aware datetime (default 2024-01-01T00:00:00Z).

    Examples
    --------
    >>> import datetime as dt
    >>> from nbkit import VirtualClock
    >>> clock = VirtualClock(dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    >>> clock.advance(90) - clock.start
    90.0
    >>> clock
    VirtualClock(2024-01-01T00:01:30+00:00)
    """

    virtual = True

    def __init__(self, start: float | dt.datetime = DEFAULT_VIRTUAL_START) -> None:
        if isinstance(start, dt.datetime):
            if start.tzinfo is None:
                raise ValueError("the virtual clock's start must be an aware datetime (e.g. tzinfo=datetime.UTC)")
            start = start.timestamp()
        self._now = float(start)
        self.start = self._now

    def now(self) -> float:
        """The clock's current time, in epoch seconds.

        Returns
        -------
        float
            The start plus every advance so far.
        """
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
        """Move forward to ``t`` (never backwards).

        Parameters
        ----------
        t : float
            Epoch seconds; an earlier time leaves the clock where it is.

        Returns
        -------
        None
        """
        if t > self._now:
            self._now = t

    def __repr__(self) -> str:
        return f"VirtualClock({utc(self._now).isoformat()})"


def utc(seconds: float) -> dt.datetime:
    """An aware UTC datetime from epoch seconds."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)
