"""The pipe transport: stdin lines are deliveries, published messages and retry copies are stdout lines."""

from __future__ import annotations

import io
import logging
import os
import select
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from nbkit.errors import ConfigurationError, InvalidArgumentError, NbkitError, RetryDestinationError, Utf8Error
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker, Published, Subscription, as_payload
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.registration import Registration
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire import envelope
from nbkit.wire.keys import validate_key
from nbkit.wire.stdio_line import LineDecoder, LineFormatter

StdinSource = str | bytes | Iterable[str] | io.IOBase | None

_READ_SIZE = 1 << 16


class StdoutClosedError(NbkitError):
    """The process downstream closed the pipe (broken pipe); nothing more can be written."""


class LineSource:
    """Lines from stdin, a file descriptor, a string or any iterable, without ever blocking.

    ``poll()`` returns ``(line, lineno)``, ``NEED_MORE`` (a pipe has nothing yet) or ``None`` (EOF).
    """

    def __init__(self, source: StdinSource) -> None:
        self._fd: int | None = None
        self._iter: Iterator[Any] | None = None
        self._raw = bytearray()  # bytes read after the last complete line
        self._lines: list[bytes] = []  # complete lines of the last read, handed out from _next on
        self._next = 0
        self._eof = False
        self._queue: deque[str] = deque()
        self.lineno = 0
        if source is None:
            source = sys.stdin
        if isinstance(source, str):
            self._iter = iter(_split_text(source))
        elif isinstance(source, (bytes, bytearray)):
            self._iter = iter(bytes(source).split(b"\n")[:-1] if source.endswith(b"\n") else bytes(source).split(b"\n"))
        elif _real_fileno(source) is not None:
            self._fd = _real_fileno(source)
        elif hasattr(source, "readline"):
            self._iter = iter(source.readline, source.readline(0) if isinstance(source, io.IOBase) else "")
        else:
            self._iter = iter(source)

    def fileno(self) -> int | None:
        return None if self._eof else self._fd

    @property
    def queued(self) -> int:
        """Lines fed back (loopback) and not read yet."""
        return len(self._queue)

    def feed(self, line: str) -> None:
        """Queue a line to be read next (loopback)."""
        self._queue.append(line)

    def poll(self) -> tuple[str, int] | NeedMore | None:
        if self._queue:
            self.lineno += 1
            return self._queue.popleft(), self.lineno
        if self._iter is not None:
            try:
                item = next(self._iter)
            except StopIteration:
                self._iter = None
                self._eof = True
                return None
            return self._line(item)
        i = self._next
        if i < len(self._lines):
            self._next = i + 1
            return self._line(self._lines[i], stripped=True)
        if self._fd is None or self._eof and not self._raw:
            return None
        while True:
            if b"\n" in self._raw:  # split a whole read into lines at once; keep the partial tail
                lines = bytes(self._raw).split(b"\n")
                self._raw = bytearray(lines.pop())
                self._lines = lines
                self._next = 1
                return self._line(lines[0], stripped=True)
            if self._eof:
                if self._raw:
                    chunk = bytes(self._raw)
                    self._raw.clear()
                    return self._line(chunk, stripped=True)
                return None
            ready, _, _ = select.select([self._fd], [], [], 0)
            if not ready:
                return NEED_MORE
            data = os.read(self._fd, _READ_SIZE)
            if not data:
                self._eof = True
            else:
                self._raw += data

    def _line(self, item: Any, stripped: bool = False) -> tuple[str, int]:
        self.lineno += 1
        if isinstance(item, (bytes, bytearray)):
            try:
                item = bytes(item).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise Utf8Error(
                    f"stdin line {self.lineno} is not valid UTF-8 (byte {exc.start}); the line format is "
                    "text only: envelope binary payloads (rs1:) or fix the producer",
                    line=self.lineno,
                ) from None
        elif not isinstance(item, str):
            raise TypeError(f"stdin lines are str or bytes, not {type(item).__name__}")
        if not stripped and item.endswith("\n"):
            item = item[:-1]
        return item, self.lineno


def _split_text(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _real_fileno(source: Any) -> int | None:
    try:
        return source.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None


class LineSink:
    """Where stdout lines go: the real stdout (fd, buffered until flush), a file object or a list."""

    def __init__(self, target: Any) -> None:
        self.lines: list[str] | None = None
        self._fd: int | None = None
        self._file = None
        self._buffer: list[bytes] = []
        self._size = 0
        if target is None:
            target = sys.stdout
        if isinstance(target, list):
            self.lines = target
        elif _real_fileno(target) is not None and target in (sys.stdout, sys.__stdout__):
            target.flush()
            self._fd = _real_fileno(target)
        elif hasattr(target, "write"):
            self._file = target
        else:
            raise ConfigurationError(f"stdout must be None, a list or a writable file, not {target!r}")

    def write(self, line: str) -> None:
        if self.lines is not None:
            self.lines.append(line[:-1] if line.endswith("\n") else line)
        elif self._fd is not None:
            data = line.encode("utf-8")
            self._buffer.append(data)
            self._size += len(data)
            if self._size >= _READ_SIZE:
                self.flush()
        else:
            try:
                self._file.write(line)
            except TypeError:
                self._file.write(line.encode("utf-8"))

    def flush(self) -> None:
        try:
            if self._fd is not None and self._buffer:
                view = memoryview(b"".join(self._buffer))
                self._buffer.clear()
                self._size = 0
                while view:
                    view = view[os.write(self._fd, view) :]
            elif self._file is not None and hasattr(self._file, "flush"):
                self._file.flush()
        except BrokenPipeError:
            self._buffer.clear()
            raise StdoutClosedError("stdout closed by the next stage (broken pipe); stopping") from None


class StdioSubscription(Subscription):
    """Deliveries of one stream key from stdin (plus every line that names no key)."""

    def __init__(self, broker: StdioBroker, registration: Registration) -> None:
        super().__init__(broker, registration)
        self.queue: deque[Delivery] = deque()

    def poll(self) -> Delivery | NeedMore | None:
        while not self.queue:
            if self.ended:
                return None
            if not self.broker._pump():
                if self.broker.source_ended and not self.broker.loopback:
                    self._finish()
                    return None
                return NEED_MORE
        return self.queue.popleft()

    @property
    def exhausted(self) -> bool:
        """Stdin has ended and nothing is queued: under loopback only this process's own output
        could still arrive, so the app may stop once no delayed copy is pending."""
        return self.ended or (self.broker.source_ended and not self.queue and not self.broker.source.queued)

    def fileno(self) -> int | None:
        return self.broker.source.fileno()

    def _finish(self) -> None:
        if not self.ended:
            self.ended = True
            self.end_reason = "eof"
            logs.emit(logs.SUBSCRIBER, logging.DEBUG, logs.STREAM_ENDED, subscriber=self.name, reason="eof")


#: Upstream's refusal, word for word (spec §5.3, "Error text"); ``{subscription}`` and ``{source_type}``
#: are filled in.
_UPSTREAM_REFUSAL = (
    "subscription `{subscription}`: descriptor `{source_type}` declares `Copies = NamedCopies`, so it "
    "addresses no retry copies, and this registration names no destination for them. Name one at the "
    'mount site with `.out_retry(policy).to("name")`, or compose a publish transform declaring '
    "`Destination = Names` that names one per delivery"
)


def _refusal_message(subscription: str, key: str) -> str:
    """Why a pipe registration without ``out_retry`` cannot start, human first: what is missing and
    the one-line fix with the registration's own key, then upstream's sentence unchanged. One line,
    as the CLI prints it (``nbkit: ...``)."""
    return (
        f"subscription `{subscription}` reads a pipe but names no stream key for its retry copies "
        "(on a pipe they go to stdout, for the next stage). "
        f'Fix: add out_retry="{key}.retry" to @broker.subscriber("{key}", ...). '
        "Upstream says: " + _UPSTREAM_REFUSAL.format(subscription=subscription, source_type="StdioStream")
    )


class StdioBroker(Broker):
    """A broker over stdin/stdout (``producer | service | consumer``); streams are injectable.

    ``stdin`` takes None (the process's stdin), a string, a list of lines, or a file; ``stdout``
    takes None (the process's stdout), a list (lines are appended) or a file. ``loopback=True``
    feeds what this process writes back into its own stdin. Every registration must name
    ``out_retry``: a pipe's retry copies are lines written to stdout for the next stage.

    Parameters
    ----------
    stdin : None, str, list of str or file, optional
        Where lines come from.
    stdout : None, list or file, optional
        Where lines go.
    loopback : bool
        Feed this stage's own output back into its input.

    Examples
    --------
    >>> from nbkit import App, HandlerOutcome, Session, StdioBroker
    >>> out = []
    >>> broker = StdioBroker(stdin=["[2024-01-01T00:00:00 | jobs | 0] hello"], stdout=out)
    >>> @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
    ... def work(delivery):
    ...     return HandlerOutcome.retry()
    >>> _ = Session(App(broker)).run()
    >>> out[0].split("] ")[0]                     # the retry copy, a line for the next stage
    '[2024-01-01T00:00:00 | jobs.retry | 0'
    """

    transport = "pipe"

    def __init__(self, *, stdin: StdinSource = None, stdout: Any = None, loopback: bool = False) -> None:
        super().__init__()
        self._stdin_arg = stdin
        self._stdout_arg = stdout
        self.loopback = loopback
        self.source: LineSource | None = None
        self.sink = LineSink(stdout)
        self.decoder = LineDecoder()
        self.formatter = LineFormatter()
        self.subscriptions: list[StdioSubscription] = []
        self.source_ended = False
        self._valid_keys: set[str] = set()  # keys publish() has validated

    def __repr__(self) -> str:
        return "StdioBroker()"

    def _check_registration(self, registration: Registration) -> None:
        if registration.start_at is not None or registration.replay:
            raise ConfigurationError(
                f"subscription `{registration.name}`: a pipe has no retained log, so start_at and replay "
                "do not apply; remove them"
            )
        if registration.checkpoint is not None:
            raise ConfigurationError(
                f"subscription `{registration.name}`: a pipe has no positions to checkpoint; remove it"
            )

    def connect(self) -> list[Subscription]:
        """Refuse registrations without ``out_retry`` (spec §5.3), then open stdin.

        Returns
        -------
        list of Subscription
            One stdin subscription per registration.

        Raises
        ------
        RetryDestinationError
            If a registration names no ``out_retry``.
        """
        self._check_open()
        if self.connected:
            return list(self.subscriptions)
        for reg in self.registrations:
            if reg.out_retry is None:
                raise RetryDestinationError(_refusal_message(reg.name, reg.key))
        self.source = LineSource(self._stdin_arg)
        self.subscriptions = [StdioSubscription(self, r) for r in self.registrations]
        self.connected = True
        return list(self.subscriptions)

    def _pump(self) -> bool:
        """Read one line and route it; False when nothing was available."""
        item = self.source.poll()
        if item is None:
            self.source_ended = True
            return False
        if item is NEED_MORE:
            return False
        line, lineno = item
        resolved = self.decoder.decode(line, lineno=lineno, now_ms=int(round(self.clock.now() * 1000)))
        headers, payload = envelope.decode(resolved.payload.encode("utf-8"))
        for sub in self.subscriptions:
            if resolved.broadcast or sub.registration.key == resolved.stream_key:
                own = dict(headers)
                own[envelope.SEQUENCE_HEADER] = str(resolved.seq)
                sub.queue.append(
                    Delivery(
                        payload=payload,
                        headers=own,
                        stream_key=resolved.stream_key,
                        shard_id=resolved.shard_id,
                        seq=resolved.seq,
                        timestamp_ms=resolved.timestamp_ms,
                        transport="pipe",
                        subscription=sub.name,
                        line=lineno,
                    )
                )
        return True

    def feed(self, line: str) -> None:
        """Hand the stage one more stdin line, as if the producer upstream had just written it.

        Notebooks and tests use it to pace input; the app must have started.

        Parameters
        ----------
        line : str
            One line in the stdio format, ``[timestamp | key | seq] payload`` (or a bare payload).

        Returns
        -------
        None
        """
        if self.source is None:
            raise ConfigurationError("feed() needs a connected broker: start the app or session first")
        self.source.feed(line[:-1] if line.endswith("\n") else line)

    def publish(self, key: str, payload: bytes | str, headers: dict | None = None) -> Published:
        """Write one line to stdout under ``key``; binary, multi-line or padded payloads are enveloped.

        Parameters
        ----------
        key : str
            The stream key.
        payload : bytes or str
            The payload (str is encoded as UTF-8).
        headers : dict, optional
            Headers to send with it (in the rs1/rs2 envelope).

        Returns
        -------
        Published
            A named tuple: ``stream_key``, ``seq`` (the line's sequence), ``time``.
        """
        self._check_open()
        if type(key) is not str or key not in self._valid_keys:
            validate_key(key)
            self._valid_keys.add(key)
        data = as_payload(payload)
        if not data and not headers:
            raise InvalidArgumentError(
                "invalid descriptor: stdio drops empty lines; an empty message cannot be transmitted"
            )
        text = envelope.encode(headers or {}, data, force_text=True).decode("utf-8")
        now = self.clock.now()
        seq = self.formatter.next_seq(key)
        line = self.formatter.format(key, text, int(round(now * 1000)))
        self.sink.write(line)
        if self.loopback and self.source is not None:
            self.source.feed(line[:-1])
        return Published(key, seq, now)

    def reset(self) -> None:
        super().reset()
        self.source = None
        self.source_ended = False
        self.subscriptions = []
        if self.sink.lines is not None:
            self.sink.lines.clear()
        self.decoder = LineDecoder()
        self.formatter = LineFormatter()

    def retry_destination(self, registration: Registration) -> str:
        return registration.out_retry

    def flush(self) -> None:
        self.sink.flush()

    def shutdown(self) -> None:
        if self.closed:
            return
        for sub in self.subscriptions:
            sub.ended = True
        try:
            self.sink.flush()
        finally:
            self.closed = True
