"""The compiled short route of an exclusive StreamWriter (nbkit/transport/_writer.pyx) against the pure
route, its reference twin: the same random sequences of writes (keys, payloads from empty to past a
beacon interval, shard ids, sequence numbers, timestamps and clock readings, valid and not, beacon
intervals, fsync, flush_every and size limits changed on the way) must give byte-identical files, equal
``Written`` results and the same errors, message for message; and a failing ``write(2)`` (a full disk,
a short write, a signal) must end as the pure route's ``os.write`` ends.

The compiled module is loaded even where ``NBKIT_PURE_PYTHON`` forces the pure twin (the twin run of
the CI), as tests/wire/test_twins.py does; the tests skip where it was not built.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import importlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from waiting import wait_until

from nbkit.errors import FileIOError
from nbkit.transport import file_writer, writer_state
from nbkit.transport.file_reader import iter_messages
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire.limits import MAX_TIMESTAMP_MS


def _compiled() -> ModuleType | None:
    try:
        return importlib.import_module("nbkit.transport._writer")
    except ImportError:
        return None


COMPILED = _compiled()
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled short route was not built")
HYPO = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


@contextlib.contextmanager
def route(compiled: bool) -> Iterator[None]:
    """New exclusive writers take the compiled short route (``compiled``) or the pure one."""
    saved = file_writer._COMPILED
    file_writer._COMPILED = COMPILED if compiled else None
    try:
        yield
    finally:
        file_writer._COMPILED = saved


def _outcome(call) -> object:
    """What a call gave: its result, or the error's type, message and errno."""
    try:
        return call()
    except Exception as exc:  # every error is part of the result compared
        return (type(exc), str(exc), getattr(exc, "errno", None))


_keys = st.sampled_from(["a"] * 4 + ["orders", "Z.9_-", "q" * 100, "bad key", "", b"a", 7])
_payloads = st.one_of(
    st.just(b""),
    st.binary(max_size=40),
    st.integers(0, 1100).map(lambda n: b"p" * n),  # around a 1024-byte interval: frames ending on a boundary
    st.binary(min_size=1500, max_size=3000),  # frames spanning more than one beacon interval
    st.just(b"L" * 70_000),  # larger than the compiled route's scratch buffer
    st.binary(max_size=20).map(bytearray),
    st.just("text"),
)
_shards = st.sampled_from([0] * 8 + [1, 2**64 - 1, 2**64, -1, False, 0.0])
_seqs = st.sampled_from([None] * 8 + [5, 0, 2**64 - 1, 2**64, -1])
_stamps = st.sampled_from([None] * 8 + [3, 0, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1, -1, True])
# "tick": the clock moves on by 1 ms (the beacons' markers carry each stream's latest timestamp)
_readings = st.sampled_from(
    ["tick"] * 6 + [1_700_000_000_000, 0, MAX_TIMESTAMP_MS, MAX_TIMESTAMP_MS + 1, -1, 1.5, None]
)
_write = st.tuples(st.just("write"), _keys, _payloads, _shards, _seqs, _stamps, _readings)
_setting = st.one_of(
    st.tuples(st.just("flush_every"), st.sampled_from([1, 1, 3])),
    st.tuples(st.just("size_limit"), st.sampled_from([1 << 30, 9000])),
    st.tuples(st.just("flush"), st.none()),
)
_steps = st.lists(st.one_of(_write, _write, _write, _setting), max_size=50)


def _run(path: Path, steps, interval: int, flush_every: int, fsync: bool, compiled: bool) -> tuple[list, bytes]:
    """Take ``steps`` with a new exclusive writer at ``path``: every outcome, and the file's bytes."""
    path.unlink(missing_ok=True)
    now: list[object] = [0]
    ticks = itertools.count(1_700_000_000_000)
    outcomes: list[object] = []
    with route(compiled):
        w = StreamWriter(
            path,
            beacon_interval=interval,
            file_name="t.ss",
            created_at_ms=7,
            clock_ms=lambda: now[0],  # type: ignore[arg-type,return-value]  # readings 1.5, None: wrong clocks on purpose
            flush_every=flush_every,
            fsync=fsync,
            exclusive=True,
        )
    assert (type(w._state) is COMPILED.WriterState) is compiled  # type: ignore[union-attr]
    with w:
        for step in steps:
            if step[0] == "write":
                _, key, payload, shard, seq, stamp, reading = step
                now[0] = next(ticks) if reading == "tick" else reading
                outcomes.append(
                    _outcome(
                        lambda: w.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=stamp)  # noqa: B023
                    )
                )
            elif step[0] == "flush":
                w.flush()
            else:
                setattr(w, step[0], step[1])
            # what the next beacons will say: every stream's state (without folding its pending CRCs)
            states = sorted((k, (st.seq, st.ts, st.running, tuple(st.crcs))) for k, st in w._book.streams.items())
            outcomes.append((w.offset, w.next_seq("a"), w.closed, states))
    return outcomes, path.read_bytes()


@HYPO
@given(
    steps=_steps,
    interval=st.sampled_from([1024, 4096]),
    flush_every=st.sampled_from([1, 1, 2]),
    fsync=st.sampled_from([False] * 4 + [True]),
)
# 128 (header) + 33 + 863 = 1024: the second frame of "a" ends on the boundary; then one starts after it
@example(
    steps=[("write", "a", b"x", 0, None, None, 5), ("write", "a", b"x" * 862, 0, None, None, 5)]
    + [("write", "a", b"", 0, None, None, 6), ("write", "a", b"y", 0, None, None, 6)],
    interval=1024,
    flush_every=1,
    fsync=False,
)
# the largest sequence number on the short route, then the one past it
@example(
    steps=[("write", "a", b"x", 0, 2**64 - 2, None, 5)] + [("write", "a", b"x", 0, None, None, 5)] * 2,
    interval=4096,
    flush_every=1,
    fsync=False,
)
def test_compiled_and_pure_routes_agree(tmp_path_factory, steps, interval, flush_every, fsync) -> None:
    path = tmp_path_factory.getbasetemp() / f"twins{next(_counter)}.ss"
    compiled, compiled_bytes = _run(path, steps, interval, flush_every, fsync, compiled=True)
    pure, pure_bytes = _run(path, steps, interval, flush_every, fsync, compiled=False)
    assert compiled == pure
    assert compiled_bytes == pure_bytes
    landed = [x for x in compiled if isinstance(x, file_writer.Written)]
    assert [(m.offset, m.end) for m in iter_messages(path)] == [(x.offset, x.end) for x in landed]


def test_many_streams_and_folds_agree(tmp_path: Path) -> None:
    """Past two checksum folds, over 50 streams with one marker per beacon: the same bytes."""
    files = []
    for compiled in (True, False):
        path = tmp_path / f"fold{compiled}.ss"
        clock = itertools.count(1_700_000_000_000).__next__
        with (
            route(compiled),
            StreamWriter(
                path, beacon_interval=1024, file_name="f.ss", created_at_ms=1, clock_ms=clock, exclusive=True
            ) as w,
        ):
            n = 0
            while w.offset < 2 * writer_state.FOLD_BYTES + 5000:
                w.write(f"s{n % 50}" if n % 7 else "a", b"%d" % n * (1 + n % 5))
                n += 1
        files.append(path.read_bytes())
    assert files[0] == files[1]


def test_the_compiled_state_folds_as_the_pure_one() -> None:
    pure, compiled = writer_state.StreamState(0, 0, 0xFFFF), COMPILED.StreamState(0, 0, 0xFFFF)  # type: ignore[union-attr]
    for n in range(writer_state.FOLD_AT + 10):
        for state in (pure, compiled):
            state.note(n, 2 * n, (n * 7919) & 0xFFFF)
    assert (compiled.seq, compiled.ts, compiled.crcs, compiled.checksum()) == (
        pure.seq,
        pure.ts,
        pure.crcs,
        pure.checksum(),
    )


def test_the_default_clock_reads_the_time(tmp_path: Path) -> None:
    with route(True), StreamWriter(tmp_path / "clock.ss", exclusive=True) as w:
        w.write("a", b"first")
        before = time.time_ns() // 1_000_000
        x = w.write("a", b"second")
        after = time.time_ns() // 1_000_000
    assert before <= x.timestamp_ms <= after
    assert type(x) is file_writer.Written and x == file_writer.Written("a", 0, 2, x.timestamp_ms, x.offset, x.end)


def _fail_with(fd: int, writer: StreamWriter) -> None:
    """From now on the writer's descriptor writes to ``fd`` (the file itself is left as it is)."""
    os.dup2(fd, writer._state.fd)


def _full_disk(tmp_path: Path, compiled: bool) -> tuple[object, bytes, bool]:
    path = tmp_path / "full.ss"  # one path for both routes (the error names it)
    path.unlink(missing_ok=True)
    with route(compiled):
        w = StreamWriter(path, file_name="f.ss", created_at_ms=1, clock_ms=lambda: 5, exclusive=True)
    w.write("a", b"one")
    w.write("a", b"two")
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        _fail_with(full, w)
        outcome = _outcome(lambda: w.write("a", b"three"))
    finally:
        os.close(full)
    return outcome, path.read_bytes(), w.closed


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_fails_as_on_the_pure_route(tmp_path: Path) -> None:
    compiled, pure = _full_disk(tmp_path, True), _full_disk(tmp_path, False)
    assert compiled == pure
    outcome, data, closed = compiled
    assert outcome[0] is FileIOError and outcome[2] == errno.ENOSPC and closed  # type: ignore[index]
    assert [m.payload for m in iter_messages(tmp_path / "full.ss")] == [b"one", b"two"]


def _short_then_again(tmp_path: Path, compiled: bool) -> tuple[object, bytes]:
    """A non-blocking pipe with room for part of the frame: a short write, then EAGAIN."""
    path = tmp_path / "pipe.ss"  # one path for both routes (the error names it)
    path.unlink(missing_ok=True)
    with route(compiled):
        w = StreamWriter(path, file_name="f.ss", created_at_ms=1, clock_ms=lambda: 5, exclusive=True)
    w.write("a", b"one")
    r, wr = os.pipe()
    try:
        os.set_blocking(wr, False)
        filled = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                filled += os.write(wr, b"z" * 100)
        drained = len(os.read(r, 4096))  # room for one page (a pipe frees its buffer a page at a time)
        _fail_with(wr, w)
        outcome = _outcome(lambda: w.write("a", b"p" * 5000))
        pending = filled - drained
        got = b""
        with contextlib.suppress(BlockingIOError):
            os.set_blocking(r, False)
            while True:
                chunk = os.read(r, 1 << 16)
                if not chunk:
                    break
                got += chunk
    finally:
        os.close(r)
        os.close(wr)
    return outcome, got[pending:]


def test_a_short_write_then_an_error_fails_as_on_the_pure_route(tmp_path: Path) -> None:
    compiled, pure = _short_then_again(tmp_path, True), _short_then_again(tmp_path, False)
    assert compiled == pure
    outcome, written = compiled
    assert outcome[0] is FileIOError and outcome[2] == errno.EAGAIN  # type: ignore[index]
    assert 0 < len(written) < 5000  # part of the frame went out before the error
    assert [m.payload for m in iter_messages(tmp_path / "pipe.ss")] == [b"one"]


class _Stop(Exception):
    """Raised by the test's signal handler."""


def _interrupted(tmp_path: Path, compiled: bool, raising: bool) -> tuple[object, bytes]:
    """A blocking pipe, full: the write blocks; SIGALRM interrupts it (EINTR or a short write, the
    handler raising ``_Stop`` when ``raising``): the first alarm once the write is blocked with nothing
    written, the others while a thread drains the pipe slowly."""
    path = tmp_path / f"signal{compiled}{raising}.ss"
    with route(compiled):
        w = StreamWriter(path, file_name="f.ss", created_at_ms=1, clock_ms=lambda: 5, exclusive=True)
    w.write("a", b"one")
    r, wr = os.pipe()
    fcntl.fcntl(wr, fcntl.F_SETPIPE_SZ, 4096)  # a one-page pipe
    got = bytearray()
    alarms = [0]

    def handler(signum, frame) -> None:
        alarms[0] += 1
        if raising and alarms[0] == 1:
            raise _Stop("stop")

    writer = threading.get_native_id()

    def drain() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])
        _wait_blocked_in_write(writer)
        signal.setitimer(signal.ITIMER_REAL, 0.001, 0.005)  # the alarms go to the writing thread
        wait_until(lambda: alarms[0] >= 1, what="the first alarm")  # it lands while nothing is written yet
        while chunk := os.read(r, 512):
            got.extend(chunk)
            time.sleep(0.001)  # the thing tested: a slow reader, so that alarms land during the write

    old = signal.signal(signal.SIGALRM, handler)
    drainer = threading.Thread(target=drain)
    outcome: object = None
    try:
        os.write(wr, b"z" * 4096)  # full
        _fail_with(wr, w)
        drainer.start()
        try:
            outcome = w.write("a", b"p" * 20_000)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except _Stop:  # from the write (EINTR), or just after it (a short write), on either route
            outcome = _Stop
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        w.close()
        os.close(wr)
        drainer.join()
        os.close(r)
    return outcome, bytes(got[4096:])


def _wait_blocked_in_write(tid: int) -> None:
    """Wait until thread ``tid`` of this process sleeps in ``write(2)`` on a full pipe (its wait channel)."""
    task = Path(f"/proc/self/task/{tid}")

    def blocked() -> bool:
        wchan = (task / "wchan").read_text()
        if wchan in ("", "0"):  # a kernel that hides wait channels: the thread sleeps, at least
            return (task / "stat").read_text().rsplit(")", 1)[1].split()[0] == "S"
        return "pipe_write" in wchan

    wait_until(blocked, what=f"thread {tid} to block writing to the full pipe")


@pytest.mark.parametrize("raising", [False, True])
def test_a_signal_during_the_write_leaves_the_frame_whole(tmp_path: Path, raising: bool) -> None:
    """EINTR and short writes are continued; a handler's exception propagates once the frame is out."""
    compiled, pure = _interrupted(tmp_path, True, raising), _interrupted(tmp_path, False, raising)
    assert compiled[1] == pure[1] and len(compiled[1]) == 32 + 1 + 20_000  # the whole frame, on both routes
    assert compiled[0] == pure[0]
    if raising:
        assert compiled[0] is _Stop
    else:
        x = compiled[0]
        assert isinstance(x, file_writer.Written) and (x.seq, x.timestamp_ms, x.end - x.offset) == (2, 5, 20_033)


@pytest.mark.timeout(60)
def test_a_blocked_write_lets_other_threads_run(tmp_path: Path) -> None:
    """With another thread alive the short route releases the GIL around ``write(2)``, as ``os.write``
    does: here that thread must empty a full pipe for the write to finish at all."""
    with route(True):
        w = StreamWriter(tmp_path / "gil.ss", clock_ms=lambda: 5, exclusive=True)
    w.write("a", b"one")
    r, wr = os.pipe()
    fcntl.fcntl(wr, fcntl.F_SETPIPE_SZ, 4096)
    got = bytearray()
    writer = threading.get_native_id()

    def drain() -> None:
        _wait_blocked_in_write(writer)  # so the write below can only finish if this thread runs meanwhile
        while chunk := os.read(r, 4096):
            got.extend(chunk)

    drainer = threading.Thread(target=drain)
    try:
        os.write(wr, b"z" * 4096)  # full
        _fail_with(wr, w)
        drainer.start()
        x = w.write("a", b"p" * 20_000)
    finally:
        w.close()
        os.close(wr)
        drainer.join()
        os.close(r)
    assert len(got) == 4096 + x.end - x.offset == 4096 + 32 + 1 + 20_000
