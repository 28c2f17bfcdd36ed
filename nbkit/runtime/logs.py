"""The runtime's log lines: upstream texts and levels, with ``key=value`` fields as tracing prints them.

The loggers, the texts, :func:`emit` (a record whose message is the text and its fields) and the fields naming
a settled delivery; the handler ``nbkit run`` installs is :mod:`nbkit.runtime.run_log`'s.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import NamedTuple

from nbkit.errors import AckError

__all__ = [
    "ACK_FAILED",
    "ACK_LINES_LEFT_OUT",
    "APP",
    "BAD_LINE_SKIPPED",
    "BAD_RETRY_COUNT",
    "COPY_ABANDONED",
    "COPY_ABANDONED_BROKEN_PIPE",
    "COPY_ABANDONED_SIGNAL",
    "COPY_FAILED",
    "DECLARATION",
    "DELIVERY_FIELDS",
    "DISPATCH",
    "EXHAUSTED_DLQ",
    "EXHAUSTED_REJECT",
    "HANDLER_FAILED",
    "INPUT_ENDED_WAITING",
    "LINES_NOT_DELIVERED",
    "PENDING_FULL",
    "REQUEUE_NOTHING",
    "RETRY",
    "SHUTDOWN_DRAINING",
    "SHUTDOWN_STOPPING",
    "SHUTDOWN_WAITING",
    "STREAM_ENDED",
    "STREAM_ERROR",
    "SUBSCRIBER",
    "UNSUBSCRIBED_LINE",
    "UNSUPPORTED",
    "DeliveryFormatter",
    "SettledDelivery",
    "SettledLike",
    "ack_failed_message",
    "as_settled",
    "capture_lines",
    "delivery_extra",
    "delivery_suffix",
    "emit",
    "render_field",
]


DISPATCH = logging.getLogger("nbkit.dispatch")
RETRY = logging.getLogger("nbkit.retry")
SUBSCRIBER = logging.getLogger("nbkit.subscriber")
APP = logging.getLogger("nbkit.app")

ACK_FAILED = "ack / nack failed"
COPY_FAILED = "publishing the retry copy failed; message lost"
EXHAUSTED_DLQ = "retry attempts exhausted; publishing the delivery to the dead-letter destination"
EXHAUSTED_REJECT = "retry attempts exhausted and no dead-letter destination is declared; rejecting the delivery"
DECLARATION = (
    "retry declaration; a cap applies to the copies this process publishes, counted in the "
    "x-ruststream-retry-count header"
)
STREAM_ENDED = "subscriber stream ended"
STREAM_ERROR = "subscriber stream error"
HANDLER_FAILED = "handler raised; the delivery is dropped"
COPY_ABANDONED = "shutdown timeout reached; the delayed retry copy is abandoned and lost"
#: nbkit's own lines (upstream has no such case): why else a pending copy is abandoned
COPY_ABANDONED_SIGNAL = "second signal; the delayed retry copy is abandoned and lost"
COPY_ABANDONED_BROKEN_PIPE = "stdout closed by the next stage; the delayed retry copy is abandoned and lost"
#: a plain retry() with neither max_attempts nor dead_letter: upstream logs the ack text; nbkit adds the outcome
REQUEUE_NOTHING = "retry() requeues nothing on this transport (no max_attempts, no dead_letter): the message is lost"
LINES_NOT_DELIVERED = "lines read from stdin are not delivered (the stage stopped at once)"
BAD_LINE_SKIPPED = "bad stdin line skipped"
BAD_RETRY_COUNT = "unreadable retry count; counted as 0, as upstream does (the cap does not see earlier attempts)"
UNSUBSCRIBED_LINE = "stdin line for a key no subscription reads; skipped"
SHUTDOWN_DRAINING = "stopping: stdin is a pipe, reading it until the stage before closes it"
SHUTDOWN_STOPPING = "stopping: no more stdin is read; the lines read already are delivered"
INPUT_ENDED_WAITING = "input ended; waiting for the delayed retry copies before exiting"
SHUTDOWN_WAITING = "shutting down: waiting for the delayed retry copies"
PENDING_FULL = "the pending delayed copies reached max_pending: input waits until copies are due (backpressure)"
ACK_LINES_LEFT_OUT = "ack / nack failed lines left out (ack_log_rate)"


#: The record attributes (logging ``extra``) by which a settlement record names its delivery: every
#: record about one delivery's settlement carries them (the upstream text and fields stay as they are).
#: ``line`` is the stdin line a pipe delivery came from (None on a file): sequence numbers on a pipe may
#: repeat (merged producers, header-less lines after an explicit seq), line numbers never do.
DELIVERY_FIELDS = ("subscription", "stream_key", "seq", "attempt", "line")


class SettledDelivery(NamedTuple):
    """The delivery a settlement record is about, as the record names it (:data:`DELIVERY_FIELDS`)."""

    subscription: str
    stream_key: str
    seq: int
    attempt: int
    line: int | None = None  # a pipe delivery's stdin line (None on a file)


#: The delivery a settlement record is about: a :class:`SettledDelivery`, or the plain tuple
#: (subscription, stream key, sequence, attempt[, stdin line or None]) in its field order
SettledLike = SettledDelivery | tuple[str, str, int, int] | tuple[str, str, int, int, int | None]


def as_settled(delivery: SettledLike) -> SettledDelivery:
    """``delivery`` as a :class:`SettledDelivery` (a plain tuple is read in its field order)."""
    return delivery if type(delivery) is SettledDelivery else SettledDelivery(*delivery)


def emit(
    logger: logging.Logger, level: int, text: str, *, delivery: SettledLike | None = None, **fields: object
) -> None:
    """Log ``text`` followed by its fields; the fields are also on the record as ``nbkit_fields``, and
    the settled delivery (when given) as the attributes :data:`DELIVERY_FIELDS`. The record names the code
    that called ``emit``."""
    if not logger.isEnabledFor(level):
        return
    rendered = " ".join(f"{k}={render_field(v)}" for k, v in fields.items())
    extra = {"nbkit_text": text, "nbkit_fields": fields, **delivery_extra(delivery)}
    # the record names the runtime code that called emit(), found by logging's own stacklevel walk
    logger.log(level, f"{text} {rendered}" if rendered else text, extra=extra, stacklevel=2)


def ack_failed_message(subscription: str) -> str:
    """The message of the WARN an unsupported ack / nack of ``subscription`` logs (made once per subscription).

    Parameters
    ----------
    subscription : str
        The subscription's name.

    Returns
    -------
    str
        ``ack / nack failed subscription=NAME error="..."``, as :class:`AckLog` logs it.

    Examples
    --------
    >>> ack_failed_message("orders")
    'ack / nack failed subscription=orders error="acknowledgement is not supported by this broker"'
    """
    message = _ACK_FAILED_TEXTS.get(subscription)
    if message is None:
        message = f"{ACK_FAILED} subscription={render_field(subscription)} error={render_field(UNSUPPORTED)}"
        if len(_ACK_FAILED_TEXTS) < 1024:
            _ACK_FAILED_TEXTS[subscription] = message
    return message


def delivery_extra(delivery: SettledLike | None) -> dict[str, object]:
    """The logging ``extra`` naming a settled delivery.

    Parameters
    ----------
    delivery : tuple of (str, str, int, int) or None
        Subscription, stream key, sequence and attempt; None for a record about no delivery.

    Returns
    -------
    dict
        ``{"subscription": .., "stream_key": .., "seq": .., "attempt": ..}``, or empty.

    Examples
    --------
    >>> delivery_extra(("work", "orders", 17, 2))
    {'subscription': 'work', 'stream_key': 'orders', 'seq': 17, 'attempt': 2, 'line': None}
    >>> delivery_extra(("work", "orders", 17, 2, 40))["line"]
    40
    """
    if delivery is None:
        return {}
    return dict(zip(DELIVERY_FIELDS, as_settled(delivery), strict=True))


def delivery_suffix(record: logging.LogRecord) -> str:
    """The delivery fields of a settlement record that its text does not show already.

    So identical WARN lines (four ``ack / nack failed`` of one subscription) tell their deliveries apart; a
    pipe delivery's line ends with its stdin line number (``line=40``).

    Parameters
    ----------
    record : logging.LogRecord
        Any record; only one with the :data:`DELIVERY_FIELDS` attributes gets a suffix.

    Returns
    -------
    str
        ``" stream_key=orders seq=17 attempt=2"``, or empty.

    Examples
    --------
    >>> rec = logging.makeLogRecord({"msg": "ack / nack failed subscription=work", "nbkit_fields":
    ...     {"subscription": "work"}, **delivery_extra(("work", "orders", 17, 2))})
    >>> delivery_suffix(rec)
    ' stream_key=orders seq=17 attempt=2'
    """
    if getattr(record, "stream_key", None) is None:
        return ""
    shown = getattr(record, "nbkit_fields", None) or {}
    parts = [
        f"{name}={render_field(value)}"
        for name in DELIVERY_FIELDS
        if name not in shown and (value := getattr(record, name, None)) is not None
    ]
    return " " + " ".join(parts) if parts else ""


class DeliveryFormatter(logging.Formatter):
    """A ``logging.Formatter`` that ends a settlement record's line with its delivery (``nbkit run``).

    Parameters
    ----------
    fmt : str, optional
        The format, as for ``logging.Formatter``.

    Returns
    -------
    DeliveryFormatter
        A formatter: ``format(record)`` gives the line.

    Examples
    --------
    >>> rec = logging.makeLogRecord({"msg": "ack / nack failed", "levelname": "WARNING",
    ...     **delivery_extra(("work", "orders", 17, 2))})
    >>> DeliveryFormatter("%(levelname)s %(message)s").format(rec)
    'WARNING ack / nack failed subscription=work stream_key=orders seq=17 attempt=2'
    """

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        """The formatted line, then :func:`delivery_suffix`."""
        return super().formatMessage(record) + delivery_suffix(record)


def render_field(value: object) -> str:
    """A field's value as a log line shows it: quoted when empty or when it holds a space (as tracing prints it)."""
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s


#: Never raised: the error an unsupported ack / nack reports (``error=`` of the ``ack / nack failed`` line).
UNSUPPORTED = AckError("unsupported")
_ACK_FAILED_TEXTS: dict[str, str] = {}


class _LineCollector(logging.Handler):
    """The runtime's log lines (INFO and up) as ``nbkit run`` prints them, appended to a list."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        # a settlement record ends with its delivery (stream_key=.. seq=.. attempt=..)
        self.lines.append(f"{record.levelname} {record.name}: {record.getMessage()}{delivery_suffix(record)}")


@contextlib.contextmanager
def capture_lines(lines: list[str]) -> Iterator[None]:
    """Keep the runtime's log lines (INFO and up) in ``lines`` meanwhile, as ``nbkit run`` would print them
    (for a notebook Session and the test client, which show them instead of printing them)."""
    logger = logging.getLogger("nbkit")
    handler = _LineCollector(lines)
    level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
