"""The write lock: an exclusive writer keeps every other writer (another process, ``nbkit write``, a
service) out, and they give up after their ``lock_timeout`` with an error that names the file and the
holder's pid; shared writers (the default) append side by side; readers never need the lock; a killed
writer's lock goes with it.

``tests/transport/test_file_writer.py`` and ``tests/transport/test_shared_appends.py`` cover writers in
the same process; tests/reliability/test_shared_service.py a service fed by four publishers. Here the
holder is a process that keeps writing.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from waiting import wait_until

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, VirtualClock
from nbkit.errors import WriterLockedError
from nbkit.tabular.frames import read_stream
from nbkit.transport.file_info import summarize
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter

pytestmark = pytest.mark.timeout(60)

LOCKED = "is writing this stream file exclusively"


class Holder:
    """A writer process appending a message every 2 ms until stopped; its stdout is drained."""

    def __init__(self, path: Path, script, env, exclusive: bool) -> None:
        self.path = path
        mode = ["exclusive"] if exclusive else []
        self.proc = subprocess.Popen(
            [*script("crash_writer.py"), str(path), "7", "1", "0.002", *mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        ready = self.proc.stdout.readline()
        assert ready.startswith(b"ready"), ready + self.proc.stderr.read()
        self.returned: list[bytes] = []
        out = self.proc.stdout
        assert out is not None
        self._drain = threading.Thread(target=lambda: self.returned.extend(out), daemon=True)
        self._drain.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=10)
        self._drain.join(timeout=10)


@pytest.fixture
def holder(tmp_path, script, child_env):
    made: list[Holder] = []

    def start(path: Path | None = None, *, exclusive: bool = True) -> Holder:
        h = Holder(path or tmp_path / "held.ss", script, child_env, exclusive)
        made.append(h)
        return h

    yield start
    for h in made:
        h.stop(signal.SIGKILL)


CONTENDER = """
import sys
from nbkit.errors import WriterLockedError
from nbkit.transport.file_writer import StreamWriter
try:
    StreamWriter(sys.argv[1], lock_timeout=0.2)
except WriterLockedError as exc:
    print(type(exc).__name__, exc)
else:
    print("acquired")
"""


def test_a_second_writer_process_is_refused_naming_file_and_holder(holder, child_env) -> None:
    h = holder()
    done = subprocess.run(
        [sys.executable, "-c", CONTENDER, str(h.path)], capture_output=True, text=True, env=child_env, timeout=30
    )
    assert done.stdout.startswith("WriterLockedError "), done.stdout + done.stderr
    assert f"{h.path}: process {h.pid} {LOCKED}" in done.stdout


def test_the_lock_follows_the_file_not_the_path(holder, tmp_path) -> None:
    """A symlink or a hard link to a held file is the same file: still refused."""
    h = holder()
    (tmp_path / "sym.ss").symlink_to(h.path)
    os.link(h.path, tmp_path / "hard.ss")
    for other in (tmp_path / "sym.ss", tmp_path / "hard.ss"):
        with pytest.raises(WriterLockedError, match=f"process {h.pid} "):
            StreamWriter(other, lock_timeout=0.05)


@pytest.mark.parametrize("eos", [False, True])
def test_nbkit_write_while_another_process_writes(holder, child_env, tmp_path, eos) -> None:
    h = holder()
    before = h.path.stat().st_size
    line = (
        b'{"header":{"stream_key":"x","shard_id":0,"sequence":1,"timestamp":"2024-01-01T00:00:00.0"},"payload":"p"}\n'
    )
    argv = [sys.executable, "-m", "nbkit", "write", str(h.path), "--lock-timeout", "0.2"] + (["--eos"] if eos else [])
    done = subprocess.run(argv, input=line, capture_output=True, env=child_env, timeout=30, cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith(f"nbkit: {h.path}: process {h.pid} {LOCKED} (") and err.count("\n") == 1, err
    assert err.endswith("Stop that writer, or publish through it.\n"), err
    assert h.path.stat().st_size >= before  # the holder kept writing; nothing of ours went in
    h.stop()
    with StreamReader(h.path) as r:
        assert all(m.stream_key != "x" for m in r)


def test_nbkit_write_appends_beside_a_shared_writer(holder, child_env, tmp_path) -> None:
    h = holder(exclusive=False)
    wait_until(lambda: h.returned, what="the holder's first write")
    line = b'{"header":{"stream_key":"x"},"payload":"p"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "write", str(h.path)],
        input=line * 3,
        capture_output=True,
        env=child_env,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr

    def holder_went_on() -> bool:
        with StreamReader(h.path) as r:
            keys = [m.stream_key for m in r]
        return keys.count("x") == 3 and keys[-1] != "x"

    wait_until(holder_went_on, what="a write of the holder after ours")
    h.stop()
    with StreamReader(h.path) as r:
        got = list(r)
        assert r.end.reason == "end"
    assert [m.seq for m in got if m.stream_key == "x"] == [1, 2, 3]
    for key in {m.stream_key for m in got}:  # the holder's sequences went on by one through our appends
        seqs = [m.seq for m in got if m.stream_key == key]
        assert seqs == list(range(1, len(seqs) + 1))


def test_readers_work_while_a_writer_holds_the_lock(holder, child_env, tmp_path) -> None:
    h = holder()
    wait_until(lambda: h.returned, what="the holder's first write")
    with StreamReader(h.path) as r:
        replayed = list(r)
    assert replayed and r.end.reason in ("end", "truncated")
    with StreamReader(h.path, follow=True, idle_timeout=1, poll_max=0.005) as r:
        followed = [m for _, m in zip(range(len(replayed) + 20), r, strict=False)]
    assert len(followed) == len(replayed) + 20  # kept up with the live writer
    assert len(read_stream(h.path)) >= len(replayed)
    assert summarize(h.path).message_count >= len(replayed)
    for argv in (["cat", "--format", "ndjson", str(h.path)], ["info", str(h.path)]):
        done = subprocess.run([sys.executable, "-m", "nbkit", *argv], capture_output=True, env=child_env, timeout=30)
        assert done.returncode == 0, done.stderr
    # a replay service only reads: it runs while the lock is held elsewhere
    broker = FileBroker(h.path)
    seen = []
    broker.subscriber("orders", replay=True)(lambda d: seen.append(d.seq))
    App(broker, clock=VirtualClock()).run()
    assert seen[:3] == [1, 2, 3]


def test_a_service_cannot_publish_copies_into_a_file_another_process_writes(holder, caplog) -> None:
    """The copy needs the write lock: it is lost, and said so (event error + WARN), not raised."""
    h = holder()
    broker = FileBroker(h.path, lock_timeout=0.1)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3)
    def work(d):
        app.request_stop()
        return HandlerOutcome.retry()

    app = App(broker, clock=VirtualClock())
    with caplog.at_level(logging.WARNING, logger="nbkit"):
        app.run()
    [event] = app.events
    assert event.action == "copy" and event.error.startswith(f"copy lost: {h.path}: process {h.pid} ")
    assert "publishing the retry copy failed; message lost" in caplog.text
    with pytest.raises(WriterLockedError):
        FileBroker(h.path, lock_timeout=0).publish("orders", b"direct")


def test_a_killed_writer_leaves_no_stale_lock(holder) -> None:
    h = holder()
    wait_until(lambda: len(h.returned) >= 5, what="5 writes of the holder")
    h.stop(signal.SIGKILL)
    with StreamWriter(h.path) as w:  # the kernel released the flock with the process
        for line in h.returned:  # and every write the holder reported is there
            key, seq = line.decode().split()
            last = w.last_seq(key)
            assert last is not None and last >= int(seq), (key, seq, last)


QUIET_HOLDER = """
import sys
from nbkit.transport.file_writer import StreamWriter
w = StreamWriter(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    w.write("orders", line.strip().encode())
w.close()
"""


def test_a_live_service_starts_on_a_fresh_file_another_process_holds(tmp_path, child_env) -> None:
    """A fresh file (header only) gets a priming message when a service connects; when another process
    holds the write lock the priming is skipped instead of failing the start (fixed: it raised
    WriterLockedError, so a follower could not start before its writer wrote anything)."""
    path = tmp_path / "fresh.ss"
    proc = subprocess.Popen(
        [sys.executable, "-c", QUIET_HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env
    )
    try:
        assert proc.stdout.readline() == b"ready\n"
        assert path.stat().st_size == 128
        broker = FileBroker(path)
        seen = []

        @broker.subscriber("orders")
        def work(d):
            seen.append(d.payload)
            app.request_stop()

        app = App(broker)
        app.start()  # connect: no priming possible, no error
        proc.stdin.write(b"first\n")
        proc.stdin.flush()
        app.run()
        assert seen == [b"first"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


@pytest.mark.timeout(180)
def test_two_large_payload_writers_append_for_30_s_without_a_lock_timeout(tmp_path, script, child_env) -> None:
    """Fair appends: two shared writers that ask for the lock again the moment they let go, each with
    300 KB payloads, for 30 s: neither times out, both write in most parts (nobody starves), and every
    part holds exactly the messages the two wrote there (parts rotate every 2 s; the test deletes the
    ones both have left, so the disk holds a few). Before the lock queued its waiters, one writer could
    take it back again and again while the other polled, and the other failed within seconds.

    The lock timeout is 10 s: one append of the other writer is all a waiter waits for, but on a machine
    busy with the rest of the suite that append once held the lock past a 2 s timeout (CI, a fresh
    clone). A starving writer still shows in the parts it wrote in."""
    seconds, rotate = 30.0, 2.0
    start = time.time() + 1.0  # both begin together, after their imports
    argv = [str(tmp_path), str(seconds), "300000", "10", repr(start), str(rotate)]
    writers = [
        subprocess.Popen(
            [*script("hammer_writer.py"), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env
        )
        for _ in range(2)
    ]
    checked: dict[int, int] = {}  # part -> messages in it, read while the writers went on
    while any(w.poll() is None for w in writers):
        current = int((time.time() - start) / rotate)
        for part in sorted(tmp_path.glob("part-*.ss")):
            n = int(part.stem.split("-")[1])
            if n < current - 1:  # both writers moved on a whole part ago: read it, then free its space
                checked[n] = len(read_stream(part, payload="bytes"))
                part.unlink()
        time.sleep(0.2)  # pacing the clean-up loop; the wait itself is on the writers' exit
    results = []
    for w in writers:
        out, err = w.communicate(timeout=60)
        assert w.returncode == 0, err.decode()
        results.append(json.loads(out))
    for part in tmp_path.glob("part-*.ss"):
        checked[int(part.stem.split("-")[1])] = len(read_stream(part, payload="bytes"))
    assert [r["error"] for r in results] == [None, None], results
    written: dict[int, int] = {}
    for r in results:
        for part_text, count in r["counts"].items():
            written[int(part_text)] = written.get(int(part_text), 0) + count
        assert len(r["counts"]) >= 10, r  # each writer wrote in most of the 15 parts: nobody starved
    assert checked == written
