"""Stream files (or ``read_stream`` frames) to Parquet, and back: ``to_parquet`` / ``read_parquet``.

Needs pyarrow (the ``scale`` extra); this module imports it on first use, so importing it (and
``nbkit.to_parquet``) always works and only a call says what to install.

Parquet layout 2 (one file; from a stream file, one row group per beacon-aligned range, so memory stays
at one range whatever the file's size). The file holds exactly the frame's columns, in its order; the
key-value metadata ``nbkit`` records the layout version and payload mode, ``nbkit.dtypes`` each column's
pandas dtype, so :func:`read_parquet` gives the frame back with the same dtypes:

=============  ========================================  =============================================
column         Arrow type                                holds
=============  ========================================  =============================================
stream_key     dictionary<int32, string>                 category (sorted keys)
shard_id, seq  int64                                     Int64 (uint64/UInt64 above 2**63 - 1)
timestamp      timestamp[ms, tz=UTC]                     null for a pipe line without one
size           int64
payload        large_binary, or large_string ("text")    the payload mode's Parquet column
                                                         (:mod:`nbkit.tabular.modes`): the payload as
                                                         stored (``auto``, ``json``, ``bytes``), the
                                                         text (``text``), the JSON text of each parsed
                                                         value (``objects``; bytes as they are)
retry_count,   int64
attempt
headers        map<string, struct<text: string,          the envelope headers: text values in ``text``,
               bytes: binary>>                           ``rs2:`` bytes values in ``bytes``
offset         int64
transport      dictionary<int32, string>
payload.<f>    int64 / double / bool / large_string      json, objects: one column per field, null where
                                                         a payload lacks it (Int64 / boolean in pandas);
                                                         object columns (mixed or nested) as JSON text
=============  ========================================  =============================================

:func:`read_parquet` reads only the columns ``columns=`` names and, with ``keys=``, skips row groups
without those keys (pyarrow's row-group statistics) and filters the rest while decoding. Files of layout 1
(``payload_bytes`` and ``headers_bytes`` columns beside the frame's) still read, to the same frame.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from nbkit.errors import FormatError
from nbkit.scale import require
from nbkit.scale.partitions import (
    DEFAULT_PARTITION_SIZE,
    ByteRange,
    json_fields_of,
    plan_ranges,
    read_range,
)
from nbkit.tabular import (
    FRAME_COLUMNS,
    PayloadMode,
    expand_json,
    json_field_columns,
    json_values,
    selection,
    with_fields,
)
from nbkit.tabular.headers import EMPTY_HEADERS, empty_headers, frozen_headers
from nbkit.tabular.modes import Mode, payload_mode
from nbkit.tabular.payloads import BYTES_DTYPE, STR_DTYPE
from nbkit.transport.damage import check_on_bad_frames
from nbkit.transport.positions import FilePosition
from nbkit.transport.source import is_url, open_output

__all__ = ["LAYOUT_VERSION", "frame_to_table", "read_parquet", "to_parquet"]

#: The layout :func:`to_parquet` writes (1: the layout before, with ``payload_bytes``/``headers_bytes``).
LAYOUT_VERSION = 2
_META_KEY = b"nbkit"
_DTYPES_KEY = b"nbkit.dtypes"
_FEATURE = "nbkit.to_parquet"
_TRANSPORTS = ["file", "pipe"]
#: Field dtypes widened while a stream file is exported range by range (a later range may lack the field);
#: the file records the narrow one when no row lacked it, as read_stream gives.
_WIDE = {"int64": "Int64", "bool": "boolean"}
_NARROW = {wide: narrow for narrow, wide in _WIDE.items()}


def _pa() -> tuple[Any, Any]:
    pa = require("pyarrow", feature=_FEATURE)
    pq = require("pyarrow.parquet", feature=_FEATURE)
    return pa, pq


# -- frame -> table --------------------------------------------------------------------------------


def _infer_mode(frame: pd.DataFrame) -> str:
    """The payload mode a frame was read with, from its columns and values: field columns mean ``"json"``
    (text payloads) or ``"objects"`` (parsed ones); parsed values without field columns, ``"objects"``."""
    payload = frame["payload"]
    fields = any(str(c).startswith("payload.") for c in frame.columns)
    if payload.dtype == STR_DTYPE:
        return "json" if fields else "text"
    if payload.dtype == BYTES_DTYPE and not fields:
        return "bytes"
    kinds = {type(v) for v in payload}
    if fields:
        return "json" if kinds <= {str, bytes} else "objects"
    if not kinds:
        return "auto"
    if kinds <= {bytes}:
        return "bytes"
    if kinds <= {str}:
        return "text"
    if kinds <= {str, bytes}:
        return "auto"
    return "objects"


def _check_columns(frame: pd.DataFrame) -> None:
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"to_parquet takes a frame from nbkit.read_stream/read_pipe; this one lacks {', '.join(missing)}"
        )


def _dumps(value: Any) -> str:
    """JSON text of an object column's value (ASCII: any str, a lone surrogate too, reads back)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _headers_type(pa: Any) -> Any:
    return pa.map_(pa.string(), pa.struct([("text", pa.string()), ("bytes", pa.binary())]))


def _headers_array(pa: Any, headers: pd.Series) -> Any:
    """The ``headers`` column: a map per row, each value's text or bytes in its own struct field."""
    values = headers.tolist()
    kind = _headers_type(pa)
    if not any(values):
        offsets = pa.array(np.zeros(len(values) + 1, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, pa.array([], pa.string()), pa.array([], kind.item_type), type=kind)
    rows = [
        [
            (k, {"text": v, "bytes": None} if isinstance(v, str) else {"text": None, "bytes": bytes(v)})
            for k, v in h.items()
        ]
        for h in values
    ]
    return pa.array(rows, type=kind)


def _category_array(pa: Any, series: pd.Series) -> Any:
    """A categorical column as a dictionary<int32, string> array (the same type in every row group)."""
    cat = series.array
    codes = np.asarray(cat.codes, dtype=np.int32)
    mask = codes < 0
    return pa.DictionaryArray.from_arrays(
        pa.array(codes, mask=mask if mask.any() else None), pa.array(list(map(str, cat.categories)), pa.string())
    )


def _field_array(pa: Any, series: pd.Series) -> Any:
    """A ``payload.<field>`` column: its values typed (null where missing); an object column as JSON text."""
    if pd.api.types.is_object_dtype(series.dtype):
        return pa.array([None if _is_missing(v) else _dumps(v) for v in series.tolist()], pa.large_string())
    if series.dtype == STR_DTYPE:
        return pa.array(series, pa.large_string())
    return pa.array(series.array, from_pandas=True)


def frame_to_table(frame: pd.DataFrame, *, mode: str | None = None, fields: Mapping[str, Any] | None = None) -> Any:
    """A ``read_stream``-shaped frame as a pyarrow Table in the layout above: the frame's columns, in its
    order (``mode``: payload mode, inferred from the values when None; ``fields``: the json columns, from
    the frame when None; a field the frame lacks is all null)."""
    pa, _ = _pa()
    _check_columns(frame)
    spec = payload_mode(_infer_mode(frame) if mode is None else mode)
    if spec.fields and fields is None:
        fields = json_fields_of(frame)
    if not spec.fields:
        fields = None
    arrays: dict[str, Any] = {}
    for name in FRAME_COLUMNS:
        series = frame[name]
        if name == "payload":
            arrays[name] = spec.to_parquet(series)
        elif name == "headers":
            arrays[name] = _headers_array(pa, series)
        elif isinstance(series.dtype, pd.CategoricalDtype):
            arrays[name] = _category_array(pa, series)
        else:
            arrays[name] = pa.array(series.array, from_pandas=True)
    for field in fields or {}:
        col = f"payload.{field}"
        series = frame[col] if col in frame.columns else pd.Series([None] * len(frame), dtype=object)
        arrays[col] = _field_array(pa, series)
    meta = {"format": LAYOUT_VERSION, "payload": spec.name}
    return pa.table(list(arrays.values()), names=list(arrays), metadata={_META_KEY: json.dumps(meta).encode()})


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and v != v)


class _Dtypes:
    """The ``nbkit.dtypes`` a file records: each column's pandas dtype (None: as its values make it, the
    payload of a stream file's export); widened field dtypes narrowed again where no row lacked the field."""

    def __init__(self, dtypes: Mapping[str, Any], *, payload: bool = True) -> None:
        self.dtypes: dict[str, str | None] = {name: str(dtype) for name, dtype in dtypes.items()}
        if not payload:
            self.dtypes["payload"] = None
        self._nulls: set[str] = set()

    def see(self, table: Any) -> None:
        """Note which widened columns of a table written hold nulls."""
        for name, dtype in self.dtypes.items():
            if dtype in _NARROW and name.startswith("payload.") and table.column(name).null_count:
                self._nulls.add(name)

    def final(self, narrow: bool) -> dict[str, str | None]:
        if not narrow:
            return self.dtypes
        return {
            name: _NARROW[dtype]
            if dtype in _NARROW and name.startswith("payload.") and name not in self._nulls
            else dtype
            for name, dtype in self.dtypes.items()
        }


# -- writing ---------------------------------------------------------------------------------------


def to_parquet(
    source: str | os.PathLike | pd.DataFrame | Any,
    out: str | os.PathLike,
    *,
    keys: Iterable[str] | str | None = None,
    payload: PayloadMode = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    include_internal: bool = False,
    partition_size: int = DEFAULT_PARTITION_SIZE,
    json_fields: Mapping[str, Any] | Sequence[str] | None = None,
    sample: int = 4 << 20,
    compression: str | None = "zstd",
    on_bad_frames: str = "error",
    storage_options: dict[str, Any] | None = None,
    block_size: int | None = None,
) -> int:
    """Write a stream file, a ``read_stream``/``read_pipe`` frame or a ``nbkit.dask`` frame to Parquet.

    A stream file is read range by range (one row group each, memory flat). Timestamps are UTC,
    sequence numbers signed (int64) and headers a map column; :func:`read_parquet` reads it back.

    Parameters
    ----------
    source : str, os.PathLike, pandas.DataFrame or dask DataFrame
        A stream file (a path or an fsspec URL, read by range requests), or a frame from
        ``read_stream``/``read_pipe``/``nbkit.dask.read_stream``.
    out : str or os.PathLike
        The Parquet file to write: a path, or an fsspec URL (written as it is made).
    keys, payload, start, end, include_internal
        As for :func:`nbkit.read_stream` (a stream file only; for a frame the payload mode is inferred
        from its values and these must be left at their defaults).
    partition_size : int
        Bytes of stream file per row group.
    json_fields, sample
        As for :func:`nbkit.dask.read_stream` (``payload="json"`` or ``"objects"``).
    compression : str, optional
        The Parquet codec (``"zstd"``; None for none).
    on_bad_frames : {"error", "warn", "skip"}
        A stream file only, as for :func:`nbkit.read_stream`: ``"skip"``/``"warn"`` leave damaged regions
        out (``nbkit info`` lists them; ``nbkit repair`` writes a clean copy).
    storage_options : dict, optional
        For URLs (the stream file's and the output's filesystem), as for :func:`nbkit.read_stream`.
    block_size : int, optional
        For a stream file URL: bytes per range request.

    Returns
    -------
    int
        The number of rows written.

    Examples
    --------
    >>> import nbkit
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     for n in range(3):
    ...         _ = writer.write("orders", b'{"id": %d}' % n)
    >>> nbkit.to_parquet("orders.ss", "orders.parquet")
    3
    """
    _, pq = _pa()
    out = os.fspath(out)
    if isinstance(source, (str, os.PathLike)):
        return _file_to_parquet(
            os.fspath(source),
            out,
            pq,
            keys=keys,
            payload=payload,
            start=start,
            end=end,
            include_internal=include_internal,
            partition_size=partition_size,
            json_fields=json_fields,
            sample=sample,
            compression=compression,
            on_bad_frames=check_on_bad_frames(on_bad_frames),
            storage_options=storage_options,
            block_size=block_size,
        )
    if on_bad_frames != "error":
        raise ValueError("on_bad_frames applies to a stream file, not to a frame")
    if keys is not None or start is not None or end is not None or payload != "auto" or json_fields is not None:
        raise ValueError("keys, payload, start, end and json_fields apply to a stream file, not to a frame")
    if isinstance(source, pd.DataFrame):
        return _write_tables([(source, frame_to_table(source))], out, pq, compression, storage_options)
    if hasattr(source, "to_delayed") and hasattr(source, "_meta"):
        return _dask_to_parquet(source, out, pq, compression, storage_options)
    raise TypeError(f"to_parquet takes a stream file path or a DataFrame, not {type(source).__name__}")


def _file_to_parquet(
    path: str,
    out: str,
    pq: Any,
    *,
    keys: Iterable[str] | str | None,
    payload: PayloadMode,
    start: FilePosition | dt.datetime | int | str | None,
    end: dt.datetime | int | str | None,
    include_internal: bool,
    partition_size: int,
    json_fields: Mapping[str, Any] | Sequence[str] | None,
    sample: int,
    compression: str | None,
    on_bad_frames: str,
    storage_options: dict[str, Any] | None,
    block_size: int | None,
) -> int:
    sel, position, seek_key = selection(
        keys=keys, payload=payload, start=start, end=end, include_internal=include_internal
    )
    reading: dict[str, Any] = {"storage_options": storage_options, "block_size": block_size} if is_url(path) else {}
    plan = plan_ranges(path, partition_size=partition_size, start=position, key=seek_key, sel=sel, **reading)
    if plan.tail is not None and plan.tail.reason == "truncated":
        warnings.warn(f"{path}: {plan.tail.describe()}", stacklevel=3)
    fields = None
    narrow = False
    if payload_mode(sel.payload).fields:
        if json_fields is None:  # sampled: ints and bools widened (a later range may lack them), narrowed at the end
            rng = ByteRange(plan.first, min(plan.ranges[-1].end, plan.first + sample), 0)
            sampled = json_fields_of(read_range(path, rng, sel, on_bad_frames=on_bad_frames, **reading))
            fields = {name: _WIDE.get(str(dtype), dtype) for name, dtype in sampled.items()}
            narrow = True
        elif isinstance(json_fields, Mapping):
            fields = dict(json_fields)
        else:
            fields = {name: object for name in json_fields}

    def tables() -> Iterator[tuple[pd.DataFrame, Any]]:
        for i, rng in enumerate(plan.ranges):
            frame = read_range(path, rng, sel, json_fields=fields, on_bad_frames=on_bad_frames, **reading)
            if len(frame) or i == 0:
                yield frame, frame_to_table(frame, mode=sel.payload, fields=fields)

    return _write_tables(tables(), out, pq, compression, storage_options, payload_dtype=False, narrow=narrow)


def _dask_to_parquet(ddf: Any, out: str, pq: Any, compression: str | None, storage_options: Any = None) -> int:
    import dask

    _check_columns(ddf._meta)
    parts = ddf.to_delayed()
    batch = 4
    mode = None
    fields = json_fields_of(ddf._meta) if any(str(c).startswith("payload.") for c in ddf.columns) else None

    def tables() -> Iterator[tuple[pd.DataFrame, Any]]:
        nonlocal mode
        for i in range(0, len(parts), batch):
            for frame in dask.compute(*parts[i : i + batch]):
                if mode is None:
                    mode = _infer_mode(frame)
                    if mode == "text" and frame["payload"].dtype != STR_DTYPE:
                        mode = "auto"  # later partitions may mix str and bytes
                yield frame, frame_to_table(frame, mode=mode, fields=fields)

    return _write_tables(tables(), out, pq, compression, storage_options, payload_dtype=False)


@contextlib.contextmanager
def _output(out: str, storage_options: dict[str, Any] | None) -> Iterator[Any]:
    """Where pyarrow writes: the path itself, or for a URL a file object on its filesystem (closed here)."""
    if not is_url(out):
        yield out
        return
    f = open_output(out, storage_options)
    try:
        yield f
    finally:
        f.close()


def _write_tables(
    tables: Iterable[tuple[pd.DataFrame, Any]],
    out: str,
    pq: Any,
    compression: str | None,
    storage_options: dict[str, Any] | None = None,
    *,
    payload_dtype: bool = True,
    narrow: bool = False,
) -> int:
    """Write the tables (each with the frame it was made from) to one Parquet file with the first table's
    schema, and record the frames' dtypes (``nbkit.dtypes``); returns the rows written. ``payload_dtype``:
    record the payload column's dtype (a frame's export; else it is what the values make it). ``narrow``:
    widened field dtypes are narrowed where no row lacked the field."""
    rows = 0
    writer = None
    record: _Dtypes | None = None
    with _output(out, storage_options) as where:
        try:
            for frame, table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(where, table.schema, compression=compression)
                    dtypes = {
                        name: frame[name].dtype if name in frame.columns else object for name in table.column_names
                    }
                    record = _Dtypes(dtypes, payload=payload_dtype)
                elif not table.schema.equals(writer.schema):
                    table = table.cast(writer.schema)  # e.g. seq written unsigned in one range only
                assert record is not None
                record.see(table)
                writer.write_table(table)
                rows += table.num_rows
            if writer is not None and record is not None:
                writer.add_key_value_metadata({_DTYPES_KEY: json.dumps(record.final(narrow)).encode()})
        finally:
            if writer is not None:
                writer.close()
    return rows


# -- reading back ----------------------------------------------------------------------------------


def read_parquet(
    path: str | os.PathLike, *, columns: Sequence[str] | None = None, keys: Iterable[str] | str | None = None
) -> pd.DataFrame:
    """A Parquet file written by :func:`to_parquet` as the frame it was written from.

    The columns and dtypes are the frame's (those of :func:`nbkit.read_stream` for a stream file's export,
    with the same options): ``stream_key`` category, the integers ``Int64``, ``timestamp``
    ``datetime64[ms, UTC]``, ``payload`` as the payload mode makes it (str, ``large_binary[pyarrow]``,
    object for parsed values or where a payload is not UTF-8), ``headers`` dicts, and the ``payload.<field>``
    columns with their dtypes (``Int64``/``boolean`` for integer/boolean fields some payloads lack).

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file.
    columns : sequence of str, optional
        Only these columns, in this order (the others are not read from the file).
    keys : str or iterable of str, optional
        Only the rows of these stream keys: row groups without them are skipped (their statistics say
        so), the rest filtered as they are decoded. ``stream_key`` keeps only the categories left.

    Returns
    -------
    pandas.DataFrame
        The frame: ``read_parquet(out)`` equals the frame (or ``read_stream`` result) written to ``out``.

    Raises
    ------
    NbkitError
        If the file was not written by :func:`to_parquet` (or by a layout this version does not know).
    ValueError
        A name in ``columns`` that the file does not hold.

    Examples
    --------
    >>> import nbkit
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1}')
    ...     _ = writer.write("audit", b'{"ok": true}')
    >>> _ = nbkit.to_parquet("orders.ss", "orders.parquet", payload="json")
    >>> nbkit.read_parquet("orders.parquet").equals(nbkit.read_stream("orders.ss", payload="json"))
    True
    >>> nbkit.read_parquet("orders.parquet", columns=["seq", "payload.id"], keys="orders")
       seq  payload.id
    0    1           1
    """
    _, pq = _pa()
    where = os.fspath(path)
    meta = pq.read_metadata(where).metadata or {}
    raw = meta.get(_META_KEY)
    if raw is None:
        raise FormatError("not written by nbkit.to_parquet (no 'nbkit' schema metadata)", path=where)
    info = json.loads(raw)
    wanted = [keys] if isinstance(keys, str) else (None if keys is None else list(keys))
    if info.get("format") == 1:
        return _select(_read_v1(where, pq, info["payload"]), columns, wanted, where)
    if info.get("format") != LAYOUT_VERSION or _DTYPES_KEY not in meta:
        raise FormatError(f"Parquet layout {info.get('format')} is not {LAYOUT_VERSION} (or 1)", path=where)
    dtypes: dict[str, str | None] = json.loads(meta[_DTYPES_KEY])
    names = list(dtypes) if columns is None else _checked(columns, dtypes, where)
    filters = None if wanted is None else [("stream_key", "in", wanted)]
    table = pq.read_table(where, columns=names, filters=filters)
    mode = payload_mode(info["payload"])
    out = {name: _column(table.column(name), name, dtypes[name], mode) for name in names}
    return pd.DataFrame(out, columns=names, copy=False)


def _checked(columns: Sequence[str], dtypes: Mapping[str, Any], where: str) -> list[str]:
    """``columns`` as a list, each one the file holds."""
    names = [columns] if isinstance(columns, str) else list(columns)
    missing = [c for c in names if c not in dtypes]
    if missing:
        raise ValueError(f"{where}: no column {', '.join(map(repr, missing))}; it holds {', '.join(dtypes)}")
    return names


def _select(frame: pd.DataFrame, columns: Sequence[str] | None, keys: list[str] | None, where: str) -> pd.DataFrame:
    """A frame read whole (layout 1) cut as ``columns=``/``keys=`` would have read it."""
    if keys is not None:
        frame = frame[frame["stream_key"].isin(keys).to_numpy()].reset_index(drop=True)
        frame["stream_key"] = frame["stream_key"].cat.remove_unused_categories()
    if columns is not None:
        frame = frame[_checked(columns, dict.fromkeys(frame.columns), where)]
    return frame


def _column(column: Any, name: str, dtype: str | None, mode: Mode) -> Any:
    """One Parquet column (a pyarrow ChunkedArray) as the frame's column of ``dtype``."""
    if name == "payload":
        series = mode.from_parquet(column)
    elif name == "headers":
        series = _headers(column)
    elif name == "transport":
        series = column.to_pandas().cat.set_categories(_TRANSPORTS)
    elif name == "stream_key":
        series = _keys(column.to_pandas().array)
    elif dtype == "object":  # a field of mixed or nested values, as JSON text
        texts = column.to_pylist()
        parsed = json_values([t.encode("utf-8") for t in texts if t is not None])
        series = pd.Series(parsed, dtype=object) if len(parsed) == len(texts) else _with_gaps(texts, parsed)
    elif dtype == "str":
        series = pd.Series(column, dtype=STR_DTYPE)
    elif dtype is not None and isinstance(pd.api.types.pandas_dtype(dtype), pd.api.extensions.ExtensionDtype):
        target = pd.api.types.pandas_dtype(dtype)
        convert = getattr(target, "__from_arrow__", None)
        series = pd.Series(convert(column)) if convert is not None else column.to_pandas()
    elif column.null_count:  # a numpy dtype recorded for a column with nulls: the nullable kind
        series = column.to_pandas()
    else:
        series = pd.Series(column.to_numpy())
    if dtype is not None and str(series.dtype) != dtype:
        series = series.astype(dtype)
    return series


def _keys(cat: pd.Categorical) -> pd.Series:
    """The ``stream_key`` column as read_stream has it: the categories used, sorted (from the codes)."""
    codes = np.asarray(cat.codes)
    names = list(cat.categories)
    used = np.bincount(codes[codes >= 0], minlength=len(names)) > 0
    kept = sorted(name for name, u in zip(names, used, strict=True) if u)
    lookup = np.full(len(names) + 1, -1, dtype=codes.dtype if codes.dtype.itemsize >= 4 else np.int32)
    for i, name in enumerate(kept):
        lookup[names.index(name)] = i
    return pd.Series(pd.Categorical.from_codes(lookup[codes], categories=kept))


def _with_gaps(texts: list[str | None], parsed: list[Any]) -> pd.Series:
    """An object column: the parsed values where there was text, None elsewhere."""
    values = iter(parsed)
    return pd.Series([None if t is None else next(values) for t in texts], dtype=object)


def _headers(column: Any) -> pd.Series:
    """The ``headers`` dicts from the map column (all empty without a Python loop over pairs)."""
    n = len(column)
    if not any(len(chunk.values) for chunk in column.chunks):
        return pd.Series(empty_headers(n), copy=False)
    rows = []
    for pairs in column.to_pylist():
        rows.append(
            frozen_headers({k: v["text"] if v["text"] is not None else v["bytes"] for k, v in pairs})
            if pairs
            else EMPTY_HEADERS
        )
    return pd.Series(rows, dtype=object)


# -- layout 1 ----------------------------------------------------------------------------------------


def _read_v1(path: str, pq: Any, mode: str) -> pd.DataFrame:
    """A layout-1 file (``payload_bytes``, ``headers_bytes`` beside the frame's columns) as the frame
    read_stream gives today (its payload and field columns built as a read builds them)."""
    table = pq.read_table(path)
    names = set(table.column_names)

    def values(name: str) -> list[Any]:
        return table.column(name).to_pylist()

    texts = values("payload")
    if "payload_bytes" in names:
        raws = values("payload_bytes")
        if mode == "objects":
            payloads = [r if r is not None else json.loads(t) for t, r in zip(texts, raws, strict=True)]
        else:
            payloads = [r if r is not None else t for t, r in zip(texts, raws, strict=True)]
    else:
        payloads = texts
    headers = []
    for pairs, extra in zip(values("headers"), values("headers_bytes"), strict=True):
        h = dict(pairs) if pairs else {}
        if extra:
            h.update(extra)
        headers.append(frozen_headers(h))
    typed = table.select(["shard_id", "seq", "timestamp", "size", "retry_count", "attempt", "offset"]).to_pandas()
    spec = payload_mode(mode)
    if spec.name == "objects":
        payload = pd.Series(payloads, dtype=object)
    else:
        bodies = _bodies(payloads)
        payload = spec.column(bodies, list(map(len, bodies)))
    frame = pd.DataFrame(
        {
            "stream_key": pd.Series(values("stream_key"), dtype="category"),
            "shard_id": typed["shard_id"].astype(_int_dtype(typed["shard_id"])),
            "seq": typed["seq"].astype(_int_dtype(typed["seq"])),
            "timestamp": typed["timestamp"].astype("datetime64[ms, UTC]"),
            "size": typed["size"].astype("Int64"),
            "payload": payload,
            "retry_count": typed["retry_count"].astype("Int64"),
            "attempt": typed["attempt"].astype("Int64"),
            "headers": pd.Series(headers, dtype=object),
            "offset": typed["offset"].astype("Int64"),
            "transport": pd.Categorical(values("transport"), categories=_TRANSPORTS),
        },
        columns=list(FRAME_COLUMNS),
    )
    if spec.name == "objects":
        frame = expand_json(frame)
    elif spec.fields:
        frame = with_fields(frame, json_field_columns(_bodies(payloads)))
    return frame


def _int_dtype(series: pd.Series) -> str:
    """``Int64``, or ``UInt64`` for a column written unsigned (values above 2**63 - 1)."""
    return "UInt64" if pd.api.types.is_unsigned_integer_dtype(series.dtype) else "Int64"


def _bodies(payloads: list[Any]) -> list[bytes]:
    """The payloads as stored (UTF-8 text encoded back; bytes as they are)."""
    return [p.encode("utf-8") if isinstance(p, str) else p for p in payloads]
