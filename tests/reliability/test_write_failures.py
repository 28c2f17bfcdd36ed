"""A write that fails part-way (a full disk, an I/O error) must not corrupt what comes after it.

Before the fix, a failed ``os.write`` left half a frame in the file while the writer's offset moved
on as if the whole frame were there: every later message (whose write call returned) landed after
the partial frame, unreadable, and no writer could append to the file any more. Now the writer cuts
the file back to its last complete frame, closes, and says so; a new writer (a ``FileBroker``
reopens one by itself) continues cleanly. ``/dev/full`` gives a real ENOSPC.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, VirtualClock
from nbkit.errors import NbkitError
from nbkit.transport import file_writer
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.envelope import RETRY_COUNT_HEADER

from .fuzzlib import run_cli

pytestmark = pytest.mark.timeout(60)


class DiskFills:
    """Make ``os.write`` on one file descriptor write ``partial`` bytes, then fail with ENOSPC,
    ``failures`` times; every other descriptor is untouched."""

    def __init__(self, monkeypatch, fd_of, *, partial: int = 100, failures: int = 1) -> None:
        self.real = os.write
        self.fd_of = fd_of
        self.partial = partial
        self.failures = failures
        self.armed = False
        monkeypatch.setattr(file_writer.os, "write", self)

    def __call__(self, fd: int, data) -> int:
        if self.armed and self.failures and fd == self.fd_of():
            if self.partial:
                n = self.real(fd, bytes(data)[: self.partial])
                self.partial = 0
                return n
            self.failures -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.real(fd, data)


def _read(path: Path) -> list[tuple[str, int, bytes]]:
    with StreamReader(path) as r:
        got = [(m.stream_key, m.seq, m.payload) for m in r]
        assert r.end.reason in ("end", "eos"), r.end
    return got


@pytest.mark.parametrize("flush_every", [1, 8])
def test_a_failed_write_cuts_back_to_the_last_complete_frame(tmp_path, monkeypatch, flush_every) -> None:
    path = tmp_path / "full.ss"
    w = StreamWriter(path, beacon_interval=1024, flush_every=flush_every)
    disk = DiskFills(monkeypatch, lambda: w._state.fd, partial=700)
    returned = []
    for i in range(16):
        returned.append(w.write("a", b"%d" % i * 100).seq)
    w.flush()
    disk.armed = True
    with pytest.raises(NbkitError) as info:
        for i in range(16, 40):
            w.write("a", b"%d" % i * 100)
            returned.append(i + 1)
    size = path.stat().st_size
    message = str(info.value)
    assert message.startswith(f"{path}: writing at byte offset {size} failed (No space left on device)")
    assert "open a new writer to continue" in message
    assert w.closed
    lost = int(re.search(r"the last (\d+) message", message).group(1))
    got = [seq for _, seq, _ in _read(path)]  # reads cleanly: the partial frame is gone
    if flush_every == 1:  # every write that returned is there
        assert lost == 1 and got == returned
    else:  # the buffered writes that returned are lost with the failed batch, and said so
        assert 1 <= lost <= flush_every and got == returned[: len(returned) - (lost - 1)]
    with pytest.raises(NbkitError, match="closed"):
        w.write("a", b"after")
    w.close()  # closing a writer a failure closed is harmless
    with StreamWriter(path) as again:  # space is back: a new writer continues the stream
        again.write("a", b"resumed")
    assert _read(path)[-1] == ("a", got[-1] + 1, b"resumed")


def test_nbkit_write_on_a_full_disk_says_so_in_one_line(tmp_path, monkeypatch) -> None:
    path = tmp_path / "cli.ss"
    holder: dict[str, StreamWriter] = {}
    real_init = StreamWriter.__init__

    def capture(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        holder["w"] = self

    monkeypatch.setattr(StreamWriter, "__init__", capture)
    disk = DiskFills(monkeypatch, lambda: holder["w"]._state.fd if "w" in holder else -2, partial=50)
    disk.armed = True
    line = '{"header":{"stream_key":"k","shard_id":0,"sequence":%d,"timestamp":"2024-01-01T00:00:00.0"},"payload":"p"}'
    rc, out, err = run_cli(["write", str(path)], stdin="\n".join(line % i for i in range(1, 200)).encode())
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("nbkit: stdin, line 64: ") and "No space left on device" in err, err
    assert "the last 64 message(s) are not in the file" in err
    assert not path.exists()  # nothing half-written, and the new file that holds no message is removed


def test_a_service_reopens_its_writer_after_a_failed_copy(tmp_path, monkeypatch, caplog) -> None:
    path = tmp_path / "svc.ss"
    seed = FileBroker(path)
    for n in range(3):
        seed.publish("jobs", b"job %d" % n)
    seed.shutdown()
    broker = FileBroker(path)

    @broker.subscriber("jobs", start_at=FilePosition.beginning(), max_attempts=2)
    def work(d):
        if d.attempt == 1:
            return HandlerOutcome.retry()
        return None

    app = App(broker, clock=VirtualClock())
    disk = DiskFills(monkeypatch, lambda: broker._writer._state.fd if broker._writer else -2, partial=10, failures=1)
    disk.armed = True
    with caplog.at_level(logging.WARNING, logger="nbkit"):
        for _ in range(6):
            app.step()
    app.request_stop()
    app.shutdown()
    copies = [e for e in app.events if e.action == "copy"]
    assert len(copies) == 3
    lost = copies[0].error
    assert lost is not None and lost.startswith("copy lost: ") and "No space left on device" in lost, lost
    assert [e.copy_seq for e in copies[1:]] == [4, 5] and all(e.error is None for e in copies[1:])
    assert caplog.text.count("publishing the retry copy failed; message lost") == 1
    with StreamReader(path) as r:
        records = [(m.seq, *envelope.decode(m.payload)) for m in r if m.stream_key == "jobs"]
    assert r.end.reason == "end"
    assert [(seq, payload, headers.get(RETRY_COUNT_HEADER)) for seq, headers, payload in records] == [
        (1, b"job 0", None),
        (2, b"job 1", None),
        (3, b"job 2", None),
        (4, b"job 1", "1"),
        (5, b"job 2", "1"),
    ]


def test_dev_full_is_a_real_enospc(tmp_path, child_env) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    line = (
        b'{"header":{"stream_key":"k","shard_id":0,"sequence":1,"timestamp":"2024-01-01T00:00:00.0"},"payload":"p"}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "write", "/dev/full"],
        input=line,
        capture_output=True,
        env=child_env,
        timeout=30,
        cwd=tmp_path,
    )
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr == b"nbkit: /dev/full: cannot write the stream file (No space left on device)\n"
