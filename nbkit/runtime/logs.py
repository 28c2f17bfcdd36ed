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
EXHAUSTED_REJECT = (
    "retry attempts exhausted and no dead-letter destination is declared; rejecting the delivery"
)
DECLARATION = (
    "retry declaration; a cap applies to the copies this process publishes, counted in the "
    "x-ruststream-retry-count header"
)
STREAM_ENDED = "subscriber stream ended"
STREAM_ERROR = "subscriber stream error"
HANDLER_FAILED = "handler raised; the delivery is dropped"
COPY_ABANDONED = "shutdown timeout reached; the delayed retry copy is abandoned and lost"


def emit(logger: logging.Logger, level: int, text: str, **fields: object) -> None:
    """Log ``text`` followed by its fields; the fields are also on the record as ``nbkit_fields``."""
    if not logger.isEnabledFor(level):
        return
    rendered = " ".join(f"{k}={_render(v)}" for k, v in fields.items())
    _log(logger, level, f"{text} {rendered}" if rendered else text, text, fields)


def ack_failed(logger: logging.Logger, subscription: str) -> None:
    """The WARN an unsupported ack / nack logs (spec 1.3), once per such settlement: the hot path of a
    file or pipe service, so its text is rendered once per subscription."""
    if not logger.isEnabledFor(logging.WARNING):
        return
    message = _ACK_FAILED_TEXTS.get(subscription)
    if message is None:
        message = f"{ACK_FAILED} subscription={_render(subscription)} error={_render(_UNSUPPORTED)}"
        if len(_ACK_FAILED_TEXTS) < 1024:
            _ACK_FAILED_TEXTS[subscription] = message
    _log(logger, logging.WARNING, message, ACK_FAILED, {"subscription": subscription, "error": _UNSUPPORTED})


def _log(logger: logging.Logger, level: int, message: str, text: str, fields: dict) -> None:
    """``logger.log(level, message)`` for an enabled level, with the record's source set to the runtime
    code that logs (two frames up) instead of the stack walk ``logging`` does for every record."""
    caller = sys._getframe(2)
    code = caller.f_code
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
            {"nbkit_text": text, "nbkit_fields": fields},
        )
    )


def _render(value: object) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s


_UNSUPPORTED = AckError("unsupported")  # never raised: the error an unsupported ack / nack reports
_ACK_FAILED_TEXTS: dict[str, str] = {}
