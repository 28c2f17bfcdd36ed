"""Parquet: nbkit.read_parquet against pyarrow's own read of the same file, and what columns=/keys= save.

The records of bench/_common.py (4 stream keys, ``--shape`` picks the payloads) are written as a stream
file and exported with ``nbkit.to_parquet(payload=...)`` (``--payload``, json by default: the field
columns too). Then, interleaved round by round (the machine's load hits them alike; the first round a
warm-up, medians reported):

- ``nbkit.read_parquet(out)``: the frame read_stream gives, columns and dtypes exact;
- ``pyarrow.parquet.read_table(out).to_pandas()``: pyarrow's own read of the same file (its dtypes, not
  the frame's: binary payloads as bytes objects, header maps as lists of tuples);
- ``read_parquet(out, columns=[...])`` and ``read_parquet(out, keys=...)``: projection and key filter.

Values are checked: ``read_parquet(out)`` equals ``read_stream`` of the stream file, and the cut reads
equal the full read cut afterwards. Target: read_parquet within 1.5x of pyarrow's read.

    python bench/parquet.py                   # 1,000,000 messages, 3 timed rounds
    python bench/parquet.py --messages 300000 --shape small --payload auto
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from nbkit.scale.parquet import read_parquet, to_parquet  # noqa: E402
from nbkit.tabular.frames import read_stream  # noqa: E402

TARGET = 1.5  # read_parquet within this many times pyarrow's read_table().to_pandas()


def interleaved(runs: dict[str, object], repeat: int) -> dict[str, c.Timing]:
    """Each run once per round, a warm-up round then ``repeat`` timed ones; the medians per run."""
    walls: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    import gc
    import statistics
    import time

    for round_ in range(repeat + 1):
        for name, fn in runs.items():
            gc.collect()
            c0 = c._cpu()
            t = time.perf_counter()
            result = fn()  # type: ignore[operator]
            wall, cpu = time.perf_counter() - t, c._cpu() - c0
            del result
            if round_:
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {
        name: c.Timing(statistics.median(walls[name]), statistics.median(cpus[name]), walls[name], None)
        for name in runs
    }


def main() -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--shape", choices=c.SHAPES, default="orders", help="the records' payloads (default: orders)")
    p.add_argument("--payload", default="json", help="the export's payload mode (default: json)")
    args = p.parse_args()
    c.banner("parquet: nbkit.read_parquet vs pyarrow.parquet.read_table().to_pandas()", args)
    n = args.messages
    results = []
    with c.workdir(args, "parquet") as tmp:
        src, out = os.path.join(tmp, "s.ss"), os.path.join(tmp, "s.parquet")
        size = c.write_stream(src, n, args.shape)
        to_parquet(src, out, payload=args.payload)
        meta = pq.read_metadata(out)
        print(
            f"   shape: {args.shape}, payload={args.payload!r}; data: {size / 1e6:.1f} MB stream file, "
            f"{os.path.getsize(out) / 1e6:.1f} MB Parquet "
            f"({meta.num_row_groups} row groups, {meta.num_columns} columns)"
        )
        columns = ["stream_key", "seq", "timestamp"] + [
            name for name in pq.read_schema(out).names if name.startswith("payload.")
        ][:1]
        key = c.KEYS[0]
        timed = interleaved(
            {
                "nbkit": lambda: read_parquet(out),
                "pyarrow": lambda: pq.read_table(out).to_pandas(),
                "columns": lambda: read_parquet(out, columns=columns),
                "keys": lambda: read_parquet(out, keys=key),
            },
            args.repeat,
        )
        c.row("nbkit.read_parquet(out)", timed["nbkit"], n)
        c.row("pyarrow.parquet.read_table(out).to_pandas()", timed["pyarrow"], n)
        c.row(f"read_parquet(out, columns={len(columns)} of {meta.num_columns})", timed["columns"], n)
        c.row(f"read_parquet(out, keys={key!r}) (1 key of {len(c.KEYS)})", timed["keys"], n)
        full = read_parquet(out)
        same = full.equals(read_stream(src, payload=args.payload, progress=False))
        cut = full[columns]
        by_key = full[full["stream_key"] == key].reset_index(drop=True)
        by_key["stream_key"] = by_key["stream_key"].cat.remove_unused_categories()
        same_cut = read_parquet(out, columns=columns).equals(cut) and read_parquet(out, keys=key).equals(by_key)
        results.append(c.verdict("read_parquet(out) equals read_stream (columns, dtypes, values)", same, "checked"))
        results.append(c.verdict("columns= / keys= equal the full read cut afterwards", same_cut, "checked"))
        results.append(
            c.within(
                f"read_parquet within {TARGET:g}x of pyarrow's read_table().to_pandas()",
                timed["nbkit"],
                timed["pyarrow"],
                TARGET,
            )
        )
        print(
            f"   columns= takes {c.ratio(timed['columns'], timed['nbkit'])} the full read; "
            f"keys= {c.ratio(timed['keys'], timed['nbkit'])}"
        )
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
