"""A stream reader's positions: where a read starts, and moving it (format spec §8, §11.2).

:class:`Positions` is the part of :class:`~nbkit.transport.file_reader.StreamReader` that moves it: to a
:class:`~nbkit.transport.positions.FilePosition` (the beginning, the live end, a beacon, a stream's sequence
number or timestamp, found by a binary search over the beacons' markers), to a known frame offset
(:meth:`Positions.seek_offset`), and the beacon look-ups a survey makes (:meth:`Positions.beacon_at`,
:meth:`Positions.peek_beacon`). It builds on the frame decoding of :mod:`nbkit.transport.frame_decode`.
"""

from __future__ import annotations

from nbkit.errors import FormatError, SeekError, TruncatedError
from nbkit.transport.frame_decode import FrameDecoder, NeedBytes
from nbkit.transport.messages import ReadEnd
from nbkit.transport.positions import FilePosition
from nbkit.wire.ssformat import HEADER_SIZE, Beacon, decode_beacon

__all__ = ["PEEK_BYTES", "Positions"]

#: A beacon survey's first read per beacon (a beacon of 100 short keys fits).
PEEK_BYTES = 1 << 12


class Positions(FrameDecoder):
    """Seeking and beacon look-ups (see the module doc)."""

    pos: int
    end: ReadEnd | None
    _ahead_pos: int

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
        except NeedBytes:
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
        want = min(self.interval, PEEK_BYTES)
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
        except NeedBytes:
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
            except (NeedBytes, FormatError):
                return pos
            pos = msg.end

    def _judge(self, b: int, kind: str, target: int, key: str, shard_id: int) -> str | None:
        """Left/Right/None for beacon ``b`` by its marker of (key, shard) (§11.2)."""
        try:
            beacon = self._beacon_at(b * self.interval, probe=True)
        except (NeedBytes, FormatError):
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
        except (NeedBytes, SeekError):
            self.pos = saved
            what = f"sequence {target}" if kind == "sequence" else f"a message later than {target} ms"
            raise SeekError(
                f"{self.path}: stream {key!r} (shard {shard_id}) has no {what}; "
                "seek to a position the file holds (beginning, end, or an existing sequence)"
            ) from None
        except FormatError as exc:
            self.pos = saved
            raise exc.located(path=self.path) from None
