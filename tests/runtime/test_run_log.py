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
from nbkit.runtime import logs, run_log
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


def _ack_line(subscription: str, seq: int) -> None:
    """The ``ack / nack failed`` line of delivery ``seq`` of ``jobs``, written as a settlement writes it."""
    assert run_log.AckLog(subscription).write("jobs", seq, 1)  # the run handler is the only place it would go


OUTCOMES = [None, HandlerOutcome.drop(), HandlerOutcome.retry(), HandlerOutcome.retry_after(0), None]


def _stdlib_text(clock) -> str:
    """What the stdlib StreamHandler with ``nbkit run``'s formatter writes for the OUTCOMES stage."""
    out = io.StringIO()
    stdlib = logging.StreamHandler(out)
    stdlib.setFormatter(logs.DeliveryFormatter(run_log.RUN_FORMAT))
    with only_handler(stdlib):
        _run_stage(OUTCOMES, clock)
    return out.getvalue()


def test_run_handler_writes_what_the_stdlib_handler_wrote(clock):
    expected = _stdlib_text(clock)
    assert expected.count("ack / nack failed") == 3 and "retry declaration" in expected
    out = io.StringIO()
    handler = run_log.RunLogHandler(out)
    with only_handler(handler):
        _run_stage(OUTCOMES, clock)
    assert out.getvalue() == expected


def test_lines_are_gathered_until_flushed(clock):
    out = io.StringIO()
    handler = run_log.RunLogHandler(out)
    with only_handler(handler):
        _ack_line("w", 3)
        assert out.getvalue() == ""
        run_log.flush_run_logs()
        assert out.getvalue() == (
            f'WARNING nbkit.dispatch: ack / nack failed subscription=w error="{ACK_TEXT}" stream_key=jobs seq=3 '
            "attempt=1\n"
        )


def test_an_error_record_and_a_full_buffer_are_written_at_once(clock):
    out = io.StringIO()
    handler = run_log.RunLogHandler(out, limit=300)
    dispatch = logging.getLogger("nbkit.dispatch")
    with only_handler(handler):
        _ack_line("w", 0)
        assert out.getvalue() == ""
        logs.emit(dispatch, logging.ERROR, "boom", subscription="w")
        assert out.getvalue().splitlines()[-1] == "ERROR nbkit.dispatch: boom subscription=w"
        for seq in range(1, 4):  # ~130 characters each: the third goes over the limit
            _ack_line("w", seq)
        assert [line.rsplit(" ", 2)[1] for line in out.getvalue().splitlines()[2:]] == ["seq=1", "seq=2", "seq=3"]


def test_gathered_lines_are_written_before_a_fork():
    """A forked child (a service that starts a process) must not write the parent's gathered lines again."""
    out = io.StringIO()
    handler = run_log.RunLogHandler(out)
    with only_handler(handler):
        _ack_line("w", 0)
        assert out.getvalue() == ""
        pid = os.fork()
        if pid == 0:  # the child: nothing to do
            os._exit(0)
        os.waitpid(pid, 0)
        assert out.getvalue().endswith("seq=0 attempt=1\n")


def test_skipped_texts_are_left_out(clock):
    out = io.StringIO()
    handler = run_log.RunLogHandler(out, skip_texts=(logs.STREAM_ERROR,))
    with only_handler(handler):
        logs.emit(logs.SUBSCRIBER, logging.ERROR, logs.STREAM_ERROR, subscription="w", error="bad")
        logs.emit(logs.SUBSCRIBER, logging.ERROR, "seek refused", subscription="w", error="bad")
    assert out.getvalue() == "ERROR nbkit.subscriber: seek refused subscription=w error=bad\n"


def test_caplog_and_a_users_handler_still_get_records(clock, caplog):
    """Any other handler (pytest's caplog on root, a handler of the user's) gets the LogRecords as before,
    and the run handler beside them still writes its lines."""
    out = io.StringIO()
    run = run_log.RunLogHandler(out)
    records: list[logging.LogRecord] = []
    mine = KeepRecords(records)
    dispatch = logging.getLogger("nbkit.dispatch")
    dispatch.addHandler(mine)
    logging.getLogger().addHandler(run)
    try:
        with caplog.at_level(logging.WARNING, logger="nbkit"):
            assert not run_log.AckLog("w").write("jobs", 0, 1)  # (caplog's, mine): the records are made
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
def test_records_are_made_when_anything_could_see_them(what, clock):
    dispatch = logging.getLogger("nbkit.dispatch")
    out = io.StringIO()
    handler = run_log.RunLogHandler(out)
    seen: list[object] = []

    def look(record: logging.LogRecord) -> bool:
        seen.append(record)
        return True

    factory = logging.getLogRecordFactory()
    with only_handler(handler):
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
            _run_stage([None], clock)
        finally:
            undo()
    if what == "formatter":  # the handler's own formatter writes the record (the message, no delivery fields)
        assert f'ack / nack failed subscription=worker error="{ACK_TEXT}"' in out.getvalue().splitlines()
        assert "stream_key=" not in out.getvalue()
    elif what != "lower logger":
        acks = [r for r in seen if getattr(r, "nbkit_text", None) == logs.ACK_FAILED]
        assert len(acks) == 1 and isinstance(acks[0], logging.LogRecord) and acks[0].funcName == "settle"


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
    assert broker.sink.before_flush is run_log.flush_run_logs


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
    ordered = run_log.LogOrderedStream(out)
    ordered.writelines(["a\n", "b\n"])
    assert ordered.getvalue() == "a\nb\n" and ordered.wrapped is out


def test_the_ack_line_is_the_line_the_handler_makes_of_its_record():
    """Line for line and flush for flush (a small limit, sequence numbers gaining digits, a level renamed, a pipe's
    stdin line): what ``AckLog.write`` gathers is what the run handler gathers from the settlement's record."""
    seqs = [*range(7, 12), *range(97, 103), *range(998, 1003), 10**19, 0]
    ack = run_log.AckLog("w")
    seen: dict[str, list[str]] = {}
    for way in ("record", "line"):
        out = io.StringIO()
        handler = run_log.RunLogHandler(out, limit=300)
        seen[way] = []
        with only_handler(handler):
            try:
                for seq in seqs:
                    if seq == 998:
                        logging.addLevelName(logging.WARNING, "WARN")
                    line = seq + 1 if seq % 2 else None
                    if way == "record":
                        logs.DISPATCH.warning(ack.message, extra=ack.extra(("w", "jobs", seq, 2, line)))
                    else:
                        assert ack.write("jobs", seq, 2, line)
                    seen[way].append(out.getvalue())
            finally:
                logging.addLevelName(logging.WARNING, "WARNING")
        seen[way].append(out.getvalue())
    assert seen["line"][-1] == seen["record"][-1]
    written = seen["record"]
    assert len(set(written)) > 3 and written[-1].count("\n") == len(seqs)
    assert f"WARN nbkit.dispatch: {ack.message} stream_key=jobs seq=998 attempt=2\n" in written[-1]
    assert f"WARNING nbkit.dispatch: {ack.message} stream_key=jobs seq=7 attempt=2 line=8\n" in written[-1]
    # written out at the same lines, or one line later (a pipe's line number is counted as 8 characters)
    flushes = {way: [n for n in range(1, len(seqs)) if seen[way][n] != seen[way][n - 1]] for way in seen}
    assert len(flushes["record"]) > 4 and len(flushes["line"]) >= len(flushes["record"]) - 1
    assert set(flushes["line"]) <= {n + late for n in flushes["record"] for late in (0, 1)}


def test_ack_log_rate_keeps_n_lines_a_second_and_counts_the_rest():
    """``nbkit run --ack-log-rate N``: at most N ``ack / nack failed`` lines a second, written as lines or from
    records; one line counts those left out (written at close, or when the next second's first line comes)."""
    out = io.StringIO()
    handler = run_log.RunLogHandler(out, ack_rate=3)
    ack = run_log.AckLog("w")
    with only_handler(handler):
        for seq in range(6):
            assert ack.write("jobs", seq, 1, seq + 1)
        for seq in range(6, 10):
            logs.DISPATCH.warning(ack.message, extra=ack.extra(("w", "jobs", seq, 1, seq + 1)))
    lines = out.getvalue().splitlines()
    assert lines == [
        *(f"WARNING nbkit.dispatch: {ack.message} stream_key=jobs seq={n} attempt=1 line={n + 1}" for n in range(3)),
        "WARNING nbkit.dispatch: ack / nack failed lines left out (ack_log_rate) count=7 per_second=3",
    ]


def test_ack_log_rate_is_checked():
    with pytest.raises(ValueError, match="ack_rate must be > 0"):
        run_log.RunLogHandler(io.StringIO(), ack_rate=0)
