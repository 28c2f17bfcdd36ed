"""A lesson's exercise in a real JupyterLab, in headless Chromium: the solution stays out of sight until asked.

The executed lesson 00 (as Binder serves it) is copied into the server's root and opened without running
anything. Its first exercise cell shows only the prompt to predict; the solution cell right after it shows a
collapsed source whose one visible line gives nothing away, and no output at all (the measured answer is
nowhere in the notebook's visible text). Clicking the placeholder, as a learner does, shows the solution's code
and its output. Screenshots (collapsed, expanded) go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
import shutil

import pytest
from jlab import lab_page
from site_build import ROOT

pytestmark = pytest.mark.timeout(150)  # a safety net: every wait shares the 80 s `budget` (conftest)

LESSON = ROOT / "notebooks" / "00-start-here.ipynb"


def _first_solution() -> tuple[int, str, str]:
    """(cell index, first line of its source, text of its stored output) of the lesson's first solution."""
    cells = json.loads(LESSON.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if "solution" in cell["metadata"].get("tags", []):
            source = "".join(cell["source"])
            output = "".join("".join(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in cell["outputs"])
            return index, source.splitlines()[0], output.strip()
    raise AssertionError(f"{LESSON.name} has no solution cell")


def test_solution_is_hidden_until_expanded(budget, lab_server, browser_page, artifacts_dir, request):
    from playwright.sync_api import expect

    index, first_line, output = _first_solution()
    assert output.startswith("Measured: "), output
    measured = output.split(". ", 1)[0]  # "Measured: (3, 6)": the answer, as the stored output prints it
    shutil.copyfile(LESSON, lab_server.root_dir / LESSON.name)
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        # Opened, not run: the kernel is not needed, so the test does not wait for it.
        url = f"{lab_server.url}/lab/tree/{LESSON.name}?reset&token={lab_server.token}"
        page.goto(url, timeout=budget.ms(30))
        cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
        cell.wait_for(state="attached", timeout=budget.ms(30))
        cell.scroll_into_view_if_needed(timeout=budget.ms(10))
        prompt = page.locator(".jp-Notebook .jp-Cell").nth(index - 1).locator(".jp-OutputArea-output")
        expect(prompt).to_contain_text("Predict first:", timeout=budget.ms(10))
        assert "Right" not in prompt.inner_text() and "Not yet" not in prompt.inner_text()

        # Collapsed: one neutral line of source, and no output (not even its text in the page's visible text).
        expect(cell.locator(".jp-InputPlaceholder")).to_be_visible(timeout=budget.ms(10))
        expect(cell.locator(".jp-InputPlaceholder")).to_contain_text(first_line, timeout=budget.ms(5))
        expect(cell.locator(".jp-OutputArea")).to_be_hidden(timeout=budget.ms(5))
        expect(page.get_by_text(measured, exact=False)).to_be_hidden(timeout=budget.ms(5))
        assert measured not in page.locator(".jp-Notebook").inner_text()
        page.screenshot(path=str(shot) + "-collapsed.png")

        # Expanded by a click on its placeholder, as a learner does: the code and the measured answer show.
        cell.locator(".jp-InputPlaceholder").click(timeout=budget.ms(10))
        expect(cell.locator(".jp-InputArea .jp-Editor")).to_contain_text("measured", timeout=budget.ms(10))
        if cell.locator(".jp-OutputPlaceholder").is_visible():
            cell.locator(".jp-OutputPlaceholder").click(timeout=budget.ms(10))
        expect(cell.locator(".jp-OutputArea-output")).to_contain_text(measured, timeout=budget.ms(10))
        cell.scroll_into_view_if_needed(timeout=budget.ms(5))
        page.screenshot(path=str(shot) + "-expanded.png")
