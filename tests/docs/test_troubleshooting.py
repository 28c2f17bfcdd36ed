"""The troubleshooting page shows what nbkit really does: every entry's code is run again, here.

``docs/troubleshooting.md`` lists symptoms, each with a script or shell session that reproduces it and
the output it printed. These tests run each entry in a folder of its own through the public API and the
``nbkit`` command (the page is in the scripts mode of tests/docs/page_code.py: each python block is a
process of its own, as entries kill processes), then check that (1) every output the page shows is what
the code prints now, timestamps aside, and (2) the key line each entry is about (an error, a log line, a
count) is both printed and quoted on the page. A change to a message, a default or a rule fails here,
naming the entry, instead of leaving the page wrong.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from page_code import ROOT, SCRIPTS, Output, Section, collapse_spaces, parse, run, without_time
from waiting import wait_until

PAGE = parse(ROOT / "docs" / "troubleshooting.md")
ENTRIES: dict[str, Section] = {heading: s for heading, s in PAGE.sections.items() if heading}  # ``## `` entries

#: Per entry (a piece of its heading): text the reproduction must print and the page must quote.
#: Runs of spaces count as one, so a table's column widths do not matter.
KEYS: dict[str, list[str]] = {
    "`retry()` does nothing": [
        "retry() requeues nothing on this transport (no max_attempts, no dead_letter): the message is lost",
    ],
    "RetryDestinationError": ["names no stream key for its retry copies", 'Fix: add out_retry="jobs.retry"', "exit 2"],
    "replay never sees": ["handled: [(1, 1)]", "1 2 order 1 2"],
    "attempt 57": ["56 57 57 retry_after delayed-copy", "orders 0 57 1 56 0", "final state: no further copy 1"],
    "handled twice": ['{"orders": 2}', "order 1\norder 2\norder 2\norder 3"],
    "lost after a restart": [
        "pending copies: 1 | saved: {'orders': 3}",
        "after the restart, saved: {'orders': 3}",
        "pending copies: 1 | saved: {'orders': 1}",
        "handling order 1 attempt 2",
    ],
    "retry count equals the cap": [
        "orders.dead 1 3 4",
        "retry attempts exhausted; publishing the delivery to the dead-letter destination subscription=orders "
        "attempt=3 dead_letter=orders.dead",
    ],
    "straight back": ["0 2 4 retry_after dead-letter orders.dead", "0 2 1 retry_after delayed-copy orders"],
    "`stream-sequence`": [
        "delivered: seq 2 {'stream-sequence': '2', 'x-ruststream-retry-count': '1'}",
        "1 2 {'stream-sequence': '1', 'x-ruststream-retry-count': '1'}",
    ],
    "ends at once": [
        "ERROR nbkit.subscriber: seek refused subscription=orders",
        "has no sequence 99",
        "nbkit: run summary: input ended; 0 deliveries",
    ],
    "not a complete frame": [
        "warning: cut.ss: the file might be truncated: 40 trailing bytes at offset 218 are not a complete frame",
        "UserWarning: cut.ss: ended at offset 218: 40 trailing bytes are not a complete frame",
        "| orders | 3 | 0] order 4",
    ],
    "damaged file": [
        "nbkit: bad.ss, byte offset 476: payload checksum mismatch in the frame of 'orders' seq 5",
        "lost 'orders' seq 5..11 (7 messages",
        "wrote 33 messages to fixed.ss",
    ],
    "Every `ack()`": [
        'WARNING nbkit.dispatch: ack / nack failed subscription=orders error="acknowledgement is not supported by '
        'this broker" stream_key=orders seq=2 attempt=1',
    ],
}


def _heading(piece: str) -> str:
    return next(h for h in ENTRIES if piece in h)


def _run_entry(section: Section, folder: Path) -> list[Output]:
    """An entry's run blocks with what each printed (its file blocks are written, not listed)."""
    folder.mkdir()
    return [output for output in run(section.blocks, folder, SCRIPTS) if not output.block.file]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Output]]:
    """Every entry run once, three at a time (each is mostly waiting for child processes)."""
    assert PAGE.mode is SCRIPTS, "docs/troubleshooting.md must say '% run: scripts': its entries kill processes"
    base = tmp_path_factory.mktemp("troubleshooting")
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {h: pool.submit(_run_entry, s, base / f"entry{i}") for i, (h, s) in enumerate(ENTRIES.items())}
        return {h: f.result() for h, f in futures.items()}


def test_the_page_has_at_least_twelve_entries_each_with_symptom_cause_fix_and_shown_output():
    assert not PAGE.problems, "\n".join(f"troubleshooting.md: {p}" for p in PAGE.problems)
    assert PAGE.mode is SCRIPTS
    assert len(ENTRIES) >= 12, list(ENTRIES)
    for heading, section in ENTRIES.items():
        for part in ("**Symptom.**", "**Cause.**", "**Fix.**"):
            assert part in section.text, f"{heading!r}: no {part}"
        assert any(not b.file for b in section.runs), f"{heading!r}: nothing to run"
        assert any((b.expected or "").strip() for b in section.runs), f"{heading!r}: no output shown"
    assert set(ENTRIES) == {_heading(piece) for piece in KEYS}, "an entry has no key text in KEYS"


@pytest.mark.parametrize("heading", list(ENTRIES))
def test_each_output_shown_is_what_the_code_prints_now(runs, heading):
    shown = [(block, printed) for block, printed in runs[heading] if block.expected is not None]
    assert shown, f"{heading!r}: no run block is followed by its output"
    for block, printed in shown:
        assert without_time(printed) == without_time(block.expected), (
            f"{heading!r} (line {block.line}): the page shows\n{block.expected}\nbut the code now prints\n{printed}"
        )


@pytest.mark.parametrize("piece", list(KEYS))
def test_each_entry_reproduces_its_symptom_and_the_page_quotes_it(runs, piece):
    heading = _heading(piece)
    printed = collapse_spaces("".join(output.printed for output in runs[heading]))
    page = collapse_spaces(ENTRIES[heading].text)
    for key in KEYS[piece]:
        assert collapse_spaces(key) in printed, f"{heading!r}: the reproduction no longer prints {key!r}:\n{printed}"
        assert collapse_spaces(key) in page, f"{heading!r}: the page does not quote {key!r}"


def test_the_quiet_run_shows_no_ack_warning_and_the_fixed_redrive_gets_its_attempts(runs):
    ack = runs[_heading("Every `ack()`")][-1].printed.splitlines()
    assert sum("ack / nack failed" in line for line in ack) == 2, ack  # two messages, default level
    assert ack[-1].startswith("nbkit: run summary:") and ack[-2].startswith("nbkit: run summary:"), ack
    redrive = runs[_heading("straight back")][0].printed
    kept, reset = redrive.split("keep_count = False")
    assert "dead-letter" in kept and "dead-letter" not in reset


def test_the_runner_sees_a_broken_example(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text(
        "% run: scripts\n\n## entry\n\n```python\nprint('one')\n```\n\n```text\ntwo\n```\n", encoding="utf-8"
    )
    ((block, printed),) = _run_entry(parse(page).sections["entry"], tmp_path / "run")
    assert printed == "one\n" and block.expected == "two"
    assert without_time(printed) != without_time(block.expected)


def _alive(pid: int) -> bool:
    """True while the process runs (a killed one waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def test_scripts_mode_runs_each_section_alone_and_each_python_block_as_a_process(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text(
        "% run: scripts (blocks exit hard)\n\n## one\n\n```python\n# mod.py\nX = 41\n```\n\n"
        "```python\nimport os, mod\nprint(mod.X + 1, flush=True)\nos._exit(3)\n```\n\n```text\n42\n```\n\n"
        "```console\n$ python -c 'import mod; print(mod.X)'; echo \"exit $?\"\n```\n\n```text\n41\nexit 0\n```\n\n"
        "```bash\nsleep 300 > /dev/null 2>&1 &\necho $! > sleeper\necho at   2024-01-01T00:00:00Z\n```\n\n"
        "```text\nat 2026-12-04T17:46:08.888Z\n```\n\n## two\n\n```bash\nls\n```\n",
        encoding="utf-8",
    )
    parsed = parse(page)
    assert not parsed.problems and parsed.mode is SCRIPTS
    assert [(heading, [b.file or b.lang for b in blocks]) for heading, blocks in parsed.units()] == [
        ("one", ["mod.py", "python", "console", "bash"]),
        ("two", ["bash"]),
    ]
    outputs = {heading: _run_entry(parsed.sections[heading], tmp_path / heading) for heading in ("one", "two")}
    assert [printed for _, printed in outputs["one"]] == ["42\n", "41\nexit 0\n", "at 2024-01-01T00:00:00Z\n"]
    assert all(SCRIPTS.compare(block.expected, printed) for block, printed in outputs["one"])
    assert outputs["two"][0].printed == ""  # a folder of its own: nothing of section one
    sleeper = int((tmp_path / "one" / "sleeper").read_text())
    wait_until(lambda: not _alive(sleeper), what="the section's sleeper to be killed when its run ended")
