"""``App.run()`` settles the deliveries that are ready one after another without going through ``step()`` each
time (the subscription's ``Settlement.burst``); these tests hold it, and ``astep()``, to what stepping does: the
same events, log lines and records, copies, checkpoints, and the same reactions to what a handler does in the
middle of a run (add a log handler, rename a level, ask to stop, seek, raise, return an awaitable or a delayed
copy)."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, PositionStore, StdioBroker, VirtualClock
from nbkit.runtime import logs, run_log
from nbkit.wire.stdio_line import copy_line

from .helpers import RETRY, START_MS, KeepRecords, records, seed

N = 120  # messages under "orders" (and as many under "audit", which the subscription skips)


def _seeded(path: Path, n: int = N) -> None:
    seed(path, [(key, b'{"n": %d}' % i) for i in range(n) for key in ("orders", "audit")])


@contextmanager
def _run_log(limit: int = run_log.RUN_BUFFER) -> Iterator[io.StringIO]:
    """A RunLogHandler as the one handler of the ``nbkit`` loggers (as under ``nbkit run``); its text."""
    out = io.StringIO()
    handler = run_log.RunLogHandler(out, limit=limit)
    nbkit = logging.getLogger("nbkit")
    nbkit.addHandler(handler)
    nbkit.propagate = False
    try:
        yield out
    finally:
        handler.flush()
        nbkit.removeHandler(handler)
        nbkit.propagate = True
        handler.close()


def _mixed(delivery) -> object:
    """Every kind of result by sequence number: outcomes, None, a raise, a wrong return, an awaitable."""
    n = delivery.seq % 9
    if n == 3:
        raise ValueError(f"bad {delivery.seq}")
    if n == 7:
        return "not an outcome"
    if n == 8:

        async def later() -> HandlerOutcome:
            return HandlerOutcome.ack()

        return later()
    return [None, HandlerOutcome.ack(), HandlerOutcome.drop(), None, HandlerOutcome.retry(),
            HandlerOutcome.retry_after(5), HandlerOutcome.ack()][n]  # fmt: skip


def _app(path: Path, handler: Callable[..., object], tmp_path: Path, **options: object) -> App:
    broker = FileBroker(path)
    store = PositionStore(tmp_path / f"positions-{len(list(tmp_path.iterdir()))}.json")
    broker.subscriber("orders", replay=True, checkpoint=store, **options)(handler)  # type: ignore[arg-type]
    return App(broker, clock=VirtualClock(), keep_events=None)


def _stepped(app: App) -> None:
    """What run() does, one step() at a time."""
    app.start()
    while app.step() is not None or app.fire_due(app.next_due() or 0):
        pass
    app.shutdown()


def _astepped(app: App) -> None:
    """What run() does, one ``await app.astep()`` at a time, on a running event loop."""

    async def drive() -> None:
        app.start()
        while await app.astep() is not None or app.fire_due(app.next_due() or 0):
            pass

    asyncio.run(drive())
    app.shutdown()


#: Every way of taking a delivery: they all end in the subscription's Settlement, so they must agree
TAKES: dict[str, Callable[[App], None]] = {"step": _stepped, "astep": _astepped, "run": App.run}


def _outcome(run: Callable[[App], None], handler: Callable[..., object], tmp_path: Path, name: str, **options):
    """(events, log text, the file's messages, the checkpoint) after ``run`` over a seeded file (a traceback in
    the log text names the one place a handler is called, ``Settlement.handle``, whichever way it was taken)."""
    path = tmp_path / f"{name}.ss"
    _seeded(path)
    app = _app(path, handler, tmp_path, **options)
    with _run_log() as out:
        run(app)
    store = app.brokers[0].registrations[0].checkpoint
    assert store is not None
    return list(app.events), out.getvalue(), records(path), store.position("orders")


@pytest.mark.parametrize("options", [{}, {"max_attempts": 2, "dead_letter": "orders.dead"}])
def test_run_settles_as_stepping_does(tmp_path, options):
    got = {take: _outcome(run, _mixed, tmp_path, take, **options) for take, run in TAKES.items()}
    assert got["run"] == got["step"] and got["astep"] == got["step"]
    ran = got["run"]
    events, text = ran[0], ran[1]
    assert len(events) >= N and {e.action for e in events} >= {"unsupported", "delayed-copy"}
    assert text.count("ack / nack failed") > N // 2 and "handler raised" in text and ", in handle\n" in text


def _mixed_pipe(delivery) -> object:
    """:func:`_mixed` on a pipe, with copies written now (``retry_after(0)``) among them."""
    return HandlerOutcome.retry_after(0) if delivery.seq % 10 in (0, 9) else _mixed(delivery)


def _copies_pipe(delivery) -> object:
    """Copies written now, acks and drops, and no delayed copy: ``run()`` settles them in its burst."""
    return [HandlerOutcome.retry_after(0), HandlerOutcome.drop(), None][delivery.seq % 3]


def _pipe_line(i: int) -> str:
    """Stdin line ``i``: most under "jobs", some under "audit" (not read), every fifth a copy (attempt 2)."""
    key = "jobs" if i % 7 else "audit"
    if i % 5 == 4:
        return copy_line(START_MS + i * 1000, key, i, {RETRY: "1"}, b'{"n": %d}' % i)[:-1]
    return f'[2024-01-01T00:00:{i % 60:02d} | {key} | {i}] {{"n": {i}}}'


def _pipe_outcome(run: Callable[[App], None], stdin: str, tmp_path: Path, name: str, handler=_mixed_pipe, **options):
    """(events, log text, the stdout lines, the input counts) after ``run`` of a pipe stage over N lines (and
    a few for another key), read from a file (the lines of a read come from ``ready()``) or from a list."""
    lines = [_pipe_line(i) for i in range(N)]
    if stdin == "file":
        path = tmp_path / f"{name}.txt"
        path.write_text("".join(line + "\n" for line in lines))
        source: object = open(path, "rb")  # noqa: SIM115 (closed below)
    else:
        source = lines
    out: list[str] = []
    broker = StdioBroker(stdin=source, stdout=out)  # type: ignore[arg-type]
    broker.subscriber("jobs", out_retry="jobs.retry", **options)(handler)  # type: ignore[arg-type]
    app = App(broker, clock=VirtualClock(), keep_events=None)
    try:
        with _run_log() as text:
            run(app)
    finally:
        if stdin == "file":
            source.close()  # type: ignore[attr-defined]
    return list(app.events), text.getvalue(), out, broker.input_counts()


@pytest.mark.parametrize("stdin", ["file", "list"])
@pytest.mark.parametrize("options", [{}, {"max_attempts": 2, "dead_letter": "jobs.dead"}])
def test_a_pipe_stage_settles_as_stepping_does(tmp_path, options, stdin):
    """The pipe: run's burst (the lines read already, then stdin) and astep() against step(), copies among them."""
    got = {take: _pipe_outcome(run, stdin, tmp_path, f"{take}-{stdin}", **options) for take, run in TAKES.items()}
    assert got["run"] == got["step"] and got["astep"] == got["step"]
    events, text, out, _ = got["run"]
    actions = {e.action for e in events}
    assert actions == {"unsupported", "delayed-copy", "copy"} | ({"dead-letter"} if options else set())
    assert {e.attempt for e in events} == {1, 2}
    assert text.count("ack / nack failed") > N // 4 and "handler raised" in text
    assert len(out) == sum(1 for e in events if e.copy_seq is not None) > N // 10


@pytest.mark.parametrize("stdin", ["file", "list"])
@pytest.mark.parametrize("options", [{}, {"dead_letter": "jobs.dead"}])
def test_a_pipe_stages_copies_written_in_the_burst_are_those_stepping_writes(tmp_path, options, stdin):
    """No delayed copy pending: run() settles in its burst, copies (or dead letters) written there."""
    got = {
        take: _pipe_outcome(run, stdin, tmp_path, f"copies-{take}-{stdin}", handler=_copies_pipe, **options)
        for take, run in TAKES.items()
    }
    assert got["run"] == got["step"] and got["astep"] == got["step"]
    events, _, out, _ = got["run"]
    written = [e for e in events if e.copy_seq is not None]
    assert {e.action for e in written} == {"dead-letter" if options else "copy"} and len(out) == len(written) > N // 5
    assert all(e.written_at == e.time for e in written)


def test_records_name_settle_when_another_handler_sees_them(tmp_path):
    """With another handler beside the run handler, the WARNINGs are records, made in settle() as from step()."""
    got = {}
    for name, run in TAKES.items():
        seen: list[logging.LogRecord] = []
        mine = KeepRecords(seen)
        logs.DISPATCH.addHandler(mine)
        try:
            got[name] = _outcome(run, lambda d: None, tmp_path, name)
        finally:
            logs.DISPATCH.removeHandler(mine)
        got[name] += ([(r.funcName, r.lineno, r.getMessage(), r.seq, r.levelno) for r in seen],)
    assert got["run"][1:] == got["step"][1:] and got["astep"][1:] == got["step"][1:]
    assert len(got["run"][-1]) == N and got["run"][-1][0][0] == "settle"


def test_a_log_handler_added_by_a_handler_gets_the_next_records(tmp_path):
    seen: list[logging.LogRecord] = []
    mine = KeepRecords(seen)

    def handler(delivery) -> None:
        if delivery.seq == 10:
            logs.DISPATCH.addHandler(mine)
        if delivery.seq == 20:
            logs.DISPATCH.removeHandler(mine)

    try:
        _, text, _, _ = _outcome(App.run, handler, tmp_path, "added")
    finally:
        logs.DISPATCH.removeHandler(mine)
    assert [r.seq for r in seen] == list(range(10, 20))
    assert [int(line.split(" seq=")[1].split()[0]) for line in text.splitlines()] == list(range(1, N + 1))


@pytest.mark.parametrize("change", ["filter", "formatter", "level", "propagate"])
def test_a_change_to_the_run_handler_by_a_handler_is_seen_at_once(tmp_path, change):
    """A change made by the handler of delivery 5 applies to the WARNING of delivery 5 on, as when stepping."""

    def handler(delivery) -> None:
        if delivery.seq == 5:
            run = logging.getLogger("nbkit").handlers[0]
            if change == "filter":
                run.addFilter(lambda record: record.__dict__["seq"] % 2 == 0)  # an extra of nbkit's records
            elif change == "formatter":
                run.setFormatter(logging.Formatter("%(levelname)s seq %(seq)s"))
            elif change == "level":
                run.setLevel(logging.ERROR)
            else:
                logging.getLogger("nbkit").propagate = True  # root's handlers (pytest's) see them too

    _, text, _, _ = ran = _outcome(App.run, handler, tmp_path, f"{change}-ran")
    assert ran == _outcome(_stepped, handler, tmp_path, f"{change}-stepped")
    lines = text.splitlines()
    assert [line.split(" seq=")[1].split()[0] for line in lines[:4]] == ["1", "2", "3", "4"]
    after = {
        "filter": [f"seq={n} " for n in range(5, N + 1) if n % 2 == 0],
        "formatter": [f"WARNING seq {n}" for n in range(5, N + 1)],
        "level": [],
        "propagate": [f"seq={n} " for n in range(5, N + 1)],
    }[change]
    assert len(lines) == 4 + len(after) and all(want in line for want, line in zip(after, lines[4:], strict=True))


def test_a_renamed_level_is_seen_from_the_next_line(tmp_path):
    def handler(delivery) -> None:
        if delivery.seq == 3:
            logging.addLevelName(logging.WARNING, "WARN")

    try:
        _, text, _, _ = _outcome(App.run, handler, tmp_path, "renamed")
    finally:
        logging.addLevelName(logging.WARNING, "WARNING")
    assert [line.split()[0] for line in text.splitlines()][:5] == ["WARNING", "WARNING", "WARN", "WARN", "WARN"]


def test_a_stop_request_ends_the_run_after_that_delivery(tmp_path):
    path = tmp_path / "stop.ss"
    _seeded(path)
    seen: list[int] = []

    def handler(delivery) -> None:
        seen.append(delivery.seq)
        if delivery.seq == 7:
            app.request_stop()

    app = _app(path, handler, tmp_path)
    app.run()
    assert seen == list(range(1, 8)) and app.settled == 7 and app.stopped


def test_a_seek_by_a_handler_is_followed(tmp_path):
    path = tmp_path / "seek.ss"
    _seeded(path)
    seen: list[int] = []

    def handler(delivery) -> None:
        seen.append(delivery.seq)
        if delivery.seq == 50 and seen.count(50) == 1:
            app.subscriptions[0].seek(FilePosition.sequence(40))  # type: ignore[attr-defined]

    app = _app(path, handler, tmp_path)
    app.run()
    assert seen == list(range(1, 51)) + list(range(40, N + 1))


def test_prints_come_after_the_lines_of_the_deliveries_before_them(tmp_path):
    """Under ``nbkit run`` a print first writes out the gathered lines (LogOrderedStream)."""

    def handler(delivery) -> None:
        if delivery.seq % 10 == 0:
            print(f"handled {delivery.seq}", file=ordered)

    with _run_log() as out:
        ordered = run_log.LogOrderedStream(out)
        path = tmp_path / "print.ss"
        _seeded(path, 30)
        _app(path, handler, tmp_path).run()
    lines = out.getvalue().splitlines()
    assert lines.index("handled 10") == 9 and lines.index("handled 20") == 20 and len(lines) == 33


def test_an_async_handler_runs_on_the_apps_loop(tmp_path):
    async def handler(delivery) -> HandlerOutcome:
        await asyncio.sleep(0)  # the handler awaits (a turn of the loop): what an async handler does
        return HandlerOutcome.drop() if delivery.seq == 2 else HandlerOutcome.ack()

    events, text, _, position = _outcome(App.run, handler, tmp_path, "async")
    assert [e.outcome for e in events[:3]] == ["ack", "drop", "ack"] and len(events) == N
    assert text.count("ack / nack failed") == N and position == FilePosition.sequence(N + 1)


def test_the_lines_are_written_when_the_buffer_fills(tmp_path):
    """The run handler writes when its limit is reached, counting the lines it gathers as they will be written."""
    path = tmp_path / "full.ss"
    _seeded(path, 30)
    sizes: list[int] = []

    def handler(delivery) -> None:
        sizes.append(len(out.getvalue()))

    with _run_log(limit=1000) as out:
        _app(path, handler, tmp_path).run()
    lines = out.getvalue().splitlines(keepends=True)
    written = sorted(set(sizes))[1:]  # the text written before each delivery, once something was
    assert written and all(size >= 1000 for size in (written[0], written[1] - written[0]))
    assert all(size - 1000 < len(lines[0]) + 1 for size in (written[0], written[1] - written[0]))
