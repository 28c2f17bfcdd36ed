"""The options of a read that picks messages as rows: keys, payload mode, time window, internal keys.

``read_stream``, the Dask reader and the Parquet export take the same options; :func:`selection` checks
them once and turns them into a :class:`Selection` (the row filters, applied by its methods) and a start
position. Every form of ``start`` and ``end`` (epoch ms, ``datetime``, ``pandas.Timestamp``, ISO text; a
time without a timezone is UTC) is a window that :meth:`Selection.open_window` finds from the beacons.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Any

import pandas as pd

from nbkit.errors import UnknownKeyError
from nbkit.tabular.builder import FrameBuilder, PayloadMode
from nbkit.transport.file_info import stream_keys
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.positions import FilePosition, to_epoch_ms
from nbkit.transport.windows import Window, beacon_keys, find_window
from nbkit.wire.keys import INTERNAL_KEYS
from nbkit.wire.scan import ColumnBuffers, FrameColumns

__all__ = ["Selection", "selection"]


def _as_ms(value: Any, what: str) -> int:
    """Epoch ms from a time as ``read_stream`` takes it: epoch ms, a datetime or ``pandas.Timestamp``, or ISO
    text; a time without a timezone is UTC (the one rule for naive times, as in :func:`to_epoch_ms`)."""
    if isinstance(value, str):
        try:
            parsed = pd.Timestamp(value)
        except ValueError as exc:
            raise ValueError(
                f"{what}={value!r} is not a time: {exc} (give ISO text, e.g. '2024-01-01T10:00')"
            ) from None
        if parsed is pd.NaT:
            raise ValueError(f"{what}={value!r} is not a time (give ISO text, e.g. '2024-01-01T10:00')")
        value = parsed
    if isinstance(value, pd.Timestamp):
        if value.tzinfo is None:
            value = value.tz_localize("UTC")
        return int(value.value // 1_000_000)
    try:
        return to_epoch_ms(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} takes epoch ms, a datetime, a pandas Timestamp or ISO text: {exc}") from None


@dataclass(frozen=True, slots=True)
class Selection:
    """The row filters and payload mode of a read, as ``nbkit.read_stream`` takes them, and the one place
    that applies them: the key filter (:meth:`accept`), the window (:meth:`open_window`, found from the
    beacons, then :meth:`rows`) and the check that every asked-for key is in the file (:meth:`check_keys`).
    ``read_stream``, the Dask partitions and the Parquet export all read through it.

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
    start_seq, end_seq
        Keep messages whose sequence number is at least ``start_seq`` / at most ``end_seq`` (each key's own
        numbers; None: open).

    Examples
    --------
    >>> Selection(payload="json", keys=frozenset({"orders"})).payload
    'json'
    >>> Selection(keys=frozenset({"orders"})).accept("audit")
    False
    """

    payload: PayloadMode = "auto"
    keys: frozenset[str] | None = None
    after_ms: int | None = None
    end_ms: int | None = None
    include_internal: bool = False
    start_seq: int | None = None
    end_seq: int | None = None

    @property
    def windowed(self) -> bool:
        """Whether rows are bounded by time or sequence number."""
        return not (self.after_ms is None and self.end_ms is None and self.start_seq is None and self.end_seq is None)

    def accept(self, key: str) -> bool:
        """Whether the messages of ``key`` are kept (the wanted keys; internal keys only on request).

        Parameters
        ----------
        key
            A stream key.

        Returns
        -------
        bool
            True to keep its messages.
        """
        return (self.keys is None or key in self.keys) and (self.include_internal or key not in INTERNAL_KEYS)

    def key_filter(self) -> Callable[[str], bool] | None:
        """:meth:`accept` as a reader's ``accept=`` argument, or None when every key is kept.

        Returns
        -------
        callable or None
            ``accept(key) -> bool`` for :meth:`StreamReader.read_column_buffers`.
        """
        if self.keys is None and self.include_internal:
            return None
        return self.accept

    def open_window(self, reader: StreamReader) -> Window:
        """Move ``reader`` to where this selection's window starts, found from the beacons, and say where
        it stops (:func:`nbkit.transport.windows.find_window`; every form of ``start`` and ``end`` is one).

        Parameters
        ----------
        reader
            An open reader at the read's start (the header, or a position ``start=`` sought).

        Returns
        -------
        Window
            ``start`` (the reader's ``pos`` now) and ``stop`` (pass it as ``until``; None: to the end).
        """
        if not self.windowed:
            return Window(reader.pos, None)
        return find_window(
            reader,
            keys=None if self.keys is None else sorted(self.keys),
            after_ms=self.after_ms,
            end_ms=self.end_ms,
            start_seq=self.start_seq,
            end_seq=self.end_seq,
        )

    def rows(self, cols: ColumnBuffers) -> ColumnBuffers | FrameColumns:
        """The messages of ``cols`` inside the time and sequence bounds (``cols`` itself without bounds).

        Parameters
        ----------
        cols
            A reader's column buffers (already key-filtered by :meth:`key_filter`).

        Returns
        -------
        ColumnBuffers or FrameColumns
            What :meth:`FrameBuilder.extend` takes.
        """
        if not self.windowed:
            return cols
        lo = -1 if self.after_ms is None else self.after_ms
        hi = self.end_ms
        first = self.start_seq
        last = self.end_seq
        keep = [
            lo < ts and (hi is None or ts < hi) and (first is None or seq >= first) and (last is None or seq <= last)
            for ts, seq in zip(cols.timestamp_ms, cols.seq, strict=True)
        ]
        if all(keep):
            return cols
        lists = cols.to_lists()
        return FrameColumns._make(list(compress(column, keep)) for column in lists)

    def check_keys_named(self, reader: StreamReader) -> None:
        """:meth:`check_keys` before a read that is split (the Dask partitions, the Parquet export): the keys
        the beacons name, then the whole file only when a wanted key is not among them.

        Parameters
        ----------
        reader
            An open reader of the file.
        """
        if self.keys is not None:
            self.check_keys(beacon_keys(reader), path=reader.path, reading=reader.open_options)

    def check_keys(
        self, seen: Iterable[str], *, path: str, whole: bool = False, reading: Mapping[str, Any] | None = None
    ) -> None:
        """Raise :class:`~nbkit.errors.UnknownKeyError` when a wanted key is not in the file.

        ``seen`` are the keys the read met; a key not among them is then looked for in the whole file
        (unless the read was ``whole``), so the error names the keys the file holds. Costs nothing when
        every wanted key was met.

        Parameters
        ----------
        seen
            The stream keys the read met (kept or not).
        path
            The file.
        whole
            The read met every frame of the file (nothing more to look at).
        reading
            How to open ``path`` again (a reader's ``open_options``: ``storage_options`` for a URL).

        Raises
        ------
        UnknownKeyError
            Naming the missing keys and the keys the file holds.
        """
        if self.keys is None:
            return
        found = set(seen)
        missing = self.keys - found
        if not missing:
            return
        if not whole:
            found |= stream_keys(path, **(reading or {}))
            missing = self.keys - found
        if missing:
            there = sorted(found - INTERNAL_KEYS)
            raise UnknownKeyError(
                f"the file holds no message of the key {', '.join(map(repr, sorted(missing)))}; "
                f"the keys there: {', '.join(there) if there else 'none'}",
                path=path,
                missing=sorted(missing),
                available=there,
            )


def selection(
    *,
    keys: Iterable[str] | str | None = None,
    payload: PayloadMode = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    include_internal: bool = False,
) -> tuple[Selection, FilePosition | None, str | None]:
    """Check ``read_stream``-style options.

    Every form of ``start`` that is a time or a sequence number (epoch ms, ``datetime``,
    ``pandas.Timestamp``, ISO text, ``FilePosition.timestamp``, ``FilePosition.sequence``) becomes a bound of
    the :class:`Selection`, found from the beacons when the file is read (:meth:`Selection.open_window`), for
    one key, several or all; ``FilePosition.beginning/end/beacon`` stay positions.

    Parameters
    ----------
    keys, payload, start, end, include_internal
        As for ``nbkit.read_stream``.

    Returns
    -------
    tuple
        The :class:`Selection`, a start :class:`~nbkit.FilePosition` (beginning, end or a beacon; None
        otherwise) and the stream key a position seeks by (always None now: kept for the callers that
        unpack three values).

    Raises
    ------
    ValueError
        An unknown payload mode, or a time that is none.

    Examples
    --------
    >>> sel, position, seek_key = selection(keys="orders", start="2023-11-14T22:13:20")
    >>> sel.after_ms, position, seek_key
    (1700000000000, None, None)
    """
    FrameBuilder(payload)  # an unknown mode raises ValueError here
    if isinstance(keys, str):
        wanted: frozenset[str] | None = frozenset({keys})
    elif keys is not None:
        wanted = frozenset(keys)
        if not all(isinstance(k, str) for k in wanted):
            raise TypeError(f"keys are stream key strings, not {sorted(map(repr, wanted))}")
    else:
        wanted = None
    position = None
    after_ms = start_seq = None
    if isinstance(start, FilePosition):
        if start.kind == "timestamp":
            after_ms = start.value
        elif start.kind == "sequence":
            start_seq = start.value
        else:
            position = start
    elif start is not None:
        after_ms = _as_ms(start, "start")
    end_ms = None if end is None else _as_ms(end, "end")
    sel = Selection(payload, wanted, after_ms, end_ms, include_internal, start_seq=start_seq)
    return sel, position, None
