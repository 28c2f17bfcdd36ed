"""The guide pages whose examples run: each python block prints what the page shows under it.

A guide page explains more than it runs, so only the pages listed in :data:`RUN` are run (top to bottom, in
a fresh temporary folder, as a how-to page is: the rules are those of notebook mode in ``page_code.py``).
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
from page_code import NOTEBOOK, ROOT, matches, parse, run
from test_howto import _report

GUIDE = ROOT / "docs" / "guide"
#: The guide pages that run as written.
RUN = ["arrow"]

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("name", RUN)
def test_the_page_prints_what_it_shows(name, tmp_path):
    page = parse(GUIDE / f"{name}.md")
    assert not page.problems, "\n".join(f"{name}.md: {p}" for p in page.problems)
    assert page.mode is NOTEBOOK and any(b.expected is not None for b in page.runs)
    for module in page.requires:
        pytest.importorskip(module)
    with warnings.catch_warnings(), contextlib.closing(run(page.blocks, tmp_path, NOTEBOOK)) as outputs:
        warnings.simplefilter("ignore")  # a page shows what it prints; warnings are not part of it
        for block, output in outputs:
            if block.expected is not None:
                assert matches(block.expected, output), _report(page, block, output)
