"""The runtime's log lines: upstream texts and levels, with ``key=value`` fields as tracing prints them."""

from __future__ import annotations

import logging
import sys

from nbkit.errors import AckError

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


#: The record attributes (logging ``extra``) by which a settlement record names its delivery: every
#: record about one delivery's settlement carries them (the upstream text and fields stay as they are).
DELIVERY_FIELDS = ("subscription", "stream_key", "seq", "attempt")

#: (subscription, stream key, sequence, attempt) of the delivery a settlement record is about
Delivery = tuple[str, str, int, int]


def emit(logger: logging.Logger, level: int, text: str, *, delivery: Delivery | None = None, **fields: object) -> None:
    """Log ``text`` followed by its fields; the fields are also on the record as ``nbkit_fields``, and
    the settled delivery (when given) as the attributes :data:`DELIVERY_FIELDS`."""
    if not logger.isEnabledFor(level):
        return
    rendered = " ".join(f"{k}={_render(v)}" for k, v in fields.items())
    _log(logger, level, f"{text} {rendered}" if rendered else text, text, fields, delivery)


def ack_failed(logger: logging.Logger, subscription: str, delivery: Delivery | None = None) -> None:
    """The WARN an unsupported ack / nack logs (spec 1.3), once per such settlement: the hot path of a
    file or pipe service, so its text is rendered once per subscription."""
    if not logger.isEnabledFor(logging.WARNING):
        return
    message = _ACK_FAILED_TEXTS.get(subscription)
    if message is None:
        message = f"{ACK_FAILED} subscription={_render(subscription)} error={_render(_UNSUPPORTED)}"
        if len(_ACK_FAILED_TEXTS) < 1024:
            _ACK_FAILED_TEXTS[subscription] = message
    _log(logger, logging.WARNING, message, ACK_FAILED, {"subscription": subscription, "error": _UNSUPPORTED}, delivery)


def delivery_extra(delivery: Delivery | None) -> dict[str, object]:
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
    {'subscription': 'work', 'stream_key': 'orders', 'seq': 17, 'attempt': 2}
    """
    return {} if delivery is None else dict(zip(DELIVERY_FIELDS, delivery, strict=True))


def delivery_suffix(record: logging.LogRecord) -> str:
    """The delivery fields of a settlement record that its text does not show already.

    So identical WARN lines (four ``ack / nack failed`` of one subscription) tell their deliveries apart.

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
    parts = [f"{name}={_render(getattr(record, name))}" for name in DELIVERY_FIELDS if name not in shown]
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


def _log(
    logger: logging.Logger, level: int, message: str, text: str, fields: dict, delivery: Delivery | None = None
) -> None:
    """``logger.log(level, message)`` for an enabled level, with the record's source set to the runtime
    code that logs (two frames up) instead of the stack walk ``logging`` does for every record."""
    caller = sys._getframe(2)
    code = caller.f_code
    extra: dict[str, object] = {"nbkit_text": text, "nbkit_fields": fields}
    if delivery is not None:
        extra.update(zip(DELIVERY_FIELDS, delivery, strict=True))
    logger.handle(
        logger.makeRecord(
            logger.name,
            level,
            code.co_filename,
            caller.f_lineno,
            message,
            None,
            None,
            code.co_name,
            extra,
        )
    )


def _render(value: object) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s


_UNSUPPORTED = AckError("unsupported")  # never raised: the error an unsupported ack / nack reports
_ACK_FAILED_TEXTS: dict[str, str] = {}
