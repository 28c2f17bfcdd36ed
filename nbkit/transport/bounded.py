"""Bounded reads of a stream file: a window by time or sequence number, then the first or the last N.

What ``nbkit cat --since/--until/--start-seq/--end-seq/--first/--last`` prints, as ``kcat -o/-c`` and
``tail -n`` give people who inspect production logs, and cheap on a large local or remote file:

- the window's start and stop come from the beacons (:func:`nbkit.transport.windows.find_window`: a few
  small reads of beacons), so a time or sequence start does not scan from the beginning, and the read
  stops at the beacon past the window's end;
- ``first=N`` stops after N messages;
- ``last=N`` reads backwards by beacon intervals: from the last beacon before the window's stop, then from
  twice as far back, and so on, until N messages are found (or the window's start is reached). It reads
  about twice the bytes that hold those N messages, never the file before them.

A ``where`` test (``nbkit redrive``'s ``--where`` clauses, :func:`nbkit.runtime.redrive.parse_where`) is a
function of the message; the caller applies it (the transport layer does not decode envelopes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice

from nbkit.errors import SeekError
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import Message
from nbkit.transport.windows import Window, find_window
from nbkit.wire.ssformat import HEADER_SIZE

__all__ = ["Bounds", "bounded_messages"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """Which messages a bounded read gives.

    Parameters
    ----------
    since_ms, until_ms : int, optional
        Messages at or after ``since_ms`` and before ``until_ms`` (epoch ms).
    start_seq, end_seq : int, optional
        Messages whose sequence number is at least ``start_seq`` and at most ``end_seq`` (each key's own).
    first, last : int, optional
        Only the first or the last N messages inside the other bounds (not both).

    Examples
    --------
    >>> Bounds(since_ms=1_700_000_000_000, last=10).windowed
    True
    """

    since_ms: int | None = None
    until_ms: int | None = None
    start_seq: int | None = None
    end_seq: int | None = None
    first: int | None = None
    last: int | None = None

    def __post_init__(self) -> None:
        if self.first is not None and self.last is not None:
            raise ValueError("give the first N messages or the last N, not both")
        for name in ("first", "last"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} takes a number of messages (0 or more), not {value}")

    @property
    def windowed(self) -> bool:
        """Whether time or sequence bounds are set."""
        return not (self.since_ms is None and self.until_ms is None and self.start_seq is None and self.end_seq is None)


def _window(reader: StreamReader, bounds: Bounds, keys: Iterable[str] | None) -> Window:
    if not bounds.windowed:
        return Window(reader.pos, None)
    return find_window(
        reader,
        keys=None if keys is None else sorted(keys),
        after_ms=None if bounds.since_ms is None else bounds.since_ms - 1,  # --since is inclusive
        end_ms=bounds.until_ms,
        start_seq=bounds.start_seq,
        end_seq=bounds.end_seq,
    )


def _in_window(
    reader: StreamReader, window: Window, start: int, test: Callable[[Message], bool] | None
) -> Iterator[Message]:
    """The messages from frame position ``start`` to the window's stop that the window and ``test`` keep."""
    if start != reader.pos:
        reader.seek_offset(start)
    if test is None and window.stop is None and not window.filters:
        yield from reader  # unbounded: the reader's own loop
        return
    for msg in reader:
        if window.stop is not None and msg.offset >= window.stop:
            return
        if (not window.filters or window.keep(msg.seq, msg.timestamp_ms)) and (test is None or test(msg)):
            yield msg


def bounded_messages(
    reader: StreamReader,
    bounds: Bounds,
    *,
    keys: Iterable[str] | None = None,
    where: Callable[[Message], bool] | None = None,
) -> Iterator[Message]:
    """The messages of ``reader`` inside ``bounds`` (and ``where``), in file order.

    Parameters
    ----------
    reader : StreamReader
        A reader at the start of its read (its ``keys`` filter applies; ``follow`` keeps reading past the
        end unless ``until``/``end_seq``/``first`` bound the read).
    bounds : Bounds
        The window, and the first or last N.
    keys : iterable of str, optional
        The keys the window's bounds refer to (the reader's ``keys``; None: every key).
    where : callable, optional
        ``Message -> bool``: keep only the messages it accepts.

    Yields
    ------
    Message

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss", beacon_interval=1024) as writer:
    ...     for n in range(100):
    ...         _ = writer.write("orders", b'{"id": %d}' % n)
    >>> with StreamReader("orders.ss") as reader:
    ...     [m.seq for m in bounded_messages(reader, Bounds(last=3))]
    [98, 99, 100]
    """
    test = where
    window = _window(reader, bounds, keys)
    if bounds.first is not None:
        if bounds.first:
            yield from islice(_in_window(reader, window, window.start, test), bounds.first)
        return
    if bounds.last is None:
        yield from _in_window(reader, window, window.start, test)
        return
    yield from _last(reader, window, bounds.last, test)
    if reader.follow and window.stop is None:  # ``tail -n N -f``: then what is appended
        yield from _in_window(reader, window, reader.pos, test)


def _last(reader: StreamReader, window: Window, n: int, test: Callable[[Message], bool] | None) -> list[Message]:
    """The last ``n`` messages of the window, read from beacons further and further back until they are
    found; the reader is left just after the last frame it read (a follower goes on from there)."""
    if n == 0:
        return []
    follow, reader.follow = reader.follow, False  # the tail as it is now
    interval = reader.interval
    stop = reader.size() if window.stop is None else window.stop
    span = 1
    found: deque[Message] = deque(maxlen=n)
    try:
        while True:
            boundary = (max(stop - 1, 0) // interval - span + 1) * interval
            start = window.start
            if boundary > window.start and boundary >= interval:
                try:
                    reader.resync(boundary // interval)
                except SeekError:  # the file ends inside that beacon: look one interval further back
                    span *= 2
                    continue
                start = max(reader.pos, window.start)
            found.clear()
            reader.seek_offset(start)  # from there, whether or not a pass before this one ended the read
            found.extend(_in_window(reader, window, start, test))
            if len(found) >= n or start <= max(window.start, HEADER_SIZE):
                break
            span *= 2
    finally:
        reader.follow = follow
    if follow and reader.end is not None and reader.end.reason in ("end", "truncated"):
        reader.seek_offset(reader.end.offset)  # a follower goes on from the end of the data
    return list(found)
