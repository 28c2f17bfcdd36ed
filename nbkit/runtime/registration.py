"""A handler mounted on a broker with its options (``@broker.subscriber(key, ...)``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nbkit.errors import ConfigurationError, InvalidKeyError
from nbkit.runtime.settle import Declaration
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import validate_key


@dataclass(frozen=True, slots=True)
class Registration:
    """One subscription: the stream key, the handler and its settlement options."""

    key: str
    handler: Callable[..., Any]
    name: str
    replay: bool = False
    start_at: FilePosition | None = None
    declaration: Declaration = Declaration()
    out_retry: str | None = None
    checkpoint: Any = None  # a PositionStore, saved after each settle

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler)


def make_registration(
    key: str,
    handler: Callable[..., Any],
    *,
    name: str | None = None,
    replay: bool = False,
    start_at: FilePosition | None = None,
    max_attempts: int | None = None,
    dead_letter: str | None = None,
    out_retry: str | None = None,
    checkpoint: Any = None,
) -> Registration:
    """Check every option and build a Registration; errors say which option is wrong and why."""
    try:
        validate_key(key, what="subscription stream key")
        if dead_letter is not None:
            validate_key(dead_letter, what="dead_letter key")
        if out_retry is not None:
            validate_key(out_retry, what="out_retry key")
    except InvalidKeyError as exc:
        raise ConfigurationError(str(exc)) from None
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or not 1 <= max_attempts < 1 << 32
    ):
        raise ConfigurationError(
            f"max_attempts must be a whole number from 1 to {2**32 - 1} (it counts the first delivery), "
            f"not {max_attempts!r}"
        )
    if start_at is not None and not isinstance(start_at, FilePosition):
        raise ConfigurationError(
            f"start_at takes a FilePosition (FilePosition.beginning(), .end(), .sequence(n), "
            f".timestamp(t)), not {start_at!r}"
        )
    if not callable(handler):
        raise ConfigurationError(f"the handler for {key!r} is not callable: {handler!r}")
    if checkpoint is not None and not hasattr(checkpoint, "save"):
        raise ConfigurationError("checkpoint takes a PositionStore (nbkit.PositionStore(path))")
    return Registration(
        key=key,
        handler=handler,
        name=name or key,
        replay=replay,
        start_at=start_at,
        declaration=Declaration(max_attempts, dead_letter),
        out_retry=out_retry,
        checkpoint=checkpoint,
    )
