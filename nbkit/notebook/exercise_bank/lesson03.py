"""Lesson 03's exercises: success on the last allowed attempt, when the dead letter is written, and a
debugging exercise (a parcel that never reached the dead-letter key, from its file and log)."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from nbkit.notebook.exercise_bank.runs import file_session, fresh_path
from nbkit.notebook.exercises import Choice, Count, Evidence, Exercise, Number, Parts, WrongAnswer, register

__all__ = ["DEAD_LETTER_TIME", "MISSING_PARCEL", "SUCCEEDS_ON_CAP", "CourierDown"]


def _succeeds_late(*, max_attempts: int, succeeds_on: int, **_: Any) -> tuple[int, int]:
    """(deliveries, dead letters) of a message whose handler succeeds on attempt ``succeeds_on``."""
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.settle import Action

    def handler(delivery: Any) -> Any:
        return None if delivery.attempt >= succeeds_on else HandlerOutcome.retry_after(5)

    with tempfile.TemporaryDirectory() as tmp:
        session, _path = file_session(
            tmp, "parcels.ss", "parcels", handler, ["parcel"], max_attempts=max_attempts, dead_letter="parcels.dead"
        )
        events = session.events
    return len(events), int((events["action"] == Action.DEAD_LETTER).sum())


SUCCEEDS_ON_CAP = register(
    Exercise(
        "03-succeeds-on-cap",
        Parts(("deliveries", Count()), ("dead letters", Count())),
        _succeeds_late,
        explain=lambda right, *, succeeds_on, **_: (
            f"attempt {succeeds_on} is allowed and succeeds, so the handler never asks for a retry there and "
            "the cap is never applied: the cap decides only what happens to a retry."
        ),
        hint="go attempt by attempt: what does the handler answer on each, and when does the runtime look at "
        "the cap at all?",
        wrong=(
            WrongAnswer(
                "the last allowed attempt is dead-lettered anyway",
                lambda *, max_attempts, **_: (max_attempts, 1),
                "the cap is applied only when a handler asks for a retry on the last allowed attempt. What "
                "does this handler answer there?",
                matches=lambda answer, right, **_: answer[1] == 1,
            ),
            WrongAnswer(
                "max_attempts counts retries, or the cap's attempt is never delivered",
                lambda *, max_attempts, **_: (max_attempts - 1, 1),
                "max_attempts=3 allows three deliveries, the first one included: attempt 3 is delivered.",
                matches=lambda answer, right, *, max_attempts, **_: answer[0] == max_attempts - 1,
            ),
        ),
    )
)


def _dead_letter_time(*, max_attempts: int, base: float, **_: Any) -> float:
    """Seconds from the first delivery to the dead-letter copy when each retry waits ``base * attempt``."""
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.settle import Action

    def handler(delivery: Any) -> Any:
        return HandlerOutcome.retry_after(base * delivery.attempt)

    with tempfile.TemporaryDirectory() as tmp:
        session, _path = file_session(
            tmp, "parcels.ss", "parcels", handler, ["parcel"], max_attempts=max_attempts, dead_letter="parcels.dead"
        )
        events = session.events
    dead = events[events["action"] == Action.DEAD_LETTER]
    return float((dead["time"].iloc[0] - events["time"].iloc[0]).total_seconds())


DEAD_LETTER_TIME = register(
    Exercise(
        "03-dead-letter-time",
        Number("a number of seconds"),
        _dead_letter_time,
        explain=lambda right, *, max_attempts, **_: (
            f"the delays of the {max_attempts - 1} copies add up, and at the cap the dead-letter copy is written "
            "at once: the delay the last attempt asks for is never waited."
        ),
        hint="list the deliveries 1, 2, ... up to the cap and the delay each one asks for: which of those delays "
        "are actually waited out?",
        wrong=(
            WrongAnswer(
                "the delay asked for at the cap is waited too",
                lambda *, max_attempts, base, **_: float(sum(base * a for a in range(1, max_attempts + 1))),
                "at the cap the runtime does not wait: the copy goes to the dead-letter key at once, whatever "
                "delay that last attempt asked for.",
            ),
            WrongAnswer(
                "every copy waits the same",
                lambda *, max_attempts, base, **_: float(base * (max_attempts - 1)),
                "the handler asks for 10 * delivery.attempt: each copy waits longer than the one before.",
            ),
        ),
    )
)

#: The three options of the missing-parcel exercise (the lesson states them too).
MISSING_PARCEL_OPTIONS = {
    "a": "the registration has no dead-letter key, so p2 was rejected at the cap",
    "b": "on its last attempt the handler raised an exception, and an exception drops the delivery",
    "c": "the process crashed while p2's last copy was pending, so the copy was lost",
}


class CourierDown(Exception):
    """The courier API said no (the handler turns this into a retry)."""


def _book(parcel: str, attempt: int) -> None:
    """The courier API of the scenario: always down, and for p2's third try too slow."""
    if parcel == "p2" and attempt == 3:
        raise TimeoutError("courier API timed out")
    raise CourierDown(parcel)


def _missing_parcel_scenario(folder: str | os.PathLike, **_: Any) -> Evidence:
    """A parcel service whose handler catches CourierDown but not a timeout, run on three parcels."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.transport.positions import FilePosition

    path = fresh_path(folder, "parcels.ss")
    broker = FileBroker(path)

    @broker.subscriber("parcels", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="parcels.dead")
    def book(delivery: Any) -> Any:
        try:
            _book(delivery.text, delivery.attempt)
        except CourierDown:
            return HandlerOutcome.retry_after(5)
        return None

    session = Session(App(broker))
    for parcel in ("p1", "p2", "p3"):
        broker.publish("parcels", parcel)
    session.run()
    session.close()
    return Evidence({"parcels.ss": path}, tuple(session.log))


MISSING_PARCEL = register(
    Exercise(
        "03-missing-parcel",
        Choice(MISSING_PARCEL_OPTIONS, "one of 'a', 'b', 'c'"),
        lambda **_: "b",
        explain="p2's third delivery (its copy at seq 8) is in the file, and the log's ERROR line for seq 8 says "
        "the handler raised and the delivery was dropped. An exception is a drop, never a retry, so it never "
        "reaches the cap or the dead-letter key. The handler caught CourierDown but let a TimeoutError escape: "
        "catch it too and return retry_after().",
        hint="find p2's last delivery in the file (its seq), then the log line about that seq.",
        wrong=(
            WrongAnswer(
                "no dead-letter key was declared",
                lambda **_: "a",
                "p1 and p3 did reach parcels.dead, and the INFO line names the registration's dead_letter. What "
                "does the log say about p2's last delivery?",
            ),
            WrongAnswer(
                "the pending copy died with the process",
                lambda **_: "c",
                "a copy lost while pending never reaches the file, but p2's last copy is in it (retry count 2) "
                "and was delivered. What does the log say about that delivery's seq?",
            ),
        ),
        scenario=_missing_parcel_scenario,
    )
)
