"""Lesson 09's exercises (the capstone): what a crash in a retry delay lost from a two-stage pipeline, what
``at_least_once=True`` hands the next stage twice, and a debugging exercise (a mystery file that keeps
growing: a redrive loop).

The pipeline is the lesson's: stage 1 pays for orders read from ``shop.ss`` (``checkpoint=``, three
attempts, dead-letter key ``orders.dead``) and publishes each paid order to ``shipping.ss``, where stage 2
ships it. :func:`run_day` runs it with a crash ``crash_at`` seconds in, restarts it and runs it to the end.

The two exercises about the lesson's own run (``09-lost``, ``09-twice``) hold its shop (:data:`SHOP`, the
lesson's ``ORDERS``) and :data:`CRASH_AT` as their ``context``, so their exercise cells pass nothing and work
when a learner runs them before the cells that define those names.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbkit.notebook.exercise_bank.runs import fresh_path
from nbkit.notebook.exercises import Choice, Count, Evidence, Exercise, Sequence, WrongAnswer, register

__all__ = ["CRASH_AT", "LOST", "REDRIVE_LOOP", "SHOP", "TWICE", "Ids", "run_day"]

#: One order: (id, currency, card); the card is "ok" or "declined-once" (the bank says "try later" once).
Order = tuple[int, str, str]

#: The lesson's ``ORDERS``: two yen orders (never paid, dead-lettered at 20 s), two cards declined once (paid
#: at 30 s), four paid at once.
SHOP: tuple[Order, ...] = (
    (1, "EUR", "ok"), (2, "JPY", "ok"), (3, "USD", "declined-once"), (4, "EUR", "ok"),
    (5, "JPY", "ok"), (6, "GBP", "ok"), (7, "USD", "declined-once"), (8, "EUR", "ok"),
)  # fmt: skip
#: The lesson's ``CRASH_AT``: the process dies this many seconds after the orders arrived.
CRASH_AT = 15
#: The context of the exercises about the lesson's own run.
_LESSON_RUN = {"orders": SHOP, "crash_at": CRASH_AT}


class Ids(Sequence):
    """A set of order ids, written as a list in any order (``[7, 3]`` is ``[3, 7]``); shown sorted.

    >>> Ids().coerce((7, 3.0))
    (3, 7)
    """

    def __init__(self, describe: str = "a list of order ids") -> None:
        super().__init__(Count(), describe)

    def coerce(self, value: Any) -> tuple[Any, ...]:
        return tuple(sorted(set(super().coerce(value))))


def _orders(orders: Iterable[Iterable[Any]]) -> tuple[Order, ...]:
    """The lesson's ORDERS as a hashable tuple (the context may come as lists)."""
    return tuple((int(i), str(currency), str(card)) for i, currency, card in orders)


def _run_until(session: Any, seconds: float) -> None:
    """Run ``session`` for ``seconds`` of virtual time: deliver what is ready, write copies as they fall due."""
    end = session.clock.now() + seconds
    while True:
        session.step(1_000)
        due = session.app.next_due()
        if due is None or due > end:
            break
        session.advance(due - session.clock.now())
    session.advance(end - session.clock.now())


def run_day(
    folder: str | os.PathLike, orders: Iterable[Iterable[Any]], *, crash_at: float, at_least_once: bool
) -> Path:
    """Run the lesson's pipeline in ``folder``: crash ``crash_at`` s in, restart, run to the end.

    Returns the folder, which then holds ``shop.ss`` (stage 1's input, copies and dead letters) and
    ``shipping.ss`` (stage 2's input, one ``paid`` message per payment).
    """
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.position_store import PositionStore

    day = Path(folder)
    day.mkdir(parents=True, exist_ok=True)

    def pipeline(clock: Any = None) -> tuple[FileBroker, Session]:
        shop = FileBroker(day / "shop.ss")
        shipping = FileBroker(day / "shipping.ss")
        positions = PositionStore(day / "positions.json")

        @shop.subscriber(
            "orders",
            start_at=positions.position("orders"),
            checkpoint=positions,
            max_attempts=3,
            dead_letter="orders.dead",
            at_least_once=at_least_once,
        )
        def pay(delivery: Any) -> Any:
            order = delivery.json()
            if order["currency"] == "JPY":
                return HandlerOutcome.retry_after(10)
            if order["card"] == "declined-once" and delivery.attempt == 1:
                return HandlerOutcome.retry_after(30)
            shipping.publish("paid", delivery.text)
            return None

        @shipping.subscriber("paid", start_at=positions.position("paid"), checkpoint=positions)
        def ship(delivery: Any) -> None:
            return None

        return shop, Session(App(shop, shipping), clock=clock)

    shop, first = pipeline()
    for i, currency, card in _orders(orders):
        shop.publish("orders", json.dumps({"id": i, "currency": currency, "card": card}))
    _run_until(first, crash_at)
    first.crash()
    _shop, second = pipeline(clock=first.clock)
    second.run()
    second.close()
    return day


def _ids(path: Path, key: str) -> list[int]:
    """The order ids of the messages under ``key`` in a stream file, in file order."""
    from nbkit.tabular.frames import read_stream

    frame = read_stream(path, payload="json")
    return [int(i) for i in frame.loc[frame["stream_key"] == key, "payload.id"]]


@functools.lru_cache(maxsize=8)
def _day(orders: tuple[Order, ...], crash_at: float, at_least_once: bool) -> tuple[tuple[int, ...], ...]:
    """(order ids, paid ids in file order, dead-lettered ids) of one day, from its files alone."""
    with tempfile.TemporaryDirectory() as tmp:
        day = run_day(tmp, orders, crash_at=crash_at, at_least_once=at_least_once)
        paid = _ids(day / "shipping.ss", "paid")
        dead = _ids(day / "shop.ss", "orders.dead")
    return tuple(i for i, _, _ in orders), tuple(paid), tuple(dead)


def _lost(*, orders: Any, crash_at: float, **_: Any) -> list[int]:
    ids, paid, dead = _day(_orders(orders), crash_at, False)
    return sorted(set(ids) - set(paid) - set(dead))


def _pending_at(orders: Any, crash_at: float, *, currency: str | None = None, card: str | None = None) -> list[int]:
    """Ids of the orders of one kind (a currency, or a card) whose copy was pending at the crash."""
    lost = set(_lost(orders=orders, crash_at=crash_at))
    return sorted(i for i, cur, crd in _orders(orders) if i in lost and (cur == currency if currency else crd == card))


LOST = register(
    Exercise(
        "09-lost",
        Ids("a list of order ids (any order)"),
        _lost,
        explain=lambda right, *, crash_at, **_: (
            f"at {crash_at:g} s each of those orders had a retry copy waiting in the process (the card "
            "declined once: due at 30 s; the yen orders: their third attempt due at 20 s). The copies died with "
            "the process, and the saved position was already past the records they copy, so the restart never "
            "saw those orders again: not paid, not shipped, not even dead-lettered."
        ),
        hint=lambda right, *, crash_at, **_: (
            f"go order by order through the first {crash_at:g} seconds: which ones are paid at once, and which "
            "ones have a copy still waiting when the process dies? Then ask where the restart starts reading."
        ),
        wrong=(
            WrongAnswer(
                "only a retry that would succeed can be lost",
                lambda *, orders, crash_at, **_: _pending_at(orders, crash_at, card="declined-once"),
                "the declined cards are right, but they are not the only copies waiting at the crash. A yen "
                "order would have ended under orders.dead: is it there?",
            ),
            WrongAnswer(
                "the restart reads the orders again",
                lambda **_: [],
                "the restart starts where the position store says, and checkpoint= saved each position as soon "
                "as a retry was scheduled. Is any of those orders' records after it?",
                matches=lambda answer, right, **_: len(answer) == 0,
            ),
            WrongAnswer(
                "only the yen orders are lost (they fail for ever)",
                lambda *, orders, crash_at, **_: _pending_at(orders, crash_at, currency="JPY"),
                "a yen order is not lost by failing: at the cap it goes to orders.dead, where you can find it. "
                "Which orders had a copy waiting in the process when it died?",
            ),
        ),
        context=_LESSON_RUN,
    )
)


def _twice(*, orders: Any, crash_at: float, **_: Any) -> list[int]:
    _ids_, paid, _dead = _day(_orders(orders), crash_at, True)
    return sorted(i for i, n in Counter(paid).items() if n > 1)


def _paid_before_crash(orders: Any) -> list[int]:
    return [i for i, currency, card in _orders(orders) if currency != "JPY" and card == "ok"]


TWICE = register(
    Exercise(
        "09-twice",
        Ids("a list of order ids (any order)"),
        _twice,
        explain=(
            "with at_least_once=True the saved position stays at the first order whose copy was still pending "
            "(a declined card), so the restart reads every record from there again: the orders paid after it in "
            "the first run are paid, and handed to stage 2, a second time. Nothing is lost, some orders come "
            "twice: stage 2 must be idempotent."
        ),
        hint="find the position the store kept (the first record whose copy was pending at the crash); the "
        "restart delivers every record from there on again, attempt 1 for originals. Which of those were paid "
        "in the first run already?",
        wrong=(
            WrongAnswer(
                "at_least_once means exactly once",
                lambda **_: [],
                "at_least_once=True closes the loss window by reading some records again: nothing is lost, but "
                "nothing says each order is paid once. Which orders after the saved position had been paid "
                "already?",
                matches=lambda answer, right, **_: len(answer) == 0,
            ),
            WrongAnswer(
                "only the orders whose copies died come again",
                lambda *, orders, crash_at, **_: _lost(orders=orders, crash_at=crash_at),
                "those orders come back, but they were never paid before the crash, so stage 2 gets them once. "
                "A restart reads records, not messages: which records after the saved position were paid "
                "already?",
            ),
            WrongAnswer(
                "the restart reads the file from the beginning",
                lambda *, orders, **_: _paid_before_crash(orders),
                "the store keeps a position, just an earlier one: the first record whose copy was still "
                "pending. Is the first order after it?",
            ),
        ),
        context=_LESSON_RUN,
    )
)

#: The three options of the mystery-file exercise (the lesson states them too).
REDRIVE_LOOP_OPTIONS = {
    "a": "the registration has no max_attempts, so one order was retried for ever",
    "b": "a job redrove the dead letters while the handler still failed them, so they came back and died again",
    "c": "the service crashed and restarted with at_least_once=True, which delivered the same records again",
}


def _redrive_loop_scenario(folder: str | os.PathLike, **_: Any) -> Evidence:
    """A service that fails yen orders, and a job that redrives orders.dead every 60 s (the bug unfixed)."""
    from nbkit.notebook.session import Session
    from nbkit.runtime.app import App
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.redrive import redrive
    from nbkit.transport.positions import FilePosition

    path = fresh_path(folder, "mystery.ss")
    broker = FileBroker(path)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    def pay(delivery: Any) -> Any:
        if delivery.json()["currency"] == "JPY":
            return HandlerOutcome.retry_after(10)
        return None

    session = Session(App(broker))
    for i, currency in enumerate(("EUR", "JPY", "USD"), start=1):
        broker.publish("orders", json.dumps({"id": i, "currency": currency}))
    session.run()
    for _round in range(3):  # the "retry the dead letters" job, every minute
        session.advance(60)
        redrive(path, source="orders.dead", target="orders", clock=session.clock)
        session.run()
    session.close()
    return Evidence({"mystery.ss": path}, tuple(session.log))


REDRIVE_LOOP = register(
    Exercise(
        "09-redrive-loop",
        Choice(REDRIVE_LOOP_OPTIONS, "one of 'a', 'b', 'c'"),
        lambda **_: "b",
        explain="every chain of the yen order stops at retry count 3 under orders.dead (the cap works), and every "
        "new chain starts with a new record under orders that carries x-nbkit-redriven-from, naming the dead "
        "letter before it: a redrive, once a minute, to a handler that still fails. Each redrive skips the dead "
        "letters it has redriven already, but the next dead letter is a new one. Fix the handler first, then "
        "redrive once.",
        hint="read the headers of the records under orders whose retry count is 0 (after the first three), and "
        "the highest retry count in the file.",
        wrong=(
            WrongAnswer(
                "the cap was missing",
                lambda **_: "a",
                "without max_attempts the retry count would climb without end. What is the highest retry count "
                "in the file, and where does each chain end?",
            ),
            WrongAnswer(
                "a crash and an at-least-once restart",
                lambda **_: "c",
                "a restart delivers records already in the file again; it writes no new original. Each new chain "
                "here starts with a new record: which header does it carry?",
            ),
        ),
        scenario=_redrive_loop_scenario,
    )
)
