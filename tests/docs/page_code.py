"""Run the code a documentation page shows, and compare what it prints with the output the page shows.

One parser reads a page's fenced blocks and markers, and one runner runs them in the mode the page
names. ``tests/docs/test_howto.py`` applies it to every how-to page (``docs/howto/*.md``, notebook mode)
and ``tests/docs/test_troubleshooting.py`` to ``docs/troubleshooting.md`` (scripts mode); the rules for
writing a page are also in ``docs/development.md``.

Blocks, the same on every page:

- ```` ```python ````: Python code, run as the page's mode says (below).
- ```` ```python ```` whose first line is ``# NAME.py``, and ```` ```{code-block} python ```` with
  ``:caption: NAME``: a file the reader saves (a module the page's other code imports). It is written to
  ``NAME`` in the run's folder when the run reaches it, and never run.
- ```` ```console ````: ``$ COMMAND`` lines only (a line ending in ``\\`` goes on on the next), each run
  by ``bash -c``.
- ```` ```bash ````: a shell script, run whole by ``bash -s`` (the script on stdin).
- ```` ```text ```` right after a python, console or bash block (only blank lines between): the output it
  must print. A run block with no such block after it runs and may print anything.
- ``% not tested: WHY`` (a MyST comment) on the line before a block: the block is shown, never run or
  compared (a command that runs until Ctrl-C, a JupyterLab step). Any other fenced block with a
  language, and any ``text`` block that is no block's output, must carry it: a page cannot show
  unchecked code by accident. Directives (```` ```{toctree} ````, ```` ```{figure} ````) are not code.

Page markers, MyST comments on a line of their own outside the blocks (readers do not see them):

- ``% requires: dask, distributed``: the modules the page needs (its test skips the page without them).
- ``% run: scripts (WHY)``: the page's mode, the reason after it free text. A page without this marker
  is in ``notebook`` mode.

The two modes (:data:`NOTEBOOK`, :data:`SCRIPTS`) differ in three things only, and the page chooses:

- ``notebook`` (the how-to pages, which a reader follows top to bottom): the whole page is one run, in
  one folder that is the current directory meanwhile (and first on ``sys.path``, so the page's own
  modules import). Python blocks run in this process, in one namespace, as notebook cells: what they
  print, then the ``repr`` of the last line when that is an expression whose value is not None. Outputs
  compare by :func:`matches`. Not thread-safe (the current directory is the process's).
- ``scripts`` (the troubleshooting page, whose entries crash and kill processes): each ``## `` section is
  a run of its own, in a folder of its own; each python block is a process of its own (``python -``,
  the code on stdin), so an entry may ``os._exit`` or kill what it started without touching the test's
  process. Nothing of this process changes, so sections run side by side in threads. Outputs compare
  by :func:`same_but_time`.

In both modes every process (a console command, a bash or python script) runs in the run's folder in
a session of its own, with stdout and stderr together, unbuffered, as a terminal shows them, in the
environment of :func:`environment` (this checkout's ``nbkit``, UTC); its exit status is not checked (a
page shows one with ``; echo "exit $?"``), and each may take :data:`TIMEOUT` seconds. What is left of
those sessions is killed when the run ends, even a failed one (a service a page started with ``&``).

``python tests/docs/page_code.py [--fill] PAGE.md [WORD ...]`` runs a page (only the sections whose
heading holds a WORD, when given) and prints each run block's output with its verdict, for writing a
page: ``--fill`` also writes the outputs into the page's empty ``text`` blocks.
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
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from checkout_env import write_nbkit_command

ROOT = Path(__file__).resolve().parents[2]
RUN = ("python", "console", "bash")  # the languages that run (a python file block is written instead)
TIMEOUT = 60  # seconds, for each process
FENCE = re.compile(r"^(`{3,})\s*([^`\s]*)\s*(.*)$")
HEADING = re.compile(r"^## (.+)$")
CAPTION = re.compile(r"^:caption:\s*(\S+)\s*$")
MODULE = re.compile(r"#\s*([\w.]+\.py)\s*$")  # the first line of a python block that is a file
NOT_TESTED = re.compile(r"^%\s*not tested:\s*\S")
REQUIRES = re.compile(r"^%\s*requires:\s*(.+)$")
MODE = re.compile(r"^%\s*run:\s*(\S*)")  # the mode's name, then maybe why


# -- comparing an output with the one a page shows --------------------------------------------------
def normalise(text: str) -> list[str]:
    """The lines of an output without trailing whitespace, and without blank lines around them."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def pattern(shown: str) -> re.Pattern[str]:
    """A regular expression for a shown output: a ``...`` line is any lines, ``...`` in a line any text."""
    parts = []
    for line in normalise(shown):
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def matches(shown: str, printed: str) -> bool:
    """Notebook mode's comparison: ``printed`` is what ``shown`` shows, ``...`` standing for what varies.

    After the trailing whitespace of every line and the blank lines around the whole output are removed,
    a shown line that is ``...`` alone stands for any number of lines (none included), and ``...``
    inside a shown line for any text within that line (a time of day, a temporary path). Everything
    else must be equal.
    """
    lines = normalise(printed)
    return pattern(shown).fullmatch("".join(line + "\n" for line in lines)) is not None


STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z?|\(\d{13} ms\)")


def collapse_spaces(text: str) -> str:
    """Runs of spaces and tabs as one space (newlines kept): a table's column widths do not count."""
    return re.sub(r"[ \t]+", " ", text)


def without_time(text: str) -> str:
    """The text with every timestamp replaced and spacing collapsed: what must not change between runs."""
    return collapse_spaces(STAMP.sub("<time>", text)).strip()


def same_but_time(shown: str, printed: str) -> bool:
    """Scripts mode's comparison: equal once timestamps are replaced, spacing collapsed and ends stripped.

    A page in scripts mode shows real output as it was printed, timestamps included (an ISO time, or a
    13-digit ``(... ms)``), so those are the only part that may differ.
    """
    return without_time(shown) == without_time(printed)


@dataclass(frozen=True)
class Mode:
    """How a page's code runs (see the module docstring): its unit, its python blocks, its comparison."""

    name: str
    cells: bool  # python blocks run in this process as cells of one namespace (else: a process each)
    per_section: bool  # each ``## `` section is a run of its own (else: the whole page is one)
    compare: Callable[[str, str], bool]  # (shown, printed) -> does the output match


NOTEBOOK = Mode("notebook", cells=True, per_section=False, compare=matches)
SCRIPTS = Mode("scripts", cells=False, per_section=True, compare=same_but_time)
MODES = {mode.name: mode for mode in (NOTEBOOK, SCRIPTS)}


# -- reading a page -------------------------------------------------------------------------------------
@dataclass
class Block:
    """One fenced block: its language, its text, its first line (1-based), and what follows it."""

    lang: str
    code: str
    line: int
    section: str = ""  # the heading of the ``## `` section it is in ("" before the first)
    not_tested: bool = False
    expected: str | None = None  # the text block after a run block: its output
    expected_line: int = 0  # that text block's opening fence (1-based)
    file: str | None = None  # a file block's name (``:caption: NAME`` or a first line ``# NAME.py``)

    @property
    def runs(self) -> bool:
        """True when a run reaches this block: it runs, or it is a file written, and is not marked."""
        return not self.not_tested and (self.file is not None or self.lang in RUN)


@dataclass
class Section:
    """A ``## `` section of a page ("" for what comes before the first): its Markdown and its blocks."""

    heading: str
    line: int
    text: str = ""
    blocks: list[Block] = field(default_factory=list)

    @property
    def runs(self) -> list[Block]:
        """The blocks a run of this section reaches, in page order."""
        return [b for b in self.blocks if b.runs]


@dataclass
class Page:
    """A page's blocks in order, its sections, its mode, the modules it needs, and what is wrong in it."""

    path: Path
    mode: Mode = NOTEBOOK
    blocks: list[Block] = field(default_factory=list)
    sections: dict[str, Section] = field(default_factory=dict)
    requires: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def runs(self) -> list[Block]:
        """The blocks a run reaches (python, console, bash, and file blocks: written), unless not tested."""
        return [b for b in self.blocks if b.runs]

    def units(self) -> list[tuple[str, list[Block]]]:
        """The page's runs as its mode cuts them: ``(heading, blocks)``, each run in a folder of its own.

        Notebook mode: one, the whole page (heading ""). Scripts mode: one per ``## `` section, and one
        for the blocks before the first heading if there are any.
        """
        if not self.mode.per_section:
            return [("", self.runs)]
        return [(s.heading, s.runs) for s in self.sections.values() if s.heading or s.runs]


def parse(path: Path) -> Page:
    """The blocks, sections and markers of a Markdown page; each output attached to its run block."""
    page = Page(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    section = page.sections.setdefault("", Section("", 0))
    start = 0  # the first line of the current section's text
    i = 0
    previous: Block | None = None  # the last run block, while only blank lines follow it
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            previous = _read_line(page, lines[i], i, previous)
            heading = HEADING.match(lines[i])
            if heading:
                section.text = "\n".join(lines[start:i])
                section = page.sections.setdefault(heading.group(1).strip(), Section(heading.group(1).strip(), i + 1))
                start = i + 1
            i += 1
            continue
        ticks, lang = match.group(1), match.group(2)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == ticks), None)
        if end is None:
            page.problems.append(f"line {i + 1}: the block is never closed")
            break
        marked = i > 0 and bool(NOT_TESTED.match(lines[i - 1]))
        block = Block(lang, "\n".join(lines[i + 1 : end]), i + 1, section.heading, not_tested=marked)
        if not marked:
            _read_file_name(page, block, lines[i + 1 : end])
        if lang == "text" and previous is not None:
            previous.expected, previous.expected_line = block.code, block.line
            previous = None
        elif lang.startswith("{") or marked or lang in RUN:
            page.blocks.append(block)
            section.blocks.append(block)
            previous = block if block.runs and not block.file else None
            if lang == "console" and not marked:
                try:
                    list(commands(block))
                except ValueError as error:  # a problem now; an error if it is run anyway
                    page.problems.append(str(error))
        else:
            page.problems.append(
                f"line {i + 1}: a ```{lang or '(no language)'} block that is neither run nor an output: "
                "mark it with '% not tested: why' on the line before"
            )
            previous = None
        i = end + 1
    section.text = "\n".join(lines[start:])
    return page


def _read_line(page: Page, line: str, number: int, previous: Block | None) -> Block | None:
    """Read a page marker on a line outside the blocks; the run block an output may still follow."""
    requires = REQUIRES.match(line)
    if requires:
        page.requires += [m.strip() for m in requires.group(1).split(",") if m.strip()]
    mode = MODE.match(line)
    if mode:
        if mode.group(1) in MODES:
            page.mode = MODES[mode.group(1)]
        else:
            page.problems.append(f"line {number + 1}: no mode {mode.group(1)!r} (one of {', '.join(MODES)})")
    return previous if not line.strip() else None


def _read_file_name(page: Page, block: Block, body: list[str]) -> None:
    """Make ``block`` a file block if it is one: a captioned ``{code-block}``, or ``# NAME.py`` python."""
    if block.lang == "{code-block}":
        name = None
        while body and body[0].startswith(":"):
            caption = CAPTION.match(body[0])
            if caption:
                name = caption.group(1)
            body = body[1:]
        while body and not body[0].strip():
            body = body[1:]
        block.file, block.code = name, "\n".join(body)
        if name is None:
            page.problems.append(f"line {block.line}: a code-block with no ':caption: FILE' is not run")
    elif block.lang == "python" and block.code.strip():
        module = MODULE.match(block.code.splitlines()[0])
        if module:
            block.file = module.group(1)


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


# -- running it --------------------------------------------------------------------------------------------
def environment() -> dict[str, str]:
    """A reader's shell, for every process a page runs: this checkout's nbkit, UTC, unbuffered output.

    This checkout comes first on PYTHONPATH, and an ``nbkit`` script that runs ``python -m nbkit`` with
    this interpreter first on PATH, so the pages test this tree whether or not it is pip-installed.
    Colour, terminal width, matplotlib's backend and str hashing are fixed. The note that the
    pure-Python core runs is silenced where no compiled core is built (a checkout without
    ``build_ext --inplace``): it says nothing about the page. A core chosen by the caller
    (``NBKIT_PURE_PYTHON``) is kept.
    """
    from nbkit.wire import core

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([_nbkit_bin(), str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(PYTHONUNBUFFERED="1", TZ="UTC", NO_COLOR="1", COLUMNS="120", MPLBACKEND="Agg", PYTHONHASHSEED="0")
    if core.CORE != "compiled":
        env["NBKIT_PURE_PYTHON"] = "1"
    return env


@functools.cache
def _nbkit_bin() -> str:
    """A temporary folder holding an ``nbkit`` script that runs ``python -m nbkit`` with this interpreter."""
    folder = Path(tempfile.mkdtemp(prefix="page-code-bin-"))
    write_nbkit_command(folder)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return str(folder)


def run_process(argv: list[str], folder: Path, groups: list[int], script: str | None = None) -> str:
    """What a process prints, stdout and stderr together; ``script`` is its stdin (else it has none).

    It runs in a session of its own, whose id is added to ``groups``, so what it leaves running can be
    stopped when the run ends (:func:`stop_groups`).
    """
    process = subprocess.Popen(
        argv,
        cwd=folder,
        env=environment(),
        stdin=subprocess.DEVNULL if script is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    groups.append(process.pid)
    try:
        return process.communicate(script, timeout=TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        stop_groups([process.pid])
        process.communicate()
        raise


def stop_groups(groups: list[int]) -> None:
    """Kill what is left of the process groups a run started (only those)."""
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def run_cell(block: Block, namespace: dict[str, object]) -> str:
    """What a python block prints in this process, then the repr of its last expression (as a cell shows)."""
    name = f"<block at line {block.line}>"
    tree = ast.parse(block.code, filename=name)
    tail = tree.body[-1] if tree.body else None
    last = tail if isinstance(tail, ast.Expr) else None
    if last is not None:
        tree.body.pop()
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(tree, name, "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
            if value is not None:
                print(repr(value))
    return buffer.getvalue()


class Output(NamedTuple):
    """A block a run reached and what it printed ("" for a file block, which is written)."""

    block: Block
    printed: str


def run(blocks: Iterable[Block], folder: Path, mode: Mode) -> Generator[Output, None, None]:
    """Run the blocks in order in ``folder`` (which exists), as ``mode`` says; yield each one's output.

    Blocks a run does not reach (not tested, directives) are passed over. Close the iterator (or run it
    to the end) to stop what the blocks left running, and, in notebook mode, to get this process's
    current directory, ``sys.path`` and modules back.
    """
    groups: list[int] = []
    with contextlib.ExitStack() as stack:
        namespace = stack.enter_context(_notebook(folder)) if mode.cells else None
        stack.callback(stop_groups, groups)  # first on the way out: the page's processes
        for block in blocks:
            if not block.runs:
                continue
            if block.file:
                (folder / block.file).write_text(block.code + "\n", encoding="utf-8")
                yield Output(block, "")
            elif block.lang == "python" and namespace is not None:
                yield Output(block, run_cell(block, namespace))
            elif block.lang == "python":
                yield Output(block, run_process([sys.executable, "-"], folder, groups, block.code + "\n"))
            elif block.lang == "bash":
                yield Output(block, run_process(["bash", "-s"], folder, groups, block.code + "\n"))
            else:
                yield Output(block, "".join(run_process(["bash", "-c", c], folder, groups) for c in commands(block)))


@contextlib.contextmanager
def _notebook(folder: Path) -> Iterator[dict[str, object]]:
    """A notebook in ``folder``: its namespace, with ``folder`` the current directory and first on sys.path.

    Afterwards the directory and path are restored, the modules imported from ``folder`` dropped (the
    next page may have its own ``shop.py``) and matplotlib's figures closed.
    """
    old = Path.cwd()
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    modules = set(sys.modules)
    try:
        yield {"__name__": "__howto__"}
    finally:
        os.chdir(old)
        sys.path.remove(str(folder))
        for name in set(sys.modules) - modules:
            if str(folder) in str(getattr(sys.modules[name], "__file__", None) or ""):
                del sys.modules[name]
        with contextlib.suppress(ImportError):
            import matplotlib.pyplot as plt

            plt.close("all")


def main(argv: list[str]) -> int:
    """Run a page in fresh temporary folders and print each run block's output with its verdict.

    ``PAGE.md [WORD ...]``: the page, and words of the headings of the sections to run (all without).
    With ``--fill``, also write each output into the page's empty output blocks (a new page's
    ```` ```text ```` blocks left empty): what to trim with ``...`` and check by eye afterwards.
    """
    import matplotlib

    matplotlib.use("Agg")
    sys.path.insert(0, str(ROOT))
    args = [a for a in argv if a != "--fill"]
    path, words = Path(args[0]), [w.lower() for w in args[1:]]
    page = parse(path)
    for problem in page.problems:
        print("PROBLEM", problem)
    fills: dict[int, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, (heading, blocks) in enumerate(page.units()):
            if words and not any(w in heading.lower() for w in words):
                continue
            if heading:
                print(f"=== {heading}")
            folder = Path(tmp) / str(number)
            folder.mkdir()
            with contextlib.closing(run(blocks, folder, page.mode)) as outputs:
                for block, printed in outputs:
                    if block.file:
                        continue
                    shown = block.expected
                    state = (
                        "no output shown"
                        if shown is None
                        else ("ok" if page.mode.compare(shown, printed) else "DIFFERS")
                    )
                    print(f"--- line {block.line} ({block.lang}): {state}")
                    print(printed, end="" if printed.endswith("\n") or not printed else "\n")
                    if shown is not None and not shown.strip():
                        fills[block.expected_line] = normalise(printed)
    if "--fill" in argv and fills:
        lines = path.read_text(encoding="utf-8").splitlines()
        for start in sorted(fills, reverse=True):  # the fence line; its empty body ends at the next line
            lines[start:start] = fills[start]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
