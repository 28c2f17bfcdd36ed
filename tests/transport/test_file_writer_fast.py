"""StreamWriter.write's short route (a known key on shard 0, the default seq, a frame reaching no beacon
boundary, fold or size limit): the same bytes as the reference layout (beacons, running checksums,
folds), the same errors, settings changed after opening honoured, and ``Written`` as a value
(equality, hashing, immutability, pickling). test_file_writer_parity.py compares it with the checking
route message for message."""

from __future__ import annotations

import copy
import itertools
import pickle
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from stream_files import iter_messages

from nbkit.errors import FileLimitError, InvalidKeyError, NbkitError
from nbkit.transport import file_writer, writer_state
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.write_routes import PureRoute
from nbkit.transport.writer_state import Written
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import decode_beacon

HYPO = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


def _clock(start: int = 1_700_000_000_000):
    ticks = itertools.count(start)
    return lambda: next(ticks)


# One write: (key, payload, how): "default" takes the fast path once the key is known; the others
# give an explicit seq / shard / timestamp or a bytearray payload and so take the checking path.
writes_st = st.lists(
    st.tuples(
        st.sampled_from(["a", "orders", "Z.9_-", "q" * 100]),
        st.one_of(st.binary(max_size=40), st.binary(min_size=200, max_size=1500)),
        st.sampled_from(["default"] * 6 + ["seq", "shard", "ts", "bytearray"]),
    ),
    max_size=40,
)


def _write_and_expect(w: StreamWriter, writes, clock_value) -> tuple[list, list]:
    """Write ``writes`` with ``w``; return the messages the reference layout must show, and Written."""
    seqs: dict[tuple[str, int], int] = {}
    expected, landed = [], []
    for i, (key, payload, how) in enumerate(writes):
        shard, seq, ts = 0, None, None
        if how == "seq":
            seq = 1000 + i
        elif how == "shard":
            shard = 3
        elif how == "ts":
            ts = 5 + i
        data = bytearray(payload) if how == "bytearray" else payload
        # a bytearray on purpose: write() is typed bytes but stores any buffer as its bytes
        written = w.write(key, data, seq=seq, shard_id=shard, timestamp_ms=ts)  # type: ignore[arg-type]
        if ts is None:
            ts = clock_value()
        if seq is None:
            seq = seqs.get((key, shard), 0) + 1
        seqs[(key, shard)] = max(seqs.get((key, shard), 0), seq)
        expected.append((key, shard, seq, ts, bytes(payload)))
        assert (written.stream_key, written.shard_id, written.seq, written.timestamp_ms) == (key, shard, seq, ts)
        landed.append(written)
    return expected, landed


@HYPO
@given(writes=writes_st, interval=st.sampled_from([1024, 2048]), flush_every=st.sampled_from([1, 1, 3]))
# a frame that ends exactly on the boundary (128 + 33 + 863 = 1024): its end is 1024, before the beacon
@example(writes=[("a", b"x" * 863, "default"), ("a", b"y", "default")], interval=1024, flush_every=1)
def test_custom_clock_matches_the_reference_layout(tmp_path_factory, layout, writes, interval, flush_every):
    path = tmp_path_factory.getbasetemp() / f"fast{next(_counter)}.ss"
    ticks = itertools.count(1_700_000_000_000)
    last = [0]

    def clock() -> int:
        last[0] = next(ticks)
        return last[0]

    with StreamWriter(
        path, beacon_interval=interval, file_name="f.ss", created_at_ms=7, clock_ms=clock, flush_every=flush_every
    ) as w:
        expected, landed = _write_and_expect(w, writes, lambda: last[0])
    assert path.read_bytes() == layout("f.ss", 7, interval, expected)
    got = list(iter_messages(path))
    assert [(x.offset, x.end) for x in landed] == [(m.offset, m.end) for m in got]


@HYPO
@given(writes=writes_st)
def test_default_clock_matches_the_reference_layout(tmp_path_factory, layout, writes):
    """The default clock (``time.time_ns() // 1_000_000``, read inline on the fast path)."""
    path = tmp_path_factory.getbasetemp() / f"fastdef{next(_counter)}.ss"
    ns = itertools.count(1_700_000_000_000_000_000, 987_654)
    last = [0]

    def time_ns() -> int:
        last[0] = next(ns)
        return last[0]

    real = time.time_ns
    time.time_ns = time_ns  # hypothesis and monkeypatch do not mix: patch and restore by hand
    try:
        with StreamWriter(path, beacon_interval=1024, file_name="f.ss", created_at_ms=7) as w:
            expected, _ = _write_and_expect(w, writes, lambda: last[0] // 1_000_000)
    finally:
        time.time_ns = real
    assert path.read_bytes() == layout("f.ss", 7, 1024, expected)


def test_running_checksums_survive_the_fold(tmp_path: Path, layout, monkeypatch) -> None:
    """Past ``_FOLD_BYTES`` of fast writes, the pending payload CRCs are folded: beacons keep matching."""
    path = tmp_path / "fold.ss"
    checked = []
    real_write = PureRoute.write_at_mark

    def counting(self, *args):
        checked.append(args[0])
        return real_write(self, *args)

    monkeypatch.setattr(PureRoute, "write_at_mark", counting)
    # I = 1024 puts one marker in each beacon, round robin over 200 streams: "a", written most of the
    # time, is a marker once in 200 beacons; meanwhile its payload CRCs wait, folded every _FOLD_BYTES
    others = [f"s{i:03d}" for i in range(199)]
    clock = _clock()
    expected = []
    most = 0
    with StreamWriter(path, beacon_interval=1024, file_name="f.ss", created_at_ms=1, clock_ms=clock) as w:
        n = 0
        while w.offset < 2 * writer_state.FOLD_BYTES + 5000:
            key = others[n % 199] if n % 10 == 0 or n < 199 * 10 else "a"
            payload = b"%d" % n * (1 + n % 3)
            x = w.write(key, payload)
            expected.append((key, 0, x.seq, x.timestamp_ms, payload))
            most = max(most, sum(len(s.crcs) for s in w._book.streams.values()))
            n += 1
    assert most <= writer_state.FOLD_BYTES // 33 + 1  # bounded by the fold (33: the smallest frame)
    assert path.read_bytes() == layout("f.ss", 1, 1024, expected)
    assert len(checked) < n / 5  # most writes reach no mark (the rest: new streams, beacon boundaries, folds)


def test_settings_changed_after_opening_apply(tmp_path: Path) -> None:
    path = tmp_path / "settings.ss"
    with StreamWriter(path, beacon_interval=1024, clock_ms=lambda: 10) as w:
        w.write("a", b"one")
        w.clock_ms = lambda: 20
        assert w.write("a", b"two").timestamp_ms == 20
        w.flush_every = 3
        assert w.flush_every == 3
        w.write("a", b"three")
        assert path.stat().st_size < w.offset  # buffered now
        w.write("a", b"four")
        w.write("a", b"five")
        assert path.stat().st_size == w.offset  # the third message flushed the batch
        w.write("a", b"six")
        w.flush_every = 1
        w.write("a", b"seven")  # goes out with the pending one
        assert path.stat().st_size == w.offset
        w.write("a", b"eight")
        assert path.stat().st_size == w.offset
        w.size_limit = w.offset + 40
        assert w.size_limit == w.offset + 40
        with pytest.raises(FileLimitError, match="size limit"):
            w.write("a", b"x" * 10)
        size = w.offset
    assert path.stat().st_size == size
    assert [m.payload for m in iter_messages(path)] == [
        b"one",
        b"two",
        b"three",
        b"four",
        b"five",
        b"six",
        b"seven",
        b"eight",
    ]


def test_errors_on_a_known_key_are_the_checking_paths(tmp_path: Path) -> None:
    values = iter([-1, 2**64, MAX_TIMESTAMP_MS + 1, 1.5])
    path = tmp_path / "errors.ss"
    with StreamWriter(path, beacon_interval=1024, clock_ms=lambda: 5) as w:
        w.write("a", b"known")
        with pytest.raises(TypeError, match="payload must be bytes, not str"):
            w.write("a", "text")  # type: ignore[arg-type]
        with pytest.raises(InvalidKeyError, match="must be a str, not list"):
            w.write(["a"], b"x")  # type: ignore[arg-type]
        with pytest.raises(InvalidKeyError, match="must be a str, not bytes"):
            w.write(b"a", b"x")  # type: ignore[arg-type]
        w.clock_ms = lambda: next(values)  # type: ignore[assignment,return-value]  # 1.5: a wrong clock on purpose
        for _ in range(3):
            with pytest.raises(NbkitError, match="outside 1970"):
                w.write("a", b"bad clock")
        with pytest.raises(Exception, match="integer"):  # a float timestamp: struct says so, as before
            w.write("a", b"float clock")
        w.clock_ms = lambda: 6
        w.write("a", b"max", seq=2**64 - 1)
        with pytest.raises(ValueError, match="unsigned 64-bit"):
            w.write("a", b"past the max seq")
        assert w.write("b", b"other").seq == 1
    assert [(m.stream_key, m.seq, m.payload) for m in iter_messages(path)] == [
        ("a", 1, b"known"),
        ("a", 2**64 - 1, b"max"),
        ("b", 1, b"other"),
    ]


def test_short_writes_on_the_fast_path_are_completed(tmp_path: Path, monkeypatch, layout) -> None:
    path = tmp_path / "short.ss"
    real = file_writer.os.write
    calls = []

    def dribble(fd: int, data) -> int:  # the OS takes at most 7 bytes per call
        calls.append(len(data))
        return real(fd, bytes(data)[:7])

    expected = []
    with StreamWriter(path, beacon_interval=1024, file_name="f.ss", created_at_ms=1, clock_ms=lambda: 9) as w:
        monkeypatch.setattr(file_writer.os, "write", dribble)
        for n in range(40):
            x = w.write("k", b"payload %d" % n)
            expected.append(("k", 0, x.seq, 9, b"payload %d" % n))
            assert path.stat().st_size == w.offset
        monkeypatch.undo()
    assert max(calls) > 7 and len(calls) > 40
    assert path.read_bytes() == layout("f.ss", 1, 1024, expected)


def test_large_and_varied_payloads(tmp_path: Path, layout) -> None:
    """Empty, small and large payloads (past 64 KiB, past several beacon intervals) give the reference bytes."""
    path = tmp_path / "varied.ss"
    expected = []
    with StreamWriter(path, beacon_interval=4096, file_name="f.ss", created_at_ms=1, clock_ms=_clock()) as w:
        for n, size in enumerate([0, 1, 70_000, 65_536, 65_537, 300, 200_000, 5]):
            payload = bytes([n]) * size
            x = w.write("big", payload)
            w.write("big", payload[:3])
            expected += [
                ("big", 0, x.seq, x.timestamp_ms, payload),
                ("big", 0, x.seq + 1, x.timestamp_ms + 1, payload[:3]),
            ]
    assert path.read_bytes() == layout("f.ss", 1, 4096, expected)
    beacon = decode_beacon(path.read_bytes(), 4096, 4096)
    assert beacon.markers[0].stream_key == "big"


def test_written_is_an_immutable_value() -> None:
    w = Written("orders", 0, 19, 1700000000190, 1019, 1109)
    assert (w.stream_key, w.shard_id, w.seq, w.timestamp_ms, w.offset, w.end) == (
        "orders",
        0,
        19,
        1700000000190,
        1019,
        1109,
    )
    assert w == Written(stream_key="orders", shard_id=0, seq=19, timestamp_ms=1700000000190, offset=1019, end=1109)
    assert w != Written("orders", 0, 20, 1700000000190, 1019, 1109)
    assert w != ("orders", 0, 19, 1700000000190, 1019, 1109)  # only equal to another Written
    assert (w == ("orders", 0, 19, 1700000000190, 1019, 1109)) is False
    assert hash(w) == hash(Written("orders", 0, 19, 1700000000190, 1019, 1109))
    assert repr(w) == (
        "Written(stream_key='orders', shard_id=0, seq=19, timestamp_ms=1700000000190, offset=1019, end=1109)"
    )
    with pytest.raises(AttributeError):
        w.seq = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        w.extra = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(w)) == w and type(pickle.loads(pickle.dumps(w))) is Written
    assert copy.copy(w) == w and copy.deepcopy(w) == w
    match w:
        case Written(key, shard, seq, ts, offset, end):
            assert (key, shard, seq, ts, offset, end) == ("orders", 0, 19, 1700000000190, 1019, 1109)


def test_written_from_the_fast_path_is_a_written(tmp_path: Path) -> None:
    with StreamWriter(tmp_path / "w.ss", clock_ms=lambda: 3) as w:
        w.write("k", b"1")
        x = w.write("k", b"22")
    assert type(x) is Written
    assert x == Written("k", 0, 2, 3, x.offset, x.offset + 35)


def test_written_compares_like_the_dataclass_it_was() -> None:
    from unittest import mock

    w = Written("k", 0, 1, 2, 128, 160)
    t = ("k", 0, 1, 2, 128, 160)
    assert (t == w) is False and (w == t) is False and t != w and w != t
    assert w == mock.ANY and mock.ANY.__eq__(w)
    assert w != 5 and (w == "k") is False
    assert len({w, Written("k", 0, 1, 2, 128, 160)}) == 1
