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
