"""Beacon-aligned byte ranges of a stream file, and one range read into ``read_stream``'s typed frame.

Pure: pandas and nbkit only (no Dask, no pyarrow), so the Dask reader, the Parquet export and the
tests share it.

How a file is cut (format spec §2, §6.5):

- A **range** is ``[start, end)`` in file offsets. Every boundary between two ranges is a beacon
  offset ``n × I``; the first range starts where a sequential read would start (just after the header,
  or where ``start=`` seeks to).
- A range **owns every frame that starts inside it** (``start <= Message.offset < end``). To find its
  first frame it resynchronises at its first beacon (§6.5: read the beacon, skip the cut frame's
  ``remaining`` bytes, again while that lands on the next boundary, so frames cut by several beacons are
  skipped whole) and then reads frames with :func:`nbkit.tabular.reader.read_rows` (``stop=end``; the read
  loop ``read_stream`` uses, over the frame scanner of :mod:`nbkit.wire.scan`; frames cut by a beacon are
  joined around it, §6.3)
  until the next frame would start at or after ``end``. The frame cut by ``end`` is read whole by the range
  that owns its start. So the ranges together hold exactly the frames of a sequential read, in order,
  each once.
- **EOS**: a sequential read stops after the first end-of-stream mark. :func:`find_eos` locates it
  when the plan is made (a byte search over the file, not a parse; see its doc), and the plan ends
  there: the range holding it stops after it, and no range starts after it. For a **URL** the plan
  searches only the file's last two beacon intervals, where writers leave the mark (appending
  overwrites it, format spec §9), so planning fetches a few small ranges, not the file; a range that
  meets an earlier mark still stops after it, as every reader does.
- **URLs**: ``storage_options`` and ``block_size`` travel with the plan to every range read, so a
  worker that shares no disk with the client opens the URL itself and fetches, by range requests, only
  its own range plus the one frame crossing its end (:mod:`nbkit.transport.source`).

``read_range`` builds rows with :class:`nbkit.tabular.FrameBuilder`, the builder
``nbkit.read_stream`` uses, applying the same filters in the same order, so dtypes and values are the
same; the frame's index holds the frames' byte offsets (the same values as its ``offset`` column).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from nbkit.errors import FormatError, SeekError
from nbkit.tabular import FrameBuilder, PayloadMode, Selection, json_values
from nbkit.tabular.reader import read_rows
from nbkit.transport.file_reader import CHUNK, StreamReader
from nbkit.transport.messages import Message, ReadEnd
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.ssformat import HEADER_SIZE

__all__ = [
    "FIELD_MODES",
    "ByteRange",
    "Plan",
    "conform_json",
    "empty_frame",
    "find_eos",
    "json_fields_of",
    "plan_ranges",
    "read_range",
]

#: Payload modes with ``payload.<field>`` columns, which every partition must have alike.
FIELD_MODES = ("json", "objects")
#: Default partition size: 64 MiB of file per range.
DEFAULT_PARTITION_SIZE = 64 << 20
#: The first 22 bytes of an end-of-stream frame: K (21) and the key SEA_STREAMER_INTERNAL.
_EOS_HEAD = bytes((len(INTERNAL_KEY),)) + INTERNAL_KEY.encode("ascii")


# -- what to keep ----------------------------------------------------------------------------------


# Selection and selection() live in nbkit.tabular: one way to read read_stream's options.
_EVERYTHING = Selection()


# -- planning --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ByteRange:
    """Frames starting in ``[start, end)``; ``beacon`` > 0: resync at beacon ``beacon`` (``start`` is
    ``beacon × interval``); 0: ``start`` is itself a frame position (the first range)."""

    start: int
    end: int
    beacon: int = 0


@dataclass(frozen=True, slots=True)
class Plan:
    """The ranges of one read of ``path``: a snapshot of the file at ``size`` bytes.

    ``eos``: offset of the end-of-stream frame the read stops at (None: none). ``tail``: how a
    sequential read would end when it is not at an EOS (``truncated`` warns), None when not checked.
    """

    path: str
    interval: int
    size: int
    first: int
    ranges: tuple[ByteRange, ...]
    eos: int | None
    tail: ReadEnd | None
    #: How to open ``path`` again (``storage_options``, ``block_size``), for each range read.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: What identifies this version of the file (size, modification time, inode or ETag): task keys.
    stamp: tuple[Any, ...] = ()

    @property
    def divisions(self) -> tuple[int, ...]:
        """Dask divisions on the frame offsets: each range's start, then the largest possible offset."""
        last = self.ranges[-1]
        return tuple(r.start for r in self.ranges) + (max(last.start, last.end - 1),)


def _open_options(storage_options: Mapping[str, Any] | None, block_size: int | None) -> dict[str, Any]:
    """The :class:`StreamReader` keywords that open ``path`` where it lies (a URL's ``storage_options``,
    ``block_size``): only those given, so a plan keeps them and every range's reader opens the same way."""
    options: dict[str, Any] = {}
    if storage_options:
        options["storage_options"] = dict(storage_options)
    if block_size is not None:
        options["block_size"] = block_size
    return options


def plan_ranges(
    path: str | os.PathLike,
    *,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    start: FilePosition | None = None,
    key: str | None = None,
    check_tail: bool = True,
    sel: Selection | None = None,
    storage_options: Mapping[str, Any] | None = None,
    block_size: int | None = None,
) -> Plan:
    """Cut ``path`` into beacon-aligned ranges of about ``partition_size`` bytes (a whole number of
    beacon intervals, at least one). A file smaller than one interval is one range.

    ``start``/``key`` seek as :class:`StreamReader` does (the first range starts there); a ``sel`` with a
    time or sequence window narrows the plan to the bytes :meth:`Selection.open_window` finds from the
    beacons (as ``read_stream`` reads them). Also finds the EOS the read stops at and (``check_tail``)
    whether the file ends in a partial frame. ``storage_options``/``block_size``: for a URL, as for
    :class:`StreamReader`; kept in the plan.
    """
    path = os.fspath(path)
    if partition_size < 1:
        raise ValueError(f"partition_size must be a positive number of bytes, not {partition_size}")
    options = _open_options(storage_options, block_size)
    with StreamReader(path, start=start, key=key, **options) as reader:
        interval = reader.interval
        size = reader.size()
        if sel is not None:
            sel.check_keys_named(reader)  # a key the file does not hold raises, naming the keys it does
        window = (sel or _EVERYTHING).open_window(reader)
        first = window.start
        stamp = reader.source.stamp()
        remote = reader.source.remote
    stop_at = size if window.stop is None else window.stop
    # a URL: search the tail only (see the module doc), from the frame after the beacon two intervals back
    search_from = first
    if remote and stop_at // interval >= 2:
        search_from = max(first, (stop_at // interval - 1) * interval)
    eos = find_eos(path, search_from, stop_at, interval, **options)
    stop = size if eos is None else eos + 1  # frames starting before `stop` belong to the read
    if window.stop is not None and eos is None:
        stop = min(stop, window.stop)
    step = max(interval, partition_size // interval * interval)
    ranges = []
    lo, beacon = first, 0
    b = (first // step + 1) * step
    while b < stop:
        ranges.append(ByteRange(lo, b, beacon))
        lo, beacon = b, b // interval
        b += step
    ranges.append(ByteRange(lo, max(lo, stop), beacon))
    tail = (
        _tail_end(path, interval, size, first, options) if check_tail and eos is None and window.stop is None else None
    )
    return Plan(path, interval, size, first, tuple(ranges), eos, tail, options, stamp)


def _tail_end(path: str, interval: int, size: int, first: int, options: Mapping[str, Any]) -> ReadEnd | None:
    """How a sequential read ends (``end``/``truncated``), by reading from the last usable beacon."""
    with StreamReader(path, **options) as reader:
        n = size // interval
        while True:
            boundary = n * interval
            if boundary <= first:
                reader.seek_offset(first)
                break
            try:
                reader.resync(n)
                break
            except SeekError:  # the file ends inside that beacon: start one interval earlier
                n -= 1
        try:
            while reader.poll() is not None:
                pass
        except FormatError:
            return None  # damaged data: the partition that owns it raises, as read_stream does
        return reader.end


def find_eos(
    path: str | os.PathLike,
    start: int,
    size: int,
    interval: int,
    *,
    storage_options: Mapping[str, Any] | None = None,
    block_size: int | None = None,
) -> int | None:
    """Offset of the first end-of-stream frame at or after frame position ``start``, or None.

    A byte search, not a parse: it looks for the frame head ``\\x15SEA_STREAMER_INTERNAL`` in the
    file's data bytes (hits inside beacons, whose markers look the same, are skipped), including
    heads cut by a beacon, and checks each hit by parsing from the beacon before it (§6.5) whether a
    frame starts there that is an EOS. Reading costs about what copying the file does; hits other
    than a real EOS are rare (a payload that embeds the key). ``start`` must be a frame position (a
    range's start); a URL is searched by range requests (``storage_options``, ``block_size``).
    """
    path = os.fspath(path)
    opened = StreamReader(path, stop_at_eos=False, **_open_options(storage_options, block_size))
    with opened as reader:
        if start > HEADER_SIZE and start % interval == 0:
            reader.resync(start // interval)  # a boundary: the frame position after its beacon
            start = reader.pos
        pread = reader.source.pread
        beacon_sizes: dict[int, int] = {}

        def beacon_size(b: int) -> int:
            s = beacon_sizes.get(b)
            if s is None:
                try:
                    s = reader.beacon_at(b).size
                except Exception:  # incomplete or damaged beacon: no data after it to search
                    s = interval
                beacon_sizes[b] = s
            return s

        for h in _eos_candidates(pread, start, size, interval, beacon_size):
            if _eos_at(reader, h, start):
                return h
    return None


def _eos_candidates(
    pread: Callable[[int, int], bytes], start: int, size: int, interval: int, beacon_size: Callable[[int], int]
) -> Iterator[int]:
    """Offsets (ascending) where an EOS frame head may start in the data bytes after ``start``."""
    n = len(_EOS_HEAD)
    chunk = max(interval, CHUNK // interval * interval)
    pos = start
    while pos < size:
        stop = min(size, (pos // chunk + 1) * chunk)
        data = pread(stop - pos + n - 1, pos)
        hits = []
        i = data.find(_EOS_HEAD)
        while i != -1 and pos + i < stop:
            hits.append(pos + i)
            i = data.find(_EOS_HEAD, i + 1)
        # heads cut by the beacon at a boundary b: a prefix of _EOS_HEAD ends right before b
        b = (pos // interval + 1) * interval
        while b <= stop and b < size:
            lo = max(pos, b - (n - 1))
            tail = data[lo - pos : b - pos]
            j = tail.find(_EOS_HEAD[:1])
            while j != -1:
                cut = len(tail) - j
                if _EOS_HEAD.startswith(tail[j:]):
                    s = beacon_size(b)
                    rest = pread(n - cut, b + s)
                    if rest == _EOS_HEAD[cut:]:
                        hits.append(b - cut)
                j = tail.find(_EOS_HEAD[:1], j + 1)
            b += interval
        for h in sorted(hits):
            boundary = h - h % interval
            if boundary >= interval and h - boundary < beacon_size(boundary):
                continue  # inside a beacon: a marker of the internal stream, not a frame
            yield h
        pos = stop


def _eos_at(reader: StreamReader, h: int, first: int) -> bool:
    """True when a frame starts at ``h`` and is an end-of-stream mark."""
    interval = reader.interval
    n = h // interval
    try:
        start = first
        if n * interval > first:
            reader.resync(n)
            start = reader.pos
        reader.seek_offset(start)  # a look before this one may have ended the read
        while reader.pos <= h:
            msg = reader.poll()
            if not isinstance(msg, Message):  # replay: None, the end (NEED_MORE is for followers)
                return False
            if msg.offset >= h:
                return msg.offset == h and msg.is_eos
    except (FormatError, SeekError):
        return False
    return False


# -- reading one range -----------------------------------------------------------------------------


def read_range(
    path: str | os.PathLike,
    rng: ByteRange,
    sel: Selection = _EVERYTHING,
    *,
    json_fields: Mapping[str, Any] | None = None,
    on_bad_frames: str = "error",
    storage_options: Mapping[str, Any] | None = None,
    block_size: int | None = None,
) -> pd.DataFrame:
    """The frames starting in ``rng`` as ``nbkit.read_stream`` would type them, indexed by offset.

    ``path`` may be a URL (``storage_options``, ``block_size`` as for :class:`StreamReader`): the read then
    fetches the range, and past its end only the frame that crosses it.

    Stops after an EOS, as a sequential read does. With ``payload="json"`` and ``json_fields``
    (``{field: dtype}``), the ``payload.<field>`` columns are made to match (:func:`conform_json`).
    ``on_bad_frames`` as for ``read_stream``: with "warn"/"skip" a damaged beacon at the range's start
    is skipped like any damage, so the ranges together hold what one sequential salvage read returns.
    """
    cols = FrameBuilder(sel.payload)
    if rng.start < rng.end:
        opened = StreamReader(path, on_bad_frames=on_bad_frames, **_open_options(storage_options, block_size))
        with opened as reader:
            reader.source.limit = rng.end  # the range's own bytes (a seek's probes included)
            started = True
            if rng.beacon:
                try:
                    reader.resync(rng.beacon)
                except SeekError:  # the file ends inside this beacon: nothing starts in the range
                    started = False
                except FormatError:
                    if on_bad_frames == "error":
                        raise
                    reader.seek_offset(rng.start)  # a damaged beacon: the salvage read steps to the next intact one
            else:
                reader.seek_offset(rng.start)
            if started:
                for rows in read_rows(reader, sel, stop=rng.end):
                    cols.extend(rows)
    frame = cols.frame("file", release=True)
    frame.index = pd.Index(frame["offset"].to_numpy(dtype="int64"), dtype="int64")
    if json_fields is not None and sel.payload in FIELD_MODES:
        frame = conform_json(frame, json_fields, path=os.fspath(path), payload=sel.payload)
    return frame


def empty_frame(payload: PayloadMode = "auto", json_fields: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """A zero-row frame with read_range's columns, dtypes and int64 index."""
    frame = FrameBuilder(payload).frame("file")
    frame.index = pd.Index([], dtype="int64")
    if json_fields is not None and payload in FIELD_MODES:
        frame = conform_json(frame, json_fields, payload=payload)
    return frame


# -- json columns ----------------------------------------------------------------------------------


def json_fields_of(frame: pd.DataFrame) -> dict[str, Any]:
    """``{field: dtype}`` of a json-mode frame's ``payload.<field>`` columns, in column order."""
    return {c[len("payload.") :]: frame[c].dtype for c in frame.columns if c.startswith("payload.")}


def _missing(values: Sequence[Any]) -> np.ndarray:
    return np.asarray(pd.isna(pd.Series(values, dtype=object)), dtype=bool)


def conform_json(
    frame: pd.DataFrame,
    fields: Mapping[str, Any] | Sequence[str],
    *,
    path: str | None = None,
    payload: PayloadMode = "json",
) -> pd.DataFrame:
    """Give a json-mode frame exactly the ``payload.<field>`` columns ``fields`` names, with their dtypes.

    ``fields`` is ``{field: dtype}`` (a plain sequence means dtype ``object``). A field the frame lacks
    becomes an all-missing column; a column of another dtype is converted when that loses nothing.
    A field not in ``fields``, or a conversion that would lose values, raises :class:`NbkitError`
    naming the field and the fix (pass ``json_fields=``). ``payload``: the frame's payload mode
    (``"objects"``: parsed values; ``"json"``: JSON text, parsed here only if a field must be rebuilt).
    """
    if not isinstance(fields, Mapping):
        fields = {name: object for name in fields}
    where = f"{path}: " if path else ""
    have = [c for c in frame.columns if c.startswith("payload.")]
    extra = [c[len("payload.") :] for c in have if c[len("payload.") :] not in fields]
    if extra:
        at = _first_offset(frame, [f"payload.{e}" for e in extra])
        raise FormatError(
            f"{where}payload field(s) {', '.join(map(repr, extra))} first appear at byte offset {at}, "
            f"after the sample that fixed the json columns ({', '.join(map(repr, fields)) or 'none'}); "
            "pass json_fields={name: dtype, ...} naming every field, or a larger sample="
        )
    base = frame[[c for c in frame.columns if not c.startswith("payload.")]]
    out = {}
    objects = None
    for name, dtype in fields.items():
        col = f"payload.{name}"
        dtype = pd.api.types.pandas_dtype(dtype)
        series = frame.get(col)
        if series is not None and series.dtype == dtype:
            out[col] = series
            continue
        if objects is None:
            values = frame["payload"].tolist()
            if payload == "json":  # the column holds the JSON text: parse it (only on this path)
                values = json_values([v.encode("utf-8") if isinstance(v, str) else v for v in values])
            objects = [p if isinstance(p, dict) else None for p in values]
        raw = pd.Series([o.get(name) if o else None for o in objects], index=frame.index, dtype=object)
        out[col] = raw if pd.api.types.is_object_dtype(dtype) else _convert(raw.infer_objects(), dtype, name, where)
    if not out:
        return base.copy()
    return pd.concat([base, pd.DataFrame(out, index=frame.index)], axis=1)


def _convert(series: pd.Series, dtype: Any, name: str, where: str) -> pd.Series:
    if series.dtype == dtype:
        return series
    try:
        converted = series.astype(dtype)
        ok = len(series) == 0 or _same_values(series, converted)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise FormatError(
            f"{where}payload field {name!r} has values that dtype {dtype} cannot hold "
            f"(its values here are {series.dtype}; e.g. a missing value or another type after the sample); "
            f"pass json_fields={{{name!r}: 'object', ...}} (or another dtype that holds them)"
        )
    return converted


def _same_values(a: pd.Series, b: pd.Series) -> bool:
    left = a.astype(object).tolist()
    right = b.astype(object).tolist()
    miss_l = _missing(left)
    miss_r = _missing(right)
    if not np.array_equal(miss_l, miss_r):
        return False
    for x, y, m in zip(left, right, miss_l, strict=True):
        if m:
            continue
        if type(x) is not type(y) and not (_is_number(x) and _is_number(y)):
            return False
        if x != y:
            return False
    return True


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _first_offset(frame: pd.DataFrame, columns: list[str]) -> int | str:
    mask = frame[columns].notna().any(axis=1).to_numpy()
    hits = np.flatnonzero(mask)
    if not len(hits):
        return "?"
    return int(frame["offset"].iloc[int(hits[0])])
