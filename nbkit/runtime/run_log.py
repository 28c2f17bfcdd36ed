"""The log handler ``nbkit run`` installs, and how a settlement's ``ack / nack failed`` line reaches it.

:class:`RunLogHandler` writes one line per record, gathered and written out in one piece at the moments its
docstring names; :class:`LogOrderedStream` and :func:`flush_run_logs` keep a service's own output after the
lines gathered before it. :class:`AckLog` is a settlement's way of writing its per-ack WARNING: the line
gathered in the run handler while nothing else could see its record, else a record.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from nbkit.runtime.logs import (
    ACK_FAILED,
    ACK_LINES_LEFT_OUT,
    DISPATCH,
    UNSUPPORTED,
    DeliveryFormatter,
    SettledLike,
    ack_failed_message,
    delivery_extra,
    render_field,
)

__all__ = [
    "RUN_BUFFER",
    "RUN_FORMAT",
    "AckLog",
    "LogOrderedStream",
    "RunLogHandler",
    "flush_run_logs",
]

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
    >>> handler.handle(logging.makeLogRecord({"msg": "gathered", "levelname": "WARNING", "levelno": 30,
    ...     "name": "nbkit.dispatch"}))
    True
    >>> ordered = LogOrderedStream(err)
    >>> print("printed by the service", file=ordered)
    >>> err.getvalue().splitlines()
    ['WARNING nbkit.dispatch: gathered', 'printed by the service']
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


class AckLog:
    """How one subscription's settlements write the ``ack / nack failed`` WARNING an unsupported ack / nack
    logs (spec 1.3): the line of every ack on a file or a pipe, so the hot path of a service.

    While the ``nbkit run`` handler (:class:`RunLogHandler`) is the only place the line's record would reach,
    :meth:`write` gathers the line that handler would write from the record, and no record is made;
    otherwise the settlement logs the record, whose ``extra`` is :meth:`extra`. The line's text around the
    sequence number is made once per (run handler, stream key, attempt, level name), and the number is
    made text when the lines are written out. Logging tells no one when its configuration changes, so the
    route is checked per line, by the walk ``Logger.callHandlers`` makes (without a record): a handler,
    filter or formatter added by a service's handler applies from the next line on, as with records.

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
    >>> AckLog("work").write("orders", 17, 1)  # gathered by the run handler (nbkit.dispatch logs WARNING)
    True
    >>> handler.close()
    >>> logging.getLogger("nbkit").removeHandler(handler)
    >>> logging.getLogger("nbkit").propagate = True
    >>> print(out.getvalue().replace(" error=", "\\n    error="), end="")
    WARNING nbkit.dispatch: ack / nack failed subscription=work
        error="acknowledgement is not supported by this broker" stream_key=orders seq=17 attempt=1
    >>> AckLog("work").write("orders", 18, 1)  # no run handler: the caller logs the record
    False
    """

    __slots__ = (
        "logger",
        "message",
        "subscription",
        "_handler",
        "_stream_key",
        "_attempt",
        "_levelname",
        "_head",
        "_tail",
        "_line_tail",
        "_low",
        "_high",
        "_size",
    )

    def __init__(self, subscription: str, logger: logging.Logger = DISPATCH) -> None:
        self.logger = logger
        self.subscription = subscription
        #: the record's message (the text and its fields)
        self.message = ack_failed_message(subscription)
        # the line's pieces, made for this (run handler, stream key, attempt, level name)
        self._handler: RunLogHandler | None = None
        self._stream_key = ""
        self._attempt = 0
        self._levelname = ""
        self._head = ""  # the line up to its sequence number
        self._tail = ""  # after it
        self._line_tail = ""  # after it, on a pipe: the stdin line number follows
        self._low = self._high = 0  # the sequence numbers whose line is ``_size`` characters: low <= seq < high
        self._size = 0

    def write(self, stream_key: str, seq: int, attempt: int, line: int | None = None) -> bool:
        """Gather the line of delivery ``seq`` of ``stream_key`` at ``attempt`` (``line``: a pipe delivery's
        stdin line) in the run handler, when it is the only place the record would reach. The caller has
        checked that the logger is enabled for WARNING (``logger.isEnabledFor``).

        Returns
        -------
        bool
            True when the line is done with: gathered, or left out by ``ack_log_rate``; False when anything
            else could see the record (another
            handler, a filter on the logger or on the handler, a formatter other than the handler's own, a
            record factory or a Logger class of the embedding, or no handler: logging's last resort): then
            the caller logs the record itself, naming itself as its source.
        """
        logger = self.logger
        if (
            not _RUN_HANDLERS
            or type(logger) is not logging.Logger
            or logger.disabled
            or logger.filters
            or logging.getLogRecordFactory() is not logging.LogRecord
        ):
            return False
        found: RunLogHandler | None = None
        current: logging.Logger | None = logger
        while current is not None:  # as Logger.callHandlers walks
            for handler in current.handlers:
                if handler.level <= logging.WARNING:
                    if (
                        found is not None
                        or type(handler) is not RunLogHandler
                        or handler.filters
                        or handler.formatter is not handler.run_formatter
                    ):
                        return False
                    found = handler
            if not current.propagate:
                break
            current = current.parent
        if found is None:
            return False
        if found.ack_rate is not None and not found._ack_allowed(logger.name, logging.WARNING):
            return True
        levelname = logging.getLevelName(logging.WARNING)  # (renamed with logging.addLevelName: seen at once)
        if (
            found is not self._handler
            or stream_key != self._stream_key
            or attempt != self._attempt
            or levelname is not self._levelname
        ):
            self._handler, self._stream_key, self._attempt, self._levelname = found, stream_key, attempt, levelname
            self._head = f"{levelname} {logger.name}: {self.message} stream_key={render_field(stream_key)} seq="
            self._tail = f" attempt={attempt}\n"
            self._line_tail = f" attempt={attempt} line="
            self._high = 0
        if not self._low <= seq < self._high:  # (sequence numbers grow: a new digit now and then)
            digits = len(str(seq))
            self._low, self._high = (10 ** (digits - 1) if digits > 1 else 0), 10**digits
            self._size = len(self._head) + digits + len(self._tail)
        if line is None:  # the whole line in one call: atomic, as emit()'s append of a line
            found._lines.extend((self._head, seq, self._tail))
            found._size += self._size
        else:  # a pipe delivery: its stdin line number ends the line
            found._lines.extend((self._head, seq, self._line_tail, line, "\n"))
            found._size += self._size + 8
        if found._size >= found.limit:
            found.flush()
        return True

    def extra(self, delivery: SettledLike) -> dict[str, object]:
        """The ``extra`` of the line's record: its text, its fields (``nbkit_fields``) and its delivery."""
        fields = {"subscription": self.subscription, "error": UNSUPPORTED}
        return {"nbkit_text": ACK_FAILED, "nbkit_fields": fields, **delivery_extra(delivery)}


_RUN_HANDLERS: set[RunLogHandler] = set()  # the ones not closed yet, flushed by flush_run_logs()
os.register_at_fork(before=flush_run_logs)  # a forked child must not write the parent's gathered lines again
