"""What the file and pipe brokers share: registration, the clock, publishing copies, lifecycle."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, NamedTuple

from nbkit.errors import ConfigurationError, NotConnectedError
from nbkit.runtime.clock import Clock, RealClock
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.registration import Registration, make_registration
from nbkit.transport.polling import NeedMore
from nbkit.transport.positions import FilePosition


class Published(NamedTuple):
    """Where a published message went: its key, the sequence it got and when it was written."""

    stream_key: str
    seq: int
    time: float


class Subscription(ABC):
    """One registration's open feed of deliveries; ``poll()`` never blocks."""

    def __init__(self, broker: Broker, registration: Registration) -> None:
        self.broker = broker
        self.registration = registration
        self.ended = False
        self.end_reason: str | None = None

    @property
    def name(self) -> str:
        return self.registration.name

    @abstractmethod
    def poll(self) -> Delivery | NeedMore | None:
        """A Delivery, ``NEED_MORE`` (nothing yet), or ``None`` once the subscription has ended."""

    @property
    def exhausted(self) -> bool:
        """True when nothing more can come except what this process writes itself (see StdioBroker)."""
        return self.ended

    def fileno(self) -> int | None:
        """A file descriptor to wait on with ``select``, if the feed has one."""
        return None

    def close(self) -> None:
        self.ended = True


class Broker(ABC):
    """Base of FileBroker and StdioBroker: ``@broker.subscriber(...)`` registers handlers."""

    transport = "?"

    def __init__(self) -> None:
        self.registrations: list[Registration] = []
        self.clock: Clock = RealClock()
        self.connected = False
        self.closed = False

    def subscriber(
        self,
        key: str,
        *,
        name: str | None = None,
        replay: bool = False,
        start_at: FilePosition | None = None,
        max_attempts: int | None = None,
        dead_letter: str | None = None,
        out_retry: str | None = None,
        checkpoint: Any = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as the handler of stream ``key``; returns it unchanged.

        ``max_attempts`` counts the first delivery; ``dead_letter`` names the key spent deliveries go
        to; ``out_retry`` names where a pipe's retry copies go (required on pipes); ``replay`` and
        ``start_at`` choose where a file subscription starts; ``checkpoint`` saves positions.

        Parameters
        ----------
        key : str
            The stream key to subscribe to.
        name : str, optional
            The registration's name in events and logs (default: the key).
        replay : bool
            File: read from the beginning and end at the end of the file.
        start_at : FilePosition, optional
            File: where the subscription starts (default: the tip, for a live one).
        max_attempts : int, optional
            The cap on attempts, counting the first delivery.
        dead_letter : str, optional
            The key spent deliveries are copied to.
        out_retry : str, optional
            Pipe: the key retry copies are written under (required on a pipe).
        checkpoint : PositionStore, optional
            Saves ``seq + 1`` after every settlement.

        Returns
        -------
        callable
            A decorator that registers the handler and returns it unchanged.

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

        def register(handler: Callable[..., Any]) -> Callable[..., Any]:
            self.include(
                handler,
                key,
                name=name,
                replay=replay,
                start_at=start_at,
                max_attempts=max_attempts,
                dead_letter=dead_letter,
                out_retry=out_retry,
                checkpoint=checkpoint,
            )
            return handler

        return register

    def include(self, handler: Callable[..., Any], key: str, **options: Any) -> Registration:
        """Register ``handler`` for ``key`` (the non-decorator form of :meth:`subscriber`).

        Parameters
        ----------
        handler : callable
            ``handler(delivery)`` returning None or a :class:`~nbkit.HandlerOutcome` (or awaitable).
        key : str
            The stream key.
        **options
            The keyword arguments of :meth:`subscriber`.

        Returns
        -------
        Registration
            The registration made.
        """
        if self.connected:
            raise ConfigurationError("register subscribers before the app starts")
        registration = make_registration(key, handler, **options)
        self._check_registration(registration)
        if any(r.name == registration.name for r in self.registrations):
            raise ConfigurationError(
                f"a subscription named {registration.name!r} is already registered on this broker; "
                "pass name=... to tell them apart"
            )
        self.registrations.append(registration)
        return registration

    def _check_registration(self, registration: Registration) -> None:
        """Transport-specific checks at registration time (overridden)."""

    def bind_clock(self, clock: Clock) -> None:
        """Use ``clock`` for timestamps of everything this broker writes (the app does this when it starts).

        Parameters
        ----------
        clock : RealClock or VirtualClock
            The app's clock.

        Returns
        -------
        None
        """
        self.clock = clock

    def _check_open(self) -> None:
        if self.closed:
            raise NotConnectedError()

    # -- implemented by transports ---------------------------------------------------------------
    @abstractmethod
    def connect(self) -> list[Subscription]:
        """Open the transport and one subscription per registration (the app does this when it starts).

        Returns
        -------
        list of Subscription
            One per registration.
        """

    @abstractmethod
    def publish(self, key: str, payload: bytes | str, headers: dict | None = None) -> Published:
        """Write one message under ``key``; headers travel in the rs1/rs2 envelope.

        Parameters
        ----------
        key : str
            The stream key.
        payload : bytes or str
            The payload (str is encoded as UTF-8).
        headers : dict, optional
            Headers to send with it.

        Returns
        -------
        Published
            A named tuple: ``stream_key``, ``seq``, ``time``.
        """

    @abstractmethod
    def retry_destination(self, registration: Registration) -> str:
        """The key a registration's retry copies go to.

        Parameters
        ----------
        registration : Registration
            One of this broker's registrations.

        Returns
        -------
        str
            The stream key of its retry copies.
        """

    def flush(self) -> None:
        """Push buffered output out (called when the app goes idle).

        Returns
        -------
        None
        """

    @abstractmethod
    def shutdown(self) -> None:
        """Flush and close; the broker cannot publish afterwards.

        Returns
        -------
        None
        """

    def reset(self) -> None:
        """Back to the configured, unconnected state, so a fresh App can connect it again.

        Returns
        -------
        None
        """
        self.abort()
        self.connected = False
        self.closed = False

    def abort(self) -> None:
        """Stop as a killed process would: close everything, flush nothing more, write no EOS.

        Returns
        -------
        None
        """
        for sub in getattr(self, "subscriptions", []):
            sub.close()
        self.closed = True


def as_payload(payload: bytes | bytearray | memoryview | str) -> bytes:
    """Bytes from bytes-like or str (UTF-8) payloads."""
    if type(payload) is bytes:  # what the runtime's own copies carry
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    raise TypeError(f"a payload is bytes or str, not {type(payload).__name__} (use json.dumps for objects)")
