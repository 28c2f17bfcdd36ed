"""Messages counted on the Dask workers, small enough to plot: ``nbkit.dask.message_counts``.

A dashboard of a file larger than memory must not pull every row into the notebook. Each worker
counts its own partitions' messages per stream key, transport, attempt, time bin and redriven mark,
and only those counts travel: a few rows per key, attempt and bin, whatever the file's size. The
result is a messages frame with a ``count`` column, which every :mod:`nbkit.plot` function draws as
it draws the rows themselves (each row standing for ``count`` messages).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.scale import require

if TYPE_CHECKING:
    from dask.dataframe import DataFrame as DaskDataFrame

require("dask", feature="nbkit.dask")

__all__ = ["COUNT_COLUMNS", "message_counts"]

#: The columns of :func:`message_counts`' frame, in order.
COUNT_COLUMNS = ["stream_key", "transport", "attempt", "retry_count", "timestamp", "redriven", "count"]
_KEYS = COUNT_COLUMNS[:-1]
_NEEDED = ("stream_key", "transport", "attempt", "retry_count", "timestamp")


def _count_partition(part: pd.DataFrame, freq: str) -> pd.DataFrame:
    """One partition's messages counted per key, transport, attempt, time bin and redriven mark."""
    if "headers" in part.columns:
        redriven = [isinstance(h, dict) and REDRIVEN_FROM_HEADER in h for h in part["headers"]]
    else:
        redriven = [False] * len(part)
    keyed = pd.DataFrame(
        {
            "stream_key": part["stream_key"].astype(object).to_numpy(),
            "transport": part["transport"].astype(object).to_numpy(),
            "attempt": part["attempt"].astype("Int64").array,
            "retry_count": part["retry_count"].astype("Int64").array,
            "timestamp": part["timestamp"].dt.floor(freq).to_numpy(),
            "redriven": redriven,
        }
    )
    return keyed.groupby(_KEYS, sort=False, dropna=False).size().rename("count").reset_index()


def message_counts(frame: DaskDataFrame, *, freq: str = "1min") -> pd.DataFrame:
    """Count a Dask messages frame on its workers; return the small pandas frame of counts.

    Each row stands for ``count`` messages with the same stream key, transport, attempt and
    ``retry_count``, written in the same ``freq`` time bin (``timestamp`` is the bin's start) and
    alike in being redriven or not (``x-nbkit-redriven-from``, set by ``nbkit redrive``). Only these
    counts leave the workers. :func:`nbkit.plot.attempts`, :func:`~nbkit.plot.dead_letters` and
    :func:`~nbkit.plot.dashboard` draw the result as they draw the full frame; pass a dead-letter
    ``freq`` no finer than this one, since times inside a bin are gone.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        From :func:`nbkit.dask.read_stream` (any selection of rows; the columns ``stream_key``,
        ``transport``, ``attempt``, ``retry_count`` and ``timestamp`` must be there, ``headers``
        is used when present).
    freq : str, default "1min"
        The time bins, as a pandas frequency ("1s", "10s", "1min", "1h").

    Returns
    -------
    pandas.DataFrame
        Columns ``stream_key``, ``transport``, ``attempt``, ``retry_count``, ``timestamp`` (UTC,
        the bin's start), ``redriven`` (bool) and ``count`` (int64), sorted by time, key and attempt.

    Examples
    --------
    >>> import nbkit, nbkit.dask, nbkit.plot
    >>> with nbkit.StreamWriter("counted.ss", beacon_interval=1024) as writer:
    ...     for n in range(100):
    ...         _ = writer.write("orders" if n % 4 else "orders.dead", b'{"id": %d}' % n)
    >>> counts = nbkit.dask.message_counts(nbkit.dask.read_stream("counted.ss", blocksize=1024))
    >>> counts.groupby("stream_key")["count"].sum().to_dict()
    {'orders': 75, 'orders.dead': 25}
    >>> fig = nbkit.plot.dashboard(counts)
    """
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
        fixed = pd.Timedelta(offset) > pd.Timedelta(0)
    except ValueError:
        fixed = False
    if not fixed:
        raise ValueError(f"freq takes a fixed pandas frequency such as '1s' or '1min', not {freq!r}")
    missing = [name for name in _NEEDED if name not in frame.columns]
    if missing:
        raise ValueError(
            f"message_counts needs the columns {list(_NEEDED)} of nbkit.dask.read_stream; missing {missing}"
        )
    wanted = [*_NEEDED, *(["headers"] if "headers" in frame.columns else [])]
    meta = pd.DataFrame(
        {
            "stream_key": pd.Series(dtype=object),
            "transport": pd.Series(dtype=object),
            "attempt": pd.Series(dtype="Int64"),
            "retry_count": pd.Series(dtype="Int64"),
            "timestamp": pd.Series(dtype=frame["timestamp"].dtype),
            "redriven": pd.Series(dtype=bool),
            "count": pd.Series(dtype="int64"),
        }
    )
    per_partition = frame[wanted].map_partitions(_count_partition, freq, meta=meta).compute()
    counts = per_partition.groupby(_KEYS, sort=False, dropna=False)["count"].sum().reset_index()
    counts = counts.sort_values(["timestamp", "stream_key", "attempt", "redriven"], kind="stable")
    return counts.reset_index(drop=True)[COUNT_COLUMNS]
