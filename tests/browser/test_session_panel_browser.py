"""End to end: the SessionPanel in a real JupyterLab, in headless Chromium, clicked like a person would.

The notebook is written at test time (nbformat) into the server's temp root_dir. Its cells build a
FileBroker scenario whose handler always answers ``retry_after(5)``; the test runs all cells, waits
for the panel's Step button, clicks it and checks that the panel's text changed exactly as the same
scenario's ``Session.step()`` and an in-process SessionPanel say it should. It runs twice: with a
plain handler, and with an ``async def`` one, which the panel awaits as a task on the kernel's event
loop (``session.astep()``). Screenshots (before,
after, or at the point of failure) go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html.parser
import re
import sys

import pytest
from jlab import KERNEL_IDLE_JS, lab_page, open_notebook, write_code_notebook

pytestmark = pytest.mark.timeout(150)  # a safety net: every wait shares the 80 s `budget` (conftest)

IMPORTS = """\
import asyncio

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
from nbkit.widgets import SessionPanel"""

SYNC_HANDLER = """\
def pay_later(delivery):
    return HandlerOutcome.retry_after(5)"""

ASYNC_HANDLER = """\
async def pay_later(delivery):
    await asyncio.sleep(0)  # e.g. a call to another service
    return HandlerOutcome.retry_after(5)"""

SCENARIO = """\
broker = FileBroker("orders.ss")


@broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
{handler}


session = Session(App(broker))
broker.publish("orders", '{"id": 1, "item": "book"}')
broker.publish("orders", '{"id": 2, "item": "lamp"}');"""

PANEL = """\
panel = SessionPanel(session)
panel"""

NOTEBOOK = "session_panel.ipynb"


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def norm(text: str) -> str:
    """Whitespace-insensitive text: the browser's innerText uses tabs/newlines between cells and rows."""
    return re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()


def html_text(markup: str) -> str:
    """The text a browser shows for a view's HTML, normalised like :func:`norm`."""
    parser = _Text()
    parser.feed(markup)
    parser.close()
    return norm(" ".join(parser.parts))


def in_process(monkeypatch, tmp_path, scenario: str):
    """The notebook's scenario run here: ``Session.step()``'s events, and a SessionPanel's views
    before and after its Step button is clicked (in a running loop, as in the kernel).

    Run it on a worker thread of the test: Playwright's sync API keeps a loop running in this one.
    """
    results = {}
    for name in ("session", "panel"):
        work = tmp_path / f"in-process-{name}"
        work.mkdir()
        monkeypatch.chdir(work)  # the notebook uses the relative path "orders.ss" in its own dir
        ns: dict = {}
        exec(compile(f"{IMPORTS}\n{scenario}\n", f"<scenario {name}>", "exec"), ns)
        if name == "session":
            results["steps"] = asyncio.run(ns["session"].astep())
            results["counts"] = ns["session"].counts()
            results["pending"] = ns["session"].pending
        else:
            panel = ns["SessionPanel"](ns["session"], plot=False)
            results["before"] = views_text(panel)
            asyncio.run(click_step(panel))
            results["after"] = views_text(panel)
    return results


async def click_step(panel) -> None:
    """Click Step as the kernel does (on its running loop), and wait for the task of an async handler."""
    panel.buttons["step"].click()
    if panel.task is not None:
        await panel.task


def views_text(panel) -> dict[str, str]:
    return {
        "status": html_text(panel.status.value),
        "counts": html_text(panel.counts_view.value),
        "pending": html_text(panel.pending_view.value),
        "log": html_text(panel.log_view.value),
    }


@pytest.mark.parametrize("handler", [SYNC_HANDLER, ASYNC_HANDLER], ids=["sync", "async"])
def test_step_button_in_jupyterlab(
    handler, budget, lab_server, browser_page, artifacts_dir, monkeypatch, tmp_path, request
):
    from playwright.sync_api import expect

    scenario = SCENARIO.replace("{handler}", handler)
    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        expected = worker.submit(in_process, monkeypatch, tmp_path, scenario).result()
    steps = expected["steps"]
    assert len(steps) == 1
    event = steps[0]
    assert (event.stream_key, event.seq, event.attempt, event.action) == ("orders", 1, 1, "delayed-copy")
    assert expected["counts"]["delayed-copy"] == 1 and sum(expected["counts"].values()) == 1

    # The kernelspec the server resolves for "python3" must be this interpreter.
    specs = lab_server.api("/api/kernelspecs")
    assert specs["kernelspecs"]["python3"]["spec"]["argv"][0] == sys.executable

    write_code_notebook(lab_server.root_dir / NOTEBOOK, (IMPORTS, scenario, PANEL))
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, NOTEBOOK, budget)

        # Run all cells; the command's promise is not awaited (page.evaluate would have no timeout).
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        output = page.locator(".jp-Notebook .jp-OutputArea-output")
        step_button = output.get_by_role("button", name="Step", exact=True)
        expect(step_button).to_be_visible(timeout=budget.ms(40))
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)

        status = output.locator(".nbkit-panel-status")
        panel_box = output.filter(has=page.get_by_role("button", name="Step", exact=True))
        views = panel_box.locator(".widget-html-content")
        counts = views.filter(has=page.locator(".nbkit-panel-counts"))
        assert panel_box.count() == 1, "the panel should render once, in the last cell's output"
        pending = views.filter(has_text="pending copies")
        log = views.filter(has_text=re.compile(r"^\s*log"))

        plot = panel_box.locator("img.nbkit-panel-attempts")
        timeline = panel_box.locator("img.nbkit-panel-timeline")
        expect(status).to_contain_text("no delivery yet", timeout=budget.ms(10))
        expect(timeline).to_be_visible(timeout=budget.ms(10))  # the timeline is in the panel, drawn
        plot_before = plot.get_attribute("src")
        timeline_before = timeline.get_attribute("src")
        assert timeline_before, "the timeline image has no picture"
        before = {"status": status.inner_text(), "counts": counts.inner_text()}
        assert norm(before["status"]) == expected["before"]["status"]
        assert norm(before["counts"]) == expected["before"]["counts"]
        assert "settled 0" in norm(before["counts"]) and "delayed-copy 0" in norm(before["counts"])
        panel_box.scroll_into_view_if_needed(timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-before.png")

        step_button.click(timeout=budget.ms(10))
        expect(status).to_contain_text("Step: 1 delivered", timeout=budget.ms(20))
        expect(plot).not_to_have_attribute("src", plot_before, timeout=budget.ms(10))  # the chart redrew too
        expect(timeline).not_to_have_attribute("src", timeline_before, timeout=budget.ms(10))  # and the timeline
        box = timeline.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100, box
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)

        after_status = norm(status.inner_text())
        after_counts = norm(counts.inner_text())
        after_pending = norm(pending.inner_text())
        after_log = norm(log.inner_text())
        # What the runtime said, in the test process, for the same scenario.
        for fact in (
            f"stream key {event.stream_key}",
            f"sequence {event.seq}",
            f"attempt {event.attempt}",
            f"outcome {event.outcome}",
            f"action {event.describe()}",
            "due in 5 s",
        ):
            assert fact in after_status, f"{fact!r} not in the panel's status {after_status!r}"
        assert "delayed-copy 1" in after_counts and "settled 1" in after_counts, after_counts
        due = expected["pending"][0].due.isoformat().replace("+00:00", "Z")
        assert f"pending copies (1) orders due {due}: delivered next as attempt 2" in after_pending, after_pending
        # And the whole text of every view equals an in-process SessionPanel's after the same click.
        assert after_status == expected["after"]["status"]
        assert after_counts == expected["after"]["counts"]
        assert after_pending == expected["after"]["pending"]
        assert after_log == expected["after"]["log"]
        assert before["status"] != status.inner_text()

        panel_box.scroll_into_view_if_needed(timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-after-step.png")
        panel_box.screenshot(path=str(shot) + "-panel.png")
