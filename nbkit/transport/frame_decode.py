"""A stream file's frames, read from its source: the I/O around the pure frame decoding (format spec §4-§6.3).

:class:`FrameDecoder` owns what turning a file's bytes into frames needs: the source
(:mod:`nbkit.transport.source`), one buffer of the file read from it, the tables of stream keys met so far,
and the beacon grid. It reads a frame (:meth:`FrameDecoder.frame`, over :func:`nbkit.wire.ssframe.decode_frame`,
the one place that reports a damaged frame), a beacon (:meth:`FrameDecoder.beacon`), and runs the frame
scanner (:mod:`nbkit.wire.scan`, compiled when the compiled core is active) over the buffer for the many
frames that need none of that. :class:`~nbkit.transport.file_reader.StreamReader` composes one; moving a
reader (:mod:`nbkit.transport.reader_seek`) and stepping over damage (:mod:`nbkit.transport.salvage`) are
functions over it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableSequence
from typing import Any

from nbkit.errors import FormatError
from nbkit.transport.messages import Message
from nbkit.transport.source import LocalSource, RemoteSource
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.scan import ColumnBuffers, FrameColumns, scan_columns, scan_frames
from nbkit.wire.ssformat import HEADER_SIZE, Beacon, FileHeader, decode_header
from nbkit.wire.ssframe import Incomplete, decode_beacon_at, decode_frame

__all__ = ["FrameDecoder", "NeedBytes"]


class NeedBytes(Exception):
    """The file does not (yet) hold the bytes a parse needs: its end, or a follower must wait."""


class FrameDecoder:
    """The frames of a stream file: its source, one buffer of it, its key tables and its beacon grid.

    Opening one reads the file header (a FormatError names the file). Beacons sit at
    ``phase + k * interval``: ``phase`` is 0 unless a salvage read found the grid shifted by a cut-out or
    inserted run of bytes.

    Parameters
    ----------
    source
        Where the bytes come from (:func:`nbkit.transport.source.open_source`); the decoder does not
        close it.
    path
        The file's name in errors.
    keys
        The reader's key filter: :attr:`poll_keys` maps the keys outside it to None.
    """

    def __init__(self, source: LocalSource | RemoteSource, path: str, keys: frozenset[str] | None = None) -> None:
        self.source = source
        self.path = path
        self.keys = keys
        #: ``pread(n, offset)``: the source's read, bound once.
        self.pread: Callable[[int, int], bytes] = source.pread
        #: The bytes read last; ``buffer[0]`` is at file offset ``base``.
        self.buffer = b""
        self.base = 0
        self.phase = 0
        self.beacons_seen = 0
        self.last_beacon: Beacon | None = None
        #: Every raw stream key met so far -> its text (the internal key too).
        self.known_keys: dict[bytes, str] = {}
        #: The same for the frame scanner: the internal key is left out, so the end-of-stream mark takes
        #: the one-frame path.
        self.scan_keys: dict[bytes, str] = {}
        #: The scanner's key filter for ``poll()``: a key left out by ``keys`` maps to None (checked, then
        #: skipped). Without ``keys``, :attr:`scan_keys` itself.
        self.poll_keys: dict[bytes, str | None] = {}
        if keys is None:
            self.poll_keys = self.scan_keys  # type: ignore[assignment]  # one dict: both filled alike
        self.header = self._read_header()
        self.interval = self.header.beacon_interval
        #: What a beacon probe reads: a remote seek's binary search asks for no more than a beacon can be.
        self.probe = min(source.probe_size, self.interval) if source.remote else source.probe_size

    # -- byte access -------------------------------------------------------------------------------
    def _read_header(self) -> FileHeader:
        data = self.pread(HEADER_SIZE, 0)
        try:
            return decode_header(data)
        except FormatError as exc:
            raise exc.located(path=self.path) from None

    def size(self) -> int:
        """The file's current size in bytes (it grows while a writer appends; for a URL in replay, the size
        the server reported at open)."""
        return self.source.size()

    def fill(self, pos: int, need: int, ahead: int = 0) -> None:
        """Make :attr:`buffer` cover ``[pos, pos+need)``, reading from the file; NeedBytes if it can't.

        Reads ``max(need, ahead or the source's block size)`` bytes, cut at the source's ``limit`` (where
        the current read stops) but never below ``need``."""
        base = self.base
        if pos >= base and pos + need <= base + len(self.buffer):
            return
        n = ahead or self.source.block_size
        limit = self.source.limit
        if limit is not None and pos + n > limit:
            n = limit - pos
        data = self.pread(max(need, n), pos)
        self.buffer = data
        self.base = pos
        if len(data) < need:
            raise NeedBytes

    def drop_buffer(self) -> None:
        """Forget the bytes read so far: the next parse reads the file again (a writer resuming after a
        crash may have replaced a torn tail this decoder read)."""
        self.buffer = b""
        self.base = 0

    def on_grid(self, pos: int) -> bool:
        """Whether a beacon sits at file offset ``pos`` (on the current grid)."""
        return (pos - self.phase) % self.interval == 0

    def beacon(self, pos: int, *, probe: bool = False) -> Beacon:
        """The beacon at boundary ``pos``; NeedBytes when the file ends inside it, FormatError (naming the
        file) when it is damaged. ``probe``: a seek's look at one beacon, which reads no more than a beacon can be (on a
        remote file, a small request)."""
        want = 6
        while True:
            self.fill(pos, want, self.probe if probe else 0)
            try:
                got = decode_beacon_at(self.buffer, pos, self.interval, base=self.base)
            except FormatError as exc:
                raise exc.located(path=self.path) from None
            if not isinstance(got, Incomplete):
                return got
            want = self.base + len(self.buffer) - pos + got.need

    def note_beacon(self, beacon: Beacon) -> None:
        """Count a beacon crossed (once, however often it is read)."""
        if self.last_beacon is None or beacon.offset > self.last_beacon.offset:
            self.beacons_seen += 1
            self.last_beacon = beacon

    # -- frames ------------------------------------------------------------------------------------
    def frame(self, pos: int, *, verify: bool = True) -> Message:
        """The frame whose first field read starts at ``pos`` (after the beacon there, if any); the beacons
        crossed are counted. Raises NeedBytes, or FormatError (without the path) for damage."""
        met: list[Beacon] = []
        want = 1
        try:
            while True:
                # a frame larger than a block: read 1/16 more than the bytes known to be wanted, room for
                # the beacons inside it, so it takes two reads, not one more per beacon found
                self.fill(pos, want, want + (want >> 4) if want > self.source.block_size else 0)
                got = decode_frame(
                    self.buffer,
                    pos,
                    self.interval,
                    base=self.base,
                    phase=self.phase,
                    keys=self.known_keys,
                    verify=verify,
                    beacons=met,
                )
                if not isinstance(got, Incomplete):
                    break
                want = self.base + len(self.buffer) - pos + got.need
        finally:
            for beacon in met:
                self.note_beacon(beacon)
        key = got.stream_key
        raw = key.encode()
        if raw not in self.known_keys:
            self.learn_key(raw, key)
        return Message(*got)

    def frames(self, pos: int, *, verify: bool = True) -> Iterator[Message]:
        """The frames from ``pos`` on, one after another, until the data ends (damage raises FormatError)."""
        while True:
            try:
                msg = self.frame(pos, verify=verify)
            except NeedBytes:
                return
            yield msg
            pos = msg.end

    def learn_key(self, raw: bytes, key: str) -> None:
        """Enter a checked stream key in the key tables."""
        self.known_keys[raw] = key
        if key != INTERNAL_KEY:
            self.scan_keys[raw] = key
            if self.keys is not None:
                self.poll_keys[raw] = key if key in self.keys else None

    def scan(
        self, pos: int, keymap: dict[bytes, str | None], cols: FrameColumns, ends: list[int] | None, until: int = -1
    ) -> int:
        """:func:`~nbkit.wire.scan.scan_frames` over the current buffer from ``pos``; where it stopped."""
        if not self.phase:
            return scan_frames(self.buffer, self.base, pos, until, self.interval, keymap, cols, ends)
        return self._scan_on_grid(scan_frames, pos, until, cols.offset, ends, keymap, cols, ends)

    def scan_columns(self, pos: int, keymap: dict[bytes, int], cols: ColumnBuffers, until: int = -1) -> int:
        """:func:`~nbkit.wire.scan.scan_columns` over the current buffer from ``pos``; where it stopped."""
        if not self.phase:
            return scan_columns(self.buffer, self.base, pos, until, self.interval, keymap, cols)
        return self._scan_on_grid(scan_columns, pos, until, cols.offset, None, keymap, cols)

    def _scan_on_grid(
        self,
        scan: Callable[..., int],
        pos: int,
        until: int,
        offsets: MutableSequence[int],
        ends: list[int] | None,
        *args: Any,
    ) -> int:
        """``scan(buffer, base, pos, until, interval, *args)`` on a salvage read's shifted beacon grid: it scans
        in offsets moved onto the grid, then the frame ``offsets`` (and ``ends``) it appended are moved back."""
        shift = self.interval - self.phase
        taken, ended = len(offsets), 0 if ends is None else len(ends)
        stop = scan(
            self.buffer, self.base + shift, pos + shift, -1 if until < 0 else until + shift, self.interval, *args
        )
        for j in range(taken, len(offsets)):
            offsets[j] -= shift
        if ends is not None:
            for j in range(ended, len(ends)):
                ends[j] -= shift
        return stop - shift
