"""The write lock's turns: a writer that lets go and asks again goes behind the writer already waiting,
and a writer that waits in vain is told what held the lock. Processes: tests/reliability/test_lock.py."""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from nbkit.errors import WriterLockedError
from nbkit.transport.file_lock import mark_exclusive, take_lock

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "F_OFD_SETLK"), reason="queued waiting needs Linux's OFD locks")


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[list[int]]:
    """Three descriptions of one file (each its own open file, as three writers have)."""
    path = tmp_path / "f.ss"
    path.write_bytes(b"")
    fds = [os.open(path, os.O_RDWR) for _ in range(3)]
    yield fds
    for fd in fds:
        os.close(fd)


def somebody_queues(fd: int, path: str) -> bool:
    """A writer that will not wait at all learns whether another queues for the lock."""
    try:
        take_lock(fd, path, 0, exclusive=False)
    except WriterLockedError as exc:
        return "queued" in str(exc)
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def test_a_writer_that_asks_again_goes_behind_the_one_waiting(opened, tmp_path) -> None:
    first, waiting, probe = opened
    path = str(tmp_path / "f.ss")
    order: list[str] = []
    take_lock(first, path, 10, exclusive=False)

    def waiter() -> None:
        take_lock(waiting, path, 60, exclusive=False)
        order.append("waiting")
        fcntl.flock(waiting, fcntl.LOCK_UN)

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_until(lambda: somebody_queues(probe, path), what="the second writer to queue for the lock")
    fcntl.flock(first, fcntl.LOCK_UN)
    take_lock(first, path, 60, exclusive=False)  # at once: before the queued writer's next poll, it used to win
    order.append("first")
    fcntl.flock(first, fcntl.LOCK_UN)
    thread.join(timeout=60)
    assert order == ["waiting", "first"]


def test_the_timeout_names_a_shared_holder_as_shared(opened, tmp_path) -> None:
    holder, waiter, _ = opened
    path = str(tmp_path / "f.ss")
    take_lock(holder, path, 10, exclusive=False)
    with pytest.raises(WriterLockedError, match=f"process {os.getpid()}, a shared writer, held the lock") as info:
        take_lock(waiter, path, 0.05, exclusive=False)
    assert "exclusively" not in str(info.value)


def test_the_timeout_names_an_exclusive_holder_as_exclusive(opened, tmp_path) -> None:
    holder, waiter, _ = opened
    path = str(tmp_path / "f.ss")
    take_lock(holder, path, 10, exclusive=True)
    mark_exclusive(holder)
    with pytest.raises(WriterLockedError, match="is writing this stream file exclusively"):
        take_lock(waiter, path, 0.05, exclusive=False)
