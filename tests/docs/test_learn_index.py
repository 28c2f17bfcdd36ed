"""The Learn index reads each lesson's first cell: title, "You will learn" objectives, time needed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))
from nbkit_docs.lessons import parse_first_cell  # noqa: E402

FIRST_CELL = """# 03 · Retries, attempts and dead letters

Why one. Why two.

**You will learn**

1. to follow one message through `retry_after`:
   the pending copy, the clock;
2. how `max_attempts` ends the retries;

3. what never reaches the dead-letter key.

**Time needed:** about 30 minutes.

**The path**

- [04 pipes](04-pipes.ipynb)
"""


def test_objectives_time_and_title():
    lesson = parse_first_cell("03-retries", FIRST_CELL)
    assert lesson.title == "03 · Retries, attempts and dead letters"
    assert lesson.objectives == (
        "to follow one message through `retry_after`: the pending copy, the clock;",
        "how `max_attempts` ends the retries;",
        "what never reaches the dead-letter key.",
    )
    assert lesson.time == "Time needed: about 30 minutes."


def test_without_objectives_the_opening_paragraph_stands_in():
    lesson = parse_first_cell("01-files", "# Stream files\n\nA `.ss` file is\na header and frames.\n\nMore.")
    assert lesson.objectives == () and lesson.time is None
    assert lesson.intro == "A `.ss` file is a header and frames."


def test_a_time_paragraph_over_two_lines_is_read_whole_and_its_note_kept_apart():
    """Lesson 06's time line wraps, and says which extra it needs after the time (the index once cut it)."""
    text = (
        "# 06 · Scale-out\n\n**You will learn**\n\n1. one thing.\n\n"
        "**Time needed:** about 15 minutes (the default size runs in well under a minute; on Binder add a few"
        " minutes). This needs the optional\nextra `scale` (installed on Binder): `pip install -e '.[scale]'`.\n"
    )
    lesson = parse_first_cell("06-scale", text)
    assert lesson.time == (
        "Time needed: about 15 minutes (the default size runs in well under a minute; on Binder add a few minutes)."
    )
    assert lesson.note == "This needs the optional extra `scale` (installed on Binder): `pip install -e '.[scale]'`."


def test_a_title_without_its_number_gets_the_lessons_number():
    assert parse_first_cell("08-lineage", "# What happened\n\nWhy.").title == "08 · What happened"
    assert parse_first_cell("03-retries", "# 03 · Retries\n\nWhy.").title == "03 · Retries"
