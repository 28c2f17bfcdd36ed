"""Message columns as a ``pyarrow.Table``: what ``nbkit.read_arrow`` returns, without a DataFrame between.

:class:`~nbkit.tabular.builder.FrameBuilder` makes one array per column of the messages frame (numpy
arrays over the reader's column buffers, Arrow arrays over its payload buffer, categorical codes for the
keys). :func:`columns_table` turns those arrays into Arrow arrays one by one (numbers without a copy,
categoricals as dictionary arrays, Arrow-backed columns as they are) and puts them in a table: no
``pandas.DataFrame`` is built, and no ``Table.from_pandas`` of one.

The Arrow types (what polars, DuckDB and ``pyarrow.parquet`` see):

===========  =================================  ==============================================
column       Arrow type                         from
===========  =================================  ==============================================
stream_key   dictionary<intN, string>           the category codes (int8 for up to 127 keys), sorted keys
shard_id     uint64                             the frame's ``shard_id``
seq          the frame's integer type           ``seq``
timestamp    timestamp[ms, tz=UTC]              ``timestamp``
size         int64                              ``size``
payload      large_string or large_binary       the payload buffer (text where every payload is
                                                UTF-8; ``payload="bytes"``: always binary)
retry_count  int64
attempt      int64
headers      map<string, string>                the envelope's headers (empty maps without one)
offset       int64
transport    dictionary<int8, string>           ``file`` or ``pipe``
payload.*    the field's type                   ``payload="json"``'s field columns
===========  =================================  ==============================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from nbkit.errors import MissingExtraError, install_hint

__all__ = ["arrow_module", "columns_table", "headers_array"]


def arrow_module() -> Any:
    """``pyarrow``, or a :class:`~nbkit.MissingExtraError` naming the install that adds it."""
    try:
        import pyarrow
    except ImportError:
        raise MissingExtraError(
            "Arrow output (nbkit.read_arrow, dtype_backend='pyarrow') needs pyarrow, which nbkit's optional extra "
            f"'arrow' installs: {install_hint('arrow')}"
        ) from None
    return pyarrow


def headers_array(headers: Any, n: int) -> Any:
    """The ``headers`` column as an Arrow ``map<string, string>`` array (dicts in; all empty without a copy).

    Parameters
    ----------
    headers : sequence of dict
        One dict per row.
    n : int
        The number of rows.

    Returns
    -------
    pyarrow.MapArray

    Examples
    --------
    >>> headers_array([{}, {"x-ruststream-retry-count": "1"}], 2).to_pylist()
    [[], [('x-ruststream-retry-count', '1')]]
    """
    pa = arrow_module()
    map_type = pa.map_(pa.string(), pa.string())
    values = list(headers)
    if not any(values):
        offsets = pa.array(np.zeros(n + 1, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, pa.array([], pa.string()), pa.array([], pa.string()), type=map_type)
    return pa.array([list(h.items()) for h in values], type=map_type)


def _array(name: str, column: Any, n: int) -> Any:
    """One frame column as an Arrow array (or chunked array)."""
    pa = arrow_module()
    if name == "headers":
        return headers_array(column, n)
    if isinstance(column, pd.Series):
        column = column.array
    if isinstance(column, pd.DatetimeIndex):
        column = column.array
    if isinstance(column, pd.Categorical):
        codes = np.asarray(column.codes)
        categories = pa.array(list(column.categories), pa.string())
        mask = codes < 0
        return pa.DictionaryArray.from_arrays(pa.array(codes, mask=mask if mask.any() else None), categories)
    if isinstance(column, (pd.arrays.IntegerArray, pd.arrays.FloatingArray, pd.arrays.BooleanArray)):
        mask = np.asarray(column._mask)
        return pa.array(np.asarray(column._data), mask=mask if mask.any() else None)
    if isinstance(column, np.ndarray) and column.dtype != object:
        return pa.array(column)
    return pa.array(column)  # Arrow-backed columns (text, binary, fields) convert without a copy


def columns_table(columns: Mapping[str, Any], fields: Mapping[str, Any] | None = None) -> Any:
    """A ``pyarrow.Table`` of the frame's columns (in order), then ``payload.<field>`` for each field.

    Parameters
    ----------
    columns : mapping
        Column name -> the array :class:`~nbkit.tabular.builder.FrameBuilder` made for it.
    fields : mapping, optional
        Field name -> column (``payload="json"``).

    Returns
    -------
    pyarrow.Table
    """
    pa = arrow_module()
    n = len(next(iter(columns.values()))) if columns else 0
    names = list(columns)
    arrays = [_array(name, columns[name], n) for name in names]
    for field, column in (fields or {}).items():
        names.append(f"payload.{field}")
        arrays.append(_array("", column, n))
    return pa.table(arrays, names=names)
