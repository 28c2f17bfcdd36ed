"""Each lesson links the glossary where it first uses a term it introduces, and every glossary link resolves.

A lesson links a term by its published address, ``https://nbkit.readthedocs.io/en/latest/glossary.html#term-…``,
so the link works in JupyterLab; the site's copy of the lesson links its own glossary page
(``docs/_ext/nbkit_docs/site_links.py``). The anchor is the term as Sphinx makes it (lower case, runs of other
characters than letters, digits, ``.`` and ``_`` as one ``-``). "Where first used" is checked per markdown cell:
the link is in the cell of the term's first mention in the lesson, or in an earlier one.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
GLOSSARY_URL = "https://nbkit.readthedocs.io/en/latest/glossary.html#"
#: The terms each lesson introduces (a later lesson may link them again, and need not).
INTRODUCES = {
    "00": ("virtual clock", "settlement", "delivery", "attempt", "retry copy", "dead letter", "registration",
           "stream key"),
    "01": ("beacon", "shard", "sequence number", "follow"),
    "02": ("handler outcome", "requeue", "dead-letter key", "position", "checkpoint", "loss window", "at-most-once",
           "at-least-once", "pending copy"),
    "03": ("cap", "replay"),
    "04": ("out_retry", "envelope", "pipe stage"),
    "07": ("redrive",),
    "08": ("lineage",),
}  # fmt: skip
#: Where a term's first mention is matched: the word or its plural (any outcome for a handler outcome),
#: not inside another word, an address or an anchor.
MENTION = {"handler outcome": r"outcomes?"}


def _anchor(term: str) -> str:
    return "term-" + re.sub(r"[^a-z0-9._]+", "-", term.lower()).strip("-")


@cache
def _glossary_anchors() -> frozenset[str]:
    text = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return frozenset(_anchor(line.strip()) for line in block.splitlines() if line.strip() and line[0] != " ")


def _markdown_cells(stem: str) -> list[str]:
    (source,) = NOTEBOOKS.glob(f"{stem}-*.md")
    return [cell.source for cell in jupytext.read(source).cells if cell.cell_type == "markdown"]


def _mention(term: str) -> re.Pattern[str]:
    words = MENTION.get(term, re.escape(term) + "(?:s|es)?")
    return re.compile(rf"(?<![\w/#-]){words}(?![\w-])", re.IGNORECASE)


def test_the_glossary_defines_every_term_a_lesson_introduces():
    introduced = {_anchor(term) for terms in INTRODUCES.values() for term in terms}
    assert introduced <= _glossary_anchors(), sorted(introduced - _glossary_anchors())


@pytest.mark.parametrize("source", sorted(NOTEBOOKS.glob("*.md")), ids=lambda p: p.stem)
def test_every_glossary_link_names_a_term_the_glossary_defines(source):
    anchors = re.findall(re.escape(GLOSSARY_URL) + r"([^)\s>]+)", source.read_text(encoding="utf-8"))
    unknown = sorted(set(anchors) - _glossary_anchors())
    assert not unknown, f"{source.name} links glossary anchors the glossary does not define: {unknown}"


@pytest.mark.parametrize(("stem", "term"), [(s, t) for s, terms in INTRODUCES.items() for t in terms])
def test_a_lesson_links_the_glossary_where_it_first_uses_a_term(stem, term):
    cells = _markdown_cells(stem)
    first = next((i for i, text in enumerate(cells) if _mention(term).search(text)), None)
    assert first is not None, f"lesson {stem} never mentions {term!r}: take it out of INTRODUCES"
    link = f"]({GLOSSARY_URL}{_anchor(term)})"
    linked = next((i for i, text in enumerate(cells) if link in text), None)
    assert linked is not None and linked <= first, (
        f"lesson {stem} first uses {term!r} in markdown cell {first} but links the glossary "
        + (f"only in cell {linked}" if linked is not None else "nowhere")
        + f": link it there as [{term}]({GLOSSARY_URL}{_anchor(term)})"
    )
