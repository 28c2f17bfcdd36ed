"""Settlement log records name their delivery (issue 13): subscription, stream key, sequence and attempt
as ``extra`` attributes on every record about a settlement, shown at the end of ``nbkit run``'s lines
and of a Session's log; the upstream texts (``getMessage()``) are unchanged (test_logging.py)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from checkout_env import checkout_env

from nbkit import App, FileBroker, HandlerOutcome, Session, StdioBroker
from nbkit.runtime import logs

from .helpers import ACK_TEXT, drain, failing_broker, seed

ROOT = Path(__file__).resolve().parents[2]


def test_four_identical_warn_lines_name_four_deliveries(ss, clock, caplog):
    seed(ss, [("jobs", b"a"), ("jobs", b"b"), ("jobs", b"c"), ("jobs", b"d")])
    broker = FileBroker(ss)
    broker.subscriber("jobs", replay=True)(lambda d: None)
    app = App(broker, clock=clock)
    with caplog.at_level(logging.WARNING, logger="nbkit"):
        app.start()
        drain(app)
    recs = [r for r in caplog.records if r.name == "nbkit.dispatch"]
    assert {r.getMessage() for r in recs} == {f'ack / nack failed subscription=jobs error="{ACK_TEXT}"'}
    assert [(r.subscription, r.stream_key, r.seq, r.attempt) for r in recs] == [
        ("jobs", "jobs", n, 1) for n in (1, 2, 3, 4)
    ]
    assert len({logs.delivery_suffix(r) for r in recs}) == 4


def test_every_settlement_record_carries_the_delivery(ss, clock, caplog):
    seed(ss, [("jobs", b"ok"), ("jobs", b"boom"), ("jobs", b"cap"), ("jobs", b"reject")])
    broker = failing_broker(ss)

    other = FileBroker(ss)
    other.subscriber("jobs", replay=True, max_attempts=1, name="strict")(lambda d: HandlerOutcome.retry())
    app = App(broker, other, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.start()
        drain(app)
        app.shutdown()
    settling = [r for r in caplog.records if r.name == "nbkit.dispatch"]
    texts = {r.nbkit_text for r in settling}
    assert {logs.ACK_FAILED, logs.HANDLER_FAILED, logs.EXHAUSTED_DLQ, logs.EXHAUSTED_REJECT} <= texts
    for rec in settling:
        assert rec.subscription == rec.nbkit_fields["subscription"]
        assert rec.stream_key == "jobs" and rec.seq >= 1 and rec.attempt == 1, rec.__dict__
    others = [r for r in caplog.records if r.name != "nbkit.dispatch"]
    assert others and all(logs.delivery_suffix(r) == "" for r in others)  # not about one delivery


def test_session_log_lines_end_with_the_delivery():
    broker = StdioBroker(stdin=["[2024-01-01T00:00:00 | jobs] x", "[2024-01-01T00:00:00 | jobs] y"], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: None)
    session = Session(App(broker))
    session.run()
    assert session.log == [
        f'WARNING nbkit.dispatch: ack / nack failed subscription=jobs error="{ACK_TEXT}" stream_key=jobs seq={n} '
        f"attempt=1 line={n + 1}"
        for n in (0, 1)
    ]


STAGE = """
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=1)
def work(d):
    return HandlerOutcome.retry() if d.payload == b"cap" else None
app = App(broker)
"""


def test_nbkit_run_lines_end_with_the_delivery(tmp_path):
    (tmp_path / "stage.py").write_text(STAGE)
    env = checkout_env()
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "stage:app"],
        cwd=tmp_path,
        env=env,
        timeout=60,
        input=b"[2024-01-01T00:00:00 | jobs] a\n[2024-01-01T00:00:00 | jobs] cap\n",
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines() == [
        f'WARNING nbkit.dispatch: ack / nack failed subscription=jobs error="{ACK_TEXT}" stream_key=jobs seq=0 '
        "attempt=1 line=1",
        "ERROR nbkit.dispatch: retry attempts exhausted and no dead-letter destination is declared; rejecting "
        "the delivery subscription=jobs attempt=1 stream_key=jobs seq=1 line=2",
        f'WARNING nbkit.dispatch: ack / nack failed subscription=jobs error="{ACK_TEXT}" stream_key=jobs seq=1 '
        "attempt=1 line=2",
        "nbkit: run summary: input ended; 2 deliveries (ack 1, retry 1); 0 copies published, 1 rejected at the cap; "
        "stdout: 0 lines written; 2 lines read",
    ]
