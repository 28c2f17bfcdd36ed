"""StreamReader: sample-1 per spec §15, round trips, resync, truncation/corruption, seeks, follow."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.errors import (
    ChecksumError,
    NbkitError,
    SeekError,
    TruncatedError,
)
from nbkit.transport.file_reader import StreamReader, iter_messages, read_header
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.messages import ReadEnd
from nbkit.transport.polling import NEED_MORE
from nbkit.transport.positions import FilePosition
from nbkit.wire.crc import crc16
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import FileHeader

HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


def fresh_path(base: Path, suffix: str = ".ss") -> Path:
    """A new file name per hypothesis example (StreamWriter appends to existing files)."""
    return base / f"f{next(_counter)}{suffix}"


def as_tuples(messages) -> list[tuple]:
    return [(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload) for m in messages]


# -- spec §15: sample-1.ss --------------------------------------------------------------------------


def test_sample_header(sample_path: Path) -> None:
    header = read_header(sample_path)
    assert header == FileHeader("vec_map-1694767177436.firedbg.ss", 1694767177437, 1_048_576)


def test_sample_decodes_per_spec_tables(sample_path: Path, sample_bytes: bytes) -> None:
    assert len(sample_bytes) == 3481
    with StreamReader(sample_path) as r:
        msgs = list(r)
        assert r.end == ReadEnd("eos", 3481)
        assert r.beacons_seen == 0 and r.last_beacon is None
    assert len(msgs) == 28

    def at(h: int, m: int, s: int, ms: int) -> int:  # 2023-09-15 h:m:s.ms UTC in epoch ms
        t = dt.datetime(2023, 9, 15, h, m, s, ms * 1000, tzinfo=dt.UTC)
        return int(t.timestamp()) * 1000 + ms

    by_stream: dict[tuple[str, int], list] = {}
    for m in msgs:
        by_stream.setdefault((m.stream_key, m.shard_id), []).append(m)
    assert list(by_stream) == [("file", 0), ("breakpoint", 0), ("event", 0), (INTERNAL_KEY, 0)]
    table = {
        ("file", 0): (1, 1, 1, at(8, 39, 37, 912), at(8, 39, 37, 912)),
        ("breakpoint", 0): (4, 1, 4, at(8, 39, 37, 917), at(8, 39, 38, 493)),
        ("event", 0): (22, 1, 22, at(8, 39, 38, 489), at(8, 39, 38, 564)),
        (INTERNAL_KEY, 0): (1, 0, 0, at(8, 39, 38, 569), at(8, 39, 38, 569)),
    }
    for stream, (count, seq_lo, seq_hi, ts_lo, ts_hi) in table.items():
        ms = by_stream[stream]
        assert len(ms) == count, stream
        assert [m.seq for m in ms] == list(range(seq_lo, seq_hi + 1)), stream
        assert min(m.timestamp_ms for m in ms) == ts_lo, stream
        assert max(m.timestamp_ms for m in ms) == ts_hi, stream
    assert (msgs[0].stream_key, msgs[0].seq, msgs[0].timestamp_ms) == ("file", 1, at(8, 39, 37, 912))
    eos = msgs[-1]
    assert eos.is_eos and (eos.offset, eos.end) == (3425, 3481) and eos.payload == b"EOS"
    assert sum(m.is_eos for m in msgs) == 1
    # frames are back to back from the header on (no beacons below 1 MiB) ...
    assert msgs[0].offset == 128
    assert all(a.end == b.offset for a, b in itertools.pairwise(msgs))
    # ... and every stored checksum and end byte is right (checked here independently of the reader)
    for m in msgs:
        assert sample_bytes[m.end - 3 : m.end - 1] == crc16(m.payload).to_bytes(2, "big")
        assert sample_bytes[m.end - 1] == 0x0D
        assert m.end - m.offset == 32 + len(m.stream_key) + len(m.payload)


def test_sample_checksum_is_verified(sample_bytes: bytes, tmp_path: Path) -> None:
    bad = bytearray(sample_bytes)
    bad[128 + 40] ^= 0x01  # a payload byte of the first frame
    path = tmp_path / "bad.ss"
    path.write_bytes(bytes(bad))
    with pytest.raises(ChecksumError) as info:
        list(iter_messages(path))
    assert info.value.offset == 128 and str(path) in str(info.value)
    with StreamReader(path, errors="stop") as r:
        assert list(r) == []
        assert r.end.reason == "error" and isinstance(r.end.error, ChecksumError)


# -- round trips -------------------------------------------------------------------------------------

KEYS = ["a", "b", "orders", "x.y_z-1", "k" * 60]
payloads = st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=4000))
messages_st = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from([0, 1, 7, (1 << 64) - 1]),
        st.integers(0, (1 << 64) - 1),
        st.integers(0, MAX_TIMESTAMP_MS),
        payloads,
    ),
    max_size=25,
)


@HYPO
@given(messages=messages_st, interval=st.sampled_from([1024, 2048]))
def test_writer_to_reader_round_trip(tmp_path_factory, write_ss, messages, interval) -> None:
    path = fresh_path(tmp_path_factory.getbasetemp())
    write_ss(path, messages, interval=interval)
    with StreamReader(path) as r:
        got = list(r)
        assert r.end.reason == "end" and r.end.trailing_bytes == 0
        assert r.beacons_seen == (os.path.getsize(path) - 1) // interval
    assert as_tuples(got) == messages
    assert [m.offset for m in got[:1]] in ([], [128])


@HYPO
@given(messages=messages_st, interval=st.sampled_from([128, 200, 300, 1024]))
def test_reader_accepts_any_interval_from_128(tmp_path_factory, layout, messages, interval) -> None:
    """Intervals the writer refuses are still legal on read (upstream's low-level sink writes them)."""
    data = layout("odd.ss", 5, interval, messages)
    if interval == 128:  # the header ends on a boundary: an empty beacon follows it at once
        assert data[128:135] == bytes.fromhex("0d00000000000d")
    path = fresh_path(tmp_path_factory.getbasetemp())
    path.write_bytes(data)
    with StreamReader(path) as r:
        assert as_tuples(r) == messages
        assert r.end.reason == "end"


# -- resync (§6.5) ----------------------------------------------------------------------------------


def check_resync_everywhere(path: Path) -> int:
    """resync(n) from every beacon lands on the first frame at or after n*I; returns the beacon count."""
    with StreamReader(path) as r:
        full = list(r)
        size = r.size()
        interval = r.interval
    n_beacons = (size - 1) // interval
    for n in range(0, n_beacons + 3):
        with StreamReader(path) as r:
            reached = r.resync(n)
            if n == 0:
                assert (r.pos, reached) == (128, 0)
                continue
            target = min(n, max(size // interval, 0)) * interval
            if target < interval:
                assert (r.pos, reached) == (128, 0)
                continue
            expected = next((m.offset for m in full if m.offset >= target), None)
            if expected is not None:
                assert r.pos == expected, (n, target)
            landed = r.pos
            assert reached == landed // interval
            assert list(r) == [m for m in full if m.offset >= landed]
            assert r.end.reason in ("end", "eos")
    return n_beacons


def test_resync_from_every_beacon_of_multi_stream_file(multi_file: Path) -> None:
    assert check_resync_everywhere(multi_file) > 30
    with StreamReader(multi_file, start=FilePosition.beacon(3)) as r:
        assert r.pos == next(m.offset for m in iter_messages(multi_file) if m.offset >= 3 * 1024)


@HYPO
@given(messages=messages_st, interval=st.sampled_from([128, 1024, 2048]))
def test_resync_property(tmp_path_factory, layout, messages, interval) -> None:
    path = fresh_path(tmp_path_factory.getbasetemp())
    path.write_bytes(layout("r.ss", 0, interval, messages))
    check_resync_everywhere(path)


# -- truncation and corruption ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_file(tmp_path_factory, write_ss, layout) -> Path:
    """~3.5 KiB, I = 1024: small and big frames, one frame spanning a whole interval, one frame ending
    exactly on a boundary (so a beacon with remaining 0 follows it), and EOS at the end."""
    path = tmp_path_factory.mktemp("small") / "small.ss"
    msgs = [("a", 0, i, 1000 + i, bytes([i]) * (i * 7 % 90)) for i in range(1, 20)]
    msgs.insert(8, ("big.key", 3, 1, 5000, bytes(range(256)) * 5))
    size = len(layout("t.ss", 0, 1024, msgs))
    gap = (size // 1024 + 1) * 1024 - size
    msgs.append(("fill", 0, 1, 6000, b"f" * (gap - 36 if gap >= 36 else gap + 1024 - 36)))
    msgs += [("a", 0, 20, 7000, b"after the boundary")]
    write_ss(path, msgs, interval=1024, eos=True)
    return path


def test_every_truncation_is_a_clean_end(small_file: Path, tmp_path: Path) -> None:
    data = small_file.read_bytes()
    full = list(iter_messages(small_file))
    assert full[-1].is_eos and len(data) > 3000
    assert any(m.end % 1024 == 0 for m in full)  # the "only a beacon after the last frame" case
    beacon_ends = 0
    path = tmp_path / "cut.ss"
    for length in range(len(data) + 1):
        path.write_bytes(data[:length])
        if length < 128:
            with pytest.raises(TruncatedError):
                StreamReader(path)
            continue
        with StreamReader(path) as r:  # errors="raise": truncation must never look like damage
            got = list(r)
            end = r.end
        expected = [m for m in full if m.end <= length]
        assert got == expected, length
        last = expected[-1].end if expected else 128
        assert end.offset == last
        if length == len(data):
            assert end.reason == "eos"
        elif length == last:
            assert end == ReadEnd("end", last, 0)
        elif end.reason == "end":  # only a complete beacon follows the last frame
            assert last % 1024 == 0 and length - last < 1024
            beacon_ends += 1
        else:
            assert end == ReadEnd("truncated", last, length - last), length
    assert beacon_ends == 1


@HYPO
@given(data=st.data(), errors=st.sampled_from(["stop", "raise"]))
def test_corruption_never_escapes_as_a_foreign_exception(small_file, tmp_path_factory, data, errors) -> None:
    raw = bytearray(small_file.read_bytes())
    full = list(iter_messages(small_file))
    hits = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(1, 255)), min_size=1, max_size=3))
    for pos, xor in hits:
        raw[pos] ^= xor
    damage = min(pos for pos, _ in hits)
    path = fresh_path(tmp_path_factory.getbasetemp())
    path.write_bytes(bytes(raw))
    got = []
    try:
        with StreamReader(path, errors=errors) as r:
            for _ in range(len(raw) // 32 + 2):  # bounded: a reader must never loop without progress
                item = r.poll()
                if item is None:
                    break
                assert item is not NEED_MORE  # replay mode never waits
                got.append(item)
            else:
                pytest.fail("the reader did not end")
            assert isinstance(r.end, ReadEnd)
            if r.end.reason == "error":
                assert isinstance(r.end.error, NbkitError)
    except NbkitError:
        pass  # a header problem, or errors="raise"
    intact = [m for m in full if m.end <= damage]
    assert got[: len(intact)] == intact


# -- seeks (FilePosition) ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multi_full(multi_file: Path) -> list:
    return list(iter_messages(multi_file))


def _streams(full) -> dict[tuple[str, int], list]:
    out: dict[tuple[str, int], list] = {}
    for m in full:
        out.setdefault((m.stream_key, m.shard_id), []).append(m)
    return out


def test_seek_by_sequence_is_inclusive_and_filtered(multi_file: Path, multi_full: list) -> None:
    streams = _streams(multi_full)
    assert len(streams) == 4
    for (key, shard), ms in streams.items():
        for target in [0, *range(1, len(ms) + 1)]:
            with StreamReader(multi_file, start=FilePosition.sequence(target), key=key, shard_id=shard) as r:
                first = r.poll()
            expected = next(m for m in ms if m.seq >= target)
            assert first == expected, (key, shard, target)


def test_seek_by_timestamp_is_strictly_after_and_filtered(multi_file: Path, multi_full: list) -> None:
    streams = _streams(multi_full)
    ties = sum(a.timestamp_ms == b.timestamp_ms for a, b in itertools.pairwise(multi_full))
    assert ties > 100  # the workload has equal timestamps, so "strictly after" is really tested
    for (key, shard), ms in streams.items():
        targets = sorted({m.timestamp_ms for m in ms} | {ms[0].timestamp_ms - 1})[:-1]
        for t in targets:
            with StreamReader(multi_file) as r:
                r.seek(FilePosition.timestamp(t), key=key, shard_id=shard)
                got = list(itertools.islice(r, 3))
            i = next(
                i for i, m in enumerate(multi_full) if (m.stream_key, m.shard_id) == (key, shard) and m.timestamp_ms > t
            )
            assert got == multi_full[i : i + 3], (key, shard, t)


def test_seek_past_the_end_raises_and_keeps_position(multi_file: Path, multi_full: list) -> None:
    streams = _streams(multi_full)
    with StreamReader(multi_file) as r:
        for _ in range(37):
            r.poll()
        pos = r.pos
        for (key, shard), ms in streams.items():
            with pytest.raises(SeekError, match=key):
                r.seek(FilePosition.sequence(ms[-1].seq + 1), key=key, shard_id=shard)
            assert r.pos == pos
            with pytest.raises(SeekError):
                r.seek(FilePosition.timestamp(ms[-1].timestamp_ms), key=key, shard_id=shard)
            assert r.pos == pos
        with pytest.raises(SeekError):
            r.seek(FilePosition.sequence(1), key="no-such-stream")
        assert r.pos == pos
        with pytest.raises(ValueError, match="key"):
            r.seek(FilePosition.sequence(1))
        assert list(r) == multi_full[37:]


def test_seek_beginning_beacon_and_end(multi_file: Path, multi_full: list, tmp_path: Path) -> None:
    with StreamReader(multi_file) as r:
        list(r)
        r.seek(FilePosition.beginning())
        assert list(r) == multi_full
        r.seek(FilePosition.end())
        assert r.pos == multi_full[-1].end == r.size()
        assert list(r) == [] and r.end == ReadEnd("end", r.pos)
        r.seek(FilePosition.beacon(5))
        assert list(r) == [m for m in multi_full if m.offset >= 5 * 1024]
    # end = just after the last complete frame, also with a partial frame after it ...
    data = multi_file.read_bytes()
    partial = tmp_path / "partial.ss"
    partial.write_bytes(data + bytes.fromhex("01") + b"a" + bytes(20))
    with StreamReader(partial, start=FilePosition.end()) as r:
        assert r.pos == multi_full[-1].end
    # ... and with an EOS (itself a complete frame) at the end
    eos_path = tmp_path / "eos.ss"
    eos_path.write_bytes(data)
    with StreamWriter(eos_path) as w:
        w.write_eos()
    with StreamReader(eos_path, start=FilePosition.end()) as r:
        assert r.pos == r.size()
    # on a fresh file, end is just after the header
    empty = tmp_path / "empty.ss"
    StreamWriter(empty, beacon_interval=1024).close()
    with StreamReader(empty, start=FilePosition.end()) as r:
        assert r.pos == 128


def test_follow_from_end_sees_only_new_messages(multi_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "grow.ss"
    path.write_bytes(multi_file.read_bytes())
    with StreamReader(path, follow=True, start=FilePosition.end()) as r:
        assert r.poll() is NEED_MORE
        with StreamWriter(path) as w:
            w.write("a", b"new")
        m = r.poll()
        assert (m.stream_key, m.payload) == ("a", b"new")
        assert r.poll() is NEED_MORE


# -- follow mode ------------------------------------------------------------------------------------


def test_follow_waits_for_a_partial_frame(tmp_path: Path, layout, write_ss) -> None:
    path = tmp_path / "f.ss"
    write_ss(path, [("a", 0, 1, 1, b"one")])
    data = layout("t.ss", 1_700_000_000_000, 1024, [("a", 0, 1, 1, b"one"), ("a", 0, 2, 2, b"two" * 400)])
    size = path.stat().st_size
    assert data[:size] == path.read_bytes()
    with StreamReader(path, follow=True) as r:
        assert r.poll().payload == b"one"
        for cut in (size + 1, size + 30, 1024, 1030, len(data) - 1):
            with open(path, "r+b") as f:
                f.seek(0, os.SEEK_END)
                f.write(data[f.tell() : cut])
            assert r.poll() is NEED_MORE, cut
        with open(path, "ab") as f:
            f.write(data[-1:])
        assert r.poll().payload == b"two" * 400
        assert r.poll() is NEED_MORE and r.end is None


WRITER_SCRIPT = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
from nbkit.transport.file_writer import StreamWriter
with StreamWriter(sys.argv[1], flush_every=7) as w:
    for batch in range(4):
        for i in range(500):
            w.write("ticks", b"x" * (i % 97), timestamp_ms=1_700_000_000_000 + batch * 500 + i)
            if i % 125 == 0:
                w.flush()
                time.sleep(0.005)  # pauses: the follower reaches the tip and waits there (what is tested)
        w.flush()
        time.sleep(0.05)
    w.write_eos()
"""


@pytest.mark.timeout(60)
def test_follow_a_writer_in_another_process(tmp_path: Path, repo_root: Path) -> None:
    path = tmp_path / "live.ss"
    StreamWriter(path, beacon_interval=1024).close()  # header only; the child appends
    with StreamReader(path, follow=True, poll_max=0.02, idle_timeout=30) as r:
        child = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(path), str(repo_root)])
        try:
            got = list(r)
        finally:
            assert child.wait(timeout=30) == 0
        assert r.end.reason == "eos"
    assert got[-1].is_eos
    data = got[:-1]
    assert [m.seq for m in data] == list(range(1, 2001))
    assert [m.payload for m in data] == [b"x" * (i % 97) for _ in range(4) for i in range(500)]
    assert [m.timestamp_ms for m in data] == [1_700_000_000_000 + i for i in range(2000)]
    assert r.beacons_seen > 50


@pytest.mark.timeout(30)
def test_follow_ends_when_the_file_is_removed(tmp_path: Path, write_ss) -> None:
    path = tmp_path / "gone.ss"
    write_ss(path, [("a", 0, i, i, b"m") for i in range(1, 4)])
    with StreamReader(path, follow=True, poll_max=0.02, idle_timeout=20) as r:
        timer = threading.Timer(0.2, os.remove, args=(path,))  # removed while the reader follows
        timer.start()
        got = list(r)
        timer.join()
        assert r.end.reason == "removed"  # not "idle": the removal ended it, long before idle_timeout
    assert [m.seq for m in got] == [1, 2, 3]


def test_follow_ends_when_the_file_is_replaced(tmp_path: Path, write_ss) -> None:
    path = tmp_path / "swap.ss"
    write_ss(path, [("a", 0, 1, 1, b"m")])
    with StreamReader(path, follow=True) as r:
        assert r.poll().seq == 1
        assert r.poll() is NEED_MORE
        other = tmp_path / "other.ss"
        write_ss(other, [("b", 0, 1, 1, b"n")])
        os.replace(other, path)
        assert r.poll() is None
        assert r.end.reason == "removed"


# -- opening errors ---------------------------------------------------------------------------------


def test_open_errors_are_nbkit_errors(tmp_path: Path) -> None:
    with pytest.raises(NbkitError, match="no such file"):
        StreamReader(tmp_path / "missing.ss")
    with pytest.raises(NbkitError, match="directory"):
        StreamReader(tmp_path)
    text = tmp_path / "notes.txt"
    text.write_text("hello, this is not a stream file\n" * 10)
    with pytest.raises(NbkitError, match="not a stream file"):
        StreamReader(text)
    with pytest.raises(ValueError):
        StreamReader(text, errors="ignore")


def test_workload_helper_is_deterministic(make_messages) -> None:
    assert make_messages(50) == make_messages(50)


# ---------------------------------------------------------------- key filter (keys=)


def _mixed(tmp_path, n: int = 600, *, interval: int = 1024, eos: bool = True):
    """Keys a / bb / cc round robin, payload sizes from 0 to 699 bytes: frames cut by beacons too."""
    path = tmp_path / "mixed.ss"
    with StreamWriter(path, beacon_interval=interval, created_at_ms=1) as w:
        for i in range(n):
            w.write(("a", "bb", "cc")[i % 3], bytes([i % 251]) * (i * 7 % 700), timestamp_ms=1000 + i)
        if eos:
            w.write_eos()
    return path


@pytest.mark.parametrize("interval", [1024, 1 << 20])
@pytest.mark.parametrize("keys", ["bb", ["a", "cc"], [], ["zz"]])
def test_keys_filter_yields_exactly_the_matching_messages(tmp_path, interval, keys):
    path = _mixed(tmp_path, interval=interval)
    wanted = {keys} if isinstance(keys, str) else set(keys)
    with StreamReader(path) as r:
        everything = list(r)
        full_end = r.end
    with StreamReader(path, keys=keys) as r:
        got = list(r)
        assert r.end == full_end and r.end.reason == "eos"
    assert got == [m for m in everything if m.stream_key in wanted]  # offsets and ends included


def test_read_columns_keeps_within_the_readers_keys(tmp_path):
    path = _mixed(tmp_path)
    with StreamReader(path, keys=["a", "bb"]) as r:
        cols = r.read_columns(accept=lambda key: key != "a")
    assert set(cols.stream_key) == {"bb"} and len(cols.offset) == 200


def test_keys_filter_follows_seeks_and_position_changes(tmp_path):
    path = _mixed(tmp_path, eos=False)
    with StreamReader(path) as r:
        bb = [m for m in r if m.stream_key == "bb"]
    with StreamReader(path, keys="bb") as r:
        assert r.poll() == bb[0] and r.poll() == bb[1]
        r.seek(FilePosition.sequence(bb[50].seq), key="bb")
        assert r.poll() == bb[50]
        r.pos = bb[10].offset  # moved by hand: the scanned batch is not reused
        assert r.poll() == bb[10]
        assert list(r) == bb[11:]
        assert r.end.reason == "end"


def test_keys_filter_in_follow_mode_sees_appends(tmp_path):
    path = _mixed(tmp_path, n=30, eos=False)
    with StreamReader(path, follow=True, keys="cc") as r, StreamWriter(path) as w:
        first = [r.poll() for _ in range(10)]
        assert all(m.stream_key == "cc" for m in first)
        assert r.poll() is NEED_MORE
        w.write("a", b"skipped")
        assert r.poll() is NEED_MORE
        w.write("cc", b"new")
        msg = r.poll()
        assert (msg.stream_key, msg.payload) == ("cc", b"new")


def test_keys_filter_rejects_non_strings(tmp_path):
    path = _mixed(tmp_path, n=3)
    with pytest.raises(TypeError, match="stream key strings"):
        StreamReader(path, keys=[b"a"])


# -- ready(): the messages scanned ahead of poll() -------------------------------------------------------


def _ready_file(path: Path, n: int = 400) -> None:
    with StreamWriter(path, beacon_interval=1024) as w:  # beacons every 1 KiB: batches end at boundaries too
        for i in range(n):
            w.write("orders" if i % 3 else "audit", b"x" * (i % 50))


def _read_with_ready(reader: StreamReader, take: int) -> list[tuple[str, int]]:
    """poll(), then at most ``take`` messages of each ready() batch, until the read ends."""
    got = []
    while (msg := reader.poll()) is not None:
        got.append((msg.stream_key, msg.seq))
        for m in itertools.islice(reader.ready(), take):
            assert reader.pos == m.end  # taken as it is handed out
            got.append((m.stream_key, m.seq))
    return got


@pytest.mark.parametrize("take", [0, 1, 5, 10**6])
@pytest.mark.parametrize("keys", [None, "orders"])
def test_ready_hands_out_what_poll_would_in_the_same_order(tmp_path, take, keys):
    """However much of each batch is taken, poll() goes on from there: the read is poll()'s alone."""
    path = tmp_path / "r.ss"
    _ready_file(path)
    with StreamReader(path, keys=keys) as r:
        expected = [(m.stream_key, m.seq) for m in r]
    with StreamReader(path, keys=keys) as r:
        assert _read_with_ready(r, take) == expected
        assert r.end is not None and r.end.reason == "end" and list(r.ready()) == []


def test_ready_stops_once_the_reader_is_moved(tmp_path):
    path = tmp_path / "r.ss"
    _ready_file(path)
    with StreamReader(path, keys="orders") as r:
        while not (ahead := list(itertools.islice(r.ready(), 1))):  # once a poll() has scanned a batch
            r.poll()
        ready = r.ready()
        assert next(ready).seq == ahead[0].seq + 1
        r.seek(FilePosition.sequence(2), key="orders")
        assert list(ready) == []
        assert r.poll().seq == 2


def test_seek_offset_goes_on_from_a_known_frame_across_beacons(tmp_path: Path) -> None:
    """seek_offset moves to a frame a caller knows (an earlier message's offset), even after the read
    ended or with messages scanned ahead, and the read then yields exactly the messages from there."""
    path = tmp_path / "offsets.ss"
    with StreamWriter(path, beacon_interval=1024, clock_ms=lambda: 5) as w:
        marks = [w.write("k" if n % 3 else "other", b"x" * (n % 90)) for n in range(200)]
    with StreamReader(path) as reader:
        everything = list(reader)
        assert reader.end is not None and reader.end.reason == "end"
        for j in (0, 57, 120, 199):
            reader.seek_offset(marks[j].offset)
            assert reader.end is None
            assert list(reader) == everything[j:]
        reader.seek_offset(marks[10].offset)
        first = reader.poll()  # scans a batch ahead; moving drops it
        assert first == everything[10]
        reader.seek_offset(marks[150].offset)
        assert next(iter(reader)) == everything[150]
        with pytest.raises(ValueError, match="file header"):
            reader.seek_offset(64)


def test_a_timestamp_past_year_9999_is_reported_at_its_own_field(tmp_path):
    """The error names the byte offset of the frame's timestamp field (after the key, shard and seq)."""
    from nbkit.errors import TimestampRangeError

    path = tmp_path / "ts.ss"
    with StreamWriter(path) as writer:
        writer.write("orders", b"a")
        second = writer.write("orders", b"b")
    data = bytearray(path.read_bytes())
    field = second.offset + 1 + len("orders") + 8 + 8  # key length, key, shard, seq
    data[field : field + 8] = (2**63).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(TimestampRangeError, match="after year 9999") as raised:
        list(StreamReader(path))
    assert raised.value.offset == field
