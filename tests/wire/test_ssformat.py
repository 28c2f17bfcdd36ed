"""The .ss codecs against the spec's worked examples (§3-§7) and CRC check values (§5)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbkit.errors import (
    BeaconIntervalError,
    ByteMarkError,
    FormatError,
    PayloadTooLargeError,
    StreamKeyError,
    TimestampRangeError,
    TruncatedError,
    Utf8Error,
    VersionError,
)
from nbkit.wire.crc import CRC_INIT, crc16, running_update
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import (
    DEFAULT_BEACON_INTERVAL,
    FRAME_TAIL_SIZE,
    Beacon,
    FileHeader,
    Marker,
    check_write_interval,
    decode_beacon,
    decode_header,
    decode_key,
    encode_beacon,
    encode_frame,
    encode_header,
    frame_head_size,
    is_eos,
    num_markers,
    unpack_frame_head,
    unpack_frame_tail,
)

SAMPLE_NAME = "vec_map-1694767177436.firedbg.ss"


def crc16_bitwise(data: bytes, crc: int = 0xFFFF) -> int:
    """Reference CRC-16/CDMA2000, bit by bit (poly 0xC867, MSB first, no reflection, no xorout)."""
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0xC867) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


# -- §5 CRC --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"123456789", 0x4C06),
        (b"hello, world", 0x8028),
        (b"123456789abcd", 0xA106),
        (b"EOS", 0xED7C),
        (b"hi", 0xD73B),
        (b"", 0xFFFF),
    ],
)
def test_crc_check_values(data: bytes, expected: int) -> None:
    assert crc16(data) == expected
    assert crc16_bitwise(data) == expected


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=600))
def test_crc_matches_bitwise_reference(data: bytes) -> None:
    assert crc16(data) == crc16_bitwise(data)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12))
def test_running_checksum_is_crc_over_be16_payload_crcs(payloads: list[bytes]) -> None:
    running = CRC_INIT
    for p in payloads:
        running = running_update(running, crc16(p))
    assert running == crc16_bitwise(b"".join(crc16(p).to_bytes(2, "big") for p in payloads))


# -- §3 header -------------------------------------------------------------------------------------


def test_header_worked_example(sample_bytes: bytes) -> None:
    header = FileHeader(SAMPLE_NAME, 1694767177437, 1 << 20)
    raw = encode_header(header)
    assert len(raw) == 128
    assert raw == sample_bytes[:128]
    assert raw[:4] == bytes.fromhex("53730120")
    assert raw[4:36] == SAMPLE_NAME.encode()
    assert raw[36:44] == bytes.fromhex("0000018a97fededd")
    assert raw[44:48] == bytes.fromhex("00100000")
    assert raw[48:127] == bytes(79)
    assert raw[127] == 0x0D
    assert decode_header(sample_bytes) == header
    assert DEFAULT_BEACON_INTERVAL == 1_048_576


def _raw_header(
    name: bytes, created: int = 0, interval: int = 1024, *, magic: bytes = b"Ss", version: int = 1
) -> bytes:
    head = magic + bytes([version, len(name)]) + name + struct.pack(">QI", created, interval)
    return (head + bytes(128))[:128]


def test_header_reader_limits() -> None:
    # A reader accepts a 112-byte name: 0 padding bytes and no final CR (§3).
    raw = _raw_header(b"n" * 112, 5, 2048)
    assert len(raw) == 128 and raw[-1] == 0x00
    assert decode_header(raw) == FileHeader("n" * 112, 5, 2048)
    with pytest.raises(ByteMarkError):
        decode_header(bytes([0x53, 0x73, 1, 113]) + bytes(124))
    # ... but a writer refuses names over 111 bytes (the Rust writer would underflow).
    with pytest.raises(PayloadTooLargeError, match="111"):
        encode_header(FileHeader("n" * 112, 0, 1024))
    assert len(encode_header(FileHeader("n" * 111, 0, 1024))) == 128
    # readers do not check the header's final CR
    assert decode_header(_raw_header(b"x")[:127] + b"\x00") == FileHeader("x", 0, 1024)


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", TruncatedError),
        (b"Ss", TruncatedError),
        (b"Ss\x01\x04demo", TruncatedError),
        (b"PK\x03\x04" + bytes(124), ByteMarkError),
        (b"S", TruncatedError),
        (b"X", ByteMarkError),
        (_raw_header(b"a", version=2), VersionError),
        (_raw_header(b"a", magic=b"sS"), ByteMarkError),
        (_raw_header(b"\xff\xfe"), Utf8Error),
        (_raw_header(b"a", interval=127), BeaconIntervalError),
        (_raw_header(b"a", interval=0), BeaconIntervalError),
        (_raw_header(b"a", created=MAX_TIMESTAMP_MS + 1), TimestampRangeError),
    ],
)
def test_header_errors(raw: bytes, error: type[FormatError]) -> None:
    with pytest.raises(error) as info:
        decode_header(raw)
    assert info.value.offset is not None  # every format error says where


def test_header_accepts_any_interval_from_128() -> None:
    assert decode_header(_raw_header(b"a", interval=128)).beacon_interval == 128
    assert decode_header(_raw_header(b"a", interval=300)).beacon_interval == 300


# -- §4 frame --------------------------------------------------------------------------------------


def test_demo_frame_worked_example() -> None:
    frame, crc = encode_frame(b"demo", 0, 1, 1700000000000, b"hi")
    expected = bytes.fromhex(
        "04"
        + b"demo".hex()
        + "0000000000000000"
        + "0000000000000001"
        + "0000018bcfe56800"
        + "00000002"
        + b"hi".hex()
        + "d73b"
        + "0d"
    )
    assert frame == expected
    assert len(frame) == 38 == 32 + 4 + 2
    assert crc == 0xD73B


def test_sample_first_frame(sample_bytes: bytes) -> None:
    frame = sample_bytes[0x80:]
    assert frame[:5] == b"\x04file"
    shard, seq, ts, size = struct.unpack_from(">QQQI", frame, 5)
    assert (shard, seq, ts, size) == (0, 1, 0x0000018A97FEE0B8, 0x86)
    assert ts == 1694767177912
    total = 32 + 4 + size
    assert total == 170
    payload = frame[29 + 4 : 29 + 4 + size]
    assert frame[total - 3 : total - 1] == crc16(payload).to_bytes(2, "big")
    assert frame[total - 1] == 0x0D
    assert encode_frame(b"file", 0, 1, ts, payload)[0] == frame[:total]


def test_eos_frame() -> None:
    frame, crc = encode_frame(INTERNAL_KEY.encode(), 0, 0, 1694767178569, b"EOS")
    assert len(frame) == 56
    assert frame.endswith(bytes.fromhex("00000003454f53ed7c0d"))
    assert crc == 0xED7C
    assert is_eos(INTERNAL_KEY, b"EOS")
    assert not is_eos(INTERNAL_KEY, b"PULSE")
    assert not is_eos("eos", b"EOS")


def test_frame_field_limits() -> None:
    with pytest.raises(TimestampRangeError):
        encode_frame(b"k", 0, 0, MAX_TIMESTAMP_MS + 1, b"")
    with pytest.raises(TimestampRangeError):
        encode_frame(b"k", 0, 0, -1, b"")
    with pytest.raises(ValueError):
        encode_frame(b"k", 1 << 64, 0, 0, b"")
    with pytest.raises(ValueError):
        encode_frame(b"k", 0, -1, 0, b"")
    frame, _ = encode_frame(b"k", (1 << 64) - 1, (1 << 64) - 1, MAX_TIMESTAMP_MS, b"")
    assert len(frame) == 33


# -- §6 beacons ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("interval", "expected"),
    [(0, 0), (6, 0), (7, 0), (128, 0), (1024, 1), (2048, 3), (4096, 7), (65536, 116), (1 << 20, 127)],
)
def test_num_markers(interval: int, expected: int) -> None:
    assert num_markers(interval) == expected


def test_orders_beacon_worked_example() -> None:
    """§6.1: stream orders/0, message N = seq N, ts 1700000000000+10N, payload {"order":N}; I = 1024."""
    offset = 128
    running = CRC_INIT
    for n in range(1, 20):
        frame, crc = encode_frame(b"orders", 0, n, 1700000000000 + 10 * n, b'{"order":%d}' % n)
        assert len(frame) == (49 if n < 10 else 50)
        running = running_update(running, crc)
        if n < 19:
            offset += len(frame)
    assert offset == 1019  # message 19 starts here; the beacon at 1024 cuts it after 5 bytes
    assert running == 42879 == 0xA77F
    markers = [Marker("orders", 0, 19, 1700000000190, running)]
    raw = encode_beacon(50 - 5, markers)
    expected = bytes.fromhex(
        "0d"
        + "0000002d"
        + "01"
        + "06"
        + b"orders".hex()
        + "0000000000000000"
        + "0000000000000013"
        + "0000018bcfe568be"
        + "a77f"
        + "0d"
    )
    assert raw == expected
    assert len(raw) == 40 == 7 + 27 + 6
    beacon = decode_beacon(raw, 0, 1024)
    assert beacon == Beacon(1024, 45, tuple(markers))
    assert beacon.size == 40


def test_empty_beacon() -> None:
    assert encode_beacon(0, []) == bytes.fromhex("0d00000000000d")
    assert decode_beacon(bytes.fromhex("0d00000000000d"), 0, 128) == Beacon(128, 0, ())


def test_beacon_ignores_cr_values_and_reports_truncation() -> None:
    markers = [Marker("a", 1, 2, 3, 4), Marker("bb", 5, 6, 7, 8)]
    raw = encode_beacon(9, markers)
    assert len(raw) == 7 + 28 + 29
    mangled = b"\x00" + raw[1:-1] + b"\x00"
    assert decode_beacon(mangled, 0, 2048) == Beacon(2048, 9, tuple(markers))
    # decoding at a position inside a larger buffer
    assert decode_beacon(b"xyz" + raw + b"tail", 3, 4096).markers == tuple(markers)
    for cut in range(len(raw)):
        with pytest.raises(TruncatedError):
            decode_beacon(raw[:cut], 0, 1024)


def test_beacon_marker_key_checked() -> None:
    bad = encode_beacon(0, [Marker("a", 0, 0, 0, 0)]).replace(b"\x01a", b"\x01!")
    with pytest.raises(StreamKeyError):
        decode_beacon(bad, 0, 1024)


# -- §10 keys and intervals ------------------------------------------------------------------------


def test_decode_key_rules() -> None:
    assert decode_key(b"orders.v1_x-y") == "orders.v1_x-y"
    assert decode_key(b"") == ""  # upstream accepts an empty key on read
    assert decode_key(b"k" * 249) == "k" * 249
    with pytest.raises(StreamKeyError):
        decode_key(b"k" * 250)
    with pytest.raises(StreamKeyError):
        decode_key(b"a b")
    with pytest.raises(Utf8Error):
        decode_key(b"\xff")


@pytest.mark.parametrize("interval", [1024, 2048, 1 << 20, 7 * 1024])
def test_write_interval_ok(interval: int) -> None:
    assert check_write_interval(interval) == interval


@pytest.mark.parametrize("interval", [0, -1024, 128, 1000, 1025, True, 1024.0])
def test_write_interval_refused(interval) -> None:
    with pytest.raises(BeaconIntervalError, match="multiple of 1024"):
        check_write_interval(interval)


@given(
    key=st.text("abcXYZ09._-", min_size=1, max_size=40),
    shard=st.integers(0, 2**64 - 1),
    seq=st.integers(0, 2**64 - 1),
    ts=st.integers(0, MAX_TIMESTAMP_MS),
    payload=st.binary(max_size=300),
)
def test_the_frame_layout_helpers_read_back_what_encode_frame_wrote(key, shard, seq, ts, payload) -> None:
    raw = key.encode("ascii")
    frame, crc = encode_frame(raw, shard, seq, ts, payload)
    data = b"pad" + frame
    head = frame_head_size(len(raw))
    assert unpack_frame_head(data, 3) == (raw, shard, seq, ts, len(payload))
    assert unpack_frame_tail(data, 3 + head, len(payload)) == (payload, crc)
    assert len(frame) == head + len(payload) + FRAME_TAIL_SIZE and frame.endswith(b"\r")
