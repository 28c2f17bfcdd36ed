"""Where a file subscription or reader starts: ``FilePosition`` (spec runtime §4.3)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final, Literal, get_args

from nbkit.errors import TimestampRangeError
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import MAX_U64

__all__ = ["FilePosition", "PositionKind", "parse_time", "to_epoch_ms"]


def to_epoch_ms(t: int | float | dt.datetime) -> int:
    """Epoch milliseconds from an int/float of ms or a datetime (``pandas.Timestamp`` too).

    A datetime without a timezone is UTC: the one rule for naive times everywhere nbkit takes a time
    (``read_stream``'s ``start``/``end``, ``FilePosition.timestamp``, the CLI's times), since a stream
    file's timestamps are UTC and its text renderings print them without an offset.

    Examples
    --------
    >>> import datetime as dt
    >>> to_epoch_ms(dt.datetime(2024, 1, 1)) == to_epoch_ms(dt.datetime(2024, 1, 1, tzinfo=dt.UTC))
    True
    """
    if isinstance(t, dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.UTC)
        delta = t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    elif isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"a timestamp is epoch milliseconds or a datetime, not {type(t).__name__}")
    else:
        ms = int(t)
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise TimestampRangeError(f"'{ms}' is not a valid timestamp: outside year 1970..9999")
    return ms


def parse_time(text: str) -> int:
    """Epoch milliseconds from a time as people type it: ISO 8601 (``2024-01-01T10:00``, ``...:05.250``, a
    ``Z`` or ``+02:00`` suffix; without one, UTC) or epoch milliseconds (digits). What the CLI's time options
    (``cat --since/--until``, ``redrive --where time...``) take.

    Parameters
    ----------
    text : str
        The time.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not a time (the message says what to write).

    Examples
    --------
    >>> parse_time("2024-01-01T10:00"), parse_time("2024-01-01T10:00:00Z"), parse_time("1704103200000")
    (1704103200000, 1704103200000, 1704103200000)
    """
    text = text.strip()
    if text.isdigit():
        return to_epoch_ms(int(text))
    try:
        moment = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time; write 2024-01-01T10:00[:05[.250]] (UTC unless it ends in Z or +HH:MM) "
            "or epoch milliseconds"
        ) from None
    return to_epoch_ms(moment)


#: What a :class:`FilePosition` counts; ``beginning`` and ``end`` carry no value, the others an integer.
PositionKind = Literal["beginning", "end", "sequence", "timestamp", "beacon"]
#: Every kind, in the order of the class methods.
POSITION_KINDS: Final[tuple[PositionKind, ...]] = get_args(PositionKind)
_VALUELESS: Final = ("beginning", "end")


@dataclass(frozen=True, slots=True)
class FilePosition:
    """A start position in a stream file.

    ``beginning()`` and ``end()`` (the tip), ``sequence(n)`` (message n of the subscription's key,
    inclusive), ``timestamp(t)`` (first message strictly later than t) and ``beacon(n)`` (resync
    at the n-th beacon, as upstream's ``rewind(At(n))``). Build one with those class methods, then
    pass it as a subscription's ``start_at``, a reader's ``start`` or to :meth:`StreamReader.seek
    <nbkit.StreamReader.seek>`.

    Parameters
    ----------
    kind : {"beginning", "end", "sequence", "timestamp", "beacon"}
        What the position counts (use the class methods rather than this constructor).
    value : int, optional
        The sequence number, epoch milliseconds or beacon index; None for beginning and end.

    Examples
    --------
    >>> from nbkit import FilePosition
    >>> FilePosition.sequence(42)
    FilePosition.sequence(42)
    >>> FilePosition.timestamp(1_700_000_000_000).value
    1700000000000
    >>> FilePosition.end() == FilePosition("end")
    True
    >>> FilePosition("start")
    Traceback (most recent call last):
    ...
    ValueError: 'start' is not a FilePosition kind; the kinds are beginning, end, sequence, timestamp, beacon
    """

    kind: PositionKind
    value: int | None = None

    def __post_init__(self) -> None:
        """Refuse an unknown kind, and a value that does not match the kind (the class methods check its range)."""
        if self.kind not in POSITION_KINDS:
            raise ValueError(f"{self.kind!r} is not a FilePosition kind; the kinds are {', '.join(POSITION_KINDS)}")
        if self.kind in _VALUELESS:
            if self.value is not None:
                raise ValueError(f"FilePosition.{self.kind}() takes no value, not {self.value!r}")
        elif isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ValueError(
                f"a {self.kind} position needs an integer value (use FilePosition.{self.kind}(n)), not {self.value!r}"
            )

    @classmethod
    def beginning(cls) -> FilePosition:
        """The start of the file: every message is read.

        Returns
        -------
        FilePosition
            ``FilePosition.beginning()``.
        """
        return cls("beginning")

    @classmethod
    def end(cls) -> FilePosition:
        """The tip: what the file holds now is skipped, later appends are read (a live subscription's default).

        Returns
        -------
        FilePosition
            ``FilePosition.end()``.
        """
        return cls("end")

    @classmethod
    def sequence(cls, n: int) -> FilePosition:
        """Message number ``n`` of the stream key, inclusive (that message is read again).

        Parameters
        ----------
        n : int
            The sequence number, an unsigned 64-bit integer (a file numbers each key from 1).

        Returns
        -------
        FilePosition
            ``FilePosition.sequence(n)``.

        Raises
        ------
        ValueError
            If ``n`` is not an unsigned 64-bit integer.
        """
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_U64:
            raise ValueError(f"a sequence position is an unsigned 64-bit integer, not {n!r}")
        return cls("sequence", n)

    @classmethod
    def timestamp(cls, t: int | float | dt.datetime) -> FilePosition:
        """The first message strictly later than ``t``.

        Parameters
        ----------
        t : int, float or datetime.datetime
            Epoch milliseconds, or a datetime (one without a timezone is UTC).

        Returns
        -------
        FilePosition
            ``FilePosition.timestamp(ms)``, with ``t`` in epoch milliseconds.
        """
        return cls("timestamp", to_epoch_ms(t))

    @classmethod
    def beacon(cls, n: int) -> FilePosition:
        """Resynchronise at the ``n``-th beacon (upstream's ``rewind(At(n))``), then read on from there.

        Parameters
        ----------
        n : int
            The beacon index (0 is the start of the file).

        Returns
        -------
        FilePosition
            ``FilePosition.beacon(n)``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"a beacon index is a non-negative integer, not {n!r}")
        return cls("beacon", n)

    def __repr__(self) -> str:
        if self.value is None:
            return f"FilePosition.{self.kind}()"
        return f"FilePosition.{self.kind}({self.value})"
