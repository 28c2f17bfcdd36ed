"""One record per settlement: the runtime emits it, DataFrames hold it, plots and widgets read it.

The events schema is written once, as the fields of :class:`SettlementEvent`: each field's annotation carries
its :class:`Column` (the events frame's dtype, what the column means and, for a category with a fixed set, its
categories). :data:`EVENT_SCHEMA` reads them back, one row per column in field order; the column list
(:data:`EVENT_COLUMNS`), the table below and the dtypes of the events frame
(:func:`nbkit.tabular.events.events_frame`) are made from it. A new column is one field of
:class:`SettlementEvent`, plus its value where :meth:`~nbkit.runtime.settlement.Settlement.record` makes the
event (or an :class:`EventHistory` operation changes it).

In a record, times are epoch seconds on the app's clock and a missing value is None; in the frame they are
UTC datetimes and missing values are ``<NA>`` (``NaT`` for times).

Schema (also the column order of the events frame):

"""

from __future__ import annotations

import datetime as dt
import html
import types
from collections import deque
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NamedTuple, TypeVar, Union, get_args, get_origin, get_type_hints

from nbkit.runtime.outcome import OUTCOME_KINDS, OutcomeKind
from nbkit.runtime.settle import Action
from nbkit.wire.core import pick
from nbkit.wire.timestamps import isoformat_z

__all__ = [
    "CATEGORY",
    "EVENT_COLUMNS",
    "EVENT_SCHEMA",
    "TIME",
    "Column",
    "EventHistory",
    "SettlementEvent",
    "new_record",
]

#: The dtype of a time column in the events frame (a record holds epoch seconds).
TIME = "datetime64[ms, UTC]"
#: The dtype of a categorical column in the events frame.
CATEGORY = "category"


class Column(NamedTuple):
    """One column of the events schema, as a field of :class:`SettlementEvent` declares it in its annotation.

    ``dtype`` is the events frame's dtype as pandas names it (``str(frame[name].dtype)``), ``doc`` what the
    column holds, and ``categories`` the fixed categories of a :data:`CATEGORY` column (empty: the values seen).

    Examples
    --------
    >>> EVENT_SCHEMA["transport"]
    Column(dtype='category', doc='where the delivery came from', categories=('file', 'pipe'))
    """

    dtype: str
    doc: str
    categories: tuple[str, ...] = ()


#: A named tuple class (what :func:`new_record` makes)
T = TypeVar("T", bound=tuple[Any, ...])


def new_record(cls: type[T], values: tuple[Any, ...]) -> T:
    """A record of the named tuple class ``cls`` from its values in field order: ``tuple.__new__(cls, values)``.

    What the runtime makes a record with where it makes one per delivery (a settlement's event, a copy's
    ``Published``): no argument handling of ``cls(...)``. The compiled core's twin allocates the record as
    ``cls`` and puts the values in it, without a Python-level call.

    Examples
    --------
    >>> from nbkit.runtime.broker import Published
    >>> new_record(Published, ("jobs.retry", 3, 1.5))
    Published(stream_key='jobs.retry', seq=3, time=1.5)
    """
    return tuple.__new__(cls, values)


#: The pure-Python twin, kept under its own name for the twin tests.
new_record_pure = new_record
new_record = pick("new_record", new_record_pure)  # noqa: F811 (the twin this process runs)

#: The ``action`` categories, in :class:`~nbkit.Action`'s order.
_ACTIONS = tuple(action.value for action in Action)


class SettlementEvent(NamedTuple):
    """What happened to one delivery; times are epoch seconds on the app's clock.

    A named tuple: immutable, cheap to make (the runtime makes one per delivery), with the fields
    below in this order; ``event._replace(field=value)`` gives a changed copy. ``App.events`` holds them
    and ``Session.events`` shows them as a DataFrame (:func:`~nbkit.events_frame`). Its fields are the
    events schema (:data:`~nbkit.runtime.events.EVENT_SCHEMA`): each one's annotation carries its column.

    Parameters
    ----------
    {fields}

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning())
    ... def handle(delivery):
    ...     return HandlerOutcome.retry_after(5)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", "{}")
    >>> event = session.app.events[-1] if session.step() else None
    >>> event.action, event.destination, event.delay
    ('delayed-copy', 'orders', 5.0)
    """

    # The events schema: one field per column, in column order. Settlement.record makes the event from its
    # values in this order (tests/runtime/test_events.py holds it to these names).
    time: Annotated[float, Column(TIME, "when the delivery was settled")]
    transport: Annotated[str, Column(CATEGORY, "where the delivery came from", ("file", "pipe"))]
    subscription: Annotated[str, Column(CATEGORY, "the registration's name")]
    stream_key: Annotated[str, Column(CATEGORY, "the delivery's stream key")]
    shard_id: Annotated[int, Column("Int64", "its shard")]
    seq: Annotated[int, Column("Int64", "its sequence number")]
    attempt: Annotated[int, Column("Int64", "1 for the first delivery, retry count + 1 after")]
    outcome: Annotated[OutcomeKind, Column(CATEGORY, "what the handler returned (a raise drops)", OUTCOME_KINDS)]
    action: Annotated[str, Column(CATEGORY, "what the runtime did: an Action value", _ACTIONS)]
    delay: Annotated[float | None, Column("Float64", "seconds until the copy (0: written at once)")] = None
    destination: Annotated[str | None, Column(CATEGORY, "where the copy goes: the retry or dead-letter key")] = None
    due: Annotated[float | None, Column(TIME, "when the delayed copy is due")] = None
    written_at: Annotated[float | None, Column(TIME, "when the copy was written")] = None
    copy_seq: Annotated[int | None, Column("Int64", "the copy's sequence number in its destination")] = None
    abandoned: Annotated[bool, Column("bool", "the delayed copy was lost (crash, shutdown timeout)")] = False
    error: Annotated[str | None, Column("string", "the handler's exception, or why a copy was lost")] = None
    redriven: Annotated[bool, Column("bool", "a redriven dead letter (x-nbkit-redriven-from header)")] = False
    lost_at: Annotated[float | None, Column(TIME, "when an abandoned copy was given up, before it was due")] = None

    def describe(self) -> str:
        """One sentence: what the runtime did.

        A retry copy says the attempt its next delivery will be (the copy carries retry count ``attempt``, so
        it is delivered as ``attempt + 1``); a dead-letter copy says the retry count it carries (the attempts
        made).

        Returns
        -------
        str
            For example ``"file orders #1 attempt 1: retry_after -> copy to 'orders' due in 5 s, to be
            delivered as attempt 2"``.
        """
        action = self.action
        then = f", to be delivered as attempt {self.attempt + 1}"
        if action == Action.UNSUPPORTED and self.outcome == "retry":
            # the seed's word: with no retry declared, *requeue* is what the transport cannot do
            what = "requeue unsupported (logged; no retry declared); nothing written, the message does not come back"
        elif action == Action.UNSUPPORTED:
            what = "acknowledgement unsupported (logged); nothing written"
        elif action == Action.COPY:
            what = f"copy written to {self.destination!r} at once{then}"
        elif action == Action.DELAYED_COPY and self.written_at is not None:
            what = f"copy to {self.destination!r} written after {self.delay:g} s{then}"
        elif action == Action.DELAYED_COPY:
            what = f"copy to {self.destination!r} due in {self.delay:g} s{then}"
        elif action == Action.DEAD_LETTER:
            what = (
                f"copy written to dead-letter key {self.destination!r} with retry count {self.attempt} "
                f"(the {self.attempt} attempt{'' if self.attempt == 1 else 's'} made)"
            )
        else:
            what = "attempts exhausted, no dead-letter key: rejected, nothing written"
        if self.error and self.error.startswith("copy lost"):
            what = f"copy to {self.destination!r} lost: {self.error}"
        if self.abandoned:
            what = f"delayed copy to {self.destination!r} abandoned at shutdown (lost)"
        what_came = f"{self.stream_key} #{self.seq}" + (" (redriven)" if self.redriven else "")
        return f"{self.transport} {what_came} attempt {self.attempt}: {self.outcome} -> {what}"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{name}</th>"
            f"<td style='text-align:left'>{html.escape(_show(getattr(self, name)))}</td></tr>"
            for name in self._fields
            if name in ("transport", "stream_key", "seq", "attempt", "outcome", "action")
            or getattr(self, name) not in (None, False)
        )
        return f"<table class='nbkit-event'><caption>{html.escape(self.describe())}</caption>{rows}</table>"


class EventHistory:
    """An app's settlement events: the most recent ones (at most ``keep`` of them, oldest first) and how many
    there have been. A delayed copy's event is updated in place when the copy is written, lost or abandoned
    (:meth:`copy_written`, :meth:`copy_lost`, :meth:`copy_abandoned`).

    Parameters
    ----------
    keep : int, optional
        How many recent events to keep (None: all).
    """

    __slots__ = ("events", "settled")

    def __init__(self, keep: int | None) -> None:
        #: the most recent events, oldest first
        self.events: deque[SettlementEvent] = deque(maxlen=keep)
        #: how many settlements have been recorded, including those no longer in ``events``
        self.settled = 0

    def append(self, event: SettlementEvent) -> int:
        """Record one settlement's event; returns its number (its place among all the settlements, from 0)."""
        self.events.append(event)
        self.settled += 1
        return self.settled - 1

    def copy_written(self, number: int, event: SettlementEvent, written_at: float, copy_seq: int) -> SettlementEvent:
        """Settlement ``number``'s delayed copy (``event``, as recorded when it was held) was written at
        ``written_at`` as ``copy_seq`` in its destination; returns the event that records it."""
        return self._update(number, event._replace(written_at=written_at, copy_seq=copy_seq))

    def copy_lost(self, number: int, event: SettlementEvent, error: str) -> SettlementEvent:
        """Settlement ``number``'s delayed copy could not be written (``error`` says why); returns the event
        that records it."""
        return self._update(number, event._replace(error=error))

    def copy_abandoned(self, number: int, event: SettlementEvent, lost_at: float) -> SettlementEvent:
        """Settlement ``number``'s delayed copy was given up at ``lost_at`` (a crash or the shutdown timeout),
        before it was due: it is lost; returns the event that records it."""
        return self._update(number, event._replace(abandoned=True, lost_at=lost_at))

    def _update(self, number: int, event: SettlementEvent) -> SettlementEvent:
        """Put the new state of settlement ``number`` into ``events``, if it is still kept there."""
        i = number - (self.settled - len(self.events))
        if i >= 0:
            self.events[i] = event
        return event

    @property
    def keep(self) -> int | None:
        """How many events are kept (None: all); setting it keeps the most recent ones."""
        return self.events.maxlen

    @keep.setter
    def keep(self, keep: int | None) -> None:
        self.events = deque(self.events, maxlen=keep)


def _show(value: object) -> str:
    if isinstance(value, float) and value > 1e8:
        return isoformat_z(dt.datetime.fromtimestamp(value, dt.UTC), "milliseconds")
    return str(value)


def _schema(hints: dict[str, Any]) -> Mapping[str, Column]:
    """The :class:`Column` each field's annotation carries, in field order (the record's type hints)."""
    schema = {}
    for name, hint in hints.items():
        columns = [meta for meta in getattr(hint, "__metadata__", ()) if isinstance(meta, Column)]
        if len(columns) != 1:
            raise TypeError(f"SettlementEvent.{name}: its annotation must be Annotated[type, Column(...)]")
        schema[name] = columns[0]
    return types.MappingProxyType(schema)


def _type_text(hint: Any, categories: tuple[str, ...] = ()) -> str:
    """A field's Python type as numpy-style docs write it: ``float``, ``str, optional``, ``{"file", "pipe"}``."""
    hint = get_args(hint)[0] if get_origin(hint) is Annotated else hint
    args = get_args(hint)
    if get_origin(hint) in (Union, types.UnionType) and type(None) in args:
        return _type_text(next(arg for arg in args if arg is not type(None)), categories) + ", optional"
    if categories or get_origin(hint) is Literal:
        return "{" + ", ".join(f'"{value}"' for value in categories or args) + "}"
    return str(getattr(hint, "__name__", hint))


def _fields_doc(hints: dict[str, Any], schema: Mapping[str, Column]) -> str:
    """The record's fields as a numpy-style Parameters section (under its rule)."""
    entries = []
    for name, hint in hints.items():
        column = schema[name]
        meaning = column.doc[0].upper() + column.doc[1:]
        entries.append(f"{name} : {_type_text(hint, column.categories)}\n        {meaning}.")
    return "\n    ".join(entries)


def _table(schema: Mapping[str, Column]) -> str:
    """The schema as a reStructuredText table: column, dtype (with the fixed categories), meaning."""
    rows = [("column", "dtype", "meaning")]
    for name, column in schema.items():
        dtype = f"{column.dtype} ({', '.join(column.categories)})" if column.categories else column.dtype
        rows.append((name, dtype, column.doc))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    rule = "  ".join("=" * width for width in widths)
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([rule, lines[0], rule, *lines[1:], rule, ""])


_HINTS = get_type_hints(SettlementEvent, include_extras=True)
#: The events schema: each column's :class:`Column`, in the order of :class:`SettlementEvent`'s fields (the
#: events frame's column order), read from the fields' annotations.
EVENT_SCHEMA: Mapping[str, Column] = _schema(_HINTS)
#: The events columns, in order.
EVENT_COLUMNS: tuple[str, ...] = tuple(EVENT_SCHEMA)

__doc__ = f"{__doc__}{_table(EVENT_SCHEMA)}"
SettlementEvent.__doc__ = (SettlementEvent.__doc__ or "").replace("{fields}", _fields_doc(_HINTS, EVENT_SCHEMA))
