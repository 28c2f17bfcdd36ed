"""The JupyterLab stream viewer's server side on a large file: how fast a file opens and how fast it scrolls.

Writes ``--messages`` messages (default 10,000,000; 4 keys, ~50-byte JSON payloads) with nbkit's
``StreamWriter`` into a temporary folder (deleted afterwards unless ``--keep``), then does what the
viewer's handlers do for a browser (``nbkit.lab``: the index cache, the summary and the message pages),
without the HTTP layer:

- **open**: from a cold start (a new index) to the summary and the first page of 100 rows, as the viewer's
  first two requests get them (the summary then covers the part indexed so far; indexing goes on in the
  background), and how long the background pass takes to index the whole file;
- **scroll**: pages of 100 rows at ``--pages`` random rows over the whole file (every key, and one key),
  and "go to" a sequence number and a time, once the index is complete.

Targets: open < 2 s; a page < 0.1 s (median) while scrolling.

    python bench/viewer.py
    python bench/viewer.py --messages 200000 --pages 20
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit.lab.cache import IndexCache  # noqa: E402
from nbkit.lab.pages import read_page, row_of  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402

KEYS = ("orders", "payments", "shipments", "refunds")


def write(path: str, n: int) -> int:
    """``n`` messages over 4 keys, one per millisecond from 2024-01-01, with nbkit's writer; returns bytes."""
    with StreamWriter(path, created_at_ms=c.T0_MS, exclusive=True, flush_every=4096) as w:
        for i in range(n):
            w.write(
                KEYS[i % 4], b'{"id":%d,"amount":%d.5,"note":"order %d"}' % (i, i % 997, i), timestamp_ms=c.T0_MS + i
            )
    return os.path.getsize(path)


def main() -> int:
    p = c.parser(__doc__.splitlines()[0], messages=10_000_000, repeat=1)
    p.add_argument("--pages", type=int, default=50, help="random pages read while scrolling (default 50)")
    args = p.parse_args()
    c.banner("viewer: open and scroll (nbkit.lab)", args)
    n = args.messages
    results = []
    with c.workdir(args, "viewer") as folder:
        path = os.path.join(folder, "big.ss")
        t = time.perf_counter()
        size = write(path, n)
        print(f"   wrote {n:,} messages ({size / 1e6:,.0f} MB) in {time.perf_counter() - t:.1f} s")
        with open(path, "rb") as f:  # the file in the page cache, as after writing it (or a first open)
            while f.read(1 << 24):
                pass

        opens = []
        for _ in range(max(1, args.repeat)):
            cache = IndexCache()
            t = time.perf_counter()
            index = cache.get(path, "big.ss")
            index.refresh(wait=1.0) if index.all.count == 0 else None  # what the handler waits for at most
            summary = index.summary()
            page = read_page(index, 0, 100)
            opened = time.perf_counter() - t
            opens.append(opened)
            shown = summary.message_count
            index.refresh(wait=600)
            indexed = time.perf_counter() - t
            if len(opens) < max(1, args.repeat):
                cache.close()
        opened = statistics.median(opens)
        assert len(page["rows"]) == 100 and page["rows"][99]["seq"] == 25
        print(
            f"   open: summary + first page of 100 rows in {c.fmt_s(opened)} (summary then covered {shown:,} messages)"
        )
        print(
            f"   whole file indexed in the background after {c.fmt_s(indexed)} ({n / indexed / 1e6:.1f} M messages/s)"
        )
        assert index.summary().message_count == n
        results.append(c.verdict("open < 2 s", opened < 2.0, c.fmt_s(opened)))

        rng = random.Random(7)
        times, key_times = [], []
        for _ in range(args.pages):
            row = rng.randrange(n - 100)
            t = time.perf_counter()
            page = read_page(index, row, 100)
            times.append(time.perf_counter() - t)
            assert page["rows"][0]["row"] == row and page["rows"][0]["payload"]["text"].startswith(f'{{"id":{row},')
            row = rng.randrange(n // 4 - 100)
            t = time.perf_counter()
            page = read_page(index, row, 100, key="payments")
            key_times.append(time.perf_counter() - t)
            assert page["rows"][0]["seq"] == row + 1
        t = time.perf_counter()
        found = row_of(index, seq=n // 8, seq_key="payments")
        go_seq = time.perf_counter() - t
        assert found == (n // 8 - 1) * 4 + 1
        t = time.perf_counter()
        found = row_of(index, time_ms=c.T0_MS + n // 3)
        go_time = time.perf_counter() - t
        assert found == n // 3
        med, worst = statistics.median(times), max(times)
        print(f"   scroll: a page of 100 rows (every key) median {c.fmt_s(med)}, slowest {c.fmt_s(worst)}")
        one_med, one_worst = c.fmt_s(statistics.median(key_times)), c.fmt_s(max(key_times))
        print(f"   scroll: a page of 100 rows of one key median {one_med}, slowest {one_worst}")
        print(f"   go to: a sequence number {c.fmt_s(go_seq)}, a time {c.fmt_s(go_time)}")
        results.append(c.verdict("a page < 0.1 s while scrolling (median)", med < 0.1, c.fmt_s(med)))
        cache.close()
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
