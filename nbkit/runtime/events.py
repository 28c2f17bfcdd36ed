"""One record per settlement: the runtime emits it, DataFrames hold it, plots and widgets read it.

Schema (also the column order of :func:`events_frame`):

==============  ==========================  =================================================
column          dtype                       meaning
==============  ==========================  =================================================
time            datetime64[ms, UTC]         clock time of the settlement
transport       category (file, pipe)       where the delivery came from
subscription    category                    the registration's name
stream_key      category                    the delivery's stream key
shard_id        Int64                       its shard
seq             Int64                       its sequence number
attempt         Int64                       1 for the first delivery, retry count + 1 after
outcome         category                    ack, drop, retry, retry_after (an exception drops)
action          category                    unsupported, copy, delayed-copy, dead-letter, rejected
delay           Float64                     seconds until the copy (0: written at once), else <NA>
destination     category                    key the copy goes to, else <NA>
due             datetime64[ms, UTC]         when the copy is due, else NaT
written_at      datetime64[ms, UTC]         when the copy was written, else NaT
copy_seq        Int64                       the copy's sequence number in its destination
abandoned       bool                        the delayed copy was lost (shutdown timeout)
error           string                      the handler's exception, if it raised
redriven        bool                        a redriven dead letter (``x-nbkit-redriven-from`` header)
lost_at         datetime64[ms, UTC]         when an abandoned copy was given up (crash, shutdown)
==============  ==========================  =================================================
"""

from __future__ import annotations

import datetime as dt
import html
from collections import deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from nbkit.runtime.outcome import OUTCOME_KINDS, OutcomeKind
from nbkit.runtime.settle import Action

if TYPE_CHECKING:
    import pandas as pd

from nbkit.wire.core import pick
from nbkit.wire.timestamps import isoformat_z

__all__ = [
    "EVENT_COLUMNS",
    "EventHistory",
    "SettlementEvent",
    "events_frame",
    "new_record",
]


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

EVENT_COLUMNS = (
    "time",
    "transport",
    "subscription",
    "stream_key",
    "shard_id",
    "seq",
    "attempt",
    "outcome",
    "action",
    "delay",
    "destination",
    "due",
    "written_at",
    "copy_seq",
    "abandoned",
    "error",
    "redriven",
    "lost_at",
)


class SettlementEvent(NamedTuple):
    """What happened to one delivery; times are epoch seconds on the app's clock.

    A named tuple: immutable, cheap to make (the runtime makes one per delivery), with the fields
    below in this order; ``event._replace(field=value)`` gives a changed copy. ``App.events`` holds them
    and ``Session.events`` shows them as a DataFrame.

    Parameters
    ----------
    time : float
        When the delivery was settled.
    transport : {"file", "pipe"}
        Where the delivery came from.
    subscription, stream_key : str
        The registration's name and the message's key.
    shard_id, seq, attempt : int
        The message's shard and sequence number, and the delivery's attempt (from 1).
    outcome : {"ack", "drop", "retry", "retry_after"}
        What the handler returned (an exception counts as ``drop``).
    action : str
        What the runtime did: an :class:`~nbkit.Action` value (``Action`` members compare equal to it).
    delay : float, optional
        Seconds before a delayed copy.
    destination : str, optional
        Where the copy went (retry or dead-letter key).
    due, written_at : float, optional
        When a delayed copy was due, and when it was written.
    copy_seq : int, optional
        The copy's sequence number where it was written.
    abandoned : bool
        A delayed copy given up at shutdown (lost).
    error : str, optional
        The handler's exception, or why a copy was lost.
    redriven : bool
        The delivery is a redriven dead letter.
    lost_at : float, optional
        When an abandoned copy was given up: the crash or the shutdown, before it was due.

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

    time: float
    transport: str
    subscription: str
    stream_key: str
    shard_id: int
    seq: int
    attempt: int
    outcome: OutcomeKind
    action: str
    delay: float | None = None
    destination: str | None = None
    due: float | None = None
    written_at: float | None = None
    copy_seq: int | None = None
    abandoned: bool = False
    error: str | None = None
    redriven: bool = False
    lost_at: float | None = None

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
    there have been. A delayed copy's event is updated in place when the copy is written or abandoned.

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

    def update(self, number: int, event: SettlementEvent) -> None:
        """Put the new state of settlement ``number`` into ``events``, if it is still kept there."""
        i = number - (self.settled - len(self.events))
        if i >= 0:
            self.events[i] = event

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


def events_frame(events: Iterable[SettlementEvent]) -> pd.DataFrame:
    """The events as a pandas DataFrame with the documented schema (one row per settlement)."""
    import pandas as pd

    events = list(events)
    cols = {name: [getattr(e, name) for e in events] for name in EVENT_COLUMNS}
    frame = pd.DataFrame(
        {
            "time": _times(cols["time"]),
            "transport": pd.Categorical(cols["transport"], categories=["file", "pipe"]),
            "subscription": pd.Series(cols["subscription"], dtype="category"),
            "stream_key": pd.Series(cols["stream_key"], dtype="category"),
            "shard_id": pd.array(cols["shard_id"], dtype="Int64"),
            "seq": pd.array(cols["seq"], dtype="Int64"),
            "attempt": pd.array(cols["attempt"], dtype="Int64"),
            "outcome": pd.Categorical(cols["outcome"], categories=list(OUTCOME_KINDS)),
            "action": pd.Categorical(cols["action"], categories=[action.value for action in Action]),
            "delay": pd.array(cols["delay"], dtype="Float64"),
            "destination": pd.Series(cols["destination"], dtype="category"),
            "due": _times(cols["due"]),
            "written_at": _times(cols["written_at"]),
            "copy_seq": pd.array(cols["copy_seq"], dtype="Int64"),
            "abandoned": pd.array(cols["abandoned"], dtype="bool"),
            "error": pd.array(cols["error"], dtype="string"),
            "redriven": pd.array(cols["redriven"], dtype="bool"),
            "lost_at": _times(cols["lost_at"]),
        },
        columns=list(EVENT_COLUMNS),
    )
    return frame


def _times(values: list[float | None]) -> pd.DatetimeIndex:
    import pandas as pd

    ms = [None if v is None else round(v * 1000) for v in values]
    return pd.to_datetime(pd.array(ms, dtype="Int64"), unit="ms", utc=True).astype("datetime64[ms, UTC]")
