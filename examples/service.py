"""An order service on a stream file: run it with ``nbkit run service:app`` from this folder.

It follows ``orders.ss`` (created if missing), saves its position after every settlement, retries a
flaky order twice with a 2 s delay and writes what still fails to ``orders.dead``. It reports through
``logging``, never ``print``: ``nbkit run`` writes log lines to stderr beside the runtime's own, in order,
and a service's stdout stays free for messages (a pipe stage's stdout is the next stage's input).
"""

import logging

from nbkit import App, FileBroker, HandlerOutcome, PositionStore

log = logging.getLogger("shop")

broker = FileBroker("orders.ss", end_with_eos=False)
store = PositionStore("orders.positions.json")


@broker.subscriber(
    "orders", start_at=store.position("orders"), checkpoint=store, max_attempts=3, dead_letter="orders.dead"
)
def handle(delivery):
    order = delivery.json()
    if order.get("flaky") and delivery.attempt < 3:
        return HandlerOutcome.retry_after(2)  # a copy is appended to orders.ss in 2 s
    log.info("paid %s attempt %s", order["id"], delivery.attempt)
    return HandlerOutcome.ack()  # logged as unsupported; nothing else happens


app = App(broker, shutdown_timeout=10)
