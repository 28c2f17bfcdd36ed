"""Lesson 02's exercises: what each outcome writes to the file, and where to resume."""

from __future__ import annotations

import tempfile
from typing import Any

from nbkit.notebook.exercise_bank.runs import file_session
from nbkit.notebook.exercises import Choice, Count, Exercise, Instance, Sequence, WrongAnswer, register
from nbkit.transport.positions import FilePosition

__all__ = ["RESUME_POSITION", "WHAT_IS_WRITTEN"]

_SCRIPTED = {"a": "ack", "d": "drop", "r": "retry", "x": "raise"}


def _scripted_handler(delivery: Any) -> Any:
    """a -> ack, d -> drop, r -> retry, x -> raise (the exercise's handler)."""
    from nbkit.runtime.outcome import HandlerOutcome

    what = _SCRIPTED[delivery.text]
    if what == "raise":
        raise ValueError("payment service down")
    return getattr(HandlerOutcome, what)()


def _written(*, script: str, max_attempts: int, **_: Any) -> list[str]:
    """The payloads in the file after the scripted handler ran over ``script`` with ``max_attempts``."""
    from nbkit.tabular.frames import read_stream

    with tempfile.TemporaryDirectory() as tmp:
        _session, path = file_session(
            tmp, "jobs.ss", "jobs", _scripted_handler, list(script), max_attempts=max_attempts
        )
        return [str(p) for p in read_stream(path)["payload"]]


def _beside(script: str) -> list[str]:
    """Each retried payload's copy right after its original (the misconception)."""
    return [p for c in script for p in ([c, c] if c == "r" else [c])]


WHAT_IS_WRITTEN = register(
    Exercise(
        "02-what-is-written",
        Sequence(Choice(describe="a payload"), "a list of payloads, in file order,"),
        _written,
        explain=lambda right, *, script, **_: (
            f"{len(script)} published, {len(right) - len(script)} written by the runtime: only a declared retry "
            "writes a copy, appended after everything already in the file; ack, drop and an exception are "
            "logged and write nothing; at the cap, with no dead-letter key, the delivery is rejected."
        ),
        hint="go outcome by outcome: which of ack, drop, retry and an exception ever writes to the file, where "
        "in the file does that write go, and what happens to the copy when it is delivered at the cap?",
        wrong=(
            WrongAnswer(
                "a copy goes next to its original",
                lambda *, script, **_: _beside(script),
                "a stream file is append-only: a copy is written when it is due, after everything published "
                "before it, not next to its original.",
            ),
            WrongAnswer(
                "an exception asks for a retry",
                lambda *, script, max_attempts, **_: _written(script=script, max_attempts=max_attempts) + ["x"],
                "an exception is not a retry: the runtime logs it and drops the delivery, and nothing is "
                "written for it.",
            ),
            WrongAnswer(
                "the copy is retried again",
                lambda *, script, max_attempts, **_: _written(script=script, max_attempts=max_attempts) + ["r"],
                "the copy is delivered as attempt 2, which is the cap: a retry asked for there is not "
                "republished, and with no dead-letter key nothing more is written.",
            ),
        ),
    )
)


def _as_position(value: Any) -> FilePosition:
    """``8`` is accepted as ``FilePosition.sequence(8)``."""
    return FilePosition.sequence(Count().coerce(value))


def _position(seq: int) -> FilePosition:
    return FilePosition.sequence(seq)


RESUME_POSITION = register(
    Exercise(
        "02-resume-position",
        Instance(FilePosition, "a FilePosition (or the n of FilePosition.sequence(n))", _as_position),
        lambda *, last_processed, **_: _position(last_processed + 1),
        explain="sequence(n) is inclusive, so the service starts at the first message it has not processed yet: "
        "nothing is skipped and nothing is handled twice.",
        hint="which positions are there (beginning, end, sequence(n), timestamp(t)), and which one starts "
        "exactly at the first message not processed yet?",
        wrong=(
            WrongAnswer(
                "sequence(last) resumes after last",
                lambda *, last_processed, **_: _position(last_processed),
                lambda right, *, last_processed, **_: (
                    f"sequence(n) includes message n itself, and message {last_processed} has been processed already."
                ),
            ),
            WrongAnswer(
                "replay to be safe",
                lambda **_: FilePosition.beginning(),
                "beginning() replays the whole key: every message processed before would be handled a second time.",
            ),
            WrongAnswer(
                "start from the tip",
                lambda **_: FilePosition.end(),
                "end() starts at the tip: whatever was published while the service was down would be skipped.",
            ),
        ),
    )
)
