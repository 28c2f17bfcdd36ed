"""Stream files and captured pipe output as pandas DataFrames, one row per message.

Columns (file and pipe alike; ``transport`` tells them apart):

===========  =======================  ===========================================================
column       dtype                    meaning
===========  =======================  ===========================================================
stream_key   category                 the message's stream key
shard_id     UInt64                   its shard (0 on pipes unless the line names one)
seq          UInt64                   its sequence number
timestamp    datetime64[ms, UTC]      its timestamp (NaT for a pipe line without one)
size         Int64                    payload size in bytes, after the envelope is removed
payload      object or str            bytes, str or parsed JSON; ``"columns"``: the JSON text (str)
retry_count  Int64                    ``x-ruststream-retry-count`` from the envelope, 0 when absent
attempt      Int64                    retry_count + 1 (first delivery = attempt 1)
headers      object                   dict of the envelope's headers ({} when none)
offset       Int64                    byte offset of the frame (file) or line number (pipe)
transport    category                 ``file`` or ``pipe``
===========  =======================  ===========================================================

``payload="json"`` and ``payload="columns"`` add a ``payload.<field>`` column per top-level field of
JSON-object payloads (int64, float64, bool, str, or object when mixed). ``"json"`` also parses every
payload into a Python object (dict, list, ...) in ``payload``, exactly as ``json.loads`` would;
``"columns"`` keeps ``payload`` as the JSON text (Arrow-backed str when every payload is UTF-8) and
builds the field columns without a Python object per row (pyarrow.json over one buffer of the
payloads; the row-by-row path where that could differ: nulls, nesting, integers beyond int64).
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter, methodcaller
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from nbkit.errors import Utf8Error
from nbkit.runtime.delivery import retry_count
from nbkit.transport.file_reader import FrameColumns, StreamReader
from nbkit.transport.positions import FilePosition, to_epoch_ms
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEYS
from nbkit.wire.stdio_line import LineDecoder, parse_line

FRAME_COLUMNS = (
    "stream_key",
    "shard_id",
    "seq",
    "timestamp",
    "size",
    "payload",
    "retry_count",
    "attempt",
    "headers",
    "offset",
    "transport",
)
PAYLOAD_MODES = ("auto", "bytes", "text", "json", "columns")
_PROGRESS_MIN_BYTES = 64 << 20


class _Columns:
    """Column lists filled per message (``add``) or a whole read at once (``extend``), turned into a
    typed DataFrame at the end. Envelopes and payloads are decoded there, column by column."""

    def __init__(self, payload_mode: str) -> None:
        if payload_mode not in PAYLOAD_MODES:
            raise ValueError(f"payload must be one of {', '.join(PAYLOAD_MODES)}, not {payload_mode!r}")
        self.mode = payload_mode
        self.keys: list[str] = []
        self.shards: list[int] = []
        self.seqs: list[int] = []
        self.times: list[int | None] = []
        self.raw: list[bytes] = []  # payloads as stored, envelope included
        self.offsets: list[int] = []

    def add(self, key: str, shard: int, seq: int, ts_ms: int | None, data: bytes, offset: int) -> None:
        self.keys.append(key)
        self.shards.append(shard)
        self.seqs.append(seq)
        self.times.append(ts_ms)
        self.raw.append(data)
        self.offsets.append(offset)

    def extend(self, cols: FrameColumns) -> None:
        """Add every message of a :meth:`StreamReader.read_columns` result (its lists are taken over)."""
        if not self.offsets:
            self.keys, self.shards, self.seqs, self.times, self.raw, self.offsets = (
                cols.stream_key,
                cols.shard_id,
                cols.seq,
                cols.timestamp_ms,
                cols.payload,
                cols.offset,
            )
            return
        self.keys += cols.stream_key
        self.shards += cols.shard_id
        self.seqs += cols.seq
        self.times += cols.timestamp_ms
        self.raw += cols.payload
        self.offsets += cols.offset

    def _unwrap(self) -> tuple[list[bytes], list[dict], list[int]]:
        """Bodies, headers and retry counts: envelopes (payloads starting ``rs``) decoded."""
        raw = self.raw
        n = len(raw)
        headers: list[dict] = [{} for _ in range(n)]
        counts = [0] * n
        hits = list(compress(range(n), map(_starts_rs, raw)))
        if not hits:
            return raw, headers, counts
        bodies = list(raw)
        for j in hits:
            found, body = envelope.decode(raw[j])
            headers[j] = found
            bodies[j] = body
            if found:
                counts[j] = retry_count(found)
        return bodies, headers, counts

    def _payloads(self, bodies: list[bytes], *, in_place: bool) -> list[Any]:
        """The payload column for the mode, converted a chunk at a time (message by message only in
        a chunk where some payload needs the fallback: not UTF-8, not JSON). ``in_place`` converts
        ``bodies`` itself, so each chunk's bytes are freed as its values are made."""
        if self.mode == "bytes":
            return bodies
        convert = _CONVERT[self.mode]
        out = bodies if in_place else list(bodies)
        for i in range(0, len(out), _CHUNK):
            out[i : i + _CHUNK] = convert(out[i : i + _CHUNK])
        return out

    def frame(self, transport: str, *, release: bool = False) -> pd.DataFrame:
        """The typed DataFrame. ``release=True`` converts the lists in place and lets each go once
        its column is built (the peak stays near the frame's own size); the builder is spent."""
        with _gc_paused():
            return self._frame(transport, release)

    def _frame(self, transport: str, release: bool) -> pd.DataFrame:
        n = len(self.keys)
        bodies, headers, count_list = self._unwrap()
        if release:
            self.raw = []  # ``bodies`` holds the only references now
        size_list = list(map(len, bodies))
        sizes = _int_array(size_list, "Int64")
        fields: dict[str, pd.Series] | None = None
        if self.mode == "columns":  # columnar: JSON text + field columns, no Python object per row
            payloads = _json_text_column(bodies, size_list)
            fields = _json_field_columns(bodies)
        elif self.mode == "json":
            fields = _arrow_json_fields(bodies)  # None: the exact, row-by-row path in _expand_json
            payloads = pd.Series(self._payloads(bodies, in_place=release), dtype=object)
        else:
            payloads = pd.Series(self._payloads(bodies, in_place=release), dtype=object)
        del bodies, size_list
        counts = _int_array(count_list, "Int64")
        columns: dict[str, Any] = {}
        for name, attr, build in (
            ("stream_key", "keys", _category),
            ("shard_id", "shards", _uint64_array),
            ("seq", "seqs", _uint64_array),
            ("timestamp", "times", _timestamps),
        ):
            columns[name] = build(getattr(self, attr))
            if release:
                setattr(self, attr, [])
        columns.update(
            size=sizes,
            payload=payloads,
            retry_count=counts,
            attempt=counts + 1,
            headers=pd.Series(headers, dtype=object),
            offset=_int_array(self.offsets, "Int64"),
            transport=pd.Categorical.from_codes(
                np.full(n, _TRANSPORTS.index(transport) if transport in _TRANSPORTS else -1, dtype=np.int8),
                categories=list(_TRANSPORTS),
            ),
        )
        if release:
            self.offsets = []
        del payloads, headers
        frame = pd.DataFrame(columns, columns=list(FRAME_COLUMNS))
        del columns
        if fields is not None:
            frame = _with_fields(frame, fields)
        elif self.mode == "json":
            frame = _expand_json(frame)
        return frame


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while millions of acyclic objects (parsed payloads, header
    dicts) are built: each of its passes would walk all of them, for nothing to collect."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_TRANSPORTS = ("file", "pipe")
_CHUNK = 1 << 16  # payloads converted per step
_starts_rs = methodcaller("startswith", b"rs")
_decode = methodcaller("decode", "utf-8")
_decode_replace = methodcaller("decode", "utf-8", "replace")


def _text_or_bytes(body: bytes) -> str | bytes:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body


def _auto_values(bodies: list[bytes]) -> list[str | bytes]:
    try:
        return list(map(_decode, bodies))
    except UnicodeDecodeError:
        return [_text_or_bytes(b) for b in bodies]


def _text_values(bodies: list[bytes]) -> list[str]:
    return list(map(_decode_replace, bodies))


def _json_value(body: bytes) -> Any:
    """One payload in ``json`` mode: what ``json.loads`` makes of its UTF-8 text; the text if it is not
    JSON; the bytes if it is not UTF-8. msgspec parses first (it gives the same values, big integers
    exact); what it rejects (NaN, Infinity, lone surrogates, ...) the standard library decides."""
    try:
        return _msgspec_decode(body)
    except msgspec.MsgspecError:
        pass
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return body
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _json_values(bodies: list[bytes]) -> list[Any]:
    """``[_json_value(b) for b in bodies]``, at msgspec's speed while every payload is plain JSON."""
    try:
        return list(map(_msgspec_decode, bodies))
    except msgspec.MsgspecError:
        return [_json_value(b) for b in bodies]


_msgspec_decode = msgspec.json.Decoder().decode


_CONVERT = {"auto": _auto_values, "text": _text_values, "json": _json_values}


def _uint64_array(values: list[int]):
    return _int_array(values, "UInt64")


def _int_array(values: list[int], dtype: str):
    """A nullable integer array (``Int64``/``UInt64``) from a list of ints, through numpy."""
    if not values:
        return pd.array(values, dtype=dtype)
    return pd.array(np.array(values, dtype=np.uint64 if dtype == "UInt64" else np.int64), dtype=dtype)


def _timestamps(values: list[int | None]):
    """``datetime64[ms, UTC]`` from epoch ms (None -> NaT)."""
    if not values or None in values:
        return pd.to_datetime(pd.array(values, dtype="Int64"), unit="ms", utc=True).astype("datetime64[ms, UTC]")
    return pd.DatetimeIndex(np.array(values, dtype=np.int64).view("datetime64[ms]")).tz_localize("UTC")


def _category(keys: list[str]) -> pd.Series:
    """What ``pd.Series(keys, dtype="category")`` gives (sorted categories), from codes: few distinct
    keys, many rows."""
    if not keys:
        return pd.Series(keys, dtype="category")
    categories = sorted(set(keys))
    index = {k: i for i, k in enumerate(categories)}
    codes = np.fromiter(map(index.__getitem__, keys), dtype=np.int32, count=len(keys))
    return pd.Series(pd.Categorical.from_codes(codes, categories=categories))


def _expand_json(frame: pd.DataFrame) -> pd.DataFrame:
    """Add a ``payload.<field>`` column for each top-level field of JSON-object payloads."""
    columns = _field_values(frame["payload"].tolist())
    extra = {f"payload.{name}": _inferred(values) for name, values in columns.items()}
    if not extra:
        return frame
    return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def _with_fields(frame: pd.DataFrame, fields: dict[str, pd.Series]) -> pd.DataFrame:
    """``frame`` with a ``payload.<field>`` column for each entry of ``fields`` (none: ``frame``)."""
    if not fields:
        return frame
    extra = {f"payload.{name}": series for name, series in fields.items()}
    return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def _json_text_column(bodies: list[bytes], sizes: list[int]) -> pd.Series:
    """``payload="columns"``: the payloads as text, one Arrow string array over one buffer when every
    payload is UTF-8 (pandas' str dtype); else what ``"auto"`` gives (str, or bytes where not UTF-8)."""
    if getattr(_STR_DTYPE, "storage", None) == "pyarrow":
        import pyarrow as pa

        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum(np.asarray(sizes, dtype=np.int64), out=offsets[1:])
        text = pa.LargeStringArray.from_buffers(len(bodies), pa.py_buffer(offsets), pa.py_buffer(b"".join(bodies)))
        try:
            text.validate(full=True)  # UTF-8 throughout
        except pa.ArrowInvalid:
            pass
        else:
            return pd.Series(text, dtype=_STR_DTYPE)
    return pd.Series(_auto_values(bodies), dtype=object)


def _json_field_columns(bodies: list[bytes]) -> dict[str, pd.Series]:
    """The ``payload.<field>`` columns of ``payload="columns"``: through pyarrow.json when that gives
    exactly what the row-by-row path gives, else that path (the same values ``"json"`` has)."""
    fields = _arrow_json_fields(bodies)
    if fields is not None:
        return fields
    return {name: _inferred(values) for name, values in _field_values(_json_values(bodies)).items()}


#: pyarrow types whose columns equal the row-by-row path's (int64, float64, bool, Arrow-backed str).
_ARROW_KINDS = ("int64", "double", "bool", "string", "large_string")


def _arrow_json_fields(bodies: list[bytes]) -> dict[str, pd.Series] | None:
    """The ``payload.<field>`` columns parsed by ``pyarrow.json`` from the payloads joined by newlines
    (one buffer, no Python object per value), or None when that could differ from the row-by-row
    path: pyarrow missing, a payload that is not one JSON object on one line, an empty one, a null,
    a nested value, a duplicate field, an integer beyond int64 (pyarrow makes it a double)."""
    if not bodies or getattr(_STR_DTYPE, "storage", None) != "pyarrow":
        return None
    try:
        import pyarrow as pa
        import pyarrow.json as pa_json
    except ImportError:
        return None
    joined = b"\n".join(bodies)
    if joined.count(b"\n") != len(bodies) - 1:  # a payload with a newline inside: rows would not line up
        return None
    try:
        table = pa_json.read_json(pa.BufferReader(joined))
        stamps = [f.name for f in table.schema if pa.types.is_timestamp(f.type) or pa.types.is_date(f.type)]
        if stamps:  # pyarrow reads ISO-looking text as timestamps: read those fields as text
            schema = pa.schema([pa.field(name, pa.string()) for name in stamps])
            options = pa_json.ParseOptions(explicit_schema=schema)
            order = table.column_names
            table = pa_json.read_json(pa.BufferReader(joined), parse_options=options).select(order)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(bodies):  # empty payloads (blank lines) are skipped by pyarrow
        return None
    columns: dict[str, pd.Series] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = str(column.type)
        if column.null_count or kind not in _ARROW_KINDS:
            return None
        if kind in ("string", "large_string"):
            columns[name] = pd.Series(column, dtype=_STR_DTYPE)
            continue
        values = column.to_numpy()
        if kind == "double" and np.any((np.abs(values) >= 2.0**63) & (values == np.floor(values))):
            return None  # perhaps an integer beyond int64, which the row-by-row path keeps exact
        columns[name] = pd.Series(values)
    return columns


def _field_values(payloads: list[Any]) -> dict[str, list[Any]]:
    """The values of each top-level field of the JSON-object payloads (None where a payload lacks it)."""
    columns = _same_fields(payloads)
    if columns is None:
        objects = [p if isinstance(p, dict) else None for p in payloads]
        fields: dict[str, None] = {}
        for obj in objects:
            if obj:
                for name in obj:
                    fields.setdefault(name, None)
        columns = {name: [o.get(name) if o else None for o in objects] for name in fields}
    return columns


def _inferred(values: list[Any]) -> pd.Series:
    """``pd.Series(values, dtype=object).infer_objects()``, built directly when every value has the
    same type: str (inferred as pandas does for text), int (in int64), float or bool (numpy)."""
    kinds = set(map(type, values))
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind is str:
            return _text_series(values)
        dtype = _NUMPY_KINDS.get(kind)
        if dtype is not None:
            try:
                return pd.Series(np.array(values, dtype=dtype))
            except OverflowError:  # ints beyond int64: inference decides (uint64 or object)
                pass
    series = pd.Series(values, dtype=object)
    try:
        return series.infer_objects()
    except UnicodeEncodeError:  # text with no UTF-8 form (a lone surrogate) stays object
        return series


_NUMPY_KINDS = {int: np.int64, float: np.float64, bool: np.bool_}
_STR_DTYPE = pd.Series([], dtype="str").dtype  # what pandas infers for text: pyarrow-backed "str" in pandas 3


def _text_series(values: list[str]) -> pd.Series:
    """What inference gives for str values (pandas' str dtype), built directly: through pyarrow when
    that is its storage (pandas itself goes through an object array first, ~4x slower on a million
    rows). Object dtype when a value has no UTF-8 form (a lone surrogate from a JSON ``\\ud800``)."""
    try:
        if getattr(_STR_DTYPE, "storage", None) == "pyarrow":
            import pyarrow as pa

            return pd.Series(pa.array(values, type=pa.large_string()), dtype=_STR_DTYPE)
        return pd.Series(values, dtype="str")
    except UnicodeEncodeError:
        return pd.Series(values, dtype=object)


def _same_fields(payloads: list[Any]) -> dict[str, list[Any]] | None:
    """The field columns when every payload is a dict with the same fields (the usual case), built
    at C speed; None otherwise (then the general, row-by-row path decides)."""
    if not payloads or set(map(type, payloads)) != {dict}:
        return None
    names = list(payloads[0])
    if not names or set(map(len, payloads)) != {len(names)}:
        return None
    try:
        return {name: list(map(itemgetter(name), payloads)) for name in names}
    except KeyError:
        return None


def _as_ms(value: Any, what: str) -> int:
    if isinstance(value, str):
        parsed = pd.Timestamp(value)
        if parsed.tzinfo is None:
            parsed = parsed.tz_localize("UTC")
        return int(parsed.value // 1_000_000)
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    try:
        return to_epoch_ms(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} takes epoch ms, an aware datetime or an ISO string: {exc}") from None


@dataclass(frozen=True, slots=True)
class Selection:
    """The row filters and payload mode of a read, as ``nbkit.read_stream`` takes them."""

    payload: str = "auto"
    keys: frozenset[str] | None = None
    after_ms: int | None = None
    end_ms: int | None = None
    include_internal: bool = False


def selection(
    *,
    keys: Iterable[str] | str | None = None,
    payload: str = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    include_internal: bool = False,
) -> tuple[Selection, FilePosition | None, str | None]:
    """Check ``read_stream``-style options; returns the Selection, a start FilePosition and its seek key."""
    _Columns(payload)  # an unknown mode raises ValueError here
    wanted = frozenset({keys}) if isinstance(keys, str) else (frozenset(keys) if keys is not None else None)
    position = None
    after_ms = None
    if isinstance(start, FilePosition):
        position = start
    elif start is not None:
        after_ms = _as_ms(start, "start")
    end_ms = None if end is None else _as_ms(end, "end")
    seek_key = None
    if position is not None and position.kind in ("sequence", "timestamp"):
        if not wanted or len(wanted) != 1:
            raise ValueError(f"start={position!r} needs exactly one stream key: pass keys='name'")
        seek_key = next(iter(wanted))
    sel = Selection(payload, wanted, after_ms, end_ms, include_internal)
    return sel, position, seek_key


def read_stream(
    path: str | os.PathLike,
    *,
    keys: Iterable[str] | str | None = None,
    payload: str = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    progress: bool | None = None,
    include_internal: bool = False,
    on_bad_frames: str = "error",
) -> pd.DataFrame:
    """Load a ``.ss`` stream file into a DataFrame, one row per message.

    ``start`` is a FilePosition or a time (messages strictly after it); ``end`` a time (messages
    before it). EOS and the internal priming key are left out unless ``include_internal``. How the read
    ended is in ``frame.attrs["read_end"]``; a partial frame at the tail warns.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file.
    keys : str or iterable of str, optional
        Keep only these stream keys (the others are skipped cheaply).
    payload : {"auto", "bytes", "text", "json", "columns"}
        ``"auto"``: text where UTF-8, else bytes; ``"json"``: parsed, and a JSON object's fields also as
        columns ``payload.<field>``; ``"columns"``: the ``payload.<field>`` columns, ``payload`` left as
        JSON text (the fast way to load JSON records, no Python object per row).
    start : FilePosition, datetime, int or str, optional
        Where to start: a position, or a time (epoch ms, aware datetime or ISO text).
    end : datetime, int or str, optional
        Keep the messages before this time.
    progress : bool, optional
        Show a progress bar (None: only for files over 64 MiB).
    include_internal : bool
        Keep SeaStreamer's internal messages (the EOS mark, the priming message).
    on_bad_frames : {"error", "warn", "skip"}
        What a damaged frame does (as pandas' ``read_csv(on_bad_lines=...)``): ``"error"`` raises;
        ``"skip"`` resumes at the next intact beacon and ``"warn"`` also warns once per damaged region.
        Either way ``frame.attrs["damaged"]`` lists the regions skipped (dicts: ``start``, ``end``,
        ``problem``, ``skipped`` bytes; empty for an intact file).

    Returns
    -------
    pandas.DataFrame
        One row per message, with the columns ``stream_key`` (category), ``shard_id``, ``seq`` (UInt64),
        ``timestamp`` (datetime64[ms, UTC]), ``size`` (payload bytes), ``payload``, ``retry_count``,
        ``attempt`` (retry_count + 1), ``headers`` (dict), ``offset`` (the frame's byte offset) and
        ``transport`` (``"file"``), then any ``payload.<field>`` columns.

    Examples
    --------
    >>> from nbkit import StreamWriter, read_stream
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1, "item": "book"}')
    ...     _ = writer.write("audit", b"checked")
    ...     _ = writer.write("orders", b'{"id": 2, "item": "lamp"}')
    >>> df = read_stream("orders.ss", keys="orders", payload="json")
    >>> df[["seq", "attempt", "payload.item"]]
       seq  attempt payload.item
    0    1        1         book
    1    2        1         lamp
    """
    sel, position, seek_key = selection(
        keys=keys, payload=payload, start=start, end=end, include_internal=include_internal
    )
    wanted, after_ms, end_ms = sel.keys, sel.after_ms, sel.end_ms
    cols = _Columns(payload)
    accept = None
    if wanted is not None or not include_internal:

        def accept(key: str) -> bool:
            return (wanted is None or key in wanted) and (include_internal or key not in INTERNAL_KEYS)

    with StreamReader(path, start=position, key=seek_key, on_bad_frames=on_bad_frames) as reader:
        bar = _progress_bar(reader, progress)
        got = reader.read_columns(accept=accept, progress=None if bar is None else bar.update)
        if bar is not None:
            bar.close()
        ended = reader.end
        damaged = [region.to_dict() for region in reader.damaged]
    if after_ms is not None or end_ms is not None:
        got = _in_window(got, after_ms, end_ms)
    cols.extend(got)
    del got
    frame = cols.frame("file", release=True)
    frame.attrs["damaged"] = damaged
    if ended is not None:
        frame.attrs["read_end"] = ended.describe()
        if ended.reason == "truncated":
            warnings.warn(f"{os.fspath(path)}: {ended.describe()}", stacklevel=2)
    return frame


def _in_window(cols: FrameColumns, after_ms: int | None, end_ms: int | None) -> FrameColumns:
    """The messages later than ``after_ms`` and earlier than ``end_ms`` (either may be None)."""
    lo = -1 if after_ms is None else after_ms
    hi = None if end_ms is None else end_ms
    keep = [lo < ts and (hi is None or ts < hi) for ts in cols.timestamp_ms]
    return FrameColumns(*(list(compress(column, keep)) for column in cols))


def _progress_bar(reader: StreamReader, progress: bool | None):
    if progress is False:
        return None
    size = reader.size()
    if progress is None and size < _PROGRESS_MIN_BYTES:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=size - reader.pos, unit="B", unit_scale=True, desc=os.path.basename(reader.path))


def read_pipe(
    source: str | os.PathLike | Iterable[str],
    *,
    keys: Iterable[str] | str | None = None,
    payload: str = "auto",
) -> pd.DataFrame:
    """Load captured stdio lines (a stage's saved stdout) into the same frame shape as read_stream.

    Fields a line leaves out are filled as the upstream consumer does (key ``broadcast``, shard 0,
    counted seq); a missing timestamp stays NaT. ``offset`` holds the line number.

    Parameters
    ----------
    source : str, os.PathLike or iterable of str
        A path (``pathlib.Path``, or a str naming an existing file), a string of lines, or an iterable
        of lines.
    keys : str or iterable of str, optional
        Keep only these stream keys.
    payload : {"auto", "bytes", "text", "json"}
        How to present payloads, as in :func:`read_stream`.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`read_stream`, with ``transport`` ``"pipe"``.

    Examples
    --------
    >>> from nbkit import read_pipe
    >>> lines = ["[2024-01-01T00:00:00 | jobs | 0] hello", "[2024-01-01T00:00:01 | jobs | 1] world"]
    >>> read_pipe(lines)[["stream_key", "seq", "payload", "offset"]]
      stream_key  seq payload  offset
    0       jobs    0   hello       1
    1       jobs    1   world       2
    """
    wanted = {keys} if isinstance(keys, str) else (set(keys) if keys is not None else None)
    cols = _Columns(payload)
    decoder = LineDecoder()
    for lineno, line in enumerate(_lines(source), start=1):
        if line.endswith("\n"):
            line = line[:-1]
        if not line:
            continue
        parsed = parse_line(line, lineno=lineno)
        resolved = decoder.resolve(parsed, now_ms=0)
        if wanted is not None and resolved.stream_key not in wanted:
            continue
        ts = parsed.timestamp_ms
        cols.add(
            resolved.stream_key,
            resolved.shard_id,
            resolved.seq,
            ts,
            resolved.payload.encode("utf-8"),
            lineno,
        )
    return cols.frame("pipe", release=True)


def _lines(source: Any) -> Iterable[str]:
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and os.path.isfile(source)):
        try:
            with open(source, encoding="utf-8") as f:
                return f.read().split("\n")
        except UnicodeDecodeError as exc:
            raise Utf8Error(f"not UTF-8 text (byte {exc.start}); not stdio lines", path=os.fspath(source)) from None
    if isinstance(source, str):
        return source.split("\n")
    if isinstance(source, bytes):
        raise TypeError("read_pipe takes text lines; decode bytes first")
    return source


def concat_frames(*frames: pd.DataFrame) -> pd.DataFrame:
    """Stack frames from read_stream/read_pipe (e.g. a file and a pipe) keeping the categorical dtypes.

    Parameters
    ----------
    *frames : pandas.DataFrame
        Frames made by :func:`read_stream` or :func:`read_pipe`.

    Returns
    -------
    pandas.DataFrame
        Their rows in order, with a fresh index and ``stream_key``/``transport`` still categorical.

    Examples
    --------
    >>> from nbkit import StreamWriter, concat_frames, read_pipe, read_stream
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"paid")
    >>> both = concat_frames(read_stream("orders.ss"), read_pipe(["[2024-01-01T00:00:00 | jobs | 0] hello"]))
    >>> both[["transport", "stream_key", "payload"]]
      transport stream_key payload
    0      file     orders    paid
    1      pipe       jobs   hello
    """
    if not frames:
        raise ValueError("concat_frames needs at least one frame")
    keys = sorted({k for f in frames for k in f["stream_key"].astype(str)})
    parts = []
    for f in frames:
        f = f.copy()
        f["stream_key"] = pd.Categorical(f["stream_key"].astype(str), categories=keys)
        parts.append(f)
    return pd.concat(parts, ignore_index=True)
