"""Lesson 07's exercises: a retry policy that meets a goal without hammering the failing service, and what
``--keep-count`` does to a redriven dead letter (measured by running a redrive)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nbkit.notebook.exercises import Choice, Count, Exercise, Instance, Parts, WrongAnswer, register

if TYPE_CHECKING:
    from nbkit.notebook.simulate import RetryPolicy
    from nbkit.runtime.delivery import Delivery
    from nbkit.runtime.outcome import HandlerOutcome

__all__ = [
    "KEEP_COUNT",
    "POLICY_GOAL",
    "POLICY_GOAL_DEAD_SHARE",
    "POLICY_GOAL_MAX_ATTEMPTS",
    "POLICY_GOAL_MAX_WAIT",
    "POLICY_GOAL_MIN_DELAY",
]

#: The goal of exercise 07-policy-goal: at most this share of dead letters, no wait longer than this...
POLICY_GOAL_DEAD_SHARE = 0.01
POLICY_GOAL_MAX_WAIT = 60.0
#: ... and room for the failing service to recover: no retry sooner than this, no more attempts than this.
POLICY_GOAL_MIN_DELAY = 1.0
POLICY_GOAL_MAX_ATTEMPTS = 10


def _policy_class() -> type:
    from nbkit.notebook.simulate import RetryPolicy

    return RetryPolicy


def _storm_reason(policy: RetryPolicy) -> str | None:
    """Why a policy hammers a failing service, or None."""
    delays = policy.delays()
    shortest = min(delays) * (1 - policy.jitter) if delays else None
    if shortest is not None and shortest < POLICY_GOAL_MIN_DELAY:
        return (
            f"a retry {shortest:g} s after a failure is a retry storm: every failing message comes straight "
            f"back, {policy.max_attempts} times, at a payment service that is already failing, and the "
            f"messages behind it pile on. Wait at least {POLICY_GOAL_MIN_DELAY:g} s before any retry."
        )
    if policy.max_attempts > POLICY_GOAL_MAX_ATTEMPTS:
        return (
            f"{policy.max_attempts} attempts per message multiply the load on a failing service by up to "
            f"{policy.max_attempts}: stop within {POLICY_GOAL_MAX_ATTEMPTS} attempts and let the dead-letter key "
            "keep the rest."
        )
    return None


def _policy_reason(policy: RetryPolicy, *, workload: Any, seed: int = 0, **_: Any) -> str | None:
    """None when ``policy`` meets the goal on both transports, or the reason it does not."""
    from nbkit.notebook.simulate import Workload, policy_summary, simulate

    if isinstance(workload, dict):
        workload = Workload(**workload)
    storm = _storm_reason(policy)
    if storm:
        return storm
    summary = policy_summary(simulate(workload, policy, seed=seed))
    share = float(summary["dead-lettered"].max()) / workload.messages
    wait = float(summary["longest wait (s)"].max())
    rejected = int(summary["rejected"].max())
    if rejected:
        return (
            f"{rejected} messages were rejected: without a dead-letter key they are lost, not kept for later. "
            "Keep dead_letter=True."
        )
    if share > POLICY_GOAL_DEAD_SHARE and wait > POLICY_GOAL_MAX_WAIT:
        return f"{share:.1%} dead letters and a wait of {wait:g} s: both goals missed."
    if share > POLICY_GOAL_DEAD_SHARE:
        return (
            f"{share:.1%} of the messages end as dead letters (goal: at most 1%). Each attempt fails "
            "independently here: how many tries make a run of failures that long rare enough?"
        )
    if wait > POLICY_GOAL_MAX_WAIT:
        return (
            f"a message waited {wait:g} s (goal: at most 60 s). The slowest message is one that fails every "
            "attempt: add up its delays, and make the sum fit."
        )
    return None


POLICY_GOAL = register(
    Exercise(
        "07-policy-goal",
        Instance(_policy_class(), "a policy: RetryPolicy(max_attempts=..., delay=..., backoff=...)"),
        lambda **_: _policy_class()(max_attempts=10, delay=2.0, backoff="fixed"),
        explain="the policy keeps dead letters under 1 %, no message waits more than a minute, and the failing "
        "service gets at least a second between tries and at most 10 tries per message, on the file and on the "
        "pipe.",
        hint="predict from the workload: how many attempts make 'every attempt failed' rare enough, and how "
        "long does a message that fails every attempt wait in total?",
        wrong=(
            WrongAnswer(
                "retry at once, many times",
                lambda **_: _policy_class()(max_attempts=30, delay=0, backoff="fixed"),
                lambda right, **_: _storm_reason(_policy_class()(max_attempts=30, delay=0, backoff="fixed")) or "",
            ),
            WrongAnswer(
                "more attempts need no dead-letter key",
                lambda **_: _policy_class()(max_attempts=10, delay=2.0, backoff="fixed", dead_letter=False),
                "with dead_letter=False a message that fails every attempt is rejected and lost; the goal "
                "counts it, and nobody can redrive it later. Keep dead_letter=True.",
                matches=lambda answer, right, **_: not answer.dead_letter,
            ),
            WrongAnswer(
                "exponential backoff from 1 s, many attempts",
                lambda **_: _policy_class()(max_attempts=10, delay=1.0, backoff="exponential"),
                lambda right, **c: (
                    _policy_reason(_policy_class()(max_attempts=10, delay=1.0, backoff="exponential"), **c) or ""
                ),
            ),
        ),
        accept=lambda answer, **context: _policy_reason(answer, **context),
        prompt="a RetryPolicy(max_attempts=..., delay=..., backoff=...)",
    )
)


def _keep_count_run(max_attempts: int, keep_count: bool) -> tuple[int, str]:
    """(attempt the fixed service sees, where its next failure goes) for a redriven dead letter, measured."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER, redrive
    from nbkit.transport.positions import FilePosition

    def subscribe(broker: FileBroker, handler: Callable[[Delivery], HandlerOutcome | None]) -> None:
        broker.subscriber(
            "orders", start_at=FilePosition.beginning(), max_attempts=max_attempts, dead_letter="orders.dead"
        )(handler)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "orders.ss")
        broken = FileBroker(path)
        subscribe(broken, lambda d: HandlerOutcome.retry_after(1))
        session = Session(App(broken))
        broken.publish("orders", '{"id": 1}')
        session.run()
        session.close()
        redrive(path, source="orders.dead", target="orders", keep_count=keep_count, clock=session.clock)
        fixed = FileBroker(path)  # still failing for the redriven message: where does it go next?
        subscribe(fixed, lambda d: HandlerOutcome.retry_after(1) if REDRIVEN_FROM_HEADER in d.headers else None)
        session = Session(App(fixed))
        event = next(e for e in session.run() if e.redriven)
        session.close()
    return event.attempt, str(event.destination)


KEEP_COUNT = register(
    Exercise(
        "07-keep-count",
        Parts(("attempt", Count()), ("next key", Choice(describe="a stream key"))),
        lambda *, max_attempts, **_: _keep_count_run(max_attempts, True),
        explain=lambda right, **_: (
            f"the dead letter kept its retry count, so it arrives as attempt {right[0]}: already past the cap "
            f"(the runtime checks attempt >= max_attempts first), so one more failure sends it straight to "
            f"{right[1]!r}. --keep-count is for a fix you trust; the default reset gives it a full budget again."
        ),
        hint="a dead-letter copy carries x-ruststream-retry-count; what is that count for a message that used "
        "every attempt, what attempt does it make the next delivery, and what does the runtime do with a retry "
        "at or past the cap?",
        wrong=(
            WrongAnswer(
                "keep-count resets like the default",
                lambda **_: (1, "orders"),
                "attempt 1 is what the default redrive gives (the count is reset); --keep-count keeps the dead "
                "letter's x-ruststream-retry-count.",
                matches=lambda answer, right, **_: answer[0] == 1,
            ),
            WrongAnswer(
                "a kept count still gets one more ordinary retry",
                lambda *, max_attempts, **_: (max_attempts + 1, "orders"),
                "compare that attempt with max_attempts: the runtime checks the cap before the copy goes "
                "anywhere, so where does a failure at or past the cap go?",
                matches=lambda answer, right, **_: answer[1] == "orders",
            ),
            WrongAnswer(
                "the dead letter's count is the attempt",
                lambda *, max_attempts, **_: (max_attempts, "orders.dead"),
                "the retry count says how many attempts were made; the next delivery is one more than that.",
                matches=lambda answer, right, **_: answer[0] == right[0] - 1,
            ),
        ),
    )
)
