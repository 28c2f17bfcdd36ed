"""Lesson 08's exercises: lineage of a window that starts in the middle, and the history an at-least-once
service leaves when it is killed during a retry delay and restarted later."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from nbkit.notebook.exercises import Count, Exercise, Number, Parts, WrongAnswer, register

__all__ = ["RESTART", "WINDOW"]


def _window_lineage(path: str | os.PathLike, start: str | None) -> tuple[int, int]:
    from nbkit.tabular.frames import read_stream
    from nbkit.tabular.lineage import lineage

    lin = lineage(read_stream(path, start=start) if start else read_stream(path))
    return int(lin["message"].nunique()), int(lin.attrs["unlinked_copies"])


WINDOW = register(
    Exercise(
        "08-window",
        Parts(("messages", Count()), ("unlinked copies", Count())),
        lambda *, path, start, **_: _window_lineage(path, start),
        explain=lambda right, *, start, **_: (
            f"from {start} on, {right[1]} copies have their predecessor before the window: each cannot link, so "
            "it starts a history of its own, with no delay, and is counted as a message too."
        ),
        hint="read the file with read_stream(path, start=start): which histories have a row in the window, and "
        "which of the copies in it lost the row they would link to?",
        wrong=(
            WrongAnswer(
                "a window links like the whole file",
                lambda *, path, start, **_: (_window_lineage(path, None)[0], 0),
                "a copy links to the message before it in the file; when that one was written before `start`, "
                "it is not in the frame, and the copy cannot link. Count those copies.",
                matches=lambda answer, right, **_: answer[1] == 0,
            ),
            WrongAnswer(
                "an unlinked copy is not a history",
                lambda *, path, start, **_: (
                    _window_lineage(path, start)[0] - _window_lineage(path, start)[1],
                    _window_lineage(path, start)[1],
                ),
                "the unlinked copies are right; lineage gives each of them a history of its own (a 'message' "
                "with no delay), so they count among the messages too.",
                matches=lambda answer, right, **_: answer[1] == right[1] and answer[0] == right[0] - right[1],
            ),
        ),
    )
)


def _restart_history(delay: float, killed_after: float, down_for: float) -> tuple[int, float]:
    """Order 2's history in the file an at-least-once service leaves when it is killed ``killed_after`` s
    into a ``delay`` s retry and restarted ``down_for`` s later: (records, observed delay of its copy in s)."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.position_store import PositionStore
    from nbkit.tabular.frames import read_stream
    from nbkit.tabular.lineage import lineage

    with tempfile.TemporaryDirectory() as tmp:
        path, store = os.path.join(tmp, "orders.ss"), PositionStore(os.path.join(tmp, "positions.json"))

        def service(clock: Any = None) -> tuple[FileBroker, Session]:
            broker = FileBroker(path)

            @broker.subscriber("orders", start_at=store.position("orders"), checkpoint=store, at_least_once=True)
            def pay(delivery: Any) -> Any:
                if delivery.text == "order 2" and delivery.attempt == 1:
                    return HandlerOutcome.retry_after(delay)
                return None

            return broker, Session(App(broker), clock=clock)

        broker, first = service()
        for i in (1, 2, 3):
            broker.publish("orders", f"order {i}")
        first.step(3)
        first.advance(killed_after)
        first.crash()
        first.clock.advance(down_for)
        _, second = service(clock=first.clock)
        second.run()
        lin = lineage(read_stream(path))
    history = lin[lin["message"] == lin.loc[lin["seq"] == 2, "message"].iloc[0]]
    return len(history), float(history["delay"].max().total_seconds())


RESTART = register(
    Exercise(
        "08-restart",
        Parts(("records", Count()), ("delay in seconds", Number())),
        lambda *, delay, killed_after, down_for, **_: _restart_history(delay, killed_after, down_for),
        explain=lambda right, *, delay, killed_after, down_for, **_: (
            f"order 2 has {right[0]} records: its original and the one copy the restarted service wrote. The "
            "delivery after the restart read the original again (as attempt 1) and wrote nothing; the copy "
            f"pending at the crash died with the process. The copy's delay counts from the original: "
            f"{killed_after:g} s before the crash, {down_for:g} s down, and a new {delay:g} s retry in full. "
            "The file shows one clean retry, late: not that the service handled order 2 twice."
        ),
        hint="a delay is the time between a copy and the record it copies, both stamped with the clock's time "
        "when they were written. Which records did each run write, and when?",
        wrong=(
            WrongAnswer(
                "a redelivery after the restart leaves a record",
                lambda *, delay, killed_after, down_for, **_: (
                    3,
                    _restart_history(delay, killed_after, down_for)[1],
                ),
                "a delivery reads a record; it writes nothing. Order 2 was delivered as attempt 1 twice, but "
                "only a retry appends a copy: how many copies did the service manage to write?",
                matches=lambda answer, right, **_: answer[0] > right[0],
            ),
            WrongAnswer(
                "the file records the scheduled delay",
                lambda *, delay, **_: (2, float(delay)),
                "that is the delay the service asked for; the file does not store it. lineage measures the time "
                "between the copy's timestamp and its original's: what happened between them?",
                matches=lambda answer, right, *, delay, **_: abs(float(answer[1]) - delay) < 1e-6,
            ),
            WrongAnswer(
                "the pending copy's timer resumes after the restart",
                lambda *, delay, killed_after, down_for, **_: (2, float(down_for + delay)),
                "the pending copy lived only in the process and died with it; nothing resumes its timer. The "
                "restart reads order 2 again and schedules a new delay, in full. And the original was written "
                "before the crash: count from it.",
            ),
        ),
    )
)
