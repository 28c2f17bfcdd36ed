"""How a pipeline of ``nbkit run`` stages stops: real processes in a real process group, real signals.

``producer | s1 | s2 | consumer`` gets SIGINT as a terminal's Ctrl-C sends it (``os.killpg``): a stage whose
stdin is a pipe reads on until the stage before closes it, so the delayed copies pending in s1 still reach
the consumer; a second SIGINT abandons them, each named. ``| head -n 1`` stops a stage at its first failed
write. SIGTERM on a stage reading a file delivers what it has read and counts the rest. At ``--log-level
ERROR`` every loss is on stderr, and every exit status is the one ``nbkit run --help`` documents.
"""

from __future__ import annotations

import os
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

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

# the producer writes N lines, then stays (a producer that never ends); SIGINT ends it, quietly
PRODUCER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
for i in range(int(sys.argv[1])):
    print(f"[orders | {i}] order-{i}", flush=True)
time.sleep(60)  # a producer that never ends (the test's SIGINT ends it)
"""

# the consumer survives the signal (as an nbkit stage does) and keeps what reaches it; it says "ready" on
# stderr once it ignores SIGINT, so a signal sent while it still starts up cannot kill it
CONSUMER = """
import signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", file=sys.stderr, flush=True)
sys.stdout.buffer.write(sys.stdin.buffer.read())
"""

# s1: every order waits 1.5 s in memory (a delayed copy), and the handler prints (to stderr, in a pipe stage);
# the first one also sends s2 a "warm" line at once, so the test knows s2 runs before it signals
DELAY = """
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders", out_retry="orders.retry")
def work(d):
    print("handled", d.seq)
    if d.seq == 0:
        broker.publish("orders.retry", "warm")
    return HandlerOutcome.retry_after(1.5)
app = App(broker)
"""

# s2: forwards each copy under "done"
FORWARD = """
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders.retry", out_retry="orders.retry2")
def work(d):
    print("forwarded", d.payload, flush=True)
    broker.publish("done", d.payload)
app = App(broker)
"""

ACK = """
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders", out_retry="orders.retry")
def work(d):
    return None
app = App(broker)
"""

COPY = """
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders", out_retry="orders.retry")
def work(d):
    return HandlerOutcome.retry_after(0)
app = App(broker)
"""

PUBLISH = """
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders", out_retry="orders.retry")
def work(d):
    broker.publish("orders.done", d.payload)
app = App(broker)
"""

SLOW = """
import time
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("orders", out_retry="orders.retry")
def work(d):
    if d.seq == 0:
        print("started", flush=True)
    time.sleep(0.002)  # a slow handler: the work a delivery takes
app = App(broker)
"""

ABANDON_PREFIX = "ERROR nbkit.dispatch: second signal; the delayed retry copy is abandoned and lost"


def _module(tmp_path: Path, name: str, source: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    return f"{name}:app"


def _stage(tmp_path, env, target, stdin, *, group: int, log_level: str = "ERROR", stdout=subprocess.PIPE):
    return subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "--log-level", log_level, target],
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
        process_group=group,
        bufsize=0,  # unbuffered: select() then readline() never strands a line in a buffer
    )


def _await_line(stream, pattern: bytes, count: int, seen: list[bytes], deadline: float = 30) -> None:
    """Read lines of ``stream`` into ``seen`` until ``count`` of them contain ``pattern``."""
    end = time.monotonic() + deadline
    while sum(pattern in line for line in seen) < count:
        left = end - time.monotonic()
        assert left > 0 and select.select([stream], [], [], left)[0], f"waited for {pattern!r}: {seen}"
        line = stream.readline()
        assert line, f"closed early: {seen}"
        seen.append(line)


def _summary(err: str) -> str:
    [line] = [ln for ln in err.splitlines() if ln.startswith("nbkit: run summary: ")]
    return line


def _count(summary: str, what: str) -> int:
    found = re.search(rf"(\d+) {what}", summary)
    return int(found.group(1)) if found else 0


class Pipeline:
    """``producer N | s1 | s2 | consumer`` in one new process group (as a shell's foreground job)."""

    def __init__(self, tmp_path: Path, env: dict[str, str], messages: int, *, s1_log_level: str = "ERROR") -> None:
        (tmp_path / "producer.py").write_text(PRODUCER)
        (tmp_path / "consumer.py").write_text(CONSUMER)
        self.producer = subprocess.Popen(
            [sys.executable, "producer.py", str(messages)], stdout=subprocess.PIPE, cwd=tmp_path, process_group=0
        )
        self.group = self.producer.pid
        delay = _module(tmp_path, "delay", DELAY)
        self.s1 = _stage(tmp_path, env, delay, self.producer.stdout, group=self.group, log_level=s1_log_level)
        self.s2 = _stage(tmp_path, env, _module(tmp_path, "forward", FORWARD), self.s1.stdout, group=self.group)
        self.consumer = subprocess.Popen(
            [sys.executable, "consumer.py"],
            stdin=self.s2.stdout,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            process_group=self.group,
            bufsize=0,
        )
        for stream in (self.producer.stdout, self.s1.stdout, self.s2.stdout):
            stream.close()  # each pipe is now held by its two stages only
        self.procs = [self.producer, self.s1, self.s2, self.consumer]

    def ready(self, messages: int) -> tuple[list[bytes], list[bytes]]:
        """Wait until the consumer ignores SIGINT, s1 handled every message and s2 forwarded the warm-up line:
        both stages run their app now."""
        _await_line(self.consumer.stderr, b"ready", 1, [])
        seen1: list[bytes] = []
        seen2: list[bytes] = []
        _await_line(self.s1.stderr, b"handled", messages, seen1)  # print() in the handler: on stderr
        _await_line(self.s2.stderr, b"forwarded b'warm'", 1, seen2)
        return seen1, seen2

    def finish(self) -> tuple[bytes, str, str]:
        out = self.consumer.communicate(timeout=40)[0]
        err1 = self.s1.stderr.read().decode()
        err2 = self.s2.stderr.read().decode()
        for p in self.procs:
            p.wait(timeout=20)
        return out, err1, err2

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()


def test_ctrl_c_on_a_pipeline_delivers_every_copy_pending_upstream(tmp_path, child_env):
    """One SIGINT to the whole group: the producer dies, s1 waits out its 1.5 s copies and writes them, s2
    (its stdin a pipe) reads on until s1 closes it and forwards every one; both exit 130, nothing lost."""
    pipeline = Pipeline(tmp_path, child_env, 5)
    try:
        seen1, seen2 = pipeline.ready(5)
        os.killpg(pipeline.group, signal.SIGINT)
        out, err1, err2 = pipeline.finish()
    finally:
        pipeline.kill()
    err1, err2 = b"".join(seen1).decode() + err1, b"".join(seen2).decode() + err2
    done = [parse_line(line) for line in out.decode().splitlines()]
    assert sorted(d.payload for d in done) == sorted(["warm", *(f"order-{i}" for i in range(5))]), (err1, err2)
    assert all(d.stream_key == "done" for d in done)
    assert (pipeline.s1.returncode, pipeline.s2.returncode) == (130, 130), (err1, err2)
    assert pipeline.producer.returncode == -signal.SIGINT
    for err in (err1, err2):
        assert "Traceback" not in err and "lost" not in _summary(err), err
    assert _summary(err1).startswith("nbkit: run summary: stopped by SIGINT; 5 deliveries (retry_after 5)")
    assert _summary(err2).startswith("nbkit: run summary: stopped by SIGINT; 6 deliveries (ack 6)")
    assert "handled 4" in err1 and "ERROR" not in err1 + err2


def test_a_second_ctrl_c_abandons_and_names_each_copy(tmp_path, child_env):
    """A second SIGINT while s1 waits: s1 abandons its five copies, one ERROR line each naming the delivery,
    and exits 3 (copies lost); s2 and the consumer see the pipe close and end with what reached them."""
    pipeline = Pipeline(tmp_path, child_env, 5, s1_log_level="WARNING")
    try:
        seen1, _ = pipeline.ready(5)
        os.killpg(pipeline.group, signal.SIGINT)
        _await_line(pipeline.s1.stderr, b"stopping: stdin is a pipe", 1, seen1)  # s1 took the first one
        os.killpg(pipeline.group, signal.SIGINT)
        out, err1, err2 = pipeline.finish()
    finally:
        pipeline.kill()
    assert [parse_line(line).payload for line in out.decode().splitlines()] == ["warm"]
    abandoned = [ln for ln in err1.splitlines() if ln.startswith(ABANDON_PREFIX)]
    assert sorted(int(re.search(r" seq=(\d+)", ln).group(1)) for ln in abandoned) == list(range(5)), err1
    assert all(re.search(r" line=\d+$", ln) for ln in abandoned)  # the stdin line of each delivery
    assert "lost: 5 copies abandoned" in _summary(err1)
    assert pipeline.s1.returncode == 3, err1  # lost copies, whatever stopped the run
    assert pipeline.s2.returncode == 130, err2  # nothing was pending there: stopped by SIGINT, nothing lost


def _head_one(tmp_path, env, source: str, lines: int) -> tuple[int, str, bytes, float]:
    data = tmp_path / "in.txt"
    data.write_text("".join(f"[orders | {i}] payload-{i:06d}\n" for i in range(lines)))
    target = _module(tmp_path, "stage", source)
    with data.open("rb") as stdin:
        stage = _stage(tmp_path, env, target, stdin, group=0)
        head = subprocess.Popen(["head", "-n", "1"], stdin=stage.stdout, stdout=subprocess.PIPE)
        stage.stdout.close()
        first = head.communicate(timeout=60)[0]
        started = time.monotonic()
        err = stage.stderr.read().decode()
        stage.wait(timeout=60)
    return stage.returncode, err, first, time.monotonic() - started


@pytest.mark.parametrize("source", [COPY, PUBLISH], ids=["retry-copies", "handler-publishes"])
def test_head_n_1_stops_the_stage_within_one_buffer_and_reports_its_losses(tmp_path, child_env, source):
    lines = 200_000
    rc, err, first, _ = _head_one(tmp_path, child_env, source, lines)
    assert first.startswith(b"[") and first.count(b"\n") == 1
    assert rc == 141, err  # 128 + SIGPIPE, as a shell reports for cat
    assert "Traceback" not in err and "handler raised" not in err and "ack / nack failed" not in err
    summary = _summary(err)
    assert summary.startswith("nbkit: run summary: stopped by broken pipe; "), err
    [other] = [ln for ln in err.splitlines() if ln != summary] or [""]
    assert other == ""  # one summary, not a line per lost copy or per failed flush
    deliveries = _count(summary, "deliver(?:y|ies)")
    per_buffer = (1 << 16) // len("[2026-01-01T00:00:00 | orders.retry | 0] rs1:") + 1
    # the first 64 KiB of stdout reached head, the second write failed: the stage stopped there
    assert 0 < deliveries <= 3 * per_buffer, summary
    lost = _count(summary, r"stdout lines \(copies, publishes\) lost")
    assert lost > 0
    read = _count(summary, "lines read(?! and)")
    unread = _count(summary, "left unread")
    undelivered = _count(summary, "lines read and not delivered")
    assert read + unread == lines, summary  # every line is delivered, dropped and counted, or counted unread
    assert deliveries + undelivered == read, summary


def _sigterm_slow_stage_on_a_file(tmp_path, child_env, lines: int) -> tuple[subprocess.Popen, list[bytes]]:
    """The SLOW stage reading a regular file of ``lines`` order lines, sent SIGTERM once it has started; the
    stage and the stderr lines read so far."""
    data = tmp_path / "in.txt"
    data.write_text("".join(f"[orders | {i}] {i}\n" for i in range(lines)))
    with data.open("rb") as stdin:  # the stage has its own descriptor of the file
        stage = _stage(tmp_path, child_env, _module(tmp_path, "slow", SLOW), stdin, group=0)
    seen: list[bytes] = []
    _await_line(stage.stderr, b"started", 1, seen)
    stage.send_signal(signal.SIGTERM)
    return stage, seen


def test_sigterm_on_a_stage_reading_a_file_delivers_what_it_read_and_counts_the_rest(tmp_path, child_env):
    """stdin is a regular file: SIGTERM stops reading, the lines already read are still delivered (none is
    dropped), the rest are counted as unread, and the stage exits 143."""
    lines = 50_000
    stage, seen = _sigterm_slow_stage_on_a_file(tmp_path, child_env, lines)
    out, err = stage.communicate(timeout=60)
    err_text = b"".join(seen).decode() + err.decode()
    assert out == b""
    assert stage.returncode == 143, err_text
    summary = _summary(err_text)
    assert summary.startswith("nbkit: run summary: stopped by SIGTERM; "), summary
    deliveries, read, unread = (_count(summary, w) for w in ("deliver(?:y|ies)", "lines read(?! and)", "left unread"))
    assert 0 < deliveries == read < lines and read + unread == lines, summary
    assert "not delivered" not in summary


def test_two_sigterms_on_a_slow_stage_report_the_lines_read_and_not_delivered(tmp_path, child_env):
    lines = 50_000
    stage, seen = _sigterm_slow_stage_on_a_file(tmp_path, child_env, lines)
    # two signals, not one: a pause so they do not merge (signals do not queue); both outcomes are checked
    time.sleep(0.05)
    stage.send_signal(signal.SIGTERM)
    out, err = stage.communicate(timeout=60)
    err_text = b"".join(seen).decode() + err.decode()
    summary = _summary(err_text)
    deliveries, read, unread = (_count(summary, w) for w in ("deliver(?:y|ies)", "lines read(?! and)", "left unread"))
    undelivered = _count(summary, "lines read and not delivered")
    assert read + unread == lines and deliveries + undelivered == read, summary
    if undelivered:  # (the stage may have delivered its buffer between the signals)
        assert stage.returncode == 3, err_text
        assert (
            f"ERROR nbkit.app: lines read from stdin are not delivered (the stage stopped at once) count={undelivered}"
            in err_text
        )
    else:
        assert stage.returncode == 143, err_text


LOSSES = """
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("plain", out_retry="plain.retry")
def plain(d):
    return HandlerOutcome.retry()  # no max_attempts, no dead_letter: requeues nothing
@broker.subscriber("capped", out_retry="capped.retry", max_attempts=1)
def capped(d):
    return HandlerOutcome.retry()  # at the cap, no dead-letter key: rejected
@broker.subscriber("later", out_retry="later.retry")
def later(d):
    print("handled", d.seq, flush=True)
    return HandlerOutcome.retry_after(60)  # abandoned at the shutdown timeout
app = App(broker, shutdown_timeout=0)
"""


def test_log_level_error_shows_every_loss_and_the_status_says_so(tmp_path, child_env):
    stage = _stage(tmp_path, child_env, _module(tmp_path, "losses", LOSSES), subprocess.PIPE, group=0)
    try:
        stage.stdin.write(b"[plain] a\n[capped] b\n[later] c\n[later] d\n")
        stage.stdin.flush()
        seen: list[bytes] = []
        _await_line(stage.stderr, b"handled", 2, seen)
        stage.send_signal(signal.SIGTERM)  # stdin is a pipe: the stage reads on until it is closed
        out, err = stage.communicate(timeout=30)
    finally:
        if stage.poll() is None:
            stage.kill()
    err_text = b"".join(seen).decode() + err.decode()
    errors = [ln for ln in err_text.splitlines() if ln.startswith("ERROR ")]
    assert len(errors) == 4, err_text
    assert "outcome=retry" in errors[0] and "requeues nothing" in errors[0] and "line=1" in errors[0]
    assert "no dead-letter destination is declared; rejecting" in errors[1] and "line=2" in errors[1]
    assert all("shutdown timeout reached; the delayed retry copy is abandoned" in ln for ln in errors[2:])
    assert [re.search(r"line=(\d+)", ln).group(1) for ln in errors[2:]] == ["3", "4"]
    summary = _summary(err_text)
    assert "1 rejected at the cap, 1 retry() with no copy; lost: 2 copies abandoned" in summary, summary
    assert stage.returncode == 3
    assert out == b""
