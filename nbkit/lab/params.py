"""The viewer's request parameters, parsed and checked in one place: a bad one answers 400 and names itself.

Every handler reads its parameters through :func:`parse_params` (the query string) or :func:`parse_body`
(the notebook POST's JSON), never through ``get_argument``: so a number that is not one (``--5``, ``²``),
a value out of range (a time past 9999-12-31, a row past 2**63 - 1), a parameter given twice or text that
is not UTF-8 gets the same kind of answer, a :class:`ParamError` that the handlers turn into a 400 whose
message says which parameter, what it was and what it may be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.timestamps import parse_timestamp

__all__ = ["MAX_KEY_CHARS", "PARAMETERS", "ParamError", "parse_body", "parse_params"]

#: The longest stream key text a request may name (longer ones cannot be in a file).
MAX_KEY_CHARS = 4096
#: The largest row, offset or count a request may name (an int64).
_MAX_INT64 = (1 << 63) - 1
#: The largest sequence number (a u64).
_MAX_UINT64 = (1 << 64) - 1
#: An integer as the viewer takes it: ASCII digits, an optional sign, nothing else.
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)


class ParamError(ValueError):
    """A request parameter that cannot be used; the handlers answer 400 with this message."""

    status = 400


def _integer(name: str, text: str, low: int, high: int) -> int:
    """``text`` as an integer in ``low .. high`` (ASCII digits only: ``int()`` alone takes ``²`` for a
    digit and ``1_000`` for a number)."""
    if not _INTEGER.fullmatch(text) or len(text) > 30:
        raise ParamError(f"{name}={text!r} is not an integer (digits 0-9, an optional sign)")
    value = int(text)
    if not low <= value <= high:
        raise ParamError(f"{name}={text} is out of range: it must be {low} .. {high}")
    return value


def _row(name: str) -> Callable[[str], int]:
    return lambda text: _integer(name, text, 0, _MAX_INT64)


def _count(text: str) -> int:
    return _integer("count", text, 1, _MAX_INT64)


def _seq(text: str) -> int:
    return _integer("seq", text, 0, _MAX_UINT64)


def _key(name: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if len(text) > MAX_KEY_CHARS or "\x00" in text:
            raise ParamError(f"{name}= is not a stream key (a NUL byte, or over {MAX_KEY_CHARS} characters)")
        return text

    return parse


def _path(text: str) -> str:
    return text  # checked against the server's root by nbkit.lab.paths.resolve_inside


def _time(text: str) -> int:
    """Epoch milliseconds, or ISO UTC text (``2024-01-01T00:00:00.5``, a trailing ``Z`` allowed), within
    the timestamps a stream file can hold (1970-01-01 .. 9999-12-31T23:59:59.999Z)."""
    if _INTEGER.fullmatch(text):
        if len(text) > 30:
            raise ParamError(f"time={text[:30]}... is out of range: it must be 0 .. {MAX_TIMESTAMP_MS} (epoch ms)")
        ms: int | None = int(text)
    else:
        ms = parse_timestamp(text.removesuffix("Z").removesuffix("z"))
        if ms is None:
            raise ParamError(
                f"time={text!r} is neither epoch milliseconds nor YYYY-MM-DDTHH:MM:SS[.f] (UTC, a Z allowed)"
            )
    assert ms is not None
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise ParamError(
            f"time={text} is out of range: it must be 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z "
            f"(0 .. {MAX_TIMESTAMP_MS} epoch ms)"
        )
    return ms


#: Every parameter the viewer's routes take, with its parser (text -> value, or ParamError).
PARAMETERS: dict[str, Callable[[str], Any]] = {
    "path": _path,
    "start": _row("start"),
    "count": _count,
    "key": _key("key"),
    "seq_key": _key("seq_key"),
    "offset": _row("offset"),
    "seq": _seq,
    "time": _time,
}


def parse_params(query: Mapping[str, list[bytes]], names: Iterable[str]) -> dict[str, Any]:
    """The parameters ``names`` of a query (tornado's ``request.query_arguments``), parsed.

    An absent or blank parameter is None; a present one is parsed by its :data:`PARAMETERS` entry (after
    stripping spaces, except from ``path``). Other parameters in the query are ignored (Jupyter's own,
    such as ``token``).

    Raises
    ------
    ParamError
        A parameter given twice, not UTF-8, or not a value of its kind (the message names it).

    Examples
    --------
    >>> parse_params({"start": [b"10"], "count": [b""]}, ["start", "count", "key"])
    {'start': 10, 'count': None, 'key': None}
    >>> parse_params({"start": [b"--5"]}, ["start"])
    Traceback (most recent call last):
    ...
    nbkit.lab.params.ParamError: start='--5' is not an integer (digits 0-9, an optional sign)
    """
    out: dict[str, Any] = {}
    for name in names:
        values = query.get(name, [])
        if len(values) > 1:
            raise ParamError(f"{name}= is given {len(values)} times; give it once")
        if not values:
            out[name] = None
            continue
        try:
            text = values[0].decode("utf-8")
        except UnicodeDecodeError:
            raise ParamError(f"{name}= is not UTF-8 text") from None
        out[name] = _parsed(name, text)
    return out


def parse_body(body: bytes, names: Iterable[str]) -> dict[str, Any]:
    """The parameters ``names`` of a JSON object body (the notebook POST), parsed as :func:`parse_params`.

    Raises
    ------
    ParamError
        A body that is not a JSON object, or a parameter that is not a string of its kind.

    Examples
    --------
    >>> parse_body(b'{"path": "data/orders.ss"}', ["path"])
    {'path': 'data/orders.ss'}
    """
    try:
        obj = json.loads(body or b"{}")
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise ParamError('the body must be a JSON object: {"path": "<stream file>"}')
    out: dict[str, Any] = {}
    for name in names:
        value = obj.get(name)
        if value is not None and not isinstance(value, str):
            raise ParamError(f"{name} must be a string, not {type(value).__name__}")
        out[name] = _parsed(name, value or "")
    return out


def _parsed(name: str, text: str) -> Any:
    """``text`` parsed as parameter ``name``; blank is None (a path is taken as given, spaces and all)."""
    if name != "path":
        text = text.strip()
    return PARAMETERS[name](text) if text.strip() else None
