"""The settlement rule as a table: ``decide()`` against runtime-semantics §1.2 and §1.5."""

from __future__ import annotations

import pytest

from nbkit import Action
from nbkit.runtime.settle import Decision, Declaration, decide

NOTHING = Declaration()
CAP3 = Declaration(max_attempts=3)
CAP3_DLQ = Declaration(max_attempts=3, dead_letter="parcels.dead")
DLQ = Declaration(dead_letter="parcels.dead")
CAP1 = Declaration(max_attempts=1)

U = Action.UNSUPPORTED
# (kind, delay, attempt, declaration) -> Decision
TABLE = [
    # §1.2 ack / drop: acknowledgement unsupported, whatever the declaration says
    ("ack", None, 1, NOTHING, Decision(U, unsupported_call="ack")),
    ("ack", None, 5, CAP3_DLQ, Decision(U, unsupported_call="ack")),
    ("drop", None, 1, NOTHING, Decision(U, unsupported_call="nack(requeue=false)")),
    # drop() never goes to the dead-letter key, not even at or past the cap
    ("drop", None, 1, DLQ, Decision(U, unsupported_call="nack(requeue=false)")),
    ("drop", None, 3, CAP3_DLQ, Decision(U, unsupported_call="nack(requeue=false)")),
    ("drop", None, 9, CAP3_DLQ, Decision(U, unsupported_call="nack(requeue=false)")),
    # retry() without a declaration: nack(true) -> unsupported, NOT redelivered
    ("retry", None, 1, NOTHING, Decision(U, unsupported_call="nack(requeue=true)")),
    ("retry", None, 40, NOTHING, Decision(U, unsupported_call="nack(requeue=true)")),
    # retry() with a declaration: a copy now below the cap
    ("retry", None, 1, CAP3, Decision(Action.COPY, 0.0, "retry")),
    ("retry", None, 2, CAP3, Decision(Action.COPY, 0.0, "retry")),
    ("retry", None, 3, CAP3, Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True)),
    ("retry", None, 2, CAP3_DLQ, Decision(Action.COPY, 0.0, "retry")),
    ("retry", None, 3, CAP3_DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter", at_cap=True)),
    ("retry", None, 1, DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter")),
    # retry_after(d): delayed copy; d == 0 is a copy now; no declaration still copies (circulates)
    ("retry_after", 5.0, 1, NOTHING, Decision(Action.DELAYED_COPY, 5.0, "retry")),
    ("retry_after", 5.0, 1000, NOTHING, Decision(Action.DELAYED_COPY, 5.0, "retry")),
    ("retry_after", 0.0, 1, NOTHING, Decision(Action.COPY, 0.0, "retry")),
    ("retry_after", 0.0, 2, CAP3, Decision(Action.COPY, 0.0, "retry")),
    ("retry_after", 2.5, 2, CAP3, Decision(Action.DELAYED_COPY, 2.5, "retry")),
    # at the cap: reject (no DLQ) or dead letter now, the delay ignored
    (
        "retry_after",
        5.0,
        3,
        CAP3,
        Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True),
    ),
    (
        "retry_after",
        5.0,
        4,
        CAP3,
        Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True),
    ),
    ("retry_after", 5.0, 2, CAP3_DLQ, Decision(Action.DELAYED_COPY, 5.0, "retry")),
    ("retry_after", 5.0, 3, CAP3_DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter", at_cap=True)),
    ("retry_after", 5.0, 7, CAP3_DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter", at_cap=True)),
    # a dead-letter key without a cap sends every retry there, at once, never "at cap"
    ("retry_after", 5.0, 1, DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter")),
    ("retry_after", 0.0, 1, DLQ, Decision(Action.DEAD_LETTER, 0.0, "dead_letter")),
    # max_attempts=1: the first delivery is already at the cap
    ("retry", None, 1, CAP1, Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True)),
    (
        "retry_after",
        1.0,
        1,
        CAP1,
        Decision(Action.REJECTED, unsupported_call="nack(requeue=false)", at_cap=True),
    ),
]


@pytest.mark.parametrize("transport", ["file", "pipe"])
@pytest.mark.parametrize(("kind", "delay", "attempt", "decl", "expected"), TABLE)
def test_decide_table(kind, delay, attempt, decl, expected, transport):
    assert decide(kind, delay, attempt, decl, transport) == expected


def test_the_cap_counts_the_first_delivery():
    # max_attempts=n: attempts 1..n-1 are retried, attempt n is not
    for n in range(1, 6):
        decl = Declaration(max_attempts=n)
        actions = [decide("retry", None, a, decl, "file").action for a in range(1, n + 1)]
        assert actions == [Action.COPY] * (n - 1) + [Action.REJECTED]


def test_declares_nothing():
    assert NOTHING.declares_nothing
    assert not CAP3.declares_nothing
    assert not DLQ.declares_nothing


def test_decide_refuses_unknown_transport_and_outcome():
    with pytest.raises(ValueError, match="transport"):
        decide("ack", None, 1, NOTHING, "kafka")
    with pytest.raises(ValueError, match="unknown outcome"):
        decide("requeue", None, 1, CAP3, "file")


def test_action_values():
    assert [str(a) for a in Action] == ["unsupported", "copy", "delayed-copy", "dead-letter", "rejected"]
