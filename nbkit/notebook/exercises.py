"""Checks for the tutorial notebooks' exercises: each says whether an answer is right, and why.

>>> from nbkit.exercises import check
>>> check("01-busiest-key", ("event", 22), path="data/sample-1.ss")     # doctest: +SKIP
Right: 'event' has 22 messages, more than any other key.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check: ``ok`` and the explanation shown to the learner."""

    ok: bool
    message: str

    def __repr__(self) -> str:
        return ("Right: " if self.ok else "Not yet: ") + self.message

    def __bool__(self) -> bool:
        return self.ok


_CHECKS: dict[str, Callable[..., Verdict]] = {}
_EXPECTED: dict[str, Callable[..., Any]] = {}


def _exercise(name: str, *, expected: Callable[..., Any] | None = None):
    """Register a check under ``name``; ``expected(**context)`` computes the right answer (used by the tests
    that make sure no lesson prints an exercise's answer before asking it)."""

    def register(fn: Callable[..., Verdict]) -> Callable[..., Verdict]:
        _CHECKS[name] = fn
        if expected is not None:
            _EXPECTED[name] = expected
        return fn

    return register


def check(exercise: str, answer: Any, **context: Any) -> Verdict:
    """Check ``answer`` for ``exercise`` (the id printed in the notebook); returns a Verdict."""
    fn = _CHECKS.get(exercise)
    if fn is None:
        raise KeyError(f"no exercise {exercise!r}; known: {', '.join(sorted(_CHECKS))}")
    return fn(answer, **context)


def exercises() -> list[str]:
    """The ids of every exercise with a check."""
    return sorted(_CHECKS)


def expected(exercise: str, **context: Any) -> Any:
    """The right answer to ``exercise`` in the given context (what a solution cell computes)."""
    fn = _EXPECTED.get(exercise)
    if fn is None:
        raise KeyError(f"exercise {exercise!r} states no expected answer; register it with expected=...")
    return fn(**context)


@_exercise("00-dead-letters")
def _dead_letters(answer: Any, **_: Any) -> Verdict:
    from nbkit.notebook.demo import run_demo

    with tempfile.TemporaryDirectory() as tmp:
        events = run_demo(tmp, png=False).events
    expected = int(((events["transport"] == "file") & (events["action"] == "dead-letter")).sum())
    if answer == expected:
        return Verdict(True, f"{expected} orders used up their 4 attempts and went to 'orders.dead'.")
    return Verdict(
        False,
        f"{answer!r} is not the count. Filter the events to transport 'file' and action 'dead-letter', "
        "then count the rows: each dead-letter copy is one settlement.",
    )


@_exercise("01-busiest-key")
def _busiest(answer: Any, *, path: str | os.PathLike, **_: Any) -> Verdict:
    from nbkit.notebook.frames import read_stream

    counts = read_stream(path).groupby("stream_key", observed=True).size()
    key = str(counts.idxmax())
    n = int(counts.max())
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Verdict(False, "answer with a pair: (stream key, number of messages).")
    if answer == (key, n):
        return Verdict(True, f"{key!r} has {n} messages, more than any other key.")
    if answer[0] == key:
        return Verdict(False, f"{key!r} is the right key, but it has {n} messages, not {answer[1]!r}.")
    return Verdict(False, "group the DataFrame by 'stream_key' and count the rows of each group.")


@_exercise("02-resume-position")
def _resume(answer: Any, *, last_processed: int, **_: Any) -> Verdict:
    from nbkit.transport.positions import FilePosition

    right = FilePosition.sequence(last_processed + 1)
    if answer == right:
        return Verdict(
            True, f"sequence({last_processed + 1}) is inclusive, so the service starts at the first message "
            "it has not processed yet."
        )
    if answer == FilePosition.sequence(last_processed):
        return Verdict(
            False, f"sequence({last_processed}) is inclusive: message {last_processed} would be handled twice."
        )
    return Verdict(False, "resume with FilePosition.sequence(n), n being the next sequence to process.")


@_exercise("03-attempts")
def _attempts(answer: Any, *, max_attempts: int, **_: Any) -> Verdict:
    right = (max_attempts, max_attempts)
    if answer == right:
        return Verdict(
            True, f"the handler runs {max_attempts} times (attempts 1..{max_attempts}); the dead-letter copy "
            f"carries x-ruststream-retry-count {max_attempts} (the count incremented once more)."
        )
    if isinstance(answer, tuple) and len(answer) == 2 and answer[0] == max_attempts:
        return Verdict(
            False, "the number of calls is right; the dead-letter copy's header is the delivery's count + 1."
        )
    return Verdict(
        False, "max_attempts counts the first delivery; the cap is checked before each copy (attempt >= max)."
    )


@_exercise("04-pipe-start")
def _pipe_start(answer: Any, **_: Any) -> Verdict:
    if answer == "out_retry":
        return Verdict(True, "a pipe registration must name where its retry copies go: out_retry='key'.")
    if answer in ("dead_letter", "max_attempts"):
        return Verdict(False, f"{answer} does not matter: every pipe registration is checked, retrying or not.")
    return Verdict(False, "read the RetryDestinationError message: it names the option to add.")


@_exercise("05-busiest-delay")
def _busiest_delay(answer: Any, *, events: Any, **_: Any) -> Verdict:
    delayed = events[events["action"] == "delayed-copy"]
    counts = delayed.groupby("delay").size()
    expected = float(counts.idxmax())
    if answer == expected:
        return Verdict(True, f"{expected:g} s is the most scheduled delay ({int(counts.max())} copies).")
    return Verdict(
        False, "keep the 'delayed-copy' events, group them by 'delay' and take the delay with the most rows."
    )


# --- 07-retry-policies ---
#: The goal of exercise 07-policy-goal: at most this share of dead letters, no wait longer than this.
POLICY_GOAL_DEAD_SHARE = 0.01
POLICY_GOAL_MAX_WAIT = 60.0


def _policy_goal_expected(**_: Any) -> Any:
    from nbkit.notebook.simulate import RetryPolicy

    return RetryPolicy(max_attempts=10, delay=2.0, backoff="fixed")


@_exercise("07-policy-goal", expected=_policy_goal_expected)
def _policy_goal(answer: Any, *, workload: Any, seed: int = 0, **_: Any) -> Verdict:
    """``workload`` is a Workload or the dict of its fields (a literal the lesson tests can read)."""
    from nbkit.notebook.simulate import RetryPolicy, Workload, policy_summary, simulate

    if isinstance(workload, dict):
        workload = Workload(**workload)
    if not isinstance(answer, RetryPolicy):
        return Verdict(False, "answer with a policy: RetryPolicy(max_attempts=..., delay=..., backoff=...).")
    summary = policy_summary(simulate(workload, answer, seed=seed))
    share = float(summary["dead-lettered"].max()) / workload.messages
    wait = float(summary["longest wait (s)"].max())
    rejected = int(summary["rejected"].max())
    if rejected:
        return Verdict(False, f"{rejected} messages were rejected: without a dead-letter key they are lost, "
                       "not kept for later. Keep dead_letter=True.")
    if share > POLICY_GOAL_DEAD_SHARE and wait > POLICY_GOAL_MAX_WAIT:
        return Verdict(False, f"{share:.1%} dead letters and a wait of {wait:g} s: both goals missed.")
    if share > POLICY_GOAL_DEAD_SHARE:
        return Verdict(False, f"{share:.1%} of the messages end as dead letters (goal: at most 1%). Each attempt "
                       "fails independently here: how many tries make a run of failures that long rare enough?")
    if wait > POLICY_GOAL_MAX_WAIT:
        return Verdict(False, f"a message waited {wait:g} s (goal: at most 60 s). The slowest message is one that "
                       "fails every attempt: add up its delays, and make the sum fit.")
    return Verdict(True, f"{share:.1%} dead letters, the longest wait {wait:g} s, on the file and on the pipe.")


def _keep_count_run(max_attempts: int, keep_count: bool) -> tuple[int, str]:
    """(attempt the fixed service sees, where its next failure goes) for a redriven dead letter, measured."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER, redrive
    from nbkit.transport.positions import FilePosition

    options = {"start_at": FilePosition.beginning(), "max_attempts": max_attempts, "dead_letter": "orders.dead"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "orders.ss")
        broken = FileBroker(path)
        broken.subscriber("orders", **options)(lambda d: HandlerOutcome.retry_after(1))
        session = Session(App(broken))
        broken.publish("orders", '{"id": 1}')
        session.run()
        session.close()
        redrive(path, source="orders.dead", target="orders", keep_count=keep_count, clock=session.clock)
        fixed = FileBroker(path)  # still failing for the redriven message: where does it go next?
        fixed.subscriber("orders", **options)(
            lambda d: HandlerOutcome.retry_after(1) if REDRIVEN_FROM_HEADER in d.headers else None
        )
        session = Session(App(fixed))
        event = next(e for e in session.run() if e.redriven)
        session.close()
    return event.attempt, str(event.destination)


@_exercise("07-keep-count", expected=lambda *, max_attempts, **_: _keep_count_run(max_attempts, True))
def _keep_count(answer: Any, *, max_attempts: int, **_: Any) -> Verdict:
    right = _keep_count_run(max_attempts, True)
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Verdict(False, "answer with a pair: (attempt number, key the next failure goes to).")
    if answer == right:
        return Verdict(True, f"the dead letter kept retry count {right[0] - 1}, so it arrives as attempt {right[0]}: "
                       f"past the cap (attempt >= max_attempts): one more failure sends it straight to {right[1]!r}.")
    if answer[0] == 1:
        return Verdict(False, "attempt 1 is what the default redrive gives (the count is reset); --keep-count "
                       "keeps the dead letter's x-ruststream-retry-count.")
    if answer[0] == right[0]:
        return Verdict(False, "the attempt is right; compare it with max_attempts: the cap is checked first.")
    return Verdict(False, "a dead-letter copy carries the retry count of the attempts made; attempt = count + 1.")
