"""Stream files (or ``read_stream`` frames) to Parquet, and back: ``to_parquet`` / ``read_parquet``.

Needs pyarrow (the ``scale`` extra); this module imports it on first use, so importing it (and
``nbkit.to_parquet``) always works and only a call says what to install.

Parquet layout (one file; from a stream file, one row group per beacon-aligned range, so memory stays
at one range whatever the file's size):

=============  ==============================  ==================================================
column         Arrow type                      holds
=============  ==============================  ==================================================
stream_key     dictionary<int32, string>       pandas reads it back as category
shard_id, seq  int64                           signed (uint64 only for values above 2**63 - 1)
timestamp      timestamp[ms, tz=UTC]           null for a pipe line without one
size           int64
payload        binary / string / string        ``payload="bytes"`` / ``"text"`` / ``"auto"`` and
                                               ``"json"`` (the JSON text as stored); ``"objects"``:
                                               JSON text of the parsed value
payload_bytes  binary (auto, json, objects)    the payload when it is not UTF-8 (then payload is
                                               null); null otherwise
retry_count,   int64
attempt
headers        map<string, string>             the envelope headers with text values
headers_bytes  map<string, binary>             header values that are not UTF-8 (``rs2:`` bytes;
                                               rare), null when none
offset         int64
transport      dictionary<int32, string>
payload.<f>    int64 / double / bool / string  json, objects: one column per field, as read_stream has
                                               them; object columns (mixed or nested) as JSON text
=============  ==============================  ==================================================

The schema metadata key ``nbkit`` records the layout version and payload mode. ``pandas.read_parquet``
gives the same dtypes for the typed columns (pyarrow's pandas metadata); :func:`read_parquet` also
rebuilds the object columns, so ``read_parquet(out)`` equals ``nbkit.read_stream(file, ...)`` with the
same options (json and objects: the ``payload.<field>`` columns are recomputed from ``payload`` as
read_stream does; headers with bytes values come back with those entries last).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pandas as pd

from nbkit.errors import FormatError
from nbkit.scale import require
from nbkit.scale.partitions import (
    DEFAULT_PARTITION_SIZE,
    FIELD_MODES,
    ByteRange,
    json_fields_of,
    plan_ranges,
    read_range,
)
from nbkit.tabular import (
    FRAME_COLUMNS,
    PayloadMode,
    bytes_column,
    expand_json,
    json_field_columns,
    json_text_column,
    selection,
    with_fields,
)
from nbkit.transport.damage import check_on_bad_frames
from nbkit.transport.positions import FilePosition
from nbkit.transport.source import is_url, open_output

__all__ = ["LAYOUT_VERSION", "frame_to_table", "read_parquet", "to_parquet"]

LAYOUT_VERSION = 1
_META_KEY = b"nbkit"
_FEATURE = "nbkit.to_parquet"


def _pa() -> tuple[Any, Any]:
    pa = require("pyarrow", feature=_FEATURE)
    pq = require("pyarrow.parquet", feature=_FEATURE)
    return pa, pq


# -- schema ----------------------------------------------------------------------------------------


def _columns(mode: str) -> list[str]:
    cols = []
    for name in FRAME_COLUMNS:
        cols.append(name)
        if name == "payload" and mode in ("auto", "json", "objects"):
            cols.append("payload_bytes")
        if name == "headers":
            cols.append("headers_bytes")
    return cols


def _field_type(pa: Any, dtype: Any) -> Any:
    dtype = pd.api.types.pandas_dtype(dtype)
    if pd.api.types.is_bool_dtype(dtype):
        return pa.bool_()
    if pd.api.types.is_integer_dtype(dtype):
        return pa.int64() if pd.api.types.is_signed_integer_dtype(dtype) else pa.uint64()
    if pd.api.types.is_float_dtype(dtype):
        return pa.float64()
    return pa.string()  # str, and object (written as JSON text)


def _schema(mode: str, fields: Mapping[str, Any] | None, unsigned: frozenset[str] = frozenset()) -> Any:
    pa, _ = _pa()
    text = pa.string()
    types = {
        "stream_key": pa.dictionary(pa.int32(), text),
        "shard_id": pa.uint64() if "shard_id" in unsigned else pa.int64(),
        "seq": pa.uint64() if "seq" in unsigned else pa.int64(),
        "timestamp": pa.timestamp("ms", tz="UTC"),
        "size": pa.int64(),
        "payload": pa.binary() if mode == "bytes" else text,
        "payload_bytes": pa.binary(),
        "retry_count": pa.int64(),
        "attempt": pa.int64(),
        "headers": pa.map_(text, text),
        "headers_bytes": pa.map_(text, pa.binary()),
        "offset": pa.int64(),
        "transport": pa.dictionary(pa.int32(), text),
    }
    schema_fields = [pa.field(name, types[name]) for name in _columns(mode)]
    for name, dtype in (fields or {}).items():
        schema_fields.append(pa.field(f"payload.{name}", _field_type(pa, dtype)))
    meta = {"format": LAYOUT_VERSION, "payload": mode}
    return pa.schema(schema_fields, metadata={_META_KEY: json.dumps(meta).encode()})


# -- frame -> table --------------------------------------------------------------------------------


def _infer_mode(frame: pd.DataFrame) -> str:
    """The payload mode a frame was read with, from its columns and values: field columns mean ``"json"``
    (text payloads) or ``"objects"`` (parsed ones); parsed values without field columns, ``"objects"``."""
    kinds = {type(v) for v in frame["payload"]}
    if any(str(c).startswith("payload.") for c in frame.columns):
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


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _check_columns(frame: pd.DataFrame) -> None:
    missing = [c for c in FRAME_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"to_parquet takes a frame from nbkit.read_stream/read_pipe; this one lacks {', '.join(missing)}"
        )


def frame_to_table(frame: pd.DataFrame, *, mode: str | None = None, fields: Mapping[str, Any] | None = None) -> Any:
    """A ``read_stream``-shaped frame as a pyarrow Table in the layout above (``mode``: payload mode,
    inferred from the values when None; ``fields``: json columns, from the frame when None)."""
    pa, _ = _pa()
    _check_columns(frame)
    if mode is None:
        mode = _infer_mode(frame)
    if mode in FIELD_MODES and fields is None:
        fields = json_fields_of(frame)
    if mode not in FIELD_MODES:
        fields = None
    payloads = frame["payload"].tolist()
    out: dict[str, Any] = {}
    for name in ("stream_key", "shard_id", "seq", "timestamp", "size"):
        out[name] = frame[name]
    if mode == "bytes":
        bad = next((v for v in payloads if not isinstance(v, (bytes, bytearray))), None)
        if bad is not None:
            raise ValueError(f"payload mode 'bytes' needs bytes payloads, not {type(bad).__name__}")
        out["payload"] = pd.Series(payloads, dtype=object)
    elif mode == "text":
        bad = next((v for v in payloads if not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"payload mode 'text' needs str payloads, not {type(bad).__name__}")
        out["payload"] = pd.Series(payloads, dtype=object)
    else:
        texts: list[Any] = []
        raws: list[Any] = []
        as_json = mode == "objects"  # parsed values: written as their JSON text
        for v in payloads:
            if isinstance(v, (bytes, bytearray)):
                texts.append(None)
                raws.append(bytes(v))
            elif as_json:
                texts.append(_dumps(v))
                raws.append(None)
            elif isinstance(v, str):
                texts.append(v)
                raws.append(None)
            else:
                raise ValueError(
                    f"payload value of type {type(v).__name__} needs the objects layout: pass mode='objects'"
                )
        out["payload"] = pd.Series(texts, dtype=object)
        out["payload_bytes"] = pd.Series(raws, dtype=object)
    out["retry_count"] = frame["retry_count"]
    out["attempt"] = frame["attempt"]
    text_headers: list[Any] = []
    byte_headers: list[Any] = []
    for h in frame["headers"].tolist():
        if not h:
            text_headers.append([])
            byte_headers.append(None)
            continue
        pairs = [(k, v) for k, v in h.items() if isinstance(v, str)]
        if len(pairs) == len(h):
            text_headers.append(pairs)
            byte_headers.append(None)
        else:
            text_headers.append(pairs)
            byte_headers.append([(k, bytes(v)) for k, v in h.items() if not isinstance(v, str)])
    out["headers"] = pd.Series(text_headers, dtype=object)
    out["headers_bytes"] = pd.Series(byte_headers, dtype=object)
    out["offset"] = frame["offset"]
    out["transport"] = frame["transport"]
    for name, dtype in (fields or {}).items():
        col = f"payload.{name}"
        series = frame[col] if col in frame.columns else pd.Series([None] * len(frame), dtype=object)
        if pd.api.types.is_object_dtype(pd.api.types.pandas_dtype(dtype)) or pd.api.types.is_object_dtype(series.dtype):
            series = pd.Series([None if _is_missing(v) else _dumps(v) for v in series.tolist()], dtype=object)
        out[col] = series
    plain = pd.DataFrame({k: (v.reset_index(drop=True) if isinstance(v, pd.Series) else v) for k, v in out.items()})
    unsigned = frozenset(n for n in ("shard_id", "seq") if pd.api.types.is_unsigned_integer_dtype(frame[n].dtype))
    return pa.Table.from_pandas(plain, schema=_schema(mode, fields, unsigned), preserve_index=False)


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v)


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
        table = frame_to_table(source)
        with _output(out, storage_options) as where:
            pq.write_table(table, where, compression=compression)
        return table.num_rows
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
    if sel.payload in FIELD_MODES:
        if json_fields is None:
            rng = ByteRange(plan.first, min(plan.ranges[-1].end, plan.first + sample), 0)
            fields = json_fields_of(read_range(path, rng, sel, on_bad_frames=on_bad_frames, **reading))
        elif isinstance(json_fields, Mapping):
            fields = dict(json_fields)
        else:
            fields = {name: object for name in json_fields}

    def tables() -> Iterator[Any]:
        for i, rng in enumerate(plan.ranges):
            frame = read_range(path, rng, sel, json_fields=fields, on_bad_frames=on_bad_frames, **reading)
            if len(frame) or i == 0:
                yield frame_to_table(frame, mode=sel.payload, fields=fields)

    return _write_tables(tables(), out, pq, compression, storage_options)


def _dask_to_parquet(ddf: Any, out: str, pq: Any, compression: str | None, storage_options: Any = None) -> int:
    import dask

    _check_columns(ddf._meta)
    parts = ddf.to_delayed()
    batch = 4
    mode = None
    fields = json_fields_of(ddf._meta) if any(str(c).startswith("payload.") for c in ddf.columns) else None

    def tables() -> Iterator[Any]:
        nonlocal mode
        for i in range(0, len(parts), batch):
            for frame in dask.compute(*parts[i : i + batch]):
                if mode is None:
                    mode = _infer_mode(frame)
                    if mode in ("bytes", "text"):
                        mode = "auto"  # later partitions may mix str and bytes
                yield frame_to_table(frame, mode=mode, fields=fields)

    return _write_tables(tables(), out, pq, compression, storage_options)


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
    tables: Any, out: str, pq: Any, compression: str | None, storage_options: dict[str, Any] | None = None
) -> int:
    """Write the tables to one Parquet file with the first table's schema (it carries pyarrow's
    pandas metadata too); returns the rows written."""
    rows = 0
    writer = None
    with _output(out, storage_options) as where:
        try:
            for table in tables:
                if writer is None:
                    writer = pq.ParquetWriter(where, table.schema, compression=compression)
                writer.write_table(table)
                rows += table.num_rows
        finally:
            if writer is not None:
                writer.close()
    return rows


# -- reading back ----------------------------------------------------------------------------------


def read_parquet(path: str | os.PathLike) -> pd.DataFrame:
    """A Parquet file written by :func:`to_parquet` as the frame ``nbkit.read_stream`` gives.

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file.

    Returns
    -------
    pandas.DataFrame
        The columns and dtypes of :func:`nbkit.read_stream`.

    Raises
    ------
    NbkitError
        If the file was not written by :func:`to_parquet` (or by another layout version).

    Examples
    --------
    >>> import nbkit
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1}')
    >>> _ = nbkit.to_parquet("orders.ss", "orders.parquet")
    >>> nbkit.read_parquet("orders.parquet").equals(nbkit.read_stream("orders.ss"))
    True
    """
    _, pq = _pa()
    table = pq.read_table(os.fspath(path))
    raw = (table.schema.metadata or {}).get(_META_KEY)
    if raw is None:
        raise FormatError("not written by nbkit.to_parquet (no 'nbkit' schema metadata)", path=os.fspath(path))
    info = json.loads(raw)
    if info.get("format") != LAYOUT_VERSION:
        raise FormatError(f"Parquet layout {info.get('format')} is not {LAYOUT_VERSION}", path=os.fspath(path))
    mode = info["payload"]
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
        headers.append(h)
    typed = table.select(["shard_id", "seq", "timestamp", "size", "retry_count", "attempt", "offset"]).to_pandas()
    frame = pd.DataFrame(
        {
            "stream_key": pd.Series(values("stream_key"), dtype="category"),
            "shard_id": typed["shard_id"].astype(_int_dtype(typed["shard_id"])),
            "seq": typed["seq"].astype(_int_dtype(typed["seq"])),
            "timestamp": typed["timestamp"].astype("datetime64[ms, UTC]"),
            "size": typed["size"].astype("Int64"),
            "payload": _payload_column(payloads, mode),
            "retry_count": typed["retry_count"].astype("Int64"),
            "attempt": typed["attempt"].astype("Int64"),
            "headers": pd.Series(headers, dtype=object),
            "offset": typed["offset"].astype("Int64"),
            "transport": pd.Categorical(values("transport"), categories=["file", "pipe"]),
        },
        columns=list(FRAME_COLUMNS),
    )
    if mode == "objects":
        frame = expand_json(frame)
    elif mode == "json":
        frame = with_fields(frame, json_field_columns(_bodies(payloads)))
    return frame


def _int_dtype(series: pd.Series) -> str:
    """``Int64``, or ``UInt64`` for a column written unsigned (values above 2**63 - 1)."""
    return "UInt64" if pd.api.types.is_unsigned_integer_dtype(series.dtype) else "Int64"


def _bodies(payloads: list[Any]) -> list[bytes]:
    """The payloads as stored (UTF-8 text encoded back; bytes as they are)."""
    return [p.encode("utf-8") if isinstance(p, str) else p for p in payloads]


def _payload_column(payloads: list[Any], mode: str) -> pd.Series:
    """The ``payload`` column read_stream builds for ``mode`` from these values."""
    if mode == "bytes":
        return bytes_column(payloads)
    if mode == "json":
        bodies = _bodies(payloads)
        return json_text_column(bodies, list(map(len, bodies)))
    return pd.Series(payloads, dtype=object)
