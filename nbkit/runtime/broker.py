"""What the file and pipe brokers share: registration, the clock, publishing copies, lifecycle."""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

from nbkit.errors import ConfigurationError, NotConnectedError
from nbkit.runtime.checkpoint import Checkpointer
from nbkit.runtime.clock import Clock, RealClock
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.events import new_record
from nbkit.runtime.registration import Handler, Registration
from nbkit.transport.polling import NeedMore

__all__ = [
    "Broker",
    "Published",
    "Subscription",
    "as_payload",
    "new_published",
    "registrator",
]


class Published(NamedTuple):
    """Where a published message went: its key, the sequence it got and when it was written."""

    stream_key: str
    seq: int
    time: float


#: ``Published(stream_key, seq, time)`` from a tuple, at C speed (a pipe stage makes one per copy).
new_published = functools.partial(new_record, Published)


class Subscription(ABC):
    """One registration's open feed of deliveries; ``poll()`` never blocks."""

    #: Whether :meth:`ready` can hand out deliveries (a reader that scans ahead of ``poll()``).
    scans_ahead: ClassVar[bool] = False

    def __init__(self, broker: Broker[Any], registration: Registration) -> None:
        self.broker = broker
        self.registration = registration
        self.ended = False
        self.end_reason: str | None = None
        #: saves this subscription's positions as it settles (None: the registration has no checkpoint)
        self.checkpointer: Checkpointer | None = (
            None
            if registration.checkpoint is None
            else Checkpointer(registration.checkpoint, at_least_once=registration.at_least_once)
        )

    @property
    def name(self) -> str:
        """The registration's name."""
        return self.registration.name

    @abstractmethod
    def poll(self) -> Delivery | NeedMore | None:
        """A Delivery, ``NEED_MORE`` (nothing yet), or ``None`` once the subscription has ended."""

    def ready(self) -> Iterator[Delivery]:
        """The deliveries ``poll()`` would return next without reading or waiting, each taken as it is handed out.

        Stopping early leaves the rest to ``poll()``. The base class has none (``scans_ahead`` is False); a file
        subscription hands out the messages its reader has scanned already (:meth:`~nbkit.StreamReader.ready`).
        """
        return iter(())

    @property
    def exhausted(self) -> bool:
        """True when nothing more can come except what this process writes itself (see StdioBroker)."""
        return self.ended

    def fileno(self) -> int | None:
        """A file descriptor to wait on with ``select``, if the feed has one."""
        return None

    def close(self) -> None:
        """Stop the feed; ``poll()`` returns None from now on."""
        self.ended = True


#: The registration record a broker makes (:class:`FileRegistration` or :class:`PipeRegistration`).
R = TypeVar("R", bound=Registration)
#: A broker's ``subscriber`` method, as :func:`registrator` wraps it.
S = TypeVar("S", bound=Callable[..., Any])


class Broker(ABC, Generic[R]):
    """Base of FileBroker and StdioBroker: ``@broker.subscriber(...)`` registers handlers.

    Each transport declares its own ``subscriber`` with the options it takes (wrapped in
    :func:`registrator`, so an option of the other transport fails when the decorator is made, with a
    message naming the broker that takes it); :meth:`include` is the same without the decorator.
    """

    transport = "?"
    #: ``subscriber(key, **options)`` of the transport: returns a decorator registering a handler.
    subscriber: Callable[..., Callable[[Handler], Handler]]

    def __init__(self) -> None:
        self.registrations: list[R] = []
        self.subscriptions: Sequence[Subscription] = ()
        self.clock: Clock = RealClock()
        self.connected = False
        self.closed = False
        #: Set by the app: called with this broker when its output is gone for good (the reader of a
        #: pipe has left), so that the app stops at once.
        self.on_output_closed: Callable[[Broker[Any]], None] | None = None

    def include(self, handler: Handler, key: str, **options: Any) -> R:
        """Register ``handler`` for ``key`` (the non-decorator form of ``subscriber``).

        Parameters
        ----------
        handler : callable
            ``handler(delivery)`` returning None or a :class:`~nbkit.HandlerOutcome` (or awaitable).
        key : str
            The stream key.
        **options
            The keyword arguments of this broker's ``subscriber``.

        Returns
        -------
        FileRegistration or PipeRegistration
            The registration made.

        Examples
        --------
        >>> from nbkit import FileBroker
        >>> broker = FileBroker("orders.ss")
        >>> broker.include(print, "orders", replay=True).name
        'orders'
        """
        self.subscriber(key, **options)(handler)
        return self.registrations[-1]

    def _decorator(self, build: Callable[[Handler], R]) -> Callable[[Handler], Handler]:
        """The decorator ``subscriber`` returns: it registers ``build(handler)`` and returns the handler unchanged."""

        def register(handler: Handler) -> Handler:
            self._register(build(handler))
            return handler

        return register

    def _register(self, registration: R) -> None:
        """Add a registration; refused for a handler that cannot be called, after connecting, and for a name
        already taken."""
        if not callable(registration.handler):
            raise ConfigurationError(f"the handler for {registration.key!r} is not callable: {registration.handler!r}")
        if self.connected:
            raise ConfigurationError("register subscribers before the app starts")
        if any(r.name == registration.name for r in self.registrations):
            raise ConfigurationError(
                f"a subscription named {registration.name!r} is already registered on this broker; "
                "pass name=... to tell them apart"
            )
        self.registrations.append(registration)

    def bind_clock(self, clock: Clock) -> None:
        """Use ``clock`` for timestamps of everything this broker writes (the app does this when it starts).

        Parameters
        ----------
        clock : RealClock or VirtualClock
            The app's clock.
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
        """Write one message under ``key``, its headers in the rs1/rs2 envelope (each transport documents how)."""

    def write_copy(self, key: str, payload: bytes, headers: dict[str, str], now: float) -> Published:
        """Write a settlement's copy of a delivery under ``key``: its payload and headers (the retry count set),
        at ``now``, the settlement's time. What :meth:`publish` does, without the checks a copy does not need
        (its key was checked when the subscription was registered, its payload is bytes and it has headers).
        The base class publishes it (at the broker's own time); a pipe writes its line at ``now``.

        Parameters
        ----------
        key : str
            The copy's stream key (a retry or dead-letter key).
        payload : bytes
            The delivery's payload.
        headers : dict
            The copy's headers.
        now : float
            The settlement's time (epoch seconds).

        Returns
        -------
        Published
            Where the copy went.
        """
        return self.publish(key, payload, headers)

    def retry_destination(self, registration: R) -> str:
        """The key a registration's retry copies go to: on a file its own key, on a pipe its ``out_retry``.

        Parameters
        ----------
        registration : FileRegistration or PipeRegistration
            One of this broker's registrations.

        Returns
        -------
        str
            The stream key of its retry copies.
        """
        return registration.retry_key

    def flush(self) -> None:
        """Push buffered output out (called when the app goes idle)."""

    def stop_input(self, *, drain: bool | None = None) -> bool | None:
        """A graceful stop began: stop taking input, or read on until the writer closes it (``drain``).

        Parameters
        ----------
        drain : bool, optional
            Read on until the input's writer closes it (None: when the input is a pipe).

        Returns
        -------
        bool or None
            True: the broker reads on (draining); False: it hands out only what it has read already;
            None: the transport has no such stop, and the app ends its subscriptions at once.
        """
        return None

    def count_unread(self, *, wait_for_end: bool = False) -> int:
        """The stage stops before its input ends: stop reading, and count what was read and never delivered
        (the transport's own counts also keep what was never read).

        Parameters
        ----------
        wait_for_end : bool
            Wait a little for the input's writer to close it, so the count of lines never read is exact
            (a stop by a signal).

        Returns
        -------
        int
            The lines read and never delivered (0 for a transport that reads nothing ahead).
        """
        return 0

    def input_counts(self) -> dict[str, int | bool] | None:
        """What became of the input's lines (a pipe's), for the run summary.

        Returns
        -------
        dict or None
            None: the transport counts no lines.
        """
        return None

    def output_counts(self) -> tuple[int, int]:
        """Lines written to the output and lines lost there (a pipe's stdout after its reader left).

        Returns
        -------
        tuple of (int, int)
            (0, 0) for a transport that counts no lines.
        """
        return 0, 0

    @property
    def output_closed(self) -> bool:
        """Whether the output is gone for good (a pipe's reader has left): nothing more can be published."""
        return False

    @abstractmethod
    def shutdown(self) -> None:
        """Flush and close; the broker cannot publish afterwards."""

    def reset(self) -> None:
        """Back to the configured, unconnected state, so a fresh App can connect it again."""
        self.abort()
        self.connected = False
        self.closed = False

    def abort(self) -> None:
        """Stop as a killed process would: close everything, flush nothing more, write no EOS."""
        for sub in self.subscriptions:
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


def registrator(subscriber: S) -> S:
    """Wrap a broker's ``subscriber`` so that an option it does not take fails at once, clearly.

    Python's own error for an unexpected keyword names neither the transport the option belongs to nor
    the options this one takes; this says both (the accepted options are read from ``subscriber``'s
    signature, those of the other brokers from theirs, so each list is written once: in a signature).

    Parameters
    ----------
    subscriber : callable
        A ``Broker`` subclass's ``subscriber(self, key, *, ...)`` method.

    Returns
    -------
    callable
        The same method, checking its keyword arguments first.

    Examples
    --------
    >>> from nbkit import FileBroker
    >>> FileBroker("orders.ss").subscriber("orders", out_retry="orders.retry")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    nbkit.errors.ConfigurationError: out_retry is a pipe option (StdioBroker.subscriber); FileBroker.subscriber ...
    """
    taken = _options(subscriber)

    @functools.wraps(subscriber)
    def checked(self: Broker[Any], *args: Any, **options: Any) -> Any:
        for option in options:
            if option not in taken:
                raise ConfigurationError(_wrong_option(type(self), option, taken))
        return subscriber(self, *args, **options)

    return checked  # type: ignore[return-value]  # functools.wraps keeps the signature mypy checks callers against


def _options(subscriber: Callable[..., Any]) -> tuple[str, ...]:
    """The keyword-only options of a ``subscriber`` method, in the order of its signature."""
    params = inspect.signature(inspect.unwrap(subscriber)).parameters.values()
    return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


def _wrong_option(broker: type[Broker[Any]], option: str, taken: tuple[str, ...]) -> str:
    """Which broker takes ``option`` (if one does) and what ``broker.subscriber`` takes instead."""
    own = f"{broker.__name__}.subscriber takes: {', '.join(taken)}"
    owners = [b for b in _brokers() if option in _options(b.subscriber)]
    if owners:
        where = ", ".join(f"{b.__name__}.subscriber" for b in owners)
        return f"{option} is a {owners[0].transport} option ({where}); {own}"
    return f"{broker.__name__}.subscriber has no option {option!r}; {own}"


def _brokers() -> list[type[Broker[Any]]]:
    """Every concrete broker class defined so far (the transports' subclasses of Broker)."""
    found: list[type[Broker[Any]]] = []
    pending = Broker.__subclasses__()
    while pending:
        cls = pending.pop()
        pending += cls.__subclasses__()
        if "subscriber" in vars(cls):
            found.append(cls)
    return sorted(found, key=lambda b: b.__name__)
