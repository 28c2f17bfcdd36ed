"""Moving a stream reader: beacon look-ups, resync, the live end, and seeks by sequence or time (spec §6.5, §8, §11.2).

Functions over a :class:`~nbkit.transport.frame_decode.FrameDecoder`: each reads what it needs through the
decoder and returns where the read goes on; :class:`~nbkit.transport.file_reader.StreamReader`'s ``seek``,
``resync``, ``beacon_at`` and ``peek_beacon`` are built on them (the reader keeps its position). A seek by
sequence number or timestamp is a binary search over the beacons' markers, then a forward scan.
"""

from __future__ import annotations

from nbkit.errors import FormatError, SeekError, TruncatedError
from nbkit.transport.frame_decode import FrameDecoder, NeedBytes
from nbkit.wire.ssformat import HEADER_SIZE, Beacon, decode_beacon

__all__ = ["PEEK_BYTES", "beacon_at", "check_boundary", "live_start", "peek_beacon", "resync", "seek_by"]

#: A beacon survey's first read per beacon (a beacon of 100 short keys fits).
PEEK_BYTES = 1 << 12


def check_boundary(decoder: FrameDecoder, offset: int) -> None:
    """Raise ValueError unless ``offset`` is a beacon boundary of the file (a positive multiple of its interval)."""
    if offset <= 0 or offset % decoder.interval:
        raise ValueError(f"offset {offset} is not a beacon boundary (a positive multiple of {decoder.interval})")


def beacon_at(decoder: FrameDecoder, offset: int) -> Beacon:
    """The beacon at boundary ``offset``; TruncatedError when the file ends inside it, FormatError when damaged."""
    check_boundary(decoder, offset)
    try:
        return decoder.beacon(offset)
    except NeedBytes:
        raise TruncatedError("the file ends inside this beacon", path=decoder.path, offset=offset) from None


def peek_beacon(decoder: FrameDecoder, offset: int) -> Beacon | None:
    """The beacon at boundary ``offset`` read with a small read of its own (the decoder's buffer is left
    alone), or None when it is incomplete or damaged."""
    check_boundary(decoder, offset)
    interval = decoder.interval
    want = min(interval, PEEK_BYTES)
    while True:
        data = decoder.pread(want, offset)
        try:
            beacon = decode_beacon(data, 0, offset)
        except TruncatedError:
            if len(data) < want or want >= interval:
                return None  # the file ends inside it, or it overruns its interval: damage
            want = min(interval, want * 4)
            continue
        except FormatError:
            return None
        if beacon.size > interval or data[:1] != b"\r" or data[beacon.size - 1 : beacon.size] != b"\r":
            return None
        return beacon


def resync(decoder: FrameDecoder, n: int) -> tuple[int, int]:
    """(where the first whole frame after the n-th beacon starts, the beacon index reached) (spec §6.5);
    past the last beacon, the last one is used. SeekError when that beacon is incomplete."""
    interval = decoder.interval
    size = decoder.size()
    if n <= 0:
        return HEADER_SIZE, 0
    target = n * interval
    if target >= size:
        target = max(interval * (size // interval), HEADER_SIZE)
        if target < interval:
            return HEADER_SIZE, 0
    pos = target
    try:
        while pos % interval == 0:
            beacon = decoder.beacon(pos)
            decoder.note_beacon(beacon)
            pos += beacon.size + min(beacon.remaining, interval - beacon.size)
    except NeedBytes:
        raise SeekError(f"{decoder.path}: the beacon at offset {pos} is incomplete") from None
    return pos, pos // interval


def live_start(decoder: FrameDecoder) -> int:
    """Just after the last complete frame (spec §8 'Live start')."""
    interval = decoder.interval
    boundary = max(interval * (decoder.size() // interval), HEADER_SIZE)
    pos = HEADER_SIZE
    while boundary >= interval:
        try:
            pos = resync(decoder, boundary // interval)[0]
            break
        except SeekError:
            boundary -= interval
    while True:
        try:
            msg = decoder.frame(pos, verify=False)
        except (NeedBytes, FormatError):
            return pos
        pos = msg.end


def _judge(decoder: FrameDecoder, b: int, kind: str, target: int, key: str, shard_id: int) -> str | None:
    """Left/Right/None for beacon ``b`` by its marker of (key, shard) (§11.2)."""
    try:
        beacon = decoder.beacon(b * decoder.interval, probe=True)
    except (NeedBytes, FormatError):
        return None
    for m in beacon.markers:
        if m.stream_key == key and m.shard_id == shard_id:
            if kind == "sequence":
                return "L" if m.seq < target else "R"
            return "L" if m.timestamp_ms <= target else "R"
    return None


def seek_by(decoder: FrameDecoder, kind: str, target: int, key: str, shard_id: int) -> int:
    """The offset of the first message of (``key``, ``shard_id``) at ``target``: a ``"sequence"`` at or after
    it, or a ``"timestamp"`` later than it (spec §11.2: a binary search over the beacons' markers, then a
    forward scan). Unlike upstream, the scan only matches messages of the target stream.

    Raises
    ------
    SeekError
        The file holds no such message.
    FormatError
        A damaged frame on the way (naming the file).
    """
    max_b = decoder.size() // decoder.interval
    lo, hi, left = 1, max_b, 0
    while lo <= hi:
        mid = (lo + hi) // 2
        decided = None
        for b in range(mid, hi + 1):
            verdict = _judge(decoder, b, kind, target, key, shard_id)
            if verdict:
                decided = (b, verdict)
                break
        if decided is None:
            for b in range(mid - 1, lo - 1, -1):
                verdict = _judge(decoder, b, kind, target, key, shard_id)
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
        for msg in decoder.frames(resync(decoder, left)[0]):
            if msg.stream_key == key and msg.shard_id == shard_id:
                value = msg.seq if kind == "sequence" else msg.timestamp_ms
                if (value >= target) if kind == "sequence" else (value > target):
                    return msg.offset
    except SeekError:
        pass
    except FormatError as exc:
        raise exc.located(path=decoder.path) from None
    what = f"sequence {target}" if kind == "sequence" else f"a message later than {target} ms"
    raise SeekError(
        f"{decoder.path}: stream {key!r} (shard {shard_id}) has no {what}; "
        "seek to a position the file holds (beginning, end, or an existing sequence)"
    )
