"""End to end: a LiveMonitor in a real JupyterLab (headless Chromium) refreshes while a writer process
appends to the file, with the kernel idle between refreshes, and stops with its Stop button.

The notebook (written at test time) creates ``orders.ss``, starts a writer process that appends one
message every 20 ms for at most 20 s, and shows ``LiveMonitor("orders.ss", every=0.3)``. The test waits
until the monitor's message count has grown twice while the kernel reports idle (the refresh is a task
on the kernel's event loop, not a busy cell), runs one more cell to show the kernel still answers,
clicks Stop, and checks that the count then stays where it is. Fixtures: conftest.py.
"""

from __future__ import annotations

import re
import time

import pytest
from jlab import KERNEL_IDLE_JS, lab_page, open_notebook, write_code_notebook
from waiting import wait_until

pytestmark = pytest.mark.timeout(150)

SETUP = """\
import subprocess, sys
from nbkit.transport.file_writer import StreamWriter
import nbkit.widgets

with StreamWriter("orders.ss") as w:
    w.write("orders", b'{"n": 0}')
WRITER = '''
import time
from nbkit.transport.file_writer import StreamWriter
with StreamWriter("orders.ss") as w:
    for n in range(1, 1000):
        w.write("orders", b'{"n": %d}' % n)
        time.sleep(0.02)  # a steady writer: the count grows between the monitor's refreshes
'''
writer = subprocess.Popen([sys.executable, "-c", WRITER])"""

MONITOR = """\
monitor = nbkit.widgets.LiveMonitor("orders.ss", every=0.3)
monitor"""

NOTEBOOK = "live_monitor.ipynb"


def count(text: str) -> int:
    match = re.search(r"(\d+) messages", text)
    assert match, text
    return int(match.group(1))


def test_live_monitor_refreshes_in_jupyterlab(budget, lab_server, browser_page, artifacts_dir, request):
    from playwright.sync_api import expect

    write_code_notebook(lab_server.root_dir / NOTEBOOK, (SETUP, MONITOR, "1 + 1", "writer.kill()"))
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, NOTEBOOK, budget)
        # run the setup and the monitor cells only (the last two run later, by hand)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell-and-select-next'); }")
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell-and-select-next'); }")
        output = page.locator(".jp-Notebook .jp-OutputArea-output")
        status = output.locator(".nbkit-monitor-status")
        expect(status).to_contain_text("refreshing every 0.3 s", timeout=budget.ms(40))
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)

        seen = [count(status.inner_text())]

        def grew_twice() -> bool:  # the count grew twice, with no cell running
            assert page.evaluate(KERNEL_IDLE_JS, NOTEBOOK), "the kernel should be idle between refreshes"
            seen.append(count(status.inner_text()))
            return len(set(seen)) >= 3

        wait_until(grew_twice, budget.left(30), interval=0.3, what=lambda: f"the monitor to refresh: {seen}")
        assert seen == sorted(seen)
        expect(output.locator(".nbkit-monitor-keys")).to_contain_text("orders", timeout=budget.ms(5))
        expect(output.locator(".nbkit-monitor-latest")).to_contain_text('{"n":', timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-refreshing.png")

        # the kernel still answers other cells while the monitor refreshes
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-cell-and-select-next'); }")
        expect(output.filter(has_text=re.compile(r"^\s*2\s*$"))).to_have_count(1, timeout=budget.ms(20))

        output.get_by_role("button", name="Stop", exact=True).click(timeout=budget.ms(10))
        expect(status).to_contain_text("stopped", timeout=budget.ms(10))
        stopped = count(status.inner_text())
        time.sleep(1.0)  # the thing tested: for three refresh periods, nothing more is read
        assert count(status.inner_text()) == stopped
        # the click selected the monitor's cell: run the last cell (stop the writer) by its index
        page.evaluate("""() => {
            const nb = window.jupyterapp.shell.currentWidget.content;
            nb.activeCellIndex = 3;
            window.jupyterapp.commands.execute('notebook:run-cell');
        }""")
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)
        expect(page.locator(".jp-Notebook .jp-InputArea-prompt").nth(3)).to_contain_text("[4]", timeout=budget.ms(10))
        assert status.count() == 1 and count(status.inner_text()) == stopped  # the monitor ran once, and stays
        status.scroll_into_view_if_needed(timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-stopped.png")
