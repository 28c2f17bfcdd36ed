"""The demo workload: an order service with transient failures, run through a file and a pipe.

Both runs use the same orders, the same handler and a virtual clock, so the summary and the
dashboard are identical on every machine; what differs is only what each transport does.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from nbkit.notebook.session import Session
from nbkit.runtime.app import App
from nbkit.runtime.delivery import Delivery
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.outcome import HandlerOutcome
from nbkit.runtime.settle import Action
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.runtime.vocabulary import COPY_ACTIONS
from nbkit.tabular.events import events_frame
from nbkit.transport.positions import FilePosition
from nbkit.wire.stdio_line import format_line

__all__ = [
    "DEAD_LETTER",
    "MAX_ATTEMPTS",
    "RETRY_KEY",
    "DemoResult",
    "handle_order",
    "make_orders",
    "run_demo",
    "run_file",
    "run_pipe",
    "summarize",
]


MAX_ATTEMPTS = 4
DEAD_LETTER = "orders.dead"
RETRY_KEY = "orders.retry"


def make_orders(n: int = 120, *, seed: int = 7) -> list[dict]:
    """``n`` orders; ``fails`` is how many times the payment service fails for each (4+ = never succeeds)."""
    rng = random.Random(seed)
    orders = []
    for i in range(1, n + 1):
        roll = rng.random()
        fails = 0 if roll < 0.55 else 1 if roll < 0.75 else 2 if roll < 0.87 else 3 if roll < 0.93 else 9
        orders.append(
            {
                "id": i,
                "item": rng.choice(["book", "lamp", "mug", "desk", "pen"]),
                "qty": rng.randint(1, 5),
                "fails": fails,
                "valid": rng.random() > 0.04,
            }
        )
    return orders


def handle_order(delivery: Delivery) -> HandlerOutcome:
    """Pay for the order: malformed orders are dropped; transient failures retry with backoff."""
    order = delivery.json()
    if not order.get("valid", True):
        return HandlerOutcome.drop()
    if delivery.attempt <= order["fails"]:
        return HandlerOutcome.retry_after(2**delivery.attempt)  # 2 s, 4 s, 8 s ...
    return HandlerOutcome.ack()


def _drive(session: Session, send: Callable[[int, str], object], orders: list[dict], spacing: float) -> None:
    """One order every ``spacing`` seconds of virtual time; due copies are published as time passes."""
    session.step(0)  # connect
    for i, order in enumerate(orders):
        send(i, json.dumps(order))
        session.step(1_000_000)
        session.advance(spacing)
    session.run()
    session.close()


def run_file(path: str, orders: list[dict], *, spacing: float = 1.0) -> Session:
    """The order service on a stream file: copies are appended under ``orders`` and read back live."""
    if os.path.exists(path):
        os.remove(path)
    broker = FileBroker(path, end_with_eos=True)
    broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=MAX_ATTEMPTS, dead_letter=DEAD_LETTER)(
        handle_order
    )
    session = Session(App(broker))
    _drive(session, lambda i, text: broker.publish("orders", text), orders, spacing)
    return session


def run_pipe(orders: list[dict], *, spacing: float = 1.0) -> Session:
    """The same service as a pipe stage: copies go to stdout under ``orders.retry``; with loopback
    the stage reads them back, as the next stage of a ``... | stage | stage`` chain would."""
    broker = StdioBroker(stdin=[], stdout=[], loopback=True)
    for key, name in (("orders", None), (RETRY_KEY, "orders-retries")):
        broker.subscriber(key, name=name, max_attempts=MAX_ATTEMPTS, dead_letter=DEAD_LETTER, out_retry=RETRY_KEY)(
            handle_order
        )
    session = Session(App(broker))
    clock = session.clock

    def send(i: int, text: str) -> None:
        broker.feed(format_line(int(clock.now() * 1000), "orders", i, text))

    _drive(session, send, orders, spacing)
    return session


def summarize(events: pd.DataFrame) -> pd.DataFrame:
    """Deliveries, copies, dead letters, rejections and drops per transport."""
    rows = []
    for transport in ("file", "pipe"):
        ev = events[events["transport"] == transport]
        rows.append(
            {
                "transport": transport,
                "deliveries": len(ev),
                "first deliveries": int((ev["attempt"] == 1).sum()),
                "retry copies": int(ev["action"].isin(COPY_ACTIONS).sum()),
                "dead letters": int((ev["action"] == Action.DEAD_LETTER).sum()),
                "rejected": int((ev["action"] == Action.REJECTED).sum()),
                "acked": int((ev["outcome"] == "ack").sum()),
                "dropped": int((ev["outcome"] == "drop").sum()),
                "max attempt": int(ev["attempt"].max()) if len(ev) else 0,
            }
        )
    return pd.DataFrame(rows).set_index("transport")


@dataclass(frozen=True)
class DemoResult:
    """What ``nbkit demo`` produced: the events of both runs, the summary, and the files written."""

    events: pd.DataFrame
    summary: pd.DataFrame
    stream_file: str
    pipe_output: str
    dashboard: str | None


def run_demo(out_dir: str = "nbkit-demo", *, orders: int = 120, seed: int = 7, png: bool = True) -> DemoResult:
    """Run the order service on a file and on a pipe; write ``orders.ss``, ``pipe-stdout.txt`` and
    ``dashboard.png`` into ``out_dir``; return the events and the summary table."""
    os.makedirs(out_dir, exist_ok=True)
    workload = make_orders(orders, seed=seed)
    file_session = run_file(os.path.join(out_dir, "orders.ss"), workload)
    pipe_session = run_pipe(workload)
    pipe_path = os.path.join(out_dir, "pipe-stdout.txt")
    with open(pipe_path, "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in pipe_session.output())
    events = events_frame([*file_session.app.events, *pipe_session.app.events])
    figure_path = None
    if png:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from nbkit.notebook.plots import dashboard

        fig = dashboard(events)
        figure_path = os.path.join(out_dir, "dashboard.png")
        fig.savefig(figure_path, dpi=100)
        plt.close(fig)
    return DemoResult(events, summarize(events), os.path.join(out_dir, "orders.ss"), pipe_path, figure_path)
