"""Lesson 04's exercises: what one always-retrying stage writes, what the next stage writes, and a
debugging exercise (a stage that printed to its own stdout, from the pipe's lines and the next stage's log)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nbkit.notebook.exercises import Choice, Counts, Evidence, Exercise, WrongAnswer, register

__all__ = ["NEXT_STAGE", "ONE_STAGE", "STRAY_LINE"]


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
    from nbkit.tabular.frames import read_pipe

    if not lines:
        return {}
    counts = read_pipe(lines=lines)["stream_key"].value_counts()
    return {str(k): int(v) for k, v in counts.items() if v}


def _one_stage(*, lines: int, max_attempts: int, **_: Any) -> dict[str, int]:
    """Keys and line counts on the stdout of a stage that always retries."""
    return _key_counts(_stage_output(_input_lines(lines), "jobs", "jobs.retry", max_attempts))


def _two_stages(*, lines: int, max_attempts: int, **_: Any) -> dict[str, int]:
    """Keys and line counts on the stdout of a second always-retrying stage reading the first one's copies."""
    first = _stage_output(_input_lines(lines), "jobs", "jobs.retry", max_attempts)
    return _key_counts(_stage_output(first, "jobs.retry", "jobs.retry2", max_attempts))


_COUNTS = Counts("a dict {stream key: number of stdout lines}")

ONE_STAGE = register(
    Exercise(
        "04-one-stage",
        _COUNTS,
        _one_stage,
        explain="each input line is attempt 1, below the cap, so it becomes one copy under out_retry for the next "
        "stage; the stage never reads its own stdout, so it never sees its copies again.",
        hint="a stage reads stdin and writes stdout: what does it write for each delivery, under which key, and "
        "does it ever read a line it wrote itself?",
        wrong=(
            WrongAnswer(
                "the stage reads its own copies back",
                lambda *, lines, **_: {"jobs.dead": lines},
                "that is what a file service does: it reads its own copies back. A pipe stage reads stdin and "
                "writes stdout, so each input line is delivered once.",
            ),
            WrongAnswer(
                "the input is echoed to stdout",
                lambda *, lines, **_: {"jobs": lines, "jobs.retry": lines},
                "a stage writes only what the runtime publishes for its deliveries; the input lines are not "
                "copied to stdout.",
            ),
            WrongAnswer(
                "a copy goes back under its own key",
                lambda *, lines, **_: {"jobs": lines},
                "on a pipe a copy goes under the key out_retry names, not under the key it came from.",
            ),
        ),
    )
)

NEXT_STAGE = register(
    Exercise(
        "04-second-stage",
        _COUNTS,
        _two_stages,
        explain=lambda right, *, max_attempts, **_: (
            f"the retry count travels in the envelope, so the second stage's deliveries are already attempt "
            f"{max_attempts}, at the cap: each retry it asks for goes to the dead-letter key."
        ),
        hint="the second stage reads copies: what does their envelope say about the attempt, and what happens "
        "to a retry at the cap?",
        wrong=(
            WrongAnswer(
                "each stage counts attempts from 1",
                lambda *, lines, **_: {"jobs.retry2": lines},
                "a stage does not start counting afresh: decode one of the first stage's lines "
                "(nbkit.wire.envelope) and look at its x-ruststream-retry-count.",
            ),
            WrongAnswer(
                "at the cap nothing is written",
                lambda **_: {},
                "the registration has a dead-letter key: a retry asked for at the cap is written there, on "
                "stdout like every other line the stage publishes.",
            ),
        ),
    )
)

#: The options of the stray-line exercise (the lesson states them too).
STRAY_LINE_OPTIONS = {
    "a": "stage 2 is subscribed to the wrong key, so it handled lines meant for another stage",
    "b": "stage 1's handler wrote progress text to stdout: it became lines of the pipe, read as messages",
    "c": "two envelopes were damaged on the way, so stage 2 could not decode them",
}


def _stray_line_scenario(folder: str | os.PathLike, **_: Any) -> Evidence:
    """Stage 1 prints a progress line to stdout as it pays; stage 2 reads its stdout and parses JSON."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.stdio_broker import StdioBroker

    orders = [f"[2024-01-01T00:00:0{i} | orders | {i}] " + json.dumps({"id": i}) for i in (1, 2)]
    stdout: list[str] = []
    first = StdioBroker(stdin=orders, stdout=stdout)

    @first.subscriber("orders", out_retry="orders.retry", max_attempts=3, dead_letter="orders.dead")
    def pay(delivery: Any) -> Any:
        stdout.append(f"charging order {delivery.json()['id']}\n")  # a println! / sys.stdout.write in the stage
        return HandlerOutcome.retry_after(2)  # the payment service is down

    Session(App(first)).run()
    piped = Path(folder) / "stage1.out"
    piped.write_text("".join(line if line.endswith("\n") else line + "\n" for line in stdout), encoding="utf-8")

    second = StdioBroker(stdin=[line.rstrip("\n") for line in stdout], stdout=[])

    @second.subscriber("orders.retry", out_retry="orders.retry2", max_attempts=3, dead_letter="orders.dead")
    def pay_again(delivery: Any) -> Any:
        delivery.json()
        return HandlerOutcome.retry_after(2)

    session = Session(App(second))
    session.run()
    session.close()
    return Evidence({"stage1.out": piped}, tuple(session.log))


STRAY_LINE = register(
    Exercise(
        "04-stray-line",
        Choice(STRAY_LINE_OPTIONS, "one of 'a', 'b', 'c'"),
        lambda **_: "b",
        explain="the two lines that broke stage 2 have no [time | key | seq] header, so a pipe gives them the key "
        "'broadcast' and delivers them to every subscription; their text is the progress message stage 1's "
        "handler wrote to stdout. On a pipe, stdout is the data: log to stderr (a Rust stage's println! goes "
        "to stdout; nbkit run sends print() to stderr, a direct sys.stdout write still lands in the pipe).",
        hint="look at the stream_key and the payload of the deliveries the log says raised, then find those lines "
        "in stage1.out.",
        wrong=(
            WrongAnswer(
                "wrong subscription",
                lambda **_: "a",
                "stage 2 did handle its orders.retry lines without an error. Which stream_key do the failing "
                "deliveries in the log have, and which subscription receives that key?",
            ),
            WrongAnswer(
                "damaged envelopes",
                lambda **_: "c",
                "a damaged envelope would still start with a [time | key | seq] header and rs1:. Look at the "
                "lines of stage1.out that the failing deliveries came from: what do they start with?",
            ),
        ),
        scenario=_stray_line_scenario,
    )
)
