"""End to end: the lesson widgets fit a narrow JupyterLab column, in headless Chromium.

A window 1000 px wide leaves the notebook a column of about 570 px beside the file browser. There a
SessionPanel whose log holds long lines, a StreamBrowser over JSON payloads with no spaces and a
PolicyExplorer are displayed; nothing inside any of them may reach past its box's right edge, and no box
may scroll sideways (a panel that did cut each log line at the column's edge, its end behind a scroll bar
far below). Screenshots of each widget go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import pytest
from jlab import KERNEL_IDLE_JS, lab_page, open_notebook, write_code_notebook

pytestmark = pytest.mark.timeout(150)  # a safety net: every wait shares the 80 s `budget` (conftest)

CELLS = [
    """\
from nbkit import App, FileBroker, FilePosition, HandlerOutcome, RetryPolicy, Session, StreamWriter, Workload
from nbkit.widgets import PolicyExplorer, SessionPanel, StreamBrowser""",
    """\
broker = FileBroker("orders.ss")


@broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")
def pay(delivery):
    return HandlerOutcome.retry_after(5)


session = Session(App(broker))
broker.publish("orders", '{"id":1,"customer":"a-customer-with-a-long-name","items":["lamp","book","desk"]}')
session.run()
panel = SessionPanel(session)
panel""",
    """\
with StreamWriter("browse.ss") as writer:
    for n in range(6):
        payload = b'{"id":%d,"customer":"c-%d","items":[{"sku":"lamp-%d","qty":2}],"note":"none"}' % (n, n, n)
        writer.write("orders", payload)
StreamBrowser("browse.ss", page_size=6)""",
    """\
PolicyExplorer(Workload(messages=60, span=20, failure_rate=0.5, poison=0.05), RetryPolicy(max_attempts=3))""",
]
NOTEBOOK = "widgets_fit.ipynb"

#: What reaches past the widget's box (more than 2 px: the widgets' own margin), and boxes that scroll sideways.
OVERFLOW_JS = """root => {
    const edge = root.getBoundingClientRect().right;
    const name = e => `${e.tagName}.${e.className}`;
    const past = [], scrolled = [];
    for (const e of [root, ...root.querySelectorAll('*')]) {
        const box = e.getBoundingClientRect();
        if (e !== root && box.width > 0 && box.right > edge + 2) {
            past.push(`${name(e)} ${Math.round(box.right - edge)} px`);
        }
        if (e.scrollWidth > e.clientWidth + 2 && getComputedStyle(e).overflowX !== 'visible') {
            scrolled.push(`${name(e)} ${e.scrollWidth - e.clientWidth} px`);
        }
    }
    return {past: past.slice(0, 10), scrolled: scrolled.slice(0, 10)};
}"""


def test_lesson_widgets_fit_a_narrow_column(budget, lab_server, browser_page, artifacts_dir, request):
    from playwright.sync_api import expect

    write_code_notebook(lab_server.root_dir / NOTEBOOK, CELLS)
    page = browser_page.page
    page.set_viewport_size({"width": 1000, "height": 1400})
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, NOTEBOOK, budget)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        output = page.locator(".jp-Notebook .jp-OutputArea-output")
        expect(output.locator(".nbkit-explorer-status")).to_contain_text("run 1", timeout=budget.ms(50))
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)

        column = page.locator(".jp-Notebook .jp-OutputArea").first.bounding_box()
        assert column is not None and column["width"] < 700, f"the column is not narrow: {column}"
        panel = output.locator(".widget-vbox").filter(has=page.locator(".nbkit-panel-status")).first
        browser = output.locator(".widget-vbox").filter(has=page.locator(".nbkit-stream-page")).first
        explorer = output.locator(".widget-vbox").filter(has=page.locator(".nbkit-explorer-summary")).first
        log = panel.locator("pre").last
        expect(log).to_contain_text("retry attempts exhausted", timeout=budget.ms(10))
        for name, widget in (("panel", panel), ("browser", browser), ("explorer", explorer)):
            widget.scroll_into_view_if_needed(timeout=budget.ms(5))
            widget.screenshot(path=str(shot) + f"-{name}.png", timeout=budget.ms(10))
            found = widget.evaluate(OVERFLOW_JS)
            assert found == {"past": [], "scrolled": []}, f"the {name} does not fit its column: {found}"
        # the log line that once ran past the edge wraps inside the panel: taller than one line
        assert log.bounding_box()["height"] > 3 * 14
        heading = explorer.locator("th", has_text="longest wait")
        assert heading.bounding_box()["x"] + heading.bounding_box()["width"] <= column["x"] + column["width"]
