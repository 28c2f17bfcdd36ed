"""Pipe stage: N stdio lines through ``nbkit run`` against a bare Python loop, with ``cat`` as the floor.

nbkit side: ``python -m nbkit run service:app`` in a subprocess, stdin from a file and stdout to a
file. The service (written to the temporary folder) is a StdioBroker whose one subscriber,
``@broker.subscriber("jobs", out_retry="jobs.retry")``, returns ``HandlerOutcome.retry_after(0)``:
every line is delivered, settled and written back as a retry copy (its headers travel in an rs1
envelope). Baseline: a bare Python script that parses each line with a regular expression and writes
it back (also a subprocess, same files). Floor: ``cat``.

    python bench/pipe.py                        # 1,000,000 lines, 3 timed runs per side
    python bench/pipe.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

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


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n = args.messages
    c.banner("pipe: nbkit run (StdioBroker) vs a bare regex loop vs cat", args)
    results = []
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with c.workdir(args, "pipe") as tmp:
        with open(os.path.join(tmp, "service.py"), "w") as f:
            f.write(SERVICE)
        with open(os.path.join(tmp, "bare.py"), "w") as f:
            f.write(BARE)
        lines = os.path.join(tmp, "in.txt")
        with open(lines, "w") as f:
            for i in range(n):
                _, seq, ts, data = c.message_fields(i)
                f.write(format_line(ts, "jobs", i, data.decode()))
        out = os.path.join(tmp, "out.txt")
        print(f"   data: {os.path.getsize(lines) / 1e6:,.1f} MB of stdio lines")

        def run(cmd: list[str]) -> None:
            with open(lines, "rb") as stdin, open(out, "wb") as stdout:
                subprocess.run(cmd, stdin=stdin, stdout=stdout, cwd=tmp, env=env, check=True)

        def count_lines() -> int:
            with open(out, "rb") as f:
                return sum(1 for _ in f)

        nbkit_cmd = [sys.executable, "-m", "nbkit", "run", "service:app"]
        t_nb = c.time_it(lambda: run(nbkit_cmd), args.repeat)
        produced = count_lines()
        with open(out, "rb") as f:
            first = f.readline().decode().rstrip("\n")
        t_bare = c.time_it(lambda: run([sys.executable, "bare.py"]), args.repeat)
        assert count_lines() == n
        cat = shutil.which("cat") or "cat"
        t_cat = c.time_it(lambda: run([cat]), args.repeat)
        print(f"   nbkit wrote {produced:,} lines for {n:,}; the first: {first[:100]}")
        c.row("nbkit run service:app", t_nb, n, "(per line, process start included)")
        c.row("bare Python loop (regex parse, write back)", t_bare, n)
        c.row("cat (the floor)", t_cat, n)
        results.append(c.verdict("every line written back", produced == n, f"{produced:,} of {n:,}"))
        results.append(
            c.verdict(
                f"nbkit run within {TARGET:g}x of the bare loop",
                t_nb.wall / t_bare.wall <= TARGET,
                c.ratio(t_nb, t_bare),
            )
        )
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
