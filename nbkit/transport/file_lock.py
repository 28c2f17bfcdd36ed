"""Opening a stream file for appending, and the advisory lock (``flock``) its writers share.

A shared writer takes the lock for each append, an exclusive one for its whole life (see
:class:`~nbkit.transport.file_writer.StreamWriter`); these helpers open the file with errors that say
what to do, take the lock (waiting up to a timeout) and name the process that holds it.
"""

from __future__ import annotations

import fcntl
import os
import time

from nbkit.errors import FilePermissionError, MissingFileError, PathIsDirectoryError, WriterLockedError

__all__ = ["lock_holder", "open_for_append", "take_lock", "try_lock"]


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


def take_lock(fd: int, path: str, timeout: float, *, exclusive: bool) -> None:
    """Take the file's lock, waiting up to ``timeout`` seconds for its holder to let go; else raise
    WriterLockedError naming the holder (``exclusive``: the waiting writer's own mode, for the text)."""
    if try_lock(fd):
        return
    deadline = time.monotonic() + timeout
    delay = 0.0001
    while time.monotonic() < deadline:
        time.sleep(delay)
        if try_lock(fd):
            return
        delay = min(delay * 2, 0.005)
    holder = lock_holder(fd)
    who = f"process {holder}" if holder else "another process"
    if exclusive:
        raise WriterLockedError(
            f"{path}: {who} is writing this stream file; two writers would interleave "
            "frames and corrupt it. Stop that writer, or publish through it."
        ) from None
    raise WriterLockedError(
        f"{path}: {who} is writing this stream file exclusively (it has held the lock for "
        f"{timeout:g} s; shared writers hold it only while appending). Stop that writer, "
        "or publish through it."
    ) from None


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
