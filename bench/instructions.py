"""Instruction budget: instructions per message, counted by valgrind's callgrind, against a committed budget.

Four workloads, each run in a fresh Python under ``valgrind --tool=callgrind`` at two sizes, N and 3N
messages: ``read_stream`` with ``payload="json"`` and with ``payload="bytes"`` on bench/_common.py's
stream (4 keys, ~200-byte JSON payloads), the ``App(FileBroker)`` replay of bench/dispatch.py (its
per-delivery WARNING written by ``nbkit run``'s log handler to /dev/null) and ``python -m nbkit run
service:app`` of bench/pipe.py (stdio lines in, retry copies out). A workload costs
``(I(3N) - I(N)) / 2N`` instructions per message: start-up, imports and one-off work are in both
counts and cancel out. The figures do not depend on the machine's load (a count, not a time), so CI can
hold them to ``bench/instruction_budget.json``: a workload more than 15 % over its budget fails (exit
status 1) and the table says which.

    python bench/instructions.py                                   # all four, N = 10,000 (a few minutes)
    python bench/instructions.py --only "read_stream json" --messages 2000
    python bench/instructions.py --update --why "frames built column-wise: json 30% cheaper"

``--update`` writes the measured figures to the budget file with the reason (``--why`` is required):
commit it with the change that moved them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)  # this checkout's nbkit (bench/ itself is first on the path of a script)

BUDGET = os.path.join(HERE, "instruction_budget.json")
#: A workload fails when it costs more than its budget times this.
TOLERANCE = 0.15
#: Under this share of its budget, a workload passes with a hint that the budget could come down.
SLACK = 0.15
WORKLOADS = ("read_stream json", "read_stream bytes", "dispatch", "pipe stage")
DEFAULT_MESSAGES = 10_000
SERVICE_NAME = "service.py"  # bench/pipe.py's service, written into the temporary folder


class Verdict(NamedTuple):
    """One workload's comparison: its budget (None: it has none), the measured figure and the outcome."""

    workload: str
    budget: float | None
    measured: float
    ratio: float | None
    ok: bool
    note: str


def compare(budget: Mapping[str, float], measured: Mapping[str, float], tolerance: float = TOLERANCE) -> list[Verdict]:
    """Each measured workload against its budget (instructions per message): it fails above
    ``budget * (1 + tolerance)`` and when it has no budget; passes otherwise (at the limit too)."""
    verdicts = []
    for name, value in measured.items():
        limit = budget.get(name)
        if limit is None:
            verdicts.append(Verdict(name, None, value, None, False, "no budget: run with --update --why"))
            continue
        ratio = value / limit
        ok = ratio <= 1 + tolerance
        if not ok:
            note = f"over budget by more than {tolerance:.0%}"
        elif ratio < 1 - SLACK:
            note = f"{1 - ratio:.0%} under budget: --update --why to lock the gain in"
        else:
            note = ""
        verdicts.append(Verdict(name, limit, value, ratio, ok, note))
    return verdicts


def table(verdicts: Sequence[Verdict]) -> str:
    """The comparison as a text table: workload, budget, measured (instructions per message), ratio, verdict."""
    lines = [f"   {'workload':<18} {'budget':>10} {'measured':>10} {'ratio':>6}  verdict"]
    for v in verdicts:
        budget = f"{v.budget:,.0f}" if v.budget is not None else "-"
        ratio = f"{v.ratio:.3f}" if v.ratio is not None else "-"
        verdict = "PASS" if v.ok else "FAIL"
        lines.append(f"   {v.workload:<18} {budget:>10} {v.measured:>10,.0f} {ratio:>6}  {verdict}  {v.note}".rstrip())
    return "\n".join(lines)


# --- the budget file ------------------------------------------------------------------------------------


class BudgetError(Exception):
    """The budget file is missing, not JSON, or lacks a field."""


def load_budget(path: str = BUDGET) -> dict:
    """The budget file's content, checked: ``workloads`` maps each name to instructions per message, a date
    and a reason."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BudgetError(f"{path}: cannot read the instruction budget ({e})") from e
    workloads = data.get("workloads") if isinstance(data, dict) else None
    if not isinstance(workloads, dict):
        raise BudgetError(f'{path}: no "workloads" object')
    for name, entry in workloads.items():
        ipm = entry.get("instructions_per_message") if isinstance(entry, dict) else None
        if not isinstance(ipm, int | float) or ipm <= 0:
            raise BudgetError(f"{path}: workload {name!r} has no positive instructions_per_message")
        for field in ("date", "why"):
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                raise BudgetError(f"{path}: workload {name!r} has no {field!r}")
    return data


def updated_budget(old: dict | None, measured: Mapping[str, float], why: str, messages: int, today: str) -> dict:
    """The budget file's content with ``measured`` written over (other workloads kept), each with
    ``today`` and ``why``, and what it was measured with."""
    if not why.strip():
        raise ValueError("--update needs a reason: --why TEXT")
    workloads = dict((old or {}).get("workloads", {}))
    for name, value in measured.items():
        workloads[name] = {"instructions_per_message": round(value), "date": today, "why": why.strip()}
    return {
        "about": (
            "Instructions per message (valgrind --tool=callgrind, (I(3N) - I(N)) / 2N) that bench/instructions.py "
            f"holds each workload to, failing above +{TOLERANCE:.0%}. Raise a figure only with "
            "`python bench/instructions.py --update --why TEXT`, in the commit that makes it cost more."
        ),
        "measured_with": {**environment(), "messages": messages},
        "workloads": {name: workloads[name] for name in sorted(workloads, key=_order)},
    }


def _order(name: str) -> tuple[int, str]:
    return (WORKLOADS.index(name) if name in WORKLOADS else len(WORKLOADS), name)


def environment() -> dict[str, str]:
    """What an instruction count depends on besides nbkit: the interpreter, the libraries, the machine."""
    import numpy
    import pandas
    import pyarrow

    return {
        "python": platform.python_version(),
        "pandas": pandas.__version__,
        "pyarrow": pyarrow.__version__,
        "numpy": numpy.__version__,
        "machine": platform.machine(),
        "valgrind": _valgrind_version(),
    }


def _valgrind_version() -> str:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return "?"
    out = subprocess.run([valgrind, "--version"], capture_output=True, text=True, check=False).stdout
    return out.strip().removeprefix("valgrind-") or "?"


# --- the workloads, run in a child process ----------------------------------------------------------------


def child(workload: str, path: str) -> int:
    """Run one workload once over ``path`` in this process and print how many messages it handled."""
    if workload == "read_stream json" or workload == "read_stream bytes":
        from nbkit.tabular.frames import read_stream

        frame = read_stream(path, payload=workload.split()[1], progress=False)  # type: ignore[arg-type]
        print(f"messages={len(frame)}")
    elif workload == "dispatch":
        import logging

        import dispatch

        from nbkit.runtime.logs import STREAM_ERROR
        from nbkit.runtime.run_log import RunLogHandler

        with open(os.devnull, "w") as devnull:
            sink = RunLogHandler(devnull, skip_texts=(STREAM_ERROR,))  # what `nbkit run` installs, as dispatch.py
            logging.getLogger().addHandler(sink)
            settled = dispatch.run_app(path)
            sink.close()
        print(f"settled={settled}")
    else:
        raise SystemExit(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")
    return 0


class Data(NamedTuple):
    """The input files of one size: the stream file and the stdio lines."""

    messages: int
    stream: str
    lines: str


def prepare(tmp: str, n: int) -> Data:
    """Write ``n`` messages as a stream file (bench/_common.py) and as stdio lines (bench/pipe.py's)."""
    import _common as c

    from nbkit.wire.stdio_line import format_line

    stream = os.path.join(tmp, f"bench-{n}.ss")
    c.write_stream(stream, n)
    lines = os.path.join(tmp, f"lines-{n}.txt")
    with open(lines, "w") as f:
        for i in range(n):
            _, _, ts, data = c.message_fields(i)
            f.write(format_line(ts, "jobs", i, data.decode()))
    return Data(n, stream, lines)


def command(workload: str, data: Data) -> list[str]:
    """The Python command line of ``workload`` over ``data`` (stdin is the stdio lines for the pipe stage)."""
    if workload == "pipe stage":
        return [sys.executable, "-m", "nbkit", "run", "service:app"]
    return [sys.executable, os.path.abspath(__file__), "--child", workload, data.stream]


def expected(workload: str, n: int) -> str:
    """What a run of ``workload`` over ``n`` messages prints (the pipe stage: how many lines it wrote)."""
    import dispatch

    if workload == "dispatch":
        return f"settled={sum(1 for i in range(n) if _key(i) == dispatch.KEY)}"
    return f"messages={n}"


def _key(i: int) -> str:
    import _common as c

    return c.message_fields(i)[0]


def run(workload: str, data: Data, tmp: str, env: Mapping[str, str], *, valgrind: str | None) -> int:
    """Run ``workload`` over ``data``, under callgrind when ``valgrind`` is its path; its instruction count
    (0 without valgrind). Fails when the run fails or handles another number of messages than it should."""
    tag = f"{workload.replace(' ', '-')}-{data.messages}"
    out_file = os.path.join(tmp, f"callgrind.{tag}")
    cmd = command(workload, data)
    if valgrind is not None:
        cmd = [valgrind, "--tool=callgrind", "-q", f"--callgrind-out-file={out_file}", *cmd]
    stdout_path = os.path.join(tmp, f"stdout.{tag}")
    with open(data.lines, "rb") as stdin, open(stdout_path, "wb") as stdout:
        proc = subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, cwd=tmp, env=dict(env))
    with open(stdout_path, "rb") as f:
        out = f.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} ({data.messages:,} messages) exited {proc.returncode}: {proc.stderr[-2000:]!r}")
    if workload == "pipe stage":
        got = f"messages={out.count(chr(10))}"
    else:
        got = out.strip().splitlines()[-1] if out.strip() else "(nothing)"
    want = expected(workload, data.messages)
    if got != want:
        raise RuntimeError(f"{workload} ({data.messages:,} messages) printed {got}, not {want}")
    return read_total(out_file) if valgrind is not None else 0


def read_total(out_file: str) -> int:
    """The instruction count of a callgrind output file (its ``totals:`` or ``summary:`` line)."""
    with open(out_file) as f:
        text = f.read()
    m = re.search(r"^(?:totals|summary):\s*(\d+)", text, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"{out_file}: no totals line")
    return int(m.group(1))


def child_env(tmp: str) -> dict[str, str]:
    """The children's environment: this checkout first on the path, a fixed hash seed (the same dict and
    set orders every run), the bytecode cached in ``tmp`` (written once by the warm-up runs) and one
    thread for numpy's BLAS (its idle worker threads spin for a while after numpy's import, and callgrind
    counts their spin: up to about 750 instructions a message in the bytes read, varying from run to run)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, HERE, env.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = "0"
    env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("NBKIT_PURE_PYTHON", None)  # the compiled core is what CI holds to the budget
    return env


def measure(workloads: Sequence[str], n: int, jobs: int, *, count: bool = True) -> dict[str, float]:
    """Instructions per message of each workload: ``(I(3n) - I(n)) / 2n``, the runs ``jobs`` at a time.
    Each workload runs natively first at both sizes (which checks it); ``count=False`` stops there."""
    import pipe

    valgrind = shutil.which("valgrind")
    if valgrind is None and count:
        raise SystemExit("bench/instructions.py: valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="nbkit-bench-instructions-") as tmp:
        with open(os.path.join(tmp, SERVICE_NAME), "w") as f:
            f.write(pipe.SERVICE)
        sizes = [prepare(tmp, n), prepare(tmp, 3 * n)]
        env = child_env(tmp)
        for name in workloads:  # natively first: checks the workload and writes its bytecode
            for data in sizes:
                run(name, data, tmp, env, valgrind=None)
        if not count:
            return {}
        runs = [(name, data) for name in workloads for data in sizes]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            counts = list(pool.map(lambda r: run(r[0], r[1], tmp, env, valgrind=valgrind), runs))
    total = dict(zip(runs, counts, strict=True))
    for name in workloads:
        print(f"   {name:<18} I({n:,}) = {total[name, sizes[0]]:,}, I({3 * n:,}) = {total[name, sizes[1]]:,}")
    return {name: (total[name, sizes[1]] - total[name, sizes[0]]) / (2 * n) for name in workloads}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--messages",
        type=int,
        default=DEFAULT_MESSAGES,
        metavar="N",
        help="the smaller size (default %(default)s); the other is 3N",
    )
    p.add_argument(
        "--only",
        nargs="+",
        choices=WORKLOADS,
        metavar="WORKLOAD",
        help=f"run these only ({', '.join(map(repr, WORKLOADS))})",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="callgrind runs at once (default %(default)s; the counts do not depend on it)",
    )
    p.add_argument("--budget", default=BUDGET, help="the budget file (default bench/instruction_budget.json)")
    p.add_argument("--update", action="store_true", help="write the measured figures to the budget file (needs --why)")
    p.add_argument("--why", default="", help="why the budget changes: kept in the file beside each figure")
    p.add_argument(
        "--no-valgrind",
        action="store_true",
        help="only run each workload natively at both sizes (checks they run; counts nothing)",
    )
    p.add_argument("--child", nargs=2, metavar=("WORKLOAD", "PATH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(*args.child)
    if args.update and not args.why.strip():
        p.error("--update needs --why TEXT: say why the budget changes (it is kept in the file and the commit)")
    if args.update and args.no_valgrind:
        p.error("--update measures: it cannot go with --no-valgrind")
    if args.messages < 100:
        p.error("--messages must be at least 100")
    workloads = tuple(args.only or WORKLOADS)
    if args.no_valgrind:
        try:
            measure(workloads, args.messages, args.jobs, count=False)
        except RuntimeError as e:
            print(f"bench/instructions.py: {e}", file=sys.stderr)
            return 2
        print(f"== {len(workloads)} workloads ran natively on {args.messages:,} and {3 * args.messages:,} messages")
        return 0
    budget_data = None
    if not args.update or os.path.exists(args.budget):
        try:
            budget_data = load_budget(args.budget)
        except BudgetError as e:
            if not args.update:
                print(f"bench/instructions.py: {e}", file=sys.stderr)
                return 2
    budget_n = (budget_data or {}).get("measured_with", {}).get("messages", args.messages)
    if args.update and budget_n != args.messages:
        p.error(f"--update measures at the budget's size, N = {budget_n:,}: leave --messages out or give that")
    env_now = environment()
    print("== instructions per message (valgrind --tool=callgrind; (I(3N) - I(N)) / 2N)")
    print(f"   N = {args.messages:,}; {', '.join(f'{k} {v}' for k, v in env_now.items())}")
    if budget_data is not None:
        was = {k: v for k, v in budget_data.get("measured_with", {}).items() if k in env_now and v != env_now[k]}
        if budget_data.get("measured_with", {}).get("messages", args.messages) != args.messages:
            was["messages"] = budget_data["measured_with"]["messages"]
        if was:
            print(f"   note: the budget was measured with {', '.join(f'{k} {v}' for k, v in was.items())}")
    start = time.monotonic()
    try:
        measured = measure(workloads, args.messages, args.jobs)
    except RuntimeError as e:  # a workload failed or handled the wrong number of messages
        print(f"bench/instructions.py: {e}", file=sys.stderr)
        return 2
    print(f"   measured in {time.monotonic() - start:,.0f} s ({args.jobs} at once); load average {_load()}")
    if args.update:
        data = updated_budget(budget_data, measured, args.why, args.messages, dt.date.today().isoformat())
        with open(args.budget, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        for name, value in measured.items():
            print(f"   {name:<18} {value:>10,.0f}")
        print(f"   wrote {_shown(args.budget)}: commit it with the change that moved the figures")
        return 0
    assert budget_data is not None
    budget = {name: float(e["instructions_per_message"]) for name, e in budget_data["workloads"].items()}
    verdicts = compare(budget, measured)
    print(table(verdicts))
    failed = [v.workload for v in verdicts if not v.ok]
    if failed:
        print(
            f"== FAIL: {', '.join(failed)} over budget (+{TOLERANCE:.0%} allowed). If the cost is wanted, "
            'raise the budget in the same commit: python bench/instructions.py --update --why "..."'
        )
        return 1
    print(
        f"== PASS: {len(verdicts)} of {len(verdicts)} within +{TOLERANCE:.0%} of their budget ({_shown(args.budget)})"
    )
    return 0


def _shown(path: str) -> str:
    """``path`` relative to the repository when it is in it."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
