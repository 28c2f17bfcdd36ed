"""Run the code of a how-to page and compare what it prints with the output the page shows.

A how-to page (``docs/howto/*.md``) is a sequence of fenced blocks, and this module gives each kind a
meaning (``tests/docs/test_howto.py`` applies it to every page; the rules are also in
``docs/development.md``):

- ```` ```python ````: run in one namespace per page, in a fresh temporary folder that is the current
  directory, as a notebook cell runs: what it prints, then the ``repr`` of its last line if that is an
  expression whose value is not None.
- ```` ```console ````: ``$ COMMAND`` lines (a line ending in ``\\`` continues on the next), each run by
  bash in that folder with stdout and stderr together, as a terminal shows them. The exit status is not
  checked: what a command prints is (a page shows a status with ``; echo "exit $?"``).
- ```` ```{code-block} python ```` with ``:caption: NAME`` (a file name): the file the reader saves, shown
  under its name; the test writes it to ``NAME`` in the folder when the page reaches it.
- ```` ```text ```` right after a python or console block (only blank lines between): the output it must print.
  A code block with no such block after it runs and may print anything.
- A MyST comment ``% not tested: WHY`` on the line before a block: the block is shown, never run or
  compared (a command that runs until Ctrl-C, a JupyterLab step). Any other fenced block with a
  language, and any ``text`` block that is not an output, must carry it: a page cannot show unchecked
  code by accident. Directives (```` ```{toctree} ````, ```` ```{figure} ````) are not code.
- ``% requires: dask, distributed`` anywhere on the page: the modules it needs (the test skips the page
  without them).

Matching, after the trailing whitespace of every line and the blank lines around the whole output are
removed: a shown line that is ``...`` alone stands for any number of lines (none included), and ``...``
inside a shown line for any text within that line (a time of day, a temporary path). Everything else
must be equal.

``python tests/docs/howto_blocks.py [--fill] docs/howto/PAGE.md`` runs a page and prints each block's
output, for writing one (``--fill`` also writes the outputs into the page's empty ``text`` blocks).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = ("python", "console")
CAPTION = re.compile(r"^:caption:\s*(\S+)\s*$")
FENCE = re.compile(r"^(`{3,})\s*([^`\s]*)\s*(.*)$")
NOT_TESTED = re.compile(r"^%\s*not tested:\s*\S")
REQUIRES = re.compile(r"^%\s*requires:\s*(.+)$", re.M)
COMMAND_TIMEOUT = 60


@dataclass
class Block:
    """One fenced block: its language, its text, its first line (1-based), and what follows it."""

    lang: str
    code: str
    line: int
    not_tested: bool = False
    expected: str | None = None  # the text block after a run block
    expected_line: int = 0  # its opening fence (1-based)
    file: str | None = None  # a file block's name (its ``:caption:``)


@dataclass
class Page:
    """A how-to page's blocks in order, and the modules it needs."""

    path: Path
    blocks: list[Block] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def runs(self) -> list[Block]:
        """The blocks that run (python, console, and file blocks: written), unless marked ``% not tested``."""
        return [b for b in self.blocks if (b.lang in RUN or b.file) and not b.not_tested]


def parse(path: Path) -> Page:
    """The blocks of a Markdown page, each output block attached to the run block before it."""
    text = path.read_text(encoding="utf-8")
    page = Page(path, requires=[m.strip() for r in REQUIRES.findall(text) for m in r.split(",") if m.strip()])
    lines = text.splitlines()
    i = 0
    previous: Block | None = None  # the last block, while only blank lines follow it
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = None
            i += 1
            continue
        ticks, lang = match.group(1), match.group(2)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        if end is None:
            page.problems.append(f"line {i + 1}: the block is never closed")
            break
        marked = i > 0 and bool(NOT_TESTED.match(lines[i - 1]))
        block = Block(lang, "\n".join(lines[i + 1 : end]), i + 1, not_tested=marked)
        if lang == "{code-block}" and not marked:
            block.file, block.code = _file_block(lines[i + 1 : end])
            if block.file is None:
                page.problems.append(f"line {i + 1}: a code-block with no ':caption: FILE' is not run")
        if lang == "text" and previous is not None and previous.lang in RUN and not previous.not_tested:
            previous.expected, previous.expected_line = block.code, block.line
            previous = None
        elif lang.startswith("{") or marked or lang in RUN:
            page.blocks.append(block)
            previous = block
        else:
            page.problems.append(
                f"line {i + 1}: a ```{lang or '(no language)'} block that is neither run nor an output: "
                "mark it with '% not tested: why' on the line before"
            )
            previous = None
        i = end + 1
    return page


def _file_block(body: list[str]) -> tuple[str | None, str]:
    """A ``{code-block}`` directive's ``:caption:`` (a file name, or None) and its code after the options."""
    name = None
    while body and body[0].startswith(":"):
        caption = CAPTION.match(body[0])
        if caption:
            name = caption.group(1)
        body = body[1:]
    while body and not body[0].strip():
        body = body[1:]
    return name, "\n".join(body) + "\n"


def commands(block: Block) -> Iterator[str]:
    """The commands of a console block: ``$ `` lines, with their ``\\`` continuation lines."""
    pending: list[str] = []
    for number, line in enumerate(block.code.splitlines(), block.line + 1):
        if pending:
            pending.append(line)
        elif line.startswith("$ "):
            pending = [line[2:]]
        elif line.strip():
            raise ValueError(f"line {number}: a console block holds only '$ command' lines; output goes below")
        if pending and not pending[-1].endswith("\\"):
            yield "\n".join(pending)
            pending = []
    if pending:
        yield "\n".join(pending)


def command_env() -> dict[str, str]:
    """The environment of console commands: ``nbkit`` is this checkout's, run by this interpreter.

    A ``nbkit`` script in a folder of its own comes first on PATH (``python -m nbkit``, with this
    checkout first on PYTHONPATH), so the pages test this tree whether or not it is pip-installed.
    The note that the pure-Python core runs is silenced where no compiled core is built (a checkout
    without ``build_ext --inplace``): it says nothing about the page.
    """
    from nbkit.wire import core

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([_nbkit_bin(), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(NO_COLOR="1", COLUMNS="120", MPLBACKEND="Agg", TZ="UTC", PYTHONHASHSEED="0")
    if core.CORE != "compiled":
        env["NBKIT_PURE_PYTHON"] = "1"
    return env


@functools.cache
def _nbkit_bin() -> str:
    """A temporary folder holding an ``nbkit`` script that runs ``python -m nbkit`` with this interpreter."""
    folder = Path(tempfile.mkdtemp(prefix="howto-bin-"))
    script = folder / "nbkit"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m nbkit "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return str(folder)


def run_console(block: Block, folder: Path, groups: list[int] | None = None) -> str:
    """What the commands of a console block print, stdout and stderr together, one after the other.

    Each command runs in a process group of its own, whose id is added to ``groups``: a service a page
    starts in the background (``nbkit run ... &``) can then be stopped when the page ends, even if the
    page failed before it stopped it.
    """
    out = []
    env = command_env()
    for command in commands(block):
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        if groups is not None:
            groups.append(process.pid)
        try:
            out.append(process.communicate(timeout=COMMAND_TIMEOUT)[0])
        except subprocess.TimeoutExpired:
            stop_groups([process.pid])
            process.communicate()
            raise
    return "".join(out)


def stop_groups(groups: list[int]) -> None:
    """Kill what is left of the process groups the page's commands started (only those)."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def run_python(block: Block, namespace: dict[str, object]) -> str:
    """What a python block prints, then the repr of its last expression (as a notebook cell shows it)."""
    tree = ast.parse(block.code, filename=f"<block at line {block.line}>")
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(tree, f"<block at line {block.line}>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), f"<block at line {block.line}>", "eval"), namespace)
            if value is not None:
                print(repr(value))
    return buffer.getvalue()


def normalise(text: str) -> list[str]:
    """The lines of an output without trailing whitespace, and without blank lines around them."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def pattern(expected: str) -> re.Pattern[str]:
    """A regular expression for a shown output: a ``...`` line is any lines, ``...`` in a line any text."""
    parts = []
    for line in normalise(expected):
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def matches(expected: str, actual: str) -> bool:
    """True when ``actual`` is what ``expected`` shows, under the rules of this module's docstring."""
    lines = normalise(actual)
    return pattern(expected).fullmatch("".join(line + "\n" for line in lines)) is not None


def run_page(page: Page, folder: Path) -> Iterator[tuple[Block, str]]:
    """Run a page's blocks in order in ``folder`` (the current directory meanwhile); yield each output."""
    namespace: dict[str, object] = {"__name__": "__howto__"}
    groups: list[int] = []
    old = Path.cwd()
    os.chdir(folder)
    sys.path.insert(0, str(folder))  # a page's own modules import, as from a notebook in that folder
    modules = set(sys.modules)
    try:
        for block in page.runs:
            if block.file:
                (folder / block.file).write_text(block.code, encoding="utf-8")
                yield block, ""
            elif block.lang == "python":
                yield block, run_python(block, namespace)
            else:
                yield block, run_console(block, folder, groups)
    finally:
        stop_groups(groups)
        os.chdir(old)
        sys.path.remove(str(folder))
        for name in set(sys.modules) - modules:  # the page's modules: the next page may have its own
            if str(folder) in str(getattr(sys.modules[name], "__file__", None) or ""):
                del sys.modules[name]
        with contextlib.suppress(ImportError):
            import matplotlib.pyplot as plt

            plt.close("all")


def main(argv: list[str]) -> int:
    """Print each run block of a page with its output, in a fresh temporary folder.

    With ``--fill``, also write each output into the page's empty output blocks (a new page's
    ```` ```text ```` blocks left empty): what to trim with ``...`` and check by eye afterwards.
    """
    import matplotlib

    matplotlib.use("Agg")
    sys.path.insert(0, str(ROOT))
    path = Path(argv[-1])
    page = parse(path)
    for problem in page.problems:
        print("PROBLEM", problem)
    fills: dict[int, list[str]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for block, output in run_page(page, Path(folder)):
            shown = block.expected
            state = "no output shown" if shown is None else ("ok" if matches(shown, output) else "DIFFERS")
            print(f"=== line {block.line} ({block.lang}): {state}")
            print("\n".join(normalise(output)))
            if shown is not None and not shown.strip():
                fills[block.expected_line] = normalise(output)
    if "--fill" in argv and fills:
        lines = path.read_text(encoding="utf-8").splitlines()
        for start in sorted(fills, reverse=True):  # the fence line; its empty body ends at the next line
            lines[start:start] = fills[start]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
