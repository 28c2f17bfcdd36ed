"""One delivery to a handler: the message, its headers, where it came from and which attempt it is."""

from __future__ import annotations

import datetime as dt
import html
import json as _json
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nbkit.errors import AckError
from nbkit.transport.positions import FilePosition
from nbkit.wire.core import pick
from nbkit.wire.envelope import retry_count
from nbkit.wire.timestamps import isoformat_z

__all__ = [
    "Delivery",
    "new_slotted",
]

T = TypeVar("T")


@dataclass(eq=False, slots=True)
class Delivery:
    """What a handler receives. ``attempt`` is 1 for the first delivery, ``retry count + 1`` after.

    ``ack()`` and ``nack()`` exist for parity with ruststream; on file and pipe they raise
    ``AckError`` (kind ``unsupported``) because neither transport can acknowledge anything.

    Parameters
    ----------
    payload : bytes
        The payload, with any ``rs1:``/``rs2:`` envelope decoded.
    headers : dict
        The message's headers, plus ``stream-sequence`` added by the transport.
    stream_key : str
        The stream key it was read under.
    shard_id : int
        Its shard.
    seq : int
        Its sequence number (from 1 in a file, from 0 on a pipe).
    timestamp_ms : int
        Its timestamp, in epoch milliseconds.
    transport : {"file", "pipe"}
        Where it came from.
    subscription : str
        The name of the registration it was delivered to.
    offset : int, optional
        The frame's byte offset (file).
    line : int, optional
        The line number (pipe).

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, Session
    >>> broker = FileBroker("orders.ss")
    >>> seen = []
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning())
    ... def handle(delivery):
    ...     seen.append(delivery)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", '{"id": 7}')
    >>> _ = session.step()
    >>> delivery = seen[0]
    >>> delivery.json(), delivery.attempt, delivery.headers
    ({'id': 7}, 1, {'stream-sequence': '1'})
    """

    payload: bytes
    headers: dict[str, Any]
    stream_key: str
    shard_id: int
    seq: int
    timestamp_ms: int
    transport: str
    subscription: str
    offset: int | None = None
    line: int | None = None
    _cache: dict | None = field(default=None, repr=False)  # made on first use: most deliveries never need it

    @property
    def timestamp(self) -> dt.datetime:
        """The message's timestamp as an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.UTC)

    @property
    def retry_count(self) -> int:
        """How many times this message was retried before (the ``x-ruststream-retry-count`` header; 0 if absent)."""
        return retry_count(self.headers)

    @property
    def attempt(self) -> int:
        """The attempt number: 1 for the first delivery, ``retry_count + 1`` for a copy."""
        return retry_count(self.headers) + 1

    @property
    def position(self) -> FilePosition | None:
        """``FilePosition.sequence(seq)`` on a file (seek to it to get this message again); None on a pipe."""
        return FilePosition.sequence(self.seq) if self.transport == "file" else None

    @property
    def text(self) -> str:
        """The payload decoded as UTF-8 (raises UnicodeDecodeError for binary payloads)."""
        return self.payload.decode("utf-8")

    def json(self) -> Any:
        """The payload parsed as JSON.

        Returns
        -------
        object
            The parsed value (parsed once, then cached).
        """
        if self._cache is None:
            self._cache = {}
        if "json" not in self._cache:
            self._cache["json"] = _json.loads(self.payload)
        return self._cache["json"]

    def ack(self) -> None:
        """Always raises ``AckError('unsupported')``: file and pipe transports cannot acknowledge.

        Raises
        ------
        AckError
            Always, with kind ``unsupported``.
        """
        raise AckError("unsupported")

    def nack(self, requeue: bool = False) -> None:
        """Always raises ``AckError('unsupported')``: file and pipe transports cannot requeue.

        Parameters
        ----------
        requeue : bool
            Whether to ask for a requeue (ignored: it raises either way).

        Raises
        ------
        AckError
            Always (kind ``unsupported``): return ``HandlerOutcome.retry()`` to have the message again.
        """
        raise AckError("unsupported")

    def preview(self, width: int = 60) -> str:
        """A one-line preview of the payload for tables and widgets.

        Parameters
        ----------
        width : int
            The longest preview, in characters (a longer text is cut and ends with an ellipsis).

        Returns
        -------
        str
            The payload's text with newlines escaped, or ``<N binary bytes>``.
        """
        try:
            text = self.payload.decode("utf-8")
        except UnicodeDecodeError:
            return f"<{len(self.payload)} binary bytes>"
        text = text.replace("\n", "\\n")
        return text if len(text) <= width else text[: width - 1] + "…"

    def __repr__(self) -> str:
        return (
            f"Delivery({self.transport} {self.stream_key!r} seq={self.seq} attempt={self.attempt} "
            f"payload={self.preview(40)!r})"
        )

    def _repr_html_(self) -> str:
        rows = [
            ("subscription", self.subscription),
            ("transport", self.transport),
            ("stream key", self.stream_key),
            ("sequence", self.seq),
            ("attempt", self.attempt),
            ("timestamp", isoformat_z(self.timestamp)),
            ("headers", ", ".join(f"{k}: {v}" for k, v in self.headers.items()) or "(none)"),
            ("payload", self.preview(80)),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
            f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table class='nbkit-delivery'><caption>Delivery</caption>{body}</table>"


def new_slotted(cls: type[T], values: tuple[Any, ...]) -> T:
    """``cls(*values)``: how a pipe's :class:`Delivery` is made from its fields in order (one per stdin line).
    The compiled core's twin puts the values straight in the slots of a slots dataclass such as Delivery (what
    its ``__init__`` does, without the Python call), and calls ``cls`` for anything else; the compiled
    ``file_deliveries`` makes a file's deliveries the same way.

    Examples
    --------
    >>> d = new_slotted(Delivery, (b"hi", {}, "jobs", 0, 7, 1704067200000, "pipe", "work", None, 3))
    >>> d.stream_key, d.seq, d.line, d.offset
    ('jobs', 7, 3, None)
    """
    return cls(*values)


#: The pure-Python twin, kept under its own name for the twin tests.
new_slotted_pure = new_slotted
new_slotted = pick("new_slotted", new_slotted_pure)  # noqa: F811 (the twin this process runs)
