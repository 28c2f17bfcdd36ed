"""Glossary addresses that work everywhere: ``glossary.html#term-SLUG`` with SLUG the term in lower case.

Lessons link a term's first use to ``https://nbkit.readthedocs.io/en/latest/glossary.html#term-SLUG``
(SLUG: the term in lower case, spaces as ``-``), which works in JupyterLab and on the published site.
Sphinx keeps a term's case in its anchor (``term-EOS-mark``), so :class:`LowercaseTermIds` gives every
glossary term the lower-case anchor too. :func:`rewrite_glossary_links` turns those addresses in a
lesson's Markdown into ``{term}`` references when the docs build copies the lesson in
(:mod:`.lessons`): the link then stays on this site, and Sphinx checks the term exists, so a link that
names no defined term fails the build (``-W``), naming the lesson and the slug.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

__all__ = ["GLOSSARY_URL", "LowercaseTermIds", "defined_terms", "link_pattern", "rewrite_glossary_links", "slug"]

#: Where the published glossary lives (the address lessons use).
GLOSSARY_URL = "https://nbkit.readthedocs.io/en/latest/glossary.html"
_LINK = re.compile(r"\[([^\]\n]+)\]\(" + re.escape(GLOSSARY_URL) + r"#term-([^)\s]+)\)")
_TERM_LINE = re.compile(r"^(\S.*)$")


def slug(term: str) -> str:
    """``"EOS mark"`` -> ``"eos-mark"``: the term in lower case, runs of spaces as one ``-``."""
    return "-".join(term.lower().split())


def link_pattern() -> re.Pattern[str]:
    """The regular expression of a Markdown glossary link: groups (link text, slug)."""
    return _LINK


def defined_terms(glossary: Path) -> dict[str, str]:
    """``{slug: term}`` for every term of ``docs/glossary.md``'s ``{glossary}`` block."""
    text = glossary.read_text(encoding="utf-8")
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    if block is None:
        raise ValueError(f"{glossary}: no ```{{glossary}} block")
    return {
        slug(m.group(1)): m.group(1).strip() for line in block.group(1).splitlines() if (m := _TERM_LINE.match(line))
    }


def rewrite_glossary_links(markdown: str, terms: dict[str, str]) -> str:
    """Replace each ``[text](GLOSSARY_URL#term-SLUG)`` by ``{term}`text <TERM>` ``.

    A slug that names no term becomes ``{term}`text <SLUG>` ``: Sphinx then reports
    ``term not in glossary`` for ``where``, so the build fails on it instead of linking nowhere.
    """

    def replace(match: re.Match[str]) -> str:
        text, name = match.group(1), match.group(2)
        term = terms.get(name.lower(), name)
        label = text.replace("`", "")  # a role's text cannot hold backquotes; the term stays readable
        return f"{{term}}`{label} <{term}>`"

    return _LINK.sub(replace, markdown)


class LowercaseTermIds(SphinxTransform):
    """Give each glossary term the anchor ``term-SLUG`` (lower case) beside Sphinx's own."""

    default_priority = 800

    def apply(self, **kwargs: Any) -> None:
        """Add the lower-case id where it differs from the ids the term already has."""
        for glossary in self.document.findall(lambda n: isinstance(n, nodes.Element) and "glossary" in n["classes"]):
            for term in glossary.findall(nodes.term):
                wanted = f"term-{slug(term.astext())}"
                if wanted not in term["ids"]:
                    term["ids"].append(wanted)
                    self.document.ids[wanted] = term


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the anchor transform."""
    app.add_transform(LowercaseTermIds)
    return {"parallel_read_safe": True}
