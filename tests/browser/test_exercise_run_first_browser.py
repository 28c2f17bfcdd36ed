"""A capstone exercise run first, in a real JupyterLab: the learner sees the prompt to predict, no traceback.

Lesson 09's exercises ask about the run its earlier cells make (the shop's ``ORDERS``, the crash at
``CRASH_AT``). A learner who opens the lesson with its outputs cleared and runs Exercise 1's cell before any
other, in a fresh kernel, gets "Predict first" and nothing else: no ``NameError``, and no answer.
Screenshots go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import nbformat
import pytest
from jlab import lab_page, open_notebook
from site_build import ROOT

pytestmark = pytest.mark.timeout(150)  # a safety net: every wait shares the 80 s `budget` (conftest)

LESSON = ROOT / "notebooks" / "09-capstone.ipynb"

# Select cell ``index`` of the notebook in the main area and run it, as Shift+Enter does.
RUN_CELL_JS = """async (index) => {
    const app = window.jupyterapp;
    const panel = app.shell.currentWidget;
    panel.content.activeCellIndex = index;
    await panel.content.scrollToItem(index, 'start');
    await app.commands.execute('notebook:run-cell');
}"""


def test_the_first_capstone_exercise_run_first_prints_only_its_prompt(
    budget, lab_server, browser_page, artifacts_dir, request
):
    from playwright.sync_api import expect

    nb = nbformat.read(LESSON, as_version=4)
    for cell in nb.cells:  # as a learner who cleared every output, or a lesson never run
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    index = next(
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and 'check("09-lost", prediction)' in c.source
    )
    nbformat.write(nb, lab_server.root_dir / LESSON.name)
    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_notebook(page, lab_server, LESSON.name, budget)
        page.evaluate(RUN_CELL_JS, index)
        output = page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")
        expect(output).to_contain_text("Predict first:", timeout=budget.ms(30))
        text = page.locator(".jp-Notebook").inner_text()
        assert "NameError" not in text and "Traceback" not in text
        assert "Not yet" not in output.inner_text() and "Right" not in output.inner_text()
        assert "[2, 3, 5, 7]" not in text  # the answer is nowhere on screen
        page.screenshot(path=str(shot) + ".png")
