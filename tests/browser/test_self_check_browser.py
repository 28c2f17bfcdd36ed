"""The self-check in JupyterLab: its answers are collapsible ``<details>``, and a click shows the feedback.

JupyterLab renders a Markdown cell's HTML through its sanitizer; the self-check needs ``<details>`` and
``<summary>`` to survive it, and nothing to run. The test copies ``notebooks/self-check.ipynb``, opens it
without running a cell, checks the first question's answers are closed, clicks one open, and reads its
feedback with the link to the published page. A screenshot goes to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import pytest
from jlab import lab_page, open_saved

pytestmark = pytest.mark.timeout(150)

NOTEBOOK = "self-check.ipynb"


def test_the_self_check_opens_an_answer_on_click_in_jupyterlab(
    budget, lab_server, browser_page, artifacts_dir, request
):
    from playwright.sync_api import expect

    with lab_page(browser_page, lab_server, artifacts_dir, request, budget) as (page, shot):
        open_saved(page, lab_server, NOTEBOOK, budget)
        question = page.locator(".jp-MarkdownCell").nth(1)  # cell 0 is the introduction
        expect(question.locator("h2")).to_contain_text("1.", timeout=budget.ms(15))
        answers = question.locator(".jp-RenderedMarkdown details")
        assert answers.count() in (3, 4), "JupyterLab's sanitizer removed the <details> of the answers"
        assert answers.evaluate_all("ds => ds.filter(d => d.open).length") == 0
        right = answers.filter(has_text="Right.").first
        assert not right.locator("p").first.is_visible()
        right.locator("summary").click(timeout=budget.ms(10))
        feedback = right.locator("p").first
        expect(feedback).to_be_visible(timeout=budget.ms(10))
        assert feedback.inner_text().startswith("✓ Right.")
        links = feedback.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert any(h.startswith("https://nbkit.readthedocs.io/en/latest/") for h in links), links
        page.screenshot(path=str(shot) + ".png")
