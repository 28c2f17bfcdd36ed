"""Lesson 00's exercises: one order's journey through the demo handler, and a tighter cap."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from nbkit.notebook.exercise_bank.runs import file_session
from nbkit.notebook.exercises import Count, Exercise, Number, Parts, WrongAnswer, register

__all__ = ["CAP_TWO", "RETRY_JOURNEY"]

#: The demo registration's cap (nbkit.notebook.demo.MAX_ATTEMPTS): the count a learner may carry over.
_DEMO_CAP = 4


def _journey(*, fails: int, **_: Any) -> tuple[int, float]:
    """Deliveries of one demo order whose payment fails ``fails`` times, and seconds until its last one."""
    from nbkit.notebook.demo import run_file

    with tempfile.TemporaryDirectory() as tmp:
        events = run_file(os.path.join(tmp, "orders.ss"), [{"id": 1, "fails": fails, "valid": True}]).events
    span = (events["time"].max() - events["time"].min()).total_seconds()
    return len(events), float(span)


def _delays(attempts: range) -> float:
    return float(sum(2**a for a in attempts))


RETRY_JOURNEY = register(
    Exercise(
        "00-retry-journey",
        Parts(("deliveries", Count()), ("seconds", Number())),
        _journey,
        explain=lambda right, *, fails, **_: (
            f"{fails} failures mean {fails} retry copies and one more delivery, the one that succeeds; only "
            "the deliveries that failed asked for a delay (2 ** attempt), and those delays add up. The "
            "delivery that succeeds schedules nothing."
        ),
        hint="list the deliveries one by one (attempt 1, 2, ...): which fail, what delay does each failure ask "
        "for, and which one ends the journey?",
        wrong=(
            WrongAnswer(
                "only the failed deliveries count",
                lambda *, fails, **c: (fails, _journey(fails=fails)[1]),
                "the delivery that succeeds is a delivery too: count from attempt 1 up to the first attempt "
                "that does not fail.",
                matches=lambda answer, right, *, fails, **_: answer[0] == fails,
            ),
            WrongAnswer(
                "every order waits until the cap",
                lambda *, fails, **_: (fails + 1, _delays(range(1, _DEMO_CAP))),
                "that is how long an order that never succeeds waits. This one stops retrying as soon as its "
                "payment goes through: only the attempts that failed schedule a copy.",
                matches=lambda answer, right, **_: answer[1] == _delays(range(1, _DEMO_CAP)),
            ),
            WrongAnswer(
                "the delay belongs to the copy's attempt",
                lambda *, fails, **_: (fails + 1, _delays(range(2, fails + 2))),
                "the delay is 2 ** attempt of the delivery that failed (attempt 1 asks for 2 s), not of the "
                "copy it schedules.",
                matches=lambda answer, right, *, fails, **_: answer[1] == _delays(range(2, fails + 2)),
            ),
        ),
    )
)


def _orders(orders: int, seed: int) -> list[dict[str, Any]]:
    from nbkit.notebook.demo import make_orders

    return make_orders(orders, seed=seed)


def _failing_from(orders: int, seed: int, fails: int) -> int:
    """Valid orders whose payment fails at least ``fails`` times."""
    return sum(1 for o in _orders(orders, seed) if o["valid"] and o["fails"] >= fails)


def _cap_two(*, orders: int, seed: int, max_attempts: int, **_: Any) -> int:
    """File dead letters of the demo workload if the registration allowed ``max_attempts`` (measured)."""
    from nbkit.notebook.demo import DEAD_LETTER, handle_order
    from nbkit.runtime.settle import Action

    workload = [json.dumps(o) for o in _orders(orders, seed)]
    with tempfile.TemporaryDirectory() as tmp:
        session, _path = file_session(
            tmp, "orders.ss", "orders", handle_order, workload, max_attempts=max_attempts, dead_letter=DEAD_LETTER
        )
        return int((session.events["action"] == Action.DEAD_LETTER).sum())


CAP_TWO = register(
    Exercise(
        "00-cap-two",
        Count("a number of dead letters"),
        _cap_two,
        explain=lambda right, *, max_attempts, **_: (
            f"an order becomes a dead letter when its handler still asks for a retry on attempt {max_attempts}, "
            f"the cap: every valid order whose payment fails {max_attempts} times or more. Invalid orders are "
            "dropped and never reach the dead-letter key."
        ),
        hint="an order becomes a dead letter when its handler still asks for a retry on the last allowed "
        "attempt. Look at each order's 'fails' and 'valid' and at what handle_order does with an invalid order.",
        wrong=(
            WrongAnswer(
                "one failure is enough",
                lambda *, orders, seed, max_attempts, **_: _failing_from(orders, seed, max_attempts - 1),
                "max_attempts=2 still allows one retry: an order that fails once is delivered again, as "
                "attempt 2, and its payment goes through.",
            ),
            WrongAnswer(
                "max_attempts counts retries",
                lambda *, orders, seed, max_attempts, **_: _failing_from(orders, seed, max_attempts + 1),
                "max_attempts counts deliveries, the first one included, not retries: attempt 2 is already "
                "the cap, so an order that fails exactly twice asks for a retry there.",
            ),
            WrongAnswer(
                "the demo's cap carried over",
                lambda *, orders, seed, **_: _failing_from(orders, seed, _DEMO_CAP),
                "that is the count under the demo's cap of 4. With a lower cap, more orders are still failing "
                "when they reach it.",
            ),
        ),
    )
)
