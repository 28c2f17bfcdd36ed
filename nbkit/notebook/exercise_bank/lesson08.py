"""Lesson 08's exercises: lineage of a window that starts in the middle, and the earliest-wins rule for
identical payloads without ``stream-sequence``."""

from __future__ import annotations

import os
import tempfile

from nbkit.notebook.exercises import Count, Exercise, Number, Parts, Sequence, WrongAnswer, register

__all__ = ["EARLIEST_WINS", "WINDOW"]


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


def _earliest_wins_delays(records: list[tuple[float, int]]) -> list[float]:
    """Observed delays (s) per message, in message order, for identical payloads written at (time, count)."""
    from nbkit.tabular.frames import read_stream
    from nbkit.tabular.lineage import lineage
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


EARLIEST_WINS = register(
    Exercise(
        "08-earliest-wins",
        Sequence(Number(), "a list of delays in seconds, one per message,"),
        lambda *, records, **_: _earliest_wins_delays(records),
        explain="with identical payloads and no stream-sequence header, each copy, in file order, takes the "
        "earliest original not taken yet, so the file shows different delays from the ones the service "
        "scheduled: the histories are swapped.",
        hint="take the copies in file order; each links to the earliest original with the same payload that no "
        "copy has taken yet. A delay is the copy's time less its original's.",
        wrong=(
            WrongAnswer(
                "the file records the scheduled delays",
                lambda *, scheduled, **_: list(scheduled),
                "those are the delays the service scheduled; the file does not record them, and without "
                "stream-sequence lineage cannot tell the twins apart. Which original does each copy take under "
                "the earliest-wins rule?",
            ),
            WrongAnswer(
                "a delay counts from the start of the file",
                lambda *, records, **_: [float(t) for t, count in records if count],
                "a delay is measured from the copy's original, not from the start of the file.",
            ),
        ),
    )
)
