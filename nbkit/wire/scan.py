"""The frame scanner: the one hot loop that turns a buffer of ``.ss`` bytes into message columns.

Pure function, no I/O (format spec §4, §6.3). :func:`scan_frames` walks the complete, intact frames
that lie in a buffer between a start offset and the next beacon boundary, verifies each payload's
CRC-16/CDMA2000, keeps the frames of the keys a key filter accepts, and appends their fields to
column lists (no per-message objects). It stops, without raising, at the first thing that needs the
reader's one-frame path: a beacon boundary (where the reader demultiplexes the beacon, §6.3), a frame
not wholly in the buffer, a key the filter has not seen yet, a timestamp out of range, a checksum
mismatch or the ``until`` offset. Callers: :class:`~nbkit.transport.file_reader.StreamReader`
(``poll``, ``read_columns``), and through it ``read_stream``, the Dask partitions, ``nbkit cat`` and
``nbkit info``.

A compiled twin of this function lives in ``nbkit/wire/_speedups``; :mod:`nbkit.wire.core` picks one.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from nbkit.wire.core import pick
from nbkit.wire.crc import crc16 as _crc16_pure
from nbkit.wire.ssformat import MAX_TIMESTAMP_MS

__all__ = ["FrameColumns", "new_columns", "scan_frames", "scan_frames_pure"]

_HEAD = struct.Struct(">QQQI")
_MISSING = object()


class FrameColumns(NamedTuple):
    """Messages as parallel column lists, one entry per message, in file order.

    Attributes
    ----------
    stream_key, shard_id, seq, timestamp_ms, payload, offset
        One list per message field; ``offset`` is where each frame starts in the file.

    Examples
    --------
    >>> cols = new_columns()
    >>> cols.offset
    []
    """

    stream_key: list[str]
    shard_id: list[int]
    seq: list[int]
    timestamp_ms: list[int]
    payload: list[bytes]
    offset: list[int]

    def append(self, msg) -> None:
        """Append one message (anything with the six fields as attributes, e.g. a ``Message``)."""
        self.stream_key.append(msg.stream_key)
        self.shard_id.append(msg.shard_id)
        self.seq.append(msg.seq)
        self.timestamp_ms.append(msg.timestamp_ms)
        self.payload.append(msg.payload)
        self.offset.append(msg.offset)


def new_columns() -> FrameColumns:
    """Empty :class:`FrameColumns`, ready for :func:`scan_frames` to fill.

    Returns
    -------
    FrameColumns
        Six empty lists.

    Examples
    --------
    >>> len(new_columns())
    6
    """
    return FrameColumns([], [], [], [], [], [])


def scan_frames(
    buf: bytes,
    base: int,
    pos: int,
    until: int,
    interval: int,
    keymap: dict[bytes, str | None],
    cols: FrameColumns,
    ends: list[int] | None,
) -> int:
    """Append the complete, intact frames from file offset ``pos`` to ``cols``; return where it stopped.

    Parameters
    ----------
    buf
        File bytes; ``buf[0]`` is at file offset ``base``.
    base
        The file offset of ``buf[0]``.
    pos
        The file offset of the first frame to read (a frame start, not inside a beacon).
    until
        No frame starting at or after this file offset is taken (``-1``: no limit).
    interval
        The file's beacon interval: the scan never passes the next multiple of it.
    keymap
        Key filter: raw key bytes -> the key (taken) or ``None`` (checked, then skipped). A key not in
        it stops the scan, so the caller can decode and judge it once.
    cols
        Column lists the taken frames' fields are appended to.
    ends
        If not ``None``, each taken frame's end offset is appended to it.

    Returns
    -------
    int
        The file offset where the scan stopped: after the last frame read (taken or skipped). Equal to
        ``pos`` when the frame at ``pos`` needs the caller's one-frame path (see the module doc).

    Examples
    --------
    >>> from nbkit.wire.ssformat import encode_frame
    >>> frame, _ = encode_frame(b"k", 0, 1, 5, b"hi")
    >>> buf = bytes(128) + frame
    >>> cols = new_columns()
    >>> scan_frames(buf, 0, 128, -1, 1 << 20, {b"k": "k"}, cols, None) == 128 + len(frame)
    True
    >>> cols.payload
    [b'hi']
    """
    off = pos % interval
    i = pos - base
    n = len(buf)
    if not off or i < 0 or i >= n:
        return pos
    stop = min(n, i + interval - off)  # the buffer index of the next boundary (or the buffer's end)
    limit = n if until < 0 else until - base  # no frame may start at or after this index
    unpack = _HEAD.unpack_from
    crc = _crc16_pure
    get = keymap.get
    max_ts = MAX_TIMESTAMP_MS
    add_key, add_shard, add_seq, add_ts, add_payload, add_offset = (
        cols.stream_key.append,
        cols.shard_id.append,
        cols.seq.append,
        cols.timestamp_ms.append,
        cols.payload.append,
        cols.offset.append,
    )
    add_end = None if ends is None else ends.append
    while i < limit:
        h = i + 1 + buf[i]  # start of shard/seq/ts/size, after the key
        p = h + 28  # start of the payload
        if p > stop:
            break
        shard, seq, ts, size = unpack(buf, h)
        e = p + size + 3  # end of the frame
        if e > stop or ts > max_ts:
            break
        key = get(buf[i + 1 : h], _MISSING)
        if key is _MISSING:
            break
        payload = buf[p : e - 3]
        if crc(payload) != (buf[e - 3] << 8 | buf[e - 2]):
            break
        if key is not None:
            add_key(key)  # type: ignore[arg-type]
            add_shard(shard)
            add_seq(seq)
            add_ts(ts)
            add_payload(payload)
            add_offset(base + i)
            if add_end is not None:
                add_end(base + e)
        i = e
        if i >= stop:
            break
    return base + i


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
scan_frames_pure = scan_frames
scan_frames = pick("scan_frames", scan_frames_pure)  # noqa: F811 (the twin this process runs)
