"""Checks for the tutorial notebooks' exercises: each says whether an answer is right, and why.

Every exercise poses a situation the lesson has not shown; the learner predicts, runs, and passes the answer
to :func:`check`, which recomputes the right answer by running the runtime (or reading the data) and says
why an answer is right, or gives a hint that does not give it away. :func:`expected` returns that right
answer (the lesson tests use it to make sure no output above an exercise prints it).

>>> from nbkit.exercises import check
>>> check("02-resume-position", None, last_processed=7)
Not yet: resume with FilePosition.sequence(n): which n is the first message not processed yet?
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """The outcome of a check: ``ok`` and the explanation shown to the learner.

    It shows as ``Right: ...`` or ``Not yet: ...`` and is true when the answer is right.

    Parameters
    ----------
    ok : bool
        Whether the answer is right.
    message : str
        The explanation, or on a wrong answer a hint that does not give the answer away.

    Examples
    --------
    >>> from nbkit.exercises import Verdict
    >>> verdict = Verdict(False, "count the dead-letter rows of the file transport only.")
    >>> verdict
    Not yet: count the dead-letter rows of the file transport only.
    >>> bool(verdict)
    False
    """

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
    """Check ``answer`` for ``exercise`` (the id printed in the notebook); returns a Verdict.

    Parameters
    ----------
    exercise : str
        The exercise id, such as ``"03-attempts"`` (see :func:`exercises`).
    answer : object
        The learner's answer.
    **context
        What the check needs from the notebook (a path, a session...), as the exercise cell passes it.

    Returns
    -------
    Verdict
        Right, or not yet with a hint.

    Raises
    ------
    KeyError
        If there is no exercise of that id.

    Examples
    --------
    >>> from nbkit.exercises import check
    >>> check("00-dead-letters", 12)                # doctest: +SKIP
    Not yet: ...
    >>> try:
    ...     check("99-no-such-exercise", 1)
    ... except KeyError:
    ...     print("unknown id")
    unknown id
    """
    fn = _CHECKS.get(exercise)
    if fn is None:
        raise KeyError(f"no exercise {exercise!r}; known: {', '.join(sorted(_CHECKS))}")
    return fn(answer, **context)


def exercises() -> list[str]:
    """The ids of every exercise with a check.

    Returns
    -------
    list of str
        Sorted; the first two characters are the lesson number.

    Examples
    --------
    >>> from nbkit.exercises import exercises
    >>> all(name[:2].isdigit() and name[2] == "-" for name in exercises())
    True
    """
    return sorted(_CHECKS)


def expected(exercise: str, **context: Any) -> Any:
    """The right answer to ``exercise`` in the given context (what a solution cell computes).

    Parameters
    ----------
    exercise : str
        The exercise id.
    **context
        The same context the notebook passes to :func:`check`.

    Returns
    -------
    object
        The answer :func:`check` accepts.

    Raises
    ------
    KeyError
        If the exercise states no expected answer.

    Examples
    --------
    >>> from nbkit.exercises import expected
    >>> try:
    ...     expected("99-no-such-exercise")
    ... except KeyError as err:
    ...     print("no expected answer")
    no expected answer
    """
    fn = _EXPECTED.get(exercise)
    if fn is None:
        raise KeyError(f"exercise {exercise!r} states no expected answer; register it with expected=...")
    return fn(**context)


# -- shared helpers: each runs a small, fresh service in a temporary folder ------------------------------


def _file_session(tmp: str, name: str, key: str, handler: Callable[..., Any], payloads: list[str], **options: Any):
    """Run ``handler`` on a fresh stream file holding ``payloads`` under ``key``; returns (session, path)."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.transport.positions import FilePosition

    path = os.path.join(tmp, name)
    broker = FileBroker(path)
    broker.subscriber(key, start_at=FilePosition.beginning(), **options)(handler)
    session = Session(App(broker))
    for payload in payloads:
        broker.publish(key, payload)
    session.run()
    return session, path


def _is_pair(answer: Any) -> bool:
    return isinstance(answer, tuple) and len(answer) == 2


def _same_number(answer: Any, right: float) -> bool:
    """True when ``answer`` is a number (or a pandas Timedelta) equal to ``right`` seconds."""
    seconds = getattr(answer, "total_seconds", None)
    if callable(seconds):
        answer = seconds()
    return isinstance(answer, (int, float)) and not isinstance(answer, bool) and abs(answer - right) < 1e-9


# -- 00 start here ---------------------------------------------------------------------------------------


def _journey(*, fails: int, **_: Any) -> tuple[int, float]:
    """Deliveries of one demo order whose payment fails ``fails`` times, and seconds until its last one."""
    from nbkit.notebook.demo import run_file

    with tempfile.TemporaryDirectory() as tmp:
        events = run_file(os.path.join(tmp, "orders.ss"), [{"id": 1, "fails": fails, "valid": True}]).events
    span = (events["time"].max() - events["time"].min()).total_seconds()
    return len(events), float(span)


@_exercise("00-retry-journey", expected=_journey)
def _check_journey(answer: Any, *, fails: int, **_: Any) -> Verdict:
    deliveries, seconds = _journey(fails=fails)
    if not _is_pair(answer):
        return Verdict(False, "answer with a pair: (number of deliveries, seconds from the first to the last).")
    if answer[0] == deliveries and _same_number(answer[1], seconds):
        return Verdict(
            True,
            f"{fails} failures mean {fails} retry copies, so {deliveries} deliveries; the copies waited "
            f"{' + '.join(str(2**a) for a in range(1, fails + 1))} = {seconds:g} s in all.",
        )
    if answer[0] != deliveries:
        return Verdict(
            False,
            "count the deliveries again: the handler retries while delivery.attempt <= fails, and the "
            "first delivery is attempt 1.",
        )
    return Verdict(
        False,
        "the number of deliveries is right; each copy waits 2 ** attempt seconds, where "
        "attempt is the delivery that failed.",
    )


def _cap_two(*, orders: int, seed: int, max_attempts: int, **_: Any) -> int:
    """File dead letters of the demo workload if the registration allowed ``max_attempts``."""
    import json

    from nbkit.notebook.demo import DEAD_LETTER, handle_order, make_orders

    workload = [json.dumps(o) for o in make_orders(orders, seed=seed)]
    with tempfile.TemporaryDirectory() as tmp:
        session, _path = _file_session(
            tmp, "orders.ss", "orders", handle_order, workload, max_attempts=max_attempts, dead_letter=DEAD_LETTER
        )
        return int((session.events["action"] == "dead-letter").sum())


@_exercise("00-cap-two", expected=_cap_two)
def _check_cap_two(answer: Any, *, orders: int, seed: int, max_attempts: int, **_: Any) -> Verdict:
    right = _cap_two(orders=orders, seed=seed, max_attempts=max_attempts)
    if answer == right and not isinstance(answer, bool):
        return Verdict(
            True,
            f"{right} orders still fail on attempt {max_attempts}: at the cap their copy goes to "
            "'orders.dead' instead of back to 'orders'.",
        )
    return Verdict(
        False,
        f"an order becomes a dead letter when its handler still asks for a retry on attempt "
        f"{max_attempts}. Look at each order's 'fails' and 'valid' in make_orders({orders}, seed={seed}) "
        "and at what handle_order does with an invalid order.",
    )


# -- 01 stream files -------------------------------------------------------------------------------------


def _seqs(*, keys: str, **_: Any) -> list[int]:
    """The sequence numbers a fresh file gives messages published under ``keys`` (one letter, one key)."""
    from nbkit.runtime.file_broker import FileBroker

    with tempfile.TemporaryDirectory() as tmp:
        broker = FileBroker(os.path.join(tmp, "keys.ss"))
        seqs = [broker.publish(key, "x").seq for key in keys]
        broker.shutdown()
    return seqs


@_exercise("01-seq-per-key", expected=_seqs)
def _check_seqs(answer: Any, *, keys: str, **_: Any) -> Verdict:
    right = _seqs(keys=keys)
    if not isinstance(answer, list) or len(answer) != len(keys):
        return Verdict(False, f"answer with a list of {len(keys)} sequence numbers, one per message, in order.")
    if answer == right:
        return Verdict(True, f"each stream key counts its own messages from 1: {right}.")
    return Verdict(
        False,
        "not every number is right. Look at the 'seq' column of data/sample-1.ss per stream key: where "
        "does each key's first message start, and does another key's message move the count?",
    )


def _after(*, path: str | os.PathLike, key: str, seq: int, **_: Any) -> list[int]:
    """The ``key`` sequence numbers a reader starting at the timestamp of ``key`` message ``seq`` returns."""
    from nbkit.notebook.frames import read_stream
    from nbkit.transport.positions import FilePosition

    frame = read_stream(path, keys=key)
    ts = frame.loc[frame["seq"] == seq, "timestamp"].iloc[0]
    return [int(s) for s in read_stream(path, keys=key, start=FilePosition.timestamp(ts))["seq"]]


@_exercise("01-after-timestamp", expected=_after)
def _check_after(answer: Any, *, path: str | os.PathLike, key: str, seq: int, **_: Any) -> Verdict:
    right = _after(path=path, key=key, seq=seq)
    if not isinstance(answer, list):
        return Verdict(False, "answer with the list of sequence numbers the reader returns, such as [3, 4].")
    if answer == right:
        return Verdict(
            True,
            f"{right}: timestamp(t) starts strictly after t, so message {seq} itself (and anything "
            "else stamped t) is left out.",
        )
    return Verdict(
        False,
        "FilePosition.timestamp(t) starts strictly after t (sequence(n) includes n). Find message "
        f"{seq}'s timestamp, then list the {key!r} messages stamped later.",
    )


# -- 02 outcomes -----------------------------------------------------------------------------------------


@_exercise("02-resume-position", expected=lambda *, last_processed, **_: _position(last_processed + 1))
def _resume(answer: Any, *, last_processed: int, **_: Any) -> Verdict:
    if answer == _position(last_processed + 1):
        return Verdict(
            True,
            f"sequence({last_processed + 1}) is inclusive, so the service starts at the first message "
            "it has not processed yet.",
        )
    if answer == _position(last_processed):
        return Verdict(False, f"sequence({last_processed}) is inclusive: one message would be handled twice.")
    return Verdict(False, "resume with FilePosition.sequence(n): which n is the first message not processed yet?")


def _position(seq: int):
    from nbkit.transport.positions import FilePosition

    return FilePosition.sequence(seq)


_SCRIPTED = {"a": "ack", "d": "drop", "r": "retry", "x": "raise"}


def _scripted_handler(delivery: Any) -> Any:
    """a -> ack, d -> drop, r -> retry, x -> raise (the 02 exercise's handler)."""
    from nbkit.runtime.outcome import HandlerOutcome

    what = _SCRIPTED[delivery.text]
    if what == "raise":
        raise ValueError("payment service down")
    return getattr(HandlerOutcome, what)()


def _written(*, script: str, max_attempts: int, **_: Any) -> list[str]:
    """The payloads in the file after the scripted handler ran over ``script`` with ``max_attempts``."""
    from nbkit.notebook.frames import read_stream

    with tempfile.TemporaryDirectory() as tmp:
        _session, path = _file_session(
            tmp, "jobs.ss", "jobs", _scripted_handler, list(script), max_attempts=max_attempts
        )
        return [str(p) for p in read_stream(path)["payload"]]


@_exercise("02-what-is-written", expected=_written)
def _check_written(answer: Any, *, script: str, max_attempts: int, **_: Any) -> Verdict:
    right = _written(script=script, max_attempts=max_attempts)
    if not isinstance(answer, list):
        return Verdict(False, "answer with a list of payloads, in file order, such as ['a', 'd'].")
    if answer == right:
        return Verdict(
            True,
            f"{len(script)} published, {len(right) - len(script)} written by the runtime: only a declared "
            "retry writes a copy; ack, drop and an exception are logged and write nothing; at the cap, with no "
            "dead-letter key, the delivery is rejected.",
        )
    if answer[: len(script)] != list(script):
        return Verdict(False, "start from what was published: the file keeps every message you published, in order.")
    return Verdict(
        False,
        "only one outcome ever writes to the file, and only when the registration declares retries. "
        f"With max_attempts={max_attempts}, how many copies can one message have?",
    )


# -- 03 retries and dead letters -------------------------------------------------------------------------


def _succeeds_late(*, max_attempts: int, succeeds_on: int, **_: Any) -> tuple[int, int]:
    """(deliveries, dead letters) of a message whose handler succeeds on attempt ``succeeds_on``."""
    from nbkit.runtime.outcome import HandlerOutcome

    def handler(delivery: Any) -> Any:
        return None if delivery.attempt >= succeeds_on else HandlerOutcome.retry_after(5)

    with tempfile.TemporaryDirectory() as tmp:
        session, _path = _file_session(
            tmp, "parcels.ss", "parcels", handler, ["parcel"], max_attempts=max_attempts, dead_letter="parcels.dead"
        )
        events = session.events
    return len(events), int((events["action"] == "dead-letter").sum())


@_exercise("03-succeeds-on-cap", expected=_succeeds_late)
def _check_succeeds_late(answer: Any, *, max_attempts: int, succeeds_on: int, **_: Any) -> Verdict:
    right = _succeeds_late(max_attempts=max_attempts, succeeds_on=succeeds_on)
    if not _is_pair(answer):
        return Verdict(False, "answer with a pair: (deliveries, dead-letter copies).")
    if answer == right:
        return Verdict(
            True,
            f"attempt {succeeds_on} succeeds, so the handler never asks for a retry there and "
            "the cap is never applied.",
        )
    return Verdict(
        False, "the cap is checked only when the handler asks for a retry. Which attempt asks for the last retry here?"
    )


def _dead_letter_time(*, max_attempts: int, base: float, **_: Any) -> float:
    """Seconds from the first delivery to the dead-letter copy when each retry waits ``base * attempt``."""
    from nbkit.runtime.outcome import HandlerOutcome

    def handler(delivery: Any) -> Any:
        return HandlerOutcome.retry_after(base * delivery.attempt)

    with tempfile.TemporaryDirectory() as tmp:
        session, _path = _file_session(
            tmp, "parcels.ss", "parcels", handler, ["parcel"], max_attempts=max_attempts, dead_letter="parcels.dead"
        )
        events = session.events
    dead = events[events["action"] == "dead-letter"]
    return float((dead["time"].iloc[0] - events["time"].iloc[0]).total_seconds())


@_exercise("03-dead-letter-time", expected=_dead_letter_time)
def _check_dead_letter_time(answer: Any, *, max_attempts: int, base: float, **_: Any) -> Verdict:
    right = _dead_letter_time(max_attempts=max_attempts, base=base)
    if _same_number(answer, right):
        return Verdict(
            True,
            f"{right:g} s: the delays of the {max_attempts - 1} copies add up, and at the cap the "
            "dead-letter copy is written at once.",
        )
    return Verdict(
        False,
        f"list the deliveries 1..{max_attempts} and the delay each one asks for; which of those "
        "delays are actually waited out? (At the cap, nothing is delayed.)",
    )


# -- 04 pipes --------------------------------------------------------------------------------------------


def _stage_output(lines: list[str], key: str, out_retry: str, max_attempts: int) -> list[str]:
    """stdout of one stage that always returns retry_after(1), reading ``lines``."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.stdio_broker import StdioBroker

    stdout: list[str] = []
    broker = StdioBroker(stdin=lines, stdout=stdout)
    broker.subscriber(key, out_retry=out_retry, max_attempts=max_attempts, dead_letter="jobs.dead")(
        lambda delivery: HandlerOutcome.retry_after(1)
    )
    Session(App(broker)).run()
    return [line.rstrip("\n") for line in stdout]


def _input_lines(n: int) -> list[str]:
    return [f"[2024-01-01T00:00:0{i % 10} | jobs | {i}] job-{i}" for i in range(n)]


def _key_counts(lines: list[str]) -> dict[str, int]:
    from nbkit.notebook.frames import read_pipe

    if not lines:
        return {}
    counts = read_pipe(lines)["stream_key"].value_counts()
    return {str(k): int(v) for k, v in counts.items() if v}


def _one_stage(*, lines: int, max_attempts: int, **_: Any) -> dict[str, int]:
    """Keys and line counts on the stdout of a stage that always retries."""
    return _key_counts(_stage_output(_input_lines(lines), "jobs", "jobs.retry", max_attempts))


def _two_stages(*, lines: int, max_attempts: int, **_: Any) -> dict[str, int]:
    """Keys and line counts on the stdout of a second always-retrying stage reading the first one's copies."""
    first = _stage_output(_input_lines(lines), "jobs", "jobs.retry", max_attempts)
    return _key_counts(_stage_output(first, "jobs.retry", "jobs.retry2", max_attempts))


def _check_counts(answer: Any, right: dict[str, int], hint: str) -> Verdict:
    if not isinstance(answer, dict):
        return Verdict(False, "answer with a dict {stream key: number of stdout lines}, such as {'jobs': 1}.")
    if {k: v for k, v in answer.items() if v} == right:
        return Verdict(True, f"stdout holds {right}.")
    return Verdict(False, hint)


@_exercise("04-one-stage", expected=_one_stage)
def _check_one_stage(answer: Any, *, lines: int, max_attempts: int, **_: Any) -> Verdict:
    right = _one_stage(lines=lines, max_attempts=max_attempts)
    verdict = _check_counts(
        answer,
        right,
        "a stage reads stdin and writes stdout; does it ever read a line it "
        "wrote itself? Then: which attempt is each delivery here?",
    )
    if verdict:
        return Verdict(
            True,
            f"stdout holds {right}: each input line is attempt 1, below the cap, so it becomes one "
            "copy for the next stage; this stage never sees its copies again.",
        )
    return verdict


@_exercise("04-second-stage", expected=_two_stages)
def _check_two_stages(answer: Any, *, lines: int, max_attempts: int, **_: Any) -> Verdict:
    right = _two_stages(lines=lines, max_attempts=max_attempts)
    verdict = _check_counts(
        answer,
        right,
        "the second stage reads copies: what does their envelope say about the attempt, and what happens at the cap?",
    )
    if verdict:
        return Verdict(
            True,
            f"stdout holds {right}: the retry count travels in the envelope, so the second stage's "
            f"deliveries are already attempt {max_attempts}, at the cap.",
        )
    return verdict


# -- 05 analysis -----------------------------------------------------------------------------------------


def _demo_file(orders: int, seed: int):
    """The demo's stream file for this workload, read with JSON payloads (one row per message)."""
    from nbkit.notebook.demo import run_demo
    from nbkit.notebook.frames import read_stream

    with tempfile.TemporaryDirectory() as tmp:
        return read_stream(run_demo(tmp, orders=orders, seed=seed, png=False).stream_file, payload="json")


def _dead_item(*, orders: int, seed: int, **_: Any) -> str:
    """The item that most often ends as a dead letter on the file."""
    frame = _demo_file(orders, seed)
    dead = frame[frame["stream_key"] == "orders.dead"]
    return str(dead["payload.item"].value_counts().idxmax())


@_exercise("05-dead-items", expected=_dead_item)
def _check_dead_item(answer: Any, *, orders: int, seed: int, **_: Any) -> Verdict:
    right = _dead_item(orders=orders, seed=seed)
    if answer == right:
        return Verdict(True, f"{right!r} has the most dead letters.")
    return Verdict(
        False, "read the file with payload='json', keep the 'orders.dead' rows and count them per 'payload.item'."
    )


def _time_to_dead(*, orders: int, seed: int, **_: Any) -> float:
    """Seconds from an order's first delivery to its dead-letter copy (the same for every spent order)."""
    frame = _demo_file(orders, seed)
    first = frame[frame["stream_key"] == "orders"].groupby("payload.id")["timestamp"].min()
    dead = frame[frame["stream_key"] == "orders.dead"].set_index("payload.id")["timestamp"]
    spans = (dead - first.loc[dead.index]).dt.total_seconds()
    return float(spans.median())


@_exercise("05-time-to-dead", expected=_time_to_dead)
def _check_time_to_dead(answer: Any, *, orders: int, seed: int, **_: Any) -> Verdict:
    right = _time_to_dead(orders=orders, seed=seed)
    if _same_number(answer, right):
        return Verdict(True, f"{right:g} s: the three delays 2, 4 and 8 s, then the dead-letter copy at once.")
    return Verdict(
        False,
        "match each dead letter to its order by 'payload.id' and subtract the first timestamp of "
        "that order under 'orders'; or add up the delays the handler asks for before the cap.",
    )


# -- 06 scale --------------------------------------------------------------------------------------------


def _dead_letters(*, orders: int, seed: int, **_: Any) -> int:
    """How many of the demo workload's orders end as dead letters (valid, and failing on all 4 attempts)."""
    from nbkit.notebook.demo import MAX_ATTEMPTS, make_orders

    return sum(1 for o in make_orders(orders, seed=seed) if o["valid"] and o["fails"] >= MAX_ATTEMPTS)


@_exercise("06-dead-letters", expected=_dead_letters)
def _check_dead_letters(answer: Any, *, orders: int, seed: int, **_: Any) -> Verdict:
    right = _dead_letters(orders=orders, seed=seed)
    if answer == right and not isinstance(answer, bool):
        return Verdict(True, f"{right:,} dead letters: every valid order whose payment still fails on attempt 4.")
    return Verdict(
        False,
        "predict from the orders: which ones are still failing when attempt 4 asks for a retry? "
        "To count in the file, keep the 'orders.dead' rows of the Dask frame and .compute() their number.",
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
        return Verdict(
            False,
            f"{rejected} messages were rejected: without a dead-letter key they are lost, "
            "not kept for later. Keep dead_letter=True.",
        )
    if share > POLICY_GOAL_DEAD_SHARE and wait > POLICY_GOAL_MAX_WAIT:
        return Verdict(False, f"{share:.1%} dead letters and a wait of {wait:g} s: both goals missed.")
    if share > POLICY_GOAL_DEAD_SHARE:
        return Verdict(
            False,
            f"{share:.1%} of the messages end as dead letters (goal: at most 1%). Each attempt "
            "fails independently here: how many tries make a run of failures that long rare enough?",
        )
    if wait > POLICY_GOAL_MAX_WAIT:
        return Verdict(
            False,
            f"a message waited {wait:g} s (goal: at most 60 s). The slowest message is one that "
            "fails every attempt: add up its delays, and make the sum fit.",
        )
    return Verdict(True, f"{share:.1%} dead letters, the longest wait {wait:g} s, on the file and on the pipe.")


def _keep_count_run(max_attempts: int, keep_count: bool) -> tuple[int, str]:
    """(attempt the fixed service sees, where its next failure goes) for a redriven dead letter, measured."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER, redrive
    from nbkit.transport.positions import FilePosition

    options: dict[str, Any] = {
        "start_at": FilePosition.beginning(),
        "max_attempts": max_attempts,
        "dead_letter": "orders.dead",
    }
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
        return Verdict(
            True,
            f"the dead letter kept retry count {right[0] - 1}, so it arrives as attempt {right[0]}: "
            f"past the cap (attempt >= max_attempts): one more failure sends it straight to {right[1]!r}.",
        )
    if answer[0] == 1:
        return Verdict(
            False,
            "attempt 1 is what the default redrive gives (the count is reset); --keep-count "
            "keeps the dead letter's x-ruststream-retry-count.",
        )
    if answer[0] == right[0]:
        return Verdict(False, "the attempt is right; compare it with max_attempts: the cap is checked first.")
    return Verdict(False, "a dead-letter copy carries the retry count of the attempts made; attempt = count + 1.")


# --- 08-lineage ---


def _window_lineage(path: str | os.PathLike, start: str) -> tuple[int, int]:
    from nbkit.notebook.frames import read_stream
    from nbkit.notebook.lineage import lineage

    lin = lineage(read_stream(path, start=start))
    return int(lin["message"].nunique()), int(lin.attrs["unlinked_copies"])


@_exercise("08-window", expected=lambda *, path, start, **_: _window_lineage(path, start))
def _window(answer: Any, *, path: str | os.PathLike, start: str, **_: Any) -> Verdict:
    messages, unlinked = _window_lineage(path, start)
    if not isinstance(answer, tuple) or len(answer) != 2:
        return Verdict(False, "answer with a pair: (messages lineage finds, copies it leaves unlinked).")
    if answer == (messages, unlinked):
        return Verdict(
            True,
            f"from {start} on, {unlinked} copies have their predecessor before the window: each starts a "
            "history of its own, with no delay.",
        )
    if answer[1] == 0:
        return Verdict(False, "a copy whose predecessor was written before `start` cannot link: count those.")
    return Verdict(
        False,
        "read the file with read_stream(path, start=start), run lineage on it, then count the distinct "
        "'message' values and look at attrs['unlinked_copies'].",
    )


def _earliest_wins_delays(records: list[tuple[float, int]]) -> list[float]:
    """Observed delays (s) per message, in message order, for identical payloads written at (time, count)."""
    from nbkit.notebook.frames import read_stream
    from nbkit.notebook.lineage import lineage
    from nbkit.transport.file_writer import StreamWriter
    from nbkit.wire.envelope import RETRY_COUNT_HEADER, encode

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "twins.ss")
        with StreamWriter(path, created_at_ms=0) as w:
            for seconds, count in records:
                data = encode({RETRY_COUNT_HEADER: str(count)}, b"same", force_text=False) if count else b"same"
                w.write("orders", data, timestamp_ms=round(seconds * 1000))
        lin = lineage(read_stream(path))
    copies = lin[lin["delay"].notna()]
    return [float(d.total_seconds()) for d in copies.sort_values("message")["delay"]]


@_exercise("08-earliest-wins", expected=lambda *, records, **_: _earliest_wins_delays(records))
def _earliest_wins(answer: Any, *, records: list[tuple[float, int]], scheduled: list[float], **_: Any) -> Verdict:
    right = _earliest_wins_delays(records)
    if (
        isinstance(answer, (list, tuple))
        and [float(a) for a in answer if isinstance(a, (int, float))] == right
        and len(answer) == len(right)
    ):
        return Verdict(
            True,
            "with identical payloads and no stream-sequence header, each copy takes the earliest original "
            "not taken yet, so the file shows different delays from the ones the service scheduled.",
        )
    if isinstance(answer, (list, tuple)) and [float(a) for a in answer if isinstance(a, (int, float))] == [
        float(s) for s in scheduled
    ]:
        return Verdict(
            False,
            "those are the delays the service scheduled; the file does not record them. Which "
            "original does each copy take under the earliest-unlinked rule?",
        )
    return Verdict(
        False,
        "answer with a list: the observed delay of each message's copy, messages in the order of "
        "their originals. Take the copies in file order; each links to the earliest original still free.",
    )
