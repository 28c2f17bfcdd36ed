"""Lessons link site pages by their published address; the site copy turns those into checked references.

``docs/_ext/nbkit_docs/site_links.py`` rewrites ``https://nbkit.readthedocs.io/en/latest/PAGE.html`` in a
lesson's Markdown into ``{doc}`` references (a MyST path link with an anchor), so Sphinx fails the build
on a page that does not exist. These tests check the rewrite and, without building, that every such
address in the lessons and the README names a page the site has.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from nbkit_docs.site_links import SITE_URL, rewrite_site_links, site_link_pattern, source_of  # noqa: E402

SOURCES = sorted([*ROOT.glob("notebooks/*.md"), ROOT / "README.md"])


def test_page_links_become_doc_references_and_section_links_path_links(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "brokers.md").write_text("# x\n", encoding="utf-8")
    (tmp_path / "cli.rst").write_text("x\n=\n", encoding="utf-8")
    markdown = (
        f"see [the `table`]({SITE_URL}guide/brokers.html), [its end]({SITE_URL}guide/brokers.html#the-table), "
        f"[cli]({SITE_URL}cli.html), [gone]({SITE_URL}guide/nope.html) and [a term]({SITE_URL}glossary.html#term-cap)"
    )
    assert rewrite_site_links(markdown, tmp_path) == (
        "see {doc}`the table </guide/brokers>`, [its end](/guide/brokers.md#the-table), "
        "{doc}`cli </cli>`, {doc}`gone </guide/nope>` and "
        f"[a term]({SITE_URL}glossary.html#term-cap)"
    )


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_site_address_names_a_page_the_site_has(source):
    docs = ROOT / "docs"
    for text, page, _ in site_link_pattern().findall(source.read_text(encoding="utf-8")):
        lesson = page.startswith("learn/") and (ROOT / "notebooks" / f"{page.removeprefix('learn/')}.ipynb").exists()
        assert lesson or source_of(page, docs), f"{source.name}: [{text}] links {page}.html, which the site has not"


def test_lesson_02_links_the_broker_comparison():
    text = (ROOT / "notebooks" / "02-outcomes.md").read_text(encoding="utf-8")
    assert f"({SITE_URL}guide/brokers.html)" in text
