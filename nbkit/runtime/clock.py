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
    """Wall-clock time (``time.time``)."""

    virtual = False

    def now(self) -> float:
        return time.time()

    def __repr__(self) -> str:
        return "RealClock()"


#: Where virtual clocks start by default: 2024-01-01T00:00:00Z, so notebook outputs are reproducible.
DEFAULT_VIRTUAL_START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


class VirtualClock:
    """Time that moves only when told to (``advance``), so every run is reproducible."""

    virtual = True

    def __init__(self, start: float | dt.datetime = DEFAULT_VIRTUAL_START) -> None:
        if isinstance(start, dt.datetime):
            if start.tzinfo is None:
                raise ValueError(
                    "the virtual clock's start must be an aware datetime (e.g. tzinfo=datetime.UTC)"
                )
            start = start.timestamp()
        self._now = float(start)
        self.start = self._now

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` (>= 0); returns the new time."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        self._now += seconds
        return self._now

    def reset(self) -> None:
        """Go back to the start time (a Session's reset)."""
        self._now = self.start

    def set(self, t: float) -> None:
        """Move forward to ``t`` (never backwards)."""
        if t > self._now:
            self._now = t

    def __repr__(self) -> str:
        return f"VirtualClock({utc(self._now).isoformat()})"


def utc(seconds: float) -> dt.datetime:
    """An aware UTC datetime from epoch seconds."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC)
