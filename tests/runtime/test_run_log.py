"""The log handler ``nbkit run`` installs (``RunLogHandler``): the same lines as the stdlib handler wrote, gathered
and written out at the moments its docstring names; a settlement's WARNING reaches it without a LogRecord only
when nothing else could see the record (caplog, a user's handler or a filter get records as before)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from checkout_env import checkout_env

from nbkit import App, HandlerOutcome, StdioBroker
from nbkit.runtime import logs
from nbkit.transport.pipe_io import LineSink

from .helpers import ACK_TEXT, KeepRecords

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def only_handler(handler: logging.Handler) -> Iterator[None]:
    """``handler`` as the one handler of the ``nbkit`` loggers (no propagation to root, where pytest's are)."""
    nbkit = logging.getLogger("nbkit")
    nbkit.addHandler(handler)
    nbkit.propagate = False
    nbkit.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        nbkit.removeHandler(handler)
        nbkit.propagate = True
        nbkit.setLevel(logging.NOTSET)
        handler.close()


def _run_stage(outcomes: list[HandlerOutcome | None], clock) -> list[str]:
    """Run a pipe stage over one line per outcome; returns its stdout lines."""
    out: list[str] = []
    broker = StdioBroker(stdin=[f"[2024-01-01T00:00:00 | jobs] {i}" for i in range(len(outcomes))], stdout=out)
    it = iter(outcomes)
    broker.subscriber("jobs", name="worker", out_retry="jobs.retry", max_attempts=2)(lambda d: next(it))
    App(broker, clock=clock).run()
    return out


OUTCOMES = [None, HandlerOutcome.drop(), HandlerOutcome.retry(), HandlerOutcome.retry_after(0), None]


def _stdlib_text(clock) -> str:
    """What the stdlib StreamHandler with ``nbkit run``'s formatter writes for the OUTCOMES stage."""
    out = io.StringIO()
    stdlib = logging.StreamHandler(out)
    stdlib.setFormatter(logs.DeliveryFormatter(logs.RUN_FORMAT))
    with only_handler(stdlib):
        _run_stage(OUTCOMES, clock)
    return out.getvalue()


def test_run_handler_writes_what_the_stdlib_handler_wrote(clock):
    expected = _stdlib_text(clock)
    assert expected.count("ack / nack failed") == 3 and "retry declaration" in expected
    out = io.StringIO()
    handler = logs.RunLogHandler(out)
    with only_handler(handler):
        assert logs.sole_run_handler(logging.getLogger("nbkit.dispatch"), logging.WARNING) is handler
        _run_stage(OUTCOMES, clock)
    assert out.getvalue() == expected


def test_lines_are_gathered_until_flushed(clock):
    out = io.StringIO()
    handler = logs.RunLogHandler(out)
    with only_handler(handler):
        logs.ack_failed(logging.getLogger("nbkit.dispatch"), "w", ("w", "jobs", 3, 1))
        assert out.getvalue() == ""
        logs.flush_run_logs()
        assert out.getvalue() == (
            f'WARNING nbkit.dispatch: ack / nack failed subscription=w error="{ACK_TEXT}" stream_key=jobs seq=3 '
            "attempt=1\n"
        )


def test_an_error_record_and_a_full_buffer_are_written_at_once(clock):
    out = io.StringIO()
    handler = logs.RunLogHandler(out, limit=300)
    dispatch = logging.getLogger("nbkit.dispatch")
    with only_handler(handler):
        logs.ack_failed(dispatch, "w", ("w", "jobs", 0, 1))
        assert out.getvalue() == ""
        logs.emit(dispatch, logging.ERROR, "boom", subscription="w")
        assert out.getvalue().splitlines()[-1] == "ERROR nbkit.dispatch: boom subscription=w"
        for seq in range(1, 4):  # ~130 characters each: the third goes over the limit
            logs.ack_failed(dispatch, "w", ("w", "jobs", seq, 1))
        assert [line.rsplit(" ", 2)[1] for line in out.getvalue().splitlines()[2:]] == ["seq=1", "seq=2", "seq=3"]


def test_gathered_lines_are_written_before_a_fork():
    """A forked child (a service that starts a process) must not write the parent's gathered lines again."""
    out = io.StringIO()
    handler = logs.RunLogHandler(out)
    with only_handler(handler):
        logs.ack_failed(logging.getLogger("nbkit.dispatch"), "w", ("w", "jobs", 0, 1))
        assert out.getvalue() == ""
        pid = os.fork()
        if pid == 0:  # the child: nothing to do
            os._exit(0)
        os.waitpid(pid, 0)
        assert out.getvalue().endswith("seq=0 attempt=1\n")


def test_skipped_texts_are_left_out(clock):
    out = io.StringIO()
    handler = logs.RunLogHandler(out, skip_texts=(logs.STREAM_ERROR,))
    with only_handler(handler):
        logs.emit(logs.SUBSCRIBER, logging.ERROR, logs.STREAM_ERROR, subscription="w", error="bad")
        logs.emit(logs.SUBSCRIBER, logging.ERROR, "seek refused", subscription="w", error="bad")
    assert out.getvalue() == "ERROR nbkit.subscriber: seek refused subscription=w error=bad\n"


def test_caplog_and_a_users_handler_still_get_records(clock, caplog):
    """Any other handler (pytest's caplog on root, a handler of the user's) gets the LogRecords as before,
    and the run handler beside them still writes its lines."""
    out = io.StringIO()
    run = logs.RunLogHandler(out)
    records: list[logging.LogRecord] = []
    mine = KeepRecords(records)
    dispatch = logging.getLogger("nbkit.dispatch")
    dispatch.addHandler(mine)
    logging.getLogger().addHandler(run)
    try:
        with caplog.at_level(logging.WARNING, logger="nbkit"):
            assert logs.sole_run_handler(dispatch, logging.WARNING) is None
            _run_stage([None, None], clock)
    finally:
        dispatch.removeHandler(mine)
        logging.getLogger().removeHandler(run)
        run.close()
    for got in (records, [r for r in caplog.records if r.name == "nbkit.dispatch"]):
        assert [(r.levelno, r.nbkit_text, r.seq, r.funcName, r.filename) for r in got] == [
            (logging.WARNING, "ack / nack failed", n, "settle", "settlement.py") for n in (0, 1)
        ]
        assert got[0].getMessage() == f'ack / nack failed subscription=worker error="{ACK_TEXT}"'
    assert out.getvalue().splitlines() == [
        f'WARNING nbkit.dispatch: ack / nack failed subscription=worker error="{ACK_TEXT}" stream_key=jobs '
        f"seq={n} attempt=1 line={n + 1}"  # a pipe delivery's line ends with its stdin line number
        for n in (0, 1)
    ]


@pytest.mark.parametrize("what", ["logger filter", "handler filter", "formatter", "record factory", "lower logger"])
def test_records_are_made_when_anything_could_see_them(what):
    dispatch = logging.getLogger("nbkit.dispatch")
    handler = logs.RunLogHandler(io.StringIO())
    seen: list[object] = []

    def look(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    factory = logging.getLogRecordFactory()
    with only_handler(handler):
        assert logs.sole_run_handler(dispatch, logging.WARNING) is handler
        undo = {
            "logger filter": lambda: (dispatch.addFilter(look), lambda: dispatch.removeFilter(look)),
            "handler filter": lambda: (handler.addFilter(look), lambda: handler.removeFilter(look)),
            "formatter": lambda: (handler.setFormatter(logging.Formatter()), lambda: None),
            "record factory": lambda: (
                logging.setLogRecordFactory(lambda *a, **k: look(factory(*a, **k)) and seen[-1]),
                lambda: logging.setLogRecordFactory(factory),
            ),
            "lower logger": lambda: (dispatch.addHandler(logging.NullHandler()), lambda: dispatch.handlers.clear()),
        }[what]()[1]
        try:
            assert logs.sole_run_handler(dispatch, logging.WARNING) is None
            logs.ack_failed(dispatch, "w", ("w", "jobs", 0, 1))
        finally:
            undo()
    if what != "formatter" and what != "lower logger":
        assert len(seen) == 1 and isinstance(seen[0], logging.LogRecord)


def test_stdout_of_a_stage_waits_for_the_log_lines_before_it(clock):
    """The sink calls ``before_flush`` (the broker's: the run handler's flush) before it writes."""
    calls: list[str] = []
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader, os.fdopen(w, "wb") as writer:
        sink = LineSink([])
        sink.before_flush = lambda: calls.append("logs")
        sink.flush()
        assert calls == ["logs"]
        assert reader and writer  # (descriptors closed at the end)
    broker = StdioBroker(stdin=[], stdout=[])
    assert broker.sink.before_flush is logs.flush_run_logs


CRASHING = """
import os
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    if d.seq == CRASH_AT:
        os._exit(3)  # killed outright: nothing is flushed
    return HandlerOutcome.retry_after(0) if d.seq % 2 else None
app = App(broker)
"""


def _run_cli(tmp_path: Path, service: str, lines: int) -> subprocess.CompletedProcess[bytes]:
    (tmp_path / "stage.py").write_text(service)
    env = checkout_env()
    payload = "x" * 1000
    return subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "stage:app"],
        cwd=tmp_path,
        env=env,
        timeout=120,
        input="".join(f"[2024-01-01T00:00:00 | jobs | {i}] {payload}\n" for i in range(lines)).encode(),
        capture_output=True,
    )


def _acked(stderr: bytes) -> list[int]:
    return [int(line.split(" seq=")[1].split()[0]) for line in stderr.decode().splitlines() if " seq=" in line]


def test_a_killed_stage_loses_no_log_line_older_than_its_stdout(tmp_path):
    """Killed with os._exit at delivery 299: stdout was written in 64 KiB pieces before that; the WARNING of
        every acked delivery before the last copy on stdout is on stderr. What was gathered since is lost (how much
    depends on when the stage last went idle or wrote stdout)."""
    done = _run_cli(tmp_path, CRASHING.replace("CRASH_AT", "299"), 400)
    assert done.returncode == 3
    copies = [int(line.split(" | ")[2].split("]")[0]) for line in done.stdout.decode().splitlines()]
    assert copies and copies == list(range(len(copies)))  # the copies' own numbering: 0, 1, 2, ...
    last_settled = 2 * copies[-1] + 1  # the delivery whose copy is the last one written (odd seqs copy)
    acked = _acked(done.stderr)
    assert acked[: (last_settled + 1) // 2] == list(range(0, last_settled, 2))
    assert acked == list(range(0, 2 * len(acked), 2)) and acked[-1] < 299  # in order; what was gathered is lost


def test_a_finished_stage_writes_every_log_line(tmp_path):
    done = _run_cli(tmp_path, CRASHING.replace("CRASH_AT", "-1"), 400)
    assert done.returncode == 0, done.stderr
    assert _acked(done.stderr) == list(range(0, 400, 2))
    assert len(done.stdout.decode().splitlines()) == 200


PRINTING = """
import sys
from nbkit import App, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    print(f"handled {d.seq}", file=sys.stderr if d.seq % 2 else sys.stdout)
app = App(broker)
"""


def test_what_a_service_prints_comes_after_the_log_lines_before_it_and_never_on_stdout(tmp_path):
    """``nbkit run`` wraps stderr (``LogOrderedStream``) and, in a pipe stage, points ``sys.stdout`` at it: a
    print writes out the gathered log lines first, so each delivery's print follows the WARNING of the
    delivery before it, and stdout carries only the stage's data (here: none)."""
    done = _run_cli(tmp_path, PRINTING, 6)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    assert lines[-1].startswith("nbkit: run summary: input ended; 6 deliveries (ack 6)")
    err = [line.split(" attempt=")[0].split(" stream_key=jobs ")[-1] for line in lines[:-1]]
    assert err == [x for i in range(6) for x in (f"handled {i}", f"seq={i}")]
    assert done.stdout == b""


def test_the_ordered_stream_hands_everything_else_to_the_stream():
    out = io.StringIO()
    ordered = logs.LogOrderedStream(out)
    ordered.writelines(["a\n", "b\n"])
    assert ordered.getvalue() == "a\nb\n" and ordered.wrapped is out


def test_a_settlement_writer_gathers_and_writes_what_write_settlement_does():
    """Line for line and flush for flush (a small limit, sequence numbers gaining digits, a level renamed)."""
    seqs = [*range(7, 12), *range(97, 103), *range(998, 1003), 10**19, 0]
    seen: dict[str, list[str]] = {}
    for way in ("write_settlement", "settlement_writer"):
        out = io.StringIO()
        handler = logs.RunLogHandler(out, limit=300)
        write = handler.settlement_writer("nbkit.dispatch", logging.WARNING, "ack / nack failed", "jobs", 2)
        seen[way] = []
        try:
            for seq in seqs:
                if seq == 998:
                    logging.addLevelName(logging.WARNING, "WARN")
                if way == "write_settlement":
                    handler.write_settlement(
                        "nbkit.dispatch", logging.WARNING, "ack / nack failed", ("w", "jobs", seq, 2)
                    )
                else:
                    write(seq)
                seen[way].append(out.getvalue())
        finally:
            logging.addLevelName(logging.WARNING, "WARNING")
        handler.close()
        seen[way].append(out.getvalue())
    assert seen["settlement_writer"] == seen["write_settlement"]
    written = seen["write_settlement"]
    assert len(set(written)) > 3 and written[-1].count("\n") == len(seqs)
    assert "WARN nbkit.dispatch: ack / nack failed stream_key=jobs seq=998 attempt=2\n" in written[-1]


def test_ack_log_rate_keeps_n_lines_a_second_and_counts_the_rest():
    """``nbkit run --ack-log-rate N``: at most N ``ack / nack failed`` lines a second, by either way of writing
    them; one line counts those left out (written at close, or when the next second's first line comes)."""
    out = io.StringIO()
    handler = logs.RunLogHandler(out, ack_rate=3)
    write = handler.settlement_writer("nbkit.dispatch", logging.WARNING, "ack / nack failed", "jobs", 1)
    for seq in range(6):
        write(seq, seq + 1)
    for seq in range(6, 10):
        handler.write_settlement("nbkit.dispatch", logging.WARNING, "ack / nack failed", ("w", "jobs", seq, 1, seq + 1))
    handler.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        *(
            f"WARNING nbkit.dispatch: ack / nack failed stream_key=jobs seq={n} attempt=1 line={n + 1}"
            for n in range(3)
        ),
        "WARNING nbkit.dispatch: ack / nack failed lines left out (ack_log_rate) count=7 per_second=3",
    ]


def test_ack_log_rate_is_checked():
    with pytest.raises(ValueError, match="ack_rate must be > 0"):
        logs.RunLogHandler(io.StringIO(), ack_rate=0)
