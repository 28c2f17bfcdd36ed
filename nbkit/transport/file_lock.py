"""Opening a stream file for appending, and the advisory lock (``flock``) its writers share.

A shared writer takes the lock for each append, an exclusive one for its whole life (see
:class:`~nbkit.transport.file_writer.StreamWriter`); these helpers open the file with errors that say
what to do, take the lock in turn (waiting writers queue, up to a timeout) and name what holds it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from collections.abc import Callable

from nbkit.errors import FilePermissionError, MissingFileError, PathIsDirectoryError, WriterLockedError

__all__ = ["lock_holder", "mark_exclusive", "open_for_append", "take_lock", "try_lock"]


def open_for_append(path: str, existing_only: bool) -> int:
    """Open ``path`` read-write (created unless ``existing_only``); a descriptor, or an nbkit error."""
    flags = os.O_RDWR | (0 if existing_only else os.O_CREAT)
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        if not existing_only:
            folder = os.path.dirname(path) or "."
            raise MissingFileError(f"{path}: the directory {folder} does not exist; create it first") from None
        raise MissingFileError(
            f"{path}: no such file (existing_only is set); create it first or drop existing_only"
        ) from None
    except IsADirectoryError:
        raise PathIsDirectoryError(f"{path}: is a directory, not a stream file") from None
    except PermissionError:
        if not os.path.lexists(path):
            folder = os.path.dirname(path) or "."
            raise FilePermissionError(
                f"{path}: permission denied: cannot create a file in {folder}; the directory must be writable"
            ) from None
        raise FilePermissionError(f"{path}: permission denied; the file must be writable") from None


def try_lock(fd: int) -> bool:
    """Take the exclusive flock on ``fd`` if nobody holds it; False when somebody does."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


# Fair waiting: a writer that finds the flock taken queues on a byte far past any stream file's end (an
# open-file-description lock, which neither flock nor other descriptions' locks interact with); a writer
# that would take the flock while someone queues waits its turn instead, so the holder cannot take the
# flock back again and again while the waiter polls (Linux; elsewhere the wait is the plain poll).
_TURNSTILE = 1 << 62
#: held for the writer's whole life by an exclusive writer, so a timed-out waiter can say who held the lock
_EXCLUSIVE_MARK = _TURNSTILE + 1
_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_GETLK: int | None = getattr(fcntl, "F_OFD_GETLK", None)
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on Linux: type, whence, start, len, pid (0 for OFD locks)


def _byte_lock(fd: int, at: int, kind: int) -> bool:
    """Lock (``F_WRLCK``) or unlock (``F_UNLCK``) the byte at ``at`` for this open file, without waiting;
    False when another open file holds it. True where such locks do not exist (nothing to queue on)."""
    if _OFD_SETLK is None:
        return True
    try:
        fcntl.fcntl(fd, _OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, at, 1, 0))
    except (BlockingIOError, PermissionError):  # EAGAIN or EACCES: another open file holds it
        return False
    return True


def _byte_locked(fd: int, at: int) -> bool:
    """Whether another open file holds the byte lock at ``at``."""
    if _OFD_GETLK is None:
        return False
    answer = fcntl.fcntl(fd, _OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, at, 1, 0))
    return answer[:2] != _UNLOCKED


_UNLOCKED = struct.pack("h", fcntl.F_UNLCK)  # the type field of a struct flock that reports no lock
#: the question "does anybody queue?", asked before every shared append (built once)
_ASK_TURNSTILE = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, _TURNSTILE, 1, 0)


def mark_exclusive(fd: int) -> None:
    """Say, for as long as ``fd`` is open, that its writer holds the lock exclusively (for waiters' errors)."""
    _byte_lock(fd, _EXCLUSIVE_MARK, fcntl.F_WRLCK)


def _poll(take: Callable[[], bool], deadline: float) -> bool:
    """Call ``take`` until it answers True or ``deadline`` passes (a short, growing pause between calls)."""
    delay = 0.0001
    while True:
        if take():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.002)


def take_lock(fd: int, path: str, timeout: float, *, exclusive: bool) -> None:
    """Take the file's lock in turn, waiting up to ``timeout`` seconds; else raise WriterLockedError
    naming what held it (``exclusive``: the waiting writer's own mode, for the text).

    A writer takes the lock at once only when nobody queues for it; otherwise it queues: at most one
    writer polls the lock itself while the others wait behind it, so a writer that lets go and asks
    again goes behind the one already waiting, and a wait lasts about one append per writer ahead.
    """
    if (_OFD_GETLK is None or fcntl.fcntl(fd, _OFD_GETLK, _ASK_TURNSTILE)[:2] == _UNLOCKED) and try_lock(fd):
        return  # the usual case: nobody queues and nobody holds it (_byte_locked, spelt out)
    deadline = time.monotonic() + timeout
    if not _poll(lambda: _byte_lock(fd, _TURNSTILE, fcntl.F_WRLCK), deadline):
        raise _locked(fd, path, timeout, exclusive, queued=True)
    try:
        if not _poll(lambda: try_lock(fd), deadline):
            raise _locked(fd, path, timeout, exclusive, queued=False)
    finally:
        _byte_lock(fd, _TURNSTILE, fcntl.F_UNLCK)


def _locked(fd: int, path: str, timeout: float, exclusive: bool, *, queued: bool) -> WriterLockedError:
    """The error of a writer that waited ``timeout`` s in vain: who held the lock, and in which mode."""
    holder = lock_holder(fd)
    who = f"process {holder}" if holder else "another process"
    if exclusive:
        return WriterLockedError(
            f"{path}: {who} is writing this stream file; two writers would interleave "
            "frames and corrupt it. Stop that writer, or publish through it."
        )
    if _byte_locked(fd, _EXCLUSIVE_MARK):
        return WriterLockedError(
            f"{path}: {who} is writing this stream file exclusively (it holds the lock for its whole "
            f"life; waited {timeout:g} s). Stop that writer, or publish through it."
        )
    if queued:
        return WriterLockedError(
            f"{path}: waited {timeout:g} s behind other shared writers queued for the lock ({who} holds "
            "it); raise lock_timeout, or write from fewer processes."
        )
    return WriterLockedError(
        f"{path}: {who}, a shared writer, held the lock for the whole {timeout:g} s this writer waited "
        "(shared writers hold it while appending, or while a flush_every batch waits to go out: that "
        "process may be stopped, or its disk stalled). Look at that process, or raise lock_timeout."
    )


def lock_holder(fd: int) -> int | None:
    """The pid holding a flock on this file, from /proc/locks (Linux); None where unknown."""
    try:
        st = os.fstat(fd)
        ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == ident:
                    return int(parts[4])
    except (OSError, ValueError):
        return None
    return None
