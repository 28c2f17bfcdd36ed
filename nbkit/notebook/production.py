"""A production-like stream file: several services' keys, retries, dead letters and an outage.

What a file written by a few retrying services over some hours looks like, made fast and the same on
every machine (seeded), for the how-to on damaged files, the tests and the benchmarks. Each key has its
own retry policy and dead-letter key (``<key>.dead``); copies carry the envelope headers nbkit and
ruststream write (``x-ruststream-retry-count``, ``stream-sequence``), appended when due, so the file is
in time order. During the outage every attempt fails, so retries pile up and some messages end as dead
letters. Payloads are JSON objects with integer ids, a float amount, a nested ``address`` object and, on
``audit``, plain text (not JSON).
"""

from __future__ import annotations

import heapq
import json
import os
import random
from dataclasses import dataclass

from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope

__all__ = ["POLICIES", "Policy", "write_production_file"]

#: 2024-03-04T08:00:00Z, when the file's first message is written.
T0_MS = 1_709_539_200_000


@dataclass(frozen=True, slots=True)
class Policy:
    """A key's retry policy: how often its handler fails, the delays (seconds) of attempts 2, 3, ..."""

    fail_rate: float
    delays_s: tuple[float, ...]

    @property
    def max_attempts(self) -> int:
        """Attempts before a dead letter: one more than the delays."""
        return len(self.delays_s) + 1


#: The keys and their policies: orders retry twice (2 s, 30 s), payments four times (1-8 s), shipments
#: once (60 s), audit never (text payloads, fire and forget).
POLICIES: dict[str, Policy] = {
    "orders": Policy(0.05, (2.0, 30.0)),
    "payments": Policy(0.08, (1.0, 2.0, 4.0, 8.0)),
    "shipments": Policy(0.03, (60.0,)),
    "audit": Policy(0.0, ()),
}


def write_production_file(
    path: str | os.PathLike,
    *,
    messages: int = 20_000,
    hours: float = 8.0,
    outage: tuple[float, float] = (0.45, 0.5),
    seed: int = 29,
    beacon_interval: int = 1 << 16,
) -> int:
    """Write ``messages`` originals over ``hours``, with their retry copies and dead letters, to ``path``.

    Parameters
    ----------
    path
        The stream file to create (replaced if it exists).
    messages
        Originals, spread over the keys of :data:`POLICIES` (orders and payments most).
    hours
        The time the originals span.
    outage
        The part of that time (fractions from, to) in which every attempt fails.
    seed
        The random seed (same file for the same arguments).
    beacon_interval
        The file's beacon interval.

    Returns
    -------
    int
        Records written (originals, retry copies and dead letters).

    Examples
    --------
    >>> from nbkit import read_stream
    >>> n = write_production_file("prod.ss", messages=300)
    >>> frame = read_stream("prod.ss")
    >>> len(frame) == n, sorted(frame["stream_key"].cat.categories)[:3]
    (True, ['audit', 'orders', 'orders.dead'])
    """
    rng = random.Random(seed)
    step_ms = hours * 3_600_000 / max(messages, 1)
    down = (T0_MS + outage[0] * hours * 3_600_000, T0_MS + outage[1] * hours * 3_600_000)
    keys = ("orders", "orders", "payments", "payments", "shipments", "audit")
    seqs: dict[str, int] = {}
    pending: list[tuple[int, int, str, int, int, bytes]] = []  # (due ms, order, key, attempt, prev seq, body)
    order = 0
    written = 0

    if os.path.exists(path):
        os.remove(path)
    with StreamWriter(path, beacon_interval=beacon_interval, created_at_ms=T0_MS, flush_every=4096) as writer:

        def write(key: str, data: bytes, ts: int) -> int:
            nonlocal written
            seq = seqs.get(key, 0) + 1
            seqs[key] = seq
            writer.write(key, data, seq=seq, timestamp_ms=ts)
            written += 1
            return seq

        def attempt(key: str, body: bytes, ts: int, seq: int, number: int) -> None:
            """The handler's attempt ``number`` of a record written at ``ts``: fail -> copy or dead letter."""
            nonlocal order
            policy = POLICIES[key]
            failed = down[0] <= ts < down[1] if policy.max_attempts > 1 else False
            failed = failed or rng.random() < policy.fail_rate
            if not failed:
                return
            order += 1
            if number >= policy.max_attempts:
                heapq.heappush(pending, (ts, order, f"{key}.dead", number, seq, body))
            else:
                due = ts + int(policy.delays_s[number - 1] * 1000)
                heapq.heappush(pending, (due, order, key, number, seq, body))

        def flush(until: float) -> None:
            while pending and pending[0][0] <= until:
                due, _, key, count, prev, body = heapq.heappop(pending)
                headers = {envelope.SEQUENCE_HEADER: str(prev), envelope.RETRY_COUNT_HEADER: str(count)}
                seq = write(key, envelope.encode(headers, body, force_text=False), due)
                if not key.endswith(".dead"):
                    attempt(key, body, due, seq, count + 1)

        for i in range(messages):
            ts = T0_MS + int(i * step_ms)
            flush(ts)
            key = keys[rng.randrange(len(keys))]
            if key == "audit":
                body = f"user {rng.randrange(1000)} viewed order {i}".encode()
            else:
                doc = {
                    "id": 200_000 + i,
                    "customer": rng.randrange(1, 5000),
                    "amount": round(rng.uniform(5, 500), 2),
                    "address": {"country": rng.choice(["DE", "FR", "NL", "PL"]), "zip": str(rng.randrange(10**5))},
                }
                body = json.dumps(doc, separators=(",", ":")).encode()
            seq = write(key, body, ts)
            attempt(key, body, ts, seq, 1)
        flush(float("inf"))
    return written
