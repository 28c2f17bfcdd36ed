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

from array import array
from typing import Any, NamedTuple

from nbkit.wire.core import pick
from nbkit.wire.crc import crc16 as _crc16_pure
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.ssformat import FRAME_HEAD

__all__ = [
    "ColumnBuffers",
    "FrameColumns",
    "compact_payloads",
    "compact_payloads_pure",
    "new_columns",
    "payload_lines",
    "payload_lines_pure",
    "scan_columns",
    "scan_columns_pure",
    "scan_frames",
    "scan_frames_pure",
    "split_payloads",
    "split_payloads_pure",
]

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

    def append(self, msg: Any) -> None:
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
    unpack = FRAME_HEAD.unpack_from
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


class ColumnBuffers:
    """Messages as growable column buffers: numbers in typed arrays, payloads back to back in one buffer.

    What :func:`scan_columns` fills and a columnar reader hands on without a Python object per message:
    ``numpy.frombuffer`` views the arrays, and the payload buffer goes to ``pyarrow`` (one Arrow array,
    or ``pyarrow.json`` over all payloads at once when they are separated by newlines).

    Parameters
    ----------
    separator
        Appended to ``data`` after each payload: ``b""`` (payloads back to back) or ``b"\\n"`` (NDJSON
        for ``pyarrow.json`` when the payloads are JSON).

    Attributes
    ----------
    keys : list of str
        The stream keys; ``key_code`` holds indices into it (the caller assigns the codes).
    key_code, shard_id, seq, timestamp_ms, offset : array.array
        One entry per message (``offset``: where its frame starts in the file).
    data : bytearray
        The payloads, each followed by ``separator``.
    data_end : array.array
        Where each payload ends in ``data`` (the next starts ``len(separator)`` bytes later).

    Examples
    --------
    >>> from nbkit.wire.ssformat import encode_frame
    >>> frame, _ = encode_frame(b"k", 0, 1, 5, b"hi")
    >>> cols = ColumnBuffers(b"\\n")
    >>> scan_columns(bytes(128) + frame, 0, 128, -1, 1 << 20, {b"k": 0}, cols) == 128 + len(frame)
    True
    >>> bytes(cols.data), cols.data_end.tolist(), cols.offset.tolist()
    (b'hi\\n', [2], [128])
    """

    __slots__ = ("data", "data_end", "key_code", "keys", "offset", "separator", "seq", "shard_id", "timestamp_ms")

    def __init__(self, separator: bytes = b"") -> None:
        if separator not in (b"", b"\n"):
            raise ValueError(f"separator is b'' or b'\\n', not {separator!r}")
        self.separator = separator
        self.keys: list[str] = []
        self.key_code = array("i")
        self.shard_id = array("Q")
        self.seq = array("Q")
        self.timestamp_ms = array("q")
        self.offset = array("q")
        self.data = bytearray()
        self.data_end = array("q")

    def __len__(self) -> int:
        """The number of messages."""
        return len(self.offset)

    def payloads(self) -> list[bytes]:
        """Each message's payload as its own bytes object.

        Returns
        -------
        list of bytes
            One per message, in order.
        """
        return split_payloads(self.data, self.data_end, len(self.separator))

    def to_lists(self) -> FrameColumns:
        """The same messages as :class:`FrameColumns` (one Python object per value).

        Returns
        -------
        FrameColumns
            Six parallel lists.
        """
        keys = self.keys
        return FrameColumns(
            [keys[c] for c in self.key_code],
            self.shard_id.tolist(),
            self.seq.tolist(),
            self.timestamp_ms.tolist(),
            self.payloads(),
            self.offset.tolist(),
        )


def scan_columns(
    buf: bytes,
    base: int,
    pos: int,
    until: int,
    interval: int,
    keymap: dict[bytes, int],
    cols: ColumnBuffers,
) -> int:
    """:func:`scan_frames` into :class:`ColumnBuffers`: the frames' fields appended to typed arrays.

    Stops where :func:`scan_frames` stops, for the same reasons.

    Parameters
    ----------
    buf, base, pos, until, interval
        As for :func:`scan_frames`.
    keymap
        Key filter: raw key bytes -> the key's code in ``cols.keys`` (taken) or ``-1`` (checked, then
        skipped). A key not in it stops the scan.
    cols
        The buffers the taken frames are appended to.

    Returns
    -------
    int
        The file offset where the scan stopped (``pos`` when the frame there needs the caller).

    Examples
    --------
    >>> from nbkit.wire.ssformat import encode_frame
    >>> frame, _ = encode_frame(b"k", 0, 1, 5, b"hi")
    >>> cols = ColumnBuffers()
    >>> cols.keys.append("k")
    >>> scan_columns(bytes(128) + frame * 2, 0, 128, -1, 1 << 20, {b"k": 0}, cols) - 128 == 2 * len(frame)
    True
    >>> cols.seq.tolist(), bytes(cols.data)
    ([1, 1], b'hihi')
    """
    off = pos % interval
    i = pos - base
    n = len(buf)
    if not off or i < 0 or i >= n:
        return pos
    stop = min(n, i + interval - off)
    limit = n if until < 0 else until - base
    unpack = FRAME_HEAD.unpack_from
    crc = _crc16_pure
    get = keymap.get
    max_ts = MAX_TIMESTAMP_MS
    sep = cols.separator
    data = cols.data
    add_code, add_shard, add_seq, add_ts, add_offset, add_end = (
        cols.key_code.append,
        cols.shard_id.append,
        cols.seq.append,
        cols.timestamp_ms.append,
        cols.offset.append,
        cols.data_end.append,
    )
    while i < limit:
        h = i + 1 + buf[i]
        p = h + 28
        if p > stop:
            break
        shard, seq, ts, size = unpack(buf, h)
        e = p + size + 3
        if e > stop or ts > max_ts:
            break
        code = get(buf[i + 1 : h])
        if code is None:
            break
        payload = buf[p : e - 3]
        if crc(payload) != (buf[e - 3] << 8 | buf[e - 2]):
            break
        if code >= 0:
            add_code(code)
            add_shard(shard)
            add_seq(seq)
            add_ts(ts)
            add_offset(base + i)
            data += payload
            add_end(len(data))
            data += sep
        i = e
        if i >= stop:
            break
    return base + i


def split_payloads(data: bytes | bytearray | memoryview, ends: array, gap: int) -> list[bytes]:
    """Cut a buffer of payloads into one bytes object per payload.

    Parameters
    ----------
    data
        The payloads back to back, each followed by ``gap`` separator bytes.
    ends
        Where each payload ends in ``data`` (an ``array("q")``).
    gap
        The separator's length (0 or 1).

    Returns
    -------
    list of bytes
        The payloads.

    Examples
    --------
    >>> from array import array
    >>> split_payloads(b"ab\\ncd\\n", array("q", [2, 5]), 1)
    [b'ab', b'cd']
    """
    out = []
    start = 0
    view = memoryview(data)
    for end in ends:
        out.append(view[start:end].tobytes())
        start = end + gap
    return out


def compact_payloads(data: bytes | bytearray | memoryview, ends: array, gap: int) -> bytes:
    """The payloads of a buffer back to back, their separators left out (one Arrow value buffer).

    Parameters
    ----------
    data, ends, gap
        As for :func:`split_payloads`.

    Returns
    -------
    bytes
        ``b"".join(split_payloads(data, ends, gap))``.

    Examples
    --------
    >>> from array import array
    >>> compact_payloads(b"ab\\ncd\\n", array("q", [2, 5]), 1)
    b'abcd'
    """
    return b"".join(split_payloads_pure(data, ends, gap))


def payload_lines(data: bytes | bytearray | memoryview, ends: array, first: int, last: int, gap: int) -> bytes | None:
    """Payloads ``first`` to ``last - 1`` of a buffer as NDJSON: each followed by ``b"\\n"``.

    What ``pyarrow.json`` reads, one payload per line, built from a buffer whose payloads are back to
    back (``gap`` 0) or already newline-separated (``gap`` 1); the compiled twin copies with the GIL
    released, so a worker thread can build its lines while another thread runs Python.

    Parameters
    ----------
    data, ends, gap
        As for :func:`split_payloads`.
    first, last
        The payloads wanted: ``split_payloads(data, ends, gap)[first:last]``
        (``0 <= first <= last <= len(ends)``).

    Returns
    -------
    bytes or None
        The lines; None when a payload holds a newline itself (the lines would not be one per payload).

    Raises
    ------
    ValueError
        ``first`` or ``last`` out of range.

    Examples
    --------
    >>> from array import array
    >>> payload_lines(b"abcd", array("q", [2, 4]), 0, 2, 0)
    b'ab\\ncd\\n'
    >>> payload_lines(b"a\\nb", array("q", [3]), 0, 1, 0) is None
    True
    """
    if not 0 <= first <= last <= len(ends):
        raise ValueError(f"payloads {first}:{last} are not within the {len(ends)} of the buffer")
    view = memoryview(data)
    start = 0 if first == 0 else ends[first - 1] + gap
    out = bytearray()
    for end in ends[first:last]:
        part = view[start:end].tobytes()
        if b"\n" in part:
            return None
        out += part
        out += b"\n"
        start = end + gap
    return bytes(out)


#: The pure-Python twins, kept under their own names for the twin tests and benchmarks.
scan_frames_pure = scan_frames
scan_frames = pick("scan_frames", scan_frames_pure)  # noqa: F811 (the twin this process runs)
scan_columns_pure = scan_columns
scan_columns = pick("scan_columns", scan_columns_pure)  # noqa: F811
split_payloads_pure = split_payloads
split_payloads = pick("split_payloads", split_payloads_pure)  # noqa: F811
compact_payloads_pure = compact_payloads
compact_payloads = pick("compact_payloads", compact_payloads_pure)  # noqa: F811
payload_lines_pure = payload_lines
payload_lines = pick("payload_lines", payload_lines_pure)  # noqa: F811
