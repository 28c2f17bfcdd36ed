"""The first stage of a pipe: ``nbkit cat --format stdio in.ss | nbkit run first:app | nbkit run second:app``.

Every job it cannot do yet goes downstream as a retry copy under ``jobs.retry``; with
``max_attempts=2`` a copy that comes back at attempt 2 goes to ``jobs.dead`` instead.
"""

from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()  # stdin -> deliveries, stdout <- copies and publishes


@broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
def work(delivery):
    if delivery.json().get("ready"):
        broker.publish("jobs.done", delivery.payload)
        return HandlerOutcome.ack()
    return HandlerOutcome.retry_after(0)  # the copy goes downstream as "[ts | jobs.retry | 0] rs1:..."


app = App(broker)
