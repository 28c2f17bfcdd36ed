"""The runtime's log lines: upstream texts and levels, with ``key=value`` fields as tracing prints them."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

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
    "RUN_BUFFER",
    "RUN_FORMAT",
    "SHUTDOWN_DRAINING",
    "SHUTDOWN_STOPPING",
    "SHUTDOWN_WAITING",
    "STREAM_ENDED",
    "STREAM_ERROR",
    "SUBSCRIBER",
    "UNSUBSCRIBED_LINE",
    "UNSUPPORTED",
    "AckLog",
    "DeliveryFormatter",
    "LogOrderedStream",
    "RunLogHandler",
    "SettledDelivery",
    "SettledLike",
    "ack_failed_message",
    "as_settled",
    "capture_lines",
    "delivery_extra",
    "delivery_suffix",
    "emit",
    "flush_run_logs",
    "sole_run_handler",
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
    rendered = " ".join(f"{k}={_render(v)}" for k, v in fields.items())
    extra = {"nbkit_text": text, "nbkit_fields": fields, **delivery_extra(delivery)}
    # the record names the runtime code that called emit(), found by logging's own stacklevel walk
    logger.log(level, f"{text} {rendered}" if rendered else text, extra=extra, stacklevel=2)


class AckLog:
    """How one subscription's settlements write the ``ack / nack failed`` WARNING an unsupported ack / nack
    logs (spec 1.3): the line of every ack on a file or a pipe, so the hot path of a service.

    While the ``nbkit run`` handler (:class:`RunLogHandler`) is the only place the line's record would reach,
    the line goes to that handler's writer (:meth:`writer`) and no record is made; otherwise the settlement
    logs the record, whose ``extra`` is :meth:`extra`. The writer, and the line's text around its sequence
    number, are made once per (run handler, stream key, attempt). Logging tells no one when its
    configuration changes, so :func:`sole_run_handler` is asked per line: a handler, filter or formatter
    added by a service's handler applies from the next line on, as with records.

    Parameters
    ----------
    subscription : str
        The subscription's name (the line names it).
    logger : logging.Logger
        Where the line is logged (the ``nbkit.dispatch`` logger).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> handler = RunLogHandler(out)
    >>> logging.getLogger("nbkit").addHandler(handler)
    >>> logging.getLogger("nbkit").propagate = False
    >>> write = AckLog("work").writer("orders", 1)
    >>> write(17)
    >>> handler.close()
    >>> logging.getLogger("nbkit").removeHandler(handler)
    >>> logging.getLogger("nbkit").propagate = True
    >>> print(out.getvalue().replace(" error=", "\\n    error="), end="")
    WARNING nbkit.dispatch: ack / nack failed subscription=work
        error="acknowledgement is not supported by this broker" stream_key=orders seq=17 attempt=1
    >>> AckLog("work").writer("orders", 1) is None  # no run handler: a record is made
    True
    """

    __slots__ = ("logger", "message", "subscription", "_handler", "_stream_key", "_attempt", "_write")

    def __init__(self, subscription: str, logger: logging.Logger = DISPATCH) -> None:
        self.logger = logger
        self.subscription = subscription
        #: the record's message (the text and its fields)
        self.message = ack_failed_message(subscription)
        self._handler: RunLogHandler | None = None  # the run handler ``_write`` writes to
        self._stream_key = ""
        self._attempt = 0
        self._write: Callable[[int, int | None], None] | None = None

    def writer(self, stream_key: str, attempt: int) -> Callable[[int, int | None], None] | None:
        """The writer of the line of a delivery of ``stream_key`` at ``attempt``: ``write(seq, line=None)``
        (``line``: a pipe delivery's stdin line); None when something other than the run handler could see
        the record (:func:`sole_run_handler`): then the record is to be logged. Asked per line, for a logger
        enabled for WARNING."""
        handler = sole_run_handler(self.logger, logging.WARNING) if _RUN_HANDLERS else None
        if handler is None:
            return None
        if handler is not self._handler or stream_key != self._stream_key or attempt != self._attempt:
            self._write = handler.settlement_writer(
                self.logger.name, logging.WARNING, self.message, stream_key, attempt
            )
            self._handler, self._stream_key, self._attempt = handler, stream_key, attempt
        return self._write

    def extra(self, delivery: SettledLike) -> dict[str, object]:
        """The ``extra`` of the line's record: its text, its fields (``nbkit_fields``) and its delivery."""
        fields = {"subscription": self.subscription, "error": UNSUPPORTED}
        return {"nbkit_text": ACK_FAILED, "nbkit_fields": fields, **delivery_extra(delivery)}


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
        message = f"{ACK_FAILED} subscription={_render(subscription)} error={_render(UNSUPPORTED)}"
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
        f"{name}={_render(value)}"
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


#: The line ``nbkit run`` writes per record: level, logger, message (then the delivery, :class:`DeliveryFormatter`).
RUN_FORMAT = "%(levelname)s %(name)s: %(message)s"
#: How much log text :class:`RunLogHandler` holds before it writes (the size of stdout's buffer, too).
RUN_BUFFER = 1 << 16


class RunLogHandler(logging.Handler):
    """The log handler ``nbkit run`` installs: one line per record, buffered, written out in one piece.

    The line is :class:`DeliveryFormatter`'s with :data:`RUN_FORMAT` (``WARNING nbkit.dispatch: ack / nack
    failed subscription=... stream_key=orders seq=17 attempt=2``), as the stdlib ``StreamHandler`` wrote
    it, but lines are gathered and written with one ``write`` + ``flush`` when :data:`RUN_BUFFER` characters
    have gathered, when a record of level ERROR or above arrives, when the app goes idle, before the pipe
    stage writes its stdout (so a log line never comes after stdout written later), at the end of the run
    and at exit (``logging.shutdown``). What a crash may lose: a process killed outright (SIGKILL, os._exit,
    a segfault) loses the lines gathered since the last of those moments, at most :data:`RUN_BUFFER`
    characters; they are about deliveries settled after the stage last wrote to stdout, whose own stdout
    lines (retry copies) are still buffered too and are lost with them. Lines are also written before a
    fork (a child does not write them again). Text the service writes to stderr itself may come before
    lines gathered earlier. Records whose ``nbkit_text`` is in ``skip_texts`` are left out.

    Parameters
    ----------
    stream : file, optional
        Where the lines go (default: ``sys.stderr`` at the time of the call).
    skip_texts : iterable of str
        Runtime texts (``nbkit_text``) not to write.
    limit : int
        Characters gathered before they are written.
    ack_rate : float, optional
        At most this many ``ack / nack failed`` WARNING lines per second (``nbkit run --ack-log-rate``);
        the lines left out are counted, and one line ``ack / nack failed lines left out (ack_log_rate)
        count=N`` says how many, when the next second's first line is written and at :meth:`close`.
        None (the default): every line.

    Returns
    -------
    RunLogHandler
        A ``logging.Handler``.

    Examples
    --------
    >>> import io, logging
    >>> out = io.StringIO()
    >>> handler = RunLogHandler(out)
    >>> rec = logging.makeLogRecord({"msg": "ack / nack failed", "levelname": "WARNING", "levelno": 30,
    ...     "name": "nbkit.dispatch", **delivery_extra(("work", "orders", 17, 2))})
    >>> handler.handle(rec)
    True
    >>> out.getvalue()                           # gathered, not written yet
    ''
    >>> handler.flush()
    >>> out.getvalue()
    'WARNING nbkit.dispatch: ack / nack failed subscription=work stream_key=orders seq=17 attempt=2\\n'
    """

    def __init__(
        self,
        stream: Any = None,
        *,
        skip_texts: Iterable[str] = (),
        limit: int = RUN_BUFFER,
        ack_rate: float | None = None,
    ) -> None:
        super().__init__()
        if ack_rate is not None and not ack_rate > 0:
            raise ValueError(f"ack_rate must be > 0 lines per second or None, not {ack_rate!r}")
        self.ack_rate = ack_rate
        self._window_end = 0.0  # the end of the second whose lines _in_window counts
        self._in_window = 0
        self._left_out = 0  # ack lines left out since the last "left out" line
        self._left_out_logger = DISPATCH.name
        self.stream = sys.stderr if stream is None else stream
        self.skip_texts = frozenset(skip_texts)
        self.limit = limit
        self.run_formatter = DeliveryFormatter(RUN_FORMAT)
        self.setFormatter(self.run_formatter)
        # the gathered text, in order: lines, and the pieces of settlement lines (a sequence number as an int,
        # made text when written out); ``_size`` counts their characters
        self._lines: list[str | int] = []
        self._size = 0
        _RUN_HANDLERS.add(self)

    def emit(self, record: logging.LogRecord) -> None:
        """Gather the record's line (written out when due, see the class)."""
        if self.skip_texts and getattr(record, "nbkit_text", None) in self.skip_texts:
            return
        if (
            self.ack_rate is not None
            and record.levelno == logging.WARNING
            and getattr(record, "nbkit_text", None) == ACK_FAILED
            and not self._ack_allowed(record.name, record.levelno)
        ):
            return
        try:
            line = self.format(record) + "\n"
        except Exception:
            self.handleError(record)
            return
        self._lines.append(line)
        self._size += len(line)
        if self._size >= self.limit or record.levelno >= logging.ERROR:
            self.flush()

    def settlement_writer(
        self, name: str, level: int, message: str, stream_key: str, attempt: int
    ) -> Callable[[int, int | None], None]:
        """Settlement lines of one stream key and attempt without records: ``write(seq)`` gathers the line
        :meth:`emit` makes of the record ``logger.log(level, message, extra=...)`` of that settlement whose
        ``nbkit_fields`` show the subscription: ``LEVEL name: message stream_key=.. seq=.. attempt=..``.

        The line's text around the sequence number is made once, and the number is made text when the lines
        are written out, so a settlement costs one list extend (atomic, like the append of a line); a level
        renamed with ``logging.addLevelName`` meanwhile is still seen, line by line. The caller
        (:meth:`AckLog.writer`) checks per line that this handler is the only place the record would go
        (:func:`sole_run_handler`).

        Parameters
        ----------
        name : str
            The logger's name.
        level : int
            The records' level.
        message : str
            Their message (it names the subscription).
        stream_key : str
            The deliveries' stream key.
        attempt : int
            Their attempt.

        Returns
        -------
        callable
            ``write(seq, line=None)``: gathers one settlement's line (``line``: a pipe delivery's stdin line).

        Examples
        --------
        >>> import io
        >>> out = io.StringIO()
        >>> handler = RunLogHandler(out)
        >>> write = handler.settlement_writer("nbkit.dispatch", logging.WARNING, "ack / nack failed", "orders", 1)
        >>> write(9)
        >>> write(10)
        >>> handler.flush()
        >>> print(out.getvalue(), end="")
        WARNING nbkit.dispatch: ack / nack failed stream_key=orders seq=9 attempt=1
        WARNING nbkit.dispatch: ack / nack failed stream_key=orders seq=10 attempt=1
        >>> handler.close()
        """
        levelname = logging.getLevelName(level)
        head = _settlement_head(levelname, name, message, stream_key)
        tail = f" attempt={attempt}\n"
        line_tail = f" attempt={attempt} line="
        limited = self.ack_rate is not None
        allowed = self._ack_allowed
        extend = self._lines.extend  # flush() empties the list in place: it stays the one to add to
        low = high = 0  # the sequence numbers with ``digits`` digits: low <= seq < high
        size = 0  # the characters of a line whose number has ``digits`` digits

        def write(seq: int, lineno: int | None = None) -> None:
            nonlocal levelname, head, low, high, size
            if limited and not allowed(name, level):
                return
            if logging.getLevelName(level) is not levelname:  # a level renamed with logging.addLevelName
                levelname = logging.getLevelName(level)
                head = _settlement_head(levelname, name, message, stream_key)
                high = 0
            if not low <= seq < high:  # (sequence numbers grow: a new digit now and then)
                digits = len(str(seq))
                low, high = (10 ** (digits - 1) if digits > 1 else 0), 10**digits
                size = len(head) + digits + len(tail)
            if lineno is None:
                extend((head, seq, tail))  # the whole line in one call: atomic, as emit()'s append
                self._size += size
            else:  # a pipe delivery: its stdin line number ends the line
                extend((head, seq, line_tail, lineno, "\n"))
                self._size += size + 8
            if self._size >= self.limit:
                self.flush()

        return write

    def _ack_allowed(self, name: str, level: int) -> bool:
        """Whether one more ``ack / nack failed`` line fits this second's ``ack_rate`` (else it is counted)."""
        now = time.monotonic()
        if now >= self._window_end:
            self._window_end = now + 1.0
            self._in_window = 0
            self._write_left_out()
        if self._in_window < self.ack_rate:  # type: ignore[operator]  # only called with a rate set
            self._in_window += 1
            return True
        self._left_out += 1
        self._left_out_logger = name
        return False

    def _write_left_out(self) -> None:
        """Gather the line that counts the ``ack / nack failed`` lines left out since the last one."""
        if self._left_out:
            line = (
                f"{logging.getLevelName(logging.WARNING)} {self._left_out_logger}: {ACK_LINES_LEFT_OUT} "
                f"count={self._left_out} per_second={self.ack_rate:g}\n"
            )
            self._left_out = 0
            self._lines.append(line)
            self._size += len(line)

    def flush(self) -> None:
        """Write the gathered lines in one piece and flush the stream."""
        with self.lock:  # type: ignore[union-attr]  # created by logging.Handler.__init__
            lines = self._lines
            n = len(lines)
            if not n:
                return
            text = "".join(map(str, lines[:n]))  # (an int is a settlement's sequence number)
            del lines[:n]  # (a line another thread appended meanwhile stays, for the next flush)
            self._size = 0
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # stderr closed or gone: the lines cannot go anywhere
                pass

    def close(self) -> None:
        """Write what is gathered, then close the handler (the stream stays open)."""
        try:
            self._write_left_out()
            self.flush()
        finally:
            _RUN_HANDLERS.discard(self)
            super().close()


def _settlement_head(levelname: str, name: str, message: str, stream_key: str) -> str:
    """The start of a settlement's run log line, up to its sequence number (:meth:`RunLogHandler.settlement_writer`)."""
    return f"{levelname} {name}: {message} stream_key={_render(stream_key)} seq="


def flush_run_logs() -> None:
    """Write out the lines every :class:`RunLogHandler` has gathered (the app goes idle, stdout is written).

    Returns
    -------
    None

    Examples
    --------
    >>> flush_run_logs()
    """
    for handler in list(_RUN_HANDLERS):
        handler.flush()


class LogOrderedStream:
    """A text stream (``sys.stdout`` / ``sys.stderr`` under ``nbkit run``) that writes out the gathered run
    log lines before each write of its own, so a service's ``print`` never comes before the log lines of
    deliveries settled earlier. Everything else is the wrapped stream's.

    Parameters
    ----------
    stream : file
        The text stream to wrap.

    Returns
    -------
    LogOrderedStream
        A file-like object.

    Examples
    --------
    >>> import io
    >>> err = io.StringIO()
    >>> handler = RunLogHandler(err)
    >>> handler.settlement_writer("nbkit.dispatch", logging.WARNING, "gathered", "jobs", 1)(3)
    >>> ordered = LogOrderedStream(err)
    >>> print("printed by the service", file=ordered)
    >>> err.getvalue().splitlines()
    ['WARNING nbkit.dispatch: gathered stream_key=jobs seq=3 attempt=1', 'printed by the service']
    >>> handler.close()
    """

    def __init__(self, stream: Any) -> None:
        self.wrapped = stream

    def write(self, text: str) -> int:
        """Write out the gathered log lines, then ``text``.

        Parameters
        ----------
        text : str
            What to write.

        Returns
        -------
        int
            What the wrapped stream's ``write`` returns.
        """
        flush_run_logs()
        return int(self.wrapped.write(text))

    def writelines(self, lines: Iterable[str]) -> None:
        """Write out the gathered log lines, then ``lines``.

        Parameters
        ----------
        lines : iterable of str
            What to write.
        """
        flush_run_logs()
        self.wrapped.writelines(lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def sole_run_handler(logger: logging.Logger, level: int) -> RunLogHandler | None:
    """The :class:`RunLogHandler` that is the only handler a record of ``logger`` at ``level`` would reach.

    None when anything else could see the record: another handler, a filter on the logger or on the
    handler, a formatter other than the handler's own, a record factory or a Logger class of the
    embedding, or no handler at all (logging's last resort). Checked on every call, since handlers
    come and go (``caplog``, a notebook's).

    Parameters
    ----------
    logger : logging.Logger
        The logger the record is for.
    level : int
        Its level (the logger must be enabled for it).

    Returns
    -------
    RunLogHandler or None

    Examples
    --------
    >>> import logging
    >>> sole_run_handler(logging.getLogger("nbkit.nowhere"), logging.WARNING) is None
    True
    """
    if (
        type(logger) is not logging.Logger
        or logger.disabled
        or logger.filters
        or logging.getLogRecordFactory() is not logging.LogRecord
    ):
        return None
    found: RunLogHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:  # as Logger.callHandlers walks
        if current.handlers:
            for handler in current.handlers:
                if level >= handler.level:
                    if (
                        found is not None
                        or type(handler) is not RunLogHandler
                        or handler.filters
                        or handler.formatter is not handler.run_formatter
                    ):
                        return None
                    found = handler
        if not current.propagate:
            return found
        current = current.parent
    return found


def _render(value: object) -> str:
    s = str(value)
    return f'"{s}"' if (" " in s or not s) else s


#: Never raised: the error an unsupported ack / nack reports (``error=`` of the ``ack / nack failed`` line).
UNSUPPORTED = AckError("unsupported")
_ACK_FAILED_TEXTS: dict[str, str] = {}
_RUN_HANDLERS: set[RunLogHandler] = set()  # the ones not closed yet, flushed by flush_run_logs()
os.register_at_fork(before=flush_run_logs)  # a forked child must not write the parent's gathered lines again


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
