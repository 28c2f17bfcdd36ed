"""Flat JSON objects to field columns: the payloads of a stream as typed column buffers, no object per row.

:func:`flat_columns` reads payloads that are each one flat JSON object with the same fields (a number,
a string or a bool in each; the common shape of stream data) into one buffer per field: int64, double,
bool or UTF-8 text with int32 offsets. Anything else (a nested value, a null, a field missing or added,
a duplicate field, an integer beyond int64, a number out of double's range, invalid UTF-8, text that is
not JSON) gives None, and the caller takes its general path (pyarrow.json, then row by row).

This module is the pure-Python reference twin (``json.loads`` per payload, checked); the compiled twin
``nbkit.wire._jsonfields`` (one pass over the bytes, no GIL) gives identical results, and
``tests/wire/test_jsonfields.py`` holds them to that. :data:`COMPILED` says whether the compiled twin is
active (chosen once, by the rule of :mod:`nbkit.wire.core`): the pure twin is the reference, too slow to
beat pyarrow.json, so readers use this path only when it is compiled.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from nbkit.wire.core import load_compiled

__all__ = ["COMPILED", "MAX_FIELDS", "NUMBER_LIMIT", "flat_columns", "flat_columns_pure"]

#: The most fields an object may have (more: None, the general path decides).
MAX_FIELDS = 64
#: The longest number text, in characters (longer: None).
NUMBER_LIMIT = 100

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_NONZERO_DIGITS = frozenset("123456789")

Column = tuple[str, str, Any]  # (field name, kind, buffers): see flat_columns


class _Off(Exception):
    """The payloads are off the flat shape: flat_columns gives None."""


def _int(text: str) -> int:
    if len(text) > NUMBER_LIMIT:
        raise _Off
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise _Off
    return value


def _float(text: str) -> float:
    if len(text) > NUMBER_LIMIT:
        raise _Off
    value = float(text)
    if math.isinf(value):
        raise _Off  # beyond double's range
    if value == 0.0 and _NONZERO_DIGITS.intersection(text.lower().partition("e")[0]):
        raise _Off  # so small it rounds to zero
    return value


def _constant(text: str) -> Any:
    raise _Off  # NaN, Infinity, -Infinity: not JSON


class _Object(list):  # a JSON object's (name, value) pairs, in order
    """What the decoder makes of a JSON object: its pairs in order, duplicates kept (told apart from an array)."""


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    return _Object(pairs)


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs, parse_float=_float, parse_int=_int, parse_constant=_constant)


def _utf8_ok(text: str) -> bool:
    """False for a lone surrogate (``"\\ud800"``), which JSON escapes can make but UTF-8 cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _kind(value: Any) -> str:
    if type(value) is bool:
        return "bool"
    if type(value) is int:
        return "int64"
    if type(value) is float:
        return "double"
    if type(value) is str:
        if not _utf8_ok(value):
            raise _Off
        return "string"
    raise _Off  # a nested object (a list of pairs here), an array or a null


def flat_columns_pure(
    data: bytes | bytearray | memoryview, ends: Sequence[int], first: int, last: int, gap: int
) -> list[Column] | None:
    """The pure-Python twin of :func:`flat_columns` (same arguments, same result)."""
    n = last - first
    if n <= 0:
        return None
    view = memoryview(data)
    names: list[str] = []
    kinds: list[str] = []
    values: list[list[Any]] = []
    try:
        for i in range(first, last):
            start = 0 if i == 0 else ends[i - 1] + gap
            try:
                text = bytes(view[start : ends[i]]).decode("utf-8")
            except UnicodeDecodeError:
                return None
            pairs = _DECODER.decode(text)
            if type(pairs) is not _Object or not pairs or len(pairs) > MAX_FIELDS:
                return None  # not an object (a pairs list), or an empty one, or too wide
            if i == first:
                names = [name for name, _ in pairs]
                if len(set(names)) != len(names) or not all(map(_utf8_ok, names)):
                    return None
                index = {name: j for j, name in enumerate(names)}
                kinds = [_kind(value) for _, value in pairs]
                values = [[value] for _, value in pairs]
                continue
            if len(pairs) != len(names):
                return None
            seen = set()
            for name, value in pairs:
                j = index.get(name)
                if j is None or j in seen:
                    return None
                seen.add(j)
                kind = _kind(value)
                if kind != kinds[j]:
                    if {kind, kinds[j]} != {"int64", "double"}:
                        return None
                    if kinds[j] == "int64":  # an int field meets a float: the field becomes double
                        kinds[j] = "double"
                        values[j] = [float(v) for v in values[j]]
                    value = float(value)
                values[j].append(value)
    except (ValueError, RecursionError, _Off):
        return None
    return [_buffers(name, kind, column) for name, kind, column in zip(names, kinds, values, strict=True)]


def _buffers(name: str, kind: str, column: list[Any]) -> Column:
    """One field's result tuple from its values."""
    if kind == "int64":
        return name, kind, array("q", column).tobytes()
    if kind == "double":
        return name, kind, array("d", column).tobytes()
    if kind == "bool":
        return name, kind, bytes(column)
    encoded = [text.encode("utf-8") for text in column]
    offsets = array("i", [0])
    total = 0
    for piece in encoded:
        total += len(piece)
        offsets.append(total)
    return name, kind, (offsets.tobytes(), b"".join(encoded))


_COMPILED_MODULE = load_compiled("nbkit.wire._jsonfields")
#: Whether the compiled twin is active: readers use :func:`flat_columns` only then.
COMPILED = _COMPILED_MODULE is not None

_flat: Callable[..., list[Column] | None] = (
    flat_columns_pure if _COMPILED_MODULE is None else _COMPILED_MODULE.flat_columns
)


def flat_columns(
    data: bytes | bytearray | memoryview, ends: Sequence[int], first: int, last: int, gap: int
) -> list[Column] | None:
    """The field columns of payloads ``first:last`` that are flat JSON objects, or None.

    Payload ``i`` is ``data[ends[i - 1] + gap : ends[i]]`` (from 0 for the first one). Every payload must
    be one JSON object with the same fields (in any order; the first payload's order is the columns'),
    each holding a number, a string or a bool, of one kind per field (int and float mix as float). The
    compiled twin releases the GIL, so threads can parse pieces in parallel.

    Parameters
    ----------
    data : bytes, bytearray or memoryview
        The payloads, back to back, each followed by ``gap`` separator bytes.
    ends : sequence of int
        Where each payload ends in ``data`` (``array("q")``).
    first, last : int
        The payloads to read (``last`` excluded).
    gap : int
        The separator's length.

    Returns
    -------
    list of (str, str, object) or None
        One ``(name, kind, buffers)`` per field: kind ``"int64"``/``"double"``/``"bool"`` with the
        values' native bytes (8, 8 and 1 byte each), or ``"string"`` with ``(offsets, text)``: int32
        offsets (one more than the rows) into the UTF-8 text. None where the payloads are off that shape.

    Examples
    --------
    >>> from array import array
    >>> data = b'{"id":1,"ok":true}\\n{"ok":false,"id":2}'
    >>> [(name, kind) for name, kind, _ in flat_columns(data, array("q", [18, 38]), 0, 2, 1)]
    [('id', 'int64'), ('ok', 'bool')]
    >>> flat_columns(b'{"id":null}', array("q", [11]), 0, 1, 0) is None
    True
    """
    return _flat(data, ends, first, last, gap)
