"""The guide's page "Test your handlers" (docs/guide/testing.md) runs as written and prints what it shows.

Its blocks run top to bottom in a fresh folder, as a how-to page's do (``tests/docs/page_code.py``,
notebook mode: the rules are in docs/development.md), and the page is in the guide's table of contents.
"""

from __future__ import annotations

import contextlib
import difflib
import re
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "docs"))
from page_code import NOTEBOOK, ROOT, matches, normalise, parse, run  # noqa: E402

PAGE = ROOT / "docs" / "guide" / "testing.md"

pytestmark = pytest.mark.timeout(300)


def test_every_block_of_the_page_prints_what_the_page_shows(tmp_path):
    page = parse(PAGE)
    assert not page.problems, "\n".join(page.problems)
    assert page.mode is NOTEBOOK
    assert sum(b.expected is not None for b in page.runs) >= 6, "the page shows its outputs"
    with warnings.catch_warnings(), contextlib.closing(run(page.blocks, tmp_path, NOTEBOOK)) as outputs:
        warnings.simplefilter("ignore")
        for block, output in outputs:
            if block.expected is not None:
                diff = "\n".join(
                    difflib.unified_diff(normalise(block.expected), normalise(output), "shown", "printed", lineterm="")
                )
                assert matches(block.expected, output), f"docs/guide/testing.md:{block.line}: prints\n{diff}"


def test_the_guide_lists_the_page():
    index = (ROOT / "docs" / "guide" / "index.md").read_text(encoding="utf-8")
    toctree = re.search(r"```\{toctree\}\n(.*?)```", index, re.S)
    assert toctree and "\ntesting\n" in toctree.group(1)
