"""A lesson opened in JupyterLab before it has run: each saved widget shows its still picture.

JupyterLab draws a widget only from a live kernel's model; a notebook just opened (untrusted, not
run) shows the still picture that :class:`nbkit.notebook.snapshot.StaticSnapshot` saved beside the
widget view instead of a one-line text. The test copies lesson 03 as saved, opens it without running
a cell, and checks the SessionPanel's picture: there, says what it is and at which clock, with the
panel's views and greyed-out buttons. A screenshot goes to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jlab import lab_page, open_saved

pytestmark = pytest.mark.timeout(150)

ROOT = Path(__file__).resolve().parents[2]
LESSON = "03-retries-and-dead-letters.ipynb"


def test_a_saved_panel_shows_its_picture_before_the_notebook_runs(
    budget, lab_server, browser_page, artifacts_dir, request
):
    from playwright.sync_api import expect

    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_saved(page, lab_server, LESSON, budget)
        cells = json.loads((ROOT / "notebooks" / LESSON).read_text(encoding="utf-8"))["cells"]
        index = next(i for i, c in enumerate(cells) if "SessionPanel(session)" in "".join(c["source"]))
        # JupyterLab draws only the cells in view: bring the panel's cell there first
        page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.scrollToItem(i, 'start')", index)
        picture = page.locator(".jp-OutputArea-output .nbkit-snapshot").first
        expect(picture).to_be_visible(timeout=budget.ms(10))
        text = picture.inner_text()
        assert "A still picture of this panel at clock 2024-01-01T00:00:05Z" in text
        assert "pending copies (1)" in text and "settlements per action" in text  # its own cell's moment
        assert picture.locator(".nbkit-inert").count() >= 5  # Step ... Reset, drawn inert
        assert picture.locator("button").count() == 0
        assert picture.locator("img").count() == 2  # the attempts chart and the timeline
        page.screenshot(path=str(shot) + ".png")
