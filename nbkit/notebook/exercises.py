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
            True, f"from {start} on, {unlinked} copies have their predecessor before the window: each starts a "
            "history of its own, with no delay."
        )
    if answer[1] == 0:
        return Verdict(False, "a copy whose predecessor was written before `start` cannot link: count those.")
    return Verdict(
        False, "read the file with read_stream(path, start=start), run lineage on it, then count the distinct "
        "'message' values and look at attrs['unlinked_copies']."
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
    if isinstance(answer, (list, tuple)) and [float(a) for a in answer if isinstance(a, (int, float))] == right \
            and len(answer) == len(right):
        return Verdict(
            True, "with identical payloads and no stream-sequence header, each copy takes the earliest original "
            "not taken yet, so the file shows different delays from the ones the service scheduled."
        )
    if isinstance(answer, (list, tuple)) and [float(a) for a in answer if isinstance(a, (int, float))] == [
        float(s) for s in scheduled
    ]:
        return Verdict(False, "those are the delays the service scheduled; the file does not record them. Which "
                       "original does each copy take under the earliest-unlinked rule?")
    return Verdict(False, "answer with a list: the observed delay of each message's copy, messages in the order of "
                   "their originals. Take the copies in file order; each links to the earliest original still free.")
