"""decode_frame: one frame from a buffer, sans I/O: a Frame, "need N more bytes", or a FormatError at the offset."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.errors import ChecksumError, FormatError, StreamKeyError, TimestampRangeError, Utf8Error
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import HEADER_SIZE, FileHeader, Marker, encode_beacon, encode_frame, encode_header
from nbkit.wire.ssframe import Frame, Incomplete, decode_beacon_at, decode_frame

MARKERS = (Marker("orders", 0, 19, 1700000000190, 42879),)


def layout(frames: list[bytes], interval: int, markers: tuple[Marker, ...] = MARKERS) -> tuple[bytes, list[int]]:
    """A stream file holding ``frames``, a beacon at every multiple of ``interval`` (spec §6.2); and where
    each frame's first field read starts (a beacon boundary when one lies there)."""
    out = bytearray(encode_header(FileHeader("t.ss", 0, interval)))
    if len(out) % interval == 0:  # I = 128: an empty beacon right after the header
        out += encode_beacon(0, markers)
    starts = []
    for frame in frames:
        starts.append(len(out))
        rest = frame
        while rest:
            take = min(len(rest), interval - len(out) % interval)
            out += rest[:take]
            rest = rest[take:]
            if len(out) % interval == 0:
                out += encode_beacon(len(rest), markers)
    return bytes(out), starts


def frame_bytes(
    key: bytes = b"orders", seq: int = 1, payload: bytes = b'{"order":1}', ts: int = 1700000000010
) -> bytes:
    return encode_frame(key, 0, seq, ts, payload)[0]


def test_the_spec_worked_example_decodes():
    data = bytes.fromhex("0464656d6f" + "00" * 8 + "0000000000000001" + "0000018bcfe56800" + "00000002")
    data += b"hi" + bytes.fromhex("d73b0d")
    got = decode_frame(data, HEADER_SIZE, 1 << 20, base=HEADER_SIZE)
    assert got == Frame("demo", 0, 1, 1700000000000, b"hi", HEADER_SIZE, HEADER_SIZE + 38)


def test_a_frame_cut_by_a_beacon_is_joined_around_it_and_the_beacon_is_reported():
    """Spec §6.1: with I = 1024, message 19 starts at 1019 and the 40-byte beacon at 1024 cuts it after 5 bytes."""
    frames = [frame_bytes(seq=n, payload=b'{"order":%d}' % n, ts=1700000000000 + 10 * n) for n in range(1, 21)]
    data, starts = layout(frames, 1024)
    assert starts[18] == 1019
    met: list = []
    got = decode_frame(data, 1019, 1024, beacons=met)
    assert isinstance(got, Frame)
    assert (got.seq, got.payload, got.offset, got.end) == (19, b'{"order":19}', 1019, 1019 + 50 + 40)
    assert [(b.offset, b.remaining, b.size) for b in met] == [(1024, 45, 40)]
    after = decode_frame(data, got.end, 1024)
    assert isinstance(after, Frame) and after.seq == 20


def test_a_frame_at_a_boundary_starts_after_the_beacon_there():
    frame = frame_bytes(payload=b"x" * (1024 - HEADER_SIZE - 32 - 6))  # ends exactly on the boundary
    data, _ = layout([frame, frame_bytes(seq=2)], 1024)
    met: list = []
    got = decode_frame(data, 1024, 1024, beacons=met)
    assert isinstance(got, Frame)
    assert got.seq == 2 and got.offset == 1024 + met[0].size and met[0].remaining == 0


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_any_bytes_like_buffer_and_a_buffer_starting_mid_file(kind):
    frames = [frame_bytes(seq=n, payload=bytes([n]) * 300) for n in range(1, 10)]
    data, starts = layout(frames, 1024)
    base = starts[3] - 7
    got = decode_frame(kind(data[base:]), starts[3], 1024, base=base)
    assert isinstance(got, Frame)
    assert type(got.payload) is bytes and type(got.stream_key) is str
    assert (got.seq, got.payload, got.offset) == (4, bytes([4]) * 300, starts[3])
    assert got == decode_frame(data, starts[3], 1024)


def test_a_known_key_is_taken_from_the_table():
    key = "orders"
    got = decode_frame(frame_bytes(), 0 + 1, 1 << 20, base=1, keys={b"orders": key})
    assert isinstance(got, Frame) and got.stream_key is key


def test_a_shifted_beacon_grid_is_followed():
    """A salvage read on a grid moved by ``shift`` bytes: the beacons sit at ``phase + k * interval``."""
    frames = [frame_bytes(seq=n, payload=bytes(200)) for n in range(1, 12)]
    data, starts = layout(frames, 512)
    shift = 700  # offsets of the same bytes in a file that has 700 more bytes before them
    for n, start in enumerate(starts, 1):
        got = decode_frame(data, start + shift, 512, base=shift, phase=shift % 512)
        assert isinstance(got, Frame) and (got.seq, got.offset - shift) == (n, decode_frame(data, start, 512).offset)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 400), min_size=1, max_size=6),
    keylen=st.integers(1, 40),
    interval=st.sampled_from([128, 256, 1024]),
    nmarkers=st.integers(0, 2),
)
def test_every_truncation_point_asks_for_more_and_the_asks_add_up_to_the_frame(sizes, keylen, interval, nmarkers):
    """Cut the file at every byte of every frame: "need N" (N >= 1, never past the frame's end, exact once
    the head is in and no beacon is left to read); reading N more each time reaches the frame itself."""
    key = b"k" * keylen
    frames = [frame_bytes(key, n, bytes([n % 256]) * size) for n, size in enumerate(sizes, 1)]
    markers = tuple(Marker("k" * keylen, 0, 1, 1, 1) for _ in range(nmarkers))
    if 7 + sum(m.size for m in markers) > interval:
        markers = ()
    data, starts = layout(frames, interval, markers)
    view = memoryview(data)  # cuts without copies
    for n, start in enumerate(starts, 1):
        whole = decode_frame(data, start, interval)
        assert isinstance(whole, Frame) and whole.seq == n
        last = whole.end  # a beacon after the frame's last byte belongs to the next frame
        for cut in range(start, last):
            got = decode_frame(view[:cut], start, interval)
            assert isinstance(got, Incomplete) and got.need >= 1, (cut, got)
            assert cut + got.need <= last
            if cut >= start + 29 + keylen and not any(b % interval == 0 for b in range(start, last)):
                assert got.need == last - cut  # the head is in and no beacon lies in the frame
        cut = start
        while isinstance(got := decode_frame(view[:cut], start, interval), Incomplete):
            cut += got.need
        assert got == whole and cut == last


def test_an_empty_buffer_needs_one_byte():
    assert decode_frame(b"", 300, 1 << 20, base=300) == Incomplete(1)


# -- damage raises, naming the offset ------------------------------------------------------------------


def test_a_checksum_mismatch_raises_at_the_frame_start():
    data, starts = layout([frame_bytes(seq=n) for n in range(1, 4)], 1 << 20)
    bad = bytearray(data)
    bad[starts[1] + 40] ^= 0x01  # inside the payload of frame 2
    with pytest.raises(ChecksumError) as info:
        decode_frame(bytes(bad), starts[1], 1 << 20)
    assert info.value.offset == starts[1] and "seq 2" in str(info.value)
    got = decode_frame(bytes(bad), starts[1], 1 << 20, verify=False)
    assert isinstance(got, Frame) and got.seq == 2


def test_a_checksum_mismatch_in_a_frame_cut_by_a_beacon_names_its_start_and_still_reports_the_beacon():
    frames = [frame_bytes(seq=n, payload=b'{"order":%d}' % n) for n in range(1, 21)]
    data, starts = layout(frames, 1024)
    bad = bytearray(data)
    bad[1024 + 40 + 32] ^= 0xFF  # message 19's payload (its frame bytes 35-46), after the beacon
    met: list = []
    with pytest.raises(ChecksumError) as info:
        decode_frame(bytes(bad), 1019, 1024, beacons=met)
    assert info.value.offset == 1019 and [b.offset for b in met] == [1024]


@pytest.mark.parametrize(
    ("key", "error", "where"),
    [(b"bad key", StreamKeyError, 1), (b"\xff\xfe", Utf8Error, 1)],
)
def test_a_bad_key_raises_at_the_key(key, error, where):
    frame = frame_bytes(key=b"x" * len(key))
    frame = frame[:1] + key + frame[1 + len(key) :]
    with pytest.raises(error) as info:
        decode_frame(frame, 500, 1 << 20, base=500)
    assert info.value.offset == 500 + where


def test_a_timestamp_after_year_9999_raises_at_the_field():
    frame = bytearray(frame_bytes(key=b"abc"))
    frame[20:28] = (MAX_TIMESTAMP_MS + 1).to_bytes(8, "big")
    with pytest.raises(TimestampRangeError) as info:
        decode_frame(bytes(frame), 1000, 1 << 20, base=1000)
    assert info.value.offset == 1000 + 17 + 3


def test_a_beacon_overrunning_its_interval_is_damage_once_the_interval_is_there():
    interval = 256
    beacon = bytearray(encode_beacon(0, (Marker("k" * 200, 0, 1, 1, 1),) * 2))  # 7 + 2 * 227 bytes > 256
    data = bytes(interval) + bytes(beacon) + bytes(interval)
    with pytest.raises(FormatError) as info:
        decode_frame(data, interval, interval)
    assert info.value.offset == interval and "does not end before the next boundary" in str(info.value)
    # with fewer bytes than the interval, it may still be a torn tail: more bytes are asked for
    short = data[: interval + 240]
    assert decode_frame(short, interval, interval) == Incomplete(16)
    assert decode_beacon_at(short, interval, interval) == Incomplete(16)
