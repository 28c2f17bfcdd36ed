"""Lesson 01's exercises: how keys count their sequence numbers, and where a timestamp start begins."""

from __future__ import annotations

import os
import tempfile
from typing import Any

from nbkit.notebook.exercises import Count, Exercise, Sequence, WrongAnswer, register

__all__ = ["AFTER_TIMESTAMP", "SEQ_PER_KEY"]


def _seqs(*, keys: str, **_: Any) -> list[int]:
    """The sequence numbers a fresh file gives messages published under ``keys`` (one letter, one key)."""
    from nbkit.runtime.file_broker import FileBroker

    with tempfile.TemporaryDirectory() as tmp:
        broker = FileBroker(os.path.join(tmp, "keys.ss"))
        seqs = [broker.publish(key, "x").seq for key in keys]
        broker.shutdown()
    return seqs


SEQ_PER_KEY = register(
    Exercise(
        "01-seq-per-key",
        Sequence(Count(), "a list of sequence numbers, one per message,"),
        _seqs,
        explain="each stream key counts its own messages, from 1: a message under another key does not move the count.",
        hint="look at the 'seq' column of data/sample-1.ss per stream key: where does each key's first message "
        "start, and does a message under another key move the count?",
        wrong=(
            WrongAnswer(
                "one counter for the whole file",
                lambda *, keys, **_: list(range(1, len(keys) + 1)),
                "that is one counter for the whole file. Group the sample file's rows by 'stream_key': does "
                "each key's 'seq' go up by one from row to row?",
            ),
            WrongAnswer(
                "counting from 0",
                lambda *, keys, **_: [s - 1 for s in _seqs(keys=keys)],
                "the counting per key is right; what is the 'seq' of the first message of a key in the tables above?",
            ),
        ),
    )
)


def _after(*, path: str | os.PathLike, key: str, seq: int, **_: Any) -> list[int]:
    """The ``key`` sequence numbers a reader starting at the timestamp of ``key`` message ``seq`` returns."""
    from nbkit.tabular.frames import read_stream
    from nbkit.transport.positions import FilePosition

    frame = read_stream(path, keys=key)
    ts = frame.loc[frame["seq"] == seq, "timestamp"].iloc[0]
    return [int(s) for s in read_stream(path, keys=key, start=FilePosition.timestamp(ts))["seq"]]


def _all_seqs(path: str | os.PathLike, key: str) -> list[int]:
    from nbkit.tabular.frames import read_stream

    return [int(s) for s in read_stream(path, keys=key)["seq"]]


def _same_start_other_end(answer: tuple[int, ...], right: tuple[int, ...], **_: Any) -> bool:
    """An answer that begins where the reader begins but ends elsewhere (a wrong or invented end)."""
    return bool(answer) and bool(right) and answer[0] == right[0] and answer != right


AFTER_TIMESTAMP = register(
    Exercise(
        "01-after-timestamp",
        Sequence(Count(), "a list of sequence numbers"),
        _after,
        explain=lambda right, *, seq, **_: (
            f"timestamp(t) starts strictly after t, so message {seq} itself (and anything else stamped t) is "
            "left out; from there the reader goes on to the end of the file."
        ),
        hint="FilePosition.timestamp(t) and FilePosition.sequence(n) differ in one respect: does the start "
        "itself belong to what is read? Find the message's timestamp, then list the messages stamped later.",
        wrong=(
            WrongAnswer(
                "timestamp(t) includes t",
                lambda *, path, key, seq, **_: [s for s in _all_seqs(path, key) if s >= seq],
                "sequence(n) includes message n, but timestamp(t) is the other kind of start: the first "
                "message strictly later than t.",
            ),
            WrongAnswer(
                "a start position is where reading stops",
                lambda *, path, key, seq, **_: [s for s in _all_seqs(path, key) if s <= seq],
                "a start position says where reading begins; from there the reader goes on to the end of the file.",
            ),
            WrongAnswer(
                "the start is right, the end is guessed",
                lambda *, path, key, seq, **_: [*_after(path=path, key=key, seq=seq), _all_seqs(path, key)[-1] + 1],
                lambda right, *, key, **_: (
                    "the start is right; the end is not. The reader stops at the last message the file holds: "
                    f"how many '{key}' messages does the table of keys above count?"
                ),
                matches=_same_start_other_end,
            ),
        ),
    )
)
