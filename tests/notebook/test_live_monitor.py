"""LiveMonitor: counts converge to the file's while a writer in another process appends; refreshing
runs as a task on the event loop and ends with the Stop button, ``stop()``, ``close()``, or when the
file is rotated or removed. The browser test is tests/browser/test_live_monitor_browser.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from checkout_env import checkout_env
from waiting import await_until

import nbkit.widgets
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(60)

WRITER = r"""
import sys, time
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
path, count = sys.argv[1], int(sys.argv[2])
with StreamWriter(path) as w:
    for i in range(count):
        retries = i % 3
        key = "orders.dead" if i % 10 == 9 else "orders"
        headers = {envelope.RETRY_COUNT_HEADER: str(retries)} if retries else {}
        w.write(key, envelope.encode(headers, b'{"n": %d}' % i, force_text=False))
        if i % 50 == 0:  # pauses: the file grows in steps, as the test of the refreshes by hand asserts
            time.sleep(0.01)
"""


def _other_tasks() -> set[asyncio.Task]:
    """The tasks on the running loop other than the test's own."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


def start_writer(path: Path, count: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(count)], env=checkout_env())


def file_counts(path: Path) -> tuple[Counter, Counter]:
    """Messages per key and deliveries per attempt (non-dead-letter keys), read straight from the file."""
    keys: Counter[str] = Counter()
    attempts: Counter[int] = Counter()
    with StreamReader(path) as r:
        for m in r:
            if m.stream_key.startswith("ruststream") or m.stream_key.startswith("SEA_"):
                continue
            keys[m.stream_key] += 1
            if m.stream_key != "orders.dead":
                headers, _ = envelope.decode(m.payload)
                attempts[int(headers.get(envelope.RETRY_COUNT_HEADER, 0)) + 1] += 1
    return keys, attempts


@pytest.fixture
def ss(tmp_path: Path) -> Path:
    path = tmp_path / "orders.ss"
    with StreamWriter(path) as w:
        w.write("orders", b'{"n": -1}')
    return path


def test_counts_converge_while_another_process_writes(ss: Path) -> None:
    monitor = nbkit.widgets.LiveMonitor(ss, max_messages=40)  # no event loop here: refreshed by hand
    assert not monitor.running and "call .refresh()" in monitor.status.value
    writer = start_writer(ss, 600)
    seen = []
    while writer.poll() is None:
        seen.append(monitor.refresh().messages)
    assert writer.wait() == 0
    while monitor.state.offset < ss.stat().st_size:  # at most 40 per refresh: catch up
        monitor.refresh()
    keys, attempts = file_counts(ss)
    state = monitor.state
    assert {k: a.count for k, a in state.keys.items()} == dict(keys)
    assert state.attempt_totals() == dict(attempts)
    assert len(state.dead_letter_times) == keys["orders.dead"] == 60
    assert seen == sorted(seen) and len(set(seen)) > 2  # it saw the file grow
    assert "orders.dead (dead letters)" in monitor.keys_view.value
    assert "x-ruststream-retry-count" in monitor.latest_view.value
    monitor.stop()
    assert monitor.stop_button.disabled and "stopped" in monitor.status.value


def test_refreshes_on_the_event_loop_until_stopped(ss: Path) -> None:
    async def scenario() -> tuple[int, bool, set]:
        monitor = nbkit.widgets.LiveMonitor(ss, every=0.02)
        assert monitor.running
        writer = start_writer(ss, 300)
        await await_until(  # the loop is free while this waits: the monitor refreshes meanwhile
            lambda: writer.poll() is not None and monitor.state.offset >= ss.stat().st_size,
            what=lambda: f"the writer to end and the monitor to read all ({monitor.state.offset} bytes read)",
        )
        messages = monitor.state.messages
        monitor.stop_button.click()
        await await_until(lambda: not _other_tasks(), what=lambda: f"the monitor's task to end: {_other_tasks()}")
        return messages, monitor.running, _other_tasks()

    messages, running, others = asyncio.run(scenario())
    keys, _ = file_counts(ss)
    assert messages == sum(keys.values()) == 301
    assert not running and others == set()  # nothing left on the loop


def test_close_ends_the_task(ss: Path) -> None:
    async def scenario() -> tuple[bool, bool]:
        monitor = nbkit.widgets.LiveMonitor(ss, every=0.01)
        await await_until(lambda: monitor.state.messages == 1, what="the monitor's first refresh")
        was = monitor.running
        monitor.close()
        await await_until(lambda: not _other_tasks(), what=lambda: f"the monitor's task to end: {_other_tasks()}")
        return was, monitor.running

    assert asyncio.run(scenario()) == (True, False)


@pytest.mark.parametrize("change", ["rotated", "removed"])
def test_rotation_and_removal_are_said_and_stop_the_monitor(ss: Path, tmp_path: Path, change: str) -> None:
    async def scenario() -> nbkit.widgets.LiveMonitor:
        monitor = nbkit.widgets.LiveMonitor(ss, every=0.01)
        await await_until(lambda: monitor.state.messages == 1, what="the monitor's first read of the file")
        if change == "rotated":
            fresh = tmp_path / "new.ss"
            with StreamWriter(fresh) as w:
                w.write("orders", b"new file")
            os.replace(fresh, ss)
        else:
            ss.unlink()
        await await_until(lambda: not monitor.running, what=lambda: f"the monitor to stop ({monitor.state.status})")
        return monitor

    monitor = asyncio.run(scenario())
    assert not monitor.running and monitor.state.status == change
    assert change in monitor.status.value and monitor.stop_button.disabled
    assert monitor.state.messages == 1  # the old file's one message; the new file is not read


def test_every_must_be_positive(ss: Path) -> None:
    with pytest.raises(ValueError, match="every"):
        nbkit.widgets.LiveMonitor(ss, every=0)
