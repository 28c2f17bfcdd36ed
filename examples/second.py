"""The second stage of the pipe after ``first.py``: it reads what the first stage wrote on stdout.

Done jobs are passed on; a retry copy (``jobs.retry``, attempt 2) is tried once more and, since this
stage also caps at 2 attempts, goes to ``jobs.dead`` if it fails again.
"""

from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()


@broker.subscriber("jobs.done", out_retry="jobs.done.retry")  # every pipe registration names one
def done(delivery):
    broker.publish("jobs.finished", delivery.payload)


@broker.subscriber("jobs.retry", out_retry="jobs.retry2", max_attempts=2, dead_letter="jobs.dead")
def retry(delivery):
    return HandlerOutcome.retry_after(0)  # attempt 2 is the cap: a dead letter under jobs.dead


app = App(broker)
