"""Salvage reads (``on_bad_frames``): property tests over random streams with random damage.

Streams use beacon interval 1024 and payloads up to several KiB (frames cross beacons). Damage is
flipped bytes, zeroed blocks (same length: the beacon grid stays where it was) or one cut-out or
inserted run (every later byte moves off the grid). A "skip" read must return only frames the writer
wrote, in order, and, for same-length damage, every intact message after the first beacon past each
damaged region. The one thing the format cannot catch is damage confined to a frame's key, shard,
seq or timestamp bytes (the checksum covers only the payload): such a frame is accepted at its own
offset with its own payload, and the test allows exactly that.
"""

from __future__ import annotations

import os
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.errors import ChecksumError
from nbkit.transport.damage import DamageWarning
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.messages import Message
from nbkit.transport.repair import repair
from nbkit.wire.ssformat import HEADER_SIZE

INTERVAL = 1024
SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

payload_sizes = st.lists(st.integers(0, 5000), min_size=1, max_size=30)


def _write(path: str, sizes: list[int]) -> list[Message]:
    """Write one message per size (keys ``a``/``b``, payload bytes from the index) and read them back."""
    with StreamWriter(path, beacon_interval=INTERVAL, created_at_ms=0, clock_ms=lambda: 7) as w:
        for i, n in enumerate(sizes):
            w.write("ab"[i % 2], bytes((i + j) % 251 for j in range(n)))
    with StreamReader(path) as r:
        return list(r)


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _put(path: str, raw: bytes | bytearray) -> None:
    with open(path, "wb") as f:
        f.write(raw)


def _fields(m: Message) -> tuple:
    """A message's fields without its place in the file."""
    return (m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload)


def _salvage(path: str) -> tuple[list[Message], list[tuple[int, int]]]:
    """The messages and damaged regions of a "skip" read; a torn tail (no intact beacon after the damage,
    so it may be a writer stopped mid-frame) counts as one more region from the reader's end offset."""
    with StreamReader(path, on_bad_frames="skip") as r:
        got = list(r)
        regions = [(d.start, d.end) for d in r.damaged]
        assert r.end is not None
        if r.end.reason == "truncated":
            regions.append((r.end.offset, r.end.offset + r.end.trailing_bytes))
        return got, regions


def _same_length_damage(data: st.DataObject, size: int) -> list[tuple[int, bytes]]:
    """1-3 patches (offset, new bytes) after the header: flipped bytes or zeroed blocks."""
    patches = []
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(HEADER_SIZE, size - 1))
        if data.draw(st.booleans()):
            old = 0  # filled in by the caller's xor
            patches.append((at, bytes([data.draw(st.integers(1, 255)) ^ old])))
        else:
            n = data.draw(st.integers(1, 700))
            patches.append((at, bytes(min(n, size - at))))
    return patches


@SETTINGS
@given(sizes=payload_sizes, data=st.data())
def test_skip_returns_written_frames_and_everything_after_the_next_beacon(tmp_path, sizes, data):
    path = os.fspath(tmp_path / "s.ss")
    if os.path.exists(path):
        os.remove(path)
    written = _write(path, sizes)
    raw = bytearray(_bytes(path))
    damaged = set()
    for at, patch in _same_length_damage(data, len(raw)):
        for k, b in enumerate(patch):
            new = raw[at + k] ^ b if len(patch) == 1 else 0
            if new != raw[at + k]:
                damaged.add(at + k)
            raw[at + k] = new
    with open(path, "wb") as f:
        f.write(raw)
    got, regions = _salvage(path)

    by_offset = {m.offset: m for m in written}
    offsets = [m.offset for m in got]
    assert offsets == sorted(set(offsets)), "in file order, each frame once"
    for m in got:
        mine = by_offset.get(m.offset)
        assert mine is not None, f"a frame at {m.offset} the writer never started there"
        if any(mine.offset <= d < mine.end for d in damaged):
            # only damage the format cannot see: the header fields outside the checksum
            assert (m.payload, m.end) == (mine.payload, mine.end)
        else:
            assert m == mine
    returned = set(offsets)
    for m in written:
        if any(m.offset <= d < m.end for d in damaged):
            continue
        lost_to = [d for d in damaged if d < m.end]
        if lost_to:
            # the first beacon past the damage region that reaches furthest before m
            cover = max(_next_intact_boundary(d, damaged) for d in lost_to)
            if m.offset < cover:
                continue
        assert m.offset in returned, f"intact message at {m.offset} lost (damage at {sorted(damaged)[:5]}...)"
    assert all(start < end for start, end in regions)
    if damaged and len(got) < len(written):
        assert regions, "lost messages are accounted for in the damaged regions"


def _next_intact_boundary(d: int, damaged: set[int]) -> int:
    """The first beacon boundary after byte ``d`` whose beacon bytes are undamaged (7 bytes checked at
    least: the beacon's fixed part; a damaged marker shows as damage inside the frame it cuts)."""
    b = d - d % INTERVAL + INTERVAL
    while any(b <= x < b + 64 for x in damaged):
        b += INTERVAL
    return b


@SETTINGS
@given(sizes=payload_sizes, data=st.data())
def test_skip_after_a_cut_or_insert_finds_the_shifted_beacons(tmp_path, sizes, data):
    """A cut-out or inserted run moves every later beacon off the grid: the salvage read finds the shifted
    grid and returns every message after the first beacon past the damage, in order, and only the
    writer's frames (matched by key and payload: their offsets moved)."""
    path = os.fspath(tmp_path / "c.ss")
    if os.path.exists(path):
        os.remove(path)
    written = _write(path, sizes)
    raw = _bytes(path)
    at = data.draw(st.integers(HEADER_SIZE, len(raw) - 1))
    n = data.draw(st.integers(1, 2000))
    if data.draw(st.booleans()):
        n = min(n, len(raw) - at)
        raw = raw[:at] + raw[at + n :]
        first_beacon = -(-(at + n) // INTERVAL) * INTERVAL  # original offset of the first beacon past the cut
    else:
        raw = raw[:at] + bytes(data.draw(st.integers(0, 255)) for _ in range(min(n, 50))) * (n // 50 + 1) + raw[at:]
        first_beacon = -(-at // INTERVAL) * INTERVAL
    _put(path, raw)
    got = [_fields(m) for m in _salvage(path)[0]]
    mine = [_fields(m) for m in written]
    k = 0
    for fields in got:  # a subsequence of what the writer wrote
        while k < len(mine) and mine[k] != fields:
            k += 1
        assert k < len(mine), f"{fields[:2]} is not a message the writer wrote (in this order)"
        k += 1
    before = [_fields(m) for m in written if m.end <= at]
    assert got[: len(before)] == before, "everything before the damage is returned"
    after = [_fields(m) for m in written if m.offset > first_beacon]
    if after:
        assert got[-len(after) :] == after, "every message after the first beacon past the damage is returned"


def test_default_is_strict_and_names_the_salvage_options(tmp_path):
    path = os.fspath(tmp_path / "strict.ss")
    written = _write(path, [20] * 300)
    raw = bytearray(_bytes(path))
    hit = written[60].end - 4  # the last payload byte of message 60, near offset 3000
    raw[hit] ^= 0xFF
    _put(path, raw)
    with pytest.raises(ChecksumError, match="on_bad_frames='skip'"):
        list(StreamReader(path))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with StreamReader(path, on_bad_frames="warn") as r:
            got = list(r)
            regions = r.damaged
    assert [w.category for w in seen] == [DamageWarning]
    assert len(regions) == 1 and regions[0].start <= hit < regions[0].end
    lost = [m for m in written if m not in got]
    assert lost and all(regions[0].start <= m.offset < regions[0].end for m in lost)
    assert len(got) == len(written) - len(lost)


def test_on_bad_frames_is_checked():
    with pytest.raises(ValueError, match="on_bad_frames"):
        StreamReader("nowhere.ss", on_bad_frames="ignore")


@SETTINGS
@given(sizes=payload_sizes, data=st.data())
def test_repair_writes_exactly_the_salvaged_messages_and_decodes_cleanly(tmp_path, sizes, data):
    path = os.fspath(tmp_path / "r.ss")
    out = os.fspath(tmp_path / "clean.ss")
    for old in (path, out):
        if os.path.exists(old):
            os.remove(old)
    _write(path, sizes)
    raw = bytearray(_bytes(path))
    for at, patch in _same_length_damage(data, len(raw)):
        for k, b in enumerate(patch):
            raw[at + k] = raw[at + k] ^ b if len(patch) == 1 else 0
    _put(path, raw)
    salvaged, _ = _salvage(path)
    report = repair(path, out)
    assert _bytes(path) == bytes(raw), "the input is never modified"
    with StreamReader(out) as r:  # strict: raises on any damage
        copy = list(r)
        assert r.end is not None and r.end.reason in ("end", "eos")
    rejected = {offset for offset, _ in report.rejected}  # a key the damage made invalid
    assert all(m.stream_key not in ("a", "b") for m in salvaged if m.offset in rejected)
    fields = [_fields(m) for m in salvaged if m.offset not in rejected]
    assert [_fields(m) for m in copy] == fields
    assert report.kept == len(copy)


def test_repair_refuses_to_overwrite_and_reports_what_it_dropped(tmp_path, capsys):
    from nbkit.cli import main

    path = os.fspath(tmp_path / "d.ss")
    written = _write(path, [20] * 300)
    raw = bytearray(_bytes(path))
    raw[written[60].end - 4] ^= 0xFF
    _put(path, raw)
    out = tmp_path / "out.ss"
    out.write_bytes(b"keep me")
    assert main(["repair", path, str(out)]) == 1
    assert "already exists" in capsys.readouterr().err and out.read_bytes() == b"keep me"
    assert main(["repair", path, path, "--force"]) == 1
    assert "is the file being repaired" in capsys.readouterr().err
    assert main(["repair", path, str(out), "--force"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("dropped bytes ") and "checksum" in printed[0]
    assert printed[-1].startswith(f"wrote {len(list(StreamReader(str(out))))} messages to {out}")
    assert _bytes(path) == bytes(raw)


def test_a_follower_salvages_like_a_replay(tmp_path):
    path = os.fspath(tmp_path / "follow.ss")
    written = _write(path, [20] * 300 + [3000] * 10)
    raw = bytearray(_bytes(path))
    for i in (60, 200, 305):
        raw[written[i].end - 4] ^= 0xFF
    _put(path, raw)
    replay, regions = _salvage(path)
    with StreamReader(path, follow=True, idle_timeout=0.01, on_bad_frames="skip") as r:
        followed = list(r)
        assert [(d.start, d.end) for d in r.damaged] == regions and len(regions) == 3
    assert followed == replay


def test_damage_at_the_tail_without_a_beacon_after_it_is_a_truncated_tail(tmp_path):
    path = os.fspath(tmp_path / "tail.ss")
    written = _write(path, [20] * 30)
    raw = bytearray(_bytes(path))
    last = written[-1]
    raw[last.offset + 1 + 1 + 24 : last.offset + 1 + 1 + 28] = b"\xff\xff\xff\x00"  # its size field: huge
    _put(path, raw)
    with StreamReader(path, on_bad_frames="skip") as r:
        got = list(r)
        assert r.damaged == [] and r.end is not None and r.end.reason == "truncated"
    assert got == written[:-1]


@pytest.mark.parametrize(
    ("sizes", "edit"),
    [
        ([0, 0, 0, 0, 0, 0, 0, 632, 0], lambda raw: raw[:128] + raw[129:]),  # a frame ends on the boundary
        ([0, 0, 0, 0, 0, 0, 660, 0, 0], lambda raw: raw[:128] + b"\x00" + raw[128:]),  # a frame spans it
    ],
)
def test_a_one_byte_shift_near_the_last_beacon_keeps_the_message_after_it(tmp_path, sizes, edit):
    """Found by the property test after the merge: with only one beacon past the damage, the shifted grid
    is still found (the damaged frame is not taken for a torn tail), and bytes that merely parse as a
    beacon whose run reaches past the end are not taken for the shifted grid."""
    path = os.fspath(tmp_path / "s.ss")
    written = _write(path, sizes)
    _put(path, edit(_bytes(path)))
    got, _ = _salvage(path)
    assert [_fields(m) for m in got] == [_fields(written[-1])]
