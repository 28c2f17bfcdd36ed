"""Delayed copies at shutdown (§2 durability, §8.2): a crash loses them, a graceful shutdown
publishes them, ``shutdown_timeout`` abandons (and logs) the rest; SIGTERM on a real process."""

from __future__ import annotations

import logging
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from checkout_env import checkout_env

from nbkit import App, FileBroker, HandlerOutcome
from nbkit.tabular.events import events_frame

from .helpers import RETRY, START, dispatch_records, drain, file_bytes, lines, records, seed

ABANDONED = "shutdown timeout reached; the delayed retry copy is abandoned and lost"


def _three_pending(rig):
    r = rig()
    delays = {b"a": 30, b"b": 10, b"c": 20}
    r.sub()(lambda d: HandlerOutcome.retry_after(delays[d.payload]))
    app = r.start()
    for p in delays:
        r.inject(p)
    drain(app)
    assert [p.due - START for p in app.pending] == [10, 20, 30]
    return r, app


def test_crash_loses_pending_copies(rig, caplog):
    r, app = _three_pending(rig)
    before = file_bytes(r.path) if r.transport == "file" else list(r.out)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        lost = app.crash()
    assert lost == 3
    assert app.pending == [] and app.stopped
    assert [e.abandoned for e in app.events] == [True, True, True]
    assert [e.written_at for e in app.events] == [None, None, None]
    if r.transport == "file":
        assert file_bytes(r.path) == before  # nothing written, no EOS
    else:
        assert r.out == before == []
    assert dispatch_records(caplog, ABANDONED) == []  # a dead process logs nothing
    app.shutdown()  # a no-op after a crash
    assert r.all_written() == []


def test_crash_writes_no_eos(ss, clock):
    broker = FileBroker(ss, end_with_eos=True)
    broker.subscriber("jobs")(lambda d: None)
    app = App(broker, clock=clock)
    app.start()
    before = file_bytes(ss)
    app.crash()
    assert file_bytes(ss) == before
    assert [r.key for r in records(ss)] == ["ruststream-internal"]


def test_graceful_shutdown_publishes_pending_copies(rig, clock, caplog):
    r, app = _three_pending(rig)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.shutdown()
    assert clock.now() == START + 30  # the virtual clock waited out the longest delay
    assert [p for _, p in r.written(r.retry_key)] == [b"b", b"c", b"a"]
    assert [h[RETRY] for h, _ in r.written(r.retry_key)] == ["1", "1", "1"]
    assert [(e.abandoned, e.written_at - START) for e in app.events] == [
        (False, 30),
        (False, 10),
        (False, 20),
    ]
    assert dispatch_records(caplog, ABANDONED) == []
    assert app.pending == []


@pytest.mark.parametrize(
    ("timeout", "published", "abandoned"),
    [(0, [], 3), (15, [b"b"], 2), (20, [b"b", b"c"], 1), (30, [b"b", b"c", b"a"], 0)],
)
def test_shutdown_timeout_abandons_and_logs_each_copy(rig, clock, caplog, timeout, published, abandoned):
    r = rig()
    delays = {b"a": 30, b"b": 10, b"c": 20}
    r.sub(max_attempts=9)(lambda d: HandlerOutcome.retry_after(delays[d.payload]))
    app = r.start(shutdown_timeout=timeout)
    for p in delays:
        r.inject(p)
    drain(app)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.shutdown()
    assert [p for _, p in r.written(r.retry_key)] == published
    logged = dispatch_records(caplog, ABANDONED)
    assert len(logged) == abandoned == sum(e.abandoned for e in app.events)
    # a loss: ERROR in nbkit (upstream: WARN), so --log-level ERROR shows each abandoned copy
    assert all(rec.levelno == logging.ERROR and rec.name == "nbkit.dispatch" for rec in logged)
    assert app.counts.abandoned == abandoned
    lost = sorted((e.seq, e.destination) for e in app.events if e.abandoned)
    assert (
        sorted((rec.nbkit_fields["subscription"], rec.nbkit_fields["destination"]) for rec in logged)
        == [("jobs", r.retry_key)] * abandoned
    )
    assert all(rec.nbkit_fields["attempt"] == 1 for rec in logged)
    assert len(lost) == abandoned
    assert app.pending == []
    frame = events_frame(app.events)
    assert int(frame["abandoned"].sum()) == abandoned


def test_shutdown_writes_eos_after_the_pending_copies(ss, clock):
    seed(ss, [("jobs", b"m")])
    broker = FileBroker(ss, end_with_eos=True)
    broker.subscriber("jobs", replay=True)(lambda d: HandlerOutcome.retry_after(7))
    app = App(broker, clock=clock)
    app.start()
    drain(app)
    app.shutdown()
    assert [(r.key, r.ts_ms) for r in records(ss)] == [
        ("jobs", 1704067200000),
        ("jobs", 1704067207000),
        ("SEA_STREAMER_INTERNAL", 1704067207000),
    ]


def test_request_stop_ends_run_gracefully(clock):
    from nbkit import StdioBroker

    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b", "[jobs] c"], stdout=out)
    app = App(broker, clock=clock)

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def handler(d):
        if d.payload == b"a":
            app.request_stop()
        return HandlerOutcome.retry_after(5)

    app.run()
    assert [(ln.key, ln.payload) for ln in lines(out)] == [("jobs.retry", b"a")]  # b and c never delivered
    assert app.stopped


# ---------------------------------------------------------------- real processes, SIGTERM

_ENV = checkout_env()

PIPE_SERVICE = """
import logging, sys
from nbkit import App, HandlerOutcome, StdioBroker

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
broker = StdioBroker()

@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    print("handled", d.payload.decode(), file=sys.stderr, flush=True)
    return HandlerOutcome.retry_after(0.5)

App(broker, shutdown_timeout={timeout}).run()
print("exited cleanly", file=sys.stderr, flush=True)
"""

FILE_SERVICE = """
import logging, sys
from nbkit import App, FileBroker, FilePosition, HandlerOutcome

logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
broker = FileBroker(sys.argv[1])

@broker.subscriber("jobs", start_at=FilePosition.beginning())
def work(d):
    print("handled", d.payload.decode(), d.attempt, file=sys.stderr, flush=True)
    return HandlerOutcome.retry_after(0.5) if d.attempt == 1 else None

App(broker, shutdown_timeout={timeout}).run()
print("exited cleanly", file=sys.stderr, flush=True)
"""


def _start(tmp_path, source, *args, stdin=subprocess.DEVNULL):
    script = tmp_path / "service.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_ENV,
        cwd=tmp_path,
    )


def _wait_for_stderr_line(proc, prefix: str, deadline: float = 5.0) -> list[str]:
    """Read stderr lines until one starts with ``prefix``; fail (and kill) after ``deadline`` seconds."""
    got = []
    end = time.monotonic() + deadline
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([proc.stderr], [], [], left)
        if not ready:
            break
        line = proc.stderr.readline().decode()
        if not line:
            break
        got.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return got
    proc.kill()
    raise AssertionError(f"no {prefix!r} on stderr; got {got}")


def _stop_cleanly(proc, sig, handled: str, *, feed: bytes | None = None) -> tuple[bytes, str]:
    """Write ``feed`` to the service's stdin (left open), wait for its ``handled`` line on stderr, send
    ``sig`` and check it exits cleanly (status 0, "exited cleanly"); returns its stdout and stderr text.
    The process is killed if it outlives this."""
    try:
        if feed is not None:
            proc.stdin.write(feed)
            proc.stdin.flush()
        _wait_for_stderr_line(proc, handled)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    err_text = err.decode()
    assert proc.returncode == 0, err_text
    assert "exited cleanly" in err_text
    return out, err_text


@pytest.mark.parametrize(
    ("timeout", "sig"),
    [("None", signal.SIGTERM), ("0", signal.SIGTERM), ("0", signal.SIGINT)],
    ids=["SIGTERM-wait", "SIGTERM-timeout0", "SIGINT-timeout0"],
)
def test_signal_on_a_pipe_service(tmp_path, timeout, sig):
    proc = _start(tmp_path, PIPE_SERVICE.format(timeout=timeout), stdin=subprocess.PIPE)
    # stdin stays open: only the signal can end the service
    out, err_text = _stop_cleanly(proc, sig, "handled hello", feed=b"[jobs | 3] hello\n")
    got = lines(out.decode().splitlines())
    if timeout == "None":
        # the pending copy is published before the process exits
        assert [(ln.key, ln.seq, ln.headers, ln.payload) for ln in got] == [
            ("jobs.retry", 0, {"stream-sequence": "3", RETRY: "1"}, b"hello")
        ]
        assert ABANDONED not in err_text
    else:
        assert got == []
        assert err_text.count(ABANDONED) == 1
        assert f"ERROR nbkit.dispatch {ABANDONED} subscription=jobs destination=jobs.retry attempt=1" in err_text


@pytest.mark.parametrize("timeout", ["None", "0"])
def test_sigterm_on_a_file_service(tmp_path, timeout):
    path = tmp_path / "jobs.ss"
    seed(path, [("jobs", b"parcel")])
    before = file_bytes(path)
    proc = _start(tmp_path, FILE_SERVICE.format(timeout=timeout), path)
    _, err_text = _stop_cleanly(proc, signal.SIGTERM, "handled parcel 1")
    if timeout == "None":
        assert [(r.seq, r.payload, r.headers.get(RETRY)) for r in records(path, "jobs")] == [
            (1, b"parcel", None),
            (2, b"parcel", "1"),
        ]
        assert ABANDONED not in err_text
    else:
        assert file_bytes(path) == before
        assert err_text.count(ABANDONED) == 1


SLOW_SERVICE = PIPE_SERVICE.replace("retry_after(0.5)", "retry_after(3)")


def test_a_second_sigterm_stops_waiting_for_copies(tmp_path):
    proc = _start(tmp_path, SLOW_SERVICE.format(timeout="None"), stdin=subprocess.PIPE)
    try:
        proc.stdin.write(b"[jobs] hello\n")
        proc.stdin.flush()
        _wait_for_stderr_line(proc, "handled hello")
        proc.send_signal(signal.SIGTERM)
        stopping = _wait_for_stderr_line(proc, "WARNING", deadline=60)  # the first one is handled: it waits
        assert "stopping" in stopping[-1], stopping
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    # not "shutdown timeout reached" (no timeout is set): the second signal abandoned it, and says so
    assert ABANDONED not in err.decode()
    assert err.decode().count("second signal; the delayed retry copy is abandoned and lost") == 1
