"""A stream writer's state: what ``StreamWriter.write`` reads and updates on every message.

One :class:`WriterState` per writer holds the descriptor, the offset, the next mark (``stop``), whether
frames go straight to the OS (``direct``), the clock, the known keys (``hot``) and the batch (``pending``
frames, ``pending_count`` messages, ``flush_every``); one :class:`StreamState` per stream holds its last
sequence number and timestamp and its running checksum. Every write route
(:mod:`nbkit.transport.write_routes`) uses the same objects directly: the pure-Python routes and, for an
exclusive writer on the compiled core, the compiled route (:mod:`nbkit.transport._writer`, whose
``WriterState`` and ``StreamState`` are the compiled twins of these classes, with the same attributes).
"""

from __future__ import annotations

import struct
import time
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field

from nbkit.wire.core import load_compiled
from nbkit.wire.crc import CRC_INIT, crc16
from nbkit.wire.ssformat import Marker, encode_beacon, num_markers

__all__ = [
    "COMPILED",
    "FOLD_AT",
    "FOLD_BYTES",
    "StreamBook",
    "StreamState",
    "WriterState",
    "Written",
    "now_ms",
]

#: Payload CRCs a stream keeps before folding them into its running checksum, when frames of other
#: writers are accounted (a catch-up); this writer's own frames are folded every FOLD_BYTES instead.
FOLD_AT = 4096
#: Bytes written between two folds of every stream's pending payload CRCs: at most 1 MiB / 33 (the
#: smallest frame) CRCs wait, however many streams there are.
FOLD_BYTES = 1 << 20


@dataclass(slots=True)
class StreamState:
    """One stream's bookkeeping: its last sequence number and timestamp, and its running checksum."""

    seq: int
    ts: int
    running: int
    #: payload CRCs not yet in ``running``; folded in one CRC pass when a beacon needs the checksum
    crcs: list[int] = field(default_factory=list)

    def note(self, seq: int, ts: int, crc: int) -> None:
        """Account one more message of this stream: its seq and timestamp, and its payload CRC."""
        if seq > self.seq:
            self.seq = seq
        if ts > self.ts:
            self.ts = ts
        crcs = self.crcs
        crcs.append(crc)
        if len(crcs) >= FOLD_AT:
            self.checksum()

    def checksum(self) -> int:
        """The running checksum over every payload CRC noted so far (spec §5)."""
        crcs = self.crcs
        if crcs:
            self.running = crc16(struct.pack(f">{len(crcs)}H", *crcs), self.running)
            crcs.clear()
        return self.running


class WriterState:
    """What ``write`` reads on every message, in one object (see the module doc).

    ``fd`` is the file's descriptor (-1 once closed); ``offset`` where the next frame starts; a frame
    ending before ``stop`` reaches no beacon boundary, checksum fold or size limit; ``direct``: each
    frame goes straight to the OS (``flush_every`` 1, no ``fsync``, nothing pending); ``clock`` gives a
    message's default timestamp; ``hot`` maps a key written on shard 0 to (its ASCII bytes, its
    :class:`StreamState`); ``pending`` holds the frames (and beacons) not yet handed to the OS,
    ``pending_count`` the messages among them, and ``flush_every`` how many a batch holds.
    """

    __slots__ = ("fd", "offset", "stop", "direct", "clock", "hot", "pending", "pending_count", "flush_every")

    def __init__(self, clock: Callable[[], int]) -> None:
        self.fd = -1
        self.offset = 0
        self.stop = 0
        self.direct = False
        self.clock = clock
        self.hot: dict[str, tuple[bytes, StreamState]] = {}
        self.pending: list[bytes] = []
        self.pending_count = 0
        self.flush_every = 1


class StreamBook:
    """Every stream's :class:`StreamState` a writer knows (``streams``, by (key, shard)) and how many
    markers its beacons have held (``beacon_count``: where the next beacon's round robin starts).

    ``State`` builds a stream's state: the pure :class:`StreamState` or its compiled twin.
    """

    __slots__ = ("State", "beacon_count", "streams")

    def __init__(self, State: type[StreamState]) -> None:  # noqa: N803 (a class)
        self.State = State
        self.streams: dict[tuple[str, int], StreamState] = {}
        self.beacon_count = 0

    def account(self, key: str, shard: int, seq: int, ts: int, payload: bytes, crc: int | None = None) -> StreamState:
        """Note one message of (key, shard) (its payload's CRC computed unless given); its stream's state."""
        state = self.streams.get((key, shard))
        if state is None:
            state = self.streams[(key, shard)] = self.State(seq, ts, CRC_INIT)
        state.note(seq, ts, crc16(payload) if crc is None else crc)
        return state

    def restart(self) -> None:
        """Forget every stream: each state is reset in place (a writer's ``hot`` entries hold them)."""
        for state in self.streams.values():
            state.seq = state.ts = 0
            state.running = CRC_INIT
            state.crcs.clear()
        self.streams.clear()
        self.beacon_count = 0

    def fold(self) -> None:
        """Fold every stream's pending payload CRCs into its running checksum."""
        for state in self.streams.values():
            if state.crcs:
                state.checksum()

    def markers(self, interval: int) -> list[Marker]:
        """The markers of the next beacon of a file with this interval (§6.2: streams in key order, a
        round robin over them when they do not all fit); counts them in ``beacon_count``."""
        wanted = num_markers(interval)
        if not self.streams or not wanted:
            return []
        ordered = sorted(self.streams, key=lambda ks: (ks[0].encode("ascii"), ks[1]))
        n = len(ordered)
        take = min(n, wanted)
        first = self.beacon_count % n
        markers = []
        for j in range(take):
            key, shard = ordered[(first + j) % n]
            st = self.streams[(key, shard)]
            markers.append(Marker(key, shard, st.seq, st.ts, st.checksum()))
        self.beacon_count += take
        return markers

    def cut(self, frame: bytes, offset: int, interval: int, chunks: list[bytes]) -> tuple[int, int]:
        """Queue a frame that starts at ``offset`` and reaches a beacon boundary into ``chunks``: its
        pieces, with a beacon (of :meth:`markers`) at each boundary (§6). Returns the offset just after the
        frame's last byte (its ``Written.end``, as the reader's ``Message.end``: a beacon at the boundary
        where the frame ends belongs to the next read, §6.3) and the offset after everything queued."""
        pos = 0
        total = len(frame)
        frame_end = offset
        while pos < total:
            take = min(total - pos, interval - offset % interval)
            chunks.append(frame[pos : pos + take] if take != total else frame)
            pos += take
            offset += take
            frame_end = offset
            if offset % interval == 0:
                beacon = encode_beacon(total - pos, self.markers(interval))
                chunks.append(beacon)
                offset += len(beacon)
        return frame_end, offset


_WrittenFields = namedtuple("_WrittenFields", "stream_key shard_id seq timestamp_ms offset end")


class Written(_WrittenFields):
    """Where a message landed: its stream, sequence, timestamp and the frame's file offsets.

    Immutable, with the fields ``stream_key``, ``shard_id``, ``seq``, ``timestamp_ms``, ``offset`` and
    ``end``. A named tuple underneath (one is built per message, and a tuple subclass is the cheapest
    object with named fields to build), but only equal to another ``Written``, not to a plain tuple.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return tuple.__eq__(self, other)
        return False if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return tuple.__ne__(self, other)
        return True if isinstance(other, tuple) else NotImplemented

    __hash__ = tuple.__hash__


def now_ms() -> int:
    """The default clock: now, in epoch milliseconds."""
    return time.time_ns() // 1_000_000


#: The compiled write route's module, or None: exclusive writers then run on the pure twins.
COMPILED = load_compiled("nbkit.transport._writer")
