"""What the lesson widgets show can be read whole: their rows wrap and their long lines break inside the
widget instead of running past its right edge, and every character they show is one the default fonts of
a Debian machine with Chromium have (no emoji: the still picture's note once began with a camera, drawn
as an empty box on the site and in headless Chromium)."""

from __future__ import annotations

import ast
import html
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets
import pytest

import nbkit.notebook
from nbkit import RetryPolicy, StreamWriter, Workload, policy_summary, simulate
from nbkit.notebook.layout import FULL_WIDTH
from nbkit.notebook.live_monitor import LiveMonitor
from nbkit.notebook.policy_explorer import PolicyExplorer, summary_html
from nbkit.notebook.widgets import SessionPanel, StreamBrowser

#: Characters a widget may show: printable ASCII, Latin-1, and the few symbols the widgets use that
#: DejaVu Sans (Debian's default font, Chromium's fallback there) draws. No emoji, nothing beyond U+FFFF.
SAFE = (
    {chr(c) for c in range(0x20, 0x7F)}
    | {"\n", "\t", "\u200b"}  # the zero-width space: ipywidgets' default placeholder, drawn as nothing
    | {chr(c) for c in range(0xA0, 0x100)}
    | set("–—‘’“”…•→☐☑")
    | set("▁▂▃▄▅▆▇█")  # fmt: skip
)
NOTEBOOK_SOURCES = Path(nbkit.notebook.__file__).parent


def texts(widget: ipywidgets.Widget) -> Iterator[str]:
    """Every text a widget and its children show: HTML values (entities decoded), labels, tooltips,
    options, and the still picture saved beside the widget."""
    for name in ("value", "description", "tooltip", "placeholder"):
        value = getattr(widget, name, None)
        if isinstance(value, str):
            yield html.unescape(value)
    for option in getattr(widget, "_options_labels", ()) or ():
        yield str(option)
    for child in getattr(widget, "children", ()):
        yield from texts(child)


def unsafe(text: str) -> set[str]:
    return {f"U+{ord(c):04X} {c!r}" for c in set(text) - SAFE}


@pytest.fixture
def stream_file(tmp_path: Path) -> Path:
    path = tmp_path / "orders.ss"
    with StreamWriter(path) as writer:
        for n in range(12):
            payload = b'{"id":%d,"customer":"c-%d","items":[{"sku":"lamp-%d","qty":2,"price":"19.90"}],"note":"x"}'
            writer.write("orders", payload % (n, n, n))
    return path


@pytest.fixture
def lesson_widgets(scenario, stream_file: Path) -> Iterator[dict[str, ipywidgets.Widget]]:
    """The four widgets, each after some work (a panel that has run, an explorer that has simulated)."""
    panel = SessionPanel(scenario.session)
    panel.buttons["run"].click()
    shown: dict[str, Any] = {
        "SessionPanel": panel,
        "PolicyExplorer": PolicyExplorer(Workload(messages=40, failure_rate=0.5, poison=0.05), background=False),
        "StreamBrowser": StreamBrowser(stream_file, page_size=5),
        "LiveMonitor": LiveMonitor(stream_file, autostart=False),
    }
    yield shown
    for widget in shown.values():
        widget.close()


def test_every_character_the_widgets_show_is_drawn_by_the_default_fonts(lesson_widgets):
    for name, widget in lesson_widgets.items():
        shown = "".join(texts(widget)) + html.unescape(widget._repr_mimebundle_()["text/html"])
        assert not unsafe(shown), f"{name} shows characters the default fonts may not have: {unsafe(shown)}"
        entities = [int(n) for n in re.findall(r"&#(\d+);", widget._repr_mimebundle_()["text/html"])]
        assert all(n <= 0xFFFF for n in entities), f"{name}'s still picture has an emoji entity: {entities}"


def test_every_string_in_the_notebook_layer_is_drawn_by_the_default_fonts():
    """A static pass over the string literals of nbkit/notebook (notes, errors, labels a run may show)."""
    found = {}
    for source in sorted(NOTEBOOK_SOURCES.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = html.unescape(node.value)
                if unsafe(text) or re.search(r"&#(\d{6,}|x[0-9a-fA-F]{5,});", node.value):
                    found[f"{source.name}:{node.lineno}"] = unsafe(text) or node.value[:60]
    assert not found, f"strings with characters the default fonts may not draw: {found}"


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="needs fontconfig's fc-list")
def test_the_safe_characters_are_in_an_installed_font():
    """SAFE itself holds: each symbol beyond ASCII is in a font fontconfig has here (DejaVu on Debian)."""
    missing = []
    for char in sorted(SAFE):
        if ord(char) < 0x7F or char in "\xa0\xad\u200b":
            continue  # ASCII, the no-break space, the soft hyphen and the zero-width space need no glyph
        families = subprocess.run(
            ["fc-list", f":charset={ord(char):x}", "family"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        if not families.strip():
            missing.append(f"U+{ord(char):04X} {char}")
    assert not missing, f"no installed font draws {missing}"


def test_the_panel_rows_wrap_and_its_log_lines_break_inside_it(scenario):
    panel = SessionPanel(scenario.session)
    scenario.session.run()
    rows = [child for child in panel.children if isinstance(child, ipywidgets.HBox)]
    assert len(rows) == 2  # the buttons, and the counts/pending/chart views
    assert all(row.layout.flex_flow == "row wrap" for row in rows)
    log = panel.log_view.value
    assert "white-space:pre-wrap" in log and "overflow-wrap:anywhere" in log
    assert "<pre" in log and "nbkit." in log  # the wrapped block holds the session's log lines
    for line in scenario.session.log[-panel.log_lines :]:
        assert html.escape(line) in log  # whole: wrapped by the browser, never cut by the panel
    assert "overflow-wrap:anywhere" in panel.status.value  # a long payload or action in the status table
    panel.close()


def test_the_stream_browser_fits_its_column(stream_file: Path):
    browser = StreamBrowser(stream_file, page_size=5)
    assert all(row.layout.flex_flow == "row wrap" for row in browser.children if isinstance(row, ipywidgets.HBox))
    cells = re.findall(r"<td style='([^']*)'>", browser.table.value)
    assert len(cells) == 5 * 7
    payloads, stamps = cells[6::7], cells[3::7]
    assert all("overflow-wrap:anywhere" in style for style in payloads)  # JSON with no space breaks
    assert all("white-space:nowrap" in style for style in stamps)  # a timestamp stays on one line
    assert "overflow-wrap:anywhere" in browser.detail.value.split("<pre", 1)[1].split(">", 1)[0]
    assert browser.selector.layout.max_width == FULL_WIDTH
    browser.close()


def test_the_explorer_summary_is_compact_and_its_controls_wrap():
    explorer = PolicyExplorer(Workload(messages=40, failure_rate=0.5), background=False)
    assert explorer.children[0].layout.flex_flow == "row wrap"  # workload and policy, side by side or stacked
    summary = explorer.result.summary
    table = explorer.summary_view.value
    assert table == summary_html(summary)
    headings = re.findall(r"<th style='([^']*)'>([^<]*)</th>", table.split("</thead>")[0])
    assert [text for _, text in headings] == ["", *summary.columns]
    assert headings[-1][1] == "longest wait (s)"  # the column exercise 1 is judged by
    assert all("white-space:normal" in style for style, _ in headings)  # headings wrap onto several lines
    assert "font-size:85%" in table and "overflow-x:auto" in table
    explorer.close()


def test_summary_html_shows_the_summary_values():
    summary = policy_summary(simulate(Workload(messages=6, failure_rate=1.0), RetryPolicy(max_attempts=2)))
    table = summary_html(summary)
    rows = re.findall(r"<tr><th[^>]*>(\w+)</th>(.*?)</tr>", table, re.S)
    assert [name for name, _ in rows] == ["file", "pipe"]
    for name, cells in rows:
        shown = re.findall(r"<td[^>]*>([^<]*)</td>", cells)
        assert shown[:3] == [str(summary.loc[name, c]) for c in ("messages", "delivered", "dead-lettered")]
        assert shown[-1] == str(summary.loc[name, "longest wait (s)"])
    assert summary["mean to success (s)"].isna().all()  # nothing delivered: no time to success
    assert table.count("<td style='padding:1px 4px;white-space:nowrap;text-align:right'>–</td>") == 4
