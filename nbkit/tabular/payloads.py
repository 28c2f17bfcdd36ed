"""Payload columns: bytes as text or parsed JSON, and a JSON object's fields as ``payload.<field>`` columns.

The conversions behind the ``payload=`` modes of ``read_stream`` (and the Dask reader, the Parquet
export): ``"auto"`` (text where UTF-8, else bytes), ``"text"`` (UTF-8 with replacement), ``"json"`` (the
JSON text as an Arrow-backed str column), ``"objects"`` (what ``json.loads`` makes of each payload) and the
field columns of ``"json"``/``"objects"``. Column at a time, no Python object per row where the caller did
not ask for one: msgspec parses a whole list, pyarrow.json parses one buffer of the payloads; the
row-by-row path decides wherever those could differ.
"""

from __future__ import annotations

import json
from array import array
from operator import itemgetter, methodcaller
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from nbkit.wire.jsonfields import COMPILED as _FLAT_COMPILED
from nbkit.wire.jsonfields import flat_columns
from nbkit.wire.scan import compact_payloads, split_payloads
from nbkit.wire.scan import payload_lines as _payload_lines

try:  # pandas 3 stores str in Arrow when pyarrow is installed; then bytes payloads go in Arrow too
    import pyarrow as _pa
except ImportError:  # pragma: no cover - pyarrow is in the scale extra and in Binder's pins
    _pa = None

__all__ = [
    "BYTES_DTYPE",
    "PIECE_BYTES",
    "STR_DTYPE",
    "FieldParse",
    "arrow_json_fields",
    "auto_values",
    "bytes_column",
    "bytes_column_from_buffer",
    "expand_json",
    "flat_table",
    "infer_column",
    "json_field_columns",
    "json_lines",
    "json_text_array",
    "json_text_column",
    "json_text_column_from_buffer",
    "json_value",
    "json_values",
    "ndjson_fields",
    "text_values",
    "with_fields",
]

_decode = methodcaller("decode", "utf-8")
_decode_replace = methodcaller("decode", "utf-8", "replace")


def _text_or_bytes(body: bytes) -> str | bytes:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body


def auto_values(bodies: list[bytes]) -> list[str | bytes]:
    """The ``payload="auto"`` values: each payload as text where it is UTF-8, else as its bytes.

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).

    Returns
    -------
    list
        One str (or bytes) per payload.

    Examples
    --------
    >>> auto_values([b"hi", b"\\xff"])
    ['hi', b'\\xff']
    """
    try:
        return list(map(_decode, bodies))
    except UnicodeDecodeError:
        return [_text_or_bytes(b) for b in bodies]


def text_values(bodies: list[bytes]) -> list[str]:
    """The ``payload="text"`` values: each payload decoded as UTF-8, invalid bytes replaced.

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).

    Returns
    -------
    list of str
        One str per payload.

    Examples
    --------
    >>> text_values([b"hi", b"\\xff"])
    ['hi', '\ufffd']
    """
    return list(map(_decode_replace, bodies))


def json_value(body: bytes) -> Any:
    """One payload in ``objects`` mode: what ``json.loads`` makes of its UTF-8 text.

    The text if it is not JSON; the bytes if it is not UTF-8. msgspec parses first (it gives the same
    values, big integers exact); what it rejects (NaN, Infinity, lone surrogates, ...) the standard
    library decides.

    Parameters
    ----------
    body
        One payload (envelope removed).

    Returns
    -------
    Any
        The parsed value, the text, or the bytes.

    Examples
    --------
    >>> json_value(b'{"id": 1}'), json_value(b"NaN"), json_value(b"not json")
    ({'id': 1}, nan, 'not json')
    """
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


def json_values(bodies: list[bytes]) -> list[Any]:
    """``[json_value(b) for b in bodies]``, at msgspec's speed while every payload is plain JSON.

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).

    Returns
    -------
    list
        One value per payload, as :func:`json_value` makes it.

    Examples
    --------
    >>> json_values([b"[1, 2]", b"x"])
    [[1, 2], 'x']
    """
    try:
        return list(map(_msgspec_decode, bodies))
    except msgspec.MsgspecError:
        return [json_value(b) for b in bodies]


_msgspec_decode = msgspec.json.Decoder().decode
_decode_lines = msgspec.json.Decoder().decode_lines


def expand_json(frame: pd.DataFrame) -> pd.DataFrame:
    """Add a ``payload.<field>`` column for each top-level field of JSON-object payloads.

    The row-by-row path: ``frame["payload"]`` holds parsed values (``payload="objects"``).

    Parameters
    ----------
    frame
        A frame with a ``payload`` column of parsed JSON values.

    Returns
    -------
    pandas.DataFrame
        ``frame`` with the field columns after its own (``frame`` itself when no payload is an object).

    Examples
    --------
    >>> expand_json(pd.DataFrame({"payload": [{"a": 1}, {"a": 2}]}))["payload.a"].tolist()
    [1, 2]
    """
    columns = _field_values(frame["payload"].tolist())
    extra = {f"payload.{name}": infer_column(values) for name, values in columns.items()}
    if not extra:
        return frame
    return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def with_fields(frame: pd.DataFrame, fields: dict[str, pd.Series]) -> pd.DataFrame:
    """``frame`` with a ``payload.<field>`` column for each entry of ``fields`` (none: ``frame``).

    Parameters
    ----------
    frame
        The frame.
    fields
        Field name -> column (same length as ``frame``).

    Returns
    -------
    pandas.DataFrame
        The frame with the columns added after its own.

    Examples
    --------
    >>> list(with_fields(pd.DataFrame({"payload": ["{}"]}), {"a": pd.Series([1])}).columns)
    ['payload', 'payload.a']
    """
    if not fields:
        return frame
    extra = {f"payload.{name}": series for name, series in fields.items()}
    return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def bytes_column(bodies: list[bytes]) -> pd.Series:
    """``payload="bytes"``: the payloads as one Arrow binary array (:data:`BYTES_DTYPE`), not a bytes object per row.

    Each value still reads as ``bytes`` (``column.iloc[0]``, ``column.tolist()``). Object dtype when
    pyarrow is not installed.

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).

    Returns
    -------
    pandas.Series
        The payload column.

    Examples
    --------
    >>> bytes_column([b"hi", b"\\xff"]).tolist()
    [b'hi', b'\\xff']
    """
    if _pa is None:
        return pd.Series(bodies, dtype=object)
    return pd.Series(_pa.array(bodies, type=_pa.large_binary()), dtype=BYTES_DTYPE)


def bytes_column_from_buffer(data: bytes | bytearray, ends: np.ndarray, gap: int) -> pd.Series:
    """:func:`bytes_column` of payloads given as one buffer: an Arrow binary array over that buffer, no copy
    (when ``gap`` is 0; else over the payloads compacted without their separators).

    Parameters
    ----------
    data
        The payloads back to back, each followed by ``gap`` separator bytes. Arrow keeps a reference to
        it: the caller must not change it after.
    ends
        Where each payload ends in ``data`` (int64).
    gap
        The separator's length (0 or 1).

    Returns
    -------
    pandas.Series
        The payload column (:data:`BYTES_DTYPE`).

    Examples
    --------
    >>> bytes_column_from_buffer(b"ab\\ncd\\n", np.array([2, 5]), 1).tolist()
    [b'ab', b'cd']
    """
    if _pa is None:
        return pd.Series(split_payloads(data, _int64_array(ends), gap), dtype=object)
    return pd.Series(_binary_array(data, ends, gap), dtype=BYTES_DTYPE, copy=False)


def _int64_array(ends: np.ndarray) -> array:
    """``ends`` as the ``array("q")`` the buffer functions of :mod:`nbkit.wire.scan` take."""
    return array("q", ends.astype(np.int64).tobytes())


def _binary_array(data: bytes | bytearray, ends: np.ndarray, gap: int) -> Any:
    """The payloads of a buffer as one Arrow ``large_binary`` array over it (pyarrow installed): no copy
    when ``gap`` is 0, else over the payloads compacted without their separators. The one place that
    lays payload buffers out for Arrow (the bytes column, the text column, the UTF-8 check)."""
    n = len(ends)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:] = ends - gap * np.arange(n, dtype=np.int64)  # where each ends once separators are out
    values = compact_payloads(data, _int64_array(ends), gap) if gap and n else data
    return _pa.LargeBinaryArray.from_buffers(
        _pa.large_binary(), n, [None, _pa.py_buffer(offsets), _pa.py_buffer(values)]
    )


def json_text_column(bodies: list[bytes], sizes: list[int]) -> pd.Series:
    """``payload="json"``: the payloads as text, one Arrow string array over one buffer.

    pandas' str dtype when every payload is UTF-8 (and pandas stores str in Arrow); else what
    ``"auto"`` gives (str, or bytes where not UTF-8).

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).
    sizes
        Their lengths.

    Returns
    -------
    pandas.Series
        The text column.

    Examples
    --------
    >>> json_text_column([b'{"a": 1}'], [8]).tolist()
    ['{"a": 1}']
    """
    text = _text_array(b"".join(bodies), np.cumsum(np.asarray(sizes, dtype=np.int64)), 0) if _ARROW_STR else None
    if text is not None:
        return pd.Series(text, dtype=STR_DTYPE)
    return pd.Series(auto_values(bodies), dtype=object)


def json_lines(data: bytes | bytearray, n: int) -> list[Any] | None:
    """:func:`json_values` of ``n`` payloads given as NDJSON, parsed in one call; None where it could differ.

    Parameters
    ----------
    data
        The payloads, each on its own line (none holds a newline).
    n
        How many payloads.

    Returns
    -------
    list or None
        One parsed value per payload, or None (a payload that is not plain JSON, or an empty one): then
        :func:`json_values` decides, payload by payload.

    Examples
    --------
    >>> json_lines(b'{"a": 1}\\n[2]\\n', 2)
    [{'a': 1}, [2]]
    >>> json_lines(b'{"a": 1}\\n\\n', 2) is None
    True
    """
    try:
        values = _decode_lines(data)
    except msgspec.MsgspecError:
        return None
    return values if len(values) == n else None


def json_text_array(data: bytes | bytearray, ends: np.ndarray, gap: int) -> Any:
    """The payloads of a buffer as one Arrow ``large_string`` array over it (no copy when ``gap`` is 0).

    Parameters
    ----------
    data, ends, gap
        As for :func:`json_text_column_from_buffer`.

    Returns
    -------
    pyarrow.LargeStringArray or None
        The text; None when a payload is not UTF-8, there are none, or pandas does not store str in Arrow.

    Examples
    --------
    >>> text = json_text_array(b'{"a": 1}[]', np.array([8, 10]), 0)
    >>> text is None or text.to_pylist() == ['{"a": 1}', '[]']
    True
    """
    if not _ARROW_STR or not len(ends):
        return None
    return _text_array(data, ends, gap)


def _text_array(data: bytes | bytearray, ends: np.ndarray, gap: int) -> Any:
    """:func:`_binary_array` as a ``large_string`` array, or None where a payload is not UTF-8 (the cast
    checks it throughout, no Python object)."""
    try:
        return _binary_array(data, ends, gap).cast(_pa.large_string())
    except _pa.ArrowInvalid:
        return None


def json_text_column_from_buffer(data: bytes | bytearray, ends: np.ndarray, gap: int) -> pd.Series:
    """:func:`json_text_column` of payloads given as one buffer: an Arrow string array over it.

    Parameters
    ----------
    data
        The payloads back to back, each followed by ``gap`` separator bytes.
    ends
        Where each payload ends in ``data`` (int64).
    gap
        The separator's length (0 or 1).

    Returns
    -------
    pandas.Series
        The text column (pandas' str dtype when every payload is UTF-8 and pandas stores str in Arrow;
        else what ``"auto"`` gives).

    Examples
    --------
    >>> json_text_column_from_buffer(b'{"a": 1}\\n[]\\n', np.array([8, 11]), 1).tolist()
    ['{"a": 1}', '[]']
    """
    text = json_text_array(data, ends, gap)
    if text is not None:
        return pd.Series(text, dtype=STR_DTYPE)
    return pd.Series(auto_values(split_payloads(data, _int64_array(ends), gap)), dtype=object)


def json_field_columns(bodies: list[bytes], *, arrow: bool = True) -> dict[str, pd.Series]:
    """The ``payload.<field>`` columns of ``payload="json"``.

    Through pyarrow.json when that gives exactly what the row-by-row path gives, else that path (the
    same values ``"objects"`` has).

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).
    arrow
        Try pyarrow.json first (False: the caller knows it would not do, go row by row).

    Returns
    -------
    dict
        Field name -> column.

    Examples
    --------
    >>> json_field_columns([b'{"a": 1}', b'{"a": 2}'])["a"].tolist()
    [1, 2]
    """
    fields = arrow_json_fields(bodies) if arrow else None
    if fields is not None:
        return fields
    return {name: infer_column(values) for name, values in _field_values(json_values(bodies)).items()}


#: pyarrow types whose columns equal the row-by-row path's (int64, float64, bool, Arrow-backed str).
_ARROW_KINDS = ("int64", "double", "bool", "string", "large_string")
#: The nullable pandas dtype of a field column with missing values, by pyarrow type (numbers and
#: booleans stay what they are instead of becoming float64 or object).
_NULLABLE_KINDS: dict[str, Any] = {"int64": pd.Int64Dtype(), "bool": pd.BooleanDtype()}


def arrow_json_fields(bodies: list[bytes]) -> dict[str, pd.Series] | None:
    """The ``payload.<field>`` columns parsed by ``pyarrow.json``, or None where that could differ.

    The payloads are joined by newlines (one buffer, no Python object per value). Flat objects (the
    common shape) are read by the compiled field parser (:mod:`nbkit.wire.jsonfields`) where it is
    built, everything else by pyarrow.json. None when the result
    could differ from the row-by-row path: pyarrow missing, a payload that is not one JSON object on
    one line, an empty one, a null, a nested value, a duplicate field, an integer beyond int64 (pyarrow
    makes it a double).

    Parameters
    ----------
    bodies
        Payloads (envelopes removed).

    Returns
    -------
    dict or None
        Field name -> column, or None (then the caller takes the row-by-row path).

    Examples
    --------
    >>> fields = arrow_json_fields([b'{"a": 1}', b'{"a": 2}'])
    >>> fields is None or fields["a"].tolist() == [1, 2]
    True
    """
    if not bodies:
        return None
    joined = b"\n".join(bodies)
    if _FLAT_COMPILED:  # flat objects: the compiled field parser (newlines inside a payload are no matter)
        ends = array("q", (np.cumsum(np.fromiter(map(len, bodies), np.int64, len(bodies)) + 1) - 1).tobytes())
        table = flat_table(flat_columns(joined, ends, 0, len(bodies), 1), len(bodies))
        if table is not None:
            return _table_fields(table, len(bodies))
    if joined.count(b"\n") != len(bodies) - 1:  # a payload with a newline inside: rows would not line up
        return None
    return ndjson_fields(joined, len(bodies))


def ndjson_fields(data: bytes | bytearray, n: int) -> dict[str, pd.Series] | None:
    """:func:`arrow_json_fields` of ``n`` payloads given as NDJSON: one buffer, a payload per line.

    Parameters
    ----------
    data
        The payloads, each on its own line (none holds a newline).
    n
        How many payloads.

    Returns
    -------
    dict or None
        Field name -> column, or None where pyarrow could differ from the row-by-row path (text that is
        not UTF-8 included: pyarrow.json does not check it).

    Examples
    --------
    >>> fields = ndjson_fields(b'{"a": 1}\\n{"a": 2}\\n', 2)
    >>> fields is None or fields["a"].tolist() == [1, 2]
    True
    """
    if not n or _pa is None or not _utf8(data):
        return None
    return _table_fields(_arrow_table(data), n)


def _utf8(data: bytes | bytearray) -> bool:
    """Whether ``data`` is UTF-8 throughout (pyarrow's check: no copy, no Python object)."""
    return _text_array(data, np.array([len(data)], dtype=np.int64), 0) is not None


_MAX_BLOCK = (1 << 31) - 1  # pyarrow.json's largest block; a larger input is cut at newlines


def _arrow_table(data: bytes | bytearray | Any, schema: Any = None) -> Any:
    """JSON objects one after the other (NDJSON, or back to back: one block) parsed by pyarrow.json (GIL
    released; fields that look like ISO times read as text), or None where pyarrow cannot parse them.
    ``data``: bytes, a bytearray or a ``pyarrow.Buffer`` (a slice of a larger buffer, not copied).
    ``schema``: the fields and types the data must have exactly (None: inferred from the data)."""
    if not _ARROW_STR:
        return None
    try:
        import pyarrow.json as pa_json
    except ImportError:
        return None
    pa = _pa
    joined = data if isinstance(data, pa.Buffer) else pa.py_buffer(data)
    # one thread per buffer (callers run buffers in parallel) and one block for all of it: the parser then
    # reads the objects one after the other, with or without newlines between them (no chunking pass)
    options = pa_json.ReadOptions(use_threads=False, block_size=min(max(joined.size + 1, 1 << 20), _MAX_BLOCK))
    try:
        if schema is not None:
            parse = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
            return pa_json.read_json(pa.BufferReader(joined), read_options=options, parse_options=parse)
        table = pa_json.read_json(pa.BufferReader(joined), read_options=options)
        stamps = [f.name for f in table.schema if pa.types.is_timestamp(f.type) or pa.types.is_date(f.type)]
        if stamps:  # pyarrow reads ISO-looking text as timestamps: read those fields as text
            schema = pa.schema([pa.field(name, pa.string()) for name in stamps])
            parse = pa_json.ParseOptions(explicit_schema=schema)
            order = table.column_names
            table = pa_json.read_json(pa.BufferReader(joined), read_options=options, parse_options=parse).select(order)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError):
        return None
    return table


def _table_fields(table: Any, n: int) -> dict[str, pd.Series] | None:
    """The field columns of a pyarrow.json table of ``n`` payloads, or None where they could differ from
    the row-by-row path (a row skipped, a field null throughout, a nested or other type, a double that may
    be a big int). Fields some payloads lack: ``Int64``/``boolean`` (nullable), ``float64``/str with NaN."""
    if table is None or table.num_rows != n:  # empty payloads (blank lines) are skipped by pyarrow
        return None
    columns: dict[str, pd.Series] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        kind = str(column.type)
        if kind not in _ARROW_KINDS or column.null_count == len(column):
            return None  # an all-null field is an object column of None on the row-by-row path
        if kind in ("string", "large_string"):
            columns[name] = pd.Series(column, dtype=STR_DTYPE)
            continue
        if column.null_count and kind in _NULLABLE_KINDS:  # a field some payloads lack (or give null)
            columns[name] = pd.Series(_NULLABLE_KINDS[kind].__from_arrow__(column))
            continue
        values = column.to_numpy()
        if kind == "double" and np.any((np.abs(values) >= 2.0**63) & (values == np.floor(values))):
            return None  # perhaps an integer beyond int64, which the row-by-row path keeps exact
        columns[name] = pd.Series(values)
    return columns


#: Payload bytes per piece that :class:`FieldParse` hands to one pyarrow.json call.
PIECE_BYTES = 24 << 20


class FieldParse:
    """The ``payload.<field>`` columns of payload buffers, parsed on worker threads.

    Each buffer given to :meth:`add` is cut into pieces of about :data:`PIECE_BYTES`; a worker parses a
    piece where it lies in the buffer (GIL released, no copy: the compiled field parser of
    :mod:`nbkit.wire.jsonfields` for flat objects, else pyarrow.json), so pieces run on every core while
    the caller's thread goes on (reading the next buffer, building the other columns). The first piece's
    schema is given to the others (pyarrow then skips its type inference). :meth:`result` joins them: the
    columns :func:`ndjson_fields` gives for all the payloads as one buffer, or None where that could
    differ from the row-by-row path.

    Parameters
    ----------
    pool : concurrent.futures.Executor
        Runs the pieces.

    Examples
    --------
    >>> from array import array
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(2) as pool:
    ...     parse = FieldParse(pool)
    ...     parse.add(b'{"a": 1}{"a": 2}', array("q", [8, 16]), 0)
    ...     parse.add(b'{"a": 3}', array("q", [8]), 0)
    ...     fields = parse.result(utf8=True)
    >>> fields is None or fields["a"].tolist() == [1, 2, 3]
    True
    """

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._buffers: list[tuple[bytes | bytearray, array, int]] = []
        self._pieces: list[Any] = []

    def add(self, data: bytes | bytearray, ends: array, gap: int) -> None:
        """Start parsing the payloads of one more buffer (they follow those added before).

        Parameters
        ----------
        data : bytes or bytearray
            The payloads back to back, each followed by ``gap`` separator bytes (not changed until
            :meth:`result` returns).
        ends : array.array
            Where each payload ends in ``data`` (``array("q")``).
        gap : int
            The separator's length (0 or 1).
        """
        self._buffers.append((data, ends, gap))
        n = len(ends)
        if not n:
            return
        at = np.frombuffer(ends, dtype=np.int64)
        marks = np.arange(PIECE_BYTES, int(at[-1]), PIECE_BYTES, dtype=np.int64)
        cuts = [0, *sorted(set(np.searchsorted(at, marks).tolist()) - {0, n}), n]
        for first, last in zip(cuts[:-1], cuts[1:], strict=False):
            lead = self._pieces[0] if self._pieces else None
            self._pieces.append(self._pool.submit(self._piece, data, ends, gap, first, last, lead))

    @staticmethod
    def _piece(data: bytes | bytearray, ends: array, gap: int, first: int, last: int, lead: Any) -> Any:
        """One piece's pyarrow table, or None (pyarrow cannot parse it).

        The piece is parsed where it lies in the buffer (a zero-copy slice, one pyarrow block: the parser
        reads the objects one after the other, with or without separators). Each payload is one row
        unless a payload is not one JSON object (then the row count or :meth:`result`'s checks differ,
        as they did for the payloads as NDJSON lines). Pieces after the first (``lead``) are parsed with
        the first one's schema; where that schema does not fit the piece, the piece is parsed again with
        inference (then the schemas differ and :meth:`result` parses all payloads as one buffer)."""
        if _pa is None:
            return None
        if _FLAT_COMPILED:  # flat objects (the common shape): the compiled field parser, ~3x pyarrow's speed
            table = flat_table(flat_columns(data, ends, first, last, gap), last - first)
            if table is not None:
                return table
        start = 0 if first == 0 else ends[first - 1] + gap
        stop = ends[last - 1] + gap
        if stop - start >= _MAX_BLOCK:  # more than one block: pyarrow cuts at newlines, so give it lines
            lines = _payload_lines(data, ends, first, last, gap)
        else:
            lines = _pa.py_buffer(data).slice(start, stop - start)
        if lines is None:
            return None
        table = None
        if lead is not None:
            first_table = lead.result()
            if first_table is not None:
                table = _arrow_table(lines, first_table.schema)
        return _arrow_table(lines) if table is None else table

    def result(self, *, utf8: bool | None = None) -> dict[str, pd.Series] | None:
        """Wait for the pieces and return the field columns (None: take the row-by-row path).

        Parameters
        ----------
        utf8 : bool, optional
            Whether the caller knows the payloads are UTF-8 throughout (None: check it here).

        Returns
        -------
        dict or None
            Field name -> column.
        """
        tables = [piece.result() for piece in self._pieces]
        n = sum(len(ends) for _, ends, _ in self._buffers)
        if not tables or any(t is None for t in tables):
            return None
        if utf8 is None:
            utf8 = all(_utf8(data) for data, _, _ in self._buffers)
        if not utf8:
            return None
        names = tables[0].column_names
        # a piece whose first payload lists the same fields in another order: the first piece's order (that of
        # the payloads as one buffer, whose columns come in the order the fields first appear)
        tables = [
            t if t.column_names == names or set(t.column_names) != set(names) else t.select(names) for t in tables
        ]
        if any(t.schema != tables[0].schema for t in tables[1:]):  # types inferred apart differ: parse as one
            lines = [_payload_lines(data, ends, 0, len(ends), gap) for data, ends, gap in self._buffers]
            if any(part is None for part in lines):
                return None
            return _table_fields(_arrow_table(b"".join(lines)), n)  # type: ignore[arg-type]  # None ruled out
        return _table_fields(_pa.concat_tables(tables) if len(tables) > 1 else tables[0], n)


_FLAT_TYPES = {"int64": "int64", "double": "float64"}  # pyarrow type factories of the numeric kinds


def flat_table(columns: list[tuple[str, str, Any]] | None, n: int) -> Any:
    """The pyarrow table of :func:`nbkit.wire.jsonfields.flat_columns`' field buffers (no copy but the
    bools' packing), typed as pyarrow.json would type the same payloads; None for None.

    Parameters
    ----------
    columns : list of (str, str, object) or None
        What ``flat_columns`` returned for ``n`` payloads.
    n : int
        How many payloads (rows).

    Returns
    -------
    pyarrow.Table or None

    Examples
    --------
    >>> from array import array
    >>> from nbkit.wire.jsonfields import flat_columns
    >>> table = flat_table(flat_columns(b'{"id":1,"ok":true}', array("q", [18]), 0, 1, 0), 1)
    >>> table.to_pydict()
    {'id': [1], 'ok': [True]}
    """
    if columns is None or _pa is None:
        return None
    pa = _pa
    arrays = []
    for _, kind, buffers in columns:
        if kind == "string":
            offsets, text = buffers
            arrays.append(pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text)))
        elif kind == "bool":
            arrays.append(pa.array(np.frombuffer(buffers, dtype=np.bool_)))
        else:
            arrays.append(pa.Array.from_buffers(getattr(pa, _FLAT_TYPES[kind])(), n, [None, pa.py_buffer(buffers)]))
    return pa.Table.from_arrays(arrays, names=[name for name, _, _ in columns])


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


def infer_column(values: list[Any]) -> pd.Series:
    """A field's column: ``pd.Series(values, dtype=object).infer_objects()``, built directly where it can be,
    with integers and booleans kept as such where some values are missing (None).

    Directly when every value has the same type: str (inferred as pandas does for text), int (in
    int64), float or bool (numpy). Ints or bools with None among them: nullable ``Int64`` / ``boolean``
    (inference would make ints float64 and bools object).

    Parameters
    ----------
    values
        One value per row.

    Returns
    -------
    pandas.Series
        The typed column.

    Examples
    --------
    >>> infer_column([1, 2]).dtype
    dtype('int64')
    >>> infer_column([1, None]).dtype, infer_column([True, None]).dtype
    (Int64Dtype(), BooleanDtype)
    """
    kinds = set(map(type, values))
    if type(None) in kinds and len(kinds) == 2:
        kind = next(k for k in kinds if k is not type(None))
        nullable = _NULLABLE_PY.get(kind)
        if nullable is not None:
            try:
                return pd.Series(pd.array(values, dtype=nullable))
            except (OverflowError, TypeError):  # ints beyond int64: inference decides
                pass
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
_NULLABLE_PY = {int: "Int64", bool: "boolean"}  # a field's kind with missing values -> its nullable dtype
STR_DTYPE = pd.Series([], dtype="str").dtype  # what pandas infers for text: pyarrow-backed "str" in pandas 3
_ARROW_STR = getattr(STR_DTYPE, "storage", None) == "pyarrow"  # pandas stores str in Arrow (pyarrow installed)
#: The ``payload`` column's dtype for ``payload="bytes"``: Arrow ``large_binary`` (values read as bytes);
#: object when pyarrow is not installed.
BYTES_DTYPE: Any = np.dtype(object) if _pa is None else pd.ArrowDtype(_pa.large_binary())


def _text_series(values: list[str]) -> pd.Series:
    """What inference gives for str values (pandas' str dtype), built directly: through pyarrow when
    that is its storage (pandas itself goes through an object array first, ~4x slower on a million
    rows). Object dtype when a value has no UTF-8 form (a lone surrogate from a JSON ``\\ud800``)."""
    try:
        if _ARROW_STR:
            pa = _pa
            return pd.Series(pa.array(values, type=pa.large_string()), dtype=STR_DTYPE)
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
