"""Beacon-aligned ranges (nbkit.scale.partitions): together they hold exactly a sequential read.

Pure pandas: these run without the scale extra.
"""

from __future__ import annotations

import os
import tempfile
import warnings

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.scale.partitions import ByteRange, find_eos, plan_ranges, read_range
from nbkit.tabular import Selection, selection
from nbkit.tabular.frames import read_stream
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import INTERNAL_KEY

T0 = 1_700_000_000_000


def read_parts(path, partition_size, **options) -> tuple[list[pd.DataFrame], object]:
    sel, position, key = selection(**options)
    plan = plan_ranges(path, partition_size=partition_size, start=position, key=key, sel=sel)
    return [read_range(path, r, sel) for r in plan.ranges], plan


@pytest.mark.parametrize("partition_size", [1, 1024, 3000, 4096, 10_000, 1 << 30])
def test_ranges_hold_exactly_the_sequential_read(scale_file, partition_size, stack, same_rows):
    parts, plan = read_parts(scale_file, partition_size)
    want = read_stream(scale_file)
    assert len(want) == 400
    assert sum(len(p) for p in parts) == len(want)
    same_rows(stack(parts), want)
    if partition_size >= 1 << 30:
        assert len(plan.ranges) == 1
    else:
        assert len(plan.ranges) > 10
    # every boundary is a beacon offset, every row starts inside its range
    for rng, part in zip(plan.ranges, parts, strict=True):
        assert rng.beacon == 0 or rng.start == rng.beacon * plan.interval
        assert ((part.index >= rng.start) & (part.index < rng.end)).all()
        assert (part.index == part["offset"].to_numpy()).all()
    assert plan.divisions[0] == 128 and list(plan.divisions) == sorted(plan.divisions)


def test_frames_cut_by_several_beacons_start_no_range(scale_file):
    """Ranges inside one long frame are empty; the frame belongs to the range where it starts."""
    parts, plan = read_parts(scale_file, 1024)
    assert any(len(p) == 0 for p in parts)
    offsets = [o for p in parts for o in p.index]
    assert offsets == sorted(set(offsets))


def test_dtypes_match_read_stream_in_every_mode(scale_file):
    for mode in ("auto", "bytes", "text", "json", "objects"):
        parts, _ = read_parts(scale_file, 4096, payload=mode)
        want = read_stream(scale_file, payload=mode)
        for p in parts:
            if len(p):
                base = [c for c in want.columns if not c.startswith("payload")]
                assert p[base].dtypes.astype(str).to_dict() == want[base].dtypes.astype(str).to_dict()
                if mode == "json":  # the JSON text: str, or object in a range with a payload that is not UTF-8
                    texts = p["payload"].map(type).isin([str]).all()
                    assert str(p["payload"].dtype) == ("str" if texts else "object")
                else:
                    assert p["payload"].dtype == want["payload"].dtype


def test_file_smaller_than_one_interval_is_one_range(tmp_path, write_ss, make_workload):
    path = tmp_path / "small.ss"
    write_ss(path, [("k", 0, i + 1, T0 + i, b"hi") for i in range(5)], interval=1 << 20)
    parts, plan = read_parts(path, 1024)
    assert len(plan.ranges) == 1 and len(parts[0]) == 5
    pd.testing.assert_frame_equal(parts[0].reset_index(drop=True), read_stream(path))


def test_empty_file_is_one_empty_range(tmp_path):
    path = tmp_path / "empty.ss"
    StreamWriter(path, beacon_interval=1024).close()
    parts, plan = read_parts(path, 1024)
    assert len(plan.ranges) == 1 and len(parts[0]) == 0
    assert plan.divisions == (128, 128)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 4000), min_size=1, max_size=40),
    keys=st.lists(st.sampled_from(["a", "bb", "ccc.d"]), min_size=40, max_size=40),
    partition_size=st.integers(1, 20_000),
    interval_k=st.sampled_from([1, 2, 4]),
)
def test_random_partition_sizes(sizes, keys, partition_size, interval_k, write_ss, stack, same_rows):
    messages = [(keys[i], 0, i + 1, T0 + i, bytes([65 + i % 26]) * n) for i, n in enumerate(sizes)]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "h.ss")
        write_ss(path, messages, interval=1024 * interval_k)
        parts, plan = read_parts(path, partition_size)
        want = read_stream(path)
        same_rows(stack(parts), want)


def test_layout_with_odd_interval_and_header_beacon(tmp_path, layout, stack, same_rows):
    """Intervals the writer refuses (128, 300) but readers accept; 128 puts a beacon right after the header."""
    msgs = [("k", 0, i + 1, T0 + i, bytes(range(256))[: (i * 37) % 300]) for i in range(60)]
    for interval in (128, 300):
        path = tmp_path / f"i{interval}.ss"
        path.write_bytes(layout("t.ss", T0, interval, msgs))
        for size in (1, 500, 2000):
            parts, _ = read_parts(path, size)
            same_rows(stack(parts), read_stream(path))


# -- EOS -------------------------------------------------------------------------------------------


def _eos_file(path, *, before: int, after: int, interval: int = 1024, filler: int = 0) -> int:
    """``before`` messages, an EOS, ``after`` messages; returns the EOS frame's offset."""
    with StreamWriter(path, beacon_interval=interval, created_at_ms=T0) as w:
        for i in range(before):
            w.write("k", b"m" * (i * 53 % 700), seq=i + 1, timestamp_ms=T0 + i)
        if filler:
            w.write("pad", b"p" * filler, seq=1, timestamp_ms=T0)
        eos = w.write_eos()
        for i in range(after):
            w.write("late", b"after eos", seq=i + 1, timestamp_ms=T0 + i)
    return eos.offset


def test_ranges_stop_at_a_mid_file_eos(tmp_path, stack, same_rows):
    path = tmp_path / "eos.ss"
    at = _eos_file(path, before=40, after=60)
    want = read_stream(path)
    assert "late" not in set(want["stream_key"].astype(str))
    for size in (1, 3000, 1 << 20):
        parts, plan = read_parts(path, size)
        assert plan.eos == at
        assert plan.ranges[-1].start <= at < plan.ranges[-1].end
        same_rows(stack(parts), want)
        inc, _ = read_parts(path, size, include_internal=True)
        same_rows(stack(inc), read_stream(path, include_internal=True))


def _write_cut(path, interval: int, filler: int):
    with StreamWriter(path, beacon_interval=interval, created_at_ms=T0) as w:
        w.write("k", b"x" * 100, seq=1, timestamp_ms=T0)
        w.write("pad", b"p" * filler, seq=1, timestamp_ms=T0)
        eos = w.write_eos()
        w.write("late", b"after", seq=1, timestamp_ms=T0)
    return eos


@pytest.mark.parametrize("cut", range(0, 25))
def test_eos_head_cut_by_a_beacon_is_found(tmp_path, cut):
    """The EOS frame starts ``cut`` bytes before a boundary: for 1..21 its key is split by the beacon."""
    interval = 1024
    target = 2 * interval - cut if cut else 2 * interval + 41  # cut 0: right after the beacon
    path = tmp_path / f"cut{cut}.ss"
    filler = 1500
    for _ in range(6):  # the beacon inside the filler frame shifts things: adjust until it lands
        if path.exists():
            path.unlink()
        eos = _write_cut(path, interval, filler)
        if eos.offset == target:
            break
        filler += target - eos.offset
    if cut:
        assert eos.offset == target
    size = os.path.getsize(path)
    assert find_eos(path, 128, size, interval) == eos.offset
    parts, plan = read_parts(path, 1024)
    assert plan.eos == eos.offset
    assert sum(len(p) for p in parts) == 2
    assert len(read_stream(path)) == 2


def test_payload_that_embeds_an_eos_frame_is_not_an_eos(tmp_path):
    path = tmp_path / "fake.ss"
    fake = bytes([21]) + INTERNAL_KEY.encode() + bytes(24) + b"\x00\x00\x00\x03EOS\xed\x7c\r"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=T0) as w:
        for i in range(30):
            w.write("k", fake * (1 + i % 4), seq=i + 1, timestamp_ms=T0 + i)
    size = os.path.getsize(path)
    assert find_eos(path, 128, size, 1024) is None
    parts, plan = read_parts(path, 1024)
    assert plan.eos is None
    assert sum(len(p) for p in parts) == 30


def test_beacon_markers_of_the_internal_stream_are_not_hits(tmp_path):
    """After an EOS every beacon carries an internal-stream marker; only the frame itself counts."""
    path = tmp_path / "markers.ss"
    at = _eos_file(path, before=3, after=200)
    assert find_eos(path, 128, os.path.getsize(path), 1024) == at


# -- options ---------------------------------------------------------------------------------------


def test_filters_and_start_positions(scale_file, stack, same_rows):
    cases = [
        dict(keys="beta"),
        dict(keys=["alpha", "c.long-key_name"]),
        dict(start=T0 + 40, end=T0 + 100),
        dict(start=FilePosition.sequence(20), keys="alpha"),
        dict(start=FilePosition.beacon(30)),
        dict(start=FilePosition.timestamp(T0 + 50), keys="beta"),
    ]
    for options in cases:
        parts, plan = read_parts(scale_file, 5000, **options)
        want = read_stream(scale_file, **options)
        assert len(want) > 0, options
        same_rows(stack(parts), want)


def test_truncated_tail_is_reported_like_read_stream(tmp_path, scale_file, stack, same_rows):
    data = scale_file.read_bytes()
    path = tmp_path / "cut.ss"
    path.write_bytes(data[:-7])
    with pytest.warns(UserWarning, match="trailing bytes") as record:
        want = read_stream(path)
    parts, plan = read_parts(path, 4096)
    assert plan.tail is not None and plan.tail.reason == "truncated"
    assert plan.tail.describe() in str(record[0].message)
    same_rows(stack(parts), want)


def test_range_read_is_its_own_frame_position(scale_file):
    """A ByteRange with beacon=0 starts exactly at ``start`` (the first range, or a sample)."""
    whole = read_range(scale_file, ByteRange(128, 1 << 40, 0), Selection())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        want = read_stream(scale_file)
    pd.testing.assert_frame_equal(whole.reset_index(drop=True), want)


def test_ranges_read_with_until_match_a_poll_loop(scale_file):
    """``read_columns(until=b)`` (what a range reads) takes exactly the frames a poll() loop meets before b."""
    with StreamReader(scale_file) as r:
        everything = [(m.stream_key, m.offset) for m in r]
        interval = r.interval
    for b in (interval, 3 * interval, 1 << 40):
        with StreamReader(scale_file) as r:
            cols = r.read_columns(until=b)
        assert list(zip(cols.stream_key, cols.offset, strict=True)) == [x for x in everything if x[1] < b]
