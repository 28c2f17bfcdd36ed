"""Write ``notebooks/data/real-clock-orders.ss`` (and its events CSV): an order service on a REAL clock.

Lesson 08 reads what a service really left behind, so this script runs one for a few seconds of real
time (``App`` on its default ``RealClock``): 16 orders published 0.1 s apart into a stream file, a
live subscription whose handler works 15 ms per delivery and retries transient failures with
exponential backoff (0.25 s, 0.5 s, 1 s), ``max_attempts=4``, dead-letter key ``orders.dead``. The
runtime's own settlement events (the schedule it chose) are saved beside the file as CSV, so the
lesson can compare the delays the file shows with the delays that were scheduled.

The outputs are committed; the lesson only reads them, so it is deterministic. Run again only to
regenerate them (the timestamps and the small lags will differ):

    python tools/make_real_clock_sample.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's nbkit

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, events_frame  # noqa: E402
from nbkit.runtime.delivery import Delivery  # noqa: E402

DATA = ROOT / "notebooks" / "data"
STREAM = DATA / "real-clock-orders.ss"
EVENTS = DATA / "real-clock-orders.events.csv"
ORDERS = 16
SPACING_S = 0.1
WORK_S = 0.015
BASE_DELAY_S = 0.25
#: How many times the payment fails for each order (4 or more: it never succeeds, so it is dead-lettered).
FAILS = [0, 1, 0, 2, 0, 0, 3, 1, 0, 9, 0, 1, 2, 0, 0, 1]
EVENT_COLUMNS = [
    "time",
    "stream_key",
    "seq",
    "attempt",
    "outcome",
    "action",
    "delay",
    "destination",
    "due",
    "written_at",
    "copy_seq",
]


def handle(delivery: Delivery) -> HandlerOutcome:
    """Pay for the order: ``fails`` transient failures first, each retried with exponential backoff."""
    order = delivery.json()
    time.sleep(WORK_S)  # the work a real handler does
    if delivery.attempt <= order["fails"]:
        return HandlerOutcome.retry_after(BASE_DELAY_S * 2 ** (delivery.attempt - 1))
    return HandlerOutcome.ack()


def run() -> App:
    """Publish the orders on schedule while the service runs; stop once nothing is left to do."""
    STREAM.unlink(missing_ok=True)
    broker = FileBroker(str(STREAM), end_with_eos=True)
    broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=4, dead_letter="orders.dead")(handle)
    app = App(broker, keep_events=None)
    app.start()
    start = app.clock.now()
    published = 0
    while True:
        now = app.clock.now()
        while published < ORDERS and now >= start + SPACING_S * published:
            order = {"id": published + 1, "fails": FAILS[published]}
            broker.publish("orders", json.dumps(order))
            published += 1
        if app.step() is None:
            if published == ORDERS and not app.pending:
                break
            time.sleep(0.002)
    app.shutdown()
    return app


def main() -> int:
    import logging

    logging.getLogger("nbkit").setLevel(logging.ERROR)  # the per-delivery "ack unsupported" warnings
    DATA.mkdir(parents=True, exist_ok=True)
    app = run()
    events = events_frame(app.events)[EVENT_COLUMNS]
    events.to_csv(EVENTS, index=False)
    print(
        f"wrote {STREAM.relative_to(ROOT)} ({STREAM.stat().st_size} bytes) and {EVENTS.relative_to(ROOT)} "
        f"({len(events)} settlements)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
