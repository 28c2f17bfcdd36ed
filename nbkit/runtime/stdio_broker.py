"""The pipe transport: stdin lines are deliveries, published messages and retry copies are stdout lines."""

from __future__ import annotations

import dataclasses
import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

from nbkit.errors import (
    ConfigurationError,
    InvalidArgumentError,
    LineParseError,
    RetryDestinationError,
    StdoutClosedError,
    Utf8Error,
)
from nbkit.runtime import logs, run_log
from nbkit.runtime.broker import Broker, Published, Subscription, as_payload, new_published, registrator
from nbkit.runtime.delivery import Delivery, new_slotted
from nbkit.runtime.registration import Handler, PipeRegistration, check_key, common_options
from nbkit.transport.pipe_io import MAX_LINE_BYTES, UNREAD_WAIT, LineInput, LineOutput, LineSink, LineSource
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire.envelope import RETRY_COUNT_HEADER, retry_count_problem
from nbkit.wire.keys import validate_key
from nbkit.wire.stdio_line import LineDecoder, LineFormatter, line_delivery

__all__ = [
    "BAD_LINE_CHOICES",
    "PipeInputCounts",
    "StdioBroker",
    "StdioSubscription",
]


#: What ``on_bad_lines`` takes: stop at a bad line (upstream's reader panics there), log it and read on,
#: or read on with the line only counted (pandas' ``on_bad_lines`` names).
BAD_LINE_CHOICES = ("error", "warn", "skip")


class _Route(NamedTuple):
    """Where a stdin line for ``key`` goes: the subscription ``name``'s queue (``deliver`` appends to it)."""

    key: str
    name: str
    deliver: Callable[[Delivery], None]


@dataclasses.dataclass
class PipeInputCounts:
    """What became of the lines of a pipe stage's stdin (``nbkit run`` prints them in its summary).

    ``read`` counts every line read; of those, ``blank_skipped`` were blank lines skipped
    (``skip_blank_lines``), ``bad_skipped`` malformed or non-UTF-8 lines skipped (``on_bad_lines`` warn or
    skip), ``unsubscribed`` lines for a key no subscription reads, ``bad_retry_counts`` lines whose
    retry count could not be read (counted as 0). ``undelivered`` lines were read but never delivered
    (the stage was stopped at once); ``unread`` lines were never read (``unread_exact`` False: at least
    that many, a pipe's writer may have sent more since).
    """

    read: int = 0
    blank_skipped: int = 0
    bad_skipped: int = 0
    unsubscribed: int = 0
    bad_retry_counts: int = 0
    undelivered: int = 0
    unread: int = 0
    unread_exact: bool = True


class StdioSubscription(Subscription):
    """Deliveries of one stream key from stdin (plus every line that names no key)."""

    broker: StdioBroker
    registration: PipeRegistration

    scans_ahead = True  # ready(): the deliveries of the lines read already

    def __init__(self, broker: StdioBroker, registration: PipeRegistration, source: LineSource) -> None:
        super().__init__(broker, registration)
        self.source = source
        self.queue: deque[Delivery] = deque()

    def ready(self) -> Iterator[Delivery]:
        """The deliveries :meth:`poll` would return next without reading stdin: those queued, then those of the
        lines read already, each made as it is asked for (a settlement loop takes them one after another)."""
        if self.ended:
            return iter(())
        return self.broker._deliveries(self, read=False)

    def poll(self) -> Delivery | NeedMore | None:
        queue = self.queue
        if queue:
            return queue.popleft()
        if self.ended:
            return None
        delivery = self.broker._pump(self)
        if delivery is not None:
            return delivery
        if self.ended:  # (a stop ended it while lines were read)
            return None
        if self.broker.source_ended and not self.broker.loopback:
            self._finish()
            return None
        return NEED_MORE

    @property
    def exhausted(self) -> bool:
        """Stdin has ended and nothing is queued: under loopback only this process's own output
        could still arrive, so the app may stop once no delayed copy is pending."""
        return self.ended or (self.broker.source_ended and not self.queue and not self.source.queued)

    def fileno(self) -> int | None:
        """Stdin's descriptor while it is open (for ``select``), else None."""
        return self.source.fileno()

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


class StdioBroker(Broker[PipeRegistration]):
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
    skip_blank_lines : bool
        Skip empty and whitespace-only lines (by default each is a header-less message with that
        payload, delivered to every subscription, as upstream's reader makes them).
    strip_cr : bool
        Drop a ``\\r`` ending a line (CRLF input); by default it stays in the payload, as upstream.
    on_bad_lines : {"error", "warn", "skip"}
        A line whose ``[...]`` header is malformed or that is not UTF-8: ``error`` stops the stage there
        (the default, as upstream), ``warn`` logs it (WARNING, with its line number) and reads on,
        ``skip`` reads on and only counts it.
    max_line_bytes : int
        The longest stdin line taken, in bytes (default :data:`~nbkit.transport.pipe_io.MAX_LINE_BYTES`,
        16 MiB; 0: no bound). A longer line is a bad line (:class:`~nbkit.errors.LineParseError` naming
        it, handled as ``on_bad_lines`` says); no more than the bound of it is ever held in memory.

    See Also
    --------
    nbkit.FileBroker : The same registrations over a stream file.
    nbkit.App : Runs brokers until a signal, and shuts them down.
    nbkit.read_pipe : A stage's captured stdout as a DataFrame.
    nbkit.redrive_lines : Dead letters of a capture, as lines for the next stage.

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

    def __init__(
        self,
        *,
        stdin: LineInput = None,
        stdout: LineOutput = None,
        loopback: bool = False,
        skip_blank_lines: bool = False,
        strip_cr: bool = False,
        on_bad_lines: str = "error",
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        super().__init__()
        self.skip_blank_lines = False
        self.strip_cr = False
        self.on_bad_lines = "error"
        self.max_line_bytes = MAX_LINE_BYTES
        self.source: LineSource | None = None
        self.configure_input(
            skip_blank_lines=skip_blank_lines,
            strip_cr=strip_cr,
            on_bad_lines=on_bad_lines,
            max_line_bytes=max_line_bytes,
        )
        self.counts = PipeInputCounts()
        self._unread_counted = False
        self._stdin_arg = stdin
        self._stdout_arg = stdout
        self.loopback = loopback
        self.sink = self._new_sink(stdout)
        self.decoder = LineDecoder()
        self.formatter = LineFormatter()
        self.subscriptions: list[StdioSubscription] = []
        #: per subscription, where ``_pump`` routes a line
        self._routes: list[_Route] = []
        self.source_ended = False
        self._valid_keys: set[str] = set()  # keys publish() has validated

    def __repr__(self) -> str:
        return "StdioBroker()"

    def _new_sink(self, stdout: LineOutput) -> LineSink:
        sink = LineSink(stdout)
        sink.before_flush = run_log.flush_run_logs  # a log line never comes after stdout written later
        sink.on_closed = self._output_gone
        return sink

    def use_streams(self, stdin: LineInput, stdout: LineOutput) -> Callable[[], None]:
        """Read ``stdin`` and write ``stdout`` instead of the streams given to the constructor, until the
        function returned is called (it puts those back). Only while the broker is not connected.

        A test kit runs a service's own broker in memory with it (:class:`nbkit.testing.TestApp`): the
        handlers publish through this very broker object, so it is the one whose streams must change.

        Parameters
        ----------
        stdin : None, str, list of str or file
            Where lines come from (as the constructor's ``stdin``).
        stdout : None, list or file
            Where lines go (as the constructor's ``stdout``).

        Returns
        -------
        callable
            Call it (the broker not connected) to read and write the streams used before again.

        Raises
        ------
        ConfigurationError
            If the broker is connected (an app has started it and not been reset).

        Examples
        --------
        >>> from nbkit import StdioBroker
        >>> broker = StdioBroker()                      # the process's stdin and stdout
        >>> lines = []
        >>> restore = broker.use_streams(["[jobs] a"], lines)
        >>> _ = broker.publish("jobs.done", "a")
        >>> lines[0].endswith("| jobs.done | 0] a"), restore()
        (True, None)
        """
        if self.connected:
            raise ConfigurationError("use_streams() is for a broker that is not connected: reset() it first")
        before = self._stdin_arg, self._stdout_arg, self.sink
        self._stdin_arg, self._stdout_arg = stdin, stdout
        self.sink = self._new_sink(stdout)

        def restore() -> None:
            if self.connected:
                raise ConfigurationError("the streams are put back on a broker that is not connected: reset() it first")
            self._stdin_arg, self._stdout_arg, self.sink = before

        return restore

    def configure_input(
        self,
        *,
        skip_blank_lines: bool | None = None,
        strip_cr: bool | None = None,
        on_bad_lines: str | None = None,
        max_line_bytes: int | None = None,
    ) -> None:
        """Set how stdin lines are read (``nbkit run``'s ``--skip-blank-lines``, ``--strip-cr``,
        ``--on-bad-lines``, ``--max-line-bytes``); an option left None keeps its value. See the class for
        each; the line bound is set before the app starts.

        Parameters
        ----------
        skip_blank_lines : bool, optional
            Skip empty and whitespace-only lines.
        strip_cr : bool, optional
            Drop a ``\\r`` ending a line.
        on_bad_lines : {"error", "warn", "skip"}, optional
            What a malformed, non-UTF-8 or too long line does.
        max_line_bytes : int, optional
            The longest line taken, in bytes (0: no bound).

        Raises
        ------
        ConfigurationError
            If ``on_bad_lines`` is not one of those, ``max_line_bytes`` is not a number of bytes, or it is
            changed after stdin was opened.
        """
        if max_line_bytes is not None:
            if isinstance(max_line_bytes, bool) or not isinstance(max_line_bytes, int) or max_line_bytes < 0:
                raise ConfigurationError(
                    f"max_line_bytes must be a whole number of bytes >= 0 (0: no bound), not {max_line_bytes!r}"
                )
            if self.source is not None and max_line_bytes != self.max_line_bytes:
                raise ConfigurationError("max_line_bytes is set before the app starts (stdin is open already)")
            self.max_line_bytes = max_line_bytes
        if on_bad_lines is not None:
            if on_bad_lines not in BAD_LINE_CHOICES:
                raise ConfigurationError(
                    f"on_bad_lines must be one of {', '.join(BAD_LINE_CHOICES)}, not {on_bad_lines!r}"
                )
            self.on_bad_lines = on_bad_lines
        if skip_blank_lines is not None:
            self.skip_blank_lines = bool(skip_blank_lines)
        if strip_cr is not None:
            self.strip_cr = bool(strip_cr)
        self._cleans = self.skip_blank_lines or self.strip_cr

    @registrator
    def subscriber(
        self,
        key: str,
        *,
        name: str | None = None,
        max_attempts: int | None = None,
        dead_letter: str | None = None,
        out_retry: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of stream ``key`` on stdin; returns it unchanged.

        Options are checked here, when the decorator is made; an option of the file transport
        (``replay``, ``start_at``, ``checkpoint``: a pipe keeps no log and has no positions) is refused
        with a message saying so. ``out_retry`` is required before the app starts (spec §5.3).

        Parameters
        ----------
        key : str
            The stream key to subscribe to (lines naming no key reach every subscription).
        name : str, optional
            The registration's name in events and logs (default: the key).
        max_attempts : int, optional
            The cap on attempts, counting the first delivery.
        dead_letter : str, optional
            The key spent deliveries are written under.
        out_retry : str
            The key retry copies are written to stdout under, for the next stage.

        Returns
        -------
        callable
            A decorator that registers the handler and returns it unchanged.

        Raises
        ------
        ConfigurationError
            If an option is not one of these, or its value is not valid.

        Examples
        --------
        >>> from nbkit import HandlerOutcome, StdioBroker
        >>> broker = StdioBroker(stdin=[], stdout=[])
        >>> @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=3)
        ... def work(delivery):
        ...     return HandlerOutcome.retry_after(5)
        >>> broker.registrations[0].out_retry
        'jobs.retry'
        """
        common = common_options(key, name=name, max_attempts=max_attempts, dead_letter=dead_letter)
        if out_retry is not None:
            check_key(out_retry, "out_retry key")

        return self._decorator(lambda handler: PipeRegistration(**common, handler=handler, out_retry=out_retry))

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
        self.source = source = LineSource(self._stdin_arg, max_line_bytes=self.max_line_bytes)
        self.subscriptions = subs = [StdioSubscription(self, r, source) for r in self.registrations]
        self._routes = [_Route(sub.registration.key, sub.name, sub.queue.append) for sub in subs]
        self.connected = True
        return list(self.subscriptions)

    def _pump(self, sub: StdioSubscription) -> Delivery | None:
        """The next delivery for ``sub``: read lines, queueing each line's delivery for every subscription it is
        for, until ``sub`` has one; None when no line is there now (or stdin has ended: ``source_ended``)."""
        return next(self._deliveries(sub, read=True), None)

    def _deliveries(self, sub: StdioSubscription, *, read: bool) -> Iterator[Delivery]:
        """``sub``'s deliveries, each made when it is asked for: from its queue, then from the lines read already
        (:meth:`LineSource.ready`), and with ``read`` from what stdin has now (never waiting); each line's delivery
        is queued for every other subscription it is for. With one subscription, a line for it is not queued:
        its delivery is handed out at once. The one place a stdin line becomes deliveries."""
        source = self.source
        if source is None:
            return
        queue = sub.queue
        routes = self._routes
        sole_key, sole_name = (routes[0].key, routes[0].name) if len(routes) == 1 else (None, "")
        counters = self.decoder.counters
        lines = source.ready()
        while not sub.ended:
            if queue:
                yield queue.popleft()
                continue
            line = next(lines, None)
            if line is None:  # none read already: read stdin (or stop here)
                if not read:
                    return
                try:
                    polled = source.poll()
                except (Utf8Error, LineParseError) as exc:  # not UTF-8, or over the line bound
                    self._bad_line(exc)
                    continue
                if polled is None:
                    self.source_ended = True
                    return
                if polled is NEED_MORE:
                    return
                line = polled
                lines = source.ready()  # the rest of this read
            if self._cleans:
                if self.strip_cr and line.endswith("\r"):
                    line = line[:-1]
                if self.skip_blank_lines and (not line or line.isspace()):
                    self.counts.blank_skipped += 1
                    continue
            lineno = source.lineno
            # parse, resolve, envelope (compiled twin: one call per line)
            try:
                timestamp_ms, key, seq, shard_id, payload, headers, broadcast = line_delivery(line, lineno, counters)
            except LineParseError as exc:
                self._bad_line(exc)
                continue
            if RETRY_COUNT_HEADER in headers:
                self._check_retry_count(headers[RETRY_COUNT_HEADER], lineno)
            if timestamp_ms is None:  # the line carries no time: the time it was read
                timestamp_ms = int(round(self.clock.now() * 1000))
            if sole_key is not None and (broadcast or sole_key == key):  # one subscription: its own headers dict
                yield new_slotted(
                    Delivery, (payload, headers, key, shard_id, seq, timestamp_ms, "pipe", sole_name, None, lineno)
                )
                continue
            first = True
            for route in routes:
                if broadcast or route.key == key:
                    # each delivery has its own headers: the first takes the decoded dict, the others a copy
                    route.deliver(
                        new_slotted(
                            Delivery,
                            (
                                payload,
                                headers if first else dict(headers),
                                key,
                                shard_id,
                                seq,
                                timestamp_ms,
                                "pipe",
                                route.name,
                                None,
                                lineno,
                            ),
                        )
                    )
                    first = False
            if first:  # no subscription reads this key
                self.counts.unsubscribed += 1
                logs.emit(logs.SUBSCRIBER, logging.DEBUG, logs.UNSUBSCRIBED_LINE, line=lineno, stream_key=key)

    def _bad_line(self, exc: LineParseError | Utf8Error) -> None:
        """A malformed or non-UTF-8 line: stop there (``on_bad_lines="error"``: the lines not read yet are
        counted, and the error raised), or count it (and log it, for ``"warn"``) and read on."""
        if self.on_bad_lines == "error":
            self.count_unread(buffered_as_unread=True)  # the lines after it: never read, as upstream
            raise exc
        self.counts.bad_skipped += 1
        if self.on_bad_lines == "warn":
            logs.emit(logs.SUBSCRIBER, logging.WARNING, logs.BAD_LINE_SKIPPED, line=exc.line, error=exc)

    def _check_retry_count(self, raw: str, lineno: int) -> None:
        """Log (WARNING, once for the line) a retry count that reads as 0 although it is not "0"."""
        problem = retry_count_problem(raw)
        if problem is not None:
            self.counts.bad_retry_counts += 1
            logs.emit(logs.SUBSCRIBER, logging.WARNING, logs.BAD_RETRY_COUNT, line=lineno, value=raw, problem=problem)

    def stop_input(self, *, drain: bool | None = None) -> bool:
        """A graceful stop began: read on until stdin's writer closes it (``drain``), or stop reading.

        By default (``drain=None``) a stage whose stdin is a pipe drains it: the whole pipeline got the
        signal, and the stage before may still write the delayed copies it is waiting out; it closes the
        pipe when it is done. A stage reading a terminal, a file or lines given in Python stops reading,
        and delivers the lines it has read already. See the guide's shutdown page.

        Parameters
        ----------
        drain : bool, optional
            Read on until the writer closes stdin (None: when stdin is a pipe).

        Returns
        -------
        bool
            Whether the broker reads on.
        """
        source = self.source
        if source is None or self.source_ended:
            return False
        if drain is None:
            drain = source.is_pipe and not self.loopback
        if not drain:
            source.stop_reading()
        return drain

    def count_unread(self, *, buffered_as_unread: bool = False, wait_for_end: bool = False) -> int:
        """Stop reading and count what is left: ``counts.undelivered`` (read, never delivered) and
        ``counts.unread`` (never read). Called when the stage stops before its input ends.

        Parameters
        ----------
        buffered_as_unread : bool
            Count the lines read ahead (in memory, not parsed yet) as unread, not undelivered (a bad line
            stops the stage: what follows it counts as never read).
        wait_for_end : bool
            Wait up to :data:`~nbkit.transport.pipe_io.UNREAD_WAIT` seconds for a pipe's writer to close it,
            so the lines never read are counted exactly (a stop by a signal; not a broken pipe).

        Returns
        -------
        int
            The lines read and never delivered (now dropped).
        """
        source = self.source
        counts = self.counts
        undelivered = 0
        if source is not None and not self._unread_counted:
            self._unread_counted = True
            source.stop_reading()
            undelivered = source.buffered + sum(len(sub.queue) for sub in self.subscriptions)
            if buffered_as_unread:
                counts.unread += source.drop_buffered()
                undelivered = 0
            if undelivered:
                counts.undelivered += undelivered
                source.drop_buffered()
                for sub in self.subscriptions:
                    sub.queue.clear()
            unread, exact = source.count_unread(UNREAD_WAIT if wait_for_end else 0.0)
            counts.unread += unread
            counts.unread_exact = counts.unread_exact and exact
        return undelivered

    def input_counts(self) -> dict[str, int | bool]:
        """What became of stdin's lines so far (:class:`PipeInputCounts` as a dict).

        Returns
        -------
        dict
        """
        if self.source is not None:
            self.counts.read = self.source.lineno + self.counts.undelivered  # (those were read, then dropped)
        return dataclasses.asdict(self.counts)

    def output_counts(self) -> tuple[int, int]:
        """Lines written to stdout, and lines lost there after its reader left.

        Returns
        -------
        tuple of (int, int)
        """
        return self.sink.written, self.sink.lost

    @property
    def output_closed(self) -> bool:
        """Whether stdout's reader has left (a broken pipe): nothing more can be written."""
        return self.sink.closed

    def _output_gone(self, exc: StdoutClosedError) -> None:
        """The sink found the pipe closed downstream: the app stops at once."""
        if self.on_output_closed is not None:
            self.on_output_closed(self)

    def feed(self, line: str) -> None:
        """Hand the stage one more stdin line, as if the producer upstream had just written it.

        Notebooks and tests use it to pace input; the app must have started, and its input must not have
        ended: a line fed after every subscription has ended would never be read, so it is refused.

        Parameters
        ----------
        line : str
            One line in the stdio format, ``[timestamp | key | seq] payload`` (or a bare payload).

        Raises
        ------
        ConfigurationError
            Before the app started (nothing reads stdin yet), or after its input ended (nothing will read it).
        """
        if self.source is None:
            raise ConfigurationError("feed() needs a connected broker: start the app or session first")
        if self.subscriptions and all(sub.ended for sub in self.subscriptions):
            reasons = sorted({sub.end_reason or "ended" for sub in self.subscriptions})
            raise ConfigurationError(
                f"feed() after the input ended ({', '.join(reasons)}): no subscription reads stdin any more, "
                "so the line would be lost; feed lines before the input runs out (with loopback=True the stage "
                "reads on past the end of stdin)"
            )
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
        if self.closed:
            self._check_open()
        if type(key) is not str or key not in self._valid_keys:
            validate_key(key)
            self._valid_keys.add(key)
        data = payload if type(payload) is bytes else as_payload(payload)
        if not data and not headers:
            raise InvalidArgumentError(
                "invalid descriptor: stdio drops empty lines; an empty message cannot be transmitted "
                f"(publish({key!r}, b'') on a pipe: a blank stdin line is delivered with an empty payload; "
                "skip blank lines with StdioBroker(skip_blank_lines=True) or nbkit run --skip-blank-lines, "
                "or check the payload before forwarding it)"
            )
        return self.write_copy(key, data, headers, self.clock.now())

    def write_copy(self, key: str, payload: bytes, headers: dict[str, str] | None, now: float) -> Published:
        """Write one line to stdout under ``key`` at ``now``: :meth:`publish` after its checks (the key valid, the
        payload bytes, not empty or with headers), and how a settlement writes a delivery's copy.

        Parameters
        ----------
        key : str
            The stream key (valid).
        payload : bytes
            The payload.
        headers : dict, optional
            Headers to send with it (in the rs1/rs2 envelope).
        now : float
            The line's time (epoch seconds; its timestamp is in milliseconds).

        Returns
        -------
        Published
            A named tuple: ``stream_key``, ``seq`` (the line's sequence), ``time`` (``now``).
        """
        if self.closed:
            self._check_open()
        # round(now * 1000), without round()'s look-up of __round__ (half the time of it, per line)
        seq, line = self.formatter.copy(key, headers, payload, (now * 1000).__round__())  # the rs1/rs2 envelope's line
        self.sink.write(line)
        if self.loopback and self.source is not None:
            self.source.feed(line[:-1])
        return new_published((key, seq, now))

    def reset(self) -> None:
        """Back to the configured, unconnected state: stdin is opened again, sequences start again at 0."""
        super().reset()
        self.source = None
        self.source_ended = False
        self.subscriptions = []
        self._routes = []
        if self.sink.lines is not None:
            self.sink.lines.clear()
        self.decoder = LineDecoder()
        self.formatter = LineFormatter()
        self.counts = PipeInputCounts()
        self._unread_counted = False

    def flush(self) -> None:
        """Write out the buffered stdout lines."""
        self.sink.flush()

    def shutdown(self) -> None:
        """End the subscriptions and write out what is buffered; nothing can be published afterwards."""
        if self.closed:
            return
        for sub in self.subscriptions:
            sub.ended = True
        try:
            self.sink.flush()
        finally:
            self.closed = True
