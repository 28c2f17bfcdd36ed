"""An order service on a stream file: run it with ``nbkit run service:app`` from this folder.

It follows ``orders.ss`` (created if missing), saves its position after every settlement, retries a
flaky order twice with a 2 s delay and writes what still fails to ``orders.dead``.
"""

from nbkit import App, FileBroker, HandlerOutcome, PositionStore

broker = FileBroker("orders.ss", end_with_eos=False)
store = PositionStore("orders.positions.json")


@broker.subscriber(
    "orders", start_at=store.position("orders"), checkpoint=store, max_attempts=3, dead_letter="orders.dead"
)
def handle(delivery):
    order = delivery.json()
    if order.get("flaky") and delivery.attempt < 3:
        return HandlerOutcome.retry_after(2)  # a copy is appended to orders.ss in 2 s
    print("paid", order["id"], "attempt", delivery.attempt, flush=True)
    return HandlerOutcome.ack()  # logged as unsupported; nothing else happens


app = App(broker, shutdown_timeout=10)
