"""Redrive against real processes: a redrive killed with SIGKILL and run again redrives each dead letter
exactly once; a service running in another process handles what a redrive appends."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from checkout_env import checkout_env

from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope

FROM = "x-nbkit-redriven-from"
DEAD = 20_000  # enough dead letters that a redrive takes a while to append them


def write_dead_letters(path: Path, n: int) -> None:
    with StreamWriter(path, flush_every=4096) as w:
        w.write("orders", b'{"id": 0}')
        for i in range(1, n + 1):
            w.write("orders.dead", envelope.encode({"x-ruststream-retry-count": "3"}, b'{"id": %d}' % i,
                                                   force_text=False))  # fmt: skip


def redriven_refs(path: Path) -> tuple[list[str], str]:
    """The x-nbkit-redriven-from values under orders, in file order, and how the read ended."""
    refs: list[str] = []
    with StreamReader(path, keys=["orders"]) as r:
        for m in r:
            headers, payload = envelope.decode(m.payload)
            if FROM in headers:
                ref = headers[FROM]
                assert isinstance(ref, str), ref
                refs.append(ref)
                assert payload == b'{"id": %d}' % int(ref.split("#")[1])
        end = r.end.reason
    return refs, end


def redrive_cmd(path: Path) -> list[str]:
    return [sys.executable, "-m", "nbkit", "redrive", str(path), "--from", "orders.dead", "--to", "orders"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_redrive_killed_mid_way_and_run_again_redrives_each_dead_letter_once(tmp_path):
    path = tmp_path / "orders.ss"
    write_dead_letters(path, DEAD)
    env = checkout_env()
    partial_kills = 0
    for run in range(6):
        start = path.stat().st_size
        grow = run * 300_000  # kill later and later into the append
        child = subprocess.Popen(redrive_cmd(path), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        killed = False
        while child.poll() is None:
            if path.stat().st_size > start + grow:
                os.kill(child.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.0005)  # poll interval: the kill follows the file's growth closely
        child.wait()
        child.stderr.close()
        refs, end = redriven_refs(path)
        assert end in ("end", "truncated"), end  # at worst a torn last frame, which the next writer cuts off
        counts = Counter(refs)
        assert max(counts.values(), default=1) == 1, "a dead letter was redriven twice"
        if killed and 0 < len(refs) < DEAD:
            partial_kills += 1
        if not killed or child.returncode == 0:
            break
    done = subprocess.run(redrive_cmd(path), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    refs, end = redriven_refs(path)
    assert end == "end"
    assert sorted(refs, key=lambda r: int(r.split("#")[1])) == [f"orders.dead#{i}" for i in range(1, DEAD + 1)]
    assert partial_kills >= 1, "no run was killed part way through; the test proved nothing"


SERVICE = """\
import os
from nbkit import FileBroker, FilePosition, HandlerOutcome

broker = FileBroker(os.environ["ORDERS_FILE"])


@broker.subscriber("orders", start_at=FilePosition.sequence(2), max_attempts=3, dead_letter="orders.dead")
def fixed(delivery):
    redriven = "x-nbkit-redriven-from" in delivery.headers
    print("handled", delivery.json()["id"], "attempt", delivery.attempt, "redriven", redriven, flush=True)
    return HandlerOutcome.ack()
"""


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_a_running_service_handles_the_redriven_messages(tmp_path):
    path = tmp_path / "orders.ss"
    write_dead_letters(path, 3)  # orders #1, then three dead letters
    (tmp_path / "fixed_service.py").write_text(SERVICE)
    env = checkout_env(ORDERS_FILE=str(path))
    service = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "fixed_service:broker", "--log-level", "ERROR"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / "service.log", "wb"),  # noqa: SIM115
    )  # fmt: skip
    try:
        # the service follows orders from sequence 2, which the redrive is about to write
        done = subprocess.run(redrive_cmd(path), env=checkout_env(), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        out = b""
        deadline = time.monotonic() + 30
        while out.count(b"\n") < 3 and time.monotonic() < deadline:
            ready, _, _ = select.select([service.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(service.stdout.fileno(), 4096)
                if not chunk:
                    break
                out += chunk
        lines = out.decode().splitlines()
        log = (tmp_path / "service.log").read_text()
        assert lines == [f"handled {i} attempt 1 redriven True" for i in (1, 2, 3)], log
    finally:
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
