"""Shared appends: several StreamWriters on one file produce exactly the bytes one writer would have.

Writers in one process contend for the lock like writers in different processes (``flock`` belongs to
each open file description). The reference is one writer that writes the same messages, in the file's
order, with the sequence numbers and timestamps the shared writers got. Processes:
tests/reliability/test_shared_service.py.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from stream_files import iter_messages

from nbkit.errors import WriterLockedError
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.writer_state import Written
from nbkit.wire.ssformat import HEADER_SIZE

HYPO = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()
CREATED = 1_700_000_000_000


def fresh(base: Path) -> Path:
    return base / f"s{next(_counter)}.ss"


def one_writer_copy(path: Path, target: Path) -> bytes:
    """The file one writer makes from ``path``'s messages (same header, seqs and timestamps)."""
    with StreamReader(path) as r:
        header = r.header
        messages = list(r)
        assert r.end.reason == "end", r.end
    with StreamWriter(
        target, beacon_interval=header.beacon_interval, file_name=header.file_name, created_at_ms=header.created_at_ms
    ) as w:
        for m in messages:
            w.write(m.stream_key, m.payload, seq=m.seq, shard_id=m.shard_id, timestamp_ms=m.timestamp_ms)
    return target.read_bytes()


def check_sequences(path: Path) -> dict[tuple[str, int], int]:
    """Every stream's sequence numbers go 1, 2, 3, ... in file order; returns the last of each."""
    last: dict[tuple[str, int], int] = {}
    for m in iter_messages(path):
        stream = (m.stream_key, m.shard_id)
        assert m.seq == last.get(stream, 0) + 1, (stream, m.seq, last.get(stream))
        last[stream] = m.seq
    return last


step = st.tuples(
    st.integers(0, 3),  # which writer
    st.sampled_from(["orders", "payments", "a", "orders.dead"]),
    st.integers(0, 700),  # payload size
    st.integers(0, 1),  # shard
)


@HYPO
@given(steps=st.lists(step, min_size=1, max_size=60), interval=st.sampled_from([1024, 2048]))
def test_interleaved_writers_write_what_one_writer_would(tmp_path_factory, steps, interval) -> None:
    base = tmp_path_factory.mktemp("shared")
    path = fresh(base)
    writers = [
        StreamWriter(
            path,
            beacon_interval=interval,
            created_at_ms=CREATED,
            file_name="f",
            clock_ms=itertools.count(CREATED).__next__,
            lock_timeout=0,
        )
        for _ in range(4)
    ]
    try:
        for i, (who, key, size, shard) in enumerate(steps):
            w = writers[who]
            written = w.write(key, bytes([i % 256]) * size, shard_id=shard)
            assert isinstance(written, Written)
    finally:
        for w in writers:
            w.close()
    check_sequences(path)
    assert path.read_bytes() == one_writer_copy(path, fresh(base))


@HYPO
@given(steps=st.lists(step, min_size=2, max_size=40), interval=st.sampled_from([1024, 4096]), cut=st.floats(0.0, 1.0))
def test_a_torn_append_is_repaired_by_the_next_writer(tmp_path_factory, steps, interval, cut) -> None:
    """A writer killed mid-append leaves part of a frame (and maybe of a beacon): the next append cuts
    it off; the file is then what one writer would have made of the messages that were complete."""
    base = tmp_path_factory.mktemp("torn")
    path = fresh(base)
    a = StreamWriter(path, beacon_interval=interval, created_at_ms=CREATED, file_name="f")
    b = StreamWriter(path, lock_timeout=0)
    half = len(steps) // 2
    for i, (who, key, size, shard) in enumerate(steps[:half]):
        (a, b)[who % 2].write(key, bytes([i % 256]) * size, shard_id=shard)
    before = path.stat().st_size
    with StreamWriter(path) as killed:  # its last append is torn, and it writes nothing more
        killed.write("torn", b"t" * 400)
    after = path.stat().st_size
    os.truncate(path, before + int((after - before - 1) * cut))  # keep a strict prefix of the append
    for i, (who, key, size, shard) in enumerate(steps[half:]):
        (a, b)[who % 2].write(key, bytes([i % 256]) * size, shard_id=shard)
    a.close()
    b.close()
    assert all(m.stream_key != "torn" for m in iter_messages(path))
    check_sequences(path)
    assert path.read_bytes() == one_writer_copy(path, fresh(base))


def test_sequences_continue_the_files_and_the_beacon_at_a_boundary_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "b.ss"
    a = StreamWriter(path, beacon_interval=1024, created_at_ms=CREATED)
    b = StreamWriter(path)
    first = a.write("k", b"z" * (1024 - 128 - 33), timestamp_ms=1)  # ends exactly at 1024: a beacon follows
    assert first.end == 1024  # a frame ends where its bytes end (spec 6.3); the beacon is not part of it
    second = b.write("k", b"again", timestamp_ms=2)
    assert (second.seq, second.offset) == (2, 1024 + 7 + 27 + 1)  # b read a's frame and its beacon, cut nothing
    assert b.truncated_bytes == 0
    assert a.write("k", b"third").seq == 3
    a.close()
    b.close()
    assert [m.seq for m in iter_messages(path)] == [1, 2, 3]
    assert path.read_bytes() == one_writer_copy(path, tmp_path / "ref.ss")


def test_a_missing_beacon_is_written_with_the_markers_one_writer_would_have(tmp_path: Path) -> None:
    """A writer killed between a frame that ends on a boundary and its beacon: the next writer writes
    that beacon (with markers), not an empty one."""
    path = tmp_path / "m.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=CREATED) as w:
        w.write("k", b"z" * (1024 - 128 - 33), timestamp_ms=1)
    os.truncate(path, 1024)
    with StreamWriter(path) as w:
        assert w.offset == 1024 + 7 + 27 + 1
        w.write("k", b"next", timestamp_ms=2)
    assert path.read_bytes() == one_writer_copy(path, tmp_path / "ref.ss")


def test_a_trailing_eos_from_another_writer_is_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "e.ss"
    a = StreamWriter(path, created_at_ms=CREATED)
    a.write("k", b"1")
    with StreamWriter(path) as b:
        b.write("k", b"2")
        b.write_eos()
    assert a.write("k", b"3").seq == 3
    a.close()
    assert [(m.stream_key, m.seq) for m in iter_messages(path)] == [("k", 1), ("k", 2), ("k", 3)]


def test_a_writer_whose_eos_was_overwritten_reads_the_file_again(tmp_path: Path) -> None:
    """The file shrank below this writer's end (another writer cut its trailing EOS): it rescans."""
    path = tmp_path / "r.ss"
    a = StreamWriter(path, created_at_ms=CREATED)
    b = StreamWriter(path)
    a.write("k", b"1")
    a.write_eos()
    b.write("k", b"2" * 3)  # b cuts a's EOS off and appends a shorter frame
    assert a.write("k", b"3").seq == 3
    a.write_eos()
    b.write("k", b"4" * 100)  # and now a longer one: the file grew past a's end
    assert a.write("k", b"5").seq == 5
    a.close()
    b.close()
    assert [m.payload for m in iter_messages(path)] == [b"1", b"222", b"3", b"4" * 100, b"5"]
    check_sequences(path)
    assert path.read_bytes() == one_writer_copy(path, tmp_path / "ref.ss")


def test_a_batching_writer_holds_the_lock_until_it_flushes(tmp_path: Path) -> None:
    path = tmp_path / "f.ss"
    a = StreamWriter(path, flush_every=3)
    b = StreamWriter(path, lock_timeout=0)
    a.write("k", b"1")
    with pytest.raises(WriterLockedError, match="a shared writer, held the lock"):  # not "exclusively"
        b.write("k", b"b")
    a.write("k", b"2")
    a.write("k", b"3")  # the batch goes out; the lock is free again
    assert b.write("k", b"4").seq == 4
    a.close()
    b.close()
    check_sequences(path)


def test_an_exclusive_writer_keeps_shared_writers_out_until_it_closes(tmp_path: Path) -> None:
    path = tmp_path / "x.ss"
    shared = StreamWriter(path, lock_timeout=0)
    with StreamWriter(path, exclusive=True, lock_timeout=0) as only:
        only.write("k", b"1")
        with pytest.raises(WriterLockedError, match=f"process {os.getpid()} is writing this stream file"):
            shared.write("k", b"no")
    assert shared.write("k", b"yes").seq == 2
    shared.close()
    assert [m.payload for m in iter_messages(path)] == [b"1", b"yes"]


def test_writers_opening_a_new_file_together_write_one_header(tmp_path: Path) -> None:
    path = tmp_path / "n.ss"
    a = StreamWriter(path, created_at_ms=CREATED)
    b = StreamWriter(path, created_at_ms=CREATED + 5)  # the file exists (header only): b reads it
    assert b.header == a.header and path.stat().st_size == HEADER_SIZE
    b.write("k", b"b")
    a.write("k", b"a")
    a.close()
    b.close()
    assert [m.seq for m in iter_messages(path)] == [1, 2]


def test_a_catch_up_reads_the_file_the_writer_has_open_after_a_rotation(tmp_path: Path) -> None:
    """The path is renamed away and a new file takes its place: writers that had the old one open keep
    appending to it, reading each other's frames there (not the new file's)."""
    path = tmp_path / "r.ss"
    a = StreamWriter(path)
    b = StreamWriter(path)
    a.write("k", b"1")
    os.rename(path, tmp_path / "old.ss")
    with StreamWriter(path) as fresh:
        for _ in range(5):
            fresh.write("k", b"new file")
    b.write("k", b"2")
    assert a.write("k", b"3").seq == 3  # after b's message in the old file
    a.close()
    b.close()
    assert [m.payload for m in iter_messages(tmp_path / "old.ss")] == [b"1", b"2", b"3"]
    assert [m.seq for m in iter_messages(path)] == [1, 2, 3, 4, 5]
