"""Lazy scan: nbkit.polars.scan_stream with a one-key filter vs the eager read of the whole file vs polars.read_ndjson.

The same messages (4 stream keys, JSON payloads of about 200 bytes) are written as a stream file (nbkit's
StreamWriter, default 1 MiB beacon interval) and as NDJSON (bench/read.py's records). Timed: the lazy scan
filtered to one key (a quarter of the rows), the eager ``pl.from_arrow(nbkit.read_arrow(path))`` of the whole
file, ``polars.read_ndjson`` of the whole NDJSON and ``polars.scan_ndjson`` filtered to the same key; also the
lazy scan filtered to the last tenth of the time range (a window found from the beacons). The filtered scans are
checked equal to the eager read filtered the same way.

Target: the one-key scan faster than the eager read of the whole file.

    python bench/scan.py                      # 1,000,000 messages, 3 timed runs per side
    python bench/scan.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import datetime as dt
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
from read import write_pair  # noqa: E402

import nbkit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n = args.messages
    import polars as pl

    from nbkit.polars import scan_stream

    c.banner("scan: nbkit.polars.scan_stream vs the eager read vs polars.read_ndjson", args)
    results = []
    with c.workdir(args, "scan") as tmp:
        ss, nd, _, _ = write_pair(tmp, n, note=f", polars {pl.__version__}")

        one_key = pl.col("stream_key") == "orders"
        late = dt.datetime.fromtimestamp((c.T0_MS + n * 9 // 10) / 1000, dt.UTC)
        t_scan = c.time_it(lambda: scan_stream(ss, progress=False).filter(one_key).collect(), args.repeat)
        t_late = c.time_it(
            lambda: scan_stream(ss, progress=False).filter(pl.col("timestamp") > late).collect(), args.repeat
        )
        t_eager = c.time_it(lambda: pl.from_arrow(nbkit.read_arrow(ss, progress=False)), args.repeat)
        t_nd = c.time_it(lambda: pl.read_ndjson(nd), args.repeat)
        t_ndscan = c.time_it(lambda: pl.scan_ndjson(nd).filter(one_key).collect(), args.repeat)
        c.row('scan_stream(path).filter(key == "orders")', t_scan, n, f"{t_scan.result.height:,} rows")
        c.row("scan_stream(path).filter(timestamp > last tenth)", t_late, n, f"{t_late.result.height:,} rows")
        c.row("pl.from_arrow(nbkit.read_arrow(path)) (whole file)", t_eager, n, f"{t_eager.result.height:,} rows")
        c.row("polars.read_ndjson(ndjson) (whole file)", t_nd, n, f"{t_nd.result.height:,} rows")
        c.row('polars.scan_ndjson(ndjson).filter(key == "orders")', t_ndscan, n, f"{t_ndscan.result.height:,} rows")

        eager = t_eager.result
        same = t_scan.result.equals(eager.filter(one_key)) and t_late.result.equals(
            eager.filter(pl.col("timestamp") > late)
        )
        results.append(c.verdict("identical values", same, "each filtered scan == the eager read filtered alike"))
        results.append(
            c.verdict(
                "one-key scan faster than the eager read of the whole file",
                t_scan.wall < t_eager.wall,
                f"{c.ratio(t_eager, t_scan)} faster; the time window: {c.ratio(t_eager, t_late)} faster",
            )
        )
        print(f"   against polars.read_ndjson of the whole NDJSON: {c.ratio(t_nd, t_scan)} faster (no target)")
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
