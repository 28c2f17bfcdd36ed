"""Addresses of the published site, in a notebook's Markdown, made into links to this site's own pages.

A notebook links guide and lesson pages with their published addresses
(``https://nbkit.readthedocs.io/en/latest/guide/outcomes.html#attempts-and-the-cap``), which work in
JupyterLab. When the docs build copies the notebook in (:mod:`.lessons`), each such link to a page this
site builds becomes a relative MyST link to its source (``../guide/outcomes.md#attempts-and-the-cap``):
the reader stays on the site being read, and Sphinx checks the page and the anchor, so a link to a
heading that was renamed fails the build. Addresses of pages the site does not build are left as they
are (``tests/docs/test_site_links.py`` fails on any address in a notebook or the README that names no
page). Glossary addresses are :mod:`.glossary_links`' job and are rewritten before this runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["SITE_URL", "linked_pages", "rewrite_site_links", "source_of"]

#: Where the published site lives (the address notebooks use).
SITE_URL = "https://nbkit.readthedocs.io/en/latest/"
_LINK = re.compile(r"\]\(" + re.escape(SITE_URL) + r"([A-Za-z0-9_./-]+)\.html(#[A-Za-z0-9_-]+)?\)")
_SUFFIXES = (".md", ".rst", ".ipynb")


def linked_pages(markdown: str) -> list[str]:
    """The site pages (``guide/brokers``, ``learn/03-...``) that ``markdown`` links by published address."""
    return [match.group(1) for match in _LINK.finditer(markdown)]


def source_of(page: str, docs: Path, notebooks: Path) -> Path | None:
    """The source of the page ``page`` (``guide/outcomes``, ``learn/03-...``), or None if not built here."""
    for suffix in _SUFFIXES:
        if (docs / f"{page}{suffix}").is_file():
            return docs / f"{page}{suffix}"
    # the Learn pages are copied in from notebooks/ during the build, perhaps not yet
    head, _, name = page.partition("/")
    if head == "learn" and (notebooks / f"{name}.ipynb").is_file():
        return docs / "learn" / f"{name}.ipynb"
    return None


def rewrite_site_links(markdown: str, docs: Path, notebooks: Path, folder: str) -> str:
    """Replace each ``](SITE_URL PAGE.html#anchor)`` whose page the site builds by a relative link.

    ``folder`` is where the copied notebook sits inside ``docs`` (``"learn"``); the new link is
    relative to it.
    """

    def replace(match: re.Match[str]) -> str:
        source = source_of(match.group(1), docs, notebooks)
        if source is None:
            return match.group(0)
        relative = os.path.relpath(source, docs / folder).replace(os.sep, "/")
        return f"]({relative}{match.group(2) or ''})"

    return _LINK.sub(replace, markdown)
