"""StreamWriter: byte layout (spec §2-§7), sample re-encoding, appending, locking, validation, batching."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stream_files import iter_messages

from nbkit.errors import (
    BeaconIntervalError,
    ByteMarkError,
    InvalidKeyError,
    NbkitError,
    TruncatedError,
    WriterLockedError,
)
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.writer_state import Written
from nbkit.wire.core import load_compiled
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import decode_beacon

SAMPLE_SHA256 = "ef3d45be9e85df73efaaa795e85b751f324d5e569382098ac2f7094d5e7d7df6"
HYPO = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


def fresh_path(base: Path) -> Path:
    return base / f"w{next(_counter)}.ss"


def tuples(messages) -> list[tuple]:
    return [(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload) for m in messages]


# -- byte layout ------------------------------------------------------------------------------------


def test_sample_reencodes_byte_for_byte(sample_path: Path, tmp_path: Path, write_ss) -> None:
    with StreamReader(sample_path) as r:
        header = r.header
        msgs = [(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload) for m in r]
    out = tmp_path / "copy.ss"
    write_ss(out, msgs, interval=header.beacon_interval, file_name=header.file_name, created_at_ms=header.created_at_ms)
    data = out.read_bytes()
    assert len(data) == 3481
    assert hashlib.sha256(data).hexdigest() == SAMPLE_SHA256
    assert data == sample_path.read_bytes()


def test_orders_worked_example_layout(tmp_path: Path) -> None:
    """§2/§6.1: message 19 starts at 1019, the beacon at 1024 cuts it after 5 bytes, 45 follow it."""
    path = tmp_path / "orders.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=0) as w:
        written = [w.write("orders", b'{"order":%d}' % n, timestamp_ms=1700000000000 + 10 * n) for n in range(1, 20)]
    assert [x.seq for x in written] == list(range(1, 20))
    assert written[-1] == Written("orders", 0, 19, 1700000000190, 1019, 1109)
    data = path.read_bytes()
    assert len(data) == 1109
    assert data[1024:1064] == bytes.fromhex(
        "0d0000002d01066f7264657273000000000000000000000000000000130000018bcfe568bea77f0d"
    )
    beacon = decode_beacon(data, 1024, 1024)
    assert (beacon.remaining, beacon.size, beacon.markers[0].running_checksum) == (45, 40, 42879)
    frame19 = data[1019:1024] + data[1064:1109]
    assert len(frame19) == 50 and frame19.startswith(b"\x06orders") and frame19.endswith(b"\r")
    got = list(iter_messages(path))
    assert got[-1].offset == 1019 and got[-1].end == 1109 and got[-1].payload == b'{"order":19}'


messages_st = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "orders", "Z.9_-", "q" * 100]),
        st.sampled_from([0, 2, (1 << 64) - 1]),
        st.integers(0, (1 << 64) - 1),
        st.integers(0, MAX_TIMESTAMP_MS),
        st.one_of(st.binary(max_size=50), st.binary(min_size=900, max_size=5000)),
    ),
    max_size=20,
)


@HYPO
@given(messages=messages_st, interval=st.sampled_from([1024, 2048, 4096]))
def test_writer_matches_reference_layout(tmp_path_factory, layout, write_ss, messages, interval) -> None:
    """Beacon placement, remaining counts, marker round robin and running checksums, byte for byte."""
    path = fresh_path(tmp_path_factory.getbasetemp())
    write_ss(path, messages, interval=interval, file_name="ref.ss", created_at_ms=42)
    assert path.read_bytes() == layout("ref.ss", 42, interval, messages)


def test_marker_round_robin_over_sorted_streams(tmp_path: Path) -> None:
    """I = 2048 gives 3 markers per beacon, taken round robin over streams sorted by (key bytes, shard)."""
    path = tmp_path / "rr.ss"
    keys = [("b", 0), ("a", 1), ("B", 0), ("a", 0), ("c", 5)]
    with StreamWriter(path, beacon_interval=2048) as w:
        for i in range(60):
            key, shard = keys[i % len(keys)]
            w.write(key, bytes(100), shard_id=shard, timestamp_ms=i)
    data = path.read_bytes()
    order = sorted(keys, key=lambda ks: (ks[0].encode(), ks[1]))
    assert order[0] == ("B", 0)
    start = 0
    for k in range(1, len(data) // 2048 + 1):
        beacon = decode_beacon(data, k * 2048, k * 2048)
        got = [(m.stream_key, m.shard_id) for m in beacon.markers]
        assert got == [order[(start + j) % 5] for j in range(3)]
        start += 3


def test_eos_helpers(tmp_path: Path) -> None:
    path = tmp_path / "e.ss"
    w = StreamWriter(path, clock_ms=lambda: 1234)
    w.write("a", b"x")
    eos = w.write_eos()
    assert (eos.stream_key, eos.seq, eos.shard_id, eos.timestamp_ms) == (INTERNAL_KEY, 0, 0, 1234)
    assert eos.end - eos.offset == 56
    w.close()
    w.close()  # idempotent
    assert w.closed
    with pytest.raises(NbkitError, match="closed"):
        w.write("a", b"y")
    path2 = tmp_path / "e2.ss"
    w2 = StreamWriter(path2)
    w2.write("a", b"x")
    w2.close(eos=True)
    assert list(iter_messages(path2))[-1].is_eos


# -- appending --------------------------------------------------------------------------------------

append_st = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.binary(max_size=700)), max_size=15)


@HYPO
@given(first=append_st, second=append_st, eos_before=st.booleans(), eos_after=st.booleans())
def test_append_continues_the_file(tmp_path_factory, first, second, eos_before, eos_after) -> None:
    path = fresh_path(tmp_path_factory.getbasetemp())
    with StreamWriter(path, beacon_interval=1024, clock_ms=lambda: 1000) as w:
        for key, payload in first:
            w.write(key, payload)
        if eos_before:
            w.write_eos()
    before = path.read_bytes()
    old = list(iter_messages(path))
    resume = max([m.end for m in old if not m.is_eos], default=128)
    with StreamWriter(path, beacon_interval=2048, clock_ms=lambda: 2000) as w:
        assert w.appended and w.header.beacon_interval == 1024  # the file's interval wins
        for key in "abc":
            n = sum(k == key for k, _ in first)
            assert w.next_seq(key) == n + 1
            assert w.last_seq(key) == (n or None)
        assert w.truncated_bytes == len(before) - resume  # a trailing EOS (and beacons after) go
        assert w.offset == resume + (7 if resume % 1024 == 0 else 0)
        for key, payload in second:
            w.write(key, payload)
        if eos_after:
            w.write_eos()
    got = list(iter_messages(path))
    expected = []
    counters: dict[str, int] = {}
    for ts, batch in ((1000, first), (2000, second)):
        for key, payload in batch:
            counters[key] = counters.get(key, 0) + 1
            expected.append((key, 0, counters[key], ts, payload))
    assert [t for t in tuples(got) if t[0] != INTERNAL_KEY] == expected
    eos_at = [i for i, m in enumerate(got) if m.is_eos]
    assert eos_at == ([len(got) - 1] if eos_after else [])
    assert path.read_bytes()[:resume] == before[:resume]


def test_append_resumes_after_a_partial_tail(tmp_path: Path, write_ss) -> None:
    path = tmp_path / "p.ss"
    msgs = [("a", 0, i, i, b"payload %d" % i) for i in range(1, 11)]
    write_ss(path, msgs, interval=1024)
    good = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b"\x01a\x00\x00\x00")  # the start of a frame a crashed writer never finished
    with StreamWriter(path) as w:
        assert w.truncated_bytes == 5
        assert w.offset == len(good)
        w.write("a", b"next", timestamp_ms=99)
    got = list(iter_messages(path))
    assert tuples(got) == [*msgs, ("a", 0, 11, 99, b"next")]
    assert path.read_bytes()[: len(good)] == good


def test_append_refuses_a_file_damaged_in_the_middle(tmp_path: Path, write_ss) -> None:
    path = tmp_path / "d.ss"
    write_ss(path, [("a", 0, i, i, b"payload %d" % i) for i in range(1, 11)], interval=1024)
    data = bytearray(path.read_bytes())
    fifth = list(iter_messages(path))[4]
    data[fifth.end - 5] ^= 0xFF  # a payload byte: the CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(NbkitError, match="cannot append") as info:
        StreamWriter(path)
    assert str(path) in str(info.value) and "checksum" in str(info.value)
    assert path.read_bytes() == bytes(data)


def test_append_refuses_a_foreign_or_short_file(tmp_path: Path) -> None:
    text = tmp_path / "notes.ss"
    text.write_bytes(b"not a stream file, just text" * 10)
    with pytest.raises(ByteMarkError):
        StreamWriter(text)
    assert text.read_bytes() == b"not a stream file, just text" * 10
    short = tmp_path / "short.ss"
    short.write_bytes(b"Ss\x01")
    with pytest.raises(TruncatedError):
        StreamWriter(short)
    assert short.read_bytes() == b"Ss\x01"


def test_exclusive_append_at_exact_boundary_writes_an_empty_beacon(tmp_path: Path) -> None:
    """Upstream's resume (spec §9): an exclusive writer resuming on a boundary writes an empty beacon
    there. A shared writer keeps the beacon that is there (tests/transport/test_shared_appends.py)."""
    path = tmp_path / "b.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        x = w.write("k", b"z" * (1024 - 128 - 33), timestamp_ms=1)  # ends exactly at 1024
    assert x.offset == 128
    data = path.read_bytes()
    assert len(data) == 1024 + 7 + 27 + 1  # the writer put a one-marker beacon there at once
    with StreamWriter(path, exclusive=True) as w:
        assert w.truncated_bytes == 35
        assert w.offset == 1024 + 7
        w.write("k", b"again", timestamp_ms=2)
    data = path.read_bytes()
    assert data[1024:1031] == bytes.fromhex("0d00000000000d")
    assert [m.payload[:5] for m in iter_messages(path)] == [b"zzzzz", b"again"]


def test_existing_only(tmp_path: Path) -> None:
    with pytest.raises(NbkitError, match="no such file"):
        StreamWriter(tmp_path / "nope.ss", existing_only=True)
    assert not (tmp_path / "nope.ss").exists()


def test_missing_directory_is_named(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "x.ss"
    with pytest.raises(NbkitError) as info:
        StreamWriter(path)
    message = str(info.value)
    assert "directory" in message and "existing_only" not in message
    with pytest.raises(NbkitError, match="directory"):
        StreamWriter(tmp_path)  # the path is itself a directory


# -- locking ----------------------------------------------------------------------------------------


def test_an_exclusive_writer_refuses_a_second_writer_in_the_same_process(tmp_path: Path) -> None:
    path = tmp_path / "lock.ss"
    with StreamWriter(path, exclusive=True) as w:
        w.write("a", b"1")
        for exclusive in (True, False):
            with pytest.raises(WriterLockedError) as info:
                StreamWriter(path, exclusive=exclusive, lock_timeout=0)
            assert str(path) in str(info.value)
            assert f"process {os.getpid()}" in str(info.value)
        assert "exclusively" in str(info.value)  # the shared writer says why it waited in vain
        w.write("a", b"2")
    with StreamWriter(path) as w:  # released on close
        w.write("a", b"3")
    assert [m.payload for m in iter_messages(path)] == [b"1", b"2", b"3"]


HOLDER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from nbkit.transport.file_writer import StreamWriter
w = StreamWriter(sys.argv[1], exclusive=True)
w.write("held", b"x")
print("ready", flush=True)
sys.stdin.readline()
w.close()
"""


@pytest.mark.timeout(30)
def test_an_exclusive_writer_refuses_a_writer_in_another_process(tmp_path: Path, repo_root: Path) -> None:
    path = tmp_path / "lock2.ss"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(repo_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        with pytest.raises(WriterLockedError) as info:
            StreamWriter(path, lock_timeout=0.05)
        message = str(info.value)
        assert str(path) in message and f"process {child.pid}" in message
    finally:
        child.stdin.write("\n")
        child.stdin.close()
        assert child.wait(timeout=20) == 0
    with StreamWriter(path) as w:
        assert w.next_seq("held") == 2


# -- validation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "why"),
    [("", "non-empty"), ("a b", "' '"), ("k" * 250, "limit is 249"), ("é", "'é'"), ("a/b", "'/'"), ("a|b", "'|'")],
    ids=["empty", "space", "too-long", "non-ascii", "slash", "pipe"],
)
def test_invalid_keys_are_refused(tmp_path: Path, key: str, why: str) -> None:
    path = tmp_path / "k.ss"
    with StreamWriter(path) as w:
        with pytest.raises(InvalidKeyError, match=why):
            w.write(key, b"x")
        w.write("ok", b"y")
    assert [m.stream_key for m in iter_messages(path)] == ["ok"]  # nothing of the refused write


@pytest.mark.parametrize("interval", [0, 1000, 128, 1025, -1024])
def test_bad_intervals_are_refused(tmp_path: Path, interval: int) -> None:
    with pytest.raises(BeaconIntervalError, match="multiple of 1024"):
        StreamWriter(tmp_path / "i.ss", beacon_interval=interval)
    assert not (tmp_path / "i.ss").exists()


def test_write_argument_errors(tmp_path: Path) -> None:
    with StreamWriter(tmp_path / "v.ss") as w:
        with pytest.raises(TypeError, match="bytes"):
            w.write("a", "text")  # type: ignore[arg-type]
        with pytest.raises(NbkitError):
            w.write("a", b"x", timestamp_ms=-1)
        with pytest.raises(ValueError):
            StreamWriter(tmp_path / "v2.ss", flush_every=0)


# -- batching ---------------------------------------------------------------------------------------


def test_flush_every_batches_writes(tmp_path: Path) -> None:
    path = tmp_path / "batch.ss"
    with StreamWriter(path, beacon_interval=1024, flush_every=5) as w:
        assert path.stat().st_size == 128
        for i in range(4):
            w.write("a", b"m%d" % i)
        assert path.stat().st_size == 128  # nothing handed to the OS yet
        with StreamReader(path) as r:
            assert list(r) == []
        w.write("a", b"m4")
        assert path.stat().st_size == w.offset  # the fifth write flushed the batch
        w.write("a", b"m5")
        assert path.stat().st_size < w.offset
        w.flush()
        assert path.stat().st_size == w.offset
        w.write("a", b"m6")
    assert [m.payload for m in iter_messages(path)] == [b"m%d" % i for i in range(7)]


def test_append_keeps_messages_after_a_mid_file_eos(tmp_path):
    from nbkit.transport.file_reader import StreamReader

    path = tmp_path / "mid-eos.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        w.write("a", b"before")
        w.write_eos()
        w.write("a", b"after")
    with StreamWriter(path) as w:
        assert w.write("a", b"appended").seq == 3
    r = StreamReader(path, stop_at_eos=False)
    assert [m.payload for m in r] == [b"before", b"EOS", b"after", b"appended"]


def test_append_treats_an_upstream_stale_tail_as_the_end(tmp_path):
    from nbkit.transport.file_reader import StreamReader

    path = tmp_path / "stale.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        w.write("a", b"one")
        w.close(eos=True)
    data = bytearray(path.read_bytes())
    # what an upstream append leaves: a short frame written over the first bytes of the old EOS
    eos_at = len(data) - 56
    with StreamWriter(tmp_path / "short.ss", beacon_interval=1024) as w2:
        written = w2.write("a", b"x", seq=2, timestamp_ms=1)
    short = (tmp_path / "short.ss").read_bytes()[written.offset : written.end]
    data[eos_at : eos_at + len(short)] = short
    path.write_bytes(bytes(data))
    with StreamWriter(path) as w:
        w.write("a", b"three")
    assert [m.payload for m in StreamReader(path)] == [b"one", b"x", b"three"]


def test_the_writer_names_the_route_it_chose_when_it_opened(tmp_path: Path) -> None:
    """Shared writers take the shared route; exclusive ones the compiled route on the compiled core, else the
    pure one; the seq, shard and timestamp may also be given by position, in write's order."""
    path = tmp_path / "routes.ss"
    with StreamWriter(path, clock_ms=lambda: 5) as shared:
        assert shared.route == "shared"
        assert shared.write("a", b"one", 7, 1, 9) == Written("a", 1, 7, 9, shared.offset - 36, shared.offset)
    with StreamWriter(path, exclusive=True) as exclusive:
        assert exclusive.route == ("compiled" if load_compiled("nbkit.transport._writer") else "pure")
        assert exclusive.write("a", b"two").seq == 1
    assert [(m.shard_id, m.seq) for m in iter_messages(path)] == [(1, 7), (0, 1)]


class _CutWrite:
    """``os.write`` that, once, writes the first ``keep`` bytes to the stream file and then raises as a signal
    handler would (KeyboardInterrupt after the system call returned a short count)."""

    def __init__(self, fd_path: Path, keep: int) -> None:
        self.real = os.write
        self.path = fd_path
        self.keep = keep
        self.fired = False

    def __call__(self, fd: int, data) -> int:
        if not self.fired and len(data) > self.keep and os.path.samefile(f"/proc/self/fd/{fd}", self.path):
            self.fired = True
            self.real(fd, bytes(data)[: self.keep])
            raise KeyboardInterrupt
        return self.real(fd, data)


@pytest.mark.parametrize("flush_every", [1, 3])
@pytest.mark.parametrize("keep", [0, 1, 10, 40])
def test_a_signal_during_a_write_leaves_the_frame_whole_and_written_once(tmp_path, monkeypatch, flush_every, keep):
    # a handler's exception right after a short write: the writer finishes the frame from where the file says
    # it stopped (not from its start again), then the exception propagates; the file reads back intact
    path = tmp_path / "cut.ss"
    with StreamWriter(path, flush_every=flush_every) as writer:
        writer.write("orders", b"first")
        writer.flush()
        cut = _CutWrite(path, keep)
        monkeypatch.setattr(os, "write", cut)
        with pytest.raises(KeyboardInterrupt):
            for n in range(3):
                writer.write("orders", b"payload number %d, long enough to be cut" % n)
        monkeypatch.undo()
        assert cut.fired
        writer.write("orders", b"after")
    got = [(m.seq, m.payload) for m in iter_messages(path) if m.stream_key == "orders"]
    payloads = [p for _, p in got]
    assert payloads[0] == b"first" and payloads[-1] == b"after"
    assert [seq for seq, _ in got] == list(range(1, len(got) + 1))
    assert len(set(payloads)) == len(payloads)  # nothing written twice
