"""The ``payload=`` modes as objects: how each turns payloads into the ``payload`` column and back.

One small object per mode (:data:`MODES`, looked up by :func:`payload_mode`) holds what the readers and
the Parquet export need to know of it, so that no caller branches on the mode's name:

========  ==================  ============================  ====================  ====================
mode      ``payload`` dtype   values (row by row)           Arrow (read_arrow)    Parquet column
========  ==================  ============================  ====================  ====================
auto      object              text, bytes where not UTF-8   large_string (else    large_binary (as
                                                            large_binary)         stored)
text      str                 text, invalid bytes replaced  large_string          large_string
bytes     large_binary        bytes                         large_binary          large_binary
json      str (object where   as ``auto``; + field columns  as ``auto``           large_binary
          one is not UTF-8)
objects   object              parsed JSON; + field columns  (none)                large_binary (JSON)
========  ==================  ============================  ====================  ====================

The Parquet column holds what reads back exactly: ``auto``/``json`` the payload bytes (text where they
are UTF-8 on the way back, as the read made them), ``objects`` each value's JSON text (bytes as they are).
``"auto"`` keeps an object column whatever the payloads (its dtype does not depend on them, so every Dask
partition has the same); ``"json"``'s text column is str unless a payload is not UTF-8, as before.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from nbkit.tabular.arrow import arrow_module
from nbkit.tabular.payloads import (
    BYTES_DTYPE,
    STR_DTYPE,
    auto_values,
    bytes_column,
    bytes_column_from_buffer,
    json_text_array,
    json_text_column,
    json_values,
    text_values,
)
from nbkit.wire.scan import ColumnBuffers, split_payloads

__all__ = ["CHUNK", "MODES", "Mode", "chunked_values", "payload_mode"]

#: Payloads converted per step where a mode makes a Python object per row.
CHUNK = 1 << 16


class Mode:
    """One ``payload=`` mode: its row values, its ``payload`` column (from bodies or a buffer), its Arrow
    column and its Parquet conversion. Subclasses override what differs from ``"auto"``."""

    name: ClassVar[str] = "auto"
    #: Whether payloads are parsed as JSON into ``payload.<field>`` columns.
    fields: ClassVar[bool] = False
    #: Whether :meth:`arrow_column` exists (``read_arrow``, ``dtype_backend="pyarrow"``).
    arrow: ClassVar[bool] = True
    #: The separator a reader's payload buffer should have (``ColumnBuffers``).
    separator: ClassVar[bytes] = b""
    #: The pandas dtype of the ``payload`` column when every payload converts (str, bytes, object).
    dtype: ClassVar[Any] = np.dtype(object)
    #: Whether the Arrow column is text over the payload buffer where every payload is UTF-8.
    arrow_text: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"payload_mode({self.name!r})"

    # -- values -------------------------------------------------------------------------------------

    def values(self, bodies: list[bytes]) -> list[Any]:
        """The ``payload`` values of these payloads, one Python object each."""
        return auto_values(bodies)

    def column(self, bodies: list[bytes], sizes: list[int]) -> pd.Series:
        """The ``payload`` column of payloads given as a list (``sizes``: their lengths)."""
        return pd.Series(self.values(bodies), dtype=object)

    def buffer_column(self, cols: ColumnBuffers, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
        """The ``payload`` column of a reader's payload buffer (an Arrow array over it where it can be)."""
        return pd.Series(chunked_values(self.values, cols, starts, ends), dtype=object, copy=False)

    def arrow_column(self, bodies: list[bytes], decoded: Callable[[], Any]) -> Any:
        """The payloads as one Arrow array: ``large_string`` when all are UTF-8, else ``large_binary``
        (``decoded()``: the row values, for a mode whose text is its own decoding)."""
        pa = arrow_module()
        binary = pa.array(bodies, pa.large_binary())
        try:
            return binary.cast(pa.large_string())
        except pa.ArrowInvalid:
            return binary

    # -- Parquet ------------------------------------------------------------------------------------

    def parquet_type(self) -> Any:
        """The Arrow type of the ``payload`` column in a Parquet file."""
        return arrow_module().large_binary()

    def to_parquet(self, payloads: pd.Series) -> Any:
        """The ``payload`` column as the Arrow array :meth:`parquet_type` names (:meth:`from_parquet` undoes it)."""
        pa = arrow_module()
        if payloads.dtype == STR_DTYPE:
            return pa.array(payloads, pa.large_string()).cast(pa.large_binary())
        out = []
        for v in payloads.tolist():
            if isinstance(v, str):
                out.append(v.encode("utf-8"))
            elif isinstance(v, (bytes, bytearray)):
                out.append(bytes(v))
            else:
                raise ValueError(
                    f"payload mode {self.name!r} holds text or bytes, not {type(v).__name__}: "
                    "a frame with parsed payloads is written with mode='objects'"
                )
        return pa.array(out, pa.large_binary())

    def from_parquet(self, column: Any) -> pd.Series:
        """The ``payload`` column read_stream builds, from the Parquet column (a pyarrow ChunkedArray)."""
        pa = arrow_module()
        try:
            text = column.cast(pa.large_string())
        except pa.ArrowInvalid:  # a payload that is not UTF-8: the row values (str, bytes there)
            return pd.Series(self.values(column.to_pylist()), dtype=object)
        if self.dtype == STR_DTYPE:
            return pd.Series(text, dtype=STR_DTYPE)
        return pd.Series(text.to_numpy(), dtype=object)  # str objects made by Arrow, no bytes between


class _Text(Mode):
    """``payload="text"``: UTF-8 text, invalid bytes replaced; always pandas' str dtype."""

    name = "text"
    dtype = STR_DTYPE

    def values(self, bodies: list[bytes]) -> list[Any]:
        return text_values(bodies)

    def column(self, bodies: list[bytes], sizes: list[int]) -> pd.Series:
        first = json_text_column(bodies, sizes)
        return first if first.dtype == STR_DTYPE else _str_series(text_values(bodies))

    def buffer_column(self, cols: ColumnBuffers, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
        text = json_text_array(cols.data, ends, len(cols.separator))
        if text is not None:
            return pd.Series(text, dtype=STR_DTYPE, copy=False)
        return _str_series(list(chunked_values(self.values, cols, starts, ends)))

    def arrow_column(self, bodies: list[bytes], decoded: Callable[[], Any]) -> Any:
        pa = arrow_module()
        binary = pa.array(bodies, pa.large_binary())
        try:
            return binary.cast(pa.large_string())
        except pa.ArrowInvalid:
            return pa.array(decoded(), pa.large_string())

    def parquet_type(self) -> Any:
        return arrow_module().large_string()

    def to_parquet(self, payloads: pd.Series) -> Any:
        pa = arrow_module()
        values = [] if payloads.dtype == STR_DTYPE else payloads.tolist()
        bad = next((v for v in values if not isinstance(v, str)), None)
        if bad is not None:
            raise ValueError(f"payload mode 'text' needs str payloads, not {type(bad).__name__}")
        return pa.array(payloads, pa.large_string())

    def from_parquet(self, column: Any) -> pd.Series:
        return pd.Series(column, dtype=STR_DTYPE)


class _Bytes(Mode):
    """``payload="bytes"``: the payloads as stored, an Arrow binary column."""

    name = "bytes"
    dtype = BYTES_DTYPE
    arrow_text = False

    def values(self, bodies: list[bytes]) -> list[Any]:
        return bodies

    def column(self, bodies: list[bytes], sizes: list[int]) -> pd.Series:
        return bytes_column(bodies)

    def buffer_column(self, cols: ColumnBuffers, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
        return bytes_column_from_buffer(cols.data, ends, len(cols.separator))

    def arrow_column(self, bodies: list[bytes], decoded: Callable[[], Any]) -> Any:
        return arrow_module().array(bodies, arrow_module().large_binary())

    def to_parquet(self, payloads: pd.Series) -> Any:
        pa = arrow_module()
        if payloads.dtype == BYTES_DTYPE:
            return pa.array(payloads.array, pa.large_binary())
        bad = next((v for v in payloads.tolist() if not isinstance(v, (bytes, bytearray))), None)
        if bad is not None:
            raise ValueError(f"payload mode 'bytes' needs bytes payloads, not {type(bad).__name__}")
        return pa.array([bytes(v) for v in payloads.tolist()], pa.large_binary())

    def from_parquet(self, column: Any) -> pd.Series:
        if _pa_missing():
            return pd.Series(column.to_pylist(), dtype=object)
        return pd.Series(pd.arrays.ArrowExtensionArray(column.cast(arrow_module().large_binary())))


class _Json(Mode):
    """``payload="json"``: the JSON text as ``"auto"`` has it, and the fields as ``payload.<field>`` columns."""

    name = "json"
    fields = True
    dtype = STR_DTYPE

    def column(self, bodies: list[bytes], sizes: list[int]) -> pd.Series:
        return json_text_column(bodies, sizes)

    def buffer_column(self, cols: ColumnBuffers, starts: np.ndarray, ends: np.ndarray) -> pd.Series:
        text = json_text_array(cols.data, ends, len(cols.separator))
        if text is not None:
            return pd.Series(text, dtype=STR_DTYPE, copy=False)
        return super().buffer_column(cols, starts, ends)


class _Objects(Mode):
    """``payload="objects"``: a parsed value per row (and the field columns); no Arrow form."""

    name = "objects"
    fields = True
    arrow = False
    separator = b"\n"  # NDJSON, which msgspec parses in one call
    arrow_text = False

    def values(self, bodies: list[bytes]) -> list[Any]:
        return json_values(bodies)

    def arrow_column(self, bodies: list[bytes], decoded: Callable[[], Any]) -> Any:
        raise ValueError('Arrow output takes payload="json" (text and field columns), not "objects"')

    def to_parquet(self, payloads: pd.Series) -> Any:
        pa = arrow_module()
        dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode  # any str, lone surrogates too
        return pa.array(
            [bytes(v) if isinstance(v, (bytes, bytearray)) else dumps(v).encode() for v in payloads.tolist()],
            pa.large_binary(),
        )

    def from_parquet(self, column: Any) -> pd.Series:
        return pd.Series(json_values(column.to_pylist()), dtype=object)


#: Every mode by its ``payload=`` name.
MODES: dict[str, Mode] = {mode.name: mode for mode in (Mode(), _Text(), _Bytes(), _Json(), _Objects())}


def payload_mode(name: str | Mode) -> Mode:
    """The mode object of a ``payload=`` name (a mode object is returned as it is).

    Parameters
    ----------
    name : str
        ``"auto"``, ``"text"``, ``"bytes"``, ``"json"`` or ``"objects"``.

    Returns
    -------
    Mode

    Raises
    ------
    ValueError
        An unknown name (``"columns"``, the old name of ``"json"``, says to pass ``"json"``).

    Examples
    --------
    >>> payload_mode("json").fields, payload_mode("objects").separator
    (True, b'\\n')
    """
    if isinstance(name, Mode):
        return name
    if str(name) == "columns":  # the old name of "json" (callers without type checks pass it)
        raise ValueError(
            'payload="columns" is now payload="json" (the JSON text, and the fields as payload.<field> '
            'columns); pass payload="json" (or payload="objects" for a parsed object per row)'
        )
    mode = MODES.get(name) if isinstance(name, str) else None
    if mode is None:
        raise ValueError(f"payload must be one of {', '.join(MODES)}, not {name!r}")
    return mode


def chunked_values(
    convert: Callable[[list[bytes]], list[Any]], cols: ColumnBuffers, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """A mode's row values for a payload buffer, cut and converted a chunk at a time (only one chunk's
    bytes objects exist beside the buffer); an object array."""
    n = len(ends)
    gap = len(cols.separator)
    out = np.empty(n, dtype=object)
    with memoryview(cols.data) as view:
        for i in range(0, n, CHUNK):
            j = min(n, i + CHUNK)
            first = int(starts[i])
            part = array("q")
            part.frombytes((ends[i:j] - first).tobytes())
            bodies = split_payloads(view[first:], part, gap)
            out[i:j] = convert(bodies)
            del bodies
    return out


def _pa_missing() -> bool:
    """Whether the bytes column is an object column (pyarrow not installed)."""
    return isinstance(BYTES_DTYPE, np.dtype)


def _str_series(values: list[str]) -> pd.Series:
    """Text values as pandas' str dtype (through Arrow where that is its storage)."""
    if getattr(STR_DTYPE, "storage", None) == "pyarrow":
        pa = arrow_module()
        return pd.Series(pa.array(values, pa.large_string()), dtype=STR_DTYPE)
    return pd.Series(values, dtype=STR_DTYPE)
