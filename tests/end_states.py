"""One Session whose six messages end in every way a timeline lane can end, for the step and plot tests.

Messages (file ``orders``, ``max_attempts=2``): "ok" handled, "drop" dropped, "boom" dropped with an
exception, "never" rejected at the cap, "once" handled on attempt 2 (its copy due at 3 s), "slow" a copy
still due at 30 s. :func:`crashed_in_the_delay_window` is the lane that ends "lost".
"""

from __future__ import annotations

from pathlib import Path

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, StdioBroker

WORDS = ("ok", "drop", "boom", "never", "once", "slow")


def first_deliveries(tmp_path: Path) -> Session:
    """The session after each message's first delivery ("never" is copied at once, "once" in 3 s, "slow" in 30 s)."""
    broker = FileBroker(tmp_path / "o.ss")

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2)
    def handler(d):
        word = d.payload.decode()
        if word == "boom":
            raise RuntimeError(word)
        if word == "once":
            return HandlerOutcome.ack() if d.attempt > 1 else HandlerOutcome.retry_after(3)
        return {"ok": HandlerOutcome.ack(), "drop": HandlerOutcome.drop(), "slow": HandlerOutcome.retry_after(30)}.get(
            word, HandlerOutcome.retry()
        )

    session = Session(App(broker))
    for word in WORDS:
        broker.publish("orders", word)
    session.step(len(WORDS))
    return session


def every_end(session: Session) -> Session:
    """Then 4 s on: "once"'s copy is written at 3 s; "never" attempt 2 is rejected, "once" attempt 2 handled."""
    session.advance(4)
    session.step(len(WORDS))
    return session


def loopback_pipe() -> Session:
    """A loopback pipe stage run to its end: two lines, each retried at +2 s and +4 s, read back under
    ``jobs.retry`` by a second subscription, then dead-lettered at the cap (3 attempts)."""
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[], loopback=True)
    for key, name in (("jobs", None), ("jobs.retry", "retries")):
        broker.subscriber(key, name=name, max_attempts=3, dead_letter="jobs.dlq", out_retry="jobs.retry")(
            lambda d: HandlerOutcome.retry_after(2)
        )
    session = Session(App(broker))
    session.run()
    return session


def crashed_in_the_delay_window(tmp_path: Path) -> Session:
    """One order whose retry_after(30) copy is still due when the process crashes, 12 s on: the copy is lost."""
    broker = FileBroker(tmp_path / "o.ss")
    broker.subscriber("orders", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.retry_after(30))
    session = Session(App(broker))
    broker.publish("orders", "x")
    session.step()
    session.advance(12)
    session.crash()
    return session
