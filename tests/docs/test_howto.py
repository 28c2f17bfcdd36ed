"""Every how-to page runs as written and prints what it shows; the how-to index lists every page.

Each page's python and console blocks run in order in a fresh temporary folder, and each output is
compared with the ``text`` block under it (the rules, and what ``...`` matches, are those of notebook
mode in ``page_code.py``). A page that cannot run here (an optional extra missing) is skipped, not passed.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
import warnings

import pytest
from page_code import NOTEBOOK, ROOT, Block, Page, matches, normalise, parse, run

HOWTO = ROOT / "docs" / "howto"
PAGES = sorted(p for p in HOWTO.glob("*.md") if p.name != "index.md")

pytestmark = pytest.mark.timeout(300)


def _report(page: Page, block: Block, output: str) -> str:
    diff = difflib.unified_diff(
        normalise(block.expected or ""), normalise(output), "shown on the page", "printed", lineterm=""
    )
    where = f"{page.path.relative_to(ROOT)}:{block.line}"
    return f"{where}: the {block.lang} block prints something else than the page shows\n" + "\n".join(diff)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_every_block_of_the_page_prints_what_the_page_shows(path, tmp_path, monkeypatch):
    page = parse(path)
    assert not page.problems, "\n".join(f"{path.name}: {p}" for p in page.problems)
    assert page.mode is NOTEBOOK, f"{path.name}: a how-to page runs top to bottom as a notebook"
    assert any(b.expected is not None for b in page.runs), f"{path.name}: no block shows its output"
    for module in page.requires:
        pytest.importorskip(module)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    with warnings.catch_warnings(), contextlib.closing(run(page.blocks, tmp_path, NOTEBOOK)) as outputs:
        warnings.simplefilter("ignore")  # a page shows what it prints; warnings are not part of it
        for block, output in outputs:  # closing: a failed page still stops what it started
            if block.expected is not None:
                assert matches(block.expected, output), _report(page, block, output)


def test_the_index_lists_every_page_once_with_a_line_on_it():
    text = (HOWTO / "index.md").read_text(encoding="utf-8")
    toctree = re.search(r"```\{toctree\}\n(.*?)```", text, re.S)
    assert toctree, "docs/howto/index.md has no toctree"
    listed = [line.strip() for line in toctree.group(1).splitlines() if line.strip() and not line.startswith(":")]
    assert sorted(listed) == [p.stem for p in PAGES] and len(set(listed)) == len(listed), listed
    for stem in listed:
        assert re.search(rf"^- \{{doc\}}`{re.escape(stem)}`", text, re.M), f"the index has no line on {stem}"


# -- the matching rules themselves --------------------------------------------------------------------
@pytest.mark.parametrize(
    "shown, printed, same",
    [
        ("a\nb", "a  \nb\n\n", True),  # trailing whitespace and blank lines around do not count
        ("a\n...\nd", "a\nb\nc\nd", True),  # a ... line: any lines
        ("a\n...\nb", "a\nb", True),  # ... none
        ("a\n...", "a\nb\nc", True),
        ("time 2024-...Z, seq 3", "time 2024-01-01T00:00:05Z, seq 3", True),  # ... in a line: any text
        ("time ...Z, seq 3", "time 2024Z, seq 4", False),
        ("a\nb", "a\nc", False),
        ("a\nb", "a\nb\nc", False),  # nothing left over
        ("a ... b", "a x\ny b", False),  # ... in a line does not cross lines
        ("a\n\nb", "a\nb", False),  # blank lines inside count
    ],
)
def test_matching_rules(shown, printed, same):
    assert matches(shown, printed) is same


def test_a_code_block_that_neither_runs_nor_is_marked_is_a_problem(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```sh\nls\n```\n\n% not tested: it runs forever\n```bash\nnbkit watch f.ss\n```\n\n"
        "```console\n$ echo hi\n```\n\n```text\nhi\n```\n\n```text\nfree\n```\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert [p.split(":")[0] for p in parsed.problems] == ["line 1", "line 18"]
    assert [(b.lang, b.not_tested, b.expected) for b in parsed.blocks] == [
        ("bash", True, None),
        ("console", False, "hi"),
    ]
    assert [out for _, out in run(parsed.blocks, tmp_path, NOTEBOOK)] == ["hi\n"]


def test_a_file_block_is_written_where_the_page_reaches_it_and_requires_are_read(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "% requires: json, csv\n\n```{code-block} python\n:caption: stage.py\n\nX = 41\n```\n\n"
        "```python\nimport stage\n\nstage.X + 1\n```\n\n```text\n42\n```\n\n"
        "```console\n$ cat stage.py\n```\n\n```text\nX = 41\n```\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert not parsed.problems and parsed.requires == ["json", "csv"]
    folder = tmp_path / "run"
    folder.mkdir()
    outputs = [(block.file or block.lang, out) for block, out in run(parsed.blocks, folder, parsed.mode)]
    assert outputs == [("stage.py", ""), ("python", "42\n"), ("console", "X = 41\n")]
    assert "stage" not in sys.modules  # the page's own module does not leak into the next page


def test_a_notebook_page_reads_the_same_blocks_as_a_scripts_page(tmp_path):
    """One syntax: a ``# NAME.py`` python block is a file and a bash block a script here too."""
    page = tmp_path / "p.md"
    page.write_text(
        "## a heading is no new run here\n\n```python\n# helper.py\nWORD = 'hi'\n```\n\n"
        '```bash\nx=$(cat helper.py | wc -l)\necho "lines $x"\n```\n\n```text\nlines 2\n```\n\n'
        "```python\nfrom helper import WORD\n\nWORD\n```\n\n```text\n'hi'\n```\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert not parsed.problems and parsed.mode is NOTEBOOK
    assert [[b.file or b.lang for b in blocks] for _, blocks in parsed.units()] == [["helper.py", "bash", "python"]]
    folder = tmp_path / "run"
    folder.mkdir()
    outputs = [(block, out) for block, out in run(parsed.blocks, folder, parsed.mode)]
    assert [out for _, out in outputs] == ["", "lines 2\n", "'hi'\n"]
    assert all(matches(block.expected, out) for block, out in outputs if block.expected is not None)
    assert "helper" not in sys.modules


def test_an_unknown_mode_and_output_inside_a_console_block_are_problems(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("% run: script\n\n```console\n$ echo hi\nhi\n```\n", encoding="utf-8")
    assert parse(page).problems == [
        "line 1: no mode 'script' (one of notebook, scripts)",
        "line 5: a console block holds only '$ command' lines; output goes below",
    ]
