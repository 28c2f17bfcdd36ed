"""Session: steps, the virtual clock, pending copies, crash, reset, logs and reprs."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading

import pytest

from nbkit import App, ConfigurationError, FileBroker, FilePosition, HandlerOutcome, StdioBroker, StreamReader
from nbkit.notebook.session import PendingView, Session
from nbkit.wire import envelope


def make_file_session(tmp_path, handler, **options):
    path = tmp_path / "orders.ss"
    broker = FileBroker(path)
    options.setdefault("start_at", FilePosition.beginning())
    broker.subscriber("orders", **options)(handler)
    session = Session(App(broker))
    return path, broker, session


def test_step_delivers_one_at_a_time(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: None)
    for i in range(3):
        broker.publish("orders", f"o{i}")
    first = session.step()
    assert [e.seq for e in first] == [1]
    assert session.last_delivery.text == "o0"
    assert session.last_event.action == "unsupported"
    assert [e.seq for e in session.step(5)] == [2, 3]
    assert session.step() == []
    assert repr(session.step()) == "(nothing delivered)"
    assert session.counts()["unsupported"] == 3
    assert len(session.log) == 3 and "ack / nack failed" in session.log[0]


def test_advance_fires_due_copies_in_order(tmp_path):
    delays = {"a": 10, "b": 3}
    path, broker, session = make_file_session(
        tmp_path, lambda d: HandlerOutcome.retry_after(delays[d.text]) if d.attempt == 1 else None
    )
    broker.publish("orders", "a")
    broker.publish("orders", "b")
    session.step(2)
    start = session.now
    assert [p.due - start for p in session.pending] == [dt.timedelta(seconds=3), dt.timedelta(seconds=10)]
    assert isinstance(session.pending[0], PendingView)
    fired = session.advance(5)
    assert [e.seq for e in fired] == [2]  # the copy of "b" (seq 2) was due at +3 s
    assert session.now - start == dt.timedelta(seconds=5)
    assert len(session.pending) == 1
    fired = session.advance(dt.timedelta(seconds=5))
    assert [e.seq for e in fired] == [1]
    copies = [m for m in StreamReader(path) if m.stream_key == "orders"]
    assert [m.timestamp_ms - copies[0].timestamp_ms for m in copies] == [0, 0, 3000, 10000]
    with pytest.raises(ValueError):
        session.advance(-1)


def test_advance_shows_the_copies_written_and_their_next_attempt(tmp_path):
    path, broker, session = make_file_session(
        tmp_path, lambda d: HandlerOutcome.retry_after(5), max_attempts=3, dead_letter="orders.dead"
    )
    broker.publish("orders", "x")
    session.step()
    fired = session.advance(5)
    assert [(e.seq, e.attempt, e.copy_seq) for e in fired] == [(1, 1, 2)]
    # not the delivery again: the copy written during the advance, and the attempt it will arrive as
    assert repr(fired) == (
        "clock 2024-01-01T00:00:00Z -> 2024-01-01T00:00:05Z (+5 s): 1 delayed copy written\n"
        "  2024-01-01T00:00:05Z file: copy of orders #1, attempt 1 written to orders #2 (retry count 1), "
        "to be delivered as attempt 2"
    )
    html = fired._repr_html_()
    assert "<th style='text-align:left'>delivered next as attempt</th>" in html
    assert "<td style='text-align:left'>orders #2</td>" in html
    assert "retry_after" not in html  # no settlement row re-printed
    assert session.step()[0].attempt == 2  # as announced
    nothing = session.advance(1)
    assert nothing == [] and repr(nothing) == (
        "clock 2024-01-01T00:00:05Z -> 2024-01-01T00:00:06Z (+1 s): no delayed copy fell due "
        "(next due 2024-01-01T00:00:10Z)"
    )
    session.advance(4)
    session.step()  # attempt 3 reaches the cap: the dead-letter copy carries retry count 3
    assert repr(session.advance(60)).endswith("no delayed copy fell due (none pending)")


def test_pending_shows_the_attempt_each_copy_will_be_delivered_as(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: HandlerOutcome.retry_after(5))
    broker.publish("orders", "x")
    assert repr(session.pending) == "(no delayed copy pending)"
    session.step()
    (pending,) = session.pending
    assert (pending.attempt, pending.copy_of, pending.destination) == (2, "orders #1, attempt 1", "orders")
    assert repr(session.pending) == (
        "due 2024-01-01T00:00:05Z: copy of orders #1, attempt 1 -> 'orders', to be delivered as attempt 2"
    )
    assert "<td style='text-align:left'>2</td>" in session.pending._repr_html_()
    assert "to be delivered as attempt 2" in session._repr_html_()
    session.advance(5)
    assert session.step()[0].attempt == pending.attempt


def test_the_dead_letter_count_is_explained_where_it_appears(tmp_path):
    path, broker, session = make_file_session(
        tmp_path, lambda d: HandlerOutcome.retry(), max_attempts=3, dead_letter="orders.dead"
    )
    broker.publish("orders", "x")
    steps = session.run()
    assert [e.attempt for e in steps] == [1, 2, 3]
    assert repr(steps).splitlines()[-1] == (
        "file orders #3 attempt 3: retry -> copy written to dead-letter key 'orders.dead' "
        "with retry count 3 (the 3 attempts made)"
    )
    assert "retry count 3 = the attempts made" in steps._repr_html_()
    assert "written as #" in steps._repr_html_() and "delivered next as attempt 2" in steps._repr_html_()
    (dead,) = [m for m in StreamReader(path) if m.stream_key == "orders.dead"]
    headers, _payload = envelope.decode(dead.payload)
    assert headers[envelope.RETRY_COUNT_HEADER] == "3"


def test_run_jumps_the_clock_and_stops_at_max(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: HandlerOutcome.retry_after(2))
    broker.publish("orders", "forever")
    steps = session.run(max_deliveries=5)
    assert len(steps) == 5
    assert [e.attempt for e in steps] == [1, 2, 3, 4, 5]
    assert session.now - dt.datetime(2024, 1, 1, tzinfo=dt.UTC) == dt.timedelta(seconds=8)


def test_crash_loses_pending_copy(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: HandlerOutcome.retry_after(30))
    broker.publish("orders", "x")
    session.step()
    size = path.stat().st_size
    assert session.crash() == 1
    assert path.stat().st_size == size
    assert session.events["abandoned"].tolist() == [True]


def test_close_publishes_pending_copies(tmp_path):
    path, broker, session = make_file_session(
        tmp_path, lambda d: HandlerOutcome.retry_after(30) if d.attempt == 1 else None
    )
    broker.publish("orders", "x")
    session.step()
    session.close()
    keys = [(m.stream_key, m.payload) for m in StreamReader(path)]
    assert keys[-1][0] == "orders" and keys[-1][1].startswith(b"rs1:")


def test_reset_starts_over(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: HandlerOutcome.retry_after(1), max_attempts=2)
    broker.publish("orders", "x")
    size = path.stat().st_size
    assert len(session.run()) == 2
    assert path.stat().st_size > size
    session.reset()
    assert path.stat().st_size == size
    assert session.events.empty and session.pending == [] and session.log == []
    assert session.now == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert [e.attempt for e in session.run()] == [1, 2]


def test_pipe_session_output_and_reset():
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a"], stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: HandlerOutcome.retry())
    session = Session(App(broker))
    session.run()
    # retry() without a declaration is unsupported: nothing written
    assert session.output() == []
    assert session.events["action"].tolist() == ["unsupported"]
    session.reset()
    assert session.run()[0].action == "unsupported"


def test_session_refuses_started_app(tmp_path):
    broker = FileBroker(tmp_path / "x.ss")
    app = App(broker)
    app.start()
    with pytest.raises(ConfigurationError, match="already started"):
        Session(app)
    with pytest.raises(ConfigurationError):
        Session("not an app")


def test_reprs(tmp_path):
    path, broker, session = make_file_session(tmp_path, lambda d: HandlerOutcome.retry_after(5))
    broker.publish("orders", "<b>x</b>")
    steps = session.step()
    assert "copy to 'orders' due in 5 s, to be delivered as attempt 2" in repr(steps)
    assert "<table" in steps._repr_html_()
    html = session._repr_html_()
    assert "delayed-copy" in html and "pending copies: 1" in html
    assert "1 settled, 1 pending" in repr(session)
    delivery_html = session.last_delivery._repr_html_()
    assert "&lt;b&gt;x&lt;/b&gt;" in delivery_html and "<b>x</b>" not in delivery_html
    assert "delayed-copy" in session.last_event._repr_html_()


# ---------------------------------------------------------------- async handlers: astep / arun on the caller's loop


def make_async_pipe_session(stdin, handler):
    broker = StdioBroker(stdin=stdin, stdout=[])
    broker.subscriber("jobs", out_retry="jobs.retry")(handler)
    return Session(App(broker))


def test_astep_and_arun_await_async_handlers_on_the_running_loop(monkeypatch):
    loops = []

    async def handler(d):
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)  # the handler awaits (a turn of the loop): what an async handler does
        return HandlerOutcome.retry_after(5) if d.text == "b" else None

    session = make_async_pipe_session(["[jobs] a", "[jobs] b", "[jobs] c"], handler)
    monkeypatch.setattr(threading.Thread, "start", lambda *a, **k: pytest.fail("a thread was started"))
    threads = threading.active_count()

    async def cell():
        first = await session.astep()
        rest = await session.arun()
        return asyncio.get_running_loop(), first, rest

    loop, first, rest = asyncio.run(cell())
    assert threading.active_count() == threads
    assert loops == [loop] * 3
    assert [e.seq for e in first] == [0] and [(e.seq, e.action) for e in rest] == [
        (1, "delayed-copy"),
        (2, "unsupported"),
    ]
    assert session.last_event.seq == 2 and session.app.events[1].written_at is not None  # arun waited out the copy
    assert str(session.now) == "2024-01-01 00:00:05+00:00"
    assert sum("ack / nack failed" in line for line in session.log) == 2  # the log is captured as by step()


def test_step_with_an_async_handler_inside_a_running_loop_says_to_await_astep():
    async def handler(d):
        return None

    session = make_async_pipe_session(["[jobs] a"], handler)

    async def cell():
        with pytest.raises(ConfigurationError, match=r"await session\.astep\(\)"):
            session.step()
        return await session.astep()

    steps = asyncio.run(cell())
    assert [e.seq for e in steps] == [0]  # the delivery step() could not settle is settled by astep()


def test_step_with_an_async_handler_outside_a_loop_still_works():
    seen = []

    async def handler(d):
        seen.append(d.text)

    session = make_async_pipe_session(["[jobs] a", "[jobs] b"], handler)
    assert [e.seq for e in session.run()] == [0, 1] and seen == ["a", "b"]


def test_a_session_over_an_existing_file_starts_its_clock_after_the_latest_record(tmp_path):
    from nbkit import StreamWriter

    path = tmp_path / "later.ss"
    latest_ms = 1_780_000_000_250  # 2026-05-28T20:26:40.25Z, well after the clock's usual 2024-01-01 start
    with StreamWriter(path) as w:
        w.write("orders", b"a", timestamp_ms=latest_ms - 5_000)
        w.write("orders", b"b", timestamp_ms=latest_ms)
    broker = FileBroker(path)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2)
    def handle(delivery):
        return HandlerOutcome.retry_after(1) if delivery.attempt == 1 else None

    session = Session(App(broker))
    assert session.clock.now() == 1_780_000_001.0  # the next whole second after the latest record
    session.run()
    with StreamReader(path) as reader:
        stamps = [m.timestamp_ms for m in reader if not m.is_eos]
    assert len(stamps) == 4 and min(stamps[2:]) > latest_ms  # the copies come after what the file held


def test_a_session_over_a_new_file_starts_at_2024(tmp_path):
    broker = FileBroker(tmp_path / "new.ss")
    assert Session(App(broker)).now == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
