"""The values of a frame's ``headers`` column: read-only dicts, one shared empty one for every message
without headers.

A frame records what was read, so its header dicts refuse changes. That lets every row without
headers (nearly every row of most files) hold the same empty value: a column of 300,000 rows is one
``numpy.full`` instead of 300,000 new dicts to build and later free.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

__all__ = ["EMPTY_HEADERS", "FrozenHeaders", "empty_headers", "frozen_headers"]

_READ_ONLY = "a frame's headers are read-only: dict(headers) or headers.copy() gives a dict you can change"


class FrozenHeaders(dict[str, Any]):
    """A message's headers in a frame: a ``dict`` that refuses changes.

    Reads, comparison, ``json.dumps``, pickling and ``dict(h)`` work as for any dict; ``h.copy()`` and
    ``h | other`` give plain dicts you can change.

    Examples
    --------
    >>> h = FrozenHeaders({"x-ruststream-retry-count": "1"})
    >>> h == {"x-ruststream-retry-count": "1"}, h
    (True, {'x-ruststream-retry-count': '1'})
    >>> h["x"] = "y"
    Traceback (most recent call last):
    TypeError: a frame's headers are read-only: dict(headers) or headers.copy() gives a dict you can change
    >>> h.copy() | {"x": "y"}
    {'x-ruststream-retry-count': '1', 'x': 'y'}
    """

    __slots__ = ()

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def __delitem__(self, key: str) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]  # dict's returns Self
        raise TypeError(_READ_ONLY)

    def clear(self) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def pop(self, *args: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def popitem(self) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def setdefault(self, *args: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(_READ_ONLY)

    def copy(self) -> dict[str, Any]:  # a plain dict: the copy is yours to change
        """A plain ``dict`` with the same items, which you can change."""
        return dict(self)

    def __reduce__(self) -> tuple[type[FrozenHeaders], tuple[dict[str, Any]]]:
        # pickle's default for dict subclasses sets items one by one, which this class refuses
        return (FrozenHeaders, (dict(self),))


#: The ``headers`` value of every message without headers.
EMPTY_HEADERS = FrozenHeaders()


def frozen_headers(headers: dict[str, Any]) -> FrozenHeaders:
    """``headers`` as a frame holds them: the shared :data:`EMPTY_HEADERS` when empty."""
    return FrozenHeaders(headers) if headers else EMPTY_HEADERS


def empty_headers(n: int) -> np.ndarray:
    """The ``headers`` column of ``n`` messages without headers: an object array of :data:`EMPTY_HEADERS`."""
    out = np.empty(n, dtype=object)
    out.fill(EMPTY_HEADERS)
    return out
