"""Run a service's own app in memory on a virtual clock, publish to it, and check what it did.

:class:`TestApp` is nbkit's test client, in the manner of FastStream's ``TestBroker`` and ruststream's
``TestApp``: the app's own brokers are connected in process (a pipe's stdin and stdout become memory,
a stream file a temporary file), every handler is wrapped in a call record, and time moves only with
:meth:`TestApp.advance`. Settling is the real runtime's (the same :class:`~nbkit.App` engine ``nbkit
run`` drives), so retries, attempts, the cap, dead letters and ``out_retry`` behave as in production.
On exit the brokers get their own streams, files and handlers back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import IO, Any

from nbkit.errors import ConfigurationError, InvalidArgumentError
from nbkit.runtime import logs
from nbkit.runtime.app import App
from nbkit.runtime.broker import Broker, Published, as_payload
from nbkit.runtime.clock import VirtualClock, utc
from nbkit.runtime.delayed import PendingCopy
from nbkit.runtime.events import SettlementEvent
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.position_store import PositionStore
from nbkit.runtime.registration import Registration
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.testing.calls import HandlerCalls
from nbkit.testing.published import PublishedMessage, file_messages, pipe_messages, published_report
from nbkit.wire.keys import validate_key
from nbkit.wire.stdio_line import LineFormatter

__all__ = [
    "MAX_DELIVERIES",
    "TestApp",
]

#: Deliveries one call of :meth:`TestApp.run_until_idle` or :meth:`TestApp.advance` makes before it
#: fails the test (a handler that always retries without ``max_attempts`` circulates on a file for ever).
MAX_DELIVERIES = 10_000


class _Redirected:
    """One broker's test streams or file, and how to give the broker its own back."""

    def __init__(self, broker: Broker[Any], folder: str, files: dict[str, str]) -> None:
        self.broker = broker
        self.lines: list[str] = []  # a pipe's stdout
        self.formatter = LineFormatter()  # numbers the lines the test publishes on a pipe, per key from 0
        self.injected: list[tuple[str, int]] = []  # (key, seq) the test published on a file
        self._stdin: tuple[IO[bytes], int] | None = None
        self._restore: Callable[[], None] = lambda: None
        if isinstance(broker, FileBroker):
            own = broker.path
            # brokers sharing a file share its stand-in (their appends interleave in it, as in the real one)
            name = f"{len(files)}-{os.path.basename(own) or 'stream.ss'}"
            broker.path = files.setdefault(os.path.abspath(own), os.path.join(folder, name))

            def restore_path() -> None:
                broker.path = own

            self._restore = restore_path
        elif isinstance(broker, StdioBroker):
            # stdin is a pipe nobody writes: it stays open (nothing ends the input) while the test feeds lines
            read, write = os.pipe()
            reader = os.fdopen(read, "rb", buffering=0)
            self._stdin = reader, write
            self._restore = broker.use_streams(reader, self.lines)
        else:  # pragma: no cover (the two transports are the brokers there are)
            raise ConfigurationError(f"TestApp runs FileBroker and StdioBroker brokers, not {broker!r}")

    def messages(self, every: list[_Redirected]) -> list[PublishedMessage]:
        """What the app wrote on this broker, in order (what the test published, on any of ``every``
        broker sharing the file, left out)."""
        broker = self.broker
        if isinstance(broker, StdioBroker):
            return pipe_messages(self.lines)
        assert isinstance(broker, FileBroker)
        if not os.path.exists(broker.path):
            return []
        sharing = [r for r in every if isinstance(r.broker, FileBroker) and r.broker.path == broker.path]
        return file_messages(broker.path, skip=[key_seq for r in sharing for key_seq in r.injected])

    def give_back(self) -> None:
        """The broker's own file or streams again; the test's stdin pipe closed."""
        if self._stdin is not None:
            reader, write = self._stdin
            os.close(write)
            reader.close()
            self._stdin = None
        self._restore()


class TestApp:
    """Run an app in memory on a virtual clock, publish to it, and check what its handlers did and wrote.

    Use it as a context manager (``with``, or ``async with`` for async handlers in a running event loop).
    It runs the app's own brokers: a :class:`~nbkit.StdioBroker` reads lines the test publishes and
    writes to memory, a :class:`~nbkit.FileBroker` uses a temporary file; each registration's handler is
    wrapped in a :class:`~nbkit.testing.HandlerCalls` record. Nothing is delivered until
    :meth:`run_until_idle` or :meth:`advance`, and the clock moves only with :meth:`advance`. The runtime
    that settles is the one ``nbkit run`` drives, so retries, the cap, dead letters and ``out_retry``
    behave as they do there. Leaving the block shuts the app down as ``nbkit run`` does at the end of its
    input (the delayed copies still pending are written at their due times, on the virtual clock), then
    gives the brokers their own streams, file and handlers back, so the same module-level app can be
    tested again. What was recorded stays readable.

    Parameters
    ----------
    app : App or broker
        The service's app (as ``nbkit run MODULE:APP`` takes it), or one broker; it is not started itself:
        a fresh :class:`~nbkit.App` runs its brokers with its ``shutdown_timeout`` and ``max_pending``.
    clock : VirtualClock, optional
        The clock the app runs on (default: a new one at 2024-01-01T00:00:00Z); only :meth:`advance` moves it.
    max_deliveries : int
        How many deliveries one :meth:`run_until_idle` or :meth:`advance` may make before it fails the test.

    See Also
    --------
    nbkit.Session : The same engine stepped cell by cell in a notebook.

    Examples
    --------
    >>> from nbkit import App, HandlerOutcome, StdioBroker
    >>> from nbkit.testing import TestApp
    >>> broker = StdioBroker()
    >>> @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
    ... def work(delivery):
    ...     return HandlerOutcome.retry_after(5)
    >>> with TestApp(App(broker)) as test:
    ...     _ = test.publish("jobs", {"id": 1})
    ...     _ = test.run_until_idle()
    ...     test.handler(work).assert_called_once_with({"id": 1})
    ...     _ = test.advance(5)                       # the copy falls due: a line under jobs.retry
    ...     copy = test.expect_published("jobs.retry", 1)[0]
    >>> copy.json(), copy.retry_count
    ({'id': 1}, 1)
    """

    __test__ = False  # not a test class, whatever its name (pytest collects classes named Test*)

    def __init__(
        self,
        app: App | Broker[Any],
        *,
        clock: VirtualClock | None = None,
        max_deliveries: int = MAX_DELIVERIES,
    ) -> None:
        if isinstance(app, Broker):
            app = App(app)
        if not isinstance(app, App):
            raise ConfigurationError(f"TestApp takes an nbkit.App (or a broker), not {app!r}")
        if isinstance(max_deliveries, bool) or not isinstance(max_deliveries, int) or max_deliveries < 1:
            raise ConfigurationError(f"max_deliveries must be a whole number >= 1, not {max_deliveries!r}")
        self.source = app
        if clock is not None and not isinstance(clock, VirtualClock):
            raise ConfigurationError(f"TestApp runs on a VirtualClock (time moves only with advance()), not {clock!r}")
        #: The virtual clock the app runs on.
        self.clock = clock if clock is not None else VirtualClock()
        self.max_deliveries = max_deliveries
        #: The runtime's log lines (INFO and up), oldest first, as ``nbkit run`` prints them.
        self.log: list[str] = []
        self.app: App | None = None
        self._records: dict[tuple[int, str], HandlerCalls] = {}
        self._redirected: list[_Redirected] = []
        self._own: list[tuple[Broker[Any], list[Any]]] = []
        self._folder: str | None = None
        self._capture: contextlib.ExitStack | None = None
        self._final: dict[str, list[PublishedMessage]] | None = None
        self._events: list[SettlementEvent] = []

    def __repr__(self) -> str:
        state = "running" if self.running else ("closed" if self._final is not None else "not started")
        return f"TestApp({state}, {len(self._events)} settled, clock {self.now.isoformat()})"

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the app is started and not closed."""
        return self.app is not None and not self.app.stopped

    def start(self) -> TestApp:
        """Redirect the brokers, wrap the handlers and start the app (what entering the block does).

        Returns
        -------
        TestApp
            This test app.
        """
        if self.app is not None:
            raise ConfigurationError("a TestApp starts once: make a new one for the next test")
        self._folder = tempfile.mkdtemp(prefix="nbkit-test-")
        self._capture = stack = contextlib.ExitStack()
        stack.enter_context(logs.capture_lines(self.log))
        try:
            brokers = self.source.brokers
            files: dict[str, str] = {}  # a service file's path -> its stand-in in the test's folder
            for n, broker in enumerate(brokers):
                if broker.connected or broker.closed:
                    broker.reset()  # (an app that ran before: its registrations open again)
                self._redirected.append(_Redirected(broker, self._folder, files))
                self._own.append((broker, list(broker.registrations)))
                broker.registrations[:] = [self._wrap(n, reg) for reg in broker.registrations]
            self.app = App(
                *brokers,
                shutdown_timeout=self.source.shutdown_timeout,
                clock=self.clock,
                keep_events=None,
                max_pending=self.source.max_pending,
            )
            self.app.start()
        except BaseException:
            self._final = {}  # nothing to shut down or read back: close() does nothing
            self._give_back()
            raise
        return self

    def _wrap(self, n: int, reg: Registration) -> Registration:
        """The registration with its handler recorded and its checkpoint (if any) in the test's folder."""
        record = HandlerCalls(reg)
        self._records[(n, reg.name)] = record
        changes: dict[str, Any] = {"handler": record.wrapper}
        if reg.checkpoint is not None:
            assert self._folder is not None
            changes["checkpoint"] = PositionStore(os.path.join(self._folder, f"{n}-{reg.name}.positions.json"))
        return dataclasses.replace(reg, **changes)

    def close(self) -> None:
        """Shut the app down as ``nbkit run`` does at the end of its input, then give the brokers back.

        Delayed copies still pending are written at their due times (the virtual clock jumps there), within
        the app's ``shutdown_timeout``. What was published, the events, the log and the calls stay readable.
        """
        if self.app is None or self._final is not None:
            return
        try:
            if not self.app.stopped:
                self.app.shutdown()
        finally:
            try:
                self._final = self._published_now()
                self._events = list(self.app.events)
            finally:
                self._give_back()

    def _give_back(self) -> None:
        for broker, registrations in self._own:
            broker.registrations[:] = registrations
        for redirected in self._redirected:
            redirected.lines = list(redirected.lines)  # kept: resetting the broker clears its sink's list
            if redirected.broker.connected or redirected.broker.closed:
                redirected.broker.reset()
            redirected.give_back()
        self._own = []
        if self._capture is not None:
            self._capture.close()
            self._capture = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> TestApp:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> TestApp:
        return self.start()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _running(self) -> App:
        if self.app is None:
            raise ConfigurationError("the TestApp is not started: use it as `with TestApp(app) as test:`")
        if self._final is not None:
            raise ConfigurationError("the TestApp is closed: publish and deliver inside its `with` block")
        return self.app

    # -- publishing --------------------------------------------------------------------------------
    def publish(self, key: str, payload: bytes | str | Any, headers: Mapping[str, Any] | None = None) -> Published:
        """Put one message on the transport of the broker that reads ``key``, as a producer would.

        On a pipe it is a stdin line (``[ts | key | seq] payload``, the envelope as a producer writes it),
        on a file an appended message. Nothing is delivered yet: :meth:`run_until_idle` delivers.

        Parameters
        ----------
        key : str
            The stream key.
        payload : bytes, str or a JSON value
            The payload; a dict, list or number is written as JSON.
        headers : dict, optional
            Headers sent with it (``{"x-ruststream-retry-count": "2"}`` makes it arrive as attempt 3).

        Returns
        -------
        Published
            ``stream_key``, ``seq`` and ``time`` of the message written.
        """
        self._running()
        if not isinstance(payload, (bytes, bytearray, memoryview, str)):
            payload = json.dumps(payload)
        data = as_payload(payload)
        redirected = self._broker_for(key)
        broker = redirected.broker
        head = dict(headers) if headers else None
        if isinstance(broker, FileBroker):
            published = broker.publish(key, data, head)
            redirected.injected.append((key, published.seq))
            return published
        assert isinstance(broker, StdioBroker)
        validate_key(key)
        if not data and not head:
            raise InvalidArgumentError(
                f"publish({key!r}, b''): a pipe drops empty lines; an empty message cannot be sent"
            )
        now = self.clock.now()
        seq, line = redirected.formatter.copy(key, head, data, int(round(now * 1000)))
        broker.feed(line)
        return Published(key, seq, now)

    def _broker_for(self, key: str) -> _Redirected:
        """The broker a test message for ``key`` goes to: the one with a subscription to it (or the only one)."""
        readers = [r for r in self._redirected if any(reg.key == key for reg in r.broker.registrations)]
        if len(readers) == 1 or len(self._redirected) == 1:
            return (readers or self._redirected)[0]
        keys = sorted({reg.key for r in self._redirected for reg in r.broker.registrations})
        if not readers:
            raise ConfigurationError(f"no broker of the app subscribes to {key!r} (subscribed: {', '.join(keys)})")
        raise ConfigurationError(f"more than one broker subscribes to {key!r}; publish on the broker itself")

    # -- delivering --------------------------------------------------------------------------------
    def run_until_idle(self) -> list[SettlementEvent]:
        """Deliver and settle every message that is ready now; the clock does not move.

        Delayed copies wait for :meth:`advance`. An async handler runs on the app's own event loop: inside
        a running loop (an ``async def`` test), ``await test.arun_until_idle()`` instead.

        Returns
        -------
        list of SettlementEvent
            The settlements made, in order.
        """
        app = self._running()
        out: list[SettlementEvent] = []
        while (event := app.step()) is not None:
            out.append(event)
            self._check_limit(out)
        return out

    async def arun_until_idle(self) -> list[SettlementEvent]:
        """:meth:`run_until_idle` inside a running event loop: async handlers are awaited on it.

        Returns
        -------
        list of SettlementEvent
            The settlements made, in order.
        """
        app = self._running()
        out: list[SettlementEvent] = []
        while (event := await app.astep()) is not None:
            out.append(event)
            self._check_limit(out)
        return out

    def _check_limit(self, out: list[SettlementEvent]) -> None:
        if len(out) >= self.max_deliveries:
            raise AssertionError(
                f"{len(out)} deliveries and the app is still not idle: a handler that always retries without "
                "max_attempts circulates for ever (give it max_attempts, or TestApp(max_deliveries=...))"
            )

    def advance(self, seconds: float | dt.timedelta) -> list[SettlementEvent]:
        """Move the clock forward, and do what happens meanwhile: each delayed copy is written at its due
        time and delivered at once, in due order, with what falls due after it.

        Parameters
        ----------
        seconds : float or datetime.timedelta
            How far to move the clock.

        Returns
        -------
        list of SettlementEvent
            The settlements made meanwhile (the deliveries ready now first).
        """
        target = self._target(seconds)
        out = self.run_until_idle()
        while self._fire_next(target):
            out.extend(self.run_until_idle())
            self._check_limit(out)
        self.clock.set(max(target, self.clock.now()))
        out.extend(self.run_until_idle())
        return out

    async def aadvance(self, seconds: float | dt.timedelta) -> list[SettlementEvent]:
        """:meth:`advance` inside a running event loop: async handlers are awaited on it.

        Parameters
        ----------
        seconds : float or datetime.timedelta
            How far to move the clock.

        Returns
        -------
        list of SettlementEvent
            The settlements made meanwhile.
        """
        target = self._target(seconds)
        out = await self.arun_until_idle()
        while self._fire_next(target):
            out.extend(await self.arun_until_idle())
            self._check_limit(out)
        self.clock.set(max(target, self.clock.now()))
        out.extend(await self.arun_until_idle())
        return out

    def _target(self, seconds: float | dt.timedelta) -> float:
        self._running()
        if isinstance(seconds, dt.timedelta):
            seconds = seconds.total_seconds()
        if seconds < 0:
            raise ValueError(f"time only moves forward; got {seconds} s")
        return self.clock.now() + seconds

    def _fire_next(self, target: float) -> bool:
        """Write the delayed copies due first, if that is by ``target`` (the clock jumps to their due time)."""
        app = self._running()
        due = app.next_due()
        if due is None or due > target:
            return False
        app.fire_due(until=due)
        return True

    # -- looking -----------------------------------------------------------------------------------
    @property
    def now(self) -> dt.datetime:
        """The virtual clock's time, as an aware UTC datetime."""
        return utc(self.clock.now())

    @property
    def events(self) -> list[SettlementEvent]:
        """Every settlement so far, oldest first (:class:`~nbkit.SettlementEvent`: outcome, action, attempt)."""
        if self._final is not None or self.app is None:
            return list(self._events)
        return list(self.app.events)

    @property
    def pending(self) -> list[PendingCopy]:
        """The delayed copies not yet written, soonest first (each with ``due``, ``destination``, ``attempt``)."""
        return [] if self.app is None else self.app.pending

    def handler(self, which: Callable[..., Any] | str) -> HandlerCalls:
        """The call record of a handler: give the function, or its registration's name or key.

        Parameters
        ----------
        which : callable or str
            The handler function as it was registered, or a registration name or stream key.

        Returns
        -------
        HandlerCalls
            ``call_count``, ``calls`` and the ``assert_*`` methods.

        Raises
        ------
        ConfigurationError
            If no registration (or more than one) matches.
        """
        if isinstance(which, str):
            found = [r for r in self._records.values() if r.name == which] or [
                r for r in self._records.values() if r.registration.key == which
            ]
        else:
            found = [r for r in self._records.values() if r.handler is which]
        if len(found) == 1:
            return found[0]
        names = ", ".join(sorted(r.name for r in self._records.values())) or "none (not started?)"
        label = which if isinstance(which, str) else getattr(which, "__qualname__", repr(which))
        if not found:
            raise ConfigurationError(f"no registration of {label!r}; the registrations are: {names}")
        raise ConfigurationError(
            f"{label!r} is registered {len(found)} times ({', '.join(r.name for r in found)}): ask by name"
        )

    def output(self) -> list[str]:
        """The lines the app's pipe brokers wrote to stdout, as ``nbkit run`` writes them (without ``\\n``).

        Returns
        -------
        list of str
        """
        self.published_by_key()  # (flushes what is buffered)
        return [line for r in self._redirected if isinstance(r.broker, StdioBroker) for line in r.lines]

    def published_by_key(self) -> dict[str, list[PublishedMessage]]:
        """Everything the app wrote, per stream key in the order each key first appeared.

        That is its handlers' publishes, the retry copies and the dead letters, as the next reader reads
        them; the messages the test published are not in it.

        Returns
        -------
        dict of str to list of PublishedMessage
        """
        if self._final is not None:
            return {k: list(v) for k, v in self._final.items()}
        self._running()
        return self._published_now()

    def _published_now(self) -> dict[str, list[PublishedMessage]]:
        for broker in self.source.brokers:
            if not broker.closed and not broker.output_closed:
                broker.flush()
        by_key: dict[str, list[PublishedMessage]] = {}
        read: set[str] = set()
        for redirected in self._redirected:
            broker = redirected.broker
            if isinstance(broker, FileBroker):
                if broker.path in read:
                    continue  # a file shared by brokers is read once
                read.add(broker.path)
            for message in redirected.messages(self._redirected):
                by_key.setdefault(message.key, []).append(message)
        return by_key

    def published(self, key: str) -> list[PublishedMessage]:
        """What the app wrote under ``key``, in order (see :meth:`published_by_key`).

        Parameters
        ----------
        key : str
            The stream key.

        Returns
        -------
        list of PublishedMessage
            ``payload``, ``headers``, ``seq``, ``retry_count``, ``text``, ``json()``.
        """
        return self.published_by_key().get(key, [])

    def expect_published(self, key: str, count: int) -> list[PublishedMessage]:
        """Fail unless the app wrote exactly ``count`` messages under ``key``; the failure lists what it wrote.

        Parameters
        ----------
        key : str
            The stream key.
        count : int
            How many messages.

        Returns
        -------
        list of PublishedMessage
            Those messages, for closer checks.

        Raises
        ------
        AssertionError
            Naming the count seen, every key with its count, and the payloads and headers.
        """
        by_key = self.published_by_key()
        got = by_key.get(key, [])
        if len(got) != count:
            raise AssertionError(
                f"expected {count} message(s) published under {key!r}, saw {len(got)}\n{published_report(by_key)}"
            )
        return got

    def dead_letters(self) -> dict[str, list[PublishedMessage]]:
        """The messages written under the registrations' ``dead_letter`` keys, per key.

        Returns
        -------
        dict of str to list of PublishedMessage
        """
        keys = {
            reg.declaration.dead_letter
            for broker in self.source.brokers
            for reg in broker.registrations
            if reg.declaration.dead_letter is not None
        }
        return {k: v for k, v in self.published_by_key().items() if k in keys}
