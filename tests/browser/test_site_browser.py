"""The built documentation site in headless Chromium, served on 127.0.0.1 with every other host blocked.

Pages checked for what a reader must see, each saved as a screenshot in ``test-artifacts/browser/``:
the landing page (title and the dashboard figure, loaded), one lesson with a widget snapshot (its figure
loaded, and the StreamBrowser or SessionPanel shown as the still picture its cell saved, saying it is
one, with greyed-out controls and nothing live), the ``read_stream`` API page (signature, parameters,
examples), the CLI page (a section per subcommand), the glossary and a lesson's Mermaid diagram, with
the frame of every page (one navbar row, no empty sidebar column, a lesson's Binder and download links).
Any request to another host is refused and fails the test, so the pages work with no network.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from site_build import ROOT, built_site  # noqa: F401  (built_site is a fixture)

pytestmark = pytest.mark.timeout(600)  # the site build (shared, once per run) plus the 80 s browser budget


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 -- the base class's signature
        pass


@pytest.fixture
def site_url(built_site) -> Iterator[str]:  # noqa: F811
    """The built site served over HTTP on 127.0.0.1 (a free port) for the duration of the test."""
    assert built_site.returncode == 0, built_site.output[-3000:]
    handler = functools.partial(_QuietHandler, directory=str(built_site.html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _lesson_with_widgets() -> str:
    """The first lesson whose notebook stores widget state and has a figure."""
    for notebook in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
        has_png = any("image/png" in o.get("data", {}) for o in outputs)
        if "widgets" in nb["metadata"] and has_png:
            return notebook.stem
    raise AssertionError("no lesson stores widget state and a figure")


#: In a still picture: what reaches past its right edge, what scrolls sideways, and characters beyond U+FFFF.
SNAPSHOT_FITS_JS = """root => {
    const edge = root.getBoundingClientRect().right;
    const name = e => `${e.tagName}.${e.className}`;
    const past = [], scrolled = [];
    for (const e of root.querySelectorAll('*')) {
        const box = e.getBoundingClientRect();
        if (box.width > 0 && box.right > edge + 1) past.push(`${name(e)} ${Math.round(box.right - edge)} px`);
        if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') {
            scrolled.push(`${name(e)} ${e.scrollWidth - e.clientWidth} px`);
        }
    }
    const astral = [...root.innerText].filter(c => c.codePointAt(0) > 0xFFFF);
    return {past: past.slice(0, 5), scrolled: scrolled.slice(0, 5), astral};
}"""


def _loaded_images(page, selector: str) -> int:
    return page.eval_on_selector_all(selector, "els => els.filter(e => e.complete && e.naturalWidth > 0).length")


def _only_local(page, site_url: str) -> list[str]:
    """Let the page load only from the site under test (no network in CI); returns the list of what it refused."""
    refused: list[str] = []

    def only_local(route):
        if route.request.url.startswith(site_url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    return refused


def _visit(page, site_url: str, budget, path: str) -> None:
    """Open a page of the site and wait for its load event (the elements checked next are each waited for)."""
    page.goto(f"{site_url}/{path}", timeout=budget.ms(20))
    page.wait_for_load_state("load", timeout=budget.ms(45))


def _assert_clean(refused: list[str], console: list[str]) -> None:
    """The pages asked no other host for anything (see :func:`_only_local`) and logged no console error."""
    assert not refused, f"the pages asked for other hosts (no network in CI): {refused}"
    errors = [line for line in console if line.startswith("error")]
    assert not errors, f"console errors: {errors}"


def _open_site(site_url, browser_page, budget, artifacts_dir, request) -> tuple[Any, list[str], list[str], Any, Any]:
    """The page, its console lines, the refused requests (:func:`_only_local`), and this test's
    ``shot(name)`` and ``visit(path)``."""
    page = browser_page.page
    refused = _only_local(page, site_url)
    shot = functools.partial(_screenshot, page, artifacts_dir, request.node.name)
    return page, browser_page.console, refused, shot, functools.partial(_visit, page, site_url, budget)


def test_site_pages_in_a_browser(site_url, browser_page, budget, artifacts_dir, request):
    page, console, refused, shot, visit = _open_site(site_url, browser_page, budget, artifacts_dir, request)

    try:
        visit("index.html")
        assert page.locator("h1").first.inner_text().startswith("nbkit")
        assert _loaded_images(page, "img[src$='dashboard.png']") == 1, "the landing page's dashboard did not load"
        shot("landing")

        lesson = _lesson_with_widgets()
        visit(f"learn/{lesson}.html")
        rendered = page.locator(".cell_output .nbkit-snapshot").first  # a widget's still picture
        rendered.wait_for(state="visible", timeout=budget.ms(20))
        assert "A still picture of this" in rendered.inner_text() and "Binder" in rendered.inner_text()
        assert rendered.locator(".nbkit-inert").count() > 0  # its controls, drawn greyed out
        assert page.locator(".cell_output button.jupyter-button, .cell_output input").count() == 0  # nothing live
        assert "application/vnd.jupyter.widget-view+json" not in page.locator("article").inner_text()
        figures = ".cell_output img[src*='_images/']"  # a cell's PNG output (a widget's image is inline data)
        assert _loaded_images(page, figures) >= 1, f"{lesson}: no figure loaded"
        figure = page.locator(figures).first
        figure.scroll_into_view_if_needed(timeout=budget.ms(5))
        shot("lesson-figure")
        rendered.scroll_into_view_if_needed(timeout=budget.ms(5))
        shot("lesson-widget")

        for lesson in ("01-stream-files", "03-retries-and-dead-letters", "07-retry-policies"):  # the widest
            visit(f"learn/{lesson}.html")
            cut = page.eval_on_selector_all(
                "div.cell_input pre, div.cell_output div.output pre",
                "els => els.filter(e => e.scrollWidth > e.clientWidth + 1).length",
            )
            assert cut == 0, f"{lesson}: {cut} code or output blocks run off the page instead of wrapping"
            # a widget's still picture holds all it shows inside its box (07's summary once hid its last
            # column, `longest wait`), and its note has no character beyond U+FFFF (an emoji: a box here)
            for found in page.eval_on_selector_all(
                ".cell_output .nbkit-snapshot", f"els => els.map({SNAPSHOT_FITS_JS})"
            ):
                assert found == {"past": [], "scrolled": [], "astral": []}, f"{lesson}: {found}"
            if lesson.startswith("07"):
                # the policy summaries printed as DataFrames fit too (a wider frame may scroll in its box)
                hidden = page.eval_on_selector_all(
                    "div.cell_output table.dataframe",
                    "els => els.filter(e => e.innerText.includes('longest wait') && e.scrollWidth > e.clientWidth + 1)"
                    ".length",
                )
                assert hidden == 0, f"{lesson}: {hidden} policy summaries hide columns behind a sideways scroll"
                summary = page.locator(".nbkit-snapshot table.nbkit-explorer-summary").first
                assert "longest wait (s)" in summary.inner_text()
                summary.scroll_into_view_if_needed(timeout=budget.ms(5))
                shot("lesson-07-explorer")
            diagrams = page.locator("pre.mermaid svg")
            if lesson.startswith("03"):
                diagrams.first.wait_for(state="visible", timeout=budget.ms(20))  # the cap decision, drawn
                box = diagrams.first.bounding_box()
                assert box and box["height"] < 500, f"lesson 03's diagram does not fit a screen: {box}"
                shot("lesson-03-diagram")

        visit("api/generated/nbkit.read_stream.html")
        signature = page.locator('dt[id="nbkit.read_stream"]')
        assert signature.is_visible() and "read_stream" in signature.inner_text()
        body = page.locator("article").inner_text()
        assert "Parameters" in body and "Returns" in body and "Examples" in body
        shot("api-read_stream")

        visit("cli.html")
        for name in ("cat", "info", "write", "run"):
            assert page.locator(f'section[id="cli-nbkit-{name}"]').count() == 1, f"no nbkit {name} section"
        shot("cli")
    except BaseException:
        shot("failure")
        raise
    _assert_clean(refused, console)


def test_glossary_a_diagram_and_the_page_frame(site_url, browser_page, budget, artifacts_dir, request):
    """The glossary and a lesson's Mermaid diagram as a reader sees them, and what frames every page: one
    navbar row (search box and repository link beside the links), no empty sidebar column on a page
    without children, a lesson's Binder and download links under its title, the broker comparison's six
    columns inside the page, the troubleshooting entries. Screenshots: ``glossary``, ``diagram``,
    ``lesson-links``, ``comparison`` and ``troubleshooting`` in ``test-artifacts/browser/``."""
    page, console, refused, shot, visit = _open_site(site_url, browser_page, budget, artifacts_dir, request)

    try:
        visit("glossary.html")
        term = page.locator('dt[id="term-dead-letter-key"]')
        term.wait_for(state="visible", timeout=budget.ms(10))
        assert page.locator("dl.glossary dt").count() >= 20, "the glossary lists too few terms"
        assert not page.locator("#pst-primary-sidebar").is_visible(), "an empty sidebar column on the glossary"
        links = page.locator(".navbar-header-items .navbar-nav .nav-link").first.bounding_box()
        search = page.locator(".navbar-header-items .search-button-field").first.bounding_box()
        assert links and search and abs(links["y"] - search["y"]) < links["height"], "the navbar wraps to 2 rows"
        assert page.locator('a[href="https://github.com/nbkit/nbkit"]').first.is_visible()
        shot("glossary")

        visit("learn/02-outcomes.html")
        diagram = page.locator("pre.mermaid svg").first
        diagram.wait_for(state="visible", timeout=budget.ms(20))  # drawn by the site's own Mermaid bundle
        box = diagram.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100, f"the diagram is not drawn at size: {box}"
        diagram.scroll_into_view_if_needed(timeout=budget.ms(5))
        shot("diagram")

        page.evaluate("window.scrollTo(0, 0)")
        binder = page.get_by_role("link", name="Run this lesson on Binder")
        download = page.get_by_role("link", name="Download the notebook")
        assert binder.is_visible() and download.is_visible(), "no Binder or download link under the title"
        assert download.get_attribute("href").endswith("02-outcomes.ipynb")
        shot("lesson-links")

        visit("guide/brokers.html")
        table = page.locator("table.nbkit-compare").first
        table.wait_for(state="visible", timeout=budget.ms(10))
        headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
        for system in ("RabbitMQ", "JetStream", "Kafka", "SQS", "file", "pipe"):
            assert any(system in h for h in headers), f"the comparison has no {system} column: {headers}"
        box, view = table.bounding_box(), page.viewport_size
        assert box and view and box["x"] + box["width"] <= view["width"] + 1, "the comparison runs off the page"
        shot("comparison")

        visit("troubleshooting.html")
        entries = page.locator("section section h2, section section h3")
        assert entries.count() >= 10, f"troubleshooting has {entries.count()} entries"
        shot("troubleshooting")
    except BaseException:
        shot("failure")
        raise
    _assert_clean(refused, console)


def _screenshot(page, folder: Path, test: str, label: str) -> None:
    try:
        page.screenshot(path=str(folder / f"{test}-{label}.png"))
    except Exception:
        pass  # a screenshot is evidence, never the reason a test fails


def test_a_lesson_solution_is_behind_a_toggle(site_url, browser_page, budget, artifacts_dir, request):
    """On a lesson page the first solution's code and output are hidden until its toggle is clicked."""
    page = browser_page.page
    shot = functools.partial(_screenshot, page, artifacts_dir, request.node.name)
    notebook = ROOT / "notebooks" / "00-start-here.ipynb"
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    solution = next(c for c in cells if "solution" in c["metadata"].get("tags", []))
    output = "".join("".join(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in solution["outputs"])
    measured = output.split(". ", 1)[0]  # "Measured: (3, 6)": what the solution's output shows first
    assert measured.startswith("Measured: ")
    try:
        _visit(page, site_url, budget, f"learn/{notebook.stem}.html")
        cell = page.locator("div.cell.tag_solution").first
        toggle = cell.locator("details summary").first
        assert toggle.is_visible(), "the solution has no click-to-show toggle"
        assert not cell.locator("details").first.evaluate("d => d.open")
        assert not page.get_by_text(measured, exact=False).first.is_visible()
        assert measured not in page.locator("article").inner_text(), "the answer is on the page before the click"
        toggle.scroll_into_view_if_needed(timeout=budget.ms(5))
        shot("solution-collapsed")

        toggle.click(timeout=budget.ms(10))
        assert cell.locator("details").first.evaluate("d => d.open")
        shown = cell.locator(".cell_output")
        shown.first.wait_for(state="visible", timeout=budget.ms(10))
        assert measured in shown.first.inner_text()
        assert "measured" in cell.locator(".cell_input").first.inner_text()
        cell.scroll_into_view_if_needed(timeout=budget.ms(5))
        shot("solution-expanded")
    except BaseException:
        shot("solution-failure")
        raise


def test_the_self_check_shows_an_answers_feedback_only_when_it_is_clicked(
    site_url, browser_page, budget, artifacts_dir, request
):
    """The self-check page: every answer closed at first; a click opens its feedback, linking this site."""
    page = browser_page.page
    shot = functools.partial(_screenshot, page, artifacts_dir, request.node.name)
    try:
        _visit(page, site_url, budget, "learn/self-check.html")
        answers = page.locator("article details")
        assert answers.count() >= 12 * 3
        assert answers.evaluate_all("ds => ds.filter(d => d.open).length") == 0
        assert not page.get_by_text("Right.").first.is_visible(), "a right answer shows before any click"
        question = page.locator("article section").filter(has=page.locator("h2")).first
        right = question.locator("details").filter(has_text="Right.").first
        summary = right.locator("summary")
        summary.scroll_into_view_if_needed(timeout=budget.ms(5))
        summary.click(timeout=budget.ms(10))
        assert right.evaluate("d => d.open")
        feedback = right.locator("p").first
        feedback.wait_for(state="visible", timeout=budget.ms(10))
        assert feedback.inner_text().startswith("✓ Right.")
        hrefs = feedback.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert hrefs and not any(h.startswith("http") for h in hrefs), f"feedback links leave the site: {hrefs}"
        assert answers.evaluate_all("ds => ds.filter(d => d.open).length") == 1
        shot("self-check-answer-open")
    except BaseException:
        shot("self-check-failure")
        raise
