"""Widgets without a browser: click the buttons, read the HTML views and the Session's state."""

from __future__ import annotations

import asyncio
import html
import re
import threading
from typing import Any

import ipywidgets
import pytest

import nbkit.widgets
from nbkit import App, FileBroker, FilePosition, HandlerOutcome, RetryDestinationError, StdioBroker, StreamWriter
from nbkit.notebook.session import Session
from nbkit.notebook.widgets import SessionPanel, StreamBrowser
from nbkit.tabular.frames import read_stream


def text(widget) -> str:
    """An HTML widget's value as plain text."""
    return re.sub(r" +", " ", html.unescape(re.sub(r"<[^>]+>", " ", widget.value)))


def counts_shown(panel) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"<th[^>]*>([\w-]+)</th><td[^>]*>(\d+)</td>", panel.counts_view.value)}


def table_rows(browser) -> int:
    return browser.table.value.count("<tr>") - 1  # minus the header row


# -- SessionPanel --------------------------------------------------------------------------------------
@pytest.fixture
def panel(scenario) -> SessionPanel:
    return SessionPanel(scenario.session)


def test_panel_layout_and_initial_state(panel):
    assert isinstance(panel, ipywidgets.VBox)
    assert list(panel.buttons) == ["step", "step10", "run", "advance", "reset"]
    assert [b.description for b in panel.buttons.values()] == ["Step", "Step ×10", "Run", "Advance", "Reset"]
    assert panel.seconds.value == 5.0
    assert "no delivery yet" in text(panel.status)
    assert "clock 2024-01-01T00:00:00Z" in text(panel.status)
    assert "(none)" in text(panel.pending_view)
    assert set(counts_shown(panel).values()) == {0}
    assert "(no log lines)" in text(panel.log_view)
    assert bytes(panel.plot.value).startswith(b"\x89PNG")
    assert panel.plot in panel.children[2].children
    assert panel.children[3] is panel.timeline and bytes(panel.timeline.value).startswith(b"\x89PNG")
    assert "nbkit-panel-timeline" in panel.timeline._dom_classes


def test_headings_stand_on_their_own_lines_and_log_lines_wrap(panel):
    panel.buttons["run"].click()
    for view, heading in (
        (panel.counts_view, "settlements per action"),
        (panel.pending_view, "pending copies (0)"),
        (panel.log_view, "log"),
    ):
        assert view.value.startswith(
            f"<div class='nbkit-panel-heading' style='font-weight:bold;margin:0 0 0.3em 0'>{heading}</div>"
        )
    assert panel.counts_view.layout.margin == panel.pending_view.layout.margin == "0 2em 0 0"  # apart, side by side
    assert "white-space:pre-wrap;overflow-wrap:anywhere" in panel.log_view.value  # base64 lines wrap too


def test_step_shows_the_delivery_its_outcome_and_action(panel, scenario):
    panel.buttons["step"].click()
    session = scenario.session
    assert len(session.events) == 1
    status = text(panel.status)
    assert "Step: 1 delivered" in status
    assert "sequence 1" in status and "attempt 1" in status and "order 0" in status
    assert "outcome retry_after" in status
    assert session.last_event.describe() in status  # "file orders #1 attempt 1: ... due in 5 s"
    assert "due in 5 s" in status
    assert "pending copies (1)" in text(panel.pending_view)
    # the upcoming attempt: the copy of attempt 1 is delivered as attempt 2
    assert "orders due 2024-01-01T00:00:05Z: delivered next as attempt 2 (copy of orders #1, attempt 1)" in text(
        panel.pending_view
    )
    assert "to be delivered as attempt 2" in status
    assert counts_shown(panel)["delayed-copy"] == 1 and counts_shown(panel)["settled"] == 1


def test_advance_publishes_the_due_copy(panel, scenario):
    panel.buttons["step"].click()
    panel.buttons["advance"].click()
    session = scenario.session
    assert session.pending == []
    assert "clock 2024-01-01T00:00:05Z" in text(panel.status)
    assert "Advance 5 s: 1 delayed copy written (to be delivered: orders #4 as attempt 2)" in text(panel.status)
    assert "written after 5 s" in text(panel.status)  # the action, updated now that the copy exists
    assert "pending copies (0)" in text(panel.pending_view)
    copies = read_stream(scenario.path)
    assert list(copies["attempt"]) == [1, 1, 1, 2]  # the copy of order 0 was appended


def test_advance_uses_the_seconds_field(panel, scenario):
    panel.buttons["step"].click()
    panel.seconds.value = 2.5
    panel.buttons["advance"].click()
    assert "Advance 2.5 s: 0 delayed copies written" in text(panel.status)
    assert len(scenario.session.pending) == 1
    assert "clock 2024-01-01T00:00:02.500Z" in text(panel.status)


def test_step_ten_delivers_what_is_ready(panel, scenario):
    panel.buttons["step10"].click()
    assert len(scenario.session.events) == 7  # 3 file messages + 4 pipe lines are ready at +0 s
    assert "Step ×10: 7 delivered" in text(panel.status)
    panel.buttons["step"].click()
    assert "Step: nothing ready to deliver now" in text(panel.status)


def test_run_counts_log_and_plot(panel, scenario):
    before = bytes(panel.plot.value)
    panel.buttons["run"].click()
    session = scenario.session
    assert counts_shown(panel) == {**session.counts(), "settled": len(session.events)}
    assert counts_shown(panel)["dead-letter"] == 4
    assert f"Run: {len(session.events)} delivered" in text(panel.status)
    assert "clock 2024-01-01T00:00:15Z" in text(panel.status)
    assert "dead-letter key 'orders.dead' with retry count 3 (the 3 attempts made)" in text(panel.status)
    log = text(panel.log_view)
    assert "retry attempts exhausted" in log
    assert len(panel.log_view.value.split("\n")) <= panel.log_lines
    assert bytes(panel.plot.value).startswith(b"\x89PNG") and bytes(panel.plot.value) != before


def test_the_timeline_follows_every_button(panel, scenario):
    """Step, Advance, Step ×10, Run and Reset each redraw the timeline."""
    seen = [bytes(panel.timeline.value)]
    for name in ("step", "advance", "step10", "run", "reset"):
        if name == "advance":
            panel.seconds.value = 5
        panel.buttons[name].click()
        now = bytes(panel.timeline.value)
        assert now.startswith(b"\x89PNG") and now != seen[-1], name
        seen.append(now)
    assert len(seen[-1]) < len(seen[-2])  # after Reset: the empty timeline, a simpler picture
    panel.buttons["run"].click()
    drawn = bytes(panel.timeline.value)
    panel.refresh()
    assert bytes(panel.timeline.value) == drawn  # nothing changed: not redrawn


def test_advance_alone_redraws_the_timeline(tmp_path):
    broker = FileBroker(tmp_path / "o.ss")
    broker.subscriber("o", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.retry_after(5))
    session = Session(App(broker))
    broker.publish("o", "x")
    panel = SessionPanel(session)
    panel.buttons["step"].click()
    before = bytes(panel.timeline.value)
    panel.buttons["advance"].click()  # the same number of events; one of them now has its copy written
    assert bytes(panel.timeline.value) != before


def test_reset_starts_over(panel, scenario):
    panel.buttons["run"].click()
    panel.buttons["reset"].click()
    session = scenario.session
    assert len(session.events) == 0 and session.pending == []
    assert "no delivery yet" in text(panel.status)
    assert "Reset: started over" in text(panel.status)
    assert set(counts_shown(panel).values()) == {0}
    assert len(read_stream(scenario.path)) == 3  # the copies the session wrote are gone
    panel.buttons["step"].click()
    assert len(session.events) == 1 and "sequence 1" in text(panel.status)


def test_session_errors_are_shown_not_lost(panel, scenario):
    panel.buttons["step"].click()
    panel.seconds.value = -1
    panel.buttons["advance"].click()  # Session.advance refuses to go back in time
    status = text(panel.status)
    assert "error: ValueError: time only moves forward" in status
    assert "Advance failed" in status
    assert "sequence 1" in status  # the rest of the panel still shows the session
    assert len(scenario.session.events) == 1
    panel.seconds.value = 5
    panel.buttons["advance"].click()
    assert "error:" not in text(panel.status)


def test_errors_when_the_app_cannot_start(tmp_path):
    broker = StdioBroker(stdin=["[jobs] x"], stdout=[])
    broker.subscriber("jobs")(lambda d: None)  # a pipe needs out_retry: connect refuses
    panel = SessionPanel(Session(App(broker)), plot=False)
    panel.buttons["step"].click()
    assert "error: RetryDestinationError" in text(panel.status)
    assert len(panel.children[2].children) == 2  # counts and pending, no plot
    assert panel.timeline not in panel.children


def test_payloads_and_log_lines_are_escaped(tmp_path):
    broker = FileBroker(tmp_path / "x.ss")
    broker.subscriber("x", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.drop())
    session = Session(App(broker))
    broker.publish("x", "<script>alert(1)</script>")
    panel = SessionPanel(session, plot=False)
    panel.buttons["step"].click()
    assert "<script>" not in panel.status.value
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in panel.status.value
    assert "ack / nack failed" in text(panel.log_view)


def test_the_panel_follows_its_session_used_from_a_cell(panel, scenario):
    scenario.session.step(2)  # a cell, not a button: the panel redraws anyway
    assert "sequence 0" in text(panel.status)
    assert "pipe, subscription orders" in text(panel.status)  # round robin: file, then pipe
    before = bytes(panel.timeline.value)
    scenario.session.run()
    assert bytes(panel.timeline.value) != before  # the figures follow too
    assert counts_shown(panel)["settled"] == len(scenario.session.events)
    scenario.session.reset()
    assert "no delivery yet" in text(panel.status)


def test_a_closed_panel_stops_following(scenario):
    panel = SessionPanel(scenario.session, plot=False)
    panel.close()
    scenario.session.step()
    assert scenario.session._watchers == [] and "no delivery yet" in text(panel.status)


def test_the_display_data_holds_a_still_picture_of_the_panel_at_its_clock(panel, scenario):
    panel.buttons["step"].click()
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/plain" in bundle
    picture = bundle["text/html"]
    assert "A still picture of this panel at clock 2024-01-01T00:00:00Z" in picture
    assert "the buttons do nothing here" in picture and "Binder" in picture
    # the state of this moment: the delivery, the pending copy, both figures inline, buttons inert
    assert panel.status.value in picture and panel.pending_view.value in picture
    assert picture.count("src='data:image/png;base64,") == 2
    for label in ("Step", "Step ×10", "Run", "Advance", "Reset"):
        assert f"cursor:not-allowed;font-size:90%'>{label}</span>" in picture
    assert "<button" not in picture
    scenario.session.run()  # later cells change the live panel, never a picture already taken
    assert "pending copies (1)" in picture and "pending copies (0)" in panel._repr_mimebundle_()["text/html"]


# -- SessionPanel with async handlers, inside a running loop (as in Jupyter) ---------------------------
def async_session(*, lines: int = 2, fail_to_start: bool = False) -> Session:
    """A pipe fed back into itself whose ``async def`` handler awaits, then asks for one retry of each
    message after 2 s (the copy comes back as attempt 2, which is acknowledged)."""
    broker = StdioBroker(stdin=[f"[jobs] job {i}" for i in range(lines)], stdout=[], loopback=True)
    options: dict[str, Any] = (
        {} if fail_to_start else {"out_retry": "jobs", "max_attempts": 2, "dead_letter": "jobs.dead"}
    )

    @broker.subscriber("jobs", **options)
    async def handle(delivery):
        await asyncio.sleep(0)  # e.g. a call to another service: gives the loop a turn
        return HandlerOutcome.retry_after(2) if delivery.attempt == 1 else HandlerOutcome.ack()

    return Session(App(broker))


@pytest.fixture
def no_threads(monkeypatch):
    """Starting a thread fails the test: the async path runs on the caller's loop only."""

    def refuse(self):
        raise AssertionError(f"a thread was started: {self!r}")

    monkeypatch.setattr(threading.Thread, "start", refuse)


def test_async_step_runs_as_a_task_on_the_running_loop(no_threads):
    session = async_session()
    panel = SessionPanel(session, plot=False)
    assert session.has_async_handlers

    async def cell():
        panel.buttons["step"].click()  # what the kernel does on a click: the callback runs on its loop
        task = panel.task
        assert isinstance(task, asyncio.Task) and not task.done()
        assert "Step: running (async handlers)" in text(panel.status)
        assert all(b.disabled for b in panel.buttons.values())  # one task in flight at a time
        await task
        return task

    task = asyncio.run(cell())
    assert task.exception() is None
    assert not any(b.disabled for b in panel.buttons.values())
    status = text(panel.status)
    assert "Step: 1 delivered" in status and "error:" not in status
    assert "sequence 0" in status and "outcome retry_after" in status
    assert session.last_event.describe() in status
    assert "pending copies (1)" in text(panel.pending_view)
    assert counts_shown(panel)["delayed-copy"] == 1


def test_async_step_ten_and_run_settle_everything(no_threads):
    session = async_session(lines=3)
    panel = SessionPanel(session)

    async def cell(button):
        panel.buttons[button].click()
        await panel.task

    before = bytes(panel.timeline.value)
    asyncio.run(cell("step10"))
    assert "Step ×10: 3 delivered" in text(panel.status)
    assert bytes(panel.timeline.value) != before  # the charts are redrawn when the task ends
    asyncio.run(cell("run"))  # jumps the clock to the three copies and delivers them as attempt 2
    assert "Run: 3 delivered" in text(panel.status)
    assert session.events["attempt"].tolist() == [1, 1, 1, 2, 2, 2]
    assert counts_shown(panel)["delayed-copy"] == 3 and counts_shown(panel)["settled"] == 6
    assert "clock 2024-01-01T00:00:02Z" in text(panel.status)
    assert "(none)" in text(panel.pending_view)


def test_a_click_while_the_task_runs_is_refused_and_said(no_threads):
    session = async_session()
    panel = SessionPanel(session, plot=False)

    async def cell():
        panel.buttons["step"].click()
        first = panel.task
        panel.buttons["reset"].click()  # disabled in the browser; a click from code is refused
        assert "Reset: not now, Step is still running" in text(panel.status)
        panel.buttons["run"].click()
        assert panel.task is first  # still the one task
        await first

    asyncio.run(cell())
    assert len(session.events) == 1 and "Step: 1 delivered" in text(panel.status)


def test_a_failing_async_step_is_shown_in_the_panel(no_threads):
    panel = SessionPanel(async_session(fail_to_start=True), plot=False)  # a pipe needs out_retry

    async def cell():
        panel.buttons["step"].click()
        with pytest.raises(RetryDestinationError):  # awaiting the task in a cell raises it too
            await panel.task

    asyncio.run(cell())
    status = text(panel.status)
    assert "Step failed" in status and "error: RetryDestinationError" in status
    assert not any(b.disabled for b in panel.buttons.values())  # the buttons come back


def test_a_cancelled_async_step_gives_the_buttons_back(no_threads):
    panel = SessionPanel(async_session(), plot=False)

    async def cell():
        panel.buttons["step"].click()
        panel.task.cancel()  # before it even started: the buttons must still come back
        with pytest.raises(asyncio.CancelledError):
            await panel.task

    asyncio.run(cell())
    assert "Step cancelled" in text(panel.status)
    assert not any(b.disabled for b in panel.buttons.values())
    assert len(panel.session.events) == 0


def test_a_step_cancelled_while_the_handler_awaits_gives_the_buttons_back(no_threads):
    panel = SessionPanel(async_session(), plot=False)

    async def cell():
        panel.buttons["step"].click()
        await asyncio.sleep(0)  # the task starts and the handler awaits
        assert panel.task is not None and not panel.task.done()
        panel.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await panel.task

    asyncio.run(cell())
    assert "Step cancelled" in text(panel.status)
    assert not any(b.disabled for b in panel.buttons.values())


def test_advance_and_reset_stay_direct_with_async_handlers(no_threads):
    session = async_session()
    panel = SessionPanel(session, plot=False)

    async def cell():
        panel.buttons["step"].click()
        await panel.task
        first = panel.task
        panel.seconds.value = 2
        panel.buttons["advance"].click()  # writes the due copy: no handler runs, nothing to await
        assert panel.task is first
        assert "Advance 2 s: 1 delayed copy written" in text(panel.status)
        panel.buttons["reset"].click()
        assert "Reset: started over" in text(panel.status)

    asyncio.run(cell())
    assert len(session.events) == 0


def test_sync_handlers_are_stepped_directly_inside_a_running_loop(scenario, no_threads):
    panel = SessionPanel(scenario.session, plot=False)
    assert not scenario.session.has_async_handlers

    async def cell():
        panel.buttons["step"].click()
        assert "Step: 1 delivered" in text(panel.status)  # done by the time click() returns

    asyncio.run(cell())
    assert panel.task is None


def test_async_handlers_without_a_running_loop_are_stepped_directly():
    session = async_session()
    panel = SessionPanel(session, plot=False)
    panel.buttons["step"].click()  # a script: no loop runs here, so step() runs the handler itself
    assert panel.task is None
    assert "Step: 1 delivered" in text(panel.status) and len(session.events) == 1


# -- StreamBrowser -------------------------------------------------------------------------------------
@pytest.fixture
def browser(sample_path) -> StreamBrowser:
    return StreamBrowser(sample_path)


def test_browser_pages_through_the_sample(browser):
    assert isinstance(browser, ipywidgets.VBox)
    assert len(browser.frame) == 27  # 22 event, 4 breakpoint, 1 file; EOS left out
    assert browser.page == 0 and browser.pages == 2
    assert table_rows(browser) == 20
    assert browser.prev_button.disabled and not browser.next_button.disabled
    assert "page 1 of 2" in text(browser.page_label)
    browser.next_button.click()
    assert browser.page == 1 and table_rows(browser) == 7
    assert browser.next_button.disabled and not browser.prev_button.disabled
    assert "messages 21-27 of 27" in text(browser.page_label)
    browser.next_button.click()
    assert browser.page == 1  # stays on the last page
    browser.prev_button.click()
    assert browser.page == 0
    browser.page = 99
    assert browser.page == 1


def test_browser_filters_by_key(browser):
    counts = {}
    for key in ("event", "breakpoint", "file"):
        browser.page = 1 if key == "event" else 0
        browser.key.value = key
        counts[key] = len(browser.filtered)
        assert set(browser.filtered["stream_key"].astype(str)) == {key}
        assert browser.page == 0  # a new filter goes back to the first page
    assert counts == {"event": 22, "breakpoint": 4, "file": 1}
    browser.key.value = "event"
    assert browser.pages == 2 and table_rows(browser) == 20
    browser.key.value = StreamBrowser.ALL
    assert len(browser.filtered) == 27


def test_browser_filters_by_sequence_range(browser):
    browser.key.value = "event"
    browser.seq_min.value, browser.seq_max.value = 5, 9
    assert list(browser.filtered["seq"]) == [5, 6, 7, 8, 9]
    assert table_rows(browser) == 5 and browser.pages == 1
    browser.seq_min.value = 10
    assert len(browser.filtered) == 0
    assert "(no messages match)" in text(browser.table)
    assert "(no message selected)" in text(browser.detail)
    assert browser.selector.options == ()


def test_browser_shows_one_message(browser):
    assert "stream key file" in text(browser.detail)  # the first row is shown at once
    browser.key.value = "breakpoint"
    labels = [label for label, _ in browser.selector.options]
    assert labels[0].endswith("breakpoint #1")
    browser.selector.value = browser.selector.options[2][1]
    detail = text(browser.detail)
    row = browser.frame.loc[browser.selector.value]
    assert "sequence 3" in detail and "headers (none)" in detail
    assert row["payload"] in detail  # the full payload, not a preview
    assert "attempt 1 (retry count 0)" in detail


def test_browser_escapes_control_characters_and_html(browser, tmp_path):
    browser.key.value = "event"
    for _label, row in browser.selector.options:
        browser.selector.value = row
        assert not re.search(r"[\x00-\x08\x0b-\x1f]", browser.detail.value)
    assert not re.search(r"[\x00-\x1f]", browser.table.value)
    path = tmp_path / "h.ss"
    with StreamWriter(path) as w:
        w.write("k", b"<b>bold</b>\nline two")
        w.write("k", b"\xff\xfe binary")
    b = StreamBrowser(path)
    assert "<b>bold" not in b.table.value and "&lt;b&gt;bold&lt;/b&gt;\\nline two" in b.table.value
    assert "&lt;b&gt;bold&lt;/b&gt;\nline two" in b.detail.value  # full payload keeps its lines
    b.selector.value = 1
    assert "&lt;9 binary bytes&gt;" in b.detail.value


def test_browser_shows_envelope_headers_of_retry_copies(ran):
    b = StreamBrowser(ran.path, page_size=5)
    assert b.pages == 3 and len(b.frame) == 12
    b.key.value = "orders.dead"
    detail = text(b.detail)
    assert "header x-ruststream-retry-count 3" in detail
    assert "attempt 4 (retry count 3)" in detail


def test_browser_rejects_a_bad_page_size(sample_path):
    with pytest.raises(ValueError, match="page_size"):
        StreamBrowser(sample_path, page_size=0)


def test_public_alias_module():
    assert set(nbkit.widgets.__all__) == {"SessionPanel", "StreamBrowser", "LiveMonitor", "PolicyExplorer"}
    assert nbkit.widgets.SessionPanel is SessionPanel and nbkit.widgets.StreamBrowser is StreamBrowser
