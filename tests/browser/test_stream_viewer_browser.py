"""The stream viewer in JupyterLab (headless Chromium): a Rust-written file opened by a double-click in the
file browser, a damaged file, a live file a ``nbkit publish`` from another process appends to, and a
large file that opens and scrolls. Screenshots (light and dark theme) go to test-artifacts/browser/."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Budget
from jlab import failure_artifacts

from nbkit.transport.file_info import summarize
from nbkit.transport.file_writer import StreamWriter

T0 = 1_704_067_200_000
VIEWER = ".jp-MainAreaWidget:not(.lm-mod-hidden) .nbkit-StreamViewer"
#: These tests open several files (one writes 400k messages first): a longer budget than the suite's 80 s.
VIEWER_BUDGET = 150.0


@pytest.fixture
def budget(browser_requirements) -> Budget:
    return Budget(VIEWER_BUDGET)


# The viewer of the current main-area widget: its status line, row count and the rows it shows.
VIEWER_STATE_JS = """() => {
    const node = document.querySelector('.jp-MainAreaWidget:not(.lm-mod-hidden) .nbkit-StreamViewer');
    if (!node) return null;
    const rows = [...node.querySelectorAll('.nbkit-StreamViewer-rows .nbkit-StreamViewer-row')];
    return {
        status: node.querySelector('.nbkit-StreamViewer-status').textContent,
        error: node.querySelector('.nbkit-StreamViewer-error').style.display === 'none'
            ? null : node.querySelector('.nbkit-StreamViewer-error').textContent,
        keys: [...node.querySelectorAll('.nbkit-StreamViewer-streams button')].map(b => b.textContent),
        damage: [...node.querySelectorAll('.nbkit-StreamViewer-damage li')].map(li => li.textContent),
        rows: rows.map(r => ({
            row: Number(r.dataset.row),
            cells: [...r.querySelectorAll('.nbkit-StreamViewer-cell')].map(c => c.textContent),
            afterDamage: r.classList.contains('nbkit-mod-afterDamage'),
            selected: r.classList.contains('nbkit-mod-selected'),
        })),
        detail: node.querySelector('.nbkit-StreamViewer-detail').textContent,
        scriptTags: node.querySelectorAll('script').length,
    };
}"""


def _state(page):
    return page.evaluate(VIEWER_STATE_JS)


def _wait_rows(page, budget, predicate_js: str, cap: float = 20) -> None:
    """Wait until the viewer's state satisfies ``predicate_js`` (a JS expression over ``s``)."""
    page.wait_for_function(
        f"() => {{ const s = ({VIEWER_STATE_JS})(); return !!s && ({predicate_js}); }}",
        timeout=budget.ms(cap),
        polling=200,
    )


def _open_lab(page, lab_server, budget) -> None:
    page.goto(f"{lab_server.url}/lab?reset&token={lab_server.token}", timeout=budget.ms(30))
    page.wait_for_function("() => !!(window.jupyterapp && window.jupyterapp.shell)", timeout=budget.ms(30))
    page.wait_for_selector(".jp-DirListing-item", timeout=budget.ms(30))


def _open_file(page, lab_server, budget, name: str) -> None:
    """Open ``name`` as a double-click in the file browser does (the default viewer of its file type)."""
    page.evaluate("(path) => { window.jupyterapp.commands.execute('docmanager:open', {path}); return null; }", name)
    page.wait_for_function(
        "(path) => { const w = window.jupyterapp.shell.currentWidget;"
        " return !!(w && w.context && w.context.path === path && w.node.querySelector('.nbkit-StreamViewer')); }",
        arg=name,
        timeout=budget.ms(40),
        polling=250,
    )


#: The theme's base colour, a CSS variable every JupyterLab theme sets: it changes once the theme's styles apply.
THEME_COLOUR_JS = "() => getComputedStyle(document.body).getPropertyValue('--jp-layout-color0').trim()"


def _theme(page, budget, name: str) -> None:
    """Switch to theme ``name`` (another than the current one) and wait until its styles apply."""
    before = page.evaluate(THEME_COLOUR_JS)
    page.evaluate(
        "(theme) => { window.jupyterapp.commands.execute('apputils:change-theme', {theme}); return null; }", name
    )
    page.wait_for_function(
        f"([theme, before]) => document.body.dataset.jpThemeName === theme && ({THEME_COLOUR_JS})() !== before",
        arg=[name, before],
        timeout=budget.ms(15),
        polling=200,
    )


def _write_orders(path: Path, n: int, *, interval: int = 1 << 20) -> None:
    with StreamWriter(path, beacon_interval=interval, created_at_ms=T0, exclusive=True, flush_every=4096) as w:
        for i in range(n):
            key = ("orders", "payments", "audit")[i % 3]
            payload = b"<script>window.pwned=1</script>" if i == 1 else b'{"id":%d,"amount":%d}' % (i, i % 97)
            w.write(key, payload, timestamp_ms=T0 + i)


def test_rust_file_by_double_click_and_a_damaged_file(lab_server, browser_page, budget, artifacts_dir, sample_path):
    page = browser_page.page
    shutil.copy(sample_path, lab_server.root_dir / "sample-1.ss")
    damaged = lab_server.root_dir / "damaged.ss"
    _write_orders(damaged, 600, interval=1024)
    raw = bytearray(damaged.read_bytes())
    raw[9000:9040] = bytes(40)
    damaged.write_bytes(bytes(raw))
    expected = summarize(lab_server.root_dir / "sample-1.ss")
    shot = artifacts_dir / "test_rust_file_by_double_click_and_a_damaged_file"
    with failure_artifacts(page, shot, artifacts_dir, "viewer-rust", browser_page.console, lab_server, budget):
        _open_lab(page, lab_server, budget)
        page.locator(".jp-DirListing-item", has_text="sample-1.ss").first.dblclick(timeout=budget.ms(10))
        page.wait_for_selector(VIEWER, timeout=budget.ms(20))
        _wait_rows(page, budget, "s.rows.length > 5 && s.rows[0].cells.length === 6")
        state = _state(page)
        assert f"{expected.message_count} messages" in state["status"], state["status"]
        assert state["keys"][1:] == [st.stream_key for st in expected.streams]
        first = state["rows"][0]
        assert first["row"] == 0 and first["selected"]
        assert not page.query_selector(".jp-Dialog")
        # the file type and its icon in the file browser
        item = page.locator(".jp-DirListing-item", has_text="sample-1.ss").first
        assert (item.get_attribute("data-file-type") or "").startswith("seastreamer-stream")
        # keyboard: down twice selects row 2, and the detail pane follows
        page.locator(f"{VIEWER} .nbkit-StreamViewer-scroller").focus()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        _wait_rows(page, budget, "s.rows.some(r => r.row === 2 && r.selected) && s.detail.startsWith('row 2 ')")
        page.screenshot(path=str(shot) + "-light.png")
        _theme(page, budget, "JupyterLab Dark")
        page.screenshot(path=str(shot) + "-dark.png")
        _theme(page, budget, "JupyterLab Light")

        # the damaged file: listed, the messages around it shown, no error dialog
        _open_file(page, lab_server, budget, "damaged.ss")
        _wait_rows(page, budget, "s.damage.length === 1 && s.rows.length > 0")
        page.locator(f"{VIEWER} .nbkit-StreamViewer-damage button").first.click()
        _wait_rows(page, budget, "s.rows.some(r => r.afterDamage)")
        state = _state(page)
        assert "damaged region" in state["status"] and "recovered after it" in state["damage"][0]
        around = [r for r in state["rows"]]
        at = next(i for i, r in enumerate(around) if r["afterDamage"])
        assert at >= 1, "the messages before the damaged region are shown too"
        assert "Before this message" in state["detail"]
        assert not page.query_selector(".jp-Dialog"), "a damaged file must not raise an error dialog"
        # a <script> payload is text, not markup
        page.locator(f"{VIEWER} .nbkit-StreamViewer-streams button", has_text="all keys").click()
        page.locator(f"{VIEWER} .nbkit-StreamViewer-scroller").focus()
        page.keyboard.press("Home")
        _wait_rows(page, budget, "s.rows.some(r => r.row === 1 && (r.cells[4] ?? '').includes('<script>'))")
        state = _state(page)
        assert state["scriptTags"] == 0 and page.evaluate("() => window.pwned === undefined")
        page.screenshot(path=str(shot) + "-damaged.png")
        _theme(page, budget, "JupyterLab Dark")
        page.screenshot(path=str(shot) + "-damaged-dark.png")


def test_live_file_follows_a_publish_from_another_process(lab_server, browser_page, budget, artifacts_dir):
    page = browser_page.page
    live = lab_server.root_dir / "live.ss"
    _write_orders(live, 5)
    shot = artifacts_dir / "test_live_file_follows_a_publish_from_another_process"
    with failure_artifacts(page, shot, artifacts_dir, "viewer-live", browser_page.console, lab_server, budget):
        _open_lab(page, lab_server, budget)
        _open_file(page, lab_server, budget, "live.ss")
        _wait_rows(page, budget, "s.rows.length === 5")
        page.locator(f"{VIEWER} .nbkit-StreamViewer-follow input").check()
        for i in range(3):
            done = subprocess.run(
                [sys.executable, "-m", "nbkit", "publish", str(live), "orders", f'{{"late": {i}}}'],
                capture_output=True,
                text=True,
                timeout=budget.left(20),
            )
            assert done.returncode == 0, done.stderr
        _wait_rows(page, budget, "s.rows.length === 8 && (s.rows[7]?.cells[4] ?? '').includes('\"late\": 2')")
        state = _state(page)
        assert "8 messages" in state["status"] and state["rows"][7]["selected"], state
        page.screenshot(path=str(shot) + "-light.png")


def test_large_file_opens_and_scrolls(lab_server, browser_page, budget, artifacts_dir):
    page = browser_page.page
    n = 400_000  # 400k rows x 24 px is taller than the spacer's cap: the scaled scrollbar is used
    big = lab_server.root_dir / "large.ss"
    _write_orders(big, n)
    shot = artifacts_dir / "test_large_file_opens_and_scrolls"
    with failure_artifacts(page, shot, artifacts_dir, "viewer-large", browser_page.console, lab_server, budget):
        _open_lab(page, lab_server, budget)
        t = time.monotonic()
        _open_file(page, lab_server, budget, "large.ss")
        _wait_rows(page, budget, "s.rows.length > 10 && s.rows[0].cells.length === 6")
        opened = time.monotonic() - t
        done = f"(s.status ?? '').includes('{n:,} messages') && !(s.status ?? '').includes('indexing')"
        _wait_rows(page, budget, done, cap=40)
        # the middle of the file, by the scrollbar
        page.evaluate(
            "() => { const s = document.querySelector('.nbkit-StreamViewer-scroller');"
            " s.scrollTop = (s.scrollHeight - s.clientHeight) / 2; }"
        )
        _wait_rows(page, budget, "s.rows.length > 10 && s.rows[0].cells.length === 6 && s.rows[0].row > 150000")
        middle = _state(page)["rows"][0]
        assert 190_000 <= middle["row"] <= 210_000, middle
        assert middle["cells"][4] == f'{{"id":{middle["row"]},"amount":{middle["row"] % 97}}}'
        # the end, by keyboard
        page.locator(f"{VIEWER} .nbkit-StreamViewer-scroller").focus()
        page.keyboard.press("End")
        _wait_rows(page, budget, f"s.rows.some(r => r.row === {n - 1} && r.selected && r.cells.length === 6)")
        # go to a sequence number of one stream
        page.select_option(f"{VIEWER} .nbkit-StreamViewer-goKind", "seq")
        page.select_option(f"{VIEWER} .nbkit-StreamViewer-goKey", "payments")
        page.fill(f"{VIEWER} .nbkit-StreamViewer-goValue", "1000")
        page.keyboard.press("Enter")
        # payments seq 1000 is message 3 * 999 + 1 = 2998
        _wait_rows(page, budget, "s.rows.some(r => r.row === 2998 && r.selected && r.cells[2] === '1000')")
        page.screenshot(path=str(shot) + "-light.png")
        print(f"large file ({n:,} messages): first rows shown {opened:.2f} s after the open command")


def test_damage_at_the_end_is_a_damaged_region_and_indexing_ends(lab_server, browser_page, budget, artifacts_dir):
    page = browser_page.page
    tail = lab_server.root_dir / "tail.ss"
    _write_orders(tail, 600, interval=1024)
    raw = bytearray(tail.read_bytes())
    raw[-150:-110] = bytes(40)  # in the last frames, with no beacon after them
    tail.write_bytes(bytes(raw))
    expected = summarize(tail)
    assert len(expected.damaged) == 1 and expected.end.reason == "end"
    shot = artifacts_dir / "test_damage_at_the_end_is_a_damaged_region_and_indexing_ends"
    with failure_artifacts(page, shot, artifacts_dir, "viewer-tail", browser_page.console, lab_server, budget):
        _open_lab(page, lab_server, budget)
        _open_file(page, lab_server, budget, "tail.ss")
        settled = (
            f"(s.status ?? '').includes('{expected.message_count} messages') && s.damage.length === 1"
            " && (s.status ?? '').includes('1 damaged region') && !(s.status ?? '').includes('indexing')"
        )
        _wait_rows(page, budget, settled)
        state = _state(page)
        assert "trailing" not in state["status"] and "0 messages recovered after it" in state["damage"][0], state
        page.screenshot(path=str(shot) + "-light.png")
