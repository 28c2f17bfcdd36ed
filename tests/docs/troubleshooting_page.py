"""Run the code of ``docs/troubleshooting.md`` the way a reader would, entry by entry.

The page is a list of entries (``## `` headings). In each, fenced blocks are run in order in a fresh
folder of their own:

- a ```` ```python ```` block whose first line is ``# NAME.py`` is a module the entry's commands import
  (written to ``NAME.py``, not run);
- any other ```` ```python ```` block is a script, run with ``python``;
- a ```` ```bash ```` block is run with ``bash``;
- a ```` ```text ```` block right after a run block is the output the page shows for it.

Output is stdout and stderr together, unbuffered, as a terminal shows them. ``run_entry`` returns what
each run block printed beside what the page shows, so tests/docs/test_troubleshooting.py can check
both for the same key text.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```$", re.S | re.M)
_MODULE = re.compile(r"#\s*([\w.]+\.py)\s*$")


@dataclass(frozen=True)
class Run:
    """One run block of an entry: its language and code, what it printed, and what the page shows."""

    language: str
    code: str
    printed: str
    shown: str


def entries(page: Path = PAGE) -> dict[str, str]:
    """``{heading: body}`` for every ``## `` entry of the page, in page order."""
    parts = re.split(r"^## (.+)$", page.read_text(encoding="utf-8"), flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def environment() -> dict[str, str]:
    """A reader's shell: this checkout's nbkit first on the path, unbuffered output, UTC.

    The pure-Python core is named unless the caller chose a core, so a checkout without the compiled
    core prints no note about it; both cores print the same output.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(PYTHONUNBUFFERED="1", TZ="UTC", NBKIT_PURE_PYTHON=env.get("NBKIT_PURE_PYTHON", "1"))
    env.pop("COLUMNS", None)
    return env


def run_entry(body: str, folder: Path, *, timeout: float = 60) -> list[Run]:
    """Run the entry's blocks in ``folder`` (created); one :class:`Run` per run block."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = [(m.group(1), m.group(2)) for m in _FENCE.finditer(body)]
    runs: list[Run] = []
    env = environment()
    for index, (language, code) in enumerate(blocks):
        module = _MODULE.match(code.splitlines()[0]) if language == "python" and code.strip() else None
        if module:
            (folder / module.group(1)).write_text(code, encoding="utf-8")
            continue
        if language not in ("python", "bash"):
            continue
        command = [sys.executable, "-"] if language == "python" else ["bash", "-s"]
        done = subprocess.run(
            command, input=code, cwd=folder, env=env, text=True, timeout=timeout,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        following = blocks[index + 1] if index + 1 < len(blocks) else ("", "")
        shown = following[1] if following[0] == "text" else ""
        runs.append(Run(language, code, done.stdout, shown))
    return runs


if __name__ == "__main__":  # print every entry's real output, to paste into the page
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for number, (heading, body) in enumerate(entries().items()):
            if len(sys.argv) > 1 and not any(arg.lower() in heading.lower() for arg in sys.argv[1:]):
                continue
            print(f"=== {heading}")
            for run in run_entry(body, Path(tmp) / str(number)):
                print(f"--- {run.language}\n{run.printed}", end="" if run.printed.endswith("\n") else "\n")
