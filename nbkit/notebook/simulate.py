"""Try a retry policy on a generated workload: a real App on a virtual clock, on a file and on a pipe.

``simulate(Workload(...), RetryPolicy(...))`` publishes the workload's messages evenly over its span,
runs one handler that fails as the workload says and answers ``retry_after(policy delay)`` on each
failure, and returns the settlement events (:mod:`nbkit.runtime.events`) of both transports, plus a
``message`` column naming the workload message each delivery belongs to. Nothing is modelled: the
same brokers, settlement rule and copies run as in every service, so what the summary says about
copies, dead letters and bytes is what a service with this policy would do. The App runs on a
:class:`~nbkit.VirtualClock`, stepped directly (as a notebook ``Session`` does, without its log
capture: the runtime's per-settlement log lines are kept out of the notebook).

Failures are drawn per (message, attempt) from the seed, so the file and the pipe run see the very
same failures and differ only where the transports differ.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pandas as pd

from nbkit.runtime.app import App
from nbkit.runtime.clock import VirtualClock
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.outcome import HandlerOutcome
from nbkit.runtime.settle import Action
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.tabular.events import events_frame
from nbkit.transport.positions import FilePosition
from nbkit.wire.stdio_line import format_line

__all__ = ["BACKOFFS", "TRANSPORTS", "RetryPolicy", "Workload", "policy_summary", "simulate"]

#: The delay schedules a :class:`RetryPolicy` knows.
BACKOFFS = ("fixed", "linear", "exponential")
#: What ``simulate(transport=...)`` accepts.
TRANSPORTS = ("file", "pipe", "both")
#: The stream keys of a simulation: messages, dead letters, and the pipe's retry key.
KEY = "orders"
DEAD_LETTER_KEY = "orders.dead"
RETRY_KEY = "orders.retry"
#: The most messages one simulation takes (a notebook instrument, not a load test).
MAX_MESSAGES = 1_000_000


def _number(name: str, value: object, *, low: float, high: float = math.inf, low_open: bool = False) -> float:
    """``value`` as a float in [low, high] (or (low, high] with ``low_open``); a ValueError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    too_low = value <= low if low_open else value < low
    if too_low or value > high:
        bounds = f"{'>' if low_open else '>='} {low:g}" if high == math.inf else f"from {low:g} to {high:g}"
        raise ValueError(f"{name} must be {bounds}, not {value!r}")
    return float(value)


def _whole(name: str, value: object, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high:,}, not {value!r}")
    return value


@dataclass(frozen=True)
class Workload:
    """Messages to push through a service, and how its handler fails.

    Parameters
    ----------
    messages : int, default 1000
        How many messages arrive, evenly spread: message ``i`` (from 0) at ``i * span / messages``.
    span : float, default 60.0
        Seconds of (virtual) time the arrivals spread over.
    failure_rate : float, default 0.2
        The probability that one attempt fails (drawn per message and attempt from the seed).
    heal_after : float or None, default None
        Seconds from the start after which attempts stop failing (the bug is fixed, the outage ends);
        None: never.
    poison : float, default 0.0
        The share of messages that fail on every attempt, healed or not (``round(poison * messages)``
        of them, picked by the seed).

    Examples
    --------
    >>> Workload(messages=10, failure_rate=1.0, heal_after=30)
    Workload(messages=10, span=60.0, failure_rate=1.0, heal_after=30.0, poison=0.0)
    >>> Workload(failure_rate=2)
    Traceback (most recent call last):
    ...
    ValueError: failure_rate must be from 0 to 1, not 2
    """

    messages: int = 1000
    span: float = 60.0
    failure_rate: float = 0.2
    heal_after: float | None = None
    poison: float = 0.0

    def __post_init__(self) -> None:
        _whole("messages", self.messages, low=1, high=MAX_MESSAGES)
        object.__setattr__(self, "span", _number("span", self.span, low=0.0, low_open=True))
        object.__setattr__(self, "failure_rate", _number("failure_rate", self.failure_rate, low=0.0, high=1.0))
        if self.heal_after is not None:
            object.__setattr__(self, "heal_after", _number("heal_after", self.heal_after, low=0.0))
        object.__setattr__(self, "poison", _number("poison", self.poison, low=0.0, high=1.0))

    def arrival(self, i: int) -> float:
        """Seconds from the start at which message ``i`` (from 0) arrives.

        Parameters
        ----------
        i : int
            The message's index, from 0.

        Returns
        -------
        float

        Examples
        --------
        >>> Workload(messages=4, span=2.0).arrival(3)
        1.5
        """
        return i * self.span / self.messages

    def poisoned(self, seed: int = 0) -> frozenset[int]:
        """The ids (from 1) of the messages that always fail, for this ``seed``.

        Parameters
        ----------
        seed : int, default 0
            The seed of the simulation.

        Returns
        -------
        frozenset of int

        Examples
        --------
        >>> sorted(Workload(messages=4, poison=0.5).poisoned(seed=0))
        [1, 3]
        """
        count = round(self.poison * self.messages)
        return frozenset(random.Random(f"poison-{seed}").sample(range(1, self.messages + 1), count))


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed attempt is retried: how often, after how long, and where the last one goes.

    Parameters
    ----------
    max_attempts : int, default 3
        Attempts per message, counting the first delivery (the registration's ``max_attempts``).
    delay : float, default 1.0
        Seconds before the first retry.
    backoff : {"fixed", "linear", "exponential"}, default "exponential"
        How the delay grows with the attempt ``a`` that failed: ``delay``, ``delay * a`` or
        ``delay * 2 ** (a - 1)``.
    max_delay : float or None, default None
        No delay is longer than this (None: no cap).
    jitter : float, default 0.0
        Each delay is moved by up to this share of itself, up or down (0.1: +-10 %), drawn from the seed.
    dead_letter : bool, default True
        The last failed attempt goes to the dead-letter key ``orders.dead``; False: it is rejected and
        nothing is written.

    Examples
    --------
    >>> RetryPolicy(max_attempts=4, delay=2).delays()
    [2.0, 4.0, 8.0]
    >>> RetryPolicy(max_attempts=4, delay=2, backoff="linear", max_delay=5).delays()
    [2.0, 4.0, 5.0]
    >>> RetryPolicy(backoff="random")
    Traceback (most recent call last):
    ...
    ValueError: backoff must be one of 'fixed', 'linear', 'exponential', not 'random'
    """

    max_attempts: int = 3
    delay: float = 1.0
    backoff: str = "exponential"
    max_delay: float | None = None
    jitter: float = 0.0
    dead_letter: bool = True

    def __post_init__(self) -> None:
        _whole("max_attempts", self.max_attempts, low=1, high=1000)
        object.__setattr__(self, "delay", _number("delay", self.delay, low=0.0))
        if self.backoff not in BACKOFFS:
            allowed = ", ".join(repr(b) for b in BACKOFFS)
            raise ValueError(f"backoff must be one of {allowed}, not {self.backoff!r}")
        if self.max_delay is not None:
            object.__setattr__(self, "max_delay", _number("max_delay", self.max_delay, low=0.0))
        object.__setattr__(self, "jitter", _number("jitter", self.jitter, low=0.0, high=1.0))
        if not isinstance(self.dead_letter, bool):
            raise ValueError(f"dead_letter must be True or False, not {self.dead_letter!r}")

    def base_delay(self, attempt: int) -> float:
        """The delay after failed attempt ``attempt`` (from 1), before jitter, capped by ``max_delay``.

        Parameters
        ----------
        attempt : int
            The attempt that failed, from 1.

        Returns
        -------
        float
            Seconds.

        Examples
        --------
        >>> RetryPolicy(delay=1.5, backoff="exponential").base_delay(3)
        6.0
        """
        if self.backoff == "fixed":
            d = self.delay
        elif self.backoff == "linear":
            d = self.delay * attempt
        else:
            d = self.delay * 2.0 ** min(attempt - 1, 1000)
        return d if self.max_delay is None else min(d, self.max_delay)

    def delay_for(self, attempt: int, *, message: int = 0, seed: int = 0) -> float:
        """The delay after failed attempt ``attempt`` of ``message``, jitter included (to the millisecond).

        Parameters
        ----------
        attempt : int
            The attempt that failed, from 1.
        message : int, default 0
            The message's id: jitter is drawn per (seed, message, attempt).
        seed : int, default 0
            The simulation's seed.

        Returns
        -------
        float
            Seconds, never negative.

        Examples
        --------
        >>> RetryPolicy(delay=10, backoff="fixed", jitter=0.5).delay_for(1, message=7) != 10
        True
        """
        d = self.base_delay(attempt)
        if self.jitter:
            d *= 1.0 + self.jitter * (2.0 * _draw(seed, "jitter", message, attempt) - 1.0)
        return round(max(d, 0.0), 3)

    def delays(self) -> list[float]:
        """The delays before retries 1, 2, ... (without jitter): ``max_attempts - 1`` of them.

        Returns
        -------
        list of float

        Examples
        --------
        >>> RetryPolicy(max_attempts=3, delay=1, backoff="fixed").delays()
        [1.0, 1.0]
        """
        return [self.base_delay(a) for a in range(1, self.max_attempts)]


def _draw(seed: int, what: str, message: int, attempt: int) -> float:
    """A number in [0, 1) fixed by (seed, what, message, attempt): both transports draw the same."""
    return random.Random(f"{what}-{seed}-{message}-{attempt}").random()


class _Trial:
    """The handler of one simulated service and what it saw: which delivery is which message."""

    def __init__(self, workload: Workload, policy: RetryPolicy, seed: int, clock: VirtualClock) -> None:
        self.workload = workload
        self.policy = policy
        self.seed = seed
        self.clock = clock
        self.start = clock.now()
        self.poisoned = workload.poisoned(seed)
        #: (stream key, seq) of each delivery -> the workload message id (from 1)
        self.messages: dict[tuple[str, int], int] = {}

    def fails(self, message: int, attempt: int, now: float) -> bool:
        if message in self.poisoned:
            return True
        heal = self.workload.heal_after
        if heal is not None and now - self.start >= heal:
            return False
        rate = self.workload.failure_rate
        return rate >= 1.0 or (rate > 0.0 and _draw(self.seed, "fail", message, attempt) < rate)

    def handle(self, delivery: Delivery) -> HandlerOutcome:
        """The service: succeed (ack), or fail and ask for a retry after the policy's delay."""
        message = delivery.json()["id"]
        self.messages[(delivery.stream_key, delivery.seq)] = message
        attempt = delivery.attempt
        if self.fails(message, attempt, self.clock.now()):
            return HandlerOutcome.retry_after(self.policy.delay_for(attempt, message=message, seed=self.seed))
        return HandlerOutcome.ack()


def _dead_letter_key(policy: RetryPolicy) -> str | None:
    """The registration's dead-letter key: :data:`DEAD_LETTER_KEY` when the policy keeps dead letters."""
    return DEAD_LETTER_KEY if policy.dead_letter else None


def _drain(app: App) -> None:
    """Deliver and settle everything that is ready now."""
    while app.step() is not None:
        pass


def _drive(app: App, clock: VirtualClock, workload: Workload, send: Callable[[int], None]) -> None:
    """Publish message ``i`` at its arrival time; deliver every copy at its due time in between;
    then run until no copy is left, and shut down."""
    with _quiet():
        app.start()
        start = clock.now()
        for i in range(workload.messages):
            target = start + workload.arrival(i)
            while (due := app.next_due()) is not None and due <= target:
                app.fire_due(until=due)  # the virtual clock jumps to the copy's due time
                _drain(app)
            clock.set(target)
            send(i + 1)
            _drain(app)
        while True:
            _drain(app)
            due = app.next_due()
            if due is None:
                break
            app.fire_due(until=due)
        app.shutdown()


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Keep the runtime's per-settlement log lines (thousands of "ack / nack failed") out of the
    notebook: a simulation reports through its events, not its log."""
    logger = logging.getLogger("nbkit")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    propagate = logger.propagate
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = propagate
        logger.removeHandler(handler)


def _payload(message: int) -> str:
    return json.dumps({"id": message})


def _run_file(workload: Workload, policy: RetryPolicy, seed: int, path: str) -> tuple[list, dict, int]:
    if os.path.exists(path):
        os.remove(path)
    clock = VirtualClock()
    broker = FileBroker(path)
    app = App(broker, clock=clock, keep_events=None)
    trial = _Trial(workload, policy, seed, clock)
    broker.subscriber(
        KEY,
        start_at=FilePosition.beginning(),
        max_attempts=policy.max_attempts,
        dead_letter=_dead_letter_key(policy),
    )(trial.handle)
    originals = 0

    def send(message: int) -> None:
        nonlocal originals
        before = os.path.getsize(path)
        broker.publish(KEY, _payload(message))
        originals += os.path.getsize(path) - before

    with _quiet():
        app.start()
    grown_from = os.path.getsize(path)  # header and priming message
    _drive(app, clock, workload, send)
    added = os.path.getsize(path) - grown_from - originals
    return list(app.events), {("file", *k): v for k, v in trial.messages.items()}, added


def _run_pipe(workload: Workload, policy: RetryPolicy, seed: int) -> tuple[list, dict, int]:
    clock = VirtualClock()
    out: list[str] = []
    broker = StdioBroker(stdin=[], stdout=out, loopback=True)
    app = App(broker, clock=clock, keep_events=None)
    trial = _Trial(workload, policy, seed, clock)
    for key, name in ((KEY, None), (RETRY_KEY, f"{KEY}-retries")):
        broker.subscriber(
            key,
            name=name,
            max_attempts=policy.max_attempts,
            dead_letter=_dead_letter_key(policy),
            out_retry=RETRY_KEY,
        )(trial.handle)

    def send(message: int) -> None:
        broker.feed(format_line(int(clock.now() * 1000), KEY, message - 1, _payload(message)))

    _drive(app, clock, workload, send)
    added = sum(len(line.encode("utf-8")) + 1 for line in out)
    return list(app.events), {("pipe", *k): v for k, v in trial.messages.items()}, added


def simulate(
    workload: Workload,
    policy: RetryPolicy,
    *,
    transport: str = "both",
    seed: int = 0,
    path: str | os.PathLike | None = None,
) -> pd.DataFrame:
    """Run ``workload`` through a service retrying with ``policy``, on a virtual clock; return the events.

    The file run subscribes ``orders`` on a fresh stream file (copies are appended under ``orders``
    and read back live); the pipe run is a stage with ``out_retry="orders.retry"`` whose stdout is fed
    back to it (as the next stage of ``stage | stage`` would read it). The handler fails as the
    workload says (drawn per message and attempt from ``seed``) and answers
    ``retry_after(policy.delay_for(attempt))``; a success acks.

    Parameters
    ----------
    workload : Workload
        The messages and how the handler fails.
    policy : RetryPolicy
        ``max_attempts``, the delay schedule and whether there is a dead-letter key.
    transport : {"both", "file", "pipe"}, default "both"
        Which transports to run.
    seed : int, default 0
        Fixes the failures, the poisoned messages and the jitter.
    path : str or PathLike, optional
        Where the file run writes its stream file (replaced if it exists, kept afterwards); default a
        temporary file, removed at the end.

    Returns
    -------
    DataFrame
        One row per settlement in the :mod:`nbkit.runtime.events` schema, file rows first, plus
        ``message`` (Int64): the workload message (from 1) the delivery carried. ``attrs`` holds the
        ``workload``, the ``policy``, the ``seed`` and ``bytes_added`` per transport (the bytes the
        copies added: to the stream file, or to the pipe's stdout). :func:`policy_summary` reads it.

    Examples
    --------
    >>> policy = RetryPolicy(max_attempts=2, delay=5)
    >>> events = simulate(Workload(messages=2, failure_rate=1.0), policy, transport="file")
    >>> events[["time", "attempt", "action", "delay", "destination", "message"]]
                           time  attempt        action  delay  destination  message
    0 2024-01-01 00:00:00+00:00        1  delayed-copy    5.0       orders        1
    1 2024-01-01 00:00:05+00:00        2   dead-letter    0.0  orders.dead        1
    2 2024-01-01 00:00:30+00:00        1  delayed-copy    5.0       orders        2
    3 2024-01-01 00:00:35+00:00        2   dead-letter    0.0  orders.dead        2
    """
    if not isinstance(workload, Workload):
        raise ValueError(f"workload must be an nbkit.Workload(...), not {workload!r}")
    if not isinstance(policy, RetryPolicy):
        raise ValueError(f"policy must be an nbkit.RetryPolicy(...), not {policy!r}")
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {', '.join(repr(t) for t in TRANSPORTS)}, not {transport!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be a whole number, not {seed!r}")
    events: list = []
    messages: dict = {}
    added: dict[str, int] = {}
    if transport in ("file", "both"):
        if path is None:
            with tempfile.TemporaryDirectory(prefix="nbkit-simulate-") as tmp:
                got = _run_file(workload, policy, seed, os.path.join(tmp, "orders.ss"))
        else:
            got = _run_file(workload, policy, seed, os.fspath(path))
        events += got[0]
        messages.update(got[1])
        added["file"] = got[2]
    if transport in ("pipe", "both"):
        got = _run_pipe(workload, policy, seed)
        events += got[0]
        messages.update(got[1])
        added["pipe"] = got[2]
    frame = events_frame(events)
    frame["message"] = pd.array([messages.get((e.transport, e.stream_key, e.seq)) for e in events], dtype="Int64")
    frame.attrs.update(workload=workload, policy=policy, seed=seed, bytes_added=added)
    return frame


SUMMARY_COLUMNS = (
    "messages",
    "delivered",
    "dead-lettered",
    "rejected",
    "copies written",
    "bytes added",
    "mean to success (s)",
    "p95 to success (s)",
    "longest wait (s)",
)


def policy_summary(events: pd.DataFrame) -> pd.DataFrame:
    """One row per transport: what the policy cost and how long messages waited.

    Parameters
    ----------
    events : DataFrame
        What :func:`simulate` returned (it needs the ``message`` column).

    Returns
    -------
    DataFrame
        Indexed by transport, with the columns ``messages``; ``delivered`` (handled successfully),
        ``dead-lettered``, ``rejected`` (messages that ended there); ``copies written`` (retry and
        dead-letter copies); ``bytes added`` (by those copies, to the file or to stdout; ``<NA>`` when
        unknown); ``mean to success (s)`` and ``p95 to success (s)`` (from a message's first delivery
        to its successful one, over delivered messages); ``longest wait (s)`` (from a message's first
        delivery to its last settlement, whatever the end).

    Examples
    --------
    >>> events = simulate(Workload(messages=2, failure_rate=1.0, heal_after=1), RetryPolicy(delay=2))
    >>> summary = policy_summary(events)
    >>> print(summary[["delivered", "dead-lettered", "copies written", "longest wait (s)"]].rename_axis(None))
          delivered  dead-lettered  copies written  longest wait (s)
    file          2              0               1               2.0
    pipe          2              0               1               2.0
    """
    if "message" not in events.columns:
        raise ValueError(
            "policy_summary reads the frame nbkit.simulate returns: it needs the column 'message'; "
            f"got columns {list(events.columns)}"
        )
    added = events.attrs.get("bytes_added", {})
    rows = []
    transports = [t for t in ("file", "pipe") if (events["transport"] == t).any()]
    for transport in transports:
        ev = events[events["transport"] == transport]
        seconds = (ev["time"] - ev["time"].min()).dt.total_seconds()
        by_message = seconds.groupby(ev["message"].to_numpy())
        first = by_message.min()
        last = by_message.max()
        acked = ev["outcome"] == "ack"
        success = pd.Series(seconds[acked].to_numpy(), index=ev.loc[acked, "message"].to_numpy())
        to_success = success - first.reindex(success.index)
        rows.append(
            {
                "transport": transport,
                "messages": len(first),
                "delivered": int(acked.sum()),
                "dead-lettered": int((ev["action"] == Action.DEAD_LETTER).sum()),
                "rejected": int((ev["action"] == Action.REJECTED).sum()),
                "copies written": int(ev["written_at"].notna().sum()),
                "bytes added": added.get(transport, pd.NA),
                "mean to success (s)": round(float(to_success.mean()), 3) if len(to_success) else math.nan,
                "p95 to success (s)": round(float(to_success.quantile(0.95)), 3) if len(to_success) else math.nan,
                "longest wait (s)": round(float((last - first).max()), 3) if len(first) else math.nan,
            }
        )
    frame = pd.DataFrame(rows, columns=["transport", *SUMMARY_COLUMNS]).set_index("transport")
    frame["bytes added"] = frame["bytes added"].astype("Int64")
    return frame
