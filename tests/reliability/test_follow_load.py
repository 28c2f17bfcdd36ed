"""Follow under load: a writer process appends 100,000 messages while a follower process reads them.

Every message must arrive exactly once, in order, with its payload intact, and the follower must end
at the end-of-stream mark. The writer uses a 1024-byte beacon interval, so the follower meets
partial frames and partial beacons at the tail all the time. Three followers: ``StreamReader``,
a live ``FileBroker`` subscription (the runtime's path) and ``nbkit cat --follow --format ndjson``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from waiting import wait_until

_spec = importlib.util.spec_from_file_location(
    "load_writer", Path(__file__).resolve().parent / "scripts" / "load_writer.py"
)
assert _spec is not None and _spec.loader is not None
load_writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(load_writer)
key_of, payload = load_writer.key_of, load_writer.payload

N = 100_000


def _start_writer(path: Path, script, env, flush_every: int = 1) -> subprocess.Popen:
    writer = subprocess.Popen(
        [*script("load_writer.py"), str(path), str(N), str(flush_every)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert writer.stdout.readline() == b"ready\n", writer.stderr.read()
    return writer


def _go(writer: subprocess.Popen) -> float:
    writer.stdin.write(b"go\n")
    writer.stdin.flush()
    done = writer.stdout.readline()
    assert done.startswith(b"done "), done + writer.stderr.read()
    assert writer.wait(timeout=30) == 0
    return float(done.split()[1])


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize(("mode", "flush_every"), [("reader", 1), ("app", 1), ("reader", 64)])
def test_a_follower_process_gets_100k_messages_exactly_once_in_order(
    tmp_path, script, child_env, figures, mode, flush_every
):
    path = tmp_path / "load.ss"
    writer = _start_writer(path, script, child_env, flush_every)
    follower = subprocess.Popen(
        [*script("follower.py"), str(path), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env
    )
    try:
        assert follower.stdout.readline() == b"following\n", follower.stderr.read()
        started = time.perf_counter()
        write_seconds = _go(writer)
        out, err = follower.communicate(timeout=40)
        total = time.perf_counter() - started
    finally:
        for p in (writer, follower):
            if p.poll() is None:
                p.kill()
    assert follower.returncode == 0, err.decode()
    report = json.loads(out)
    expected = {"load": sum(key_of(i) == "load" for i in range(N)), "side": sum(key_of(i) == "side" for i in range(N))}
    assert report["problems"] == [] and report["count"] == expected, report
    assert report["end"] == "eos"
    figures(
        kind=f"follow under load ({mode}, writer flush_every={flush_every})",
        messages=N,
        delivered=sum(report["count"].values()),
        lost=0,
        duplicates=0,
        write_seconds=write_seconds,
        follow_seconds=round(total, 2),
    )


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_nbkit_cat_follow_prints_100k_messages_exactly_once_in_order(tmp_path, script, child_env, figures):
    path = tmp_path / "load.ss"
    writer = _start_writer(path, script, child_env)
    cat = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "cat", "--follow", "--format", "ndjson", "--comments", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env,
    )
    lines: list[bytes] = []
    reader = threading.Thread(target=lambda: lines.extend(cat.stdout), daemon=True)
    try:
        reader.start()
        # the header comment (--comments): cat opened the file
        wait_until(lambda: lines or cat.poll() is not None, what="cat's first line")
        assert lines and lines[0].startswith(b"/* "), cat.stderr.read()
        started = time.perf_counter()
        _go(writer)
        assert cat.wait(timeout=40) == 0, cat.stderr.read()
        reader.join(timeout=10)
        total = time.perf_counter() - started
    finally:
        for p in (writer, cat):
            if p.poll() is None:
                p.kill()
    assert cat.stderr.read() == b""
    messages = [json.loads(line) for line in lines if not line.startswith(b"/*")]
    eos = messages.pop()
    assert eos["header"]["stream_key"] == "SEA_STREAMER_INTERNAL" and eos["payload"] == "EOS"
    assert len(messages) == N
    seqs = {"load": 0, "side": 0}
    for i, m in enumerate(messages):
        key = m["header"]["stream_key"]
        seqs[key] += 1
        assert (key, m["header"]["sequence"], m["payload"]) == (key_of(i), seqs[key], payload(i).decode()), i
    figures(
        kind="follow under load (nbkit cat --follow --format ndjson)",
        messages=N,
        delivered=len(messages),
        lost=0,
        duplicates=0,
        follow_seconds=round(total, 2),
    )
