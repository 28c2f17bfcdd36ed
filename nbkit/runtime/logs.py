"""The runtime's log lines: upstream texts and levels, with ``key=value`` fields as tracing prints them."""

from __future__ import annotations

import logging

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
    logger.log(
        level,
        "%s %s" if rendered else "%s%s",
        text,
        rendered,
        extra={"nbkit_text": text, "nbkit_fields": fields},
    )


def _render(value: object) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s
