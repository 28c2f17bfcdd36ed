"""The instructor guide (docs/learn/instructors.md) stays in step with the lessons it plans.

Every lesson and the self-check has a row in the timing table, marked core or optional, whose teaching
estimate is the lesson's own "Time needed" line, and a section of its own with key points, timings, where
learners get stuck, the misconceptions its exercises target and what to cut. A lesson's key points are its
recap, word for word (the recap is the source: learners read it in JupyterLab and on the lesson's page, the
teacher in the guide). The three-hour path fits in 180 minutes, setup and breaks included, and teaches
exactly the core lessons; every exercise misconception the hints are written against is named in its
lesson's section.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nbkit.exercises import exercises
from nbkit.notebook.exercises import exercise

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "learn" / "instructors.md").read_text(encoding="utf-8")
LESSONS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.md")) + ["self-check"]
HEADINGS = ("**Key points:**", "**Timing:**", "**Where learners get stuck:**", "**Misconceptions targeted**",
            "**When short of time:**")  # fmt: skip


def _table(heading: str) -> list[list[str]]:
    """The rows of the first Markdown table under ``heading`` (its header and rule left out)."""
    block: list[list[str]] = []
    for line in GUIDE.split(heading + "\n", 1)[1].splitlines():
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip("|").split("|")])
        elif block:
            break
    assert block, f"no table under {heading!r}"
    return block[2:]


def _section(number: str) -> str:
    match = re.search(rf"^### {re.escape(number)} .*?(?=^### |^## )", GUIDE, re.MULTILINE | re.DOTALL)
    assert match, f"no section for lesson {number}"
    return match.group(0)


def _time_needed(stem: str) -> int | None:
    text = (ROOT / "notebooks" / f"{stem}.md").read_text(encoding="utf-8")
    match = re.search(r"\*\*Time needed:?\*\*:? about (\d+) minutes", text)
    return int(match.group(1)) if match else None


def _timings() -> dict[str, tuple[str, str]]:
    """Lesson stem -> (mark, teaching estimate) from the timing table."""
    found = {}
    for lesson, mark, _measured, teaching in _table("## Timings: measured and estimated"):
        stem = re.search(r"\(([^)]+)\.ipynb\)", lesson).group(1)
        found[stem] = (mark, teaching)
    return found


def test_every_lesson_has_a_timing_row_with_its_own_estimate_and_a_mark():
    timings = _timings()
    assert sorted(timings) == sorted(LESSONS)
    for stem, (mark, teaching) in timings.items():
        assert mark.startswith(("core", "optional")), stem
        needed = _time_needed(stem)
        if needed is not None:
            assert teaching == f"{needed} min", f"{stem}: the guide says {teaching}, the lesson {needed} minutes"


@pytest.mark.parametrize("stem", LESSONS)
def test_every_lesson_has_its_section(stem):
    number = stem[:2] if stem[0].isdigit() else "Self-check"
    section = _section(number)
    if stem != "self-check":
        for heading in HEADINGS:
            assert heading in section, f"{stem}: no {heading}"


def _items(lines: list[str]) -> list[str]:
    """The items of the Markdown bullet list the lines start with (``- ...``, indented continuation lines
    joined, spaces collapsed); the first line that is neither ends it."""
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith(" ") and line.strip() and items:
            items[-1] += " " + line.strip()
        elif line.strip():
            break
    return [" ".join(item.split()) for item in items]


def _recap(stem: str) -> list[str]:
    """The bullets of the lesson's "## Recap" cell, from the notebook JupyterLab opens and the site renders."""
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    texts = ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    (recap,) = [t for t in texts if t.startswith("## Recap")]
    return _items(recap.splitlines()[1:])


def _key_points(number: str) -> list[str]:
    """The bullets nested under "**Key points:**" in the lesson's section of the guide."""
    lines = _section(number).split("- **Key points:**", 1)[1].splitlines()[1:]
    nested = []
    for line in lines:
        if not line.startswith("  "):  # the section's next item (Timing...), or its end
            break
        nested.append(line[2:])
    return _items(nested)


@pytest.mark.parametrize("stem", [stem for stem in LESSONS if stem != "self-check"])
def test_key_points_are_the_lessons_recap_word_for_word(stem):
    points, recap = _key_points(stem[:2]), _recap(stem)
    assert recap, f"{stem} has no recap bullets"
    assert points == recap, (
        f"lesson {stem[:2]}: the guide's key points differ from the lesson's recap; the recap is the source. "
        "Put these under **Key points:** (indented two spaces):\n" + "\n".join(f"  - {item}" for item in recap)
    )


def test_the_three_hour_path_fits_and_teaches_the_core_lessons():
    rows = _table("## The three-hour path")
    minutes = sum(int(m) for _, m, _ in rows if m)
    assert minutes <= 180
    taught = {
        re.match(r"(\d\d|self-check)", what).group(1) for _, m, what in rows if re.match(r"\d\d |self-check", what)
    }
    core = {stem[:2] if stem[0].isdigit() else stem for stem, (mark, _) in _timings().items() if mark == "core"}
    assert taught == core


@pytest.mark.parametrize("name", [n for n in exercises() if not n.startswith("99-")])
def test_each_misconception_a_hint_targets_is_in_its_lessons_section(name):
    section = _section(name[:2]).split("**Misconceptions targeted**", 1)[1].split("**When short", 1)[0]
    words = " ".join(section.replace("`", "").split()).lower()
    for wrong in exercise(name).wrong:
        assert wrong.misconception.lower() in words, f"{name}: {wrong.misconception!r} is not in the guide"
