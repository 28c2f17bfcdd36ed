"""Where a window of a stream file starts and stops, found from the beacons instead of by reading.

A read of the messages later than a time (or from a sequence number on), for one stream key, several or
all of them, need not read what lies before: each beacon's markers give, per stream (a key on one shard),
the largest sequence number and timestamp written so far (format spec §6.1). So for every stream of a
wanted key a binary search over the beacons that name it (spec §11.2, the search upstream's ``seek``
makes for one stream) finds the last beacon before which all that stream's messages are still outside the
window, and the read starts at the earliest of those beacons. The same markers say where a window's end
lies: once a stream's largest timestamp (or sequence number) so far has reached the end, its later
messages are all past it; the read stops at the first beacon where that holds for every stream of every
wanted key. A key written on several shards is searched shard by shard: each shard has its own sequence
numbers and its own clock, and a beacon names some of them only.

Which streams a key has: the last beacon names every stream written before it when it holds fewer markers
than a beacon has room for (the writer names all it can, spec §6.2; 127 at the default interval); else
(more streams than that, named round robin) every beacon is read. Streams the searches' beacons name
besides are searched too.

What it costs: a few small reads of beacons (``2 log2(beacons)`` per stream, plus any beacon that names
none of them), then the frames from the start beacon to the stop beacon. A key that no beacon names gives
no bound: the window then starts at the beginning (or stops at the end), so nothing is missed. What it
assumes, as upstream's seek does: a stream's timestamps and sequence numbers do not go backwards in file
order (every writer stamps them so), and a stream first written after the file's last beacon starts past
a window's end. The window found is a superset: a reader still keeps only the rows inside the time and
sequence bounds (:meth:`Window.keep`).

With ``keys=None`` (every key) the stream keys are those the beacons name, found by reading each beacon
(``beacons`` small reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nbkit.transport.file_reader import StreamReader
from nbkit.wire.ssformat import Beacon, num_markers

__all__ = ["Window", "beacon_keys", "find_window"]


@dataclass(frozen=True, slots=True)
class Window:
    """The part of a file a windowed read covers, and the bounds of the rows it keeps.

    Parameters
    ----------
    start : int
        The frame position the read starts at (just after the header, or after a beacon).
    stop : int or None
        No frame starting at or after this offset belongs to the window (None: read to the end).
    after_ms, end_ms : int or None
        Keep messages later than ``after_ms`` and earlier than ``end_ms`` (epoch ms; None: open).
    start_seq, end_seq : int or None
        Keep messages whose sequence number is at least ``start_seq`` and at most ``end_seq``.

    Examples
    --------
    >>> Window(128, None, after_ms=1_700_000_000_000).keep(1, 1_700_000_000_001)
    True
    """

    start: int
    stop: int | None
    after_ms: int | None = None
    end_ms: int | None = None
    start_seq: int | None = None
    end_seq: int | None = None

    @property
    def filters(self) -> bool:
        """Whether the window has row bounds (else every frame read is in it)."""
        return not (self.after_ms is None and self.end_ms is None and self.start_seq is None and self.end_seq is None)

    def keep(self, seq: int, timestamp_ms: int) -> bool:
        """Whether a message with this sequence number and timestamp lies inside the window's bounds.

        Parameters
        ----------
        seq, timestamp_ms
            The message's sequence number and epoch milliseconds.

        Returns
        -------
        bool
            True inside every bound (the time bounds are exclusive, the sequence bounds inclusive).
        """
        return (
            (self.after_ms is None or timestamp_ms > self.after_ms)
            and (self.end_ms is None or timestamp_ms < self.end_ms)
            and (self.start_seq is None or seq >= self.start_seq)
            and (self.end_seq is None or seq <= self.end_seq)
        )


#: A stream of the file: (stream key, shard id). Sequence numbers and the beacons' markers are per stream.
Stream = tuple[str, int]


class _Beacons:
    """The file's beacons read on demand, each once (small reads, not the reader's 4 MiB buffer)."""

    def __init__(self, reader: StreamReader, first: int) -> None:
        self.reader = reader
        self.interval = reader.interval
        self.capacity = num_markers(self.interval)  # markers a writer puts in a beacon at most (spec §6.2)
        self.first = max(1, -(-first // self.interval))  # the first boundary at or after ``first``
        self.last = (reader.size() - 1) // self.interval  # the last boundary inside the file
        self._seen: dict[int, Beacon | None] = {}

    def get(self, b: int) -> Beacon | None:
        if b not in self._seen:
            self._seen[b] = self.reader.peek_beacon(b * self.interval)
        return self._seen[b]

    def read_all(self) -> None:
        for b in range(self.first, self.last + 1):
            self.get(b)

    def named(self) -> set[Stream]:
        """The streams named by the beacons read so far."""
        return {(m.stream_key, m.shard_id) for beacon in self._seen.values() if beacon for m in beacon.markers}

    def keys(self) -> set[str]:
        self.read_all()
        return {key for key, _ in self.named()}

    def streams(self, keys: set[str]) -> set[Stream]:
        """The streams of ``keys`` written before the last beacon: the last beacon names them all when it
        holds fewer markers than a beacon has room for (the writer names every stream it can, spec §6.2);
        else (a writer's round robin over more streams than that) every beacon is read."""
        last = self.get(self.last)
        if last is None or len(last.markers) >= self.capacity:
            self.read_all()
        return {stream for stream in self.named() if stream[0] in keys}


def _judge(beacon: Beacon | None, stream: Stream, left: Callable[[int, int], bool]) -> bool | None:
    """True (left of the answer) / False (right) / None (undecided: no marker of ``stream``, or unreadable)."""
    if beacon is not None:
        for m in beacon.markers:
            if m.stream_key == stream[0] and m.shard_id == stream[1]:
                return left(m.seq, m.timestamp_ms)
    return None


def _search(beacons: _Beacons, stream: Stream, left: Callable[[int, int], bool]) -> tuple[int, int | None]:
    """The last beacon judged left and the first judged right (None: none), for one stream (§11.2's
    binary search, undecided beacons skipped one at a time). A stream's markers are its largest sequence
    number and timestamp so far, so the judgement is monotonic over the beacons that name it."""
    lo, hi = beacons.first, beacons.last
    best_left, best_right = 0, None
    while lo <= hi:
        mid = (lo + hi) // 2
        decided = None
        for b in (*range(mid, hi + 1), *range(mid - 1, lo - 1, -1)):
            verdict = _judge(beacons.get(b), stream, left)
            if verdict is not None:
                decided = (b, verdict)
                break
        if decided is None:
            break
        b, is_left = decided
        if is_left:
            best_left = max(best_left, b)
            lo = b + 1
        else:
            best_right = b if best_right is None else min(best_right, b)
            hi = b - 1
    return best_left, best_right


def find_window(
    reader: StreamReader,
    *,
    keys: Iterable[str] | None = None,
    after_ms: int | None = None,
    end_ms: int | None = None,
    start_seq: int | None = None,
    end_seq: int | None = None,
) -> Window:
    """Find a window's byte range from the beacons, starting no earlier than the reader's ``pos``, and
    move the reader to its start.

    Then read with ``until=window.stop`` (:meth:`~nbkit.transport.file_reader.StreamReader.read_column_buffers`)
    and keep the rows :meth:`Window.keep` accepts.

    Parameters
    ----------
    reader : StreamReader
        An open reader of the file; its ``pos`` is where the read would start without a window.
    keys : iterable of str, optional
        The stream keys read (None: every key the beacons name).
    after_ms, end_ms : int, optional
        Messages later than ``after_ms``, earlier than ``end_ms`` (epoch ms).
    start_seq, end_seq : int, optional
        Messages with a sequence number from ``start_seq`` to ``end_seq`` (inclusive), per stream.

    Returns
    -------
    Window
        ``start`` is the reader's new ``pos``: where it was, or the first frame after a beacon
        (:meth:`StreamReader.resync`); ``stop`` a beacon boundary or None.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("w.ss", beacon_interval=1024) as writer:
    ...     for n in range(200):
    ...         _ = writer.write("orders", b"x" * 40, timestamp_ms=1_700_000_000_000 + n * 1000)
    >>> with StreamReader("w.ss") as reader:
    ...     window = find_window(reader, keys=["orders"], after_ms=1_700_000_150_000)
    >>> window.start > 128 * 50
    True
    """
    pos = reader.pos
    bounded_start = after_ms is not None or start_seq is not None
    bounded_end = end_ms is not None or end_seq is not None
    window = Window(pos, None, after_ms, end_ms, start_seq, end_seq)
    if not (bounded_start or bounded_end):
        return window
    beacons = _Beacons(reader, pos)
    if beacons.first > beacons.last:
        return window  # no beacon after the start: nothing to skip by
    wanted = set(keys) if keys is not None else beacons.keys()
    if not wanted:
        return window

    def before_start(seq: int, ts: int) -> bool:  # every message of the stream up to here is before the window
        return (after_ms is None or ts <= after_ms) and (start_seq is None or seq < start_seq)

    def before_stop(seq: int, ts: int) -> bool:  # the stream's messages may still reach into the window
        return (end_ms is None or ts < end_ms) and (end_seq is None or seq <= end_seq)

    start_beacon: int | None = None
    stop_beacon: int | None = 0
    searched: set[Stream] = set()
    pending = beacons.streams(wanted)
    while pending:  # each stream of a wanted key, and any the searches' beacons name besides
        stream = min(pending)
        pending.discard(stream)
        searched.add(stream)
        if bounded_start:
            left, _ = _search(beacons, stream, before_start)
            start_beacon = left if start_beacon is None else min(start_beacon, left)
        if bounded_end and stop_beacon is not None:
            _, right = _search(beacons, stream, before_stop)
            stop_beacon = None if right is None else max(stop_beacon, right)
        if not pending:
            pending = {s for s in beacons.named() if s[0] in wanted} - searched
    if wanted - {key for key, _ in searched}:  # a key no beacon names: no bound
        start_beacon, stop_beacon = 0, None
    start = pos
    if start_beacon and start_beacon * beacons.interval > pos:
        reader.resync(start_beacon)
        start = reader.pos
    stop = None
    if bounded_end and stop_beacon:
        stop = max(start, stop_beacon * beacons.interval)
    return Window(start, stop, after_ms, end_ms, start_seq, end_seq)


def beacon_keys(reader: StreamReader) -> set[str]:
    """The stream keys the file's beacons name (small reads of each beacon; the reader does not move).

    A key written before some beacon is named by it unless the file holds more keys than a beacon has
    markers for (spec §6.2: 127 at the default interval) or the key was written after the last beacon: a
    quick look for the keys, not proof that a key is absent.

    Parameters
    ----------
    reader : StreamReader
        An open reader of the file.

    Returns
    -------
    set of str
        The keys named.
    """
    return _Beacons(reader, reader.pos).keys()
