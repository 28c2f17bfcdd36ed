"""Lesson 05's exercises: counts against rates per item, and a debugging exercise (a file in which orders
were handled twice: from the file alone, what went wrong?)."""

from __future__ import annotations

import functools
import json
import os
import tempfile
from typing import TYPE_CHECKING, Any

from nbkit.notebook.exercise_bank.runs import fresh_path
from nbkit.notebook.exercises import Choice, Evidence, Exercise, Parts, WrongAnswer, register

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ITEM_RATE", "REPLAYED"]


@functools.lru_cache(maxsize=4)
def _demo_file(orders: int, seed: int) -> pd.DataFrame:
    """The demo's stream file for this workload, read with JSON payloads (one row per message); the run is
    deterministic, so it is made once per workload (callers only read the frame)."""
    from nbkit.notebook.demo import run_demo
    from nbkit.tabular.frames import read_stream

    with tempfile.TemporaryDirectory() as tmp:
        return read_stream(run_demo(tmp, orders=orders, seed=seed, png=False).stream_file, payload="json")


def _per_item(orders: int, seed: int) -> pd.DataFrame:
    """Orders and dead letters per item, and the dead-letter rate, measured in the file."""
    import pandas as pd

    frame = _demo_file(orders, seed)
    originals = frame[(frame["stream_key"] == "orders") & (frame["retry_count"] == 0)]
    dead = frame[frame["stream_key"] == "orders.dead"]
    table = pd.DataFrame(
        {"orders": originals["payload.item"].value_counts(), "dead": dead["payload.item"].value_counts()}
    ).fillna(0)
    table["rate"] = table["dead"] / table["orders"]
    return table


def _item_rate(*, orders: int, seed: int, **_: Any) -> tuple[str, str]:
    table = _per_item(orders, seed)
    return str(table["dead"].idxmax()), str(table["rate"].idxmax())


ITEM_RATE = register(
    Exercise(
        "05-item-rate",
        Parts(("most dead letters", Choice(describe="an item")), ("highest rate", Choice(describe="an item"))),
        _item_rate,
        explain=lambda right, **_: (
            f"{right[0]!r} has the most dead letters because it is ordered most; per order, {right[1]!r} gives up "
            "most often. The workload draws the item independently of the failures, so the rates differ by "
            "chance only: with about 400 orders per item, a few dead letters more or less move a rate by a "
            "percentage point. A count answers 'where is the work?', a rate 'where is the problem?'."
        ),
        hint="for the first part count the 'orders.dead' rows per 'payload.item'; for the second divide those "
        "counts by how many orders of each item came in (the rows with retry count 0 under 'orders').",
        wrong=(
            WrongAnswer(
                "the item with the most dead letters has the highest rate",
                lambda *, orders, seed, **_: (_item_rate(orders=orders, seed=seed)[0],) * 2,
                "the item with the most dead letters is also the one ordered most. Divide each item's dead "
                "letters by its number of orders before you compare.",
                matches=lambda answer, right, **_: answer[1] == right[0] != right[1],
            ),
            WrongAnswer(
                "the lowest rate read as the highest",
                lambda *, orders, seed, **_: (
                    _item_rate(orders=orders, seed=seed)[0],
                    str(_per_item(orders, seed)["rate"].idxmin()),
                ),
                "that item has the lowest rate: sort_values() sorts ascending, so the top row is the smallest "
                "(use ascending=False, or idxmax()).",
            ),
        ),
    )
)

#: The options of the replayed-file exercise (the lesson states them too).
REPLAYED_OPTIONS = {
    "a": "the producer published those orders twice",
    "b": "the service restarted without a saved position and read the file again from the beginning",
    "c": "the handler asked for two retries in one delivery",
}


def _replayed_scenario(folder: str | os.PathLike, **_: Any) -> Evidence:
    """The demo order service, restarted a minute after its first run with the same registration."""
    from nbkit.notebook.demo import DEAD_LETTER, MAX_ATTEMPTS, handle_order, make_orders
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.transport.positions import FilePosition

    path = fresh_path(folder, "orders-replayed.ss")

    def service() -> FileBroker:
        broker = FileBroker(path)
        broker.subscriber(
            "orders", start_at=FilePosition.beginning(), max_attempts=MAX_ATTEMPTS, dead_letter=DEAD_LETTER
        )(handle_order)
        return broker

    first = service()
    session = Session(App(first))
    for order in make_orders(12, seed=5):
        first.publish("orders", json.dumps(order))
        session.run()
        session.advance(1)
    session.close()
    session.advance(60)  # a deploy a minute later: the new process starts from the beginning again
    restarted = Session(App(service()), clock=session.clock)
    restarted.run()
    restarted.close()
    return Evidence({"orders-replayed.ss": path}, (*session.log, *restarted.log))


REPLAYED = register(
    Exercise(
        "05-replayed",
        Choice(REPLAYED_OPTIONS, "one of 'a', 'b', 'c'"),
        lambda **_: "b",
        explain="every order has one original (retry count 0), but the copies and dead letters come in two "
        "waves a minute apart: a second process handled the whole file once more, the old copies too (each "
        "asked for yet another copy, so the duplicates multiply). A registration with start_at=beginning() "
        "and no saved position replays everything on each start; the service must save its position "
        "(lesson 02) and resume after it.",
        hint="group the rows by 'payload.id' and 'retry_count', then look at when the duplicates were written.",
        wrong=(
            WrongAnswer(
                "a duplicate publish",
                lambda **_: "a",
                "a second publish would be a second original: a row with retry count 0 and the same payload.id. "
                "Count the originals per id.",
            ),
            WrongAnswer(
                "two retries from one delivery",
                lambda **_: "c",
                "one delivery settles once, with one outcome, and a retry writes one copy. Look at the "
                "timestamps of an order's two copies with the same retry count: how far apart are they?",
            ),
        ),
        scenario=_replayed_scenario,
    )
)
