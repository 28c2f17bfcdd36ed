"""Salvage: how much of a damaged stream file ``on_bad_frames="skip"`` recovers, and that it invents nothing.

Writes ``--files`` random stream files (beacon interval 1024, ``--messages`` messages each, payloads of
0-4000 bytes over 2 keys; fixed seed), damages each (1-3 flipped bytes or zeroed blocks of up to 700
bytes, or one cut-out or inserted run of up to 2000 bytes, which moves every later beacon off the
grid) and reads it three ways: the strict reader
(what nbkit did before: everything up to the first damage), the salvage read, and the writer's truth.

"Best possible" is what a beacon-resynchronising reader is bound to recover: every message whose bytes
are intact, except those from the damaged frame up to the first intact beacon past the damage (spec
§6.5). "Invented" counts returned messages that are not, byte for byte, a frame the writer wrote at
that offset; "altered" those at the writer's offset with the writer's payload whose key, shard, seq or
timestamp bytes were hit (the format's checksum covers only the payload, so no reader can see that).

    python bench/salvage.py                      # 200 files of 300 messages
    python bench/salvage.py --files 20 --messages 100
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit.errors import FormatError  # noqa: E402
from nbkit.transport.file_reader import StreamReader  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.transport.messages import Message  # noqa: E402
from nbkit.wire.ssformat import HEADER_SIZE  # noqa: E402

INTERVAL = 1024


def write_file(path: str, rng: random.Random, n: int) -> list[Message]:
    """A random stream file; the messages as the (strict) reader sees them."""
    with StreamWriter(path, beacon_interval=INTERVAL, created_at_ms=0, clock_ms=lambda: 7, flush_every=64) as w:
        for i in range(n):
            size = rng.choice((rng.randint(0, 60), rng.randint(0, 400), rng.randint(0, 4000)))
            w.write("ab"[i % 2], rng.randbytes(size))
    with StreamReader(path) as r:
        return list(r)


def damage_in_place(raw: bytearray, rng: random.Random) -> set[int]:
    """1-3 flipped bytes or zeroed blocks after the header; the offsets whose byte changed."""
    changed = set()
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(HEADER_SIZE, len(raw))
        if rng.random() < 0.5:
            raw[at] ^= rng.randint(1, 255)
            changed.add(at)
        else:
            for k in range(at, min(len(raw), at + rng.randint(1, 700))):
                if raw[k]:
                    raw[k] = 0
                    changed.add(k)
    return changed


def next_intact_boundary(d: int, damaged: set[int]) -> int:
    b = d - d % INTERVAL + INTERVAL
    while any(b <= x < b + 64 for x in damaged):
        b += INTERVAL
    return b


def hit(m: Message, ordered: list[int]) -> bool:
    """True when a damaged offset (``ordered``: sorted) lies in ``m``'s frame."""
    i = bisect.bisect_left(ordered, m.offset)
    return i < len(ordered) and ordered[i] < m.end


def best_possible(written: list[Message], damaged: set[int]) -> set[int]:
    """Offsets of the messages a beacon-resynchronising reader must recover."""
    ordered = sorted(damaged)
    reach = list(itertools.accumulate((next_intact_boundary(d, damaged) for d in ordered), max))
    best = set()
    for m in written:
        if hit(m, ordered):
            continue
        before = bisect.bisect_left(ordered, m.end)  # damaged offsets before the frame's end
        if before and m.offset < reach[before - 1]:
            continue
        best.add(m.offset)
    return best


def read(path: str, mode: str) -> list[Message]:
    got: list[Message] = []
    try:
        with StreamReader(path, on_bad_frames=mode) as r:
            for m in r:
                got.append(m)
    except FormatError:
        pass  # the strict reader stops at the first damage
    return got


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0], messages=300, repeat=1)
    p.add_argument("--files", type=int, default=200, metavar="F", help="damaged files tried per kind (default 200)")
    args = p.parse_args(argv)
    c.banner("salvage: on_bad_frames='skip' on randomly damaged files", args)
    rng = random.Random(18)
    totals = dict.fromkeys(("written", "intact", "best", "recovered", "of_best", "altered", "invented", "strict"), 0)
    shifted = dict.fromkeys(("written", "before", "best", "recovered", "invented", "strict"), 0)
    with c.workdir(args, "salvage") as tmp:
        path = os.path.join(tmp, "damaged.ss")
        for _ in range(args.files):  # same-length damage: the beacon grid stays in place
            c.remove(path)
            written = write_file(path, rng, args.messages)
            with open(path, "rb") as f:
                raw = bytearray(f.read())
            damaged = damage_in_place(raw, rng)
            with open(path, "wb") as f:
                f.write(raw)
            truth = {m.offset: m for m in written}
            best = best_possible(written, damaged)
            got = read(path, "skip")
            totals["written"] += len(written)
            ordered = sorted(damaged)
            totals["intact"] += sum(1 for m in written if not hit(m, ordered))
            totals["best"] += len(best)
            totals["strict"] += len(read(path, "error"))
            for m in got:
                mine = truth.get(m.offset)
                if mine == m:
                    totals["recovered"] += 1
                    totals["of_best"] += m.offset in best
                elif mine is not None and (mine.payload, mine.end) == (m.payload, m.end):
                    totals["altered"] += 1
                else:
                    totals["invented"] += 1
        for _ in range(args.files):  # a cut-out or inserted run: every later byte leaves the beacon grid
            c.remove(path)
            written = write_file(path, rng, args.messages)
            with open(path, "rb") as f:
                raw = f.read()
            at = rng.randrange(HEADER_SIZE, len(raw))
            n = rng.randint(1, 2000)
            if rng.random() < 0.5:
                n = min(n, len(raw) - at)
                raw = raw[:at] + raw[at + n :]
                first_beacon = -(-(at + n) // INTERVAL) * INTERVAL  # the first beacon past the cut (original offset)
            else:
                raw = raw[:at] + rng.randbytes(n) + raw[at:]
                first_beacon = -(-at // INTERVAL) * INTERVAL
            with open(path, "wb") as f:
                f.write(raw)
            frames = {(m.stream_key, m.payload) for m in written}
            got = read(path, "skip")
            shifted["written"] += len(written)
            shifted["before"] += sum(1 for m in written if m.end <= at)
            shifted["best"] += sum(1 for m in written if m.end <= at or m.offset > first_beacon)
            shifted["strict"] += len(read(path, "error"))
            shifted["recovered"] += sum(1 for m in got if (m.stream_key, m.payload) in frames)
            shifted["invented"] += sum(1 for m in got if (m.stream_key, m.payload) not in frames)
    t = totals
    print(
        f"   flipped bytes / zeroed blocks: {args.files} files, {t['written']:,} messages written, "
        f"{t['intact']:,} with intact bytes"
    )
    print(f"     best possible (resync at the next intact beacon): {t['best']:,}")
    print(
        f"     recovered byte for byte: {t['recovered']:,} ({t['of_best']:,} of the best possible, "
        f"{100 * t['of_best'] / max(1, t['best']):.1f}%)"
    )
    print(f"     strict reader (stops at the first damage): {t['strict']:,}")
    print(f"     altered (damage in key/shard/seq/timestamp bytes, outside the checksum): {t['altered']:,}")
    print(f"     invented: {t['invented']:,}")
    s = shifted
    print(
        f"   cut-out / inserted run: {args.files} files, {s['written']:,} messages written, "
        f"{s['before']:,} end before the damage"
    )
    print(f"     best possible (before the damage, and after the first shifted beacon past it): {s['best']:,}")
    print(f"     recovered: {s['recovered']:,} (strict reader: {s['strict']:,}); invented: {s['invented']:,}")
    results = [
        c.verdict("every best-possible message recovered", t["of_best"] == t["best"], f"{t['of_best']}/{t['best']}"),
        c.verdict(
            "cut/insert: at least the best possible", s["recovered"] >= s["best"], f"{s['recovered']}/{s['best']}"
        ),
        c.verdict("no message invented", t["invented"] + s["invented"] == 0, f"{t['invented'] + s['invented']}"),
    ]
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
