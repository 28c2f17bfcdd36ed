"""Peers: nbkit.read_stream against every reader a user would pick instead, in one run, interleaved.

The same records (bench/_common.py: 4 stream keys, JSON objects of about 200 bytes) as a stream file and
as NDJSON. Each round runs every reader once, in a rotating order (the machine's load hits them alike);
the first round is a warm-up; medians of wall-clock time are reported. Values are checked equal: every
reader's field columns against read_stream's. The pure-Python twin runs in a child process
(``NBKIT_PURE_PYTHON=1``, chosen at import); only its read is timed.

Targets: read_stream(payload="json") at least as fast as pandas.read_json(engine="pyarrow") and within 1.3x
of polars.read_ndjson (1.0x is the aim, printed beside it); read_stream(payload="bytes") within 1.5x of
reading the file; a first read in a fresh process within 1.5x of the second read in that process (both
after the imports, nbkit's reader modules included). ``--shape`` picks the records: the ~200-byte orders
(default), ~50-byte or ~1 KB string- and boolean-heavy records (bench/_common.py).
payload="objects" (a parsed object per row, on request) is timed too; its ratios are printed, for scale.
nbkit to polars (``polars.from_arrow(nbkit.read_arrow(path, payload="json"))``: the Arrow table, no pandas
between) is timed against polars.read_ndjson on the same records and its values checked equal to it.

    python bench/peers.py                     # 1,000,000 messages, 3 timed rounds
    python bench/peers.py --plot docs/images/bench-peers.png   # and the bar chart of docs/benchmarks.md
    python bench/peers.py --messages 2000 --repeat 1
    python bench/peers.py --messages 300000 --shape small     # ~50-byte string and boolean records
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import pandas as pd  # noqa: E402
from read import compare, write_pair  # noqa: E402

from nbkit.tabular.frames import read_arrow, read_stream  # noqa: E402
from nbkit.wire import core  # noqa: E402

_CHILD = """
import sys, time
from nbkit.tabular.frames import read_stream
from nbkit.wire import core
assert core.CORE == "pure-python", core.CORE
t = time.perf_counter()
read_stream(sys.argv[1], payload=sys.argv[2], progress=False)
print(time.perf_counter() - t)
"""


def pure_twin(path: str, mode: str) -> Callable[[], float]:
    """A reader that runs read_stream on the pure-Python twin in a child process; returns its read time."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, NBKIT_PURE_PYTHON="1", PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def run() -> float:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, path, mode], env=env, capture_output=True, text=True, check=True
        )
        return float(done.stdout.strip().splitlines()[-1])

    return run


def interleaved(readers: dict[str, Callable[[], object]], repeat: int) -> tuple[dict[str, float], dict[str, object]]:
    """Median seconds of each reader over ``repeat`` rounds after a warm-up round, rotating the order.
    A reader that returns a float reports its own time (the child process); the last results are kept."""
    times: dict[str, list[float]] = {name: [] for name in readers}
    results: dict[str, object] = {}
    names = list(readers)
    for r in range(repeat + 1):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            results[name] = None
            t = time.perf_counter()
            got = readers[name]()
            wall = time.perf_counter() - t
            if isinstance(got, float):
                wall = got
            else:
                results[name] = got
            if r:
                times[name].append(wall)
    return {name: statistics.median(ts) for name, ts in times.items()}, results


def _group(name: str) -> str:
    """A reader's legend group in the bar chart."""
    if name.startswith("read_stream"):
        return "nbkit, pure-Python twin" if "[pure twin]" in name else "nbkit, compiled core"
    return "reading the file's bytes (the floor)" if name.startswith("open(") else "peers (NDJSON readers)"


def check(nb: pd.DataFrame, theirs: pd.DataFrame, who: str) -> list[str]:
    """``compare`` (bench/read.py) after giving epoch-ms timestamps (pyarrow, polars) a datetime dtype."""
    if pd.api.types.is_integer_dtype(theirs["timestamp"]):
        theirs = theirs.assign(timestamp=pd.to_datetime(theirs["timestamp"], unit="ms"))
    return [f"{who}: {p}" for p in compare(nb, theirs)]


def polars_check(ours, theirs) -> list[str]:
    """nbkit's polars frame (from read_arrow) holds polars.read_ndjson's field values, row for row."""
    fields = [c for c in ours.columns if c.startswith("payload.")]
    mine = ours.select(fields).rename({f: f[len("payload.") :] for f in fields})
    common = [c for c in mine.columns if c in theirs.columns]
    if len(common) != len(fields):
        return [f"nbkit -> polars: fields {mine.columns} differ from polars.read_ndjson's {theirs.columns}"]
    if not mine.select(common).equals(theirs.select(common)):
        return ["nbkit -> polars: field values differ from polars.read_ndjson's"]
    return []


_FRESH = """
import sys, time
t = time.perf_counter()
import pandas, pyarrow  # what a pandas user has imported before any reader: timed apart
import nbkit
imported = time.perf_counter() - t
t = time.perf_counter()
nbkit.read_stream  # `import nbkit` is light; the readers' modules load here (`from nbkit import read_stream`)
readers = time.perf_counter() - t
times = []
for _ in range(2):
    t = time.perf_counter()
    nbkit.read_stream(sys.argv[1], payload=sys.argv[2], progress=False)
    times.append(time.perf_counter() - t)
print(imported, readers, *times)
"""


def fresh_reads(path: str, mode: str, rounds: int) -> tuple[float, float, float, float]:
    """Median (imports, the readers' import, first read, second read) seconds of ``read_stream`` in fresh
    processes. The imports (pandas, pyarrow and nbkit, which any pandas reader pays too) and the readers'
    modules, which ``import nbkit`` leaves to the first use of ``nbkit.read_stream`` (``from nbkit import
    read_stream`` pays them at import), are timed apart from the first read."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []
    for _ in range(rounds):
        done = subprocess.run(
            [sys.executable, "-c", _FRESH, path, mode], env=env, capture_output=True, text=True, check=True
        )
        runs.append([float(x) for x in done.stdout.split()])
    imported, readers, first, second = (statistics.median(column) for column in zip(*runs, strict=True))
    return imported, readers, first, second


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--plot", metavar="PNG", help="also write a bar chart of every reader's median time to PNG")
    p.add_argument("--shape", choices=c.SHAPES, default="orders", help="the records' payloads (default: orders)")
    args = p.parse_args(argv)
    n = args.messages
    c.banner("peers: read_stream vs pandas, pyarrow and polars readers", args)
    print(f"   shape: {args.shape}")
    print(f"   nbkit core: {core.core_description()}")
    try:
        import polars as pl
    except ImportError:
        pl = None
        print("   polars is not installed (pip install -e '.[bench]'): its figures are left out")
    import pyarrow.json as pa_json

    results: list[bool] = []
    with c.workdir(args, "peers") as tmp:
        ss, nd, ss_size, nd_size = write_pair(tmp, n, args.shape)

        def file_bytes() -> int:
            with open(ss, "rb") as f:
                return len(f.read())

        readers: dict[str, Callable[[], object]] = {
            'read_stream(payload="json")': lambda: read_stream(ss, payload="json", progress=False),
            'read_stream(payload="objects")': lambda: read_stream(ss, payload="objects", progress=False),
            'read_stream(payload="json") [pure twin]': pure_twin(ss, "json"),
            'read_stream(payload="objects") [pure twin]': pure_twin(ss, "objects"),
            "pandas.read_json(lines=True)": lambda: pd.read_json(nd, lines=True),
            'pandas.read_json(lines=True, engine="pyarrow")': lambda: pd.read_json(nd, lines=True, engine="pyarrow"),
            "pyarrow.json.read_json().to_pandas()": lambda: pa_json.read_json(nd).to_pandas(),
            'read_stream(payload="bytes")': lambda: read_stream(ss, payload="bytes", progress=False),
            'read_stream(payload="bytes") [pure twin]': pure_twin(ss, "bytes"),
            "open(path, 'rb').read() (the I/O bound)": file_bytes,
        }
        if pl is not None:
            readers["polars.read_ndjson"] = lambda: pl.read_ndjson(nd)
            readers['polars.from_arrow(read_arrow(payload="json"))'] = lambda: pl.from_arrow(
                read_arrow(ss, payload="json", progress=False)
            )
        medians, got = interleaved(readers, args.repeat)
        for name, seconds in medians.items():
            c.row(name, seconds, n)
        if args.plot:
            c.bar_chart(
                args.plot,
                f"Reading {n:,} {args.shape} messages into a DataFrame: "
                f"a {ss_size / 1e6:,.0f} MB stream file (nbkit),\n"
                f"the same records as {nd_size / 1e6:,.0f} MB of NDJSON (the peers)",
                medians,
                _group,
                f"bench/peers.py --messages {n} --repeat {args.repeat}: medians of {args.repeat} interleaved rounds. "
                f"{c.machine()}; load average {c.load()}",
            )

        ours = got['read_stream(payload="json")']
        problems = check(ours, got['pandas.read_json(lines=True, engine="pyarrow")'], "json vs pandas(pyarrow)")
        problems += check(
            got['read_stream(payload="objects")'],
            got['pandas.read_json(lines=True, engine="pyarrow")'],
            "objects vs pandas(pyarrow)",
        )
        problems += check(ours, got["pyarrow.json.read_json().to_pandas()"], "json vs pyarrow.json")
        if pl is not None:
            problems += check(ours, got["polars.read_ndjson"].to_pandas(), "json vs polars")
            problems += polars_check(got['polars.from_arrow(read_arrow(payload="json"))'], got["polars.read_ndjson"])
        results.append(
            c.verdict(
                "identical values",
                not problems,
                "; ".join(problems) or "read_stream (json, objects) == pandas(pyarrow) == pyarrow.json == polars",
            )
        )

        arrow_pd = medians['pandas.read_json(lines=True, engine="pyarrow")']
        polars_s = medians["polars.read_ndjson"] if pl is not None else None
        ours_s = medians['read_stream(payload="json")']
        twin_s = medians['read_stream(payload="json") [pure twin]']
        results.append(
            c.verdict(
                'read_stream(payload="json") <= pandas.read_json(engine="pyarrow")',
                ours_s <= arrow_pd,
                f"{ours_s / arrow_pd:.2f}x its time (pure twin {twin_s / arrow_pd:.2f}x; target <= 1.00x)",
            )
        )
        if polars_s is not None:
            results.append(
                c.verdict(
                    'read_stream(payload="json") within 1.3x of polars.read_ndjson',
                    ours_s <= 1.3 * polars_s,
                    f"{ours_s / polars_s:.2f}x (pure twin {twin_s / polars_s:.2f}x; target <= 1.30x, "
                    f"aim <= 1.00x: {'met' if ours_s <= polars_s else 'not met'})",
                )
            )
        if polars_s is not None:
            to_polars = medians['polars.from_arrow(read_arrow(payload="json"))']
            print(
                f"   nbkit -> polars (read_arrow, from_arrow): {to_polars / polars_s:.2f}x polars.read_ndjson "
                f'on the same records ({to_polars / ours_s:.2f}x read_stream(payload="json"))'
            )
        # payload="objects" (an object per row, on request) has no target: its ratios, for scale
        obj_s = medians['read_stream(payload="objects")']
        obj_twin = medians['read_stream(payload="objects") [pure twin]']
        against_polars = "" if polars_s is None else f", {obj_s / polars_s:.2f}x polars.read_ndjson"
        print(
            f'   read_stream(payload="objects"): {obj_s / arrow_pd:.2f}x pandas.read_json(engine="pyarrow")'
            f"{against_polars}"
            f" (pure twin {obj_twin / arrow_pd:.2f}x pandas'; no target: a Python object per row, on request)"
        )
        io = medians["open(path, 'rb').read() (the I/O bound)"]
        b = medians['read_stream(payload="bytes")']
        bt = medians['read_stream(payload="bytes") [pure twin]']
        results.append(
            c.verdict(
                'read_stream(payload="bytes") within 1.5x of reading the file',
                b <= 1.5 * io,
                f"{b / io:.2f}x (pure twin {bt / io:.2f}x; target <= 1.50x)",
            )
        )
        imported, readers, first, second = fresh_reads(ss, "json", max(args.repeat, 3))
        results.append(
            c.verdict(
                'a first read_stream(payload="json") in a fresh process within 1.5x of the second',
                first <= 1.5 * second,
                f"{first / second:.2f}x: first {c.fmt_s(first)}, second {c.fmt_s(second)} "
                f"(import pandas, pyarrow, nbkit {c.fmt_s(imported)} and nbkit's readers {c.fmt_s(readers)}, "
                "not counted; "
                f"medians of {max(args.repeat, 3)} processes)",
            )
        )
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
