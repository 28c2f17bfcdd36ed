"""The SeaStreamer ``.ss`` container, sans I/O: file header, message frames and beacons.

Byte layouts follow ``stream-file-format.md`` §3-§6; every integer is big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from nbkit.errors import (
    BeaconIntervalError,
    ByteMarkError,
    PayloadTooLargeError,
    StreamKeyError,
    TimestampRangeError,
    TruncatedError,
    Utf8Error,
    VersionError,
)
from nbkit.wire.core import pick
from nbkit.wire.crc import crc16
from nbkit.wire.keys import INTERNAL_KEY, is_valid_key
from nbkit.wire.limits import MAX_PAYLOAD, MAX_TIMESTAMP_MS

__all__ = [
    "CR",
    "DEFAULT_BEACON_INTERVAL",
    "EOS_PAYLOAD",
    "FRAME_CRC",
    "FRAME_HEAD",
    "FRAME_TAIL_SIZE",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_MARKER_SIZE",
    "MAX_U64",
    "MIN_READ_INTERVAL",
    "VERSION",
    "Beacon",
    "FileHeader",
    "Marker",
    "check_timestamp",
    "check_write_interval",
    "decode_beacon",
    "decode_header",
    "decode_key",
    "encode_beacon",
    "encode_frame",
    "encode_frame_pure",
    "encode_header",
    "frame_head_size",
    "is_eos",
    "num_markers",
    "unpack_frame_head",
    "unpack_frame_tail",
]

HEADER_SIZE = 128
MAGIC = b"Ss"
VERSION = 1
#: Default beacon interval: 1 MiB, as upstream.
DEFAULT_BEACON_INTERVAL = 1 << 20
#: Readers accept any interval of at least this many bytes.
MIN_READ_INTERVAL = 128
MAX_U64 = (1 << 64) - 1
#: Upper bound of one marker's size that upstream uses to size beacons (1 + 255 + 24 + 2).
MAX_MARKER_SIZE = 282
#: The end-of-stream frame's payload.
EOS_PAYLOAD = b"EOS"
CR = b"\r"

#: A frame's fields after its key (K, then K key bytes): shard, seq, timestamp (ms), payload size (§4).
FRAME_HEAD = struct.Struct(">QQQI")
#: After the payload: its CRC-16 (then the frame's closing CR).
FRAME_CRC = struct.Struct(">H")
#: Bytes after the payload: its CRC-16 and the frame's closing CR.
FRAME_TAIL_SIZE = FRAME_CRC.size + 1
_MARK = struct.Struct(">QQQH")  # shard, seq, ts, running checksum
_U32 = struct.Struct(">I")
_CRC_END = struct.Struct(">Hc")


@dataclass(frozen=True, slots=True)
class FileHeader:
    """The 128-byte file header: the base name given at creation, creation time, beacon interval."""

    file_name: str
    created_at_ms: int
    beacon_interval: int


@dataclass(frozen=True, slots=True)
class Marker:
    """One stream's summary inside a beacon: max seq and ts written so far, and its running checksum."""

    stream_key: str
    shard_id: int
    seq: int
    timestamp_ms: int
    running_checksum: int

    @property
    def size(self) -> int:
        return 27 + len(self.stream_key)


@dataclass(frozen=True, slots=True)
class Beacon:
    """A beacon at ``offset`` (a multiple of the interval): the cut frame's remaining bytes and markers."""

    offset: int
    remaining: int
    markers: tuple[Marker, ...]

    @property
    def size(self) -> int:
        return 7 + sum(m.size for m in self.markers)


def check_write_interval(interval: int) -> int:
    """Return ``interval`` if a writer may use it (a positive multiple of 1024), else raise."""
    if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0 or interval % 1024:
        raise BeaconIntervalError(
            f"invalid beacon interval: {interval!r}; use a positive multiple of 1024 "
            f"(the default is {DEFAULT_BEACON_INTERVAL})"
        )
    return interval


def encode_header(header: FileHeader) -> bytes:
    """Serialize a file header; the name must be at most 111 UTF-8 bytes (the Rust writer's limit)."""
    name = header.file_name.encode("utf-8")
    if len(name) > 111:
        raise PayloadTooLargeError(f"file name {header.file_name!r} is {len(name)} bytes; the header holds at most 111")
    check_timestamp(header.created_at_ms)
    head = MAGIC + bytes((VERSION, len(name))) + name + struct.pack(">QI", header.created_at_ms, header.beacon_interval)
    return head + bytes(HEADER_SIZE - 1 - len(head)) + CR


def decode_header(data: bytes) -> FileHeader:
    """Parse the first 128 bytes of a stream file (offsets in errors are relative to the file start)."""
    if len(data) < 4:
        if data[: len(MAGIC)] != MAGIC[: len(data)]:
            raise ByteMarkError("not a stream file: it does not start with the bytes 'Ss'", offset=0)
        raise TruncatedError(
            f"the file is {len(data)} bytes long, shorter than the 128-byte stream-file header", offset=0
        )
    if data[:2] != MAGIC:
        raise ByteMarkError(
            f"not a stream file: it starts with {bytes(data[:2])!r}, not the magic bytes 'Ss'", offset=0
        )
    if data[2] != VERSION:
        raise VersionError(f"unsupported stream-file version {data[2]} (nbkit reads version 1)", offset=2)
    n = data[3]
    if n > 112:
        raise ByteMarkError(f"file-name length {n} in the header is over the 112-byte maximum", offset=3)
    if len(data) < HEADER_SIZE:
        raise TruncatedError(
            f"the file is {len(data)} bytes long, shorter than the 128-byte stream-file header", offset=0
        )
    try:
        name = bytes(data[4 : 4 + n]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Utf8Error(f"the file name in the header is not UTF-8 ({exc.reason})", offset=4) from None
    created, interval = struct.unpack_from(">QI", data, 4 + n)
    if interval < MIN_READ_INTERVAL:
        raise BeaconIntervalError(
            f"beacon interval {interval} in the header is below the minimum of {MIN_READ_INTERVAL}",
            offset=8 + n,
        )
    if created > MAX_TIMESTAMP_MS:
        raise TimestampRangeError(f"creation time {created} ms is after year 9999", offset=4 + n)
    return FileHeader(name, created, interval)


def check_timestamp(ms: int) -> int:
    """Return ``ms`` if it is a representable timestamp (0 .. 9999-12-31T23:59:59.999Z)."""
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise TimestampRangeError(f"timestamp {ms} ms is outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z")
    return ms


def encode_frame(key: bytes, shard_id: int, seq: int, timestamp_ms: int, payload: bytes) -> tuple[bytes, int]:
    """Serialize one message frame; returns the frame bytes and the payload's CRC.

    ``key`` must already be validated ASCII; integers are checked against their field widths.
    """
    size = len(payload)
    if size > MAX_PAYLOAD:
        raise PayloadTooLargeError(f"payload of {size} bytes exceeds the format's limit of {MAX_PAYLOAD}")
    if not (0 <= shard_id <= MAX_U64 and 0 <= seq <= MAX_U64):
        raise ValueError(f"shard {shard_id} and sequence {seq} must be unsigned 64-bit integers")
    check_timestamp(timestamp_ms)
    crc = crc16(payload)
    return b"".join(
        (
            bytes((len(key),)),
            key,
            FRAME_HEAD.pack(shard_id, seq, timestamp_ms, size),
            payload,
            _CRC_END.pack(crc, CR),
        )
    ), crc


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
encode_frame_pure = encode_frame
encode_frame = pick("encode_frame", encode_frame_pure)  # noqa: F811 (the twin this process runs)


def frame_head_size(key_len: int) -> int:
    """Bytes from a frame's start to its payload: the key length K, the key, then :data:`FRAME_HEAD`."""
    return 1 + key_len + FRAME_HEAD.size


def unpack_frame_head(data: bytes, i: int) -> tuple[bytes, int, int, int, int]:
    """(raw key, shard, seq, timestamp ms, payload size) of the frame whose head starts at ``data[i]``
    (``data`` must hold :func:`frame_head_size` bytes from there)."""
    k = data[i]
    shard, seq, ts, size = FRAME_HEAD.unpack_from(data, i + 1 + k)
    return data[i + 1 : i + 1 + k], shard, seq, ts, size


def unpack_frame_tail(data: bytes, i: int, size: int) -> tuple[bytes, int]:
    """(payload, the CRC stored after it) of a frame whose ``size``-byte payload starts at ``data[i]``."""
    return data[i : i + size], FRAME_CRC.unpack_from(data, i + size)[0]


def num_markers(interval: int) -> int:
    """How many markers the writer puts in each beacon for a given interval (§6.2 step 4)."""
    if interval < 7:
        return 0
    return min(255, (interval - 7) // MAX_MARKER_SIZE) // 2


def encode_beacon(remaining: int, markers: list[Marker] | tuple[Marker, ...]) -> bytes:
    """Serialize a beacon: CR, remaining bytes of the cut frame, marker count, markers, CR."""
    parts = [CR, _U32.pack(remaining), bytes((len(markers),))]
    for m in markers:
        key = m.stream_key.encode("ascii")
        parts.append(bytes((len(key),)))
        parts.append(key)
        parts.append(_MARK.pack(m.shard_id, m.seq, m.timestamp_ms, m.running_checksum))
    parts.append(CR)
    return b"".join(parts)


def decode_beacon(data: bytes | memoryview, pos: int, offset: int) -> Beacon:
    """Parse the beacon that starts at ``data[pos]``; ``offset`` is its file offset (for errors).

    Raises TruncatedError when ``data`` ends inside the beacon.
    """
    end = len(data)
    if pos + 6 > end:
        raise TruncatedError("the data ends inside a beacon", offset=offset)
    (remaining,) = _U32.unpack_from(data, pos + 1)
    count = data[pos + 5]
    p = pos + 6
    markers = []
    for _ in range(count):
        if p >= end:
            raise TruncatedError("the data ends inside a beacon", offset=offset)
        k = data[p]
        if p + 1 + k + 26 > end:
            raise TruncatedError("the data ends inside a beacon", offset=offset)
        key = decode_key(data[p + 1 : p + 1 + k], offset + (p - pos) + 1)
        shard, seq, ts, running = _MARK.unpack_from(data, p + 1 + k)
        markers.append(Marker(key, shard, seq, ts, running))
        p += 27 + k
    if p >= end:
        raise TruncatedError("the data ends inside a beacon", offset=offset)
    return Beacon(offset, remaining, tuple(markers))


def decode_key(raw: bytes | memoryview, offset: int | None = None) -> str:
    """Decode and check a stream key read from a file (an empty key is accepted, as upstream)."""
    try:
        key = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise Utf8Error(f"stream key {bytes(raw)!r} is not UTF-8", offset=offset) from None
    if key and not is_valid_key(key):
        raise StreamKeyError(
            f"invalid stream key {key[:60]!r}: keys are 1-249 characters of [A-Za-z0-9._-]", offset=offset
        )
    return key


def is_eos(stream_key: str, payload: bytes) -> bool:
    """True for SeaStreamer's end-of-stream mark."""
    return stream_key == INTERNAL_KEY and payload == EOS_PAYLOAD
