"""Shutdown of ``nbkit run MODULE:ATTR`` with delayed copies pending: SIGTERM, SIGINT, stdin's end and
a downstream that closes the pipe.

``tests/runtime/test_shutdown.py`` and ``test_pipeline.py`` signal one pending copy. Here several
copies are pending with delays on both sides of ``shutdown_timeout``: each must be published or
reported abandoned (one WARN line each), and three counts must agree: what reached stdout or the
file, what the log says, and the app's own events (printed by the service module at exit).
"""

from __future__ import annotations

import itertools
import json
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nbkit import FileBroker
from nbkit.transport.file_reader import StreamReader
from nbkit.wire import envelope
from nbkit.wire.stdio_line import parse_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

ABANDONED = "shutdown timeout reached; the delayed retry copy is abandoned and lost"
_modules = itertools.count()

REPORT = """
import atexit, json, sys

@atexit.register
def _report():
    copies = [e for e in app.events if e.action == "delayed-copy"]
    print("EVENTS " + json.dumps({
        "copies": len(copies),
        "published": sum(e.written_at is not None for e in copies),
        "abandoned": sum(bool(e.abandoned) for e in copies),
    }), file=sys.stderr, flush=True)
"""

PIPE_SERVICE = """
import sys
from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()

@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    print("handled", d.seq, file=sys.stderr, flush=True)
    if d.text.startswith("reply"):
        broker.publish("jobs.done", d.payload * 50)
        return None
    return HandlerOutcome.retry_after(float(d.text))

app = App(broker, shutdown_timeout={timeout})
"""

FILE_SERVICE = """
import sys
from nbkit import App, FileBroker, FilePosition, HandlerOutcome

broker = FileBroker("jobs.ss")

@broker.subscriber("jobs", start_at=FilePosition.beginning())
def work(d):
    print("handled", d.seq, d.attempt, file=sys.stderr, flush=True)
    return HandlerOutcome.retry_after(float(d.text)) if d.attempt == 1 else None

app = App(broker, shutdown_timeout={timeout})
"""


def _service(tmp_path: Path, source: str, timeout: str) -> str:
    name = f"svc{next(_modules)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source.format(timeout=timeout)) + REPORT)
    return f"{name}:app"


def _run(tmp_path: Path, target: str, env, *, log_level: str = "INFO") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "--log-level", log_level, target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
        bufsize=0,
    )  # unbuffered: select() then readline() never strands a line


def _await_stderr(proc: subprocess.Popen, prefix: bytes, count: int, deadline: float = 15) -> list[bytes]:
    """Read stderr lines until ``count`` of them start with ``prefix``."""
    seen, lines = 0, list[bytes]()
    stderr = proc.stderr
    assert stderr is not None
    end = time.monotonic() + deadline
    while seen < count:
        left = end - time.monotonic()
        if left <= 0 or not select.select([stderr], [], [], left)[0]:
            proc.kill()
            raise AssertionError(f"waited for {count} {prefix!r} lines; stderr so far: {lines}")
        line = stderr.readline()
        if not line:
            raise AssertionError(f"stderr closed early: {lines}")
        lines.append(line)
        seen += line.startswith(prefix)
    return lines


def _status(sig: signal.Signals, abandoned: int) -> int:
    """The exit status the CLI reference documents: 3 when a copy was lost, else 128 + the signal."""
    return 3 if abandoned else 128 + sig


def _events(err: str) -> dict:
    [line] = [ln for ln in err.splitlines() if ln.startswith("EVENTS ")]
    return json.loads(line[len("EVENTS ") :])


def _stop_and_account(
    proc: subprocess.Popen, sig: signal.Signals, copies: int, published: int, *, feed: bytes | None = None
) -> tuple[bytes, str, float]:
    """Write ``feed`` to the service's stdin (left open), wait until it has handled all ``copies``
    deliveries, send ``sig``, and check its account: the exit status, one abandoned line per copy not
    published and the EVENTS line. Returns its stdout, its whole stderr text and the seconds from the
    signal to its exit; the process is killed if it outlives this."""
    try:
        if feed is not None:
            proc.stdin.write(feed)
            proc.stdin.flush()
        before = _await_stderr(proc, b"handled", copies)
        signalled = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    err_text = b"".join(before).decode() + err.decode()
    abandoned = copies - published
    assert proc.returncode == _status(sig, abandoned), err_text
    assert err_text.count(ABANDONED) == abandoned
    assert _events(err_text) == {"copies": copies, "published": published, "abandoned": abandoned}
    return out, err_text, took


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    ("timeout", "delays", "published"),
    [("None", [0.2, 0.5, 0.9], 3), ("1.0", [0.2, 0.5, 4, 30], 2), ("0", [3, 4, 30], 0)],
    ids=["wait-all", "timeout-1s", "timeout-0"],
)
def test_signal_on_a_pipe_service_accounts_for_every_copy(tmp_path, child_env, sig, timeout, delays, published):
    proc = _run(tmp_path, _service(tmp_path, PIPE_SERVICE, timeout), child_env)
    # stdin stays open: only the signal ends the service
    feed = b"".join(b"[jobs] %s\n" % str(d).encode() for d in delays)
    out, err_text, took = _stop_and_account(proc, sig, len(delays), published, feed=feed)
    assert "Traceback" not in err_text
    copies = [parse_line(line) for line in out.decode().splitlines()]
    assert all(c.stream_key == "jobs.retry" for c in copies)
    assert len(copies) == published
    # retry copies carry the counter; the originals' sequences are 0, 1, 2...
    assert sorted(envelope.decode(c.payload.encode())[0]["stream-sequence"] for c in copies) == [
        str(i) for i in range(published)
    ]
    assert took < max(delays[:published] or [0]) + 3, f"shutdown took {took:.1f} s"


@pytest.mark.parametrize(
    ("sig", "timeout", "published"),
    [(signal.SIGTERM, "1.0", 2), (signal.SIGINT, "None", 4)],
    ids=["SIGTERM-timeout-1s", "SIGINT-wait-all"],
)
def test_signal_on_a_file_service_accounts_for_every_copy(tmp_path, child_env, sig, timeout, published):
    delays = [0.2, 0.5, 4, 8] if timeout != "None" else [0.2, 0.4, 0.6, 0.8]
    broker = FileBroker(tmp_path / "jobs.ss")
    for d in delays:
        broker.publish("jobs", str(d))
    broker.shutdown()
    proc = _run(tmp_path, _service(tmp_path, FILE_SERVICE, timeout), child_env)
    _stop_and_account(proc, sig, len(delays), published)
    with StreamReader(tmp_path / "jobs.ss") as r:
        records = [envelope.decode(m.payload) for m in r if m.stream_key == "jobs"]
    assert r.end.reason == "end"
    copies = [payload for headers, payload in records if headers.get("x-ruststream-retry-count") == "1"]
    assert sorted(copies) == sorted(str(d).encode() for d in delays[:published])


def test_a_stage_whose_stdin_ends_publishes_its_copies_and_exits_0(tmp_path, child_env):
    proc = _run(tmp_path, _service(tmp_path, PIPE_SERVICE, "None"), child_env, log_level="ERROR")
    out, err = proc.communicate(b"[jobs] 0.3\n[jobs] 0.1\n[jobs] 0.6\n", timeout=20)
    assert proc.returncode == 0, err
    lines = out.decode().splitlines()
    assert [parse_line(ln).stream_key for ln in lines] == ["jobs.retry"] * 3
    assert [envelope.decode(parse_line(ln).payload.encode())[1] for ln in lines] == [b"0.1", b"0.3", b"0.6"]
    assert _events(err.decode()) == {"copies": 3, "published": 3, "abandoned": 0}


@pytest.mark.parametrize("pending", [False, True], ids=["replies-only", "with-pending-copy"])
def test_a_stage_whose_downstream_closes_stops_with_one_summary_and_exits_141(tmp_path, child_env, pending):
    """``nbkit run svc:app | head -1``: the next stage goes away; this one stops at the first failed write, names
    its pending copy as abandoned and sums up what it lost in one line; exit 141."""
    proc = _run(tmp_path, _service(tmp_path, PIPE_SERVICE, "None"), child_env, log_level="ERROR")
    try:
        proc.stdin.write(b"[jobs] reply-1\n")
        proc.stdin.flush()
        assert select.select([proc.stdout], [], [], 15)[0], "no reply"
        assert b"| jobs.done | 0] reply-1" in proc.stdout.readline()
        proc.stdout.close()  # downstream goes away
        if pending:
            proc.stdin.write(b"[jobs] 0.5\n")
        for i in range(200):  # keep the stage writing into the closed pipe
            try:
                proc.stdin.write(b"[jobs] reply-%d\n" % (i + 2))
                proc.stdin.flush()
            except BrokenPipeError:
                break  # it already stopped reading
            if proc.poll() is not None:
                break
            time.sleep(0.005)  # pacing: a line now and then until the stage stops (bounded by the 200 lines)
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        assert proc.wait(timeout=15) == 141  # 128 + SIGPIPE, as a shell reports for cat
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [ln for ln in err.splitlines() if not ln.startswith(("EVENTS ", "handled"))]
    # at --log-level ERROR: the pending copy (if any) named as abandoned, then the one summary line
    *abandoned, summary = lines
    assert summary.startswith("nbkit: run summary: stopped by broken pipe; "), err
    assert "lost: " in summary and "lost to the broken pipe" in summary
    assert len(abandoned) == pending, err
    assert all(ln.startswith("ERROR nbkit.dispatch: stdout closed by the next stage; the delayed") for ln in abandoned)


def test_at_the_end_of_stdin_a_pending_copy_is_waited_for_even_past_shutdown_timeout(tmp_path, child_env):
    """The end of the input is not a shutdown: ``run()`` keeps going until no copy is pending, and
    ``shutdown_timeout`` only bounds the wait after SIGTERM/SIGINT (documented in docs/reliability.md)."""
    proc = _run(tmp_path, _service(tmp_path, PIPE_SERVICE, "0.1"), child_env, log_level="ERROR")
    started = time.monotonic()
    out, err = proc.communicate(b"[jobs] 1.2\n", timeout=20)
    took = time.monotonic() - started
    assert proc.returncode == 0, err
    assert [parse_line(ln).stream_key for ln in out.decode().splitlines()] == ["jobs.retry"]
    assert _events(err.decode()) == {"copies": 1, "published": 1, "abandoned": 0}
    assert took >= 1.2
