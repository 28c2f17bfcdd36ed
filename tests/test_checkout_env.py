"""The ``nbkit`` command the tests put on PATH runs even while this process forks children meanwhile."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from checkout_env import checkout_env, write_nbkit_command


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_the_nbkit_command_runs_while_another_thread_forks(tmp_path: Path) -> None:
    """Children forked from another thread hold copies of every descriptor this process has open. Had this
    process written the script itself, a child forked during the write would keep it open for writing, and
    running it would fail with "Text file busy" (3 runs in 30 did, so written). Written by a child process,
    it runs every time."""
    stop = threading.Event()

    def fork_children() -> None:
        while not stop.is_set():
            pid = os.fork()
            if pid == 0:  # a child that does not exec: it keeps what it inherited until it exits
                time.sleep(0.2)
                os._exit(0)
            threading.Thread(target=os.waitpid, args=(pid, 0), daemon=True).start()
            time.sleep(0.005)

    forker = threading.Thread(target=fork_children, daemon=True)
    forker.start()
    try:
        for n in range(10):
            script = write_nbkit_command(tmp_path / f"bin{n}")
            done = subprocess.run(
                [str(script), "--version"], capture_output=True, text=True, env=checkout_env(), timeout=120
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("nbkit"), done.stdout
    finally:
        stop.set()
        forker.join()


_OPENED: list[tuple[str, object, int]] = []
_WATCH: list[Path] = []  # the script whose opens the audit hook records (empty: none)
_HOOKED: list[object] = []  # the hook, once added


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCH and str(args[0]) == str(_WATCH[0]):
        _OPENED.append((str(args[0]), args[1], int(args[2]) if isinstance(args[2], int) else 0))


def test_this_process_never_opens_the_nbkit_command_for_writing(tmp_path: Path) -> None:
    """Deterministic half of the test above: the audit events of this process show no open of the script
    for writing, so no child it forks can ever inherit such a descriptor (the old in-process write_text
    opened it with mode "w")."""
    if _record_opens not in _HOOKED:
        sys.addaudithook(_record_opens)  # an audit hook stays for the process: it records only while watching
        _HOOKED.append(_record_opens)
    folder = tmp_path / "bin"
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
