"""The file transport: subscriptions read a ``.ss`` file, copies and publishes append to it."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from nbkit.errors import (
    ConfigurationError,
    FormatError,
    MissingFileError,
    PathIsDirectoryError,
    SeekError,
    WriterLockedError,
)
from nbkit.runtime import logs
from nbkit.runtime.broker import Broker, Published, Subscription, as_payload, new_published, registrator
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.position_store import PositionStore
from nbkit.runtime.registration import FileRegistration, Handler, common_options
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.transport.positions import FilePosition
from nbkit.wire import envelope
from nbkit.wire.deliveries import file_deliveries
from nbkit.wire.keys import PRIMING_KEY, validate_key
from nbkit.wire.ssformat import DEFAULT_BEACON_INTERVAL, HEADER_SIZE, check_write_interval

__all__ = [
    "FileBroker",
    "FileSubscription",
]


class FileSubscription(Subscription):
    """Deliveries of one stream key: a live tail (``replay=False``) or a replay that ends."""

    registration: FileRegistration
    scans_ahead = True  # ready(): the messages the reader has scanned already

    def __init__(self, broker: FileBroker, registration: FileRegistration) -> None:
        super().__init__(broker, registration)
        # the reader skips the other keys' frames (and the EOS mark: its ``end`` then says "eos")
        self.reader = StreamReader(broker.path, follow=not registration.replay, keys=registration.key)
        start = registration.start_at
        if start is None:
            start = FilePosition.beginning() if registration.replay else FilePosition.end()
        try:
            self.reader.seek(start, key=registration.key)
        except SeekError as exc:
            if self._caught_up(start):
                # the next sequence after the last one written: nothing is missed by starting at the
                # tip (upstream refuses this seek and ends the subscription; nbkit resumes instead)
                self.reader.seek(FilePosition.end())
                return
            if registration.replay:
                # upstream: a refused seek leaves a replay where it was (the beginning)
                logs.emit(logs.SUBSCRIBER, logging.WARNING, "seek refused", subscription=self.name, error=exc)
                self.reader.seek(FilePosition.beginning())
            else:
                # upstream: a refused seek ends a live subscription
                logs.emit(logs.SUBSCRIBER, logging.ERROR, "seek refused", subscription=self.name, error=exc)
                self._finish("seek refused")

    def _caught_up(self, start: FilePosition) -> bool:
        """True when ``start`` is sequence n and the file holds message n-1 of the key (and no n)."""
        if start.kind != "sequence" or not start.value:
            return False
        try:
            self.reader.seek(FilePosition.sequence(start.value - 1), key=self.registration.key)
        except SeekError:
            return False
        return True

    def poll(self) -> Delivery | NeedMore | None:
        if self.ended:
            return None
        try:
            msg = self.reader.poll()
        except FormatError:
            self._finish("error")
            raise
        if msg is NEED_MORE:
            return msg
        if msg is None:
            self._finish(self.reader.end.reason if self.reader.end else "end")
            return None
        return next(file_deliveries((msg,), self.registration.name, Delivery))  # made as ready() makes them

    def ready(self) -> Iterator[Delivery]:
        """The deliveries of the messages the reader has scanned already (:meth:`StreamReader.ready`), made as
        :meth:`poll` makes them (:func:`~nbkit.wire.deliveries.file_deliveries`), each message taken as its
        delivery is asked for. None once the subscription has ended; a caller that may close it meanwhile (a
        handler can) checks ``ended`` before asking for the next one, as :meth:`App.run` does."""
        if self.ended:
            return iter(())
        return file_deliveries(self.reader.ready(), self.registration.name, Delivery)

    def seek(self, position: FilePosition) -> None:
        """Move this subscription; on refusal a live subscription ends and a replay stays put."""
        self.ended = False
        try:
            self.reader.seek(position, key=self.registration.key)
        except SeekError:
            if not self.registration.replay:
                self._finish("seek refused")
            raise

    def _finish(self, reason: str) -> None:
        if not self.ended:
            self.ended = True
            self.end_reason = reason
            logs.emit(logs.SUBSCRIBER, logging.DEBUG, logs.STREAM_ENDED, subscriber=self.name, reason=reason)

    def close(self) -> None:
        self.ended = True
        self.reader.close()


class FileBroker(Broker[FileRegistration]):
    """A broker over one stream file: subscriptions read it, publishes and retry copies append to it.

    Appends are shared by default: other processes (``nbkit publish``, another service, a notebook)
    may append to the same file while this broker runs; each append locks the file for itself only
    and continues the file's sequence numbers (see :class:`~nbkit.StreamWriter`).
    ``exclusive=True`` keeps the file locked from the first append until shutdown; ``lock_timeout`` is
    how long an append waits for another writer's lock before it fails.
    ``fsync=True`` makes its writer fsync after every flush (durable against power loss, at a cost;
    see :class:`~nbkit.transport.file_writer.StreamWriter`); the default leaves it to the OS.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (created on connect if missing, unless ``existing_only``).
    beacon_interval : int
        Bytes between beacons in a new file.
    end_with_eos : bool
        Write SeaStreamer's end-of-stream mark at shutdown (readers then stop there).
    existing_only : bool
        Refuse to create the file.
    exclusive : bool
        Keep the file locked from the first append until shutdown.
    lock_timeout : float
        Seconds an append waits for another writer's lock.
    fsync : bool
        fsync the file after every flush: durable against power loss, at a cost (``docs/reliability.md``).

    See Also
    --------
    nbkit.StdioBroker : The same registrations over a pipe.
    nbkit.App : Runs brokers until a signal, and shuts them down.
    nbkit.PositionStore : Where a service is, saved and resumed (the file keeps no positions).
    nbkit.StreamReader : What the broker reads the file with.

    Examples
    --------
    >>> from nbkit import App, FileBroker, Session
    >>> broker = FileBroker("jobs.ss", end_with_eos=True)
    >>> @broker.subscriber("jobs", replay=True)
    ... def work(delivery):
    ...     print(f"#{delivery.seq} {delivery.text} {delivery.headers}")
    >>> broker.publish("jobs", "first").seq, broker.publish("jobs", "second", {"trace": "a1"}).seq
    (1, 2)
    >>> _ = Session(App(broker)).run()
    #1 first {'stream-sequence': '1'}
    #2 second {'trace': 'a1', 'stream-sequence': '2'}
    """

    transport = "file"

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        beacon_interval: int = DEFAULT_BEACON_INTERVAL,
        end_with_eos: bool = False,
        existing_only: bool = False,
        exclusive: bool = False,
        lock_timeout: float = 10.0,
        fsync: bool = False,
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.fsync = fsync
        try:
            self.beacon_interval = check_write_interval(beacon_interval)
        except FormatError as exc:
            raise ConfigurationError(f"invalid descriptor: {exc.detail}") from None
        self.end_with_eos = end_with_eos
        self.existing_only = existing_only
        self.exclusive = exclusive
        self.lock_timeout = lock_timeout
        self._writer: StreamWriter | None = None
        self.subscriptions: list[FileSubscription] = []

    def __repr__(self) -> str:
        return f"FileBroker({self.path!r})"

    @registrator
    def subscriber(
        self,
        key: str,
        *,
        name: str | None = None,
        replay: bool = False,
        start_at: FilePosition | None = None,
        max_attempts: int | None = None,
        dead_letter: str | None = None,
        checkpoint: PositionStore | None = None,
        at_least_once: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Register the decorated function as the handler of stream ``key``; returns it unchanged.

        Options are checked here, when the decorator is made; an option of the pipe transport
        (``out_retry``) is refused with a message saying so. On a file, retry copies are appended
        under the subscription's own key.

        Parameters
        ----------
        key : str
            The stream key to subscribe to.
        name : str, optional
            The registration's name in events and logs (default: the key).
        replay : bool
            Read from the beginning (or ``start_at``) and end at the end of the file, instead of following it.
        start_at : FilePosition, optional
            Where the subscription starts (default: the beginning for a replay, the tip for a live one).
        max_attempts : int, optional
            The cap on attempts, counting the first delivery.
        dead_letter : str, optional
            The key spent deliveries are copied to.
        checkpoint : PositionStore, optional
            Saves ``seq + 1`` after every settlement, as upstream does; resume with
            ``start_at=store.position(key)``. A ``retry_after`` copy still pending when the process dies is
            then lost for good (its original is behind the saved position): at-most-once across the delay.
        at_least_once : bool
            nbkit's own option, beyond upstream (needs ``checkpoint``): the saved position never passes a
            message whose delayed copy is not yet appended, so a restart after a crash in the delay window
            delivers that message again (as attempt 1) and the ones after it too: at-least-once.

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
        >>> from nbkit import FileBroker, HandlerOutcome
        >>> broker = FileBroker("orders.ss")
        >>> @broker.subscriber("orders", replay=True, max_attempts=3, dead_letter="orders.dead")
        ... def handle(delivery):
        ...     return HandlerOutcome.retry_after(5)
        >>> [r.name for r in broker.registrations]
        ['orders']
        """
        common = common_options(key, name=name, max_attempts=max_attempts, dead_letter=dead_letter)
        if start_at is not None and not isinstance(start_at, FilePosition):
            raise ConfigurationError(
                f"start_at takes a FilePosition (FilePosition.beginning(), .end(), .sequence(n), "
                f".timestamp(t)), not {start_at!r}"
            )
        if checkpoint is not None and not isinstance(checkpoint, PositionStore):
            raise ConfigurationError(
                f"checkpoint takes a PositionStore (nbkit.PositionStore(path)), not {checkpoint!r}"
            )

        if at_least_once not in (True, False):
            raise ConfigurationError(f"at_least_once takes True or False, not {at_least_once!r}")
        if at_least_once and checkpoint is None:
            raise ConfigurationError(
                "at_least_once=True holds a saved position back: it needs checkpoint=PositionStore(path)"
            )

        return self._decorator(
            lambda handler: FileRegistration(
                **common,
                handler=handler,
                replay=bool(replay),
                start_at=start_at,
                checkpoint=checkpoint,
                at_least_once=at_least_once,
            )
        )

    @property
    def writer(self) -> StreamWriter:
        """The file's writer, opened on first use (locked for good if ``exclusive``), and again after a
        failed write closed it."""
        self._check_open()
        if self._writer is None or self._writer.closed:
            self._writer = StreamWriter(
                self.path,
                beacon_interval=self.beacon_interval,
                clock_ms=lambda: int(round(self.clock.now() * 1000)),
                existing_only=self.existing_only,
                exclusive=self.exclusive,
                lock_timeout=self.lock_timeout,
                fsync=self.fsync,
            )
        return self._writer

    def connect(self) -> list[Subscription]:
        """Create or open the file, write the priming message to a fresh file, open subscriptions.

        Returns
        -------
        list of Subscription
            One file subscription per registration.
        """
        self._check_open()
        if self.connected:
            return list(self.subscriptions)
        exists = os.path.exists(self.path)
        if not exists and self.existing_only:
            raise MissingFileError(f"stream connect error on '{self.path}': no such file (existing_only is set)")
        if os.path.isdir(self.path):
            raise PathIsDirectoryError(f"stream connect error on '{self.path}': is a directory, not a stream file")
        if not exists or os.path.getsize(self.path) <= HEADER_SIZE:
            # upstream primes a fresh file so a live consumer can open on it
            try:
                self.writer.write(PRIMING_KEY, b"1")
            except WriterLockedError:
                pass  # another process is writing the file; nbkit's reader needs no priming to follow it
        self.connected = True
        self.subscriptions = [FileSubscription(self, r) for r in self.registrations]
        return list(self.subscriptions)

    def publish(
        self,
        key: str,
        payload: bytes | str,
        headers: dict | None = None,
        *,
        timestamp_ms: int | None = None,
    ) -> Published:
        """Append one message under ``key`` (headers go in the rs1/rs2 envelope) and flush it.

        Parameters
        ----------
        key : str
            The stream key.
        payload : bytes or str
            The payload (str is encoded as UTF-8).
        headers : dict, optional
            Headers to send with it.
        timestamp_ms : int, optional
            The message's timestamp (default: the broker's clock).

        Returns
        -------
        Published
            A named tuple: ``stream_key``, ``seq`` (its sequence in the file), ``time``.
        """
        validate_key(key)
        data = envelope.encode(headers or {}, as_payload(payload), force_text=False)
        written = self.writer.write(key, data, timestamp_ms=timestamp_ms)
        return new_published((key, written.seq, written.timestamp_ms / 1000))

    def abort(self) -> None:
        """Stop as a killed process would: close the subscriptions and the file, write no EOS."""
        super().abort()
        if self._writer is not None:
            self._writer.close()

    def reset(self) -> None:
        """Back to the configured, unconnected state (the file is not touched), so a fresh App can connect it."""
        super().reset()
        self._writer = None
        self.subscriptions = []

    def shutdown(self) -> None:
        """Close subscriptions; write the end-of-stream mark if ``end_with_eos``; release the file."""
        if self.closed:
            return
        for sub in self.subscriptions:
            sub.close()
        try:
            if self.end_with_eos:
                self.writer.write_eos()
        finally:
            if self._writer is not None:
                self._writer.close()
            self.closed = True
