"""Pipe stage: N stdio lines through ``nbkit run`` against a bare Python loop, with ``cat`` as the floor.

nbkit side: ``python -m nbkit run service:app`` in a subprocess, stdin from a file and stdout to a
file. The service (written to the temporary folder) is a StdioBroker whose one subscriber,
``@broker.subscriber("jobs", out_retry="jobs.retry")``, returns ``HandlerOutcome.retry_after(0)``:
every line is delivered, settled and written back as a retry copy (its headers travel in an rs1
envelope). Baseline: a bare Python script that parses each line with a regular expression and writes
it back (also a subprocess, same files). Floor: ``cat``.

``--payload-bytes N ...`` runs the comparison once per payload size (each payload exactly N bytes of
JSON; default: the ``orders`` shape, about 210 bytes, lines about 250); the fixed per-line cost is what
small payloads show. ``--against DIR`` also times another checkout's nbkit (``PYTHONPATH=DIR``, e.g.
the code before a change) in the same interleaved rounds, printed beside this one.
``--profile`` then runs the same service in this process (stdin from the same file, stdout to /dev/null)
under cProfile and prints its top entries.

    python bench/pipe.py                        # 1,000,000 lines, 3 timed runs per side
    python bench/pipe.py --messages 200000 --payload-bytes 75 254 1024 --against ../main
    python bench/pipe.py --messages 200000 --repeat 5 --profile
    python bench/pipe.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit.wire.stdio_line import format_line  # noqa: E402

TARGET = 2.0  # nbkit run at most this many times the bare loop's time
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVICE = """\
from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()


@broker.subscriber("jobs", out_retry="jobs.retry")
def handle(delivery):
    return HandlerOutcome.retry_after(0)


app = App(broker)
"""

BARE = r"""\
import re
import sys

LINE = re.compile(r"\[([^|\]]*)\|([^|\]]*)\|([^|\]]*)\] (.*)")


def main():
    out = sys.stdout.buffer
    write = out.write
    for raw in sys.stdin.buffer:
        m = LINE.match(raw.decode("utf-8"))
        ts, key, seq, payload = m.groups()
        write(f"[{ts.strip()} | {key.strip()}.retry | {seq.strip()}] {payload}\n".encode("utf-8"))
    out.flush()


main()
"""


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (every timed command here is one)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def interleaved(fns: list[Callable[[], object]], repeat: int) -> list[c.Timing]:
    """Time each of ``fns`` ``repeat`` times in rounds (one warm-up round first); their median timings."""
    for fn in fns:
        fn()
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(max(1, repeat)):
        for i, fn in enumerate(fns):
            gc.collect()
            c0 = _children_cpu()
            t = time.perf_counter()
            fn()
            walls[i].append(time.perf_counter() - t)
            cpus[i].append(_children_cpu() - c0)
    return [c.Timing(statistics.median(w), statistics.median(u), w, None) for w, u in zip(walls, cpus, strict=True)]


def sized_payload(i: int, size: int) -> str:
    """A JSON object of exactly ``size`` bytes (at least 20) deterministic in ``i``: an order id and a note
    padded with the shared delivery note."""
    head = f'{{"order_id":{i},"note":"'
    room = size - len(head) - 2
    if room < 0:
        raise SystemExit(f"--payload-bytes must be at least {len(head) + 2}, not {size}")
    note = (c._NOTE * (1 + room // len(c._NOTE)))[:room]
    return f'{head}{note}"}}'


def profile(tmp: str, lines: str, top: int = 18) -> None:
    """cProfile's top entries (by own time) of the service run in this process over ``lines``."""
    spec = importlib.util.spec_from_file_location("bench_pipe_service", os.path.join(tmp, "service.py"))
    assert spec is not None and spec.loader is not None
    service = importlib.util.module_from_spec(spec)
    with open(lines, "rb") as stdin, open(os.devnull, "w") as stdout:
        saved = sys.stdin, sys.stdout
        sys.stdin, sys.stdout = stdin, stdout  # StdioBroker() reads and writes the process's streams
        try:
            spec.loader.exec_module(service)
            profiler = cProfile.Profile()
            profiler.enable()
            service.app.run()
            profiler.disable()
        finally:
            sys.stdin, sys.stdout = saved
    print(f"   profile of the service run in process, stdout to /dev/null (top {top} by own time):")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument(
        "--payload-bytes",
        type=int,
        nargs="+",
        metavar="N",
        help="payloads of exactly N bytes, one comparison per size (default: the orders shape, about 210)",
    )
    p.add_argument("--against", metavar="DIR", help="also time the nbkit of this checkout (e.g. before a change)")
    p.add_argument("--profile", action="store_true", help="print cProfile's top entries of the service in process")
    args = p.parse_args(argv)
    c.banner("pipe: nbkit run (StdioBroker) vs a bare regex loop vs cat", args)
    results: list[bool] = []
    with c.workdir(args, "pipe") as tmp:
        with open(os.path.join(tmp, "service.py"), "w") as f:
            f.write(SERVICE)
        with open(os.path.join(tmp, "bare.py"), "w") as f:
            f.write(BARE)
        for size in args.payload_bytes or [None]:
            results += compare(args, tmp, size)
    return c.finish(results)


def compare(args: argparse.Namespace, tmp: str, size: int | None) -> list[bool]:
    """One round of comparisons on lines whose payloads are ``size`` bytes (None: the orders shape)."""
    n = args.messages
    results = []
    lines = os.path.join(tmp, "in.txt")
    with open(lines, "w") as f:
        for i in range(n):
            _, seq, ts, data = c.message_fields(i)
            f.write(format_line(ts, "jobs", i, data.decode() if size is None else sized_payload(i, size)))
    what = "orders-shaped payloads" if size is None else f"{size}-byte payloads"
    print(f"-- {what}: {os.path.getsize(lines) / 1e6:,.1f} MB of stdio lines (load average {c.load()})")
    cat = shutil.which("cat") or "cat"
    nbkit = [sys.executable, "-m", "nbkit", "run", "service:app"]
    commands = {"nbkit": (nbkit, REPO), "bare": ([sys.executable, "bare.py"], REPO), "cat": ([cat], REPO)}
    if args.against:
        commands["against"] = (nbkit, os.path.abspath(args.against))

    def out(name: str) -> str:
        return os.path.join(tmp, f"out-{name}.txt")

    def run(name: str, source: str = lines) -> None:
        command, checkout = commands[name]
        env = dict(os.environ, PYTHONPATH=checkout + os.pathsep + os.environ.get("PYTHONPATH", ""))
        # bytecode cached (written by the warm-up round, in the temporary folder) as an installed service has it:
        # without it every run compiles nbkit's modules again, a start-up cost the bare loop does not pay
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache", name)
        with open(source, "rb") as stdin, open(out(name) if source == lines else os.devnull, "wb") as stdout:
            subprocess.run(command, stdin=stdin, stdout=stdout, cwd=tmp, env=env, check=True)

    def count_lines(name: str) -> int:
        with open(out(name), "rb") as f:
            return sum(1 for _ in f)

    # interleaved: each round runs every side, so a change in the machine's load hits them alike
    # and each Python side on empty input: its start-up, subtracted for the per-line figures
    sides = [name for name in commands if name != "cat"]
    full = [lambda name=name: run(name) for name in commands]
    runs = interleaved(full + [lambda name=name: run(name, os.devnull) for name in sides], args.repeat)
    timings = dict(zip(commands, runs[: len(commands)], strict=True))
    per_line = {
        name: c.Timing(timings[name].wall - start.wall, timings[name].cpu - start.cpu, [], None)
        for name, start in zip(sides, runs[len(commands) :], strict=True)
    }
    t_nb, t_bare = timings["nbkit"], timings["bare"]
    produced = count_lines("nbkit")
    assert count_lines("bare") == n
    with open(out("nbkit"), "rb") as f:
        first = f.readline().decode().rstrip("\n")
    print(f"   nbkit wrote {produced:,} lines for {n:,}; the first: {first[:100]}")
    c.row("nbkit run service:app", t_nb, n, f"(per line, process start included; {c.ratio(t_nb, t_bare)} bare)")
    if args.against:
        t_ag = timings["against"]
        c.row(f"nbkit run, {args.against}", t_ag, n, f"({c.ratio(t_ag, t_bare)} bare)")
    c.row("bare Python loop (regex parse, write back)", t_bare, n)
    c.row("cat (the floor)", timings["cat"], n)
    print("   start-up subtracted (each side's median run on empty input), the per-line cost:")
    for name in sides:
        label = {"nbkit": "nbkit run", "bare": "bare loop", "against": f"nbkit run, {args.against}"}[name]
        extra = "" if name == "bare" else f"({c.ratio(per_line[name], per_line['bare'])} bare)"
        c.row(f"  {label}", per_line[name], n, extra)
    results.append(c.verdict(f"every line written back ({what})", produced == n, f"{produced:,} of {n:,}"))
    results.append(c.within(f"nbkit run within {TARGET:g}x of the bare loop ({what})", t_nb, t_bare, TARGET))
    if args.profile:
        profile(tmp, lines)
    return results


if __name__ == "__main__":
    sys.exit(main())
