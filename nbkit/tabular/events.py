"""The events frame: settlement events as a typed pandas DataFrame, one row per event.

Its columns, their order and their dtypes are the events schema's (:data:`nbkit.runtime.events.EVENT_SCHEMA`,
written once as the fields of :class:`~nbkit.SettlementEvent`): each column is converted by its dtype, so a new
column of the schema needs nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from nbkit.runtime.events import CATEGORY, EVENT_COLUMNS, EVENT_SCHEMA, TIME, Column, SettlementEvent

__all__ = ["events_frame"]


def events_frame(events: Iterable[SettlementEvent]) -> pd.DataFrame:
    """The settlement events as a pandas DataFrame: one row per event, in the events schema's columns and dtypes.

    Times (epoch seconds in an event) become UTC datetimes to the millisecond, and a missing value ``<NA>``
    (``NaT`` for a time). The columns are listed in :mod:`nbkit.runtime.events`.

    Parameters
    ----------
    events : iterable of SettlementEvent
        For example an app's ``events``; ``Session.events`` is this frame of its app's events.

    Returns
    -------
    pandas.DataFrame
        One row per event, the columns of ``nbkit.runtime.events.EVENT_COLUMNS`` in that order.

    Examples
    --------
    >>> from nbkit import App, HandlerOutcome, StdioBroker, VirtualClock, events_frame
    >>> broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[])
    >>> _ = broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: HandlerOutcome.retry_after(5))
    >>> app = App(broker, clock=VirtualClock())
    >>> app.start()
    >>> while app.step():
    ...     pass
    >>> events_frame(app.events)[["seq", "action", "delay", "due"]]
       seq        action  delay                       due
    0    0  delayed-copy    5.0 2024-01-01 00:00:05+00:00
    1    1  delayed-copy    5.0 2024-01-01 00:00:05+00:00
    """
    events = list(events)
    values: Sequence[Sequence[Any]] = list(zip(*events, strict=True)) if events else [()] * len(EVENT_SCHEMA)
    columns = {name: _column(column, list(v)) for (name, column), v in zip(EVENT_SCHEMA.items(), values, strict=True)}
    return pd.DataFrame(columns, columns=list(EVENT_COLUMNS))


def _column(column: Column, values: list[Any]) -> Any:
    """One column's values as the array of its dtype."""
    if column.dtype == TIME:
        ms = [None if v is None else round(v * 1000) for v in values]
        return pd.to_datetime(pd.array(ms, dtype="Int64"), unit="ms", utc=True).astype(TIME)
    if column.dtype == CATEGORY and column.categories:
        return pd.Categorical(values, categories=list(column.categories))
    if column.dtype == CATEGORY:
        return pd.Series(values, dtype=CATEGORY)
    return pd.array(values, dtype=column.dtype)
