"""Reading stream files: replay to the end, or follow a growing file like ``tail -f``.

The reader demultiplexes beacons at every multiple of the interval (format spec §6.3), checks each
payload's CRC, and works on whole buffers read from its source (:mod:`nbkit.transport.source`: ``os.pread``
on a local file, range requests of ``block_size`` bytes on an fsspec URL): memory stays flat for any file size.

Two paths share that work. :func:`nbkit.wire.scan.scan_frames` is the fast one (compiled when the
compiled core is active): it walks the complete frames that lie inside the current buffer and before
the next beacon boundary, appending their fields to column lists (no per-message objects).
Everything else — a beacon, a frame cut by a boundary or by the buffer's end, a key seen for the
first time, the end-of-stream mark, a damaged frame — goes one frame at a time through
:meth:`StreamReader._parse_frame`, the one place that handles (and reports) those cases. ``poll()``
hands out messages from a scanned batch; :meth:`StreamReader.read_columns` returns the columns
themselves (what ``read_stream``, the Dask partitions and ``nbkit cat`` build on).
"""

from __future__ import annotations

import enum
import os
import struct
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Literal, NamedTuple, get_args

from nbkit.errors import (
    ChecksumError,
    FormatError,
    NbkitError,
    SeekError,
    TimestampRangeError,
    TruncatedError,
)
from nbkit.transport.damage import DamagedRegion, DamageWarning, check_on_bad_frames
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.transport.positions import FilePosition
from nbkit.transport.source import LOCAL_CHUNK, LocalSource, RemoteSource, open_source
from nbkit.wire.crc import crc16
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.scan import ColumnBuffers, FrameColumns, new_columns, scan_columns, scan_frames
from nbkit.wire.ssformat import (
    EOS_PAYLOAD,
    HEADER_SIZE,
    MAX_TIMESTAMP_MS,
    Beacon,
    FileHeader,
    decode_beacon,
    decode_header,
    decode_key,
)

_HEAD = struct.Struct(">QQQI")
_CRC = struct.Struct(">H")
CHUNK = LOCAL_CHUNK  # bytes per local pread: large enough to amortise syscalls, small enough to stay flat
_PEEK_BYTES = 1 << 12  # a beacon survey's first read per beacon (a beacon of 100 short keys fits)


class Message(NamedTuple):
    """One message frame: where it starts (``offset``) and ends (``end``) in the file, and its fields.

    A named tuple, as :class:`StreamReader <nbkit.StreamReader>` yields it.

    Parameters
    ----------
    stream_key : str
        The stream key (``SEA_STREAMER_INTERNAL`` for the end-of-stream mark).
    shard_id : int
        The shard (0 unless a writer says otherwise).
    seq : int
        The sequence number within the stream key (from 1 in a file).
    timestamp_ms : int
        When it was written, in epoch milliseconds.
    payload : bytes
        The payload as stored (an ``rs1:``/``rs2:`` envelope is not decoded here).
    offset : int
        The byte offset where the frame starts.
    end : int
        The byte offset just after the frame.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1}', timestamp_ms=1_700_000_000_000)
    >>> message = next(iter(StreamReader("orders.ss")))
    >>> message.stream_key, message.seq, message.payload, message.offset
    ('orders', 1, b'{"id": 1}', 128)
    """

    stream_key: str
    shard_id: int
    seq: int
    timestamp_ms: int
    payload: bytes
    offset: int
    end: int

    @property
    def is_eos(self) -> bool:
        """Whether this is SeaStreamer's end-of-stream mark (not a message of any stream)."""
        return self.stream_key == INTERNAL_KEY and self.payload == EOS_PAYLOAD


#: Build a Message from a (key, shard, seq, ts, payload, offset, end) tuple at C speed.
_message = partial(tuple.__new__, Message)


#: Why a read ended: the values of :attr:`ReadEnd.reason`.
EndReason = Literal["eos", "end", "truncated", "removed", "idle", "error", "window"]
END_REASONS: tuple[EndReason, ...] = get_args(EndReason)


class _ReadEndFields(NamedTuple):
    """The fields of :class:`ReadEnd` (a named tuple: immutable, and JSON-friendly inside ``frame.attrs``)."""

    reason: EndReason
    offset: int
    trailing_bytes: int = 0
    error: NbkitError | None = None


class ReadEnd(_ReadEndFields):
    """Why a read ended, and where: a small immutable record whose ``str()`` is one sentence for people.

    ``reason`` is ``eos``, ``end`` (clean end of data), ``truncated`` (a partial frame at the
    tail: ``trailing_bytes`` from ``offset``), ``removed`` (file deleted while followed), ``idle`` (a
    follow read stopped after ``idle_timeout`` seconds without new data), ``error`` (with
    ``errors="stop"``; ``error`` holds the problem) or ``window`` (``read_stream`` with ``end=`` stopped at
    the beacon after which every wanted key is past the end: the rest was not read). A reader's ``end``
    holds one once it has ended, and ``read_stream`` puts it in ``frame.attrs["read_end"]``. It is a named
    tuple, so pandas can copy it with
    the frame and ``DataFrame.to_parquet`` can store it (as a JSON list) with the other ``attrs``.

    Parameters
    ----------
    reason : {"eos", "end", "truncated", "removed", "idle", "error", "window"}
        One of the reasons above; any other value raises ValueError.
    offset : int
        The byte offset where reading stopped.
    trailing_bytes : int
        Bytes after ``offset`` that are not a complete frame.
    error : NbkitError, optional
        The problem, when ``reason`` is ``error``.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"{}")
    >>> reader = StreamReader("orders.ss")
    >>> _ = list(reader)
    >>> reader.end
    ReadEnd(reason='end', offset=168, trailing_bytes=0, error=None)
    >>> print(reader.end)
    ended at the end of the data (offset 168)
    """

    __slots__ = ()

    def __new__(
        cls, reason: EndReason, offset: int, trailing_bytes: int = 0, error: NbkitError | None = None
    ) -> ReadEnd:
        if reason not in END_REASONS:
            raise ValueError(f"ReadEnd reason {reason!r} is not one of {', '.join(END_REASONS)}")
        return super().__new__(cls, reason, offset, trailing_bytes, error)

    def __str__(self) -> str:
        return self.describe()

    def __copy__(self) -> ReadEnd:
        return self  # immutable: a copy is the record itself

    def __deepcopy__(self, memo: dict[int, object]) -> ReadEnd:
        # pandas deep-copies ``frame.attrs`` on every operation; the record (and the error it may hold,
        # whose constructor may not accept its own args back) is immutable, so it is shared, not copied.
        return self

    def describe(self) -> str:
        """One sentence for people: why and where the read ended (what ``str(end)`` gives).

        Returns
        -------
        str
            For example ``"ended at the end-of-stream mark (offset 4096)"``.

        Examples
        --------
        >>> from nbkit import ReadEnd
        >>> ReadEnd("removed", 4096).describe()
        'ended at offset 4096: the file was removed'
        """
        if self.reason == "eos":
            return f"ended at the end-of-stream mark (offset {self.offset})"
        if self.reason == "end":
            return f"ended at the end of the data (offset {self.offset})"
        if self.reason == "truncated":
            return (
                f"ended at offset {self.offset}: {self.trailing_bytes} trailing bytes are not a complete "
                "frame (a writer may still be writing, or it stopped mid-frame)"
            )
        if self.reason == "removed":
            return f"ended at offset {self.offset}: the file was removed"
        if self.reason == "window":
            return f"stopped at offset {self.offset}: the window's end (later messages are past it)"
        if self.reason == "idle":
            tail = f"; {self.trailing_bytes} trailing bytes are not a complete frame" if self.trailing_bytes else ""
            return f"stopped following at offset {self.offset}: no new data within the idle timeout{tail}"
        return f"stopped at offset {self.offset}: {self.error}"


class _NeedMore(Exception):
    """Internal: the file does not (yet) hold the bytes a parse needs."""


# how far past the start of the damaged frame a salvage read looks for a shifted beacon grid: 4 intervals,
# and at least 64 KiB (a damaged frame may be several intervals long)
_HUNT_INTERVALS = 4
_HUNT_MIN_BYTES = 1 << 16


class _Skipped(enum.Enum):
    """Internal: a salvage read stepped over damage; carry on from the new ``pos``."""

    SKIPPED = "skipped"


_SKIPPED = _Skipped.SKIPPED

_SALVAGE_HINT = (
    "; to read past the damage pass on_bad_frames='skip' (or 'warn' to hear of each damaged region; "
    "--on-bad-frames on the command line), or write a clean copy with `nbkit repair`"
)


class StreamReader:
    """Read messages from a ``.ss`` file, in replay (``follow=False``) or follow mode.

    Iterate it for messages; ``end`` then says why the read ended. ``poll()`` is the non-blocking
    step a runtime uses: a Message, ``NEED_MORE`` (follow mode: wait), or ``None`` (ended).
    ``keys`` limits both to the messages of those stream keys: the others (the end-of-stream mark
    too) are still read and checked, then skipped without a Message being made for them.
    ``on_bad_frames``: ``"error"`` (default) raises at the first damaged frame (or, with
    ``errors="stop"``, ends there); ``"skip"`` steps from a damaged frame to the first frame after the
    next intact beacon (spec §6.5) and records the bytes it lost in ``damaged`` (a list of
    :class:`~nbkit.transport.damage.DamagedRegion`); ``"warn"`` does the same and warns once per region.
    Frames between the damage and that beacon are not searched for: the format's checksum covers only
    the payload, so a guessed frame start could turn garbage into a message the writer never wrote.
    After a cut-out or inserted run of bytes the beacons are found again on their shifted grid (a beacon
    there, another an interval later, and a checksum-verified frame after it: docs/reliability.md).

    Parameters
    ----------
    path : str or os.PathLike
        The stream file: a local path, or an fsspec URL (read by range requests, never downloaded whole).
    follow : bool
        Keep waiting for appended messages (``tail -f``) instead of ending at the end of the data.
    start : FilePosition, optional
        Where to start (default: the beginning).
    key : str, optional
        The stream key a ``sequence`` or ``timestamp`` start refers to.
    shard_id : int
        The shard of that key.
    errors : {"raise", "stop"}
        On damaged data: raise the :class:`~nbkit.FormatError`, or stop and record it in ``end``.
    poll_min, poll_max : float
        Follow mode: the first and the longest wait (seconds) between looks at the file.
    idle_timeout : float, optional
        Follow mode: stop after this many seconds without new data.
    stop_at_eos : bool
        End at the end-of-stream mark (SeaStreamer's EOS) rather than reading past it.
    keys : str or iterable of str, optional
        Yield only the messages of these stream keys.
    on_bad_frames : {"error", "warn", "skip"}
        ``"error"`` raises at the first damaged frame; ``"skip"`` resumes at the next intact beacon and records
        the region in ``damaged``; ``"warn"`` also warns once per region (a ``DamageWarning``).
    storage_options : dict, optional
        For a URL (``s3://``, ``gs://``, ``abfs://``, ``https://``, any fsspec URL): passed to its
        filesystem, as in pandas (credentials, ``endpoint_url``, ...). ``path`` may be such a URL.
    block_size : int, optional
        For a URL: bytes per range request (default 8 MiB, :data:`nbkit.transport.source.DEFAULT_BLOCK_SIZE`).

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     for key in ("orders", "audit", "orders"):
    ...         _ = writer.write(key, b"{}")
    >>> with StreamReader("orders.ss") as reader:
    ...     print([(m.stream_key, m.seq) for m in reader])
    [('orders', 1), ('audit', 1), ('orders', 2)]
    >>> [m.seq for m in StreamReader("orders.ss", keys=["orders"])]
    [1, 2]
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        follow: bool = False,
        start: FilePosition | None = None,
        key: str | None = None,
        shard_id: int = 0,
        errors: str = "raise",
        poll_min: float = 0.001,
        poll_max: float = 1.024,
        idle_timeout: float | None = None,
        stop_at_eos: bool = True,
        keys: Iterable[str] | str | None = None,
        on_bad_frames: str = "error",
        storage_options: dict[str, Any] | None = None,
        block_size: int | None = None,
    ) -> None:
        self.on_bad_frames = check_on_bad_frames(on_bad_frames)
        #: The regions a salvage read (``on_bad_frames`` "warn" or "skip") stepped over, in file order.
        self.damaged: list[DamagedRegion] = []
        if errors not in ("raise", "stop"):
            raise ValueError(f"errors must be 'raise' or 'stop', not {errors!r}")
        if isinstance(keys, str):
            keys = (keys,)
        self.keys: frozenset[str] | None = None if keys is None else frozenset(keys)
        if self.keys is not None and not all(isinstance(k, str) for k in self.keys):
            raise TypeError(f"keys are stream key strings, not {sorted(map(repr, self.keys))}")
        self.path = os.fspath(path)
        self.follow = follow
        self.errors = errors
        self.poll_min = poll_min
        self.poll_max = poll_max
        self.idle_timeout = idle_timeout
        self.stop_at_eos = stop_at_eos
        #: Follow mode: called before each wait for the file to grow (``nbkit cat -f`` flushes its output).
        self.on_wait: Callable[[], None] | None = None
        self.end: ReadEnd | None = None
        self.beacons_seen = 0
        self.last_beacon: Beacon | None = None
        #: Where the bytes come from: a local file, or an fsspec URL read by range requests
        #: (:mod:`nbkit.transport.source`; a remote one counts ``bytes_fetched`` and ``requests``).
        self.source: LocalSource | RemoteSource = open_source(
            path, storage_options=storage_options, block_size=block_size, follow=follow
        )
        #: How to open this file again (another reader of it: a key check, a Dask partition): ``storage_options``
        #: and ``block_size`` as given ({} for a local path).
        self.open_options: dict[str, Any] = (
            {"storage_options": storage_options, "block_size": block_size} if self.source.remote else {}
        )
        self._pread = self.source.pread
        self._buf = b""
        self._base = 0
        self._keys: dict[bytes, str] = {}
        # raw key -> key for the fast scan; SEA_STREAMER_INTERNAL is left out, so EOS takes the slow path
        self._fast_keys: dict[bytes, str] = {}
        # the same for poll(): a key left out by ``keys`` maps to None (checked, then skipped)
        self._poll_keys: dict[bytes, str | None] = {}
        if self.keys is None:
            self._poll_keys = self._fast_keys  # type: ignore[assignment]  # one dict: both filled alike
        self._ahead: Iterator[Message] = iter(())  # messages scanned ahead of poll(), before the next boundary
        self._ahead_pos = -1  # ``pos`` while the next message of ``_ahead`` is the next one to hand out
        self._ahead_end = -1  # where that scan stopped (after any skipped frames)
        # beacons sit at ``_phase + k * interval``: 0, unless a salvage read found the grid shifted by a
        # cut-out or inserted run of bytes (see ``_hunt_grid``)
        self._phase = 0
        try:
            self.header = self._read_header()
        except BaseException:
            self.close()
            raise
        self.interval = self.header.beacon_interval
        # what a beacon probe reads: a remote seek's binary search asks for no more than a beacon can be
        self._probe = min(self.source.probe_size, self.interval) if self.source.remote else self.source.probe_size
        self.pos = HEADER_SIZE
        if start is not None:
            self.seek(start, key=key, shard_id=shard_id)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the file descriptor (a context manager does it on exit).

        Returns
        -------
        None
        """
        self.source.close()

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def seen_keys(self) -> frozenset[str]:
        """Every stream key the reader has met so far, kept by its filters or not (the internal key too)."""
        return frozenset(self._keys.values())

    # -- byte access -------------------------------------------------------------------------------
    def _read_header(self) -> FileHeader:
        data = self._pread(HEADER_SIZE, 0)
        try:
            return decode_header(data)
        except FormatError as exc:
            raise exc.located(path=self.path) from None

    def size(self) -> int:
        """The file's current size in bytes.

        Returns
        -------
        int
            The size of the open file (it grows while a writer appends); for a URL in replay, the size the
            server reported at open.
        """
        return self.source.size()

    def _fill(self, pos: int, need: int, ahead: int = 0) -> None:
        """Make ``self._buf`` cover ``[pos, pos+need)``, reading from the file; _NeedMore if it can't.

        Reads ``max(need, ahead or the source's block size)`` bytes, cut at the source's ``limit`` (where
        the current read stops) but never below ``need``."""
        base = self._base
        if pos >= base and pos + need <= base + len(self._buf):
            return
        n = ahead or self.source.block_size
        limit = self.source.limit
        if limit is not None and pos + n > limit:
            n = limit - pos
        data = self._pread(max(need, n), pos)
        self._buf = data
        self._base = pos
        if len(data) < need:
            raise _NeedMore

    def _beacon_at(self, pos: int, *, probe: bool = False) -> Beacon:
        """Parse the beacon at boundary ``pos``; it never crosses the next boundary. ``probe``: a seek's
        look at one beacon, which reads no more than a beacon can be (on a remote file, a small request)."""
        want = 6
        while True:
            self._fill(pos, want, self._probe if probe else 0)
            try:
                beacon = decode_beacon(self._buf, pos - self._base, pos)
            except TruncatedError:
                avail = self._base + len(self._buf) - pos
                if avail >= self.interval:  # the whole interval is there: damage, not a partial write
                    raise self._oversized_beacon(pos) from None
                # asking for more than the buffer held tells "the file ends here" from "read more"
                want = avail + 1 if avail > want else max(want * 2, avail + 1)
                if want > self.interval:
                    raise _NeedMore from None
                continue
            if beacon.size > self.interval:
                raise self._oversized_beacon(pos)
            return beacon

    def _oversized_beacon(self, pos: int) -> FormatError:
        count = self._buf[pos - self._base + 5] if pos + 5 < self._base + len(self._buf) else "?"
        return FormatError(
            f"the beacon here claims {count} markers and does not end before the next boundary "
            f"(beacon interval {self.interval}): the file is damaged at this offset",
            path=self.path,
            offset=pos,
        )

    def _gather(self, pos: int, n: int) -> tuple[bytes, int]:
        """Read ``n`` logical bytes from ``pos``, skipping beacons at boundaries (§6.3)."""
        interval = self.interval
        phase = self._phase
        parts = []
        while n > 0:
            if (pos - phase) % interval == 0:
                beacon = self._beacon_at(pos)
                self._note_beacon(beacon)
                pos += beacon.size
            take = min(n, interval - (pos - phase) % interval)
            self._fill(pos, take)
            i = pos - self._base
            parts.append(self._buf[i : i + take])
            pos += take
            n -= take
        return b"".join(parts), pos

    def _note_beacon(self, beacon: Beacon) -> None:
        if self.last_beacon is None or beacon.offset > self.last_beacon.offset:
            self.beacons_seen += 1
            self.last_beacon = beacon

    # -- frames ----------------------------------------------------------------------------------
    def _key(self, raw: bytes, offset: int) -> str:
        key = self._keys.get(raw)
        if key is None:
            key = decode_key(raw, offset)
            self._keys[raw] = key
            if key != INTERNAL_KEY:
                self._fast_keys[bytes(raw)] = key
                if self.keys is not None:
                    self._poll_keys[bytes(raw)] = key if key in self.keys else None
        return key

    def _scan(
        self, pos: int, keymap: dict[bytes, str | None], cols: FrameColumns, ends: list[int] | None, until: int = -1
    ) -> int:
        """:func:`~nbkit.wire.scan.scan_frames` over the current buffer from ``pos``; where it stopped."""
        if not self._phase:
            return scan_frames(self._buf, self._base, pos, until, self.interval, keymap, cols, ends)
        # a salvage read on a shifted beacon grid: scan in offsets moved onto the grid, then move back
        shift = self.interval - self._phase
        taken, ended = len(cols.offset), 0 if ends is None else len(ends)
        stop = scan_frames(
            self._buf,
            self._base + shift,
            pos + shift,
            -1 if until < 0 else until + shift,
            self.interval,
            keymap,
            cols,
            ends,
        )
        offsets = cols.offset
        for j in range(taken, len(offsets)):
            offsets[j] -= shift
        if ends is not None:
            for j in range(ended, len(ends)):
                ends[j] -= shift
        return stop - shift

    def _scan_columns(self, pos: int, keymap: dict[bytes, int], cols: ColumnBuffers, until: int = -1) -> int:
        """:func:`~nbkit.wire.scan.scan_columns` over the current buffer from ``pos``; where it stopped."""
        if not self._phase:
            return scan_columns(self._buf, self._base, pos, until, self.interval, keymap, cols)
        # a salvage read on a shifted beacon grid: scan in offsets moved onto the grid, then move back
        shift = self.interval - self._phase
        taken = len(cols.offset)
        stop = scan_columns(
            self._buf, self._base + shift, pos + shift, -1 if until < 0 else until + shift, self.interval, keymap, cols
        )
        offsets = cols.offset
        for j in range(taken, len(offsets)):
            offsets[j] -= shift
        return stop - shift

    def _parse_frame(self, pos: int, *, verify: bool = True) -> Message:
        """Parse the frame whose first field read starts at ``pos``; raises _NeedMore or FormatError."""
        interval = self.interval
        phase = self._phase
        if (pos - phase) % interval == 0:
            beacon = self._beacon_at(pos)
            self._note_beacon(beacon)
            pos += beacon.size
        start = pos
        boundary = pos - (pos - phase) % interval + interval
        self._fill(pos, 1)
        buf = self._buf
        i = pos - self._base
        k = buf[i]
        if pos + 29 + k <= boundary:  # fast path: the header lies inside this interval
            self._fill(pos, 29 + k)
            buf = self._buf
            i = pos - self._base
            raw_key = buf[i + 1 : i + 1 + k]
            shard, seq, ts, size = _HEAD.unpack_from(buf, i + 1 + k)
            total = 32 + k + size
            if pos + total <= boundary:
                self._fill(pos, total)
                buf = self._buf
                i = pos - self._base
                p = i + 29 + k
                payload = buf[p : p + size]
                (stored,) = _CRC.unpack_from(buf, p + size)
                end = pos + total
            else:
                tail, end = self._gather(pos + 29 + k, size + 3)
                payload = tail[:size]
                (stored,) = _CRC.unpack_from(tail, size)
        else:
            head, p = self._gather(pos, 29 + k)
            raw_key = head[1 : 1 + k]
            shard, seq, ts, size = _HEAD.unpack_from(head, 1 + k)
            tail, end = self._gather(p, size + 3)
            payload = tail[:size]
            (stored,) = _CRC.unpack_from(tail, size)
        key = self._key(raw_key, start + 1)
        if ts > MAX_TIMESTAMP_MS:
            raise TimestampRangeError(f"message timestamp {ts} ms is after year 9999", offset=start + 9 + k)
        if verify:
            computed = crc16(payload)
            if computed != stored:
                raise ChecksumError(
                    f"payload checksum mismatch in the frame of {key!r} seq {seq}: "
                    f"stored 0x{stored:04X}, computed 0x{computed:04X}",
                    received=stored,
                    computed=computed,
                    offset=start,
                )
        return Message(key, shard, seq, ts, payload, start, end)

    def poll(self) -> Message | NeedMore | None:
        """The next message, ``NEED_MORE`` (follow mode, nothing complete yet) or ``None`` (ended).

        Returns
        -------
        Message, NEED_MORE or None
            The message read; the ``NEED_MORE`` sentinel when a following reader must wait and call again;
            None once the read has ended (``end`` says why).
        """
        while self.end is None:
            if self.pos == self._ahead_pos:  # not moved since the last message: the scanned batch goes on
                ahead = next(self._ahead, None)
                if ahead is not None:
                    self.pos = self._ahead_pos = ahead.end
                    return ahead
                self.pos = self._ahead_end  # past the skipped frames after the batch's last message
                self._ahead_pos = -1
            cols = new_columns()
            ends: list[int] = []
            stop = self._scan(self.pos, self._poll_keys, cols, ends)
            if cols.offset:
                self._ahead = map(_message, zip(*cols, ends, strict=True))
                self._ahead_pos = self.pos
                self._ahead_end = stop
                continue
            if stop != self.pos:  # only frames of keys left out
                self.pos = stop
                continue
            msg = self._poll_frame()
            if msg is _SKIPPED:
                continue
            if not isinstance(msg, Message) or self.keys is None or msg.stream_key in self.keys:
                return msg
        return None

    def ready(self) -> Iterator[Message]:
        """The messages :meth:`poll` would return next without reading the file: those already scanned.

        Each message is taken as it is handed out (``pos`` moves past it), so stopping early leaves the rest
        to :meth:`poll`; the iterator ends where :meth:`poll` would have to read, wait or end, and at once
        once the reader is moved (``seek``, ``resync``) or has ended. A runtime settling one message
        after another uses it to skip :meth:`poll`'s bookkeeping per message.

        Returns
        -------
        iterator of Message
            Possibly empty (nothing is scanned ahead before a :meth:`poll`, nor after the last one).

        Examples
        --------
        >>> from nbkit import StreamReader, StreamWriter
        >>> with StreamWriter("ready.ss") as writer:
        ...     for n in range(5):
        ...         _ = writer.write("orders", b"{}")
        >>> seqs = []
        >>> with StreamReader("ready.ss") as reader:
        ...     while (msg := reader.poll()) is not None:
        ...         seqs += [msg.seq] + [m.seq for m in reader.ready()]
        >>> seqs
        [1, 2, 3, 4, 5]
        """
        while self.end is None and self.pos == self._ahead_pos:  # as poll(): not moved since the last message
            ahead = next(self._ahead, None)
            if ahead is None:
                return
            self.pos = self._ahead_pos = ahead.end
            yield ahead

    def _parse_fresh(self) -> Message:
        """:meth:`_parse_frame` at ``pos``; in follow mode a FormatError is checked once more against
        bytes read again: a writer that resumes after a crash cuts a torn frame off and writes new bytes
        in its place, so what this reader cached of that tail may be stale."""
        try:
            return self._parse_frame(self.pos)
        except FormatError:
            if not self.follow:
                raise
            self._buf = b""
            self._base = 0
            return self._parse_frame(self.pos)

    def _poll_frame(self) -> Message | NeedMore | _Skipped | None:
        """:meth:`poll` for the one frame at ``pos`` that the fast scan left (see the module doc)."""
        try:
            msg = self._parse_fresh()
        except _NeedMore:
            if self.on_bad_frames != "error" and not self.follow:
                # a frame claiming to run past the end while intact beacons follow it: damage, not a torn tail
                problem = "the frame's header claims more bytes than the file holds"
                if self._skip_damage(problem, tail=True):
                    return _SKIPPED
            return self._at_data_end()
        except FormatError as exc:
            err = exc if exc.path else exc.located(path=self.path)
            if self.on_bad_frames != "error":
                return _SKIPPED if self._skip_damage(err.detail) else NEED_MORE
            if self.errors == "stop":
                self.end = ReadEnd("error", self.pos, self.size() - self.pos, err)
                return None
            raise err.with_hint(_SALVAGE_HINT) from None
        if msg.is_eos and self.stop_at_eos:
            # bytes read ahead must not decide the end: an append since then (a retry copy of this very
            # replay) cuts the trailing EOS mark and writes in its place, so read the frame again from disk
            self._buf = b""
            self._base = 0
            try:
                msg = self._parse_frame(self.pos)
            except (_NeedMore, FormatError):
                return NEED_MORE  # a writer is between its cut and its write: poll again
            if msg.is_eos:
                self.end = ReadEnd("eos", msg.end)
        self.pos = msg.end
        return msg

    def _skip_damage(self, problem: str, *, tail: bool = False) -> bool:
        """Salvage: move ``pos`` from the damaged frame there to the first frame after the next intact
        beacon and record the region (joined to the previous one when it ended right here). False when
        there is nothing to move to: a follower waits for more bytes; with ``tail`` the caller reports
        a torn tail instead (no intact beacon after it)."""
        start = self.pos
        interval = self.interval
        size = self.size()
        phase = self._phase
        boundary = start - (start - phase) % interval + interval
        resume = None
        while boundary < size:
            resume = self._grid_resume(boundary, phase, size)
            if resume is not None:
                break
            boundary += interval
        # a frame running past the end may be a torn tail, or a cut moved the last beacon off the grid:
        # hunt for a shifted grid unless the original one holds an intact beacon and frame after the damage
        suspect = not tail or resume is None or self._grid_resume(boundary, phase, size, strict=True) is None
        if not self.follow and suspect:
            window = start + max(_HUNT_INTERVALS * interval, _HUNT_MIN_BYTES)
            shifted = self._hunt_grid(start, min(boundary, size, window), size)
            if shifted is not None:
                self._phase, resume = shifted
        if resume is None or (tail and resume >= size):
            if self.follow or tail:
                return False
            resume = size
        last = self.damaged[-1] if self.damaged else None
        if last is not None and last.end == start:
            self.damaged[-1] = DamagedRegion(last.start, resume, last.problem)
        else:
            region = DamagedRegion(start, resume, problem)
            self.damaged.append(region)
            if self.on_bad_frames == "warn":
                warnings.warn(f"{self.path}: damaged {region.describe()}", DamageWarning, stacklevel=2)
        self.pos = resume
        self._ahead_pos = -1
        return True

    def _grid_resume(self, boundary: int, phase: int, size: int, *, strict: bool = False) -> int | None:
        """Where reading resumes after the beacon at ``boundary`` on the grid ``phase + k * interval``:
        the first frame after it (or the end of the data), or None when that beacon is not intact (it
        does not parse, or lacks its CRs) or the frame after it does not parse. A frame after the file's
        last beacon running past its end is a torn tail, for the reader to report, unless ``strict``
        (a shifted grid's candidate), which also needs a frame after the beacon: bytes that merely parse
        as a beacon whose run reaches past the end prove nothing."""
        interval = self.interval
        saved = self._phase
        self._phase = phase
        pos = boundary
        try:
            while (pos - phase) % interval == 0:
                beacon = self._beacon_at(pos)
                if self._pread(1, pos + beacon.size - 1) != b"\r" or self._pread(1, pos) != b"\r":
                    return None
                pos += beacon.size + min(beacon.remaining, interval - beacon.size)
            if strict and pos >= size:
                return None  # a shifted grid is accepted only on a frame after its beacon that verifies
            if pos < size:
                msg = self._parse_frame(pos)
                if self._pread(1, msg.end - 1) != b"\r":
                    return None
        except _NeedMore:  # a torn tail only after the file's last beacon: elsewhere it is garbage
            if strict:
                return None
            return pos if pos >= size or boundary + interval >= size else None
        except FormatError:
            return None
        finally:
            self._phase = saved
        return pos

    def _hunt_grid(self, start: int, stop: int, size: int) -> tuple[int, int] | None:
        """After damage at ``start``: look for beacons off the current grid before ``stop`` (a cut-out or
        inserted run of bytes moves every later beacon). A candidate is a CR where a beacon parses and
        ends in CR, the one an interval later does too (when the file reaches it), and the frame after
        it parses, checksum verified, ending in CR. Returns (the new phase, where to resume) or None."""
        interval = self.interval
        pos = start + 1
        while pos < stop:
            try:
                self._fill(pos, min(stop - pos, CHUNK))
            except _NeedMore:
                return None
            end = min(stop, self._base + len(self._buf))
            at = self._buf.find(b"\r", pos - self._base, end - self._base)
            if at < 0:
                pos = end
                continue
            c = self._base + at
            pos = c + 1
            phase = c % interval
            if phase == self._phase:
                continue  # the current grid: already tried
            if c + interval < size and self._grid_resume(c + interval, phase, size) is None:
                continue
            resume = self._grid_resume(c, phase, size, strict=True)
            if resume is not None:
                return phase, resume
        return None

    def _at_data_end(self) -> NeedMore | None:
        if self.follow:
            if self.source.removed():
                self.end = ReadEnd("removed", self.pos)
                return None
            return NEED_MORE
        trailing = max(0, self.size() - self.pos)
        if trailing and self._only_beacon_left(trailing):
            trailing = 0
        self.end = ReadEnd("truncated" if trailing else "end", self.pos, trailing)
        return None

    def _only_beacon_left(self, trailing: int) -> bool:
        """True when the bytes after ``pos`` are exactly one complete beacon (a clean end)."""
        if (self.pos - self._phase) % self.interval:
            return False
        try:
            beacon = self._beacon_at(self.pos)
        except (_NeedMore, FormatError):
            return False
        return beacon.size == trailing

    def read_columns(
        self,
        *,
        accept: Callable[[str], bool] | None = None,
        progress: Callable[[int], object] | None = None,
        until: int | None = None,
    ) -> FrameColumns:
        """Read every message from ``pos`` on into column lists: what iterating would yield, without
        a Message object per message.

        :meth:`read_column_buffers` with each value as a Python object (a list per column).

        Parameters
        ----------
        accept, progress, until
            As for :meth:`read_column_buffers`.

        Returns
        -------
        FrameColumns
            A named tuple of parallel lists: ``stream_key``, ``shard_id``, ``seq``, ``timestamp_ms``,
            ``payload``, ``offset``.
        """
        return self.read_column_buffers(accept=accept, progress=progress, until=until).to_lists()

    def read_column_buffers(
        self,
        *,
        accept: Callable[[str], bool] | None = None,
        progress: Callable[[int], object] | None = None,
        until: int | None = None,
        separator: bytes = b"",
    ) -> ColumnBuffers:
        """Read every message from ``pos`` on into column buffers: typed arrays and one payload buffer.

        What iterating would yield, without a Python object per message (the frame scanner fills the
        buffers). Replay reads to the end (``end`` then says why it ended); follow mode stops at the
        current end of the data and can be called again.

        Parameters
        ----------
        accept : callable, optional
            ``accept(key) -> bool`` keeps only the messages of accepted keys (it is asked once per key; the
            other messages are still checked), within the reader's ``keys`` if it has any.
        progress : callable, optional
            ``progress(n)`` is told how many more bytes were read, now and then.
        until : int, optional
            Stop before the first frame that starts at or after this offset (``pos`` is then that
            frame's start, or past it when a beacon is there; ``end`` stays None unless the read ended
            first). The Dask partitions read their byte range so.
        separator : bytes
            Written after each payload in the payload buffer: ``b""`` or ``b"\\n"`` (NDJSON).

        Returns
        -------
        ColumnBuffers
            The messages' columns (:class:`~nbkit.wire.scan.ColumnBuffers`).
        """
        if self.keys is not None:
            only, asked = self.keys, accept
            accept = lambda key: key in only and (asked is None or asked(key))  # noqa: E731
        cols = ColumnBuffers(separator)
        codes: dict[str, int] = {}

        def code_of(key: str) -> int:
            if accept is not None and not accept(key):
                return -1
            code = codes.get(key)
            if code is None:
                code = codes[key] = len(cols.keys)
                cols.keys.append(key)
            return code

        keymap = {raw: code_of(key) for raw, key in self._fast_keys.items()}
        self._ahead_pos = -1
        last = self.pos
        limit = -1 if until is None else until
        # reads ahead stop at ``until`` (a remote range fetches its range and the one frame crossing it); the
        # limit only shortens reads ahead, never a read below what a parse needs, so it is always safe
        self.source.limit = until
        while self.end is None and (until is None or self.pos < until):
            self.pos = self._scan_columns(self.pos, keymap, cols, limit)
            if until is not None and self.pos >= until:
                break
            before = self.pos
            msg = self._poll_frame()
            if msg is _SKIPPED:
                continue
            if not isinstance(msg, Message):
                break
            if until is not None and msg.offset >= until:
                self.pos = before  # a beacon lay before it: the frame belongs to the next range
                self.end = None
                break
            key = msg.stream_key
            code = code_of(key)
            if key != INTERNAL_KEY:
                keymap[key.encode("utf-8")] = code
            if code >= 0:
                cols.key_code.append(code)
                cols.shard_id.append(msg.shard_id)
                cols.seq.append(msg.seq)
                cols.timestamp_ms.append(msg.timestamp_ms)
                cols.offset.append(msg.offset)
                cols.data += msg.payload
                cols.data_end.append(len(cols.data))
                cols.data += cols.separator
            if progress is not None:
                progress(self.pos - last)
                last = self.pos
        if progress is not None and self.pos != last:
            progress(self.pos - last)
        self.source.limit = None
        return cols

    def beacon_at(self, offset: int) -> Beacon:
        """The beacon at boundary ``offset`` (a positive multiple of the interval).

        Parameters
        ----------
        offset
            A beacon boundary of this file.

        Returns
        -------
        Beacon
            Its cut-frame ``remaining`` bytes and markers; ``size`` is its length.

        Raises
        ------
        FormatError
            The beacon is incomplete (the file ends inside it) or damaged.

        Examples
        --------
        >>> with StreamReader("big.ss") as r:          # doctest: +SKIP
        ...     r.beacon_at(r.interval).size
        46
        """
        if offset <= 0 or offset % self.interval:
            raise ValueError(f"offset {offset} is not a beacon boundary (a positive multiple of {self.interval})")
        try:
            return self._beacon_at(offset)
        except _NeedMore:
            raise TruncatedError("the file ends inside this beacon", path=self.path, offset=offset) from None

    def peek_beacon(self, offset: int) -> Beacon | None:
        """The beacon at boundary ``offset`` read with a small read of its own, or None when it is
        incomplete or damaged; the reader's position and buffer are left alone (a beacon survey, such as
        :func:`nbkit.transport.windows.find_window`, reads a few KiB per beacon, not a whole buffer).

        Parameters
        ----------
        offset
            A beacon boundary of this file (a positive multiple of the interval).

        Returns
        -------
        Beacon or None
            The beacon, when it parses and ends in its CR.
        """
        if offset <= 0 or offset % self.interval:
            raise ValueError(f"offset {offset} is not a beacon boundary (a positive multiple of {self.interval})")
        want = min(self.interval, _PEEK_BYTES)
        while True:
            data = self._pread(want, offset)
            try:
                beacon = decode_beacon(data, 0, offset)
            except TruncatedError:
                if len(data) < want or want >= self.interval:
                    return None  # the file ends inside it, or it overruns its interval: damage
                want = min(self.interval, want * 4)
                continue
            except FormatError:
                return None
            if beacon.size > self.interval or data[:1] != b"\r" or data[beacon.size - 1 : beacon.size] != b"\r":
                return None
            return beacon

    def __iter__(self) -> Iterator[Message]:
        delay = self.poll_min
        waited = 0.0
        while True:
            item = self.poll()
            if item is None:
                return
            if item is NEED_MORE:
                if self.idle_timeout is not None and waited >= self.idle_timeout:
                    self.end = ReadEnd("idle", self.pos, max(0, self.size() - self.pos))
                    return
                if self.on_wait is not None:
                    self.on_wait()
                time.sleep(delay)
                waited += delay
                delay = min(delay * 2, self.poll_max)
                continue
            delay = self.poll_min
            waited = 0.0
            yield item

    # -- positions -------------------------------------------------------------------------------
    def resync(self, n: int) -> int:
        """Move to the first whole frame after the n-th beacon (format spec §6.5).

        Parameters
        ----------
        n : int
            The beacon index; past the last beacon, the last one is used.

        Returns
        -------
        int
            The beacon index reached.
        """
        interval = self.interval
        size = self.size()
        if n <= 0:
            self.pos = HEADER_SIZE
            return 0
        target = n * interval
        if target >= size:
            target = max(interval * (size // interval), HEADER_SIZE)
            if target < interval:
                self.pos = HEADER_SIZE
                return 0
        pos = target
        try:
            while pos % interval == 0:
                beacon = self._beacon_at(pos)
                self._note_beacon(beacon)
                pos += beacon.size + min(beacon.remaining, interval - beacon.size)
        except _NeedMore:
            raise SeekError(f"{self.path}: the beacon at offset {pos} is incomplete") from None
        self.pos = pos
        return pos // interval

    def seek_offset(self, offset: int) -> None:
        """Move to byte ``offset``, a frame start the caller knows (an earlier ``Message.offset`` or
        ``end``, a partition's first frame, a checkpoint) or a beacon boundary; the read goes on from
        there (``end`` is cleared, messages scanned ahead are dropped). Unlike :meth:`seek`, nothing is
        looked up: a wrong offset reads as damage.

        Parameters
        ----------
        offset : int
            The file offset of a frame (or of a beacon boundary, where the next frame follows the beacon).

        Returns
        -------
        None

        Examples
        --------
        >>> from nbkit import StreamReader, StreamWriter
        >>> with StreamWriter("orders.ss") as writer:
        ...     second = [writer.write("orders", b"%d" % n) for n in range(3)][1]
        >>> with StreamReader("orders.ss") as reader:
        ...     reader.seek_offset(second.offset)
        ...     [m.seq for m in reader]
        [2, 3]
        """
        if offset < HEADER_SIZE:
            raise ValueError(f"offset {offset} is inside the file header (frames start at {HEADER_SIZE} or later)")
        self.pos = offset
        self.end = None
        self._ahead_pos = -1

    def seek(self, position: FilePosition, *, key: str | None = None, shard_id: int = 0) -> None:
        """Move to ``position``; sequence and timestamp positions need the stream ``key``.

        Differs from upstream on purpose: the forward scan after the beacon survey only matches
        messages of the target stream (upstream stops at any stream's message, spec §11.2).

        Parameters
        ----------
        position : FilePosition
            Where to go.
        key : str, optional
            The stream key a ``sequence`` or ``timestamp`` position refers to.
        shard_id : int
            That key's shard.

        Returns
        -------
        None

        Raises
        ------
        SeekError
            If the file holds no such sequence or no message after that instant.
        """
        self.end = None
        self._phase = 0
        kind = position.kind
        if kind == "beginning":
            self.pos = HEADER_SIZE
        elif kind == "beacon":
            self.resync(position.value or 0)
        elif kind == "end":
            self.pos = self._live_start()
        elif kind in ("sequence", "timestamp"):
            if key is None:
                raise ValueError(f"seeking to {position!r} needs the stream key")
            self._seek_by(kind, position.value or 0, key, shard_id)
        else:
            raise ValueError(f"unknown position {position!r}")

    def _live_start(self) -> int:
        """Just after the last complete frame (spec §8 'Live start')."""
        size = self.size()
        boundary = max(self.interval * (size // self.interval), HEADER_SIZE)
        while True:
            try:
                self.resync(boundary // self.interval) if boundary >= self.interval else None
                pos = self.pos if boundary >= self.interval else HEADER_SIZE
                break
            except SeekError:
                boundary -= self.interval
                if boundary < self.interval:
                    pos = HEADER_SIZE
                    break
        while True:
            try:
                msg = self._parse_frame(pos, verify=False)
            except (_NeedMore, FormatError):
                return pos
            pos = msg.end

    def _judge(self, b: int, kind: str, target: int, key: str, shard_id: int) -> str | None:
        """Left/Right/None for beacon ``b`` by its marker of (key, shard) (§11.2)."""
        try:
            beacon = self._beacon_at(b * self.interval, probe=True)
        except (_NeedMore, FormatError):
            return None
        for m in beacon.markers:
            if m.stream_key == key and m.shard_id == shard_id:
                if kind == "sequence":
                    return "L" if m.seq < target else "R"
                return "L" if m.timestamp_ms <= target else "R"
        return None

    def _seek_by(self, kind: str, target: int, key: str, shard_id: int) -> None:
        saved = self.pos
        max_b = self.size() // self.interval
        lo, hi, left = 1, max_b, 0
        while lo <= hi:
            mid = (lo + hi) // 2
            decided = None
            for b in range(mid, hi + 1):
                verdict = self._judge(b, kind, target, key, shard_id)
                if verdict:
                    decided = (b, verdict)
                    break
            if decided is None:
                for b in range(mid - 1, lo - 1, -1):
                    verdict = self._judge(b, kind, target, key, shard_id)
                    if verdict:
                        decided = (b, verdict)
                        break
            if decided is None:
                break
            b, verdict = decided
            if verdict == "L":
                left = max(left, b)
                lo = b + 1
            else:
                hi = b - 1
        try:
            self.resync(left)
            pos = self.pos
            while True:
                msg = self._parse_frame(pos)
                if msg.stream_key == key and msg.shard_id == shard_id:
                    value = msg.seq if kind == "sequence" else msg.timestamp_ms
                    if (value >= target) if kind == "sequence" else (value > target):
                        self.pos = msg.offset
                        return
                pos = msg.end
        except (_NeedMore, SeekError):
            self.pos = saved
            what = f"sequence {target}" if kind == "sequence" else f"a message later than {target} ms"
            raise SeekError(
                f"{self.path}: stream {key!r} (shard {shard_id}) has no {what}; "
                "seek to a position the file holds (beginning, end, or an existing sequence)"
            ) from None
        except FormatError as exc:
            self.pos = saved
            raise exc.located(path=self.path) from None


def read_header(path: str | os.PathLike) -> FileHeader:
    """Read just the header of a stream file."""
    with StreamReader(path) as r:
        return r.header


def iter_messages(path: str | os.PathLike, **options: Any) -> Iterator[Message]:
    """Yield every message of a stream file (replay); options as for :class:`StreamReader`."""
    with StreamReader(path, **options) as r:
        yield from r


__all__ = [
    "FrameColumns",
    "Message",
    "NEED_MORE",
    "EndReason",
    "ReadEnd",
    "StreamReader",
    "iter_messages",
    "read_header",
]
