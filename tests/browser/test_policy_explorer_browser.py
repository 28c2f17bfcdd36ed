"""End to end: the PolicyExplorer in a real JupyterLab, in headless Chromium; a slider is dragged like a
person would, and the summary and both figures change.

The notebook (written at test time into the server's temp root_dir) shows an explorer over 60 messages
that never fail. The test drags the "failure rate" slider's handle to the right end of its track; the
explorer (in background mode in the kernel) re-runs, coalescing the drag's values, and the summary then
counts dead letters, and the dashboard's and the timeline's PNGs are new. Screenshots go to
``test-artifacts/browser/``.
"""

from __future__ import annotations

import re

import pytest
from jlab import KERNEL_IDLE_JS, lab_page, open_notebook, write_code_notebook

from nbkit import RetryPolicy, Workload, policy_summary, simulate

pytestmark = pytest.mark.timeout(150)  # a safety net: every wait shares the 80 s `budget` (conftest)

CELLS = [
    "from nbkit import RetryPolicy, Workload\nfrom nbkit.widgets import PolicyExplorer",
    "explorer = PolicyExplorer(Workload(messages=60, span=20, failure_rate=0.0), RetryPolicy(max_attempts=3))\n"
    "explorer",
]
NOTEBOOK = "policy_explorer.ipynb"


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\xa0", " ")).strip()


def test_dragging_a_slider_reruns_and_redraws(budget, lab_server, browser_page, artifacts_dir, request):
    from playwright.sync_api import expect

    # what the explorer should say after the drag (failure rate 1.0: every message is dead-lettered)
    after = policy_summary(simulate(Workload(messages=60, span=20, failure_rate=1.0), RetryPolicy(max_attempts=3)))
    assert after.loc["file", "dead-lettered"] == 60

    write_code_notebook(lab_server.root_dir / NOTEBOOK, CELLS)
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, NOTEBOOK, budget)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        output = page.locator(".jp-Notebook .jp-OutputArea-output")
        status = output.locator(".nbkit-explorer-status")
        expect(status).to_contain_text("run 1", timeout=budget.ms(40))
        page.wait_for_function(KERNEL_IDLE_JS, arg=NOTEBOOK, timeout=budget.ms(20), polling=250)
        summary = output.locator(".nbkit-explorer-summary")
        images = output.locator("img")
        expect(images).to_have_count(2, timeout=budget.ms(10))
        dashboard_before = images.nth(0).get_attribute("src")
        timeline_before = images.nth(1).get_attribute("src")
        before = norm(summary.inner_text())
        assert re.search(r"file 60 60 0 0 0 0", before), before  # messages, delivered, no dead letters, ...

        slider = output.locator(".widget-slider", has_text="failure rate")
        expect(slider).to_have_count(1, timeout=budget.ms(10))
        slider.scroll_into_view_if_needed(timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-before.png")
        handle = slider.locator(".noUi-handle")
        track = slider.locator(".noUi-target")
        hb, tb = handle.bounding_box(), track.bounding_box()
        page.mouse.move(hb["x"] + hb["width"] / 2, hb["y"] + hb["height"] / 2)
        page.mouse.down()
        for step in range(1, 11):  # a drag, in steps, past the right end of the track
            page.mouse.move(hb["x"] + (tb["width"] + 40) * step / 10, hb["y"] + hb["height"] / 2)
        page.mouse.up()

        expect(slider.locator(".widget-readout")).to_have_text(re.compile(r"^\s*1\.00\s*$"), timeout=budget.ms(10))
        expect(summary).to_contain_text(f"file 60 0 {after.loc['file', 'dead-lettered']}", timeout=budget.ms(40))
        expect(status).not_to_contain_text("running", timeout=budget.ms(30))
        expect(images.nth(0)).not_to_have_attribute("src", dashboard_before, timeout=budget.ms(20))
        expect(images.nth(1)).not_to_have_attribute("src", timeline_before, timeout=budget.ms(20))
        runs = int(re.search(r"run (\d+)", status.inner_text()).group(1))
        assert 2 <= runs <= 6, f"{runs} runs for one drag: the drag's values were not coalesced"
        assert "file 60 0 60" in norm(summary.inner_text())
        page.screenshot(path=str(shot) + "-after.png")


def test_the_poison_readout_shows_a_half_percent_share(budget, lab_server, browser_page, artifacts_dir, request):
    """A workload with a poison share of 0.005 reads 0.005 on its slider (the default two decimals read 0.01)."""
    from playwright.sync_api import expect

    cells = [
        CELLS[0],
        "explorer = PolicyExplorer(Workload(messages=60, span=20, failure_rate=0.05, poison=0.005),"
        " RetryPolicy(max_attempts=3))\nexplorer",
    ]
    write_code_notebook(lab_server.root_dir / NOTEBOOK, cells)
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, NOTEBOOK, budget)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        output = page.locator(".jp-Notebook .jp-OutputArea-output")
        slider = output.locator(".widget-slider", has_text="poison share")
        expect(slider).to_have_count(1, timeout=budget.ms(40))
        slider.scroll_into_view_if_needed(timeout=budget.ms(5))
        expect(slider.locator(".widget-readout")).to_have_text(re.compile(r"^\s*0\.005\s*$"), timeout=budget.ms(10))
        page.screenshot(path=str(shot) + "-poison.png")
