"""Lesson 06's exercise: how many orders recovered after a retry, predicted from the workload and counted
with Dask.

The exercise holds the lesson's workload (:data:`ORDERS` orders made with seed :data:`SEED`) as its
``context``, so its cell works when a learner runs it before the cells that make the workload; a learner who
raised the lesson's ``ORDERS`` passes ``orders=ORDERS``.
"""

from __future__ import annotations

from typing import Any

from nbkit.notebook.exercises import Count, Exercise, WrongAnswer, register

__all__ = ["ORDERS", "RECOVERED", "SEED"]

#: The lesson's ``ORDERS``: orders in its workload (a file of about 990 MiB).
ORDERS = 40_000
#: The seed the lesson makes its workload with.
SEED = 3


def _orders(orders: int, seed: int) -> list[dict[str, Any]]:
    from nbkit.notebook.demo import make_orders

    return make_orders(orders, seed=seed)


def _cap() -> int:
    from nbkit.notebook.demo import MAX_ATTEMPTS

    return MAX_ATTEMPTS


def _recovered(*, orders: int, seed: int, **_: Any) -> int:
    """Valid orders that failed at least once and were paid before the cap (the demo registration)."""
    return sum(1 for o in _orders(orders, seed) if o["valid"] and 1 <= o["fails"] < _cap())


RECOVERED = register(
    Exercise(
        "06-recovered",
        Count("a number of orders"),
        _recovered,
        explain="an order recovers when it fails at least once (so it is retried) and its payment goes through "
        "before the cap: a valid order with 1 to 3 failures. In the file: the orders delivered as attempt 2, "
        "less those that end under 'orders.dead'.",
        hint="which orders get a retry at all, and which of those still fail on attempt 4? Count orders, not "
        "deliveries.",
        wrong=(
            WrongAnswer(
                "every retried order recovers",
                lambda *, orders, seed, **_: sum(1 for o in _orders(orders, seed) if o["valid"] and o["fails"]),
                "an order whose payment fails 4 times or more is still failing at the cap: it ends under "
                "'orders.dead', it does not recover.",
            ),
            WrongAnswer(
                "invalid orders are retried too",
                lambda *, orders, seed, **_: sum(1 for o in _orders(orders, seed) if 1 <= o["fails"] < _cap()),
                "an invalid order is dropped on its first delivery: it is never retried, whatever its 'fails'.",
            ),
            WrongAnswer(
                "counting copies instead of orders",
                lambda *, orders, seed, **_: sum(
                    o["fails"] for o in _orders(orders, seed) if o["valid"] and 1 <= o["fails"] < _cap()
                ),
                "that counts copies: an order that needed three retries has three of them. Count each order "
                "once (in the file: the deliveries of one attempt).",
            ),
        ),
        context={"orders": ORDERS, "seed": SEED},
    )
)
