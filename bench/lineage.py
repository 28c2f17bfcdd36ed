"""Linking: nbkit.lineage(read_stream(path)) on a file with N messages and their retry copies.

N original messages (4 stream keys, JSON payloads of about 200 bytes, one per millisecond) as a retrying
service leaves them: 30 % retried once after 2 s, 10 % of those again after 4 s, and a third of those
dead-lettered at the cap, every copy enveloped with the retry count and stream-sequence as nbkit and
ruststream write them, interleaved in due order. One message in 50 repeats another's payload. The
timed part is ``lineage(frame)`` on a frame already read (``read_stream`` is timed too, for scale).
Checked: every copy links, to the record it copies, with the scheduled delay.

    python bench/lineage.py                      # 1,000,000 messages, 3 timed runs
    python bench/lineage.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import heapq
import json
import math
import os
import sys
from typing import cast

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import pandas as pd  # noqa: E402

from nbkit.tabular.frames import read_stream  # noqa: E402
from nbkit.tabular.lineage import lineage  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.wire import envelope  # noqa: E402

TARGET_S_PER_MILLION = 5.0  # "a few seconds" for 1,000,000 messages
DELAYS_S = (2, 4)  # the schedule: attempt 2 after 2 s, attempt 3 after 4 s


def plan(i: int) -> int:
    """How many retry copies message ``i`` gets: 0, 1, 2, or 3 (the third is the dead-letter copy)."""
    roll = (i * 2_654_435_761) % 1000
    return 0 if roll >= 300 else 1 if roll >= 100 else 2 if roll >= 33 else 3


def write_service_file(path: str, n: int) -> tuple[int, int]:
    """Write the originals and their copies in time order; returns (records, copies)."""
    pending: list[tuple[int, int, str, int, int, bytes, int]] = []  # (due ms, order, key, count, ...)
    seqs: dict[str, int] = {}
    records = copies = 0
    order = 0

    def write(w: StreamWriter, key: str, data: bytes, ts: int) -> int:
        seq = seqs.get(key, 0) + 1
        seqs[key] = seq
        w.write(key, data, seq=seq, timestamp_ms=ts)
        return seq

    def schedule(w: StreamWriter, key: str, body: bytes, ts: int, seq: int, count: int, left: int) -> None:
        nonlocal order
        if left == 0:
            return
        order += 1
        if left == 1 and count == 2:  # at the cap: dead-lettered at once
            heapq.heappush(pending, (ts, order, key, count + 1, seq, body, 0))
        else:
            heapq.heappush(pending, (ts + 1000 * DELAYS_S[count], order, key, count + 1, seq, body, left - 1))

    def write_due(w: StreamWriter, until: float) -> None:
        """Write the pending copies due by ``until`` (ms) in due order, scheduling each one's next copy."""
        nonlocal records, copies
        while pending and pending[0][0] <= until:
            due, _, key, count, prev_seq, body, left = heapq.heappop(pending)
            headers = {envelope.SEQUENCE_HEADER: str(prev_seq), envelope.RETRY_COUNT_HEADER: str(count)}
            target = "orders.dead" if left == 0 and count == 3 else key
            seq = write(w, target, envelope.encode(headers, body, force_text=False), due)
            records += 1
            copies += 1
            if target == key:
                schedule(w, key, body, due, seq, count, left)

    with StreamWriter(path, file_name="lineage.ss", created_at_ms=c.T0_MS, flush_every=4096) as w:
        for i in range(n):
            ts = c.T0_MS + i
            write_due(w, ts)
            key = c.KEYS[i % len(c.KEYS)]
            body = json.dumps(c.payload(i if i % 50 else i - 50 if i >= 50 else 0), separators=(",", ":")).encode()
            seq = write(w, key, body, ts)
            records += 1
            schedule(w, key, body, ts, seq, 0, plan(i))
        write_due(w, math.inf)
    return records, copies


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n = args.messages
    c.banner("lineage: link retry copies to their originals", args)
    results = []
    with c.workdir(args, "lineage") as tmp:
        path = os.path.join(tmp, "lineage.ss")
        records, copies = write_service_file(path, n)
        print(f"   data: {n:,} messages, {copies:,} copies, {records:,} records, {os.path.getsize(path) / 1e6:,.1f} MB")
        t_read = c.time_it(lambda: read_stream(path, progress=False), args.repeat)
        frame = cast(pd.DataFrame, t_read.result)
        t_link = c.time_it(lambda: lineage(frame), args.repeat)
        lin = cast(pd.DataFrame, t_link.result)
        c.row("read_stream (for scale)", t_read, records)
        c.row("lineage(frame)", t_link, records)
        target = max(TARGET_S_PER_MILLION * n / 1_000_000, 0.5)  # a floor: tiny runs are mostly overhead
        results.append(
            c.verdict(
                f"linking {n:,} messages in at most {c.fmt_s(target)}",
                t_link.wall <= target,
                f"{c.fmt_s(t_link.wall)} (median of {len(t_link.walls)})",
            )
        )
        retries = lin[lin["delay"].notna() & ~lin["dead_letter"]]
        observed = sorted({d.total_seconds() for d in retries["delay"]})
        dead = lin[lin["dead_letter"]]
        ok = (
            lin.attrs["unlinked_copies"] == 0
            and lin["message"].nunique() == n
            and observed == [float(d) for d in DELAYS_S][: len(observed)]
            and (dead["delay"].dt.total_seconds() == 0).all()
            and (lin.groupby("message")["final_state"].first() == "dead-lettered").sum() == len(dead)
        )
        results.append(
            c.verdict(
                "every copy linked with its scheduled delay",
                ok,
                f"{lin['message'].nunique():,} messages, unlinked {lin.attrs['unlinked_copies']}, "
                f"ambiguous {lin.attrs['ambiguous_links']}, observed delays {observed} s, {len(dead):,} dead letters",
            )
        )
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
