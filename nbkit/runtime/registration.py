"""A handler mounted on a broker with its options (``@broker.subscriber(key, ...)``).

The options every transport takes (``name``, ``max_attempts``, ``dead_letter``) are checked once, in
:func:`common_options`; each broker's ``subscriber`` adds its own (a file's ``replay``, ``start_at`` and
``checkpoint``, a pipe's ``out_retry``) and builds its record, :class:`FileRegistration` or
:class:`PipeRegistration`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict

from nbkit.errors import ConfigurationError, InvalidKeyError, RetryDestinationError
from nbkit.runtime.position_store import PositionStore
from nbkit.runtime.settle import Declaration
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import validate_key

__all__ = [
    "CommonOptions",
    "FileRegistration",
    "Handler",
    "PipeRegistration",
    "Registration",
    "check_key",
    "common_options",
]


#: A handler: ``handler(delivery)`` returning None, a HandlerOutcome, or an awaitable of one.
Handler = Callable[..., Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Registration:
    """One subscription: the stream key, the handler, its name and its settlement options.

    ``checkpoint`` is the position store the app saves ``seq + 1`` to after each settlement; only a
    file subscription takes one (a pipe has no positions), so on a pipe it is always None.
    ``at_least_once`` holds that saved position behind every message whose delayed copy is not yet
    appended (:mod:`nbkit.runtime.checkpoint`; nbkit's own option, beyond upstream).
    """

    key: str
    handler: Handler
    name: str
    declaration: Declaration = Declaration()
    checkpoint: PositionStore | None = None
    at_least_once: bool = False

    @property
    def is_async(self) -> bool:
        """True when the handler is a coroutine function."""
        return inspect.iscoroutinefunction(self.handler)

    @property
    def retry_key(self) -> str:
        """The key retry copies go to: the subscription's own key (a file appends them there)."""
        return self.key


@dataclass(frozen=True, slots=True, kw_only=True)
class FileRegistration(Registration):
    """A file subscription: where it starts, and whether it is a replay that ends at the end of the file."""

    replay: bool = False
    start_at: FilePosition | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PipeRegistration(Registration):
    """A pipe subscription: the key its retry copies are written under (the app refuses to start without one)."""

    out_retry: str | None = None

    @property
    def retry_key(self) -> str:
        """The key retry copies go to: ``out_retry`` (the broker refuses to connect a registration without one)."""
        if self.out_retry is None:
            raise RetryDestinationError(f"subscription `{self.name}` names no out_retry key for its retry copies")
        return self.out_retry


class CommonOptions(TypedDict):
    """The checked fields every registration has, as :func:`common_options` returns them."""

    key: str
    name: str
    declaration: Declaration


def common_options(key: str, *, name: str | None, max_attempts: int | None, dead_letter: str | None) -> CommonOptions:
    """Check the options every transport takes; errors say which option is wrong and why.

    Parameters
    ----------
    key : str
        The subscription's stream key.
    name : str or None
        The registration's name (None: the key).
    max_attempts : int or None
        The cap on attempts, counting the first delivery.
    dead_letter : str or None
        The key spent deliveries are copied to.

    Returns
    -------
    CommonOptions
        ``key``, ``name`` and ``declaration``, ready for a registration's constructor.

    Raises
    ------
    ConfigurationError
        If the key, the dead-letter key, ``max_attempts`` or the name is not valid.

    Examples
    --------
    >>> from nbkit.runtime.registration import common_options
    >>> common_options("orders", name=None, max_attempts=3, dead_letter="orders.dead")["name"]
    'orders'
    """
    check_key(key, "subscription stream key")
    if dead_letter is not None:
        check_key(dead_letter, "dead_letter key")
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts < 1 << 32
    ):
        raise ConfigurationError(
            f"max_attempts must be a whole number from 1 to {2**32 - 1} (it counts the first delivery), "
            f"not {max_attempts!r}"
        )
    if name is not None and not isinstance(name, str):
        raise ConfigurationError(f"name takes a string (the registration's name in events and logs), not {name!r}")
    return CommonOptions(key=key, name=name or key, declaration=Declaration(max_attempts, dead_letter))


def check_key(key: str, what: str) -> None:
    """Refuse a stream key option that is not valid, as a configuration error naming the option.

    Parameters
    ----------
    key : str
        The stream key given.
    what : str
        Which option it was given as (``"out_retry key"``).

    Raises
    ------
    ConfigurationError
        If ``key`` is not a valid stream key.

    Examples
    --------
    >>> from nbkit.runtime.registration import check_key
    >>> check_key("orders.retry", "out_retry key")
    """
    try:
        validate_key(key, what=what)
    except InvalidKeyError as exc:
        raise ConfigurationError(str(exc)) from None
