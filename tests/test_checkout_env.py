"""The ``nbkit`` command the tests put on PATH is never open for writing in the test process.

A child forked from another thread inherits every descriptor open at that moment; had this process held the
script open for writing, running it would fail with "Text file busy" (ETXTBSY) while that child lives. CI
failed so once. A test that only forks and runs the script catches that race now and then; the audit events
below catch the cause every time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from checkout_env import write_nbkit_command

_OPENED: list[tuple[str, object, int]] = []
_WATCH: list[Path] = []  # the script whose opens the audit hook records (empty: none)
_HOOKED: list[object] = []  # the hook, once added


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCH and str(args[0]) == str(_WATCH[0]):
        _OPENED.append((str(args[0]), args[1], int(args[2]) if isinstance(args[2], int) else 0))


def test_this_process_never_opens_the_nbkit_command_for_writing(tmp_path: Path) -> None:
    """The audit events of this process show no open of the script for writing, so no child it forks can
    inherit such a descriptor (the old in-process ``write_text`` opened it with mode "w", and this failed)."""
    if _record_opens not in _HOOKED:
        sys.addaudithook(_record_opens)  # an audit hook stays for the process: it records only while watching
        _HOOKED.append(_record_opens)
    folder = tmp_path / "bin"
    _OPENED.clear()
    _WATCH[:] = [folder / "nbkit"]
    try:
        write_nbkit_command(folder)
    finally:
        _WATCH.clear()
    writes = [
        (path, mode, flags)
        for path, mode, flags in _OPENED
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or flags & (os.O_WRONLY | os.O_RDWR)
    ]
    assert not writes, writes
    assert os.access(folder / "nbkit", os.X_OK)
