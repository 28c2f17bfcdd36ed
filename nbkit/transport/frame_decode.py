"""A stream reader's byte access and its one-frame decoding (format spec §4-§6.3).

:class:`FrameDecoder` is the part of :class:`~nbkit.transport.file_reader.StreamReader` that turns bytes
into frames: it keeps one buffer of the file (read from its source, :mod:`nbkit.transport.source`),
parses the beacon at a boundary, gathers a frame cut by a boundary, checks a frame's key, timestamp and
checksum (:meth:`FrameDecoder._parse_frame`, the one place that reports a damaged frame) and runs the
frame scanner (:mod:`nbkit.wire.scan`, compiled when the compiled core is active) over the buffer for the
many frames that need none of that. The frame layout itself is :mod:`nbkit.wire.ssformat`'s.
The reader's modes and positions build on it (:mod:`nbkit.transport.reader_seek`,
:mod:`nbkit.transport.salvage`).
"""

from __future__ import annotations

from collections.abc import Callable

from nbkit.errors import ChecksumError, FormatError, TimestampRangeError, TruncatedError
from nbkit.transport.messages import Message
from nbkit.transport.source import LocalSource, RemoteSource
from nbkit.wire.crc import crc16
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.scan import ColumnBuffers, FrameColumns, scan_columns, scan_frames
from nbkit.wire.ssformat import (
    FRAME_TAIL_SIZE,
    HEADER_SIZE,
    Beacon,
    FileHeader,
    decode_beacon,
    decode_header,
    decode_key,
    frame_head_size,
    unpack_frame_head,
    unpack_frame_tail,
)

__all__ = ["FrameDecoder", "NeedBytes"]


class NeedBytes(Exception):
    """Internal to the reader: the file does not (yet) hold the bytes a parse needs."""


class FrameDecoder:
    """Byte access and frame decoding over a stream file's source; the base of ``StreamReader``.

    The reader sets every attribute below when it opens the file; the beacons sit at
    ``_phase + k * interval`` (``_phase`` is 0 unless a salvage read found the grid shifted).
    """

    path: str
    source: LocalSource | RemoteSource
    interval: int
    keys: frozenset[str] | None
    beacons_seen: int
    last_beacon: Beacon | None
    _pread: Callable[[int, int], bytes]
    _buf: bytes
    _base: int
    _phase: int
    _probe: int
    _keys: dict[bytes, str]
    _fast_keys: dict[bytes, str]
    _poll_keys: dict[bytes, str | None]

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
        """Make ``self._buf`` cover ``[pos, pos+need)``, reading from the file; NeedBytes if it can't.

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
            raise NeedBytes

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
                    raise NeedBytes from None
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
        """Parse the frame whose first field read starts at ``pos``; raises NeedBytes or FormatError."""
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
        head_size = frame_head_size(k)
        if pos + head_size <= boundary:  # fast path: the header lies inside this interval
            self._fill(pos, head_size)
            raw_key, shard, seq, ts, size = unpack_frame_head(self._buf, pos - self._base)
            total = head_size + size + FRAME_TAIL_SIZE
            if pos + total <= boundary:
                self._fill(pos, total)
                payload, stored = unpack_frame_tail(self._buf, pos - self._base + head_size, size)
                end = pos + total
            else:
                tail, end = self._gather(pos + head_size, size + FRAME_TAIL_SIZE)
                payload, stored = unpack_frame_tail(tail, 0, size)
        else:
            head, p = self._gather(pos, head_size)
            raw_key, shard, seq, ts, size = unpack_frame_head(head, 0)
            tail, end = self._gather(p, size + FRAME_TAIL_SIZE)
            payload, stored = unpack_frame_tail(tail, 0, size)
        key = self._key(raw_key, start + 1)
        if ts > MAX_TIMESTAMP_MS:
            raise TimestampRangeError(f"message timestamp {ts} ms is after year 9999", offset=start + 17 + k)
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
