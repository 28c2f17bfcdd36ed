"""The troubleshooting page shows what nbkit really does: every entry's code is run again, here.

``docs/troubleshooting.md`` lists symptoms, each with a script or shell session that reproduces it and
the output it printed. These tests run each entry in a folder of its own through the public API and the
``nbkit`` command (tests/docs/troubleshooting_page.py), then check that (1) every output the page shows
is what the code prints now, timestamps aside, and (2) the key line each entry is about (an error, a
log line, a count) is both printed and quoted on the page. A change to a message, a default or a rule
fails here, naming the entry, instead of leaving the page wrong.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from troubleshooting_page import Run, entries, run_entry

ENTRIES = entries()

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
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?|\(\d{13} ms\)")


def _flat(text: str) -> str:
    """Runs of spaces and tabs as one space (newlines kept)."""
    return re.sub(r"[ \t]+", " ", text)


def _same_but_time(text: str) -> str:
    """The text with every timestamp replaced and spacing collapsed: what must not change between runs."""
    return _flat(_STAMP.sub("<time>", text)).strip()


def _heading(piece: str) -> str:
    return next(h for h in ENTRIES if piece in h)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Run]]:
    """Every entry run once, three at a time (each is mostly waiting for child processes)."""
    base = tmp_path_factory.mktemp("troubleshooting")
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {h: pool.submit(run_entry, body, base / f"entry{i}") for i, (h, body) in enumerate(ENTRIES.items())}
        return {h: f.result() for h, f in futures.items()}


def test_the_page_has_at_least_twelve_entries_each_with_symptom_cause_fix_and_shown_output():
    assert len(ENTRIES) >= 12, list(ENTRIES)
    for heading, body in ENTRIES.items():
        for part in ("**Symptom.**", "**Cause.**", "**Fix.**"):
            assert part in body, f"{heading!r}: no {part}"
        assert re.search(r"```(?:python|bash)\n", body), f"{heading!r}: nothing to run"
        assert re.search(r"```text\n.+?```", body, re.S), f"{heading!r}: no output shown"
    assert set(ENTRIES) == {_heading(piece) for piece in KEYS}, "an entry has no key text in KEYS"


@pytest.mark.parametrize("heading", list(ENTRIES))
def test_each_output_shown_is_what_the_code_prints_now(runs, heading):
    shown = [run for run in runs[heading] if run.shown]
    assert shown, f"{heading!r}: no run block is followed by its output"
    for run in shown:
        assert _same_but_time(run.printed) == _same_but_time(run.shown), (
            f"{heading!r}: the page shows\n{run.shown}\nbut the code now prints\n{run.printed}"
        )


@pytest.mark.parametrize("piece", list(KEYS))
def test_each_entry_reproduces_its_symptom_and_the_page_quotes_it(runs, piece):
    heading = _heading(piece)
    printed = _flat("".join(run.printed for run in runs[heading]))
    page = _flat(ENTRIES[heading])
    for key in KEYS[piece]:
        assert _flat(key) in printed, f"{heading!r}: the reproduction no longer prints {key!r}:\n{printed}"
        assert _flat(key) in page, f"{heading!r}: the page does not quote {key!r}"


def test_the_quiet_run_shows_no_ack_warning_and_the_fixed_redrive_gets_its_attempts(runs):
    ack = runs[_heading("Every `ack()`")][-1].printed.splitlines()
    assert sum("ack / nack failed" in line for line in ack) == 2, ack  # two messages, default level
    assert ack[-1].startswith("nbkit: run summary:") and ack[-2].startswith("nbkit: run summary:"), ack
    redrive = runs[_heading("straight back")][0].printed
    kept, reset = redrive.split("keep_count = False")
    assert "dead-letter" in kept and "dead-letter" not in reset


def test_the_runner_sees_a_broken_example(tmp_path: Path):
    body = "```python\nprint('one')\n```\n\n```text\ntwo\n```\n"
    (run,) = run_entry(body, tmp_path)
    assert run.printed == "one\n" and run.shown == "two\n"
    assert _same_but_time(run.printed) != _same_but_time(run.shown)
