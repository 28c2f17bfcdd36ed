"""``async def`` handlers under ``step()``, ``astep()``, ``run()`` and ``run_async()``, on both transports."""

from __future__ import annotations

import asyncio
import threading

import pytest

from nbkit import App, ConfigurationError, FileBroker, HandlerOutcome, StdioBroker

from .helpers import RETRY, START, drain, lines, records, seed


def _handler(seen):
    async def handler(d):
        await asyncio.sleep(0)  # the handler awaits (a turn of the loop): what an async handler does
        seen.append((d.payload, d.attempt))
        if d.payload == b"boom":
            raise ValueError("async boom")
        if d.payload == b"again" and d.attempt == 1:
            return HandlerOutcome.retry_after(3)
        return None

    return handler


def _file_app(path, clock, seen):
    seed(path, [("jobs", b"ok"), ("jobs", b"boom"), ("jobs", b"again")])
    broker = FileBroker(path)
    broker.subscriber("jobs", start_at=None, replay=True)(_handler(seen))
    return App(broker, clock=clock)


def _pipe_app(out, clock, seen):
    broker = StdioBroker(stdin=["[jobs] ok", "[jobs] boom", "[jobs] again"], stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry")(_handler(seen))
    return App(broker, clock=clock)


EXPECTED_OUTCOMES = [
    ("ack", "unsupported", None),
    ("drop", "unsupported", "ValueError: async boom"),
    ("retry_after", "delayed-copy", None),
]


def _check(app, seen, transport, where):
    assert seen == [(b"ok", 1), (b"boom", 1), (b"again", 1)]
    assert [(e.outcome, e.action, e.error) for e in app.events] == EXPECTED_OUTCOMES
    assert app.events[2].written_at == START + 3
    if transport == "file":
        [copy] = [r for r in records(where, "jobs") if r.seq == 4]
        assert (copy.payload, copy.headers[RETRY]) == (b"again", "1")
    else:
        assert [(ln.key, ln.payload, ln.headers[RETRY]) for ln in lines(where)] == [("jobs.retry", b"again", "1")]


@pytest.mark.parametrize("mode", ["step", "run", "run_async"])
def test_async_handlers(transport, mode, ss, clock):
    seen: list = []
    out: list[str] = []
    app = _file_app(ss, clock, seen) if transport == "file" else _pipe_app(out, clock, seen)
    if mode == "step":
        app.start()
        drain(app)
        app.fire_due(START + 3)
        app.shutdown()
    elif mode == "run":
        app.run()
    else:
        asyncio.run(app.run_async())
    _check(app, seen, transport, ss if transport == "file" else out)
    assert app.stopped


def test_step_inside_a_running_event_loop_asks_for_astep(clock):
    """A notebook cell runs inside an event loop: step() cannot run an async handler there and says what to
    call instead; the delivery is kept, and astep() settles it on that loop."""
    seen: list = []
    out: list[str] = []
    app = _pipe_app(out, clock, seen)

    async def cell():
        with pytest.raises(ConfigurationError, match=r"await session\.astep\(\)"):
            app.step()
        assert seen == []  # the handler did not run
        return [await app.astep() for _ in range(4)]

    events = asyncio.run(cell())
    assert [e.outcome for e in events[:3]] == ["ack", "drop", "retry_after"] and events[3] is None
    assert seen == [(b"ok", 1), (b"boom", 1), (b"again", 1)]
    app.shutdown()
    assert lines(out)[0].payload == b"again"


def test_astep_awaits_on_the_running_loop_without_threads(clock, monkeypatch):
    loops = []

    async def handler(d):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)  # the handler awaits (a turn of the loop): what an async handler does
        return HandlerOutcome.retry_after(2) if d.attempt == 1 else None

    def no_threads(*args, **kwargs):
        raise AssertionError("nbkit started a thread")

    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(handler)
    app = App(broker, clock=clock)
    monkeypatch.setattr(threading.Thread, "start", no_threads)
    before = threading.active_count()

    async def main():
        events = [await app.astep(), await app.astep(), await app.astep()]
        return asyncio.get_running_loop(), events

    outer, events = asyncio.run(main())
    assert threading.active_count() == before
    assert loops == [outer, outer]
    assert [e.outcome for e in events[:2]] == ["retry_after", "retry_after"] and events[2] is None
    assert [e.written_at for e in app.fire_due(START + 2)] == [START + 2, START + 2]


def test_step_outside_a_loop_runs_async_handlers_on_the_apps_own_loop(clock, monkeypatch):
    loops = []

    async def handler(d):
        loops.append(asyncio.get_running_loop())

    monkeypatch.setattr(threading.Thread, "start", lambda *a, **k: pytest.fail("nbkit started a thread"))
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(handler)
    app = App(broker, clock=clock)
    assert [app.step().outcome, app.step().outcome] == ["ack", "ack"]
    assert loops[0] is loops[1] and not loops[0].is_closed()
    app.shutdown()
    assert loops[0].is_closed()


def test_run_async_awaits_on_the_running_loop(clock):
    loops = []

    async def handler(d):
        loops.append(asyncio.get_running_loop())

    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(handler)
    app = App(broker, clock=clock)

    async def main():
        await app.run_async()
        return asyncio.get_running_loop()

    outer = asyncio.run(main())
    assert loops == [outer, outer]


def test_mixed_sync_and_async_handlers(ss, clock):
    seed(ss, [("a", b"1"), ("b", b"2")])
    broker = FileBroker(ss)
    seen = []

    async def on_a(d):
        seen.append(("a", d.payload))

    broker.subscriber("a", replay=True)(on_a)
    broker.subscriber("b", replay=True)(lambda d: seen.append(("b", d.payload)))
    App(broker, clock=clock).run()
    assert sorted(seen) == [("a", b"1"), ("b", b"2")]
