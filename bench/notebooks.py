"""Notebooks: the nbval run of the README's test command, timed against its 60 s target.

Runs ``python -m pytest -p no:cacheprovider -n 2 --dist loadscope --nbval notebooks`` (the notebooks
part of the test command between the ``<!-- test-command -->`` markers of README.md; the cache plugin
off so nothing is written to .pytest_cache) in a subprocess, cwd = the repository root, once as a
warm-up and then ``--repeat`` times. Prints each run's wall-clock time, CPU time (user + system of
pytest and everything it waited for: xdist workers and Jupyter kernels, from getrusage(RUSAGE_CHILDREN))
and pytest's summary line, the medians, and PASS/FAIL against 60 s. One more run with
``--durations=0`` gives the time of each notebook (the sum of its cells' setup, call and teardown:
kernel start-up is in the first cell's setup, shutdown in the last cell's teardown) and its slowest cell.

The notebooks write into ``notebooks/work/`` beside themselves: do not run this while another nbval
run of the same notebooks is going on. ``PYTEST_*`` variables are not passed on (the command is the
README's, whatever the calling shell has set). The exit status is 0 whatever the timings; it is 1 if
a run fails (a notebook's outputs differ, or pytest errors), since the timing is then meaningless.

    python bench/notebooks.py                   # the whole notebooks/ folder, 2 workers, 3 timed runs
    python bench/notebooks.py --repeat 1 --workers 0 --notebooks notebooks/00-start-here.ipynb
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

TARGET_S = 60.0  # the whole nbval run under this many seconds (wall clock)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_FLAGS = ("-n 2", "--dist loadscope", "--nbval notebooks")  # what this script assumes the README runs

SUMMARY = re.compile(r"^=+ (.*\b(?:passed|failed|error|errors|skipped|deselected|no tests ran)\b.*) =+$")
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)::(.*?)\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # nbval colours its failure reports
# xdist's verbose line: "[gw1] [ 12%] PASSED notebooks/03-retries-and-dead-letters::ipynb::Cell 4"
ON_WORKER = re.compile(r"^\[(gw\d+)\]\s+\[\s*\d+%\]\s+[A-Z]+\s+(\S.*?)::Cell\b")


class Run(NamedTuple):
    wall: float
    cpu: float
    returncode: int
    output: str

    @property
    def summary(self) -> str:
        for line in reversed(self.output.splitlines()):
            m = SUMMARY.match(line.strip())
            if m:
                return m.group(1)
        return f"(no pytest summary line; exit status {self.returncode})"


def readme_command() -> str | None:
    """The shell command between README.md's ``<!-- test-command -->`` markers (None if not found)."""
    try:
        with open(os.path.join(REPO, "README.md")) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"<!-- test-command -->(.*?)<!-- /test-command -->", text, re.S)
    if not m:
        return None
    lines = [line.strip() for line in m.group(1).splitlines()]
    return " ".join(line for line in lines if line and not line.startswith("```")) or None


def notebook_args(patterns: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Paths (files or folders, globs allowed) as pytest arguments: relative to the repository root when
    inside it. A relative path is looked up from the current directory first, then from the root."""
    out: list[str] = []
    for pattern in patterns:
        found: list[str] = []
        for base in (os.getcwd(), REPO):
            full = os.path.join(base, pattern)
            found = sorted(glob.glob(full)) if glob.has_magic(pattern) else ([full] if os.path.exists(full) else [])
            if found:
                break
        if not found:
            parser.error(f"--notebooks: nothing at {pattern!r} (from {os.getcwd()} or {REPO})")
        for path in found:
            path = os.path.abspath(path)
            inside = os.path.commonpath([path, REPO]) == REPO
            out.append(os.path.relpath(path, REPO) if inside else path)
    return out


def command(args: argparse.Namespace, *extra: str) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    if args.workers > 0:
        cmd += ["-n", str(args.workers), "--dist", "loadscope"]
    return [*cmd, *extra, "--nbval", *args.paths]


def run(cmd: list[str]) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = REPO + os.pathsep + os.environ.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(wall, cpu, done.returncode, done.stdout)


def failure_report(output: str, first: int = 120, last: int = 60) -> list[str]:
    """The start of pytest's FAILURES/ERRORS section and its short summary (no colours, no --durations
    lines); the output's last lines when it has no such section (pytest itself failed)."""
    lines = [line for line in ANSI.sub("", output).splitlines() if not DURATION.match(line)]
    starts = [i for i, line in enumerate(lines) if re.match(r"^=+ (FAILURES|ERRORS) =+$", line)]
    summary = [i for i, line in enumerate(lines) if re.match(r"^=+ short test summary info =+$", line)]
    if not starts:
        return lines[-(first + last) :]
    head = lines[starts[0] : starts[0] + first]
    if len(head) == first:
        head.append("...")
    return head + (lines[summary[-1] :][-last:] if summary and summary[-1] >= starts[0] + first else [])


def check(label: str, r: Run) -> bool:
    """Print the run's figures; on a failed run print pytest's output and say so (the caller stops)."""
    print(f"   {label:<12} {r.wall:8.2f} s wall  {r.cpu:8.2f} s cpu   {r.summary}", flush=True)
    if r.returncode == 0:
        return True
    print(f"   pytest exited with status {r.returncode}; its output:")
    for line in failure_report(r.output):
        print(f"   | {line}")
    print(f"== nbval run failed ({r.summary}): no timing reported, a failing run's time means nothing")
    sys.stdout.flush()
    print(f"bench/notebooks.py: the nbval run failed (pytest exit status {r.returncode})", file=sys.stderr)
    return False


def per_notebook(output: str) -> dict[str, list[tuple[float, str, str]]]:
    """``--durations=0`` lines grouped by notebook: [(seconds, phase, cell)]."""
    times: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    in_section = False
    for line in output.splitlines():
        if "slowest" in line and "durations" in line and line.startswith("="):
            in_section = True
            continue
        if in_section and line.startswith("="):
            break
        m = DURATION.match(line) if in_section else None
        if m:
            times[m.group(3)].append((float(m.group(1)), m.group(2), m.group(4)))
    return times


def workers_of(output: str, notebooks: list[str]) -> dict[str, str]:
    """Which xdist worker ran each notebook, from the ``-v`` lines ({} if any notebook is not found)."""
    by_stem = {path.removesuffix(".ipynb"): path for path in notebooks}
    found: dict[str, str] = {}
    for line in output.splitlines():
        m = ON_WORKER.match(line)
        if m:
            name = m.group(2).removesuffix("::ipynb").removesuffix(".ipynb")
            if name in by_stem:
                found[by_stem[name]] = m.group(1)
    return found if set(found) == set(notebooks) else {}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--repeat",
        type=int,
        default=3,
        metavar="R",
        help="timed runs after one warm-up run; the median is reported (default 3)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="pytest-xdist workers, passed to -n with --dist loadscope (default 2, as the README; 0: no xdist)",
    )
    p.add_argument(
        "--notebooks",
        nargs="+",
        default=["notebooks"],
        metavar="PATH",
        help="notebooks or folders to run, globs allowed (default: the whole notebooks/ folder)",
    )
    args = p.parse_args(argv)
    if args.repeat < 1 or args.workers < 0:
        p.error("--repeat must be at least 1 and --workers at least 0")
    args.paths = notebook_args(args.notebooks, p)
    whole = args.paths == ["notebooks"]

    cmd = command(args)
    shown = " ".join(["python", *cmd[1:]])
    print("== notebooks: the nbval run of the README's test command, timed")
    print(f"   machine: {c.machine()}")
    print(f"   command: {shown}   (cwd {REPO})")
    readme = readme_command()
    print(f"   README test command: {readme or '(not found between the <!-- test-command --> markers)'}")
    for flag in README_FLAGS:
        if readme and flag not in readme:
            print(f"   NOTE: the README's command no longer has {flag!r}: check that this script still matches it")
    print(f"   repeat: {args.repeat} (after 1 warm-up); medians of wall-clock time and of CPU time (user + system")
    print("   of pytest and its children: xdist workers, Jupyter kernels)")
    print(f"   load average: {c.load()} (other processes on the machine skew the figures)")
    sys.stdout.flush()

    if not check("warm-up", run(cmd)):
        return 1
    runs: list[Run] = []
    for i in range(args.repeat):
        r = run(cmd)
        if not check(f"run {i + 1}", r):
            return 1
        runs.append(r)
    wall = statistics.median(r.wall for r in runs)
    cpu = statistics.median(r.cpu for r in runs)
    print(f"   {'median':<12} {wall:8.2f} s wall  {cpu:8.2f} s cpu   ({cpu / wall:.2f} cores busy on average)")

    timed = run(command(args, "-v", "--durations=0", "--durations-min=0"))
    if not check("--durations", timed):
        return 1
    times = per_notebook(timed.output)
    if times:
        total = sum(s for cells in times.values() for s, _, _ in cells)
        print("   per notebook (the --durations run: setup + call + teardown of its cells; kernel start included):")
        for path, cells in sorted(times.items(), key=lambda kv: -sum(s for s, _, _ in kv[1])):
            spent = sum(s for s, _, _ in cells)
            worst = max(cells)
            n_cells = len({cell for _, _, cell in cells})
            print(
                f"     {os.path.basename(path):<36} {spent:7.2f} s  {spent / total:4.0%}  {n_cells:3d} cells;"
                f" slowest: {worst[2]} ({worst[1]}) {worst[0]:.2f} s"
            )
        print(f"     {'sum':<36} {total:7.2f} s  (the run took {timed.wall:.2f} s wall)")
        placed = workers_of(timed.output, list(times)) if args.workers > 0 else {}
        busy = {"main process": total} if args.workers == 0 else {}
        for worker in sorted(set(placed.values())):
            mine = sorted(path for path in times if placed[path] == worker)
            busy[worker] = sum(s for path in mine for s, _, _ in times[path])
            names = ", ".join(os.path.basename(path).split("-")[0] for path in mine)
            print(f"     worker {worker}: {busy[worker]:7.2f} s in notebooks {names}")
        if busy:  # the busiest worker is the critical path; the rest of that run's wall time is pytest's own
            rest = timed.wall - max(busy.values())
            print(f"     the rest of that run (pytest start-up, collection, xdist workers): ~{rest:.2f} s")
    else:
        print("   per notebook: no --durations lines found in pytest's output")

    label = f"the whole nbval run under {TARGET_S:g} s" if whole else f"this nbval run under {TARGET_S:g} s"
    detail = f"median {wall:.2f} s wall ({cpu:.2f} s CPU) over {len(runs)} run(s), {args.workers} worker(s)"
    if not whole:
        detail += f"; a subset ({' '.join(args.paths)}): the target is for the whole notebooks/ folder"
    return c.finish([c.verdict(label, wall < TARGET_S, detail)])


if __name__ == "__main__":
    sys.exit(main())
