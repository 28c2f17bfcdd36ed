"""File messages made into the objects a handler receives: one pass, no I/O.

A file subscription hands its handler one object per message of its key: the payload with any ``rs1:`` /
``rs2:`` envelope decoded, the headers with the ``stream-sequence`` header added (the transport's,
runtime-semantics §3.4), and where the message came from. :func:`file_deliveries` makes them from the
reader's messages (the 7 fields of a :class:`~nbkit.transport.messages.Message`, in order) through the
runtime's constructor, ``make``, so this layer needs nothing from the runtime. The compiled twin
(``nbkit.wire._speedups``, section "file deliveries") does the same per message in C.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from nbkit.wire.core import pick
from nbkit.wire.envelope import decode_delivery

__all__ = ["file_deliveries"]

T = TypeVar("T")


def file_deliveries(messages: Iterable[tuple[Any, ...]], subscription: str, make: Callable[..., T]) -> Iterator[T]:
    """One delivery per message, made when the iterator is advanced: ``make(payload, headers, stream_key,
    shard_id, seq, timestamp_ms, "file", subscription, offset)``.

    Messages are taken from ``messages`` one at a time, as the deliveries are asked for (a message not
    asked for stays in ``messages``).

    Parameters
    ----------
    messages : iterable of tuple
        Messages as ``(stream_key, shard_id, seq, timestamp_ms, payload, offset, end)``, the stored payload
        maybe an envelope.
    subscription : str
        The name of the registration they are delivered to.
    make : callable
        Makes one delivery from those nine values (the runtime's ``Delivery``).

    Returns
    -------
    iterator
        What ``make`` returns, per message.

    Examples
    --------
    >>> messages = [("orders", 0, 17, 1704067200000, b'{"id": 1}', 100, 140)]
    >>> list(file_deliveries(messages, "work", lambda *fields: fields))
    [(b'{"id": 1}', {'stream-sequence': '17'}, 'orders', 0, 17, 1704067200000, 'file', 'work', 100)]
    """
    for stream_key, shard_id, seq, timestamp_ms, data, offset, _ in messages:
        headers, payload = decode_delivery(data, seq)
        yield make(payload, headers, stream_key, shard_id, seq, timestamp_ms, "file", subscription, offset)


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
file_deliveries_pure = file_deliveries
file_deliveries = pick("file_deliveries", file_deliveries_pure)  # noqa: F811 (the twin this process runs)
