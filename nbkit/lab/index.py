"""A sparse row index of one ``.ss`` file, built in the background, so the viewer can page through it.

The viewer's table shows messages by row number (row ``r`` is the ``r``-th message in file order, of
every key or of one key). A full decode per request would cost seconds on a file of ten million
messages, and an offset per message would cost 80 MB; instead one pass of the frame scanner
(:meth:`StreamReader.read_column_buffers <nbkit.StreamReader.read_column_buffers>`, a salvage read with
``on_bad_frames="skip"``) keeps, for every :data:`CHECKPOINT_EVERY`-th message, where its frame starts,
and for every block of that many messages the largest sequence number and timestamp in it. Any row is
then at most ``CHECKPOINT_EVERY`` frames from a checkpoint; a page read starts there (:mod:`nbkit.lab.pages`).

The same pass gathers what ``nbkit info`` prints (streams, damaged regions, how the data ends), as a
:class:`~nbkit.transport.file_info.FileSummary`, so the viewer's summary and ``nbkit info --json``
cannot disagree. The pass runs on a thread in pieces of :data:`PIECE_BYTES`; the first piece is enough
to open the viewer, and later requests see the index grow (a large file indexing, or a live file a
service appends to: the reader follows the file, so appended bytes are indexed where it stopped).
"""

from __future__ import annotations

import os
import threading
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np

from nbkit.transport.damage import DamagedRegion
from nbkit.transport.file_info import FileSummary, StreamSummary
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import ReadEnd
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEY, is_dead_letter_key
from nbkit.wire.scan import ColumnBuffers
from nbkit.wire.ssformat import HEADER_SIZE, FileHeader

__all__ = ["CHECKPOINT_EVERY", "PIECE_BYTES", "FileStamp", "RowIndex", "StreamIndex", "stamp_of"]

#: A checkpoint (frame offset) is kept for every this many rows: a page read walks at most this many frames.
CHECKPOINT_EVERY = 1024
#: Bytes the indexing pass scans between two updates of the shared index.
PIECE_BYTES = 16 << 20


#: Bytes just before the indexed end kept to tell an append (they are unchanged) from a rewrite in place.
WINDOW_BYTES = 4096


@dataclass(frozen=True, slots=True)
class FileStamp:
    """What identifies one state of a file: its inode, size and modification time (nanoseconds)."""

    inode: int
    size: int
    mtime_ns: int


def stamp_of(path: str) -> FileStamp:
    """The :class:`FileStamp` of ``path`` now (``os.stat``; raises ``OSError`` as it does)."""
    st = os.stat(path)
    return FileStamp(st.st_ino, st.st_size, st.st_mtime_ns)


def _read_at(path: str, start: int, end: int) -> bytes:
    """Bytes ``start`` .. ``end`` of the file (fewer at its end)."""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(max(0, end - start))


def _retry_copies(cols: ColumnBuffers) -> np.ndarray:
    """Which rows of a piece are retry copies (an envelope with a retry count), as ``nbkit info`` counts them.

    Only payloads that start with ``rs`` (an ``rs1:``/``rs2:`` envelope) are decoded; the rest are originals.
    """
    ends = np.frombuffer(cols.data_end, dtype=np.int64)
    copy = np.zeros(len(ends), dtype=bool)
    if not len(ends):
        return copy
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + len(cols.separator)
    data = np.frombuffer(cols.data, dtype=np.uint8)
    long_enough = ends - starts >= 2
    candidates = np.flatnonzero(long_enough)
    first = data[starts[candidates]]
    second = data[starts[candidates] + 1]
    raw = cols.data
    for i in candidates[(first == ord("r")) & (second == ord("s"))]:
        payload = bytes(raw[starts[i] : ends[i]])
        copy[i] = bool(envelope.retry_count(envelope.decode(payload)[0]))
    return copy


@dataclass
class RowIndex:
    """Checkpoints of one row numbering (every key, or one key): offsets and per-block maxima.

    ``offsets[i]`` is where row ``i * CHECKPOINT_EVERY`` starts; ``max_seq[i]`` and ``max_ts[i]`` are the
    largest sequence number and timestamp among rows ``i * CHECKPOINT_EVERY`` to ``(i + 1) *
    CHECKPOINT_EVERY - 1`` (the block may still be filling).
    """

    count: int = 0
    offsets: array = field(default_factory=lambda: array("q"))
    max_seq: array = field(default_factory=lambda: array("q"))
    max_ts: array = field(default_factory=lambda: array("q"))

    def add(self, offsets: np.ndarray, seqs: np.ndarray, stamps: np.ndarray) -> None:
        """Append the rows of one scanned piece (parallel arrays, file order)."""
        n = len(offsets)
        if n == 0:
            return
        k = CHECKPOINT_EVERY
        first = self.count
        # close the block that is still filling with the piece's first rows
        fill = (-first) % k
        if fill and self.max_seq:
            head = min(fill, n)
            self.max_seq[-1] = max(self.max_seq[-1], int(seqs[:head].max()))
            self.max_ts[-1] = max(self.max_ts[-1], int(stamps[:head].max()))
        starts = np.arange(fill, n, k)
        if len(starts):
            self.offsets.extend(offsets[starts].tolist())
            self.max_seq.extend(np.maximum.reduceat(seqs.astype(np.int64), starts).tolist())
            self.max_ts.extend(np.maximum.reduceat(stamps, starts).tolist())
        self.count += n

    def checkpoint(self, row: int) -> tuple[int, int]:
        """(offset of the checkpoint at or before ``row``, that checkpoint's row)."""
        i = min(row // CHECKPOINT_EVERY, len(self.offsets) - 1)
        return self.offsets[i], i * CHECKPOINT_EVERY

    def checkpoint_before_offset(self, offset: int) -> tuple[int, int]:
        """(offset, row) of the last checkpoint whose frame starts at or before ``offset``."""
        i = max(0, bisect_right(self.offsets, offset) - 1)
        return self.offsets[i], i * CHECKPOINT_EVERY

    def block_reaching(self, values: array, target: int) -> int | None:
        """The first block whose largest value is at least ``target``, or None when no block reaches it."""
        hits = np.flatnonzero(np.frombuffer(values, dtype=np.int64) >= target)
        return int(hits[0]) if len(hits) else None


@dataclass(frozen=True, slots=True)
class _Tail:
    """A replay read's verdict on the bytes past the indexed end, for a file of ``size`` bytes."""

    size: int
    end: ReadEnd
    damaged: tuple[DamagedRegion, ...]


class StreamIndex:
    """The index of one stream file, extended by a background pass; every method is thread-safe.

    Parameters
    ----------
    path : str
        The stream file (already checked to lie inside the server's root, see :mod:`nbkit.lab.paths`).
    display_path : str
        The path as the user named it (relative to the server's root), used in the summary.

    Raises
    ------
    NbkitError
        When the file's header cannot be read (not a stream file, missing, a directory, ...).
    """

    def __init__(self, path: str, display_path: str | None = None) -> None:
        self.path = path
        self.display_path = display_path if display_path is not None else path
        self._lock = threading.Lock()
        self._reader = StreamReader(path, follow=True, on_bad_frames="skip", errors="stop")
        self.header: FileHeader = self._reader.header
        #: the file state the index was started on (a later change other than growth needs a new index)
        self.stamp = stamp_of(path)
        self.all = RowIndex()
        self.by_key: dict[str, RowIndex] = {}
        # (key, shard) -> [count, first_seq, last_seq, first_ts, last_ts], in order of first appearance
        self._streams: dict[tuple[str, int], list[int]] = {}
        self._eos_offset: int | None = None
        self._damaged: list[DamagedRegion] = []
        self._row_after: list[int] = []  # row (every key) of the first message after each damaged region
        self._indexed_to = self._reader.pos  # file offset up to which rows are in the index
        self._size_seen = self.stamp.size
        self._worker: threading.Thread | None = None
        self._error: BaseException | None = None
        #: the header's bytes, and (indexed end, the WINDOW_BYTES before it): what an append leaves as it was
        self._head = _read_at(path, 0, HEADER_SIZE)
        self._window: tuple[int, bytes] = (self._indexed_to, b"")
        #: what a replay read makes of the bytes past the indexed end (a torn or damaged tail), for one size
        self._tail: _Tail | None = None

    # -- building ----------------------------------------------------------------------------------
    def still_valid(self, now: FileStamp) -> bool:
        """Whether this index still describes the file, now ``now``: the same inode, and either the same
        size and modification time or a larger size (bytes appended), with its header and the bytes just
        before the indexed end as they were. Anything else (replaced, truncated, touched, rewritten in place
        even to a larger size or with its old modification time) needs a new index."""
        was = self.stamp
        if now.inode != was.inode or now.size < was.size:
            return False
        if now.size == was.size and now.mtime_ns != was.mtime_ns:
            return False
        with self._lock:
            end, window = self._window
        try:
            return (
                _read_at(self.path, 0, HEADER_SIZE) == self._head
                and _read_at(self.path, end - len(window), end) == window
            )
        except OSError:
            return False

    def refresh(self, wait: float = 0.0) -> None:
        """Start (or keep) indexing what the file holds now; wait up to ``wait`` seconds for it to finish.

        Nothing is started when the file has not changed since the last pass got to its end (or gave its
        tail a verdict): a finished index stays finished (``progress()["done"]``)."""
        try:
            size = os.stat(self.path).st_size
        except OSError:
            size = -1
        with self._lock:
            idle = self._worker is None or not self._worker.is_alive()
            settled = size == self._size_seen and (
                self._indexed_to >= size or (self._tail is not None and self._tail.size == size)
            )
            if idle and not settled and self._reader.end is None and self._error is None:
                self._worker = threading.Thread(target=self._run, name=f"nbkit-index {self.path}", daemon=True)
                self._worker.start()
            worker = self._worker
        if wait > 0 and worker is not None:
            worker.join(wait)

    @property
    def busy(self) -> bool:
        """Whether the indexing pass is running."""
        worker = self._worker
        return worker is not None and worker.is_alive()

    def _run(self) -> None:
        try:
            while self._piece():
                pass
            self._judge_tail()
        except BaseException as exc:  # reported by summary(); the index keeps what it had
            self._error = exc

    def _judge_tail(self) -> None:
        """Give the bytes past the indexed end the verdict ``nbkit info`` gives them (a replay read from
        there): a torn last frame, or a damaged region with no beacon after it. The follow reader waits
        at such bytes (a writer may still complete them); the verdict holds while the size does not change."""
        with self._lock:
            pos, size = self._indexed_to, self._size_seen
            known = self._tail is not None and self._tail.size == size
        if self._reader.end is not None or pos >= size or known:
            return
        with StreamReader(self.path, on_bad_frames="skip", errors="stop") as replay:
            replay.seek_offset(pos)
            for _ in replay:  # the follow reader found no frame here; a replay may find none either
                pass
            end = replay.end
            damaged = tuple(replay.damaged)
        assert end is not None
        with self._lock:
            if self._indexed_to == pos and self._size_seen == size:
                self._tail = _Tail(size, end, damaged)

    def _piece(self) -> bool:
        """Index one piece; False when the reader is at the current end of the data (or ended)."""
        reader = self._reader
        before = reader.pos
        cols = reader.read_column_buffers(until=before + PIECE_BYTES)
        size = reader.size()
        offsets = np.frombuffer(cols.offset, dtype=np.int64)
        with self._lock:
            self._size_seen = size
            if self._tail is not None and self._tail.size != size:
                self._tail = None
            if len(cols):
                self._add(cols, offsets)
            self._note_damage(offsets)
            if reader.pos != self._indexed_to:
                self._indexed_to = reader.pos
                self._window = (
                    reader.pos,
                    _read_at(self.path, max(HEADER_SIZE, reader.pos - WINDOW_BYTES), reader.pos),
                )
        return reader.end is None and (reader.pos != before or len(cols) > 0)

    def _add(self, cols: ColumnBuffers, off: np.ndarray) -> None:
        code = np.frombuffer(cols.key_code, dtype=np.int32)
        shard = np.frombuffer(cols.shard_id, dtype=np.uint64)
        seq = np.frombuffer(cols.seq, dtype=np.uint64)
        ts = np.frombuffer(cols.timestamp_ms, dtype=np.int64)
        copy = _retry_copies(cols)
        self.all.add(off, seq, ts)
        for c, key in enumerate(cols.keys):
            rows = np.flatnonzero(code == c)
            if not len(rows):
                continue
            self.by_key.setdefault(key, RowIndex()).add(off[rows], seq[rows], ts[rows])
            shards = shard[rows]
            if shards.min() == shards.max():
                self._add_stream(key, int(shards[0]), seq[rows], ts[rows], copy[rows])
            else:
                order = np.unique(shards, return_index=True)  # in order of first appearance, as nbkit info
                for s in order[0][np.argsort(order[1])]:
                    mine = rows[shards == s]
                    self._add_stream(key, int(s), seq[mine], ts[mine], copy[mine])
            if key == INTERNAL_KEY:
                self._eos_offset = int(off[rows[-1]])

    def _add_stream(self, key: str, shard: int, seq: np.ndarray, ts: np.ndarray, copy: np.ndarray) -> None:
        st = self._streams.get((key, shard))
        copies = int(np.count_nonzero(copy))
        if st is None:
            # the time range by value, as `nbkit info` reports it (a record out of order does not hide)
            self._streams[(key, shard)] = [len(seq), int(seq[0]), int(seq[-1]), int(ts.min()), int(ts.max()), copies]
        else:
            st[0] += len(seq)
            st[2] = int(seq[-1])
            st[3] = min(st[3], int(ts.min()))
            st[4] = max(st[4], int(ts.max()))
            st[5] += copies

    def _note_damage(self, offsets: np.ndarray) -> None:
        """Record the regions the reader stepped over in the last piece (``offsets``: its rows' frames),
        each with the row of the first message after it: a region is recorded when the reader resumes,
        so the rows after it start at the first offset past its end (or in a later piece)."""
        found = self._reader.damaged
        first_row = self.all.count - len(offsets)
        for region in found[len(self._damaged) :]:
            self._damaged.append(region)
            self._row_after.append(first_row + int(np.searchsorted(offsets, region.end)))

    # -- reading -----------------------------------------------------------------------------------
    def snapshot(self, key: str | None) -> tuple[RowIndex | None, int]:
        """(the row index of ``key`` or of every key, the file offset indexed to) at this moment."""
        with self._lock:
            rows = self.all if key is None else self.by_key.get(key)
            if rows is None:
                return None, self._indexed_to
            copy = RowIndex(rows.count, array("q", rows.offsets), array("q", rows.max_seq), array("q", rows.max_ts))
            return copy, self._indexed_to

    def damaged(self) -> list[tuple[DamagedRegion, int]]:
        """Each damaged region found so far with the row (every key) of the first message after it."""
        with self._lock:
            found = list(zip(self._damaged, self._row_after, strict=True))
            tail = self._tail_now()
            return found + ([(region, self.all.count) for region in tail.damaged] if tail else [])

    def _tail_now(self) -> _Tail | None:
        """The tail's verdict if it is about the file as the index last saw it (call with the lock held)."""
        tail = self._tail
        return tail if tail is not None and tail.size == self._size_seen and self._reader.end is None else None

    def progress(self) -> dict[str, object]:
        """How far indexing got: bytes indexed, file size, whether the pass runs, and its error if any.

        ``done`` once the pass reached the end of the file as last seen, or the reader ended, or the bytes
        past the indexed end got their verdict (a torn or damaged tail, as ``nbkit info`` reports it), or
        the pass stopped on an error: the viewer stops asking then (unless it follows the file)."""
        with self._lock:
            busy = self.busy
            settled = (
                self._indexed_to >= self._size_seen
                or self._reader.end is not None
                or self._tail_now() is not None
                or self._error is not None
            )
            return {
                "indexed_bytes": self._indexed_to,
                "size": self._size_seen,
                "busy": busy,
                "done": not busy and settled,
                "error": None if self._error is None else str(self._error),
            }

    def summary(self) -> FileSummary:
        """What ``nbkit info`` reports of the part indexed so far (all of it once ``busy`` is False)."""
        with self._lock:
            reader_end = self._reader.end
            size = self._size_seen
            pos = self._indexed_to
            streams = tuple(
                StreamSummary(
                    k,
                    s,
                    count=st[0],
                    first_seq=st[1],
                    last_seq=st[2],
                    first_timestamp_ms=st[3],
                    last_timestamp_ms=st[4],
                    originals=0 if is_dead_letter_key(k) else st[0] - st[5],
                    retry_copies=0 if is_dead_letter_key(k) else st[5],
                    dead_letter=is_dead_letter_key(k),
                )
                for (k, s), st in self._streams.items()
            )
            damaged = tuple(self._damaged)
            rows_after = list(self._row_after)
            count = self.all.count
            eos = self._eos_offset
            tail = self._tail_now()
        if tail is not None:  # the bytes past the indexed end, as a replay read (nbkit info) sees them
            end = tail.end
            damaged += tail.damaged
            rows_after += [count] * len(tail.damaged)
        elif reader_end is not None:
            end = reader_end
        elif size > pos:
            end = ReadEnd("truncated", pos, size - pos)
        else:
            end = ReadEnd("end", pos)
        recovered = [(rows_after[i + 1] if i + 1 < len(rows_after) else count) - r for i, r in enumerate(rows_after)]
        return FileSummary(
            path=self.display_path,
            header=self.header,
            size=size,
            streams=streams,
            message_count=count,
            beacon_count=max(0, (size - 1) // self.header.beacon_interval),
            has_eos=eos is not None,
            eos_offset=eos,
            end=end,
            damaged=damaged,
            recovered_after=tuple(recovered),
        )

    def close(self) -> None:
        """Stop using the file (the pass, if running, ends at its next piece)."""
        self._reader.close()
