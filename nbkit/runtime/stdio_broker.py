"""The pipe transport: stdin lines are deliveries, published messages and retry copies are stdout lines."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from nbkit.errors import ConfigurationError, InvalidArgumentError, RetryDestinationError
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker, Published, Subscription, as_payload, new_published, registrator
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.registration import Handler, PipeRegistration, check_key, common_options
from nbkit.transport.pipe_io import LineInput, LineOutput, LineSink, LineSource
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire.keys import validate_key
from nbkit.wire.stdio_line import LineDecoder, LineFormatter, line_delivery


class StdioSubscription(Subscription):
    """Deliveries of one stream key from stdin (plus every line that names no key)."""

    broker: StdioBroker
    registration: PipeRegistration

    def __init__(self, broker: StdioBroker, registration: PipeRegistration, source: LineSource) -> None:
        super().__init__(broker, registration)
        self.source = source
        self.queue: deque[Delivery] = deque()

    def poll(self) -> Delivery | NeedMore | None:
        queue = self.queue
        while not queue:
            if self.ended:
                return None
            pumped = self.broker._pump()
            if pumped is True:
                continue
            if pumped is False:
                if self.broker.source_ended and not self.broker.loopback:
                    self._finish()
                    return None
                return NEED_MORE
            return pumped  # the line's one delivery, for this, the broker's one subscription
        return queue.popleft()

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

    def __init__(self, *, stdin: LineInput = None, stdout: LineOutput = None, loopback: bool = False) -> None:
        super().__init__()
        self._stdin_arg = stdin
        self._stdout_arg = stdout
        self.loopback = loopback
        self.source: LineSource | None = None
        self.sink = LineSink(stdout)
        self.sink.before_flush = logs.flush_run_logs  # a log line never comes after stdout written later
        self.decoder = LineDecoder()
        self.formatter = LineFormatter()
        self.subscriptions: list[StdioSubscription] = []
        #: (key, subscription name, its queue's append) per subscription: where ``_pump`` routes a line
        self._routes: list[tuple[str, str, Callable[[Delivery], None]]] = []
        self.source_ended = False
        self._valid_keys: set[str] = set()  # keys publish() has validated

    def __repr__(self) -> str:
        return "StdioBroker()"

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
        self.source = source = LineSource(self._stdin_arg)
        self.subscriptions = subs = [StdioSubscription(self, r, source) for r in self.registrations]
        self._routes = [(sub.registration.key, sub.name, sub.queue.append) for sub in subs]
        self.connected = True
        return list(self.subscriptions)

    def _pump(self) -> Delivery | bool:
        """Read one line and queue its delivery for each subscription it is for; False when none was there.

        With one subscription, a line for it is not queued: its delivery is returned (to that subscription's
        :meth:`~StdioSubscription.poll`, the only caller then)."""
        source = self.source
        if source is None:
            return False
        line = source.poll()
        if line is None:
            self.source_ended = True
            return False
        if line is NEED_MORE:
            return False
        lineno = source.lineno
        # parse, resolve, envelope (compiled twin: one call per line)
        timestamp_ms, key, seq, shard, payload, headers, broadcast = line_delivery(line, lineno, self.decoder.counters)
        if timestamp_ms is None:  # the line carries no time: the time it was read
            timestamp_ms = int(round(self.clock.now() * 1000))
        routes = self._routes
        if len(routes) == 1 and (broadcast or routes[0][0] == key):  # one subscription: its own headers dict
            return Delivery(payload, headers, key, shard, seq, timestamp_ms, "pipe", routes[0][1], None, lineno)
        first = True
        for wanted, name, deliver in routes:
            if broadcast or wanted == key:
                # each delivery has its own headers: the first takes the decoded dict, the others a copy
                deliver(
                    Delivery(
                        payload,
                        headers if first else dict(headers),
                        key,
                        shard,
                        seq,
                        timestamp_ms,
                        "pipe",
                        name,
                        None,
                        lineno,
                    )
                )
                first = False
        return True

    def feed(self, line: str) -> None:
        """Hand the stage one more stdin line, as if the producer upstream had just written it.

        Notebooks and tests use it to pace input; the app must have started.

        Parameters
        ----------
        line : str
            One line in the stdio format, ``[timestamp | key | seq] payload`` (or a bare payload).
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
        if self.closed:
            self._check_open()
        if type(key) is not str or key not in self._valid_keys:
            validate_key(key)
            self._valid_keys.add(key)
        data = payload if type(payload) is bytes else as_payload(payload)
        if not data and not headers:
            raise InvalidArgumentError(
                "invalid descriptor: stdio drops empty lines; an empty message cannot be transmitted"
            )
        now = self.clock.now()
        seq, line = self.formatter.copy(key, headers, data, int(round(now * 1000)))  # the rs1/rs2 envelope's line
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
