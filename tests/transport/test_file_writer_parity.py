"""StreamWriter.write's short route and its checking route give identical files, results and errors.

A key written before on shard 0 with the default sequence number skips the key check and the stream
lookup (the writer keeps them), and a frame that reaches no beacon boundary, checksum fold or size
limit skips the cutting. Passing ``seq`` explicitly always takes the checking route. The same random
messages (keys, payloads from empty to past a beacon interval, shard ids and clock readings including
the out-of-range ones, size limits) written both ways must give byte-identical files, equal ``Written``
results and the same errors, message for message.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from stream_files import iter_messages

from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.write_routes import PureRoute
from nbkit.wire.limits import MAX_TIMESTAMP_MS

HYPO = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()

_keys = st.sampled_from(["a", "orders", "Z.9_-", "q" * 100, "bad key", ""])
_payloads = st.one_of(
    st.just(b""),
    st.binary(max_size=40),
    st.integers(0, 1100).map(lambda n: b"p" * n),  # around a 1024-byte interval: frames ending on a boundary
    st.binary(min_size=1500, max_size=3000),  # frames spanning more than one beacon interval
)
_shards = st.sampled_from([0] * 6 + [1, 2**64 - 1, 2**64, -1])
_clock = st.sampled_from([1_700_000_000_000] * 6 + [0, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1, -1])
_writes = st.lists(st.tuples(_keys, _payloads, _shards, _clock), max_size=40)


def _outcome(call) -> object:
    """What a write gave: its ``Written``, or the error's type and message."""
    try:
        return call()
    except Exception as exc:  # every error is part of the result compared
        return (type(exc), str(exc))


def _write_all(path: Path, writes, interval: int, size_limit: int, explicit: bool) -> tuple[list, bytes]:
    """Write ``writes`` into a new file at ``path``; ``explicit`` passes each seq (the checking route)."""
    path.unlink(missing_ok=True)
    now = [0]
    outcomes = []
    with StreamWriter(
        path,
        beacon_interval=interval,
        file_name="p.ss",
        created_at_ms=7,
        clock_ms=lambda: now[0],
        size_limit=size_limit,
    ) as w:
        for key, payload, shard, ts in writes:
            now[0] = ts
            if explicit:
                outcome = _outcome(
                    lambda: w.write(key, payload, seq=w.next_seq(key, shard), shard_id=shard)  # noqa: B023
                )
            else:
                outcome = _outcome(lambda: w.write(key, payload, shard_id=shard))  # noqa: B023
            outcomes.append(outcome)
    return outcomes, path.read_bytes()


@HYPO
@given(writes=_writes, interval=st.sampled_from([1024, 4096]), size_limit=st.sampled_from([1 << 30, 6000]))
# 128 (header) + 33 + 863 = 1024: the second frame of "a" ends on the boundary; then one starts after it
@example(
    writes=[("a", b"x", 0, 5), ("a", b"x" * 862, 0, 5), ("a", b"", 0, 6), ("a", b"y", 0, 6)],
    interval=1024,
    size_limit=1 << 30,
)
# the size limit reached on a known key, then a smaller frame that still fits
@example(writes=[("a", b"x", 0, 5), ("a", b"x" * 5900, 0, 5), ("a", b"x" * 100, 0, 5)], interval=4096, size_limit=6000)
def test_short_and_checking_routes_agree(tmp_path_factory, writes, interval, size_limit):
    path = tmp_path_factory.getbasetemp() / f"parity{next(_counter)}.ss"
    short, short_bytes = _write_all(path, writes, interval, size_limit, explicit=False)
    checking, checking_bytes = _write_all(path, writes, interval, size_limit, explicit=True)
    assert short == checking
    assert short_bytes == checking_bytes
    landed = [x for x in short if type(x) is not tuple]  # a Written, not an error (type, message)
    assert [(m.offset, m.end) for m in iter_messages(path)] == [(x.offset, x.end) for x in landed]


def test_a_bytes_like_payload_is_stored_as_its_bytes(tmp_path: Path) -> None:
    """bytearray and memoryview payloads (a memoryview's bytes, not its items) on both routes."""
    path = tmp_path / "like.ss"
    items = memoryview(bytes(range(8))).cast("I")  # 2 items, 8 bytes
    with StreamWriter(path, clock_ms=lambda: 1) as w:
        w.write("k", b"first")
        # bytes-like payloads on purpose: write() is typed bytes but stores any buffer as its bytes
        short = [w.write("k", bytearray(b"ba")), w.write("k", items)]  # type: ignore[arg-type]
        checking = w.write("k", items, seq=w.next_seq("k"))  # type: ignore[arg-type]
    assert [m.payload for m in iter_messages(path)] == [b"first", b"ba", bytes(range(8)), bytes(range(8))]
    assert checking.end - checking.offset == short[1].end - short[1].offset


def test_streams_read_from_the_file_take_the_short_route(tmp_path: Path, monkeypatch) -> None:
    """Appending to an existing file: each stream is looked up once, then its key is known (shared
    mode, where another writer's frames are read first, and exclusive mode)."""
    path = tmp_path / "resume.ss"
    with StreamWriter(path, clock_ms=lambda: 1) as w:
        for key in ("a", "b"):
            w.write(key, b"first")
    looked_up = []
    real = PureRoute._stream_of

    def counting(self, key, *args):
        looked_up.append(key)
        return real(self, key, *args)

    monkeypatch.setattr(PureRoute, "_stream_of", counting)
    for exclusive in (True, False):
        looked_up.clear()
        with StreamWriter(path, clock_ms=lambda: 2, exclusive=exclusive) as w:
            landed = [w.write(key, b"again") for key in ("a", "b") * 20]
        assert sorted(looked_up) == ["a", "b"]
        assert [x.seq for x in landed[-2:]] == ([21, 21] if exclusive else [41, 41])
    assert [m.seq for m in iter_messages(path) if m.stream_key == "b"] == list(range(1, 42))
