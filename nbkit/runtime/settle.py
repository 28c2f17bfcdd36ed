"""The settlement rule as one pure function: (outcome, attempt, declaration, transport) -> Decision.

It reads like runtime-semantics §1.2 and §1.5; all I/O (logging, publishing copies) happens around it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from nbkit.runtime.outcome import OutcomeKind

__all__ = [
    "Action",
    "Decision",
    "Declaration",
    "decide",
]


class Action(StrEnum):
    """What the runtime does with a settled delivery (the ``action`` of a :class:`~nbkit.SettlementEvent`).

    ``unsupported`` (ack/nack failed as unsupported: logged, nothing else), ``copy`` (a retry copy now),
    ``delayed-copy`` (a retry copy after the delay), ``dead-letter`` (a copy to the dead-letter key now),
    ``rejected`` (the cap is reached and there is no dead-letter key: nothing written).

    Examples
    --------
    >>> from nbkit import Action
    >>> [str(action) for action in Action]
    ['unsupported', 'copy', 'delayed-copy', 'dead-letter', 'rejected']
    >>> Action("dead-letter") is Action.DEAD_LETTER
    True
    """

    UNSUPPORTED = "unsupported"  # ack/nack returned AckError unsupported; logged, nothing else
    COPY = "copy"  # a retry copy published now to the retry destination
    DELAYED_COPY = "delayed-copy"  # a retry copy published after the delay
    DEAD_LETTER = "dead-letter"  # a copy published now to the dead-letter key
    REJECTED = "rejected"  # cap reached, no dead-letter key: nothing written

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Declaration:
    """A retry declaration: ``max_attempts`` (counting the first delivery) and a dead-letter key."""

    max_attempts: int | None = None
    dead_letter: str | None = None

    @property
    def declares_nothing(self) -> bool:
        """Neither a cap nor a dead-letter key: a plain ``retry()`` then is an unsupported requeue."""
        return self.max_attempts is None and self.dead_letter is None


@dataclass(frozen=True, slots=True)
class Decision:
    """The action, the delay before a copy (seconds), which destination, and the call that was unsupported.

    ``action_name`` is the action's value, as a settlement event records it (read once per delivery, and an
    enum's ``.value`` is a descriptor call on Python 3.11).
    """

    action: Action
    delay: float | None = None
    destination: str | None = None  # "retry" or "dead_letter" (resolved to a key by the caller)
    unsupported_call: str | None = None  # "ack", "nack(requeue=false)", "nack(requeue=true)"
    at_cap: bool = False
    action_name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "action_name", self.action.value)


# the decisions that depend on nothing but the outcome: immutable, so decide() hands out these
_ACK = Decision(Action.UNSUPPORTED, unsupported_call="ack")
_DROP = Decision(Action.UNSUPPORTED, unsupported_call="nack(requeue=false)")
_REQUEUE = Decision(Action.UNSUPPORTED, unsupported_call="nack(requeue=true)")


def decide(kind: OutcomeKind, delay: float | None, attempt: int, decl: Declaration, transport: str) -> Decision:
    """Decide what settling a delivery does on the file or pipe transport.

    ``kind`` is the outcome (ack, drop, retry, retry_after); ``attempt`` counts from 1.
    ``transport`` is ``"file"`` or ``"pipe"``: both lack acknowledgement, so they decide alike
    here; the caller resolves the "retry" destination (the stream key on a file, ``out_retry`` on a pipe).
    """
    if transport not in ("file", "pipe"):
        raise ValueError(f"transport must be 'file' or 'pipe', not {transport!r}")
    if kind == "ack":
        return _ACK
    if kind == "drop":
        return _DROP
    if kind == "retry":
        if decl.declares_nothing:
            return _REQUEUE
        delay = 0.0
    elif kind != "retry_after":
        raise ValueError(f"unknown outcome {kind!r}")
    assert delay is not None
    if decl.max_attempts is not None and attempt >= decl.max_attempts:
        if decl.dead_letter is not None:
            return Decision(Action.DEAD_LETTER, 0.0, "dead_letter", at_cap=True)
        return Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True)
    if decl.max_attempts is None and decl.dead_letter is not None:
        return Decision(Action.DEAD_LETTER, 0.0, "dead_letter")
    if delay == 0:
        return Decision(Action.COPY, 0.0, "retry")
    return Decision(Action.DELAYED_COPY, delay, "retry")
