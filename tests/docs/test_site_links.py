"""Links to the published site in a notebook's Markdown become links to this site's pages when copied in.

A notebook links a guide page or a lesson by its published address, so the link works in JupyterLab; the
site's copy links the page itself (``docs/_ext/nbkit_docs/site_links.py``), and Sphinx checks its anchor.
Without building, every such address in the notebooks and the README must name a page the site has.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*ROOT.glob("notebooks/*.md"), ROOT / "README.md"])
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from nbkit_docs.site_links import SITE_URL, linked_pages, rewrite_site_links, source_of  # noqa: E402


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    docs, notebooks = tmp_path / "docs", tmp_path / "notebooks"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "outcomes.md").write_text("# Outcomes\n")
    (docs / "cli.rst").write_text("CLI\n===\n")
    notebooks.mkdir()
    (notebooks / "03-retries.ipynb").write_text("{}")
    return docs, notebooks


def test_links_to_pages_the_site_builds_become_relative_with_their_anchor(tmp_path):
    docs, notebooks = _tree(tmp_path)
    markdown = (
        f"[rules]({SITE_URL}guide/outcomes.html#the-rules-row-by-row), [lesson 03]({SITE_URL}learn/03-retries.html), "
        f"[cli]({SITE_URL}cli.html)"
    )
    assert rewrite_site_links(markdown, docs, notebooks, "learn") == (
        "[rules](../guide/outcomes.md#the-rules-row-by-row), [lesson 03](03-retries.ipynb), [cli](../cli.rst)"
    )


def test_addresses_of_pages_not_built_here_are_kept(tmp_path):
    docs, notebooks = _tree(tmp_path)
    markdown = (
        f"[five transports]({SITE_URL}transports.html) and [other](https://example.org/guide/outcomes.html) "
        f"and [no lesson]({SITE_URL}learn/99-none.html)"
    )
    assert rewrite_site_links(markdown, docs, notebooks, "learn") == markdown


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_site_address_names_a_page_the_site_has(source):
    for page in linked_pages(source.read_text(encoding="utf-8")):
        if page == "glossary":
            continue
        built = source_of(page, ROOT / "docs", ROOT / "notebooks")
        assert built is not None, f"{source.name} links {SITE_URL}{page}.html, a page the site does not build"


def test_lesson_02_links_the_broker_comparison():
    text = (ROOT / "notebooks" / "02-outcomes.md").read_text(encoding="utf-8")
    assert f"({SITE_URL}guide/brokers.html)" in text
