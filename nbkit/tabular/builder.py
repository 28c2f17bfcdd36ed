"""The frame builder: message columns in, the typed DataFrame of ``read_stream`` out.

One builder for every reader of messages as rows: ``read_stream`` and ``read_pipe``
(:mod:`nbkit.tabular.frames`), the Dask partitions and the Parquet export (:mod:`nbkit.scale`). It
holds the frame's schema (:data:`FRAME_COLUMNS`, the payload modes), accumulates columns (a message at
a time, or a reader's whole :class:`~nbkit.wire.scan.FrameColumns` at once), removes envelopes, decodes
payloads column by column (:mod:`nbkit.tabular.payloads`) and types every column.
"""

from __future__ import annotations

import gc
import os
import warnings
from array import array
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from itertools import compress
from operator import methodcaller
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from nbkit.tabular.arrow import arrow_module, columns_table
from nbkit.tabular.headers import EMPTY_HEADERS, empty_headers, frozen_headers
from nbkit.tabular.modes import CHUNK, Mode, chunked_values, payload_mode
from nbkit.tabular.payloads import (
    STR_DTYPE,
    FieldParse,
    arrow_json_fields,
    expand_json,
    json_field_columns,
    json_lines,
    json_text_array,
    json_text_column_from_buffer,
    json_values,
    with_fields,
)
from nbkit.wire import envelope
from nbkit.wire.envelope import retry_count
from nbkit.wire.scan import ColumnBuffers, FrameColumns, split_payloads

try:
    import pyarrow as _pa
except ImportError:  # pragma: no cover - pyarrow is a core dependency; without it no text array is made
    _pa = None

__all__ = [
    "FRAME_COLUMNS",
    "INT64_MAX",
    "PAYLOAD_MODES",
    "FrameBuilder",
    "PayloadMode",
    "UnsignedFallbackWarning",
    "in_window",
    "payload_separator",
]

#: The columns of every messages frame, in order (the schema table in :mod:`nbkit.tabular.frames`).
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
#: A ``payload=`` mode, as a type (mypy checks literal arguments against it).
PayloadMode = Literal["auto", "bytes", "text", "json", "objects"]
#: The ``payload=`` modes (checked at run time too: a wrong mode raises a ValueError naming these).
PAYLOAD_MODES: tuple[PayloadMode, ...] = get_args(PayloadMode)


class FrameBuilder:
    """Message columns filled per message (``add``) or a whole read at once (``extend``), then typed.

    :meth:`frame` turns them into the DataFrame of ``read_stream`` (:data:`FRAME_COLUMNS`, then any
    ``payload.<field>`` columns); envelopes and payloads are decoded there, column by column.

    Parameters
    ----------
    payload_mode : {"auto", "bytes", "text", "json", "objects"} or Mode
        How payloads become the ``payload`` column (see ``nbkit.read_stream``; each mode's column and
        dtype: :mod:`nbkit.tabular.modes`). Field columns are typed from their values, nullable
        ``Int64``/``boolean`` where some payloads lack an integer/boolean field.

    Raises
    ------
    ValueError
        An unknown payload mode (``"columns"``, the old name of ``"json"``, says to pass ``"json"``).

    Examples
    --------
    >>> builder = FrameBuilder("json")
    >>> builder.add("orders", 0, 1, 1_700_000_000_000, b'{"id": 7}', 128)
    >>> builder.frame("file")[["stream_key", "seq", "payload.id"]]
      stream_key  seq  payload.id
    0     orders    1           7
    """

    def __init__(self, payload_mode: PayloadMode | Mode) -> None:
        self.payload_mode = _mode_of(payload_mode)  # raises for an unknown name
        self.mode: PayloadMode = self.payload_mode.name  # type: ignore[assignment]  # one of PAYLOAD_MODES
        self.keys: list[str] = []
        self.shards: list[int] = []
        self.seqs: list[int] = []
        self.times: list[int | None] = []
        self.raw: list[bytes] = []  # payloads as stored, envelope included
        self.offsets: list[int] = []
        self._parts: list[ColumnBuffers] = []  # readers' results, kept columnar until frame()
        self._pool: ThreadPoolExecutor | None = None  # parses the JSON modes' fields while reading goes on
        self._parse: FieldParse | None = None

    def add(self, key: str, shard: int, seq: int, ts_ms: int | None, data: bytes, offset: int) -> None:
        """Add one message.

        Parameters
        ----------
        key, shard, seq
            Its stream key, shard and sequence number.
        ts_ms
            Its timestamp in epoch ms (None: unknown, a pipe line without one).
        data
            Its payload as stored (an envelope is removed by :meth:`frame`).
        offset
            The frame's byte offset (a pipe line's number).
        """
        if self._parts:
            self._to_lists()
        self.keys.append(key)
        self.shards.append(shard)
        self.seqs.append(seq)
        self.times.append(ts_ms)
        self.raw.append(data)
        self.offsets.append(offset)

    def extend(self, cols: FrameColumns | ColumnBuffers) -> None:
        """Add every message of a ``StreamReader.read_columns`` / ``read_column_buffers`` result.

        Column buffers given to a builder without messages added one by one stay columnar (one or several
        reads, in order): :meth:`frame` then builds every column from them without a Python object per
        message (except where the mode asks for one). In the JSON modes the payloads' fields start being
        parsed right away, on worker threads, so a caller reading a file in slices overlaps its reading
        with the parse.

        Parameters
        ----------
        cols
            The columns; the builder may keep them, so the caller must not change them after.
        """
        if isinstance(cols, ColumnBuffers):
            if not self.offsets:
                self._parts.append(cols)
                if self.payload_mode.fields and len(cols):
                    self._field_parse().add(cols.data, cols.data_end, len(cols.separator))
                return
            cols = cols.to_lists()
        if self._parts:
            self._to_lists()
        if not self.offsets:
            self.keys, self.shards, self.seqs, self.raw, self.offsets = (
                cols.stream_key,
                cols.shard_id,
                cols.seq,
                cols.payload,
                cols.offset,
            )
            self.times = cols.timestamp_ms  # type: ignore[assignment]  # taken over, never appended None to
            return
        self.keys += cols.stream_key
        self.shards += cols.shard_id
        self.seqs += cols.seq
        self.times += cols.timestamp_ms
        self.raw += cols.payload
        self.offsets += cols.offset

    def _to_lists(self) -> None:
        """Turn the column buffers into the column lists (a message added after them, or envelopes)."""
        parts, self._parts = self._parts, []
        self._stop_parse()
        for part in parts:
            self.extend(part.to_lists())

    def _field_parse(self) -> FieldParse:
        """The parse of the buffers' JSON fields, started on first use."""
        if self._parse is None:
            self._pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="nbkit-json-fields")
            self._parse = FieldParse(self._pool)
        return self._parse

    def _stop_parse(self) -> None:
        """End the field parse: pieces not started are dropped, running ones finish; the threads go."""
        pool, self._pool, self._parse = self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _unwrap(self) -> tuple[list[bytes], list[dict], list[int]]:
        """Bodies, headers and retry counts: envelopes (payloads starting ``rs``) decoded."""
        raw = self.raw
        n = len(raw)
        headers: list[dict] = [EMPTY_HEADERS] * n
        counts = [0] * n
        hits = list(compress(range(n), map(_starts_rs, raw)))
        if not hits:
            return raw, headers, counts
        bodies = list(raw)
        for j in hits:
            found, body = envelope.decode(raw[j])
            headers[j] = frozen_headers(found)
            bodies[j] = body
            if found:
                counts[j] = retry_count(found)
        return bodies, headers, counts

    def _payloads(self, bodies: list[bytes], *, in_place: bool) -> list[Any]:
        """The payload column for ``auto``/``text``/``json``, converted a chunk at a time (message by
        message only in a chunk where some payload needs the fallback: not UTF-8, not JSON). ``in_place``
        converts ``bodies`` itself, so each chunk's bytes are freed as its values are made."""
        convert = self.payload_mode.values
        out = bodies if in_place else list(bodies)
        for i in range(0, len(out), CHUNK):
            out[i : i + CHUNK] = convert(out[i : i + CHUNK])
        return out

    def frame(self, transport: str, *, release: bool = False) -> pd.DataFrame:
        """The typed DataFrame.

        Parameters
        ----------
        transport : {"file", "pipe"}
            The ``transport`` column's value.
        release
            Convert the columns in place and let each go once its frame column is built (the peak stays
            near the frame's own size); the builder is spent after.

        Returns
        -------
        pandas.DataFrame
            One row per message: :data:`FRAME_COLUMNS`, then any ``payload.<field>`` columns.
        """
        with _gc_paused():
            try:
                if self._parts:
                    parse = None
                    if self.payload_mode.fields:
                        if self._parse is None:  # a frame built before: parse again
                            for part in self._parts:
                                self._field_parse().add(part.data, part.data_end, len(part.separator))
                        parse = self._parse
                    frame = _buffers_frame(self._parts, self.payload_mode, transport, release, parse)
                    if frame is not None:
                        if release:
                            self._parts = []
                        return frame
                    self._to_lists()  # envelopes: the row-by-row path removes them
                return self._frame(transport, release)
            finally:
                self._stop_parse()

    def table(self, transport: str, *, release: bool = False) -> Any:
        """The messages as a ``pyarrow.Table``: :meth:`frame`'s columns, built from the same arrays, with no
        DataFrame between (the Arrow types: :mod:`nbkit.tabular.arrow`).

        Parameters
        ----------
        transport : {"file", "pipe"}
            The ``transport`` column's value.
        release
            As for :meth:`frame`.

        Returns
        -------
        pyarrow.Table

        Raises
        ------
        ValueError
            ``payload="objects"`` (Python objects per row have no Arrow type: use ``"json"``).

        Examples
        --------
        >>> builder = FrameBuilder("json")
        >>> builder.add("orders", 0, 1, 1_700_000_000_000, b'{"id": 7}', 128)
        >>> builder.table("file").column("payload.id").to_pylist()
        [7]
        """
        if not self.payload_mode.arrow:
            raise ValueError('Arrow output takes payload="json" (text and field columns), not "objects"')
        arrow_module()
        with _gc_paused():
            try:
                if self._parts:
                    parse = None
                    if self.payload_mode.fields:
                        if self._parse is None:
                            for part in self._parts:
                                self._field_parse().add(part.data, part.data_end, len(part.separator))
                        parse = self._parse
                    table = _buffers_frame(self._parts, self.payload_mode, transport, release, parse, arrow=True)
                    if table is not None:
                        if release:
                            self._parts = []
                        return table
                    self._to_lists()
                return self._frame(transport, release, arrow=True)
            finally:
                self._stop_parse()

    def _frame(self, transport: str, release: bool, *, arrow: bool = False) -> Any:
        n = len(self.keys)
        bodies, headers, count_list = self._unwrap()
        if release:
            self.raw = []  # ``bodies`` holds the only references now
        size_list = list(map(len, bodies))
        sizes = _int_array(size_list, "Int64")
        mode = self.payload_mode
        fields: dict[str, pd.Series] | None = None
        if mode.fields:  # JSON text column: fields column by column; parsed values: None -> expand_json
            fields = json_field_columns(bodies) if mode.arrow else arrow_json_fields(bodies)
        if arrow:
            payloads = mode.arrow_column(bodies, partial(self._payloads, bodies, in_place=False))
        elif mode.name == "objects":  # the one mode with an object per row: converted in place, chunk by chunk
            payloads = pd.Series(self._payloads(bodies, in_place=release), dtype=object)
        else:
            payloads = mode.column(bodies, size_list)
        del bodies, size_list
        counts = _int_array(count_list, "Int64")
        columns: dict[str, Any] = {}
        for name, attr, build in (
            ("stream_key", "keys", _category),
            ("shard_id", "shards", _signed_array),
            ("seq", "seqs", _signed_array),
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
            transport=_transport_column(n, transport),
        )
        if release:
            self.offsets = []
        del payloads, headers
        if arrow:
            return columns_table(columns, fields)
        frame = pd.DataFrame(columns, columns=list(FRAME_COLUMNS))
        del columns
        if fields is not None:
            frame = with_fields(frame, fields)
        elif mode.fields:
            frame = expand_json(frame)
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
_WORKERS = max(1, min(4, os.cpu_count() or 1))  # threads that parse pieces of the payload buffer
_starts_rs = methodcaller("startswith", b"rs")


def _mode_of(name: PayloadMode | Mode) -> Mode:
    """:func:`~nbkit.tabular.modes.payload_mode` (its ValueError names :data:`PAYLOAD_MODES`)."""
    return payload_mode(name)


def _buffers_frame(
    parts: list[ColumnBuffers],
    mode: Mode,
    transport: str,
    release: bool,
    parse: FieldParse | None,
    *,
    arrow: bool = False,
) -> Any:
    """The typed frame straight from column buffers (one read, or several in order), or None when a
    payload is an envelope (the row-by-row path removes it). Numbers are numpy views of the buffers (one
    read) or their concatenation; payloads are cut from the payload buffers only where the mode asks for
    Python objects (bytes, text, parsed JSON), a chunk at a time. The ``"json"`` text column is Arrow
    arrays over the buffers themselves (a chunk per read); the other modes first join several reads into
    one. ``parse``: the JSON modes' field parse, with every buffer added. ``release`` then empties the
    payload buffers as soon as the frame is built. ``arrow``: a ``pyarrow.Table`` of the same arrays instead
    (``auto``/``text`` payloads as one Arrow text array over the buffer, no object per row)."""
    parts = [part for part in parts if len(part)]
    n = sum(map(len, parts))
    if not n:
        return None
    if len(parts) > 1 and not (mode.fields and mode.arrow):  # "json" keeps a text chunk per read
        parts = [_joined(parts)]
    layout = [_layout(part) for part in parts]
    for part, (_, starts, sizes) in zip(parts, layout, strict=True):
        if _has_envelope(part.data, starts, sizes):
            return None
    sizes = layout[0][2] if len(layout) == 1 else np.concatenate([sizes for _, _, sizes in layout])
    fields: dict[str, pd.Series] | None = None
    if mode.fields and parse is not None:
        # pyarrow parses the field columns on worker threads (GIL released, a piece of a buffer each),
        # while this thread builds the payload column and the other columns
        utf8: bool | None = None
        if mode.arrow:  # "json": the text over the buffers
            payloads = _text_column(parts, [ends for ends, _, _ in layout])
            utf8 = True if payloads.dtype == STR_DTYPE else None
        else:
            cols, gap = parts[0], len(parts[0].separator)
            lines = gap == 1 and cols.data.count(b"\n") == n  # one payload per line: NDJSON as it stands
            values = json_lines(cols.data, n) if lines else None
            if values is None:
                values = json_values(split_payloads(cols.data, cols.data_end, gap))
            payloads = pd.Series(values, dtype=object)
            del values
        columns = _columns(parts, transport, sizes, payloads)
        del payloads
        fields = parse.result(utf8=utf8)
        if fields is None and mode.arrow:  # "json": the row-by-row fields (expand_json does "objects")
            fields = json_field_columns([body for part in parts for body in part.payloads()], arrow=False)
    else:
        cols, (ends, starts, _) = parts[0], layout[0]
        if arrow and mode.arrow_text:  # text over the buffer itself when UTF-8; else the mode's Arrow column
            payloads = json_text_array(cols.data, ends, len(cols.separator))
            if payloads is None:
                decoded = partial(chunked_values, mode.values, cols, starts, ends)
                payloads = mode.arrow_column(list(cols.payloads()), decoded)
        else:  # an Arrow array over the payload buffer itself where the mode allows: no object per row
            payloads = mode.buffer_column(cols, starts, ends)
        if release:
            cols.data = bytearray()  # the payload column is built: the buffer's bytes are not needed
        columns = _columns(parts, transport, sizes, payloads)
        del payloads
    if release:
        for part in parts:
            part.data = bytearray()  # fields parsed: the buffers' bytes are not needed (or in Arrow's hands)
    if arrow:
        return columns_table(columns, fields)
    # spent builder (``release``): the frame may take the column buffers' memory as it is, no copy
    frame = pd.DataFrame(columns, columns=list(FRAME_COLUMNS), copy=not release)
    del columns
    if fields is not None:
        return with_fields(frame, fields)
    if mode.fields:
        return expand_json(frame)
    return frame


def _has_envelope(data: bytearray, starts: np.ndarray, sizes: np.ndarray) -> bool:
    """Whether a payload of the buffer starts with ``rs`` (an envelope, or text the envelope decoder judges)."""
    heads = starts if not len(sizes) or sizes.min() >= 2 else starts[sizes >= 2]
    if not len(heads):
        return False
    # each byte with the next as one little-endian number, so one gather reads both (a view: gone on
    # return, so the buffer can be let go later)
    pairs = np.ndarray((len(data) - 1,), dtype="<u2", buffer=data, strides=(1,))
    return bool((pairs[heads] == 0x7372).any())


def _layout(cols: ColumnBuffers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each payload of a read ends and starts in its buffer, and its size (int64 arrays)."""
    gap = len(cols.separator)
    ends = np.frombuffer(cols.data_end, dtype=np.int64)
    starts = np.empty(len(ends), dtype=np.int64)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + gap
    return ends, starts, ends - starts


def _joined(parts: list[ColumnBuffers]) -> ColumnBuffers:
    """Several reads' column buffers as one (payload buffers copied into one, key codes renumbered)."""
    out = ColumnBuffers(parts[0].separator)
    for part in parts:
        if part.separator != out.separator:
            part = _with_separator(part, out.separator)
        lookup = np.array([_key_code(out.keys, key) for key in part.keys] or [0], dtype=np.int32)
        out.key_code.frombytes(lookup[np.frombuffer(part.key_code, dtype=np.int32)].tobytes())
        out.shard_id.extend(part.shard_id)
        out.seq.extend(part.seq)
        out.timestamp_ms.extend(part.timestamp_ms)
        out.offset.extend(part.offset)
        shift = len(out.data)
        out.data_end.extend(array("q", (np.frombuffer(part.data_end, dtype=np.int64) + shift).tobytes()))
        out.data += part.data
    return out


def _with_separator(cols: ColumnBuffers, separator: bytes) -> ColumnBuffers:
    """The same messages with another payload separator."""
    out = ColumnBuffers(separator)
    out.keys = cols.keys
    out.key_code, out.shard_id, out.seq, out.timestamp_ms, out.offset = (
        cols.key_code,
        cols.shard_id,
        cols.seq,
        cols.timestamp_ms,
        cols.offset,
    )
    for body in cols.payloads():
        out.data += body
        out.data_end.append(len(out.data))
        out.data += separator
    return out


def _key_code(keys: list[str], key: str) -> int:
    """``key``'s index in ``keys``, appended if new."""
    if key not in keys:
        keys.append(key)
    return keys.index(key)


def _text_column(parts: list[ColumnBuffers], ends: list[np.ndarray]) -> pd.Series:
    """The ``"json"`` text column of several reads: Arrow arrays over their buffers (a chunk each) when
    every payload is UTF-8, else what ``"auto"`` gives."""
    arrays = [json_text_array(part.data, e, len(part.separator)) for part, e in zip(parts, ends, strict=True)]
    if all(a is not None for a in arrays):
        return pd.Series(arrays[0] if len(arrays) == 1 else _pa.chunked_array(arrays), dtype=STR_DTYPE)
    columns = [
        json_text_column_from_buffer(part.data, e, len(part.separator)) for part, e in zip(parts, ends, strict=True)
    ]
    if len(columns) == 1:
        return columns[0]
    return pd.Series([value for column in columns for value in column.tolist()], dtype=object)


def _columns(parts: list[ColumnBuffers], transport: str, sizes: np.ndarray, payloads: pd.Series) -> dict[str, Any]:
    """The frame's columns (:data:`FRAME_COLUMNS`) from reads' column buffers and the payload column."""
    n = len(sizes)
    if len(parts) == 1:
        cols = parts[0]
        codes, keys = np.frombuffer(cols.key_code, dtype=np.int32), cols.keys
        shard, seq, stamp, offset = (
            np.frombuffer(a, dtype=t)
            for a, t in (
                (cols.shard_id, np.uint64),
                (cols.seq, np.uint64),
                (cols.timestamp_ms, np.int64),
                (cols.offset, np.int64),
            )
        )
    else:
        keys = []
        codes = np.concatenate(
            [
                np.array([_key_code(keys, k) for k in part.keys] or [0], dtype=np.int32)[
                    np.frombuffer(part.key_code, dtype=np.int32)
                ]
                for part in parts
            ]
        )
        shard, seq, stamp, offset = (
            np.concatenate([np.frombuffer(getattr(part, name), dtype=t) for part in parts])
            for name, t in (
                ("shard_id", np.uint64),
                ("seq", np.uint64),
                ("timestamp_ms", np.int64),
                ("offset", np.int64),
            )
        )
    zeros = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
    return {
        "stream_key": _category_codes(codes, keys),
        "shard_id": _signed(shard, "shard_id"),
        "seq": _signed(seq, "seq"),
        "timestamp": pd.DatetimeIndex(stamp.view("datetime64[ms]")).tz_localize("UTC"),
        "size": pd.arrays.IntegerArray(sizes, np.zeros(n, dtype=np.bool_)),
        "payload": payloads,
        "retry_count": zeros,
        "attempt": zeros + 1,
        "headers": pd.Series(empty_headers(n), copy=False),
        "offset": _int_view(offset),
        "transport": _transport_column(n, transport),
    }


#: The largest value of a signed 64-bit integer: ``seq`` and ``shard_id`` above it keep an unsigned dtype.
INT64_MAX = (1 << 63) - 1


class UnsignedFallbackWarning(UserWarning):
    """A ``seq`` or ``shard_id`` above 2**63 - 1 (the format allows it, no producer writes it): the column
    stays ``UInt64``, where subtraction wraps around instead of going negative."""


def _signed(values: np.ndarray, name: str) -> pd.arrays.IntegerArray:
    """``shard_id``/``seq`` as nullable ``Int64`` (a view of the uint64 memory), so that ``diff()`` and
    ``seq - retry_count`` give signed integers; values above 2**63 - 1 keep ``UInt64`` and warn once."""
    if len(values) and int(values.max()) > INT64_MAX:
        warnings.warn(
            f"{name} holds {int(values.max())}, above 2**63 - 1: the column stays UInt64, where subtraction "
            "wraps around (cast with .astype('float64') or Python ints for arithmetic)",
            UnsignedFallbackWarning,
            stacklevel=4,
        )
        return _int_view(values)
    return _int_view(values.view(np.int64))


def _int_view(values: np.ndarray) -> pd.arrays.IntegerArray:
    """A nullable integer array (``Int64``/``UInt64``) over ``values``' memory, not a copy of it."""
    return pd.arrays.IntegerArray(values, np.zeros(len(values), dtype=np.bool_))


def _transport_column(n: int, transport: str) -> pd.Categorical:
    """The ``transport`` column: ``n`` rows of ``transport``."""
    code = _TRANSPORTS.index(transport) if transport in _TRANSPORTS else -1
    return pd.Categorical.from_codes(np.full(n, code, dtype=np.int8), categories=list(_TRANSPORTS))


def _category_codes(codes: np.ndarray, keys: list[str]) -> pd.Series:
    """What :func:`_category` gives for ``[keys[c] for c in codes]``, from the codes themselves."""
    used = np.bincount(codes, minlength=len(keys)) > 0
    categories = sorted(k for k, u in zip(keys, used, strict=True) if u)
    lookup = np.full(len(keys), -1, dtype=np.int32)
    for i, name in enumerate(categories):
        lookup[keys.index(name)] = i
    return pd.Series(pd.Categorical.from_codes(lookup[codes], categories=categories))


def _signed_array(values: list[int], name: str = "seq") -> Any:
    """``shard_id``/``seq`` from a list of ints: :func:`_signed` over a numpy copy."""
    return _signed(np.array(values, dtype=np.uint64), name)


def _int_array(values: list[int], dtype: str) -> Any:
    """A nullable integer array (``Int64``/``UInt64``) from a list of ints, through numpy."""
    if not values:
        return pd.array(values, dtype=dtype)
    return pd.array(np.array(values, dtype=np.uint64 if dtype == "UInt64" else np.int64), dtype=dtype)


def _timestamps(values: list[int | None]) -> Any:
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


def payload_separator(mode: str) -> bytes:
    """The separator a reader's payload buffer should have for a payload mode (``ColumnBuffers``).

    ``b""`` (the payloads back to back: the ``"json"`` text column and the ``"bytes"`` column are Arrow
    arrays over that buffer itself) except for ``"objects"``: ``b"\\n"``, NDJSON that msgspec parses in
    one call.

    Parameters
    ----------
    mode
        A payload mode (:data:`PAYLOAD_MODES`).

    Returns
    -------
    bytes
        ``b"\\n"`` or ``b""``.

    Examples
    --------
    >>> payload_separator("json"), payload_separator("objects")
    (b'', b'\\n')
    """
    return payload_mode(mode).separator


def in_window(cols: FrameColumns | ColumnBuffers, after_ms: int | None, end_ms: int | None) -> FrameColumns:
    """The messages later than ``after_ms`` and earlier than ``end_ms`` (either may be None).

    Parameters
    ----------
    cols
        Message columns (lists, or a reader's column buffers).
    after_ms, end_ms
        The window's bounds in epoch ms, both exclusive (None: open).

    Returns
    -------
    FrameColumns
        The messages in the window, in order.

    Examples
    --------
    >>> from nbkit.wire.scan import FrameColumns
    >>> cols = FrameColumns(["k", "k"], [0, 0], [1, 2], [10, 20], [b"a", b"b"], [128, 160])
    >>> in_window(cols, 10, None).seq
    [2]
    """
    if isinstance(cols, ColumnBuffers):
        cols = cols.to_lists()
    lo = -1 if after_ms is None else after_ms
    hi = None if end_ms is None else end_ms
    keep = [lo < ts and (hi is None or ts < hi) for ts in cols.timestamp_ms]
    return FrameColumns(
        list(compress(cols.stream_key, keep)),
        list(compress(cols.shard_id, keep)),
        list(compress(cols.seq, keep)),
        list(compress(cols.timestamp_ms, keep)),
        list(compress(cols.payload, keep)),
        list(compress(cols.offset, keep)),
    )
