"""The IPython extension: a cell becomes a handler; line magics drive the Session."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading

import pytest
from IPython import get_ipython
from IPython.testing.globalipapp import start_ipython

from nbkit import ConfigurationError


@pytest.fixture()
def ip(tmp_path):
    shell = start_ipython() or get_ipython()  # the global test shell is created once per process
    shell.run_line_magic("load_ext", "nbkit")
    shell.user_ns["path"] = str(tmp_path / "m.ss")
    yield shell
    shell.run_line_magic("nbkit_forget", "")
    shell.user_ns.pop("broker", None)


def test_cell_handler_steps_and_events(ip):
    ip.run_line_magic("nbkit_file", ip.user_ns["path"])
    ip.run_cell_magic(
        "nbkit_handler",
        "orders --max-attempts 2 --dead-letter orders.dead --start-at beginning",
        "from nbkit import HandlerOutcome\nreturn HandlerOutcome.retry_after(3)",
    )
    ip.user_ns["broker"].publish("orders", "hello")
    steps = ip.run_line_magic("nbkit_step", "")
    assert [(e.attempt, e.action) for e in steps] == [(1, "delayed-copy")]
    assert [p.destination for p in ip.run_line_magic("nbkit_pending", "")] == ["orders"]
    fired = ip.run_line_magic("nbkit_advance", "3")
    assert len(fired) == 1
    rest = ip.run_line_magic("nbkit_run", "")
    assert [(e.attempt, e.action) for e in rest] == [(2, "dead-letter")]
    events = ip.run_line_magic("nbkit_events", "")
    assert events["action"].tolist() == ["delayed-copy", "dead-letter"]
    assert list(events.columns[:5]) == ["stream_key", "seq", "attempt", "outcome", "action"]
    assert ip.user_ns["nbkit_session"].counts()["dead-letter"] == 1


def test_a_broker_cell_runs_again_after_nbkit_forget(ip, tmp_path):
    """A second Run All: the cell that opens the broker is refused once the session started, and runs
    again when it starts with %nbkit_forget (the error says so)."""

    def broker_cell(path):
        ip.run_line_magic("nbkit_forget", "")
        ip.run_line_magic("nbkit_file", path)
        ip.run_cell_magic("nbkit_handler", "orders --start-at beginning", "return None")
        ip.user_ns["broker"].publish("orders", "x")
        return ip.run_line_magic("nbkit_run", "")

    assert [e.seq for e in broker_cell(str(tmp_path / "first.ss"))] == [1]
    with pytest.raises(ConfigurationError, match="nbkit_forget"):
        ip.run_line_magic("nbkit_file", str(tmp_path / "first.ss"))
    assert [e.seq for e in broker_cell(str(tmp_path / "second.ss"))] == [1]
    assert len(ip.user_ns["nbkit_session"].app.brokers) == 1


def test_rerunning_the_cell_replaces_the_handler_after_reset(ip, capsys):
    ip.run_line_magic("nbkit_file", ip.user_ns["path"])
    ip.run_cell_magic("nbkit_handler", "orders --start-at beginning", "return None")
    ip.user_ns["broker"].publish("orders", "x")
    assert ip.run_line_magic("nbkit_run", "")[0].outcome == "ack"
    with pytest.raises(ConfigurationError, match="nbkit_reset"):
        ip.run_cell_magic("nbkit_handler", "orders", "return None")
    ip.run_line_magic("nbkit_reset", "")
    ip.run_cell_magic(
        "nbkit_handler", "orders --start-at beginning", "from nbkit import HandlerOutcome\nreturn HandlerOutcome.drop()"
    )
    assert ip.run_line_magic("nbkit_run", "")[0].outcome == "drop"
    ip.run_line_magic("nbkit_log", "")
    assert "ack / nack failed" in capsys.readouterr().out


def test_pipe_magic_with_stdin_variable(ip):
    ip.user_ns["lines"] = ["[jobs] one", "[jobs] two"]
    ip.run_line_magic("nbkit_pipe", "--stdin lines")
    ip.run_cell_magic(
        "nbkit_handler",
        "jobs --out-retry jobs.retry",
        "from nbkit import HandlerOutcome\nreturn HandlerOutcome.retry_after(0)",
    )
    ip.run_line_magic("nbkit_run", "")
    out = ip.user_ns["nbkit_session"].output()
    assert [line.split(" | ")[1] for line in out] == ["jobs.retry", "jobs.retry"]


def test_errors_are_clear(ip):
    with pytest.raises(ConfigurationError, match="nbkit_file"):
        ip.run_line_magic("nbkit_step", "")
    ip.run_line_magic("nbkit_file", ip.user_ns["path"])
    with pytest.raises(ConfigurationError, match="start-at"):
        ip.run_cell_magic("nbkit_handler", "orders --start-at yesterday", "return None")
    with pytest.raises(ConfigurationError, match="dead_letter key"):
        ip.run_cell_magic("nbkit_handler", "orders --dead-letter 'bad key'", "return None")


def test_magics_outside_ipython_say_where_they_run():
    from nbkit.notebook.magics import NbkitMagics

    with pytest.raises(ConfigurationError, match="run inside IPython"):
        NbkitMagics(None).nbkit_pipe("--stdin lines")


def test_an_option_of_the_other_transport_is_refused_and_the_handler_kept(ip):
    ip.run_line_magic("nbkit_file", ip.user_ns["path"])
    ip.run_cell_magic("nbkit_handler", "orders --start-at beginning", "return None")
    with pytest.raises(ConfigurationError, match="--out-retry is an option of a pipe"):
        ip.run_cell_magic("nbkit_handler", "orders --out-retry orders.retry", "return None")
    assert [r.key for r in ip.user_ns["broker"].registrations] == ["orders"]  # the first handler stays
    ip.user_ns["lines"] = ["[jobs] one"]
    ip.run_line_magic("nbkit_forget", "")
    ip.run_line_magic("nbkit_pipe", "--stdin lines")
    with pytest.raises(ConfigurationError, match="--replay and --start-at are options of a file"):
        ip.run_cell_magic("nbkit_handler", "jobs --out-retry jobs.retry --start-at beginning", "return None")


# -- async handlers: a line magic cannot await ------------------------------------------------------
AWAITING_CELL = "import asyncio\nawait asyncio.sleep(0)  # e.g. a call to another service\nreturn None"


def test_a_cell_that_awaits_becomes_an_async_handler(ip):
    ip.user_ns["lines"] = ["[jobs] one"]
    ip.run_line_magic("nbkit_pipe", "--stdin lines")
    ip.run_cell_magic("nbkit_handler", "jobs --out-retry jobs.retry", AWAITING_CELL)
    [registration] = ip.user_ns["pipe"].registrations
    assert inspect.iscoroutinefunction(registration.handler)
    ip.run_cell_magic(
        "nbkit_handler",
        "jobs --out-retry jobs.retry",
        "async def later():\n    await asyncio.sleep(0)\nreturn None",  # awaits only in a nested def
    )
    [registration] = ip.user_ns["pipe"].registrations
    assert not inspect.iscoroutinefunction(registration.handler)


def test_step_and_run_magics_refuse_async_handlers_in_a_running_loop_and_name_the_cell(ip, monkeypatch):
    monkeypatch.setattr(threading.Thread, "start", lambda self: pytest.fail(f"a thread was started: {self!r}"))
    ip.user_ns["lines"] = ["[jobs] one", "[jobs] two", "[jobs] three"]
    ip.run_line_magic("nbkit_pipe", "--stdin lines")
    ip.run_cell_magic("nbkit_handler", "jobs --out-retry jobs.retry", AWAITING_CELL)

    async def cell():  # a notebook cell: the kernel's loop is running
        with pytest.raises(ConfigurationError, match=re.escape("run `await nbkit_session.astep(2)` in a cell")):
            ip.run_line_magic("nbkit_step", "2")
        with pytest.raises(ConfigurationError, match=re.escape("`await nbkit_session.arun()`")):
            ip.run_line_magic("nbkit_run", "")
        with pytest.raises(ConfigurationError, match=re.escape("`await nbkit_session.arun(max_deliveries=1)`")):
            ip.run_line_magic("nbkit_run", "--max 1")
        session = ip.user_ns["nbkit_session"]
        assert len(session.events) == 0  # nothing was delivered, nothing is held back
        return await session.astep(2)  # what the error says to write

    steps = asyncio.run(cell())
    assert [(e.seq, e.outcome) for e in steps] == [(0, "ack"), (1, "ack")]
    # Without a running loop (a plain IPython shell) the magic steps the async handler itself.
    assert [e.seq for e in ip.run_line_magic("nbkit_step", "")] == [2]
