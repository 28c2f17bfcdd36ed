"""Loading: nbkit.read_stream(path, payload="json") against pandas.read_json(ndjson, lines=True).

The same messages (4 stream keys, JSON payloads of about 200 bytes) are written twice into a temporary
folder: as a stream file (nbkit's StreamWriter, default 1 MiB beacon interval) and as NDJSON, one flat
object per line (stream_key, shard_id, seq, timestamp in epoch ms, then the payload's fields).
Both sides are checked to hold identical values. Also: payload="bytes" against reading the file's
bytes (the I/O bound).

    python bench/read.py                      # 1,000,000 messages, 3 timed runs per side
    python bench/read.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import pandas as pd  # noqa: E402

from nbkit.tabular.frames import read_stream  # noqa: E402

TARGET = 2.0  # nbkit at least this many times faster than pandas.read_json


def write_ndjson(path: str, n: int, shape: str = "orders") -> int:
    """The records of ``c.write_stream(path, n, shape)`` as NDJSON (message fields beside the payload's)."""
    with open(path, "w") as f:
        for i in range(n):
            key, seq, ts, _ = c.message_fields(i, shape)
            record = {"stream_key": key, "shard_id": 0, "seq": seq, "timestamp": ts, **c.payload(i, shape)}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return os.path.getsize(path)


def write_pair(folder: str, n: int, shape: str = "orders", note: str = "") -> tuple[str, str, int, int]:
    """Write ``n`` messages to ``folder``/bench.ss and the same records to bench.ndjson, and print their sizes
    (``note`` after them); returns (stream path, NDJSON path, stream bytes, NDJSON bytes)."""
    ss = os.path.join(folder, "bench.ss")
    nd = os.path.join(folder, "bench.ndjson")
    ss_size = c.write_stream(ss, n, shape)
    nd_size = write_ndjson(nd, n, shape)
    print(f"   data: {ss_size / 1e6:,.1f} MB stream file, {nd_size / 1e6:,.1f} MB NDJSON{note}")
    return ss, nd, ss_size, nd_size


def as_ms(series: pd.Series) -> list[int]:
    values = series.dt.tz_localize(None) if series.dt.tz is not None else series
    return values.astype("datetime64[ms]").astype("int64").tolist()


def compare(nb: pd.DataFrame, pdf: pd.DataFrame) -> list[str]:
    """Column by column: the differences between read_stream's frame and read_json's (empty: none)."""
    problems = []
    if len(nb) != len(pdf):
        return [f"{len(nb)} rows against {len(pdf)}"]
    pairs = [("stream_key", "stream_key"), ("shard_id", "shard_id"), ("seq", "seq")]
    fields = [col for col in pdf.columns if col not in ("stream_key", "shard_id", "seq", "timestamp")]
    pairs += [(f"payload.{name}", name) for name in fields]
    for ours, theirs in pairs:
        if ours not in nb.columns:
            problems.append(f"read_stream has no column {ours}")
            continue
        a = nb[ours].astype(object).tolist()
        b = pdf[theirs].astype(object).tolist()
        if a != b:
            bad = sum(x != y for x, y in zip(a, b, strict=True))
            first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
            problems.append(f"{ours}: {bad} values differ (first at row {first}: {a[first]!r} vs {b[first]!r})")
    if as_ms(nb["timestamp"]) != as_ms(pdf["timestamp"]):
        problems.append("timestamp values differ")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n = args.messages
    c.banner("read: read_stream vs pandas.read_json", args)
    results = []
    with c.workdir(args, "read") as tmp:
        ss, nd, ss_size, nd_size = write_pair(tmp, n)

        t_nb = c.time_it(lambda: read_stream(ss, payload="json", progress=False), args.repeat)
        t_pd = c.time_it(lambda: pd.read_json(nd, lines=True), args.repeat)
        t_pdp = c.time_it(lambda: pd.read_json(nd, lines=True, precise_float=True), args.repeat)
        nb, pdf, pdp = t_nb.result, t_pd.result, t_pdp.result
        t_nb, t_pd, t_pdp = t_nb._replace(result=None), t_pd._replace(result=None), t_pdp._replace(result=None)
        c.row('read_stream(payload="json")', t_nb, n)
        c.row("pandas.read_json(lines=True)", t_pd, n)
        c.row("pandas.read_json(lines=True, precise_float=True)", t_pdp, n)

        exact = compare(nb, pdp)
        loose = compare(nb, pdf)
        print(f"   values vs read_json(precise_float=True): {'identical' if not exact else '; '.join(exact)}")
        print(f"   values vs read_json(default):            {'identical' if not loose else '; '.join(loose)}")
        if loose and not exact:
            print("   (pandas' default float parser is not correctly rounded; read_stream's values are the JSON's)")
        del nb, pdf, pdp
        results.append(c.verdict("identical values", not exact, "read_stream == read_json(precise_float=True)"))
        results.append(
            c.verdict(
                f"read_stream at least {TARGET:g}x faster than read_json",
                t_pd.wall / t_nb.wall >= TARGET,
                f"{c.ratio(t_pd, t_nb)} faster; against precise_float=True: {c.ratio(t_pdp, t_nb)}",
            )
        )

        def read_bytes() -> int:
            with open(ss, "rb") as f:
                return len(f.read())

        t_b = c.time_it(lambda: read_stream(ss, payload="bytes", progress=False), args.repeat)
        t_io = c.time_it(read_bytes, args.repeat)
        c.row('read_stream(payload="bytes")', t_b, n)
        c.row("open(path, 'rb').read() (the I/O bound)", t_io, n, f"{ss_size / t_io.wall / 1e9:.2f} GB/s")
        print(f"   ratio bytes/I-O bound: {c.ratio(t_b, t_io)} (reported, no target)")
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
