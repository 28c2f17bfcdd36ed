"""Where a writer resumes in an existing stream file, and what it learns from the frames there.

An exclusive writer reads the whole file once when it opens (:func:`resume_exclusive`); a shared writer
reads, holding the lock, the frames other writers appended since its own last append (:func:`take_frames`).
Both note every stream's state in the writer's :class:`~nbkit.transport.writer_state.StreamBook`, cut off a
torn tail (or a trailing EOS, which an append overwrites) and say where the next frame goes.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from nbkit.errors import FormatError, TruncatedError
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import Message
from nbkit.transport.writer_state import StreamBook
from nbkit.wire.ssformat import HEADER_SIZE, Beacon, FileHeader, decode_beacon, encode_beacon

__all__ = ["STALE_TAIL_MAX", "Resumed", "own_file", "resume_exclusive", "take_frames"]

#: Bytes of stale data an upstream append can leave at the tail (one overwritten EOS frame).
STALE_TAIL_MAX = 56


class Resumed(NamedTuple):
    """What a scan of the file found: its header, the offset the next frame goes to, and how many bytes
    after the last frame were cut off."""

    header: FileHeader
    offset: int
    truncated_bytes: int


def _account(book: StreamBook, msg: Message) -> None:
    book.account(msg.stream_key, msg.shard_id, msg.seq, msg.timestamp_ms, msg.payload)


def resume_exclusive(path: str, fd: int, size: int, book: StreamBook) -> Resumed:
    """Scan the existing file: keep its interval, find where to resume, rebuild every stream's state."""
    reader = StreamReader(path, errors="stop", stop_at_eos=False)
    try:
        header = reader.header
        resume = HEADER_SIZE
        for msg in reader:
            _account(book, msg)
            if not msg.is_eos:  # a trailing EOS is overwritten; one between messages is kept
                resume = msg.end
        end = reader.end
    finally:
        reader.close()
    if end is not None and end.reason == "error" and size - end.offset <= STALE_TAIL_MAX:
        # Upstream appends overwrite an EOS without truncating, which can leave up to one EOS
        # frame of stale bytes after the last valid frame (format spec §8): that is the end of data.
        end = None
    if end is not None and end.reason == "error":
        raise FormatError(
            f"cannot append: {end.error}. Appending would overwrite the frames after "
            "the damage; copy the good part out first (nbkit cat ... | nbkit write NEW).",
            path=path,
        )
    truncated = 0
    if resume < size:
        truncated = size - resume
        os.ftruncate(fd, resume)
    offset = resume
    book.beacon_count = 0
    if resume % header.beacon_interval == 0 and resume > 0:
        os.pwrite(fd, encode_beacon(0, ()), resume)
        offset += 7
    os.lseek(fd, offset, os.SEEK_SET)
    return Resumed(header, offset, truncated)


def take_frames(path: str, fd: int, start: int, size: int, book: StreamBook) -> Resumed:
    """Account the frames from ``start`` to the file's ``size``; cut a torn tail or trailing EOS off,
    and write the beacon a boundary right at the resume point lacks (a writer killed between a frame and
    its beacon), the one a single writer would have written there."""
    reader = StreamReader(own_file(path, fd), errors="stop", stop_at_eos=False)
    eos: list[Message] = []  # EOS marks not (yet) followed by a message: overwritten if they end the file
    try:
        header = reader.header
        if start > HEADER_SIZE:
            reader.seek_offset(start)
        resume = start
        for msg in reader:
            if msg.is_eos:
                eos.append(msg)
                continue
            for mark in eos:
                _account(book, mark)
            eos.clear()
            _account(book, msg)
            resume = msg.end
        end = reader.end
    finally:
        reader.close()
    if end is not None and end.reason == "error" and size - end.offset > STALE_TAIL_MAX:
        # an upstream append can leave one stale EOS frame after the data (as on resuming); more is damage
        raise FormatError(
            f"cannot append: {end.error}. Appending would overwrite the frames after the damage; copy "
            "the good part out first (nbkit cat ... | nbkit write NEW)",
            path=path,
            offset=end.offset,
        )
    interval = header.beacon_interval
    first = -(-max(start, interval) // interval) * interval  # the first boundary at or after start
    for boundary in range(first, resume, interval):
        passed = _beacon_at(fd, interval, boundary, size)
        if passed is not None:
            book.beacon_count += len(passed.markers)
    missing = False
    if resume % interval == 0 and resume >= interval:
        beacon = _beacon_at(fd, interval, resume, size)
        if beacon is None:
            missing = True
        else:
            book.beacon_count += len(beacon.markers)
            resume += beacon.size
    truncated = 0
    if resume < size:
        truncated = size - resume
        os.ftruncate(fd, resume)
    offset = resume
    if missing:
        head = encode_beacon(0, book.markers(interval))
        os.pwrite(fd, head, resume)
        offset += len(head)
    os.lseek(fd, offset, os.SEEK_SET)
    return Resumed(header, offset, truncated)


def own_file(path: str, fd: int) -> str:
    """A path to the file open as ``fd``: ``path``, or, once that names another file (the file was renamed
    or removed: rotated), ``/proc/self/fd/N`` (Linux), so a catch-up never reads the frames of a different
    file than the one it appends to."""
    try:
        if os.path.samestat(os.stat(path), os.fstat(fd)):
            return path
    except OSError:
        pass
    own = f"/proc/self/fd/{fd}"
    return own if os.path.exists(own) else path


def _beacon_at(fd: int, interval: int, boundary: int, size: int) -> Beacon | None:
    """The complete beacon at ``boundary``, or None when the file ends inside it."""
    data = os.pread(fd, min(interval, max(0, size - boundary)), boundary)
    try:
        return decode_beacon(data, 0, boundary)
    except TruncatedError:
        return None
