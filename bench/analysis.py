"""Analysis reads on a production-like file: mixed-key JSON against the per-key sum, a time window against
the seeking form, and read_parquet against pyarrow's own reader.

The file (``nbkit.notebook.production``): four keys with their own retry policies and dead-letter keys,
an outage in the middle, JSON payloads (``audit``: plain text). Printed:

- ``read_stream(payload="json")`` over every key, against the sum of one such read per key (target: at
  most 1.3x the sum);
- a string ``start`` with an ``end`` against ``start=FilePosition.timestamp`` for one key: time and bytes
  read (``rchar`` of ``/proc/self/io``), against the whole file;
- ``nbkit.read_parquet`` of the export against ``pyarrow.parquet.read_table(...).to_pandas()``.

    python bench/analysis.py                        # 300,000 messages, 3 timed runs
    python bench/analysis.py --messages 20000 --repeat 1
"""

from __future__ import annotations

import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

import nbkit  # noqa: E402
from nbkit import FilePosition  # noqa: E402
from nbkit.notebook.production import T0_MS, write_production_file  # noqa: E402

TARGET_MIXED = 1.3


def _rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0], messages=300_000).parse_args(argv)
    c.banner("analysis reads (bench/analysis.py)", args)
    results = []
    with c.workdir(args, "analysis") as folder:
        path = os.path.join(folder, "prod.ss")
        records = write_production_file(path, messages=args.messages, beacon_interval=1 << 20)
        size = os.path.getsize(path)
        print(f"   file: {records:,} records, {size / 1e6:.1f} MB")
        warnings.simplefilter("ignore")
        keys = sorted(str(k) for k in nbkit.read_stream(path, payload="bytes")["stream_key"].cat.categories)
        json_keys = [k for k in keys if k != "audit"]

        mixed = c.time_it(lambda: nbkit.read_stream(path, keys=json_keys, payload="json"), args.repeat)
        parts = [c.time_it(lambda k=k: nbkit.read_stream(path, keys=k, payload="json"), args.repeat) for k in json_keys]
        total = sum(p.wall for p in parts)
        c.row("json, every JSON key at once", mixed, records)
        print(f"   json, one read per key, summed: {c.fmt_s(total)}")
        results.append(
            c.verdict(
                "mixed-key JSON read", mixed.wall <= TARGET_MIXED * total, f"{mixed.wall / total:.2f}x the per-key sum"
            )
        )

        at = T0_MS + 3 * 3_600_000  # 3 h in, a 30-minute window
        until = at + 1_800_000
        for label, call in (
            ("whole file, one key", lambda: nbkit.read_stream(path, keys="orders")),
            (
                "FilePosition.timestamp, one key",
                lambda: nbkit.read_stream(path, keys="orders", start=FilePosition.timestamp(at)),
            ),
            (
                "ISO start + end, one key",
                lambda: nbkit.read_stream(path, keys="orders", start=_iso(at), end=_iso(until)),
            ),
            ("ISO start + end, every key", lambda: nbkit.read_stream(path, start=_iso(at), end=_iso(until))),
        ):
            before = _rchar()
            t = c.time_it(call, 1)
            read = _rchar() - before
            c.row(label, t, records, f"read {read / 1e6:.1f} MB of {size / 1e6:.1f} MB (2 runs)")

        out = os.path.join(folder, "prod.parquet")
        nbkit.to_parquet(path, out, payload="json")
        import pyarrow.parquet as pq

        ours = c.time_it(lambda: nbkit.read_parquet(out), args.repeat)
        theirs = c.time_it(lambda: pq.read_table(out).to_pandas(), args.repeat)
        stream = c.time_it(lambda: nbkit.read_stream(path, payload="json"), args.repeat)
        c.row("nbkit.read_parquet", ours, records)
        c.row("pyarrow read_table().to_pandas()", theirs, records)
        c.row("nbkit.read_stream of the .ss (json)", stream, records)
        print(f"   read_parquet is {c.ratio(ours, theirs)} pyarrow's own reader")
    return c.finish(results)


def _iso(ms: int) -> str:
    import pandas as pd

    return pd.Timestamp(ms, unit="ms").isoformat()


if __name__ == "__main__":
    raise SystemExit(main())
