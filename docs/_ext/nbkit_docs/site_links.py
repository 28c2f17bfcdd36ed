"""Lessons' links to other pages of the published site, made local when the site copies a lesson in.

A lesson links a guide page with the page's published address,
``https://nbkit.readthedocs.io/en/latest/guide/brokers.html`` (optionally ``#section``), so the link
works in JupyterLab. :func:`rewrite_site_links` turns each such link in a lesson's Markdown into a
reference Sphinx resolves and checks: ``{doc}`text </guide/brokers>` `` for a page, a MyST path link
``[text](/guide/brokers.md#section)`` for a section. A page that does not exist then fails the build
(``-W``) instead of sending a reader to a 404. Glossary addresses are left to :mod:`.glossary_links`.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["SITE_URL", "rewrite_site_links", "site_link_pattern", "source_of"]

#: Where the published site lives (the address lessons use).
SITE_URL = "https://nbkit.readthedocs.io/en/latest/"
_LINK = re.compile(r"\[([^\]\n]+)\]\(" + re.escape(SITE_URL) + r"(?!glossary\.html)([\w./-]+)\.html(?:#([\w-]+))?\)")
_SUFFIXES = (".md", ".rst", ".ipynb")


def site_link_pattern() -> re.Pattern[str]:
    """The regular expression of a Markdown link to a site page: groups (text, page, anchor or None)."""
    return _LINK


def source_of(page: str, srcdir: Path) -> Path | None:
    """The source file of ``page`` (``guide/brokers``) under ``srcdir``, whichever suffix it has."""
    for suffix in _SUFFIXES:
        path = srcdir / f"{page}{suffix}"
        if path.exists():
            return path
    return None


def rewrite_site_links(markdown: str, srcdir: Path) -> str:
    """Replace each ``[text](SITE_URL + PAGE.html[#anchor])`` by a local reference Sphinx checks.

    Without an anchor the link becomes ``{doc}`text </PAGE>` ``; with one, ``[text](/PAGE.md#anchor)``
    (the page's own suffix), which MyST resolves against the page's heading anchors. A page with no
    source keeps a ``{doc}`` reference, so Sphinx reports it (``unknown document``) and the build fails.
    """

    def replace(match: re.Match[str]) -> str:
        text, page, anchor = match.group(1), match.group(2), match.group(3)
        source = source_of(page, srcdir)
        if anchor and source is not None:
            return f"[{text}](/{page}{source.suffix}#{anchor})"
        label = text.replace("`", "")  # a role's text cannot hold backquotes
        return f"{{doc}}`{label} </{page}>`"

    return _LINK.sub(replace, markdown)
