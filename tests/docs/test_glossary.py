"""The glossary defines the course's words, and every glossary link names a term it defines.

Lessons link terms with addresses of the published glossary (``.../glossary.html#term-SLUG``) so the
links work in JupyterLab; the docs build turns them into ``{term}`` references
(``docs/_ext/nbkit_docs/glossary_links.py``). These tests check the slugs against the glossary without
building the site; tests/docs/test_site.py checks the built pages' links and anchors.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
from nbkit_docs.glossary_links import GLOSSARY_URL, defined_terms, link_pattern, rewrite_glossary_links  # noqa: E402

GLOSSARY = ROOT / "docs" / "glossary.md"
#: The shared convention's terms (the helpers' common brief), spelt exactly.
REQUIRED = """registration, subscription, handler outcome, settlement, delivery, attempt, retry copy, pending copy,
cap, dead-letter key, dead letter, reject, replay, follow, position, checkpoint, at-least-once, at-most-once,
loss window, envelope, beacon, EOS mark, stream key, shard, sequence number, out_retry, pipe stage, redrive,
lineage, virtual clock, session, damaged region, salvage"""
SOURCES = sorted([*ROOT.glob("notebooks/*.md"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md"])
TERM_ROLE = re.compile(r"\{term\}`(?:[^`<]*<([^>`]+)>|([^`]+))`")


def _entries() -> dict[str, str]:
    """``{term: definition}`` from the glossary block."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", GLOSSARY.read_text(encoding="utf-8"), re.S)
    assert block, "docs/glossary.md has no ```{glossary} block"
    entries: dict[str, str] = {}
    term = None
    for line in block.group(1).splitlines():
        if line and not line[0].isspace():
            term = line.strip()
            entries[term] = ""
        elif term:
            entries[term] += " " + line.strip()
    return entries


def test_every_required_term_is_defined_as_spelt():
    terms = set(defined_terms(GLOSSARY).values())
    required = {t.strip() for t in REQUIRED.replace("\n", " ").split(",")}
    assert required <= terms, f"not in docs/glossary.md: {sorted(required - terms)}"
    assert len(terms) >= 20


@pytest.mark.parametrize("term, definition", sorted(_entries().items()))
def test_each_definition_is_short_and_says_where_the_term_is_shown(term, definition):
    sentences = [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z{])", definition.strip()) if s]
    assert 1 <= len(sentences) <= 4, f"{term}: {len(sentences)} sentences"
    assert re.search(r"(See|Shown in) \{doc\}`[^`]+`", definition), f"{term}: no link to where it is shown"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_glossary_link_and_term_reference_names_a_defined_term(source):
    terms = defined_terms(GLOSSARY)
    text = source.read_text(encoding="utf-8")
    for line_no, line in enumerate(text.splitlines(), 1):
        for _, name in link_pattern().findall(line):
            assert name in terms, f"{source.name}:{line_no}: glossary link #term-{name} names no term"
        for target, plain in TERM_ROLE.findall(line):
            name = (target or plain).strip()
            assert name in terms.values(), f"{source.name}:{line_no}: {{term}} {name!r} is not in the glossary"
    stray = re.findall(re.escape(GLOSSARY_URL) + r"(?!#term-)[^)\s]*", text)
    assert not stray, f"{source.name}: glossary addresses without #term-SLUG: {stray}"


def test_links_become_term_references_and_unknown_slugs_are_kept_for_sphinx_to_report():
    terms = {"eos-mark": "EOS mark", "cap": "cap"}
    markdown = (
        f"the [`EOS` mark]({GLOSSARY_URL}#term-eos-mark) and the [caps]({GLOSSARY_URL}#term-cap), "
        f"[x]({GLOSSARY_URL}#term-nope)"
    )
    assert rewrite_glossary_links(markdown, terms) == (
        "the {term}`EOS mark <EOS mark>` and the {term}`caps <cap>`, {term}`x <nope>`"
    )
