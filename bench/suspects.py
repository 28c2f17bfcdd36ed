"""Suspect records: what the header-field check costs a read, how often it cries wolf, what it catches.

The frame checksum covers only the payload, so every read checks each record's shard, sequence number and
timestamp against its own (key, shard) stream (``nbkit.transport.plausibility.suspects``). This prints:

- its cost against the read's: ``read_stream(path)`` of ``--messages`` messages written by
  bench/_common.py's ``write_stream`` (4 keys, ~200-byte JSON), and the check alone on that read's columns;
- false positives: records flagged in healthy files of ``--messages`` messages each: an end-of-stream mark
  written days after the last message, appends days apart (numbering continued, and restarted), merged
  producers (three writers interleaving their own sequences, finely and in bursts, clocks seconds apart),
  clock steps (an hour back, a day forward, a few ms back), keys over several shards, records stamped
  before they were written (waits for the file's lock) and producers' event times arriving late;
- detection: ``--files`` copies of a ``--damaged-messages`` file, each with ``--flips`` random single bits
  flipped in the seq, timestamp or shard field of records spread over the file; how many are flagged (a
  timestamp moved by less than ``TIME_TOLERANCE_MS`` is below what the check looks at: counted apart), and
  how many other records are flagged.

Targets: the check within 10% of the read; no false positive; every seq flip and at least 95% of the
timestamp flips above the tolerance (an hour) caught; nothing else flagged in the damaged files.

    python bench/suspects.py                     # 300,000 messages
    python bench/suspects.py --messages 2000 --repeat 1 --files 4
"""

from __future__ import annotations

import os
import random
import sys
import warnings
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import numpy as np  # noqa: E402

from nbkit.tabular.frames import read_stream  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.transport.plausibility import TIME_TOLERANCE_MS, suspects  # noqa: E402

DAY = 86_400_000
#: The lowest timestamp bit whose flip moves a record past the check's tolerance.
LOW = TIME_TOLERANCE_MS.bit_length()
KEYS = c.KEYS


def columns(frame) -> tuple:  # noqa: ANN001 - a read frame
    """What the read hands the check: key names, key codes, shard, seq, timestamp (ms), offset."""
    cat = frame["stream_key"].cat
    return (
        [str(k) for k in cat.categories],
        cat.codes.to_numpy(),
        frame["shard_id"].to_numpy(dtype=np.uint64),
        frame["seq"].to_numpy(dtype=np.uint64),
        frame["timestamp"].to_numpy(dtype="datetime64[ms]").astype(np.int64),
        frame["offset"].to_numpy(dtype=np.int64),
    )


# -- healthy files: each a list of (key, shard, seq, timestamp) in file order ---------------------------


def _plain(n: int, t0: int = c.T0_MS, seq0: int = 1) -> list[tuple[str, int, int, int]]:
    return [(KEYS[i % 4], 0, seq0 + i // 4, t0 + i) for i in range(n)]


def eos_days_later(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    last = _plain(n)
    return [*last, ("SEA_STREAMER_INTERNAL", 0, 0, last[-1][3] + 3 * DAY + 7)]


def appends_continued(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    out: list[tuple[str, int, int, int]] = []
    seq = dict.fromkeys(KEYS, 0)
    for part in range(3):  # three sessions days apart, each continuing the numbering
        for i in range(n // 3):
            key = KEYS[i % 4]
            seq[key] += 1
            out.append((key, 0, seq[key], c.T0_MS + part * 5 * DAY + i))
    return out


def appends_restarted(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    return [rec for part in range(3) for rec in _plain(n // 3, c.T0_MS + part * 9 * DAY)]  # seq from 1 each time


def _merged(n: int, rng: random.Random, burst: int) -> list[tuple[str, int, int, int]]:
    writers = 3
    skew = [0, 2_500, -7_300]  # each writer's clock, ms off the first's
    seqs = [dict.fromkeys(KEYS, 0) for _ in range(writers)]
    out: list[tuple[str, int, int, int]] = []
    w = 0
    for i in range(n):
        if i % burst == 0 or burst == 1:
            w = rng.randrange(writers)
        key = rng.choice(KEYS[:2])
        seqs[w][key] += 1
        out.append((key, 0, seqs[w][key], c.T0_MS + i + skew[w]))
    return out


def merged_fine(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    return _merged(n, rng, 1)


def merged_bursts(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    return _merged(n, rng, 50)


def clock_steps(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    out = []
    for k, sh, s, t in _plain(n):
        i = (s - 1) * 4
        if i >= n // 4:
            t -= 3_600_000  # an hour back
        if i >= n // 2:
            t += DAY  # a day forward
        if i >= 3 * n // 4:
            t -= 5  # a few ms back
        out.append((k, sh, s, t))
    return out


def late_stamps(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    """One run, 1% of records stamped up to the writer's 10 s lock timeout before they were written."""
    return [
        (k, sh, s, t * 10 - c.T0_MS * 9 - (rng.randrange(10_000) if rng.random() < 0.01 else 0))
        for k, sh, s, t in _plain(n)
    ]


def event_times(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    """One run stamped with the producer's event times: 1% of them up to 30 minutes late."""
    return [
        (k, sh, s, t * 100 - c.T0_MS * 99 - (rng.randrange(1_800_000) if rng.random() < 0.01 else 0))
        for k, sh, s, t in _plain(n)
    ]


def shards_per_key(n: int, rng: random.Random) -> list[tuple[str, int, int, int]]:
    seq: dict[tuple[str, int], int] = {}
    out = []
    for i in range(n):
        key, shard = KEYS[i % 4], rng.randrange(3)
        seq[key, shard] = seq.get((key, shard), 0) + 1
        out.append((key, shard, seq[key, shard], c.T0_MS + i))
    return out


HEALTHY: dict[str, Callable[[int, random.Random], list[tuple[str, int, int, int]]]] = {
    "EOS mark 3 days after the last message": eos_days_later,
    "appends 5 days apart, numbering continued": appends_continued,
    "appends 9 days apart, numbering restarted": appends_restarted,
    "3 merged producers, interleaved one by one": merged_fine,
    "3 merged producers, in bursts of 50": merged_bursts,
    "clock steps: 1 h back, 1 day forward, 5 ms back": clock_steps,
    "keys over 3 shards, numbered per shard": shards_per_key,
    "1% stamped up to 10 s before written (lock waits)": late_stamps,
    "event times, 1% up to 30 min late": event_times,
}


def write_records(path: str, records: list[tuple[str, int, int, int]]) -> None:
    with StreamWriter(path, file_name="healthy.ss", created_at_ms=c.T0_MS, flush_every=4096) as w:
        for i, (key, shard, seq, ts) in enumerate(records):
            w.write(key, b'{"i":%d}' % i, shard_id=shard, seq=seq, timestamp_ms=ts)


# -- damaged copies ------------------------------------------------------------------------------------

FIELD_AT = {"shard": 0, "seq": 8, "timestamp": 16}  # byte offset of each u64 field after the key


def flip_copy(data: bytes, frame, rows: list[int], rng: random.Random) -> tuple[bytes, list[tuple[int, str, int]]]:  # noqa: ANN001
    """``data`` with one random bit flipped in one header field of each row; what was flipped, per row."""
    raw = bytearray(data)
    done = []
    for row in rows:
        offset, key = int(frame["offset"].iat[row]), str(frame["stream_key"].iat[row])
        field = rng.choice(("seq", "seq", "timestamp", "timestamp", "shard"))
        bit = rng.randrange(64)
        at = offset + 1 + len(key) + FIELD_AT[field] + 7 - bit // 8  # big-endian u64
        raw[at] ^= 1 << (bit % 8)
        done.append((offset, field, bit))
    return bytes(raw), done


def main() -> int:
    p = c.parser(__doc__.splitlines()[0], messages=300_000)
    p.add_argument("--files", type=int, default=40, metavar="F", help="damaged copies (default 40)")
    p.add_argument("--flips", type=int, default=5, metavar="B", help="flipped bits per copy (default 5)")
    p.add_argument(
        "--damaged-messages", type=int, default=30_000, metavar="M", help="messages of the damaged file (30,000)"
    )
    args = p.parse_args()
    c.banner("suspects: the header-field check's cost, false positives and detection", args)
    print(f"   time tolerance: {TIME_TOLERANCE_MS} ms")
    results = []
    rng = random.Random(35)
    n = args.messages
    with c.workdir(args, "suspects") as tmp:
        # cost
        path = os.path.join(tmp, "bench.ss")
        c.write_stream(path, n)
        read = c.time_it(lambda: read_stream(path, progress=False), args.repeat)
        cols = columns(read.result)
        created = c.T0_MS
        check = c.time_it(lambda: suspects(*cols, created_at_ms=created), max(args.repeat, 5))
        c.row("read_stream(path)", read, n)
        c.row("suspects(...) on its columns", check, n, f"{len(check.result)} flagged")  # type: ignore[arg-type]
        share = check.wall / read.wall
        results.append(c.verdict("the check within 10% of the read", share <= 0.10, f"{share:.1%} of it"))
        del read
        # false positives
        false = 0
        for label, make in HEALTHY.items():
            recs = make(n, rng)
            file = os.path.join(tmp, "healthy.ss")
            c.remove(file)
            write_records(file, recs)
            got = read_stream(file, include_internal=True, progress=False).attrs["suspect"]
            false += len(got)
            print(f"   {label:<50} {len(recs):>9,} records  {len(got)} flagged")
        results.append(c.verdict("no false positive on healthy files", false == 0, f"{false} flagged"))
        # detection
        m = args.damaged_messages if args.messages >= args.damaged_messages else args.messages
        base = os.path.join(tmp, "base.ss")
        c.write_stream(base, m, "small")
        with open(base, "rb") as f:
            data = f.read()
        frame = read_stream(base, progress=False)
        # per kind: flips, flagged suspect, refused by the reader, lost in an earlier flip's damaged region
        hits = {kind: [0, 0, 0, 0] for kind in ("seq", "timestamp", "below", "shard")}
        others = 0
        for i in range(args.files):
            stride = m // args.flips
            rows = [j * stride + rng.randrange(8, stride - 8) for j in range(args.flips)]
            raw, done = flip_copy(data, frame, rows, rng)
            bad = os.path.join(tmp, f"bad{i}.ss")
            with open(bad, "wb") as f:
                f.write(raw)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = read_stream(bad, on_bad_frames="skip", progress=False)
            flagged = {s["offset"] for s in got.attrs["suspect"]}
            regions = [(r["start"], r["end"]) for r in got.attrs["damaged"]]
            for offset, field, bit in done:
                kind = "below" if field == "timestamp" and bit < LOW else field
                if any(lo < offset < hi for lo, hi in regions):
                    hits[kind][3] += 1  # lost in the damaged region of an earlier flip: neither caught nor missed
                    continue
                hits[kind][0] += 1
                if offset in flagged:
                    hits[kind][1] += 1
                elif any(lo == offset for lo, _ in regions):
                    hits[kind][2] += 1  # refused by the reader (a timestamp after year 9999): a damaged region
            others += len(flagged - {offset for offset, _, _ in done})
            os.remove(bad)
        for kind, (total, caught, refused, lost) in hits.items():
            what = {"below": f"timestamp flips below 2**{LOW} ms (tolerance)"}.get(kind, f"{kind} flips")
            rate = (caught + refused) / total if total else 1.0
            print(
                f"   {what:<50} {total:>5}: {caught} flagged suspect, {refused} refused by the reader "
                f"({rate:.0%} caught; {lost} more lost in an earlier flip's damaged region)"
            )
        seq_total, seq_caught, seq_refused, _ = hits["seq"]
        ts_total, ts_caught, ts_refused, _ = hits["timestamp"]
        seq_ok = seq_caught + seq_refused
        results.append(c.verdict("every seq flip caught", seq_ok == seq_total, f"{seq_ok} of {seq_total}"))
        ts_rate = (ts_caught + ts_refused) / ts_total if ts_total else 1.0
        results.append(
            c.verdict(
                f"timestamp flips of 2**{LOW} ms and more caught", ts_rate >= 0.95, f"{ts_rate:.0%} (target >= 95%)"
            )
        )
        results.append(c.verdict("nothing else flagged in the damaged files", others == 0, f"{others} other records"))
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
