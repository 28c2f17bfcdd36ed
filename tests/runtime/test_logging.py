"""The runtime's log lines (§1.3): loggers, levels, texts and the ``nbkit_text``/``nbkit_fields``
that every record carries."""

from __future__ import annotations

import logging

from nbkit import App, FileBroker, HandlerOutcome, StdioBroker

from .helpers import ACK_TEXT, KeepRecords, drain, failing_broker, seed

DECLARATION_PREFIX = "retry declaration; a cap applies to the copies this process publishes"


def _texts(caplog, logger: str) -> list[tuple[int, str]]:
    return [(r.levelno, r.nbkit_text) for r in caplog.records if r.name == logger]


def test_every_runtime_record_carries_text_and_fields(ss, clock, caplog):
    seed(ss, [("jobs", b"ok"), ("jobs", b"boom"), ("jobs", b"cap")])
    broker = failing_broker(ss)

    app = App(broker, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.start()
        drain(app)
        app.shutdown()
    mine = [r for r in caplog.records if r.name.startswith("nbkit")]
    assert {r.name for r in mine} == {"nbkit.dispatch", "nbkit.retry", "nbkit.subscriber"}
    for rec in mine:
        assert isinstance(rec.nbkit_text, str) and rec.getMessage().startswith(rec.nbkit_text), rec.getMessage()
        assert isinstance(rec.nbkit_fields, dict)
    failed = [r for r in mine if r.levelno == logging.ERROR]
    assert len(failed) == 1
    assert failed[0].nbkit_fields["subscription"] == "jobs"
    assert failed[0].exc_info[0] is RuntimeError


def test_declaration_is_announced_once_per_declaring_registration(clock, caplog):
    broker = StdioBroker(stdin=[], stdout=[])
    broker.subscriber("a", out_retry="a.retry", max_attempts=3)(lambda d: None)
    broker.subscriber("b", out_retry="b.retry", dead_letter="b.dead")(lambda d: None)
    broker.subscriber("c", out_retry="c.retry")(lambda d: None)  # declares nothing
    app = App(broker, clock=clock)
    with caplog.at_level(logging.INFO, logger="nbkit"):
        app.start()
        app.start()  # idempotent
    recs = [r for r in caplog.records if r.name == "nbkit.retry"]
    assert [r.levelno for r in recs] == [logging.INFO, logging.INFO]
    assert all(r.nbkit_text.startswith(DECLARATION_PREFIX) for r in recs)
    assert [r.nbkit_fields for r in recs] == [
        {"subscription": "a", "max_attempts": 3, "dead_letter": None, "applied_by": "runtime"},
        {"subscription": "b", "max_attempts": None, "dead_letter": "b.dead", "applied_by": "runtime"},
    ]
    assert "subscription=a max_attempts=3" in recs[0].getMessage()
    assert recs[0].getMessage().endswith("applied_by=runtime")


def test_ack_nack_failed_per_settle(clock, caplog):
    stdin = ["[jobs] 1", "[jobs] 2", "[jobs] 3", "[jobs] 4"]
    outcomes = iter([HandlerOutcome.ack(), None, HandlerOutcome.drop(), HandlerOutcome.retry()])
    broker = StdioBroker(stdin=stdin, stdout=[])
    broker.subscriber("jobs", name="worker", out_retry="jobs.retry")(lambda d: next(outcomes))
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        App(broker, clock=clock).run()
    recs = [r for r in caplog.records if r.name == "nbkit.dispatch"]
    # the plain retry() (last) requeues nothing: upstream's text at ERROR, with outcome=retry
    assert [(r.levelno, r.nbkit_text) for r in recs] == [(logging.WARNING, "ack / nack failed")] * 3 + [
        (logging.ERROR, "ack / nack failed")
    ]
    assert recs[3].nbkit_fields["outcome"] == "retry"
    assert {r.nbkit_fields["subscription"] for r in recs} == {"worker"}
    assert {str(r.nbkit_fields["error"]) for r in recs} == {ACK_TEXT}
    assert recs[0].getMessage() == f'ack / nack failed subscription=worker error="{ACK_TEXT}"'


def test_subscriber_stream_ended_is_debug(ss, clock, caplog):
    seed(ss, [("jobs", b"x")])
    broker = FileBroker(ss)
    broker.subscriber("jobs", replay=True)(lambda d: None)
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        App(broker, clock=clock).run()
    ended = [r for r in caplog.records if r.nbkit_text == "subscriber stream ended"]
    assert len(ended) == 1
    assert (ended[0].name, ended[0].levelno, ended[0].nbkit_fields["subscriber"]) == (
        "nbkit.subscriber",
        logging.DEBUG,
        "jobs",
    )


def test_nothing_is_formatted_when_the_level_is_off(clock, caplog):
    broker = StdioBroker(stdin=["[jobs] 1"], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: None)
    with caplog.at_level(logging.ERROR, logger="nbkit"):
        App(broker, clock=clock).run()
    assert [r for r in caplog.records if r.name.startswith("nbkit")] == []


def _ack_records(clock, n: int) -> list[logging.LogRecord]:
    broker = StdioBroker(stdin=[f"[jobs] {i}" for i in range(n)], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: None)
    app = App(broker, clock=clock)
    records: list[logging.LogRecord] = []
    handler = KeepRecords(records)
    logger = logging.getLogger("nbkit.dispatch")
    logger.addHandler(handler)
    try:
        app.start()
        drain(app)
    finally:
        logger.removeHandler(handler)
        app.shutdown()
    return records


def test_a_settlement_record_names_the_app_code_that_settled(clock):
    """As ``logger.log(..., stacklevel=...)`` would: the source is the runtime's settlement, not the logs module."""
    records = _ack_records(clock, 2)
    assert [r.nbkit_text for r in records] == ["ack / nack failed"] * 2
    for rec in records:
        assert (rec.filename, rec.module, rec.funcName) == ("settlement.py", "settlement", "settle")
        assert rec.pathname.endswith("nbkit/runtime/settlement.py") and rec.lineno > 0


def test_a_record_factory_is_honoured(clock):
    made = []

    def factory(*args, **kwargs):
        record = logging.LogRecord(*args, **kwargs)
        record.custom = True
        made.append(record)
        return record

    old = logging.getLogRecordFactory()
    logging.setLogRecordFactory(factory)
    try:
        records = _ack_records(clock, 3)
    finally:
        logging.setLogRecordFactory(old)
    assert [r.custom for r in records] == [True] * 3 and made == records
