"""One ``.ss`` message frame decoded from a buffer, sans I/O (format spec §4, §6.1, §6.3).

:func:`decode_frame` takes the bytes a reader holds and a file offset, and answers with the decoded
:class:`Frame`, or with :class:`Incomplete` (how many more bytes past the buffer's end it needs) when the
buffer ends first: the normal case while a file is read block by block or grows, so no exception. Damage
(an invalid key, a timestamp past year 9999, a checksum mismatch, a beacon overrunning its interval)
raises a :class:`~nbkit.errors.FormatError` naming the file offset. Beacons at the boundaries the frame
crosses (and one at the offset itself) are parsed and joined around, as the reader must (§6.3).

The bulk of a file is read by the frame scanner (:mod:`nbkit.wire.scan`); this is the one-frame path the
scanner leaves to the reader (a beacon, a frame cut by a boundary or by the buffer's end, a key seen for
the first time, the end-of-stream mark, damage). :class:`nbkit.transport.frame_decode.FrameDecoder` owns
the I/O around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, cast

from nbkit.errors import ChecksumError, FormatError, TimestampRangeError
from nbkit.wire.crc import crc16
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import (
    FRAME_TAIL_SIZE,
    Beacon,
    decode_beacon,
    decode_key,
    frame_head_size,
    unpack_frame_head,
    unpack_frame_tail,
)

__all__ = ["Frame", "Incomplete", "beacon_extent", "decode_beacon_at", "decode_frame"]

Buffer = bytes | bytearray | memoryview


class Frame(NamedTuple):
    """A decoded message frame: its fields, where it starts (after any beacon before it) and where it ends.

    The fields of :class:`nbkit.transport.messages.Message`, in its order.
    """

    stream_key: str
    shard_id: int
    seq: int
    timestamp_ms: int
    payload: bytes
    offset: int
    end: int


class Incomplete(NamedTuple):
    """The buffer ends before the frame (or beacon) does: at least ``need`` more bytes are needed past its
    end before decoding can go further (it may then ask again, e.g. when a beacon lies in those bytes)."""

    need: int


def beacon_extent(buf: Buffer, i: int) -> int:
    """How many bytes the beacon starting at ``buf[i]`` is known to span, as far as ``buf`` tells.

    The full size when ``buf`` holds the whole beacon; otherwise a lower bound that is past the end of
    ``buf`` (its header, then each marker's length byte and key, decide the next part's size).
    """
    n = len(buf)
    p = i + 6
    if p > n:
        return 6
    count = buf[i + 5]
    for _ in range(count):
        if p >= n:
            return p + 1 - i
        p += 27 + buf[p]
        if p > n:
            return p - i
    return p + 1 - i


def decode_beacon_at(buf: Buffer, pos: int, interval: int, *, base: int = 0) -> Beacon | Incomplete:
    """The beacon at file offset ``pos`` (``buf[0]`` is at ``base``), or :class:`Incomplete`.

    Raises
    ------
    FormatError
        The beacon does not end before the next boundary (told once ``buf`` holds the whole interval
        from ``pos``: before that, bytes claiming so much may be a torn tail), or a marker's key is not
        a valid stream key.

    Examples
    --------
    >>> from nbkit.wire.ssformat import encode_beacon
    >>> data = encode_beacon(0, [])
    >>> decode_beacon_at(data, 1024, 1024, base=1024).size, decode_beacon_at(data[:3], 1024, 1024, base=1024)
    (7, Incomplete(need=3))
    """
    i = pos - base
    avail = len(buf) - i
    extent = beacon_extent(buf, i)
    if extent > interval:
        if avail < interval:  # damage is told from a torn tail once the whole interval is there
            return Incomplete(interval - avail)
        count = buf[i + 5]
        raise FormatError(
            f"the beacon here claims {count} markers and does not end before the next boundary "
            f"(beacon interval {interval}): the file is damaged at this offset",
            offset=pos,
        )
    if extent > avail:
        return Incomplete(extent - avail)
    return decode_beacon(cast(bytes, buf), i, pos)  # any bytes-like: it is only indexed and unpacked


def _past_beacon(
    buf: Buffer, base: int, pos: int, interval: int, phase: int, beacons: list[Beacon] | None
) -> int | Incomplete:
    """``pos``, or past the beacon when a boundary is there (appended to ``beacons`` if given)."""
    if (pos - phase) % interval:
        return pos
    beacon = decode_beacon_at(buf, pos, interval, base=base)
    if isinstance(beacon, Incomplete):
        return beacon
    if beacons is not None:
        beacons.append(beacon)
    return pos + beacon.size


def _gather(
    buf: Buffer, base: int, pos: int, n: int, interval: int, phase: int, beacons: list[Beacon] | None
) -> tuple[bytes, int] | Incomplete:
    """``n`` logical bytes from file offset ``pos``, joined around the beacons at boundaries (§6.3), and
    the offset after them."""
    parts = []
    size = len(buf)
    while n > 0:
        after = _past_beacon(buf, base, pos, interval, phase, beacons)
        if isinstance(after, Incomplete):
            return after
        pos = after
        take = min(n, interval - (pos - phase) % interval)
        i = pos - base
        if i + take > size:  # ask for all the bytes still wanted, beacons aside: a frame larger than
            return Incomplete(i + n - size)  # the buffer is then read in a few reads, not one per interval
        parts.append(buf[i : i + take])
        pos += take
        n -= take
    return b"".join(parts), pos


def decode_frame(
    buf: Buffer,
    pos: int,
    interval: int,
    *,
    base: int = 0,
    phase: int = 0,
    keys: Mapping[bytes, str] | None = None,
    verify: bool = True,
    beacons: list[Beacon] | None = None,
) -> Frame | Incomplete:
    """Decode the frame whose first field read starts at file offset ``pos``.

    Parameters
    ----------
    buf
        File bytes; ``buf[0]`` is at file offset ``base``, and ``buf`` holds ``pos`` (``base <= pos``).
    pos
        A frame start, or a beacon boundary (the beacon there is read first).
    interval
        The file's beacon interval: beacons sit at ``phase + k * interval``.
    base
        The file offset of ``buf[0]``.
    phase
        Where the beacon grid starts: 0, unless a salvage read found it shifted.
    keys
        Raw stream keys already checked, and their text; any other key is decoded and checked here.
    verify
        Check the payload's CRC-16 against the one stored after it.
    beacons
        If not None, every beacon parsed on the way is appended to it, also when the frame then turns out
        incomplete or damaged (a reader counts the beacons it crossed).

    Returns
    -------
    Frame or Incomplete
        The frame, or how many more bytes past the end of ``buf`` are needed at least.

    Raises
    ------
    FormatError
        Damage, with the file offset: a :class:`~nbkit.errors.StreamKeyError` or
        :class:`~nbkit.errors.Utf8Error` for the key, a :class:`~nbkit.errors.TimestampRangeError`, a
        :class:`~nbkit.errors.ChecksumError`, or a beacon that overruns its interval.

    Examples
    --------
    >>> from nbkit.wire.ssformat import encode_frame
    >>> frame, _ = encode_frame(b"demo", 0, 1, 1700000000000, b"hi")
    >>> decode_frame(frame, 128, 1 << 20, base=128)
    Frame(stream_key='demo', shard_id=0, seq=1, timestamp_ms=1700000000000, payload=b'hi', offset=128, end=166)
    >>> decode_frame(frame[:30], 128, 1 << 20, base=128)
    Incomplete(need=3)
    """
    after = _past_beacon(buf, base, pos, interval, phase, beacons)
    if isinstance(after, Incomplete):
        return after
    start = pos = after
    i = pos - base
    n = len(buf)
    if i >= n:
        return Incomplete(i + 1 - n)
    head_size = frame_head_size(buf[i])
    boundary = pos - (pos - phase) % interval + interval
    if pos + head_size <= boundary:  # the usual case: the frame's head lies inside this interval
        if i + head_size > n:
            return Incomplete(i + head_size - n)
        raw_key, shard, seq, ts, size = unpack_frame_head(cast(bytes, buf), i)  # any bytes-like, as above
        total = head_size + size + FRAME_TAIL_SIZE
        if pos + total <= boundary:
            if i + total > n:
                return Incomplete(i + total - n)
            payload, stored = unpack_frame_tail(cast(bytes, buf), i + head_size, size)
            end = pos + total
        else:
            tail = _gather(buf, base, pos + head_size, size + FRAME_TAIL_SIZE, interval, phase, beacons)
            if isinstance(tail, Incomplete):
                return tail
            payload, stored = unpack_frame_tail(tail[0], 0, size)
            end = tail[1]
    else:
        head = _gather(buf, base, pos, head_size, interval, phase, beacons)
        if isinstance(head, Incomplete):
            return head
        raw_key, shard, seq, ts, size = unpack_frame_head(head[0], 0)
        tail = _gather(buf, base, head[1], size + FRAME_TAIL_SIZE, interval, phase, beacons)
        if isinstance(tail, Incomplete):
            return tail
        payload, stored = unpack_frame_tail(tail[0], 0, size)
        end = tail[1]
    if type(raw_key) is not bytes:  # a bytearray or memoryview buffer
        raw_key = bytes(raw_key)
    key = None if keys is None else keys.get(raw_key)
    if key is None:
        key = decode_key(raw_key, start + 1)
    if ts > MAX_TIMESTAMP_MS:
        raise TimestampRangeError(f"message timestamp {ts} ms is after year 9999", offset=start + 17 + len(raw_key))
    payload = bytes(payload)
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
    return Frame(key, shard, seq, ts, payload, start, end)
