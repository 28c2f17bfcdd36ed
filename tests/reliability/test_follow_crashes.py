"""A follower keeps following while its writer crashes and a new writer resumes the file.

A writer killed mid-frame leaves a torn tail; the next writer cuts it off and writes new frames in
its place. A follower that had already read the torn bytes held a stale copy of them, and before the
fix it reported the new frame as damage (a checksum mismatch) and stopped. Now it reads the bytes
again once before it calls anything damage.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.polling import NEED_MORE

from .crashlib import crash_writer

pytestmark = pytest.mark.timeout(60)


def _tail_of_one_more_message(path: Path, payload: bytes) -> bytes:
    """The exact bytes a writer appends for one more message (frame and any beacon it crosses)."""
    copy = path.with_suffix(".copy")
    copy.write_bytes(path.read_bytes())
    with StreamWriter(copy) as w:
        w.write("a", payload)
    tail = copy.read_bytes()[path.stat().st_size :]
    copy.unlink()
    return tail


def test_a_follower_survives_a_torn_tail_being_cut_and_rewritten_at_every_cut(tmp_path) -> None:
    path = tmp_path / "torn.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        for i in range(6):
            w.write("a", b"%d" % i * 70)  # ends a little before the boundary at 1024
    base = path.read_bytes()
    tail = _tail_of_one_more_message(path, b"T" * 300)  # crosses the boundary: frame, beacon, frame
    assert len(base) < 1024 < len(base) + len(tail)
    for cut in range(1, len(tail)):
        path.write_bytes(base + tail[:cut])  # the crashed writer got this far
        with StreamReader(path, follow=True) as r:
            got = []
            while (item := r.poll()) is not NEED_MORE:
                got.append(item.payload)
            assert len(got) == 6
            with StreamWriter(path) as w:  # the restarted writer: cuts the torn bytes, writes new ones
                assert w.truncated_bytes == cut
                w.write("a", b"N" * 300)
                w.write("a", b"after")
            while (item := r.poll()) is not NEED_MORE:
                got.append(item.payload)
        assert got[6:] == [b"N" * 300, b"after"], cut


@pytest.mark.slow
def test_a_follower_process_sees_every_message_once_across_writer_crashes(tmp_path, script, child_env, figures):
    path = tmp_path / "crashy.ss"
    rnd = random.Random(11)

    def writer(run: int) -> subprocess.Popen:
        flush_every = rnd.choice([1, 1, 8, 32])  # batches make torn tails likelier
        proc = subprocess.Popen(
            [*script("crash_writer.py"), str(path), str(100 + run), str(flush_every)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
        )
        ready = proc.stdout.readline()
        assert ready.startswith(b"ready"), proc.stderr.read().decode()[-3000:]
        proc.stderr.close()
        return proc

    current = writer(0)
    follower = subprocess.Popen(
        [*script("follower.py"), str(path), "crash"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env
    )
    torn = 0
    kills = 12
    try:
        assert follower.stdout.readline() == b"following\n", follower.stderr.read()
        for run in range(1, kills + 1):
            time.sleep(rnd.uniform(0.01, 0.06))  # a random moment of its writes: where the kill lands
            os.kill(current.pid, signal.SIGKILL)
            current.wait()
            current.stdout.close()
            with StreamReader(path) as r:
                list(r)
                torn += r.end.reason == "truncated"
            current = writer(run)
        time.sleep(0.02)  # the last writer writes a little, then is killed too (where does not matter)
        os.kill(current.pid, signal.SIGKILL)
        current.wait()
        current.stdout.close()
        with StreamWriter(path) as w:  # a last clean writer ends the stream
            w.close(eos=True)
        out, err = follower.communicate(timeout=30)
    finally:
        for p in (current, follower):
            if p.poll() is None:
                p.kill()
    assert follower.returncode == 0, err.decode()[-2000:]
    report = json.loads(out)
    with StreamReader(path) as r:
        expected: dict[str, int] = {}
        for m in r:
            if not m.is_eos:
                expected[m.stream_key] = expected.get(m.stream_key, 0) + 1
                assert m.payload == crash_writer.payload(m.stream_key, m.seq)
    assert report["problems"] == [] and report["count"] == expected and report["end"] == "eos", report
    figures(
        kind="follower across writer SIGKILLs",
        kills=kills + 1,
        torn_tails=torn,
        delivered=sum(expected.values()),
        lost=0,
        duplicates=0,
    )
