"""SIGINT and SIGTERM while ``nbkit run`` is still starting (importing the CLI, pandas, the service):
the stage stops like a running one. One signal: it reads its input pipe to the end, delivers every line,
prints its summary and exits 128 + the signal; two: it stops at once and counts the lines it never read.
Every line is counted exactly once. The service module here blocks its own import until the test has
signalled, so the signal lands in the start-up for certain (it used to kill the stage with a traceback
and lose the lines in its pipe). In-process: tests/runtime/test_held_signals.py.
"""

from __future__ import annotations

import re
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from nbkit.wire.stdio_line import parse_line

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LINES = 200

SLOW_SERVICE = """
import sys, time
from pathlib import Path

print("importing", file=sys.stderr, flush=True)
deadline = time.monotonic() + 60
while not Path("go").exists():  # the test signals the stage now, then lets its start-up go on
    assert time.monotonic() < deadline, "the test never said go"
    time.sleep(0.01)  # poll interval of this wait for the test's "go" (a condition, with its deadline)

from nbkit import App, StdioBroker

broker = StdioBroker()

@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    broker.publish("jobs.done", d.payload)

app = App(broker)
"""


def _start(tmp_path: Path, env) -> subprocess.Popen:
    (tmp_path / "slow_service.py").write_text(textwrap.dedent(SLOW_SERVICE))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "slow_service:app"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(b"".join(b"[jobs] line %d\n" % i for i in range(LINES)))
    proc.stdin.flush()
    if not select.select([proc.stderr], [], [], 60)[0]:
        proc.kill()
        raise AssertionError("the service never started importing")
    first = proc.stderr.readline()
    assert first == b"importing\n", first + proc.stderr.read()
    return proc


def _summary(err: str) -> str:
    [line] = [ln for ln in err.splitlines() if ln.startswith("nbkit: run summary:")]
    return line


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_one_signal_while_starting_delivers_every_line_in_the_pipe(tmp_path, child_env, sig) -> None:
    proc = _start(tmp_path, child_env)
    try:
        proc.send_signal(sig)
        (tmp_path / "go").touch()
        # stdin closes (the stage before ends): a stage whose input is a pipe reads on to its end
        out, err = proc.communicate(b"", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.decode()
    assert "Traceback" not in text, text
    assert proc.returncode == 128 + sig, text
    done = [parse_line(line) for line in out.decode().splitlines()]
    assert [d.payload for d in done] == [f"line {i}" for i in range(LINES)]
    summary = _summary(text)
    assert f"stopped by {sig.name}" in summary and f"{LINES} deliveries" in summary, summary
    assert "unread" not in summary, summary


def test_two_signals_while_starting_stop_at_once_and_count_every_line_unread(tmp_path, child_env) -> None:
    proc = _start(tmp_path, child_env)
    try:
        proc.stdin.close()  # all 200 lines wait in the pipe; nothing more comes
        proc.stdin = None
        proc.send_signal(signal.SIGINT)
        # A signal does not queue: two sent before the first is handled arrive as one. The pause lets the
        # first be held; if load merges them anyway, the stage stops gracefully and the count below holds.
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        (tmp_path / "go").touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.decode()
    assert "Traceback" not in text, text
    summary = _summary(text)
    delivered = len(out.decode().splitlines())
    unread = re.search(r"(\d+) left unread", summary)
    assert delivered + (int(unread.group(1)) if unread else 0) == LINES, summary
    assert "at least" not in summary, summary  # the count is exact: the pipe's writer had closed it
    assert proc.returncode in (130, 3), text
