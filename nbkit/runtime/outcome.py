"""What a handler returns: ``HandlerOutcome.ack()``, ``.drop()``, ``.retry()`` or ``.retry_after(d)``."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "MAX_DELAY_SECONDS",
    "OUTCOME_KINDS",
    "HandlerOutcome",
    "OutcomeKind",
    "as_outcome",
    "to_seconds",
]


#: What a handler can ask for: the ``kind`` of a :class:`HandlerOutcome` (and ``outcome`` of an event).
OutcomeKind = Literal["ack", "drop", "retry", "retry_after"]
#: The outcome kinds, in the order the events frame lists them.
OUTCOME_KINDS: tuple[OutcomeKind, ...] = get_args(OutcomeKind)

#: The longest delay a copy may be given: 10**11 s (about 3,170 years). A copy's due time becomes its frame
#: timestamp and a datetime; beyond this a due time could pass year 9999, the last one either can hold.
MAX_DELAY_SECONDS = 1e11


def to_seconds(delay: float | int | dt.timedelta) -> float:
    """A delay in seconds from a number of seconds or a timedelta: finite, from 0 to ``MAX_DELAY_SECONDS``.

    Like upstream's ``Duration::from_secs_f64``, an impossible delay is refused when the outcome is built,
    not later when its copy would be scheduled.
    """
    if isinstance(delay, dt.timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, bool) or not isinstance(delay, (int, float)):
        raise TypeError(f"a delay is seconds (int/float) or a timedelta, not {type(delay).__name__}")
    else:
        seconds = float(delay)
    if not seconds >= 0:
        raise ValueError(f"a delay must be zero or positive, not {delay!r}")
    if not math.isfinite(seconds) or seconds > MAX_DELAY_SECONDS:
        raise ValueError(
            f"a delay of {delay!r} is too long: retry_after accepts at most {MAX_DELAY_SECONDS:.0e} s "
            "(about 3,170 years), so that the copy's due time stays a timestamp before year 10000"
        )
    return seconds


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    """How a handler settles a delivery; ``kind`` is ``ack``, ``drop``, ``retry`` or ``retry_after``.

    Build one with the class methods and return it from a handler (returning None means ``ack()``, raising
    means ``drop()``). What each does on a file and on a pipe: the user guide's outcome table. The
    constructor checks what it is given: an unknown kind, a ``retry_after`` without a valid delay, or a
    delay on another kind is a ValueError.

    Parameters
    ----------
    kind : {"ack", "drop", "retry", "retry_after"}
        The outcome (use the class methods rather than this constructor).
    delay : float, optional
        Seconds before the copy, for ``retry_after``.

    Examples
    --------
    >>> from nbkit import HandlerOutcome
    >>> HandlerOutcome.retry_after(2)
    HandlerOutcome.retry_after(2)
    >>> HandlerOutcome.retry_after(2).delay, HandlerOutcome.ack().is_ack
    (2.0, True)
    >>> HandlerOutcome("retyr")
    Traceback (most recent call last):
    ...
    ValueError: unknown outcome kind 'retyr': a HandlerOutcome is one of 'ack', 'drop', 'retry', 'retry_after'
    """

    kind: OutcomeKind
    delay: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in OUTCOME_KINDS:
            raise ValueError(
                f"unknown outcome kind {self.kind!r}: a HandlerOutcome is one of "
                + ", ".join(repr(kind) for kind in OUTCOME_KINDS)
            )
        if self.kind == "retry_after":
            if self.delay is None:
                raise ValueError("a retry_after outcome needs a delay: HandlerOutcome.retry_after(seconds)")
            object.__setattr__(self, "delay", to_seconds(self.delay))
        elif self.delay is not None:
            raise ValueError(f"only retry_after takes a delay, not {self.kind!r} (delay={self.delay!r})")

    @classmethod
    def ack(cls) -> HandlerOutcome:
        """Done with the message (on file and pipe: acknowledgement is unsupported and logged).

        Returns
        -------
        HandlerOutcome
            ``HandlerOutcome.ack()``.
        """
        return _ACK

    @classmethod
    def drop(cls) -> HandlerOutcome:
        """Give the message up (``nack(requeue=False)``); never goes to the dead-letter key.

        Returns
        -------
        HandlerOutcome
            ``HandlerOutcome.drop()``.
        """
        return _DROP

    @classmethod
    def retry(cls) -> HandlerOutcome:
        """Requeue now: unsupported without a declaration, else a copy published at once.

        Returns
        -------
        HandlerOutcome
            ``HandlerOutcome.retry()``.
        """
        return _RETRY

    @classmethod
    def retry_after(cls, delay: float | int | dt.timedelta) -> HandlerOutcome:
        """Drop the delivery and publish a copy after ``delay`` (seconds or timedelta).

        Parameters
        ----------
        delay : float, int or datetime.timedelta
            How long until the copy is published; zero or more.

        Returns
        -------
        HandlerOutcome
            ``HandlerOutcome.retry_after(delay)``.

        Raises
        ------
        ValueError
            If the delay is negative or not finite.
        """
        if type(delay) is int or type(delay) is float:  # a handler returns the same few delays again and again
            outcome = _RETRY_AFTER.get(delay)
            if outcome is None:
                outcome = cls("retry_after", delay)
                if len(_RETRY_AFTER) < 256:
                    _RETRY_AFTER[delay] = outcome
            return outcome
        return cls("retry_after", to_seconds(delay))

    @property
    def is_ack(self) -> bool:
        """Whether this outcome is ``ack()``."""
        return self.kind == "ack"

    @property
    def is_drop(self) -> bool:
        """Whether this outcome is ``drop()``."""
        return self.kind == "drop"

    @property
    def is_retry(self) -> bool:
        """Whether this outcome is ``retry()`` or ``retry_after(d)``."""
        return self.kind in ("retry", "retry_after")

    def __repr__(self) -> str:
        if self.kind == "retry_after":
            return f"HandlerOutcome.retry_after({self.delay:g})"
        return f"HandlerOutcome.{self.kind}()"


_ACK = HandlerOutcome("ack")
_DROP = HandlerOutcome("drop")
_RETRY = HandlerOutcome("retry")
_RETRY_AFTER: dict[float, HandlerOutcome] = {}  # retry_after(d) outcomes by d: immutable, asked for again and again


def as_outcome(result: object) -> HandlerOutcome:
    """Map a handler's return value to an outcome: ``None`` acks, a HandlerOutcome is itself."""
    if result is None:
        return _ACK
    if isinstance(result, HandlerOutcome):
        return result
    raise TypeError(
        f"a handler returns None or a HandlerOutcome, not {type(result).__name__}; "
        "publish results with broker.publish(...) instead"
    )
