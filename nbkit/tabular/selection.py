"""The options of a read that picks messages as rows: keys, payload mode, time window, internal keys.

``read_stream``, the Dask reader and the Parquet export take the same options; :func:`selection` checks
them once and turns them into a :class:`Selection` (the row filters) and a start position.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nbkit.tabular.builder import FrameBuilder, PayloadMode
from nbkit.transport.positions import FilePosition, to_epoch_ms

__all__ = ["Selection", "selection"]


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
    """The row filters and payload mode of a read, as ``nbkit.read_stream`` takes them.

    Parameters
    ----------
    payload
        The payload mode.
    keys
        The stream keys kept (None: all).
    after_ms, end_ms
        Keep messages later than ``after_ms`` and earlier than ``end_ms`` (epoch ms; None: open).
    include_internal
        Keep SeaStreamer's internal messages.

    Examples
    --------
    >>> Selection(payload="json", keys=frozenset({"orders"})).payload
    'json'
    """

    payload: PayloadMode = "auto"
    keys: frozenset[str] | None = None
    after_ms: int | None = None
    end_ms: int | None = None
    include_internal: bool = False


def selection(
    *,
    keys: Iterable[str] | str | None = None,
    payload: PayloadMode = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    include_internal: bool = False,
) -> tuple[Selection, FilePosition | None, str | None]:
    """Check ``read_stream``-style options.

    Parameters
    ----------
    keys, payload, start, end, include_internal
        As for ``nbkit.read_stream``.

    Returns
    -------
    tuple
        The :class:`Selection`, a start :class:`~nbkit.FilePosition` (or None: a time start is a row
        filter) and the stream key a sequence or timestamp start seeks by (or None).

    Raises
    ------
    ValueError
        An unknown payload mode, a time that is none, or a seek without exactly one stream key.

    Examples
    --------
    >>> sel, position, seek_key = selection(keys="orders", start=1_700_000_000_000)
    >>> sel.after_ms, position, seek_key
    (1700000000000, None, None)
    """
    FrameBuilder(payload)  # an unknown mode raises ValueError here
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
