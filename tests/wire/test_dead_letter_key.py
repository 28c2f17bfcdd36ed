"""nbkit.wire.keys.is_dead_letter_key: the one naming rule every reader falls back to for dead-letter keys."""

from __future__ import annotations

import pytest

from nbkit.wire.keys import is_dead_letter_key, validate_key

RULE = [
    # the last part, after ".", "-" or "_", is dead / dlq / dead-letter / dead_letter, any case
    ("orders.dead", True),
    ("jobs.dlq", True),
    ("orders-dead", True),
    ("orders_dead", True),
    ("jobs-dlq", True),
    ("jobs_dlq", True),
    ("orders.dead-letter", True),
    ("orders.dead_letter", True),
    ("orders-dead-letter", True),
    ("orders.DLQ", True),
    ("orders.Dead", True),
    ("a.b.c.dead", True),
    ("dead", True),  # the whole key
    ("dlq", True),
    ("dead-letter", True),
    # anything else is not
    ("orders", False),
    ("orders.retry", False),
    ("deadline", False),
    ("orders.deadline", False),
    ("undead", False),
    ("ordersdead", False),
    ("orders.dead.v2", False),
    ("orders.dead-", False),
    ("orders.deadletter", False),
    ("orders.dead.letter", False),
    ("dlq.orders", False),
    ("orders.dlq2", False),
    ("ruststream-internal", False),
    ("SEA_STREAMER_INTERNAL", False),
    ("broadcast", False),
]


@pytest.mark.parametrize(("key", "expected"), RULE)
def test_the_rule(key: str, expected: bool) -> None:
    assert validate_key(key) == key  # every row is a key the transports accept
    assert is_dead_letter_key(key) is expected
