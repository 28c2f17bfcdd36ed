"""nbkit.testing as a user tests a service with it: TestApp, the call records, the pytest fixtures.

Written only against the public API (``nbkit`` and ``nbkit.testing``). The last test runs one pipe stage
both ways, with TestApp and as ``python -m nbkit run MODULE:app`` on a pipe, and compares what each wrote
per stream key: the settling rules come from the same runtime.
"""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from checkout_env import checkout_env

from nbkit import App, FileBroker, HandlerOutcome, PositionStore, RetryDestinationError, StdioBroker
from nbkit.testing import ANY, TestApp

pytest_plugins = ("pytester",)
pytestmark = pytest.mark.timeout(120)


def _retry_header(count: int) -> dict[str, str]:
    return {"x-ruststream-retry-count": str(count)}


# -- a file service that retries with retry_after until the cap, then dead-letters ------------------------
def _orders(path: str = "orders.ss") -> tuple[App, FileBroker, object]:
    broker = FileBroker(path)

    @broker.subscriber("orders", max_attempts=3, dead_letter="orders.dead")
    def handle(delivery):
        return HandlerOutcome.retry_after(5)

    return App(broker, shutdown_timeout=10), broker, handle


def test_a_file_handler_retries_after_its_delay_until_the_cap_then_dead_letters(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app, broker, handle = _orders()
    with TestApp(app) as test:
        test.publish("orders", {"id": 1})
        assert [e.attempt for e in test.run_until_idle()] == [1]
        calls = test.handler(handle)
        calls.assert_called_once_with({"id": 1}, headers={}, key="orders")
        assert [p.attempt for p in test.pending] == [1]

        assert test.advance(4.9) == [] and calls.call_count == 1  # not due yet
        assert [e.attempt for e in test.advance(0.1)] == [2]  # the copy is appended at 5 s and delivered
        calls.assert_called_with({"id": 1}, headers=_retry_header(1))
        assert str(test.now) == "2024-01-01 00:00:05+00:00"

        assert [e.attempt for e in test.advance(60)] == [3]  # attempt 3 is the cap: a dead letter, no delay
        assert calls.call_count == 3 and [c.attempt for c in calls.calls] == [1, 2, 3]
        copies = test.expect_published("orders", 2)  # the two retry copies, appended under the key itself
        assert [c.retry_count for c in copies] == [1, 2] and all(c.json() == {"id": 1} for c in copies)
        [dead] = test.expect_published("orders.dead", 1)
        assert dead.retry_count == 3 and dead.json() == {"id": 1}
        assert test.dead_letters() == {"orders.dead": [dead]}
        assert [e.action for e in test.events] == ["delayed-copy", "delayed-copy", "dead-letter"]
        assert any("retry attempts exhausted; publishing the delivery to the dead-letter" in line for line in test.log)
        assert test.pending == []
    # the service's own broker is given back, and its file was never touched
    assert broker.path == "orders.ss" and broker.registrations[0].handler is handle
    assert not (tmp_path / "orders.ss").exists()
    assert len(test.published("orders.dead")) == 1  # still readable after the block


def test_the_same_module_level_app_is_tested_twice(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app, _, handle = _orders()
    for _ in range(2):
        with TestApp(app) as test:
            test.publish("orders", b"x")
            test.run_until_idle()
            test.handler(handle).assert_called_once_with(b"x")
            test.handler("orders").assert_called_once_with("x")  # by name too; str compares as UTF-8


def test_a_checkpoint_is_saved_in_the_test_folder_not_the_services(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    broker = FileBroker("orders.ss")
    store = PositionStore("orders.positions.json")

    @broker.subscriber("orders", checkpoint=store)
    def handle(delivery):
        return None

    with TestApp(broker) as test:  # a broker alone is an app of one broker
        test.publish("orders", "a")
        assert len(test.run_until_idle()) == 1
    assert not (tmp_path / "orders.positions.json").exists() and broker.registrations[0].checkpoint is store


def test_an_app_of_several_brokers_routes_each_message_to_the_broker_that_reads_its_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    orders, audit, out = FileBroker("shop.ss"), FileBroker("shop.ss"), StdioBroker()  # two brokers, one file

    @orders.subscriber("orders")
    def take(delivery):
        orders.publish("audit", delivery.payload)  # appended to the file the audit broker reads

    @audit.subscriber("audit")
    def record(delivery):
        out.publish("shipped", delivery.payload)

    @out.subscriber("returns", out_retry="returns.retry")
    def back(delivery):
        return None

    with TestApp(App(orders, audit, out)) as test:
        test.publish("orders", "o1")
        test.publish("returns", "r1")  # a line on the pipe broker's stdin
        test.run_until_idle()
        test.handler(record).assert_called_once_with("o1", key="audit")
        test.handler(back).assert_called_once_with("r1")
        assert {k: [m.text for m in v] for k, v in test.published_by_key().items()} == {
            "audit": ["o1"],
            "shipped": ["o1"],
        }
    assert orders.path == audit.path == "shop.ss" and not (tmp_path / "shop.ss").exists()


# -- a pipe stage with out_retry ---------------------------------------------------------------------------
def _stage() -> tuple[App, StdioBroker, object]:
    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
    def work(delivery):
        if delivery.json().get("ready"):
            broker.publish("jobs.done", delivery.payload)
            return HandlerOutcome.ack()
        return HandlerOutcome.retry_after(1)

    return App(broker), broker, work


def test_a_pipe_stage_writes_its_retry_copies_under_out_retry_for_the_next_stage():
    app, broker, work = _stage()
    with TestApp(app) as test:
        test.publish("jobs", {"id": 1, "ready": True})
        test.publish("jobs", {"id": 2})
        test.publish("jobs", {"id": 3}, headers=_retry_header(1))  # a copy from the stage before: attempt 2
        assert [(e.attempt, e.action) for e in test.run_until_idle()] == [
            (1, "unsupported"),
            (1, "delayed-copy"),
            (2, "dead-letter"),  # the cap: written at once
        ]
        test.expect_published("jobs.done", 1)
        test.expect_published("jobs.retry", 0)  # due in 1 s
        [dead] = test.expect_published("jobs.dead", 1)
        assert dead.json() == {"id": 3} and dead.retry_count == 2

        assert test.advance(1) == []  # the copy goes to stdout; it does not come back to this stage
        [copy] = test.expect_published("jobs.retry", 1)
        assert copy.json() == {"id": 2} and copy.retry_count == 1
        assert [line.split("] ")[0].split(" | ", 1)[1] for line in test.output()] == [
            "jobs.done | 0",
            "jobs.dead | 0",
            "jobs.retry | 0",
        ]

        calls = test.handler(work)
        assert calls.call_count == 3
        calls.assert_any_call({"id": 3}, headers=_retry_header(1))
        calls.assert_any_call(ANY, headers={})
        calls.assert_called_with(key="jobs")
    assert broker.registrations[0].handler is work


# -- async handlers ---------------------------------------------------------------------------------------
def _async_stage() -> tuple[App, object]:
    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry")
    async def work(delivery):
        await asyncio.sleep(0)  # e.g. a call to another service
        broker.publish("jobs.done", delivery.payload.upper())
        return HandlerOutcome.ack()

    return App(broker), work


def test_an_async_handler_in_a_sync_test_runs_on_the_apps_own_loop():
    app, work = _async_stage()
    with TestApp(app) as test:
        test.publish("jobs", "a")
        test.run_until_idle()
        test.handler(work).assert_called_once_with("a")
        assert [m.text for m in test.published("jobs.done")] == ["A"]


def test_an_async_handler_in_an_async_test_is_awaited_on_its_loop():
    app, work = _async_stage()

    async def scenario() -> list[str]:
        async with TestApp(app) as test:
            test.publish("jobs", "a")
            test.publish("jobs", "b")
            assert len(await test.arun_until_idle()) == 2
            assert await test.aadvance(5) == []
            test.handler(work).assert_called_with("b")
            return [m.text for m in test.expect_published("jobs.done", 2)]

    assert asyncio.run(scenario()) == ["A", "B"]


# -- what a failure says ----------------------------------------------------------------------------------
def test_a_failed_expect_published_says_what_was_published():
    app, _, _ = _stage()
    with TestApp(app) as test:
        test.publish("jobs", {"id": 1, "ready": True})
        test.publish("jobs", {"id": 9}, headers=_retry_header(1))
        test.run_until_idle()
        with pytest.raises(AssertionError) as failed:
            test.expect_published("jobs.retry", 1)
    text = str(failed.value)
    assert text.startswith("expected 1 message(s) published under 'jobs.retry', saw 0\n")
    assert "published per key: jobs.done: 1, jobs.dead: 1" in text
    assert "under 'jobs.dead':\n  1. #0 b'{\"id\": 9}' headers {'x-ruststream-retry-count': '2'}" in text


def test_a_failed_call_assertion_lists_every_call_numbered():
    app, _, work = _stage()
    with TestApp(app) as test:
        calls = test.handler(work)
        with pytest.raises(AssertionError, match="it was not called"):
            calls.assert_called()
        test.publish("jobs", {"id": 1})
        test.publish("jobs", {"id": 2})
        test.run_until_idle()
        with pytest.raises(AssertionError) as once:
            calls.assert_called_once_with({"id": 1})
        with pytest.raises(AssertionError) as anywhere:
            calls.assert_any_call({"id": 1}, headers=_retry_header(1))
        with pytest.raises(AssertionError) as last:
            calls.assert_called_with({"id": 1})
    lines = str(once.value).splitlines()
    assert lines[0] == "jobs: expected 1 call with payload={'id': 1}, got 2 call(s)"
    assert lines[1].startswith("call 1: key 'jobs', attempt 1, payload b'{\"id\": 1}', headers {}, returned ")
    assert lines[1].endswith(": matches")
    assert lines[2].startswith("call 2: ") and lines[2].endswith("payload is b'{\"id\": 2}', not {'id': 1}")
    assert "none of 2 matches" in str(anywhere.value)
    assert "call 1: " in str(anywhere.value) and "headers are {}, not {'x-ruststream-retry-count': '1'}" in str(
        anywhere.value
    )
    assert str(last.value).splitlines()[0] == "jobs: expected the last call with payload={'id': 1}"


def test_a_handler_that_raises_is_recorded_and_its_delivery_dropped():
    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=3)
    def work(delivery):
        raise ValueError("no such job")

    with TestApp(App(broker)) as test:
        test.publish("jobs", "x")
        assert [e.outcome for e in test.run_until_idle()] == ["drop"]
        [call] = test.handler(work).calls
        assert isinstance(call.error, ValueError)
        assert test.published_by_key() == {}


def test_a_handler_that_always_retries_without_a_cap_fails_the_test_instead_of_running_for_ever(tmp_path):
    broker = FileBroker(tmp_path / "loop.ss")

    @broker.subscriber("jobs", max_attempts=None)
    def work(delivery):
        return HandlerOutcome.retry_after(0)

    @broker.subscriber("other", dead_letter="other.dead")  # a dead-letter key alone: every retry goes there
    def other(delivery):
        return HandlerOutcome.retry()

    with TestApp(App(broker), max_deliveries=50) as test:
        test.publish("other", "y")
        test.run_until_idle()
        [dead] = test.expect_published("other.dead", 1)
        assert dead.retry_count == 1
        test.publish("jobs", "x")
        with pytest.raises(AssertionError, match="50 deliveries and the app is still not idle"):
            test.run_until_idle()


def test_asking_for_what_is_not_there_says_what_is():
    app, _, _ = _stage()
    with (
        TestApp(app) as test,
        pytest.raises(ValueError, match="no registration of 'nope'; the registrations are: jobs"),
    ):
        test.handler("nope")
    with pytest.raises(ValueError, match="the TestApp is closed"):
        test.publish("jobs", "x")
    with pytest.raises(ValueError, match="VirtualClock"):
        TestApp(app, clock=object())  # type: ignore[arg-type]


def test_an_app_that_cannot_start_fails_the_test_and_is_given_back():
    broker = StdioBroker()

    @broker.subscriber("jobs")  # no out_retry: a pipe stage refuses to start, as under nbkit run
    def work(delivery):
        return None

    test = TestApp(App(broker))
    with pytest.raises(RetryDestinationError, match='add out_retry="jobs.retry"'):
        test.start()
    assert broker.registrations[0].handler is work and not broker.connected
    test.close()  # nothing to shut down
    assert test.published_by_key() == {} and test.events == []


# -- the pytest fixtures ----------------------------------------------------------------------------------
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _entry_points() -> dict[str, str]:
    """The ``[project.entry-points.pytest11]`` table of pyproject.toml."""
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    return project.get("entry-points", {}).get("pytest11", {})


def test_the_plugin_is_declared_as_a_pytest_entry_point_named_as_its_module():
    # named as the module, `-p nbkit.testing_plugin` where it is installed finds it loaded (not loaded twice)
    assert _entry_points() == {"nbkit.testing_plugin": "nbkit.testing_plugin"}


def test_the_plugin_imports_no_runtime_until_a_fixture_is_used():
    code = "import sys, nbkit.testing_plugin; print(sorted(m for m in sys.modules if m.startswith(('nbkit.', 'pand'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=checkout_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['nbkit.errors', 'nbkit.testing_plugin']"


USERS_TEST = """
from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()

@broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")
def work(delivery):
    return HandlerOutcome.retry_after(5)

app = App(broker)

def test_retry(nbkit_app, virtual_clock):
    test = nbkit_app(app)
    test.publish("jobs", {"id": 1})
    test.run_until_idle()
    test.handler(work).assert_called_once_with({"id": 1})
    test.advance(5)
    assert virtual_clock.now() - virtual_clock.start == 5
    test.expect_published("jobs.retry", 1)

def test_given_back_after_the_test(nbkit_app):
    assert broker.registrations[0].handler is work
    nbkit_app(app).expect_published("jobs.retry", 0)

def test_a_failure_names_the_key(nbkit_app):
    nbkit_app(app).expect_published("jobs.retry", 2)
"""


@pytest.mark.parametrize("options", [(), ("-p", "nbkit.testing_plugin")], ids=["entry point", "and -p"])
def test_the_fixtures_run_a_users_test(pytester, monkeypatch, options):
    """An installed distribution's entry point (the table of pyproject.toml) loads the plugin; naming it
    with ``-p`` as well loads it once."""
    site = pytester.mkdir("site")
    dist = site / "nbkit_plugin_check-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: nbkit-plugin-check\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\n" + "".join(f"{k} = {v}\n" for k, v in _entry_points().items()))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), checkout_env()["PYTHONPATH"]]))
    pytester.makepyfile(test_service=USERS_TEST)
    result = pytester.runpytest_subprocess(*options, "-p", "no:cacheprovider", "test_service.py")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*expected 2 message(s) published under 'jobs.retry', saw 0*"])


# -- one scenario both ways: TestApp and `nbkit run` on a pipe ----------------------------------------------
STAGE = """
from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()


@broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=3, dead_letter="jobs.dead")
def work(delivery):
    job = delivery.json()
    if job.get("ready"):
        broker.publish("jobs.done", delivery.payload)
        return HandlerOutcome.ack()
    if job.get("bad"):
        return HandlerOutcome.drop()
    if job.get("now"):
        return HandlerOutcome.retry()
    return HandlerOutcome.retry_after(0.2)


app = App(broker)
"""


def _enveloped(headers: dict[str, str], payload: bytes) -> str:
    """An rs1 envelope, as the guide's envelope page lays it out (a line from a stage before)."""
    block = "".join(f"{name}: {value}\n" for name, value in headers.items()).encode()
    return "rs1:" + base64.b64encode(struct.pack(">I", len(block)) + block + payload).decode()


def _by_key(lines: list[str]) -> dict[str, list[tuple[bytes, dict]]]:
    """What a stage wrote, per key: (payload, headers) sorted (a delayed copy's place among lines is timing)."""
    from nbkit.testing.published import pipe_messages

    found: dict[str, list[tuple[bytes, dict]]] = {}
    for m in pipe_messages(lines):
        found.setdefault(m.key, []).append((m.payload, {k: v for k, v in m.headers.items() if k != "stream-sequence"}))
    return {k: sorted(v, key=repr) for k, v in sorted(found.items())}


def test_one_scenario_gives_the_same_copies_per_key_in_testapp_and_in_nbkit_run(tmp_path, monkeypatch):
    (tmp_path / "bothways_stage.py").write_text(STAGE)
    jobs = [
        {"id": 1, "ready": True},
        {"id": 2},  # retry_after: a copy under jobs.retry after 0.2 s
        {"id": 3},  # arrives as attempt 3 (retry count 2): the cap, a dead letter
        {"id": 4, "bad": True},  # drop: nothing written
        {"id": 5, "now": True},  # retry with a declaration: a copy at once
    ]
    headers = [{}, {}, _retry_header(2), {}, {}]
    stdin = [
        f"[2024-01-01T00:00:00 | jobs | {n}] " + (_enveloped(h, json.dumps(job).encode()) if h else json.dumps(job))
        for n, (job, h) in enumerate(zip(jobs, headers, strict=True))
    ]
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "bothways_stage:app"],
        input="".join(line + "\n" for line in stdin), cwd=tmp_path, env=checkout_env(),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    by_nbkit_run = _by_key(done.stdout.splitlines())

    spec = importlib.util.spec_from_file_location("bothways_stage", tmp_path / "bothways_stage.py")
    assert spec and spec.loader
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    with TestApp(stage.app) as test:
        for job, h in zip(jobs, headers, strict=True):
            test.publish("jobs", job, headers=h)
        test.run_until_idle()
        test.advance(1)
        by_testapp = _by_key(test.output())
        attempts = [c.attempt for c in test.handler(stage.work).calls]
    assert attempts == [1, 1, 3, 1, 1]
    assert by_testapp == by_nbkit_run
    assert {k: len(v) for k, v in by_testapp.items()} == {"jobs.dead": 1, "jobs.done": 1, "jobs.retry": 2}
    assert by_testapp["jobs.dead"] == [(b'{"id": 3}', _retry_header(3))]
