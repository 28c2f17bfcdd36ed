"""Writing: StreamWriter.write with a flush after each message against plain os.write calls.

nbkit side: ``StreamWriter(path)`` (default flush_every=1: one os.write per message, so a follower
sees each message at once) appending N messages over 4 keys, JSON payloads of about 200 bytes, with
the default sequence numbers and clock. Baseline (the syscall bound): a loop of os.write calls
handing the OS exactly the bytes nbkit wrote for each message (frame, plus a beacon where one falls),
prepared in advance. Also batched mode (flush_every=N) against os.write of the same N-message blocks.
The target is checked with ``exclusive=True`` (the lock taken once, for the writer's life): the write
path itself, which on the compiled core runs StreamWriter's compiled write route
(nbkit/transport/_writer.pyx); the same writes on the pure-Python route (its reference twin) are
timed beside it. The same writes in the default shared mode (a lock, an fstat and an unlock around each
append, the others' frames read first when the file grew) are timed beside them. These runs are
interleaved: each round runs every side once, so all see the same load; medians of wall and CPU time.

Shared appends from several processes: 4 processes writing N/4 each at
the same time (shared: interleaved; exclusive: each waits for the previous one to close), timed from
the moment all four are ready until the last one ends.

The cost of durability: ``fsync=True`` (an os.fsync after every flush) on the first
``--fsync-messages`` messages, per message and per batch, against the same writes without it.

    python bench/write.py                       # 1,000,000 messages, 3 timed runs per side
    python bench/write.py --messages 2000 --repeat 1 --batch 64
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit.transport import file_writer  # noqa: E402
from nbkit.transport.file_reader import StreamReader  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.wire import core  # noqa: E402

TARGET = 1.5  # StreamWriter (flush per message) within this factor of the os.write loop


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256, metavar="N", help="flush_every of the batched run (default 256)")
    p.add_argument(
        "--fsync-messages",
        type=int,
        default=2000,
        metavar="N",
        help="messages written with fsync=True (an fsync each costs a disk flush; default 2000)",
    )
    args = p.parse_args(argv)
    n = args.messages
    c.banner("write: StreamWriter.write vs os.write", args)
    compiled_route = file_writer._COMPILED is not None  # the compiled route of exclusive writers
    print(
        f"   nbkit core: {core.core_description()}; exclusive writers' route: "
        f"{'compiled (nbkit.transport._writer)' if compiled_route else 'pure-Python'}"
    )
    items = [(c.KEYS[i % len(c.KEYS)], c.message_fields(i)[3]) for i in range(n)]
    results = []
    with c.workdir(args, "write") as tmp:
        path = os.path.join(tmp, "nbkit.ss")
        raw = os.path.join(tmp, "raw.ss")

        def write_all(flush_every: int = 1) -> list:
            with StreamWriter(path, flush_every=flush_every, exclusive=True) as w:
                return [w.write(key, payload) for key, payload in items]

        def write_all_discard(
            flush_every: int = 1, exclusive: bool = True, fsync: bool = False, count: int = n
        ) -> None:
            with StreamWriter(path, flush_every=flush_every, exclusive=exclusive, fsync=fsync) as w:
                write = w.write
                for key, payload in items[:count]:
                    write(key, payload)

        def write_all_pure() -> None:
            """The exclusive writer on the pure-Python route (the compiled route's reference twin)."""
            saved = file_writer._COMPILED
            file_writer._COMPILED = None  # private: new writers take the pure route (as the twin tests do)
            try:
                write_all_discard(1, exclusive=True)
            finally:
                file_writer._COMPILED = saved

        # what nbkit hands the OS for each message: its frame, and a beacon where one falls inside it
        c.remove(path)
        landed = write_all()
        with open(path, "rb") as f:
            data = f.read()
        header = data[: landed[0].offset]
        # each frame up to the next one's start: a beacon right after a frame that ends on a boundary is
        # written with it (Written.end stops before that beacon, as Message.end does)
        starts = [w.offset for w in landed[1:]] + [len(data)]
        chunks = [data[w.offset : nxt] for w, nxt in zip(landed, starts, strict=True)]
        assert b"".join(chunks) == data[len(header) :], "the writes do not cover the file"
        with StreamReader(path) as r:
            assert sum(1 for _ in r) == n
        blocks = [b"".join(chunks[i : i + args.batch]) for i in range(0, n, args.batch)]
        del landed, data
        print(f"   data: {len(header) + sum(map(len, chunks)):,} bytes, {len(blocks):,} blocks of {args.batch}")

        def os_write_loop(pieces: list[bytes]) -> None:
            fd = os.open(raw, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write = os.write
                write(fd, header)
                for piece in pieces:
                    write(fd, piece)
            finally:
                os.close(fd)

        def fresh() -> None:
            c.remove(path)
            c.remove(raw)

        # interleaved: each round runs every side once, so they all see the same load; medians
        timed = interleaved(
            {
                "os": lambda: os_write_loop(chunks),
                "exclusive": lambda: write_all_discard(1, exclusive=True),
                **({"pure": write_all_pure} if compiled_route else {}),
                "shared": lambda: write_all_discard(1, exclusive=False),
                "os batch": lambda: os_write_loop(blocks),
                "batch": lambda: write_all_discard(args.batch),
            },
            args.repeat,
            setup=fresh,
        )
        c.row("StreamWriter.write, flush_every=1, exclusive", timed["exclusive"], n)
        if compiled_route:
            c.row("  the same on the pure-Python route", timed["pure"], n)
        c.row("StreamWriter.write, flush_every=1, shared", timed["shared"], n)
        c.row("os.write per message (the syscall bound)", timed["os"], n)
        c.row(f"StreamWriter.write, flush_every={args.batch}", timed["batch"], n)
        c.row(f"os.write per {args.batch}-message block", timed["os batch"], n)
        print(
            f"   batched: {c.ratio(timed['batch'], timed['os batch'])} its block-write bound; "
            f"flush_every=1 takes {c.ratio(timed['exclusive'], timed['batch'])}"
        )
        print(
            f"   shared (a lock, an fstat and an unlock around each append): {c.ratio(timed['shared'], timed['os'])} "
            "the os.write loop"
        )
        if compiled_route:
            print(f"   exclusive on the pure-Python route: {c.ratio(timed['pure'], timed['os'])} the os.write loop")
        m = min(n, args.fsync_messages)
        best = interleaved(
            {
                "1": lambda: write_all_discard(1, count=m),
                "1 fsync": lambda: write_all_discard(1, fsync=True, count=m),
                "b": lambda: write_all_discard(args.batch, count=m),
                "b fsync": lambda: write_all_discard(args.batch, fsync=True, count=m),
            },
            args.repeat,
            setup=fresh,
        )
        c.row(f"fsync=False, flush_every=1 ({m:,} messages)", best["1"], m)
        c.row("fsync=True,  flush_every=1 (an fsync per message)", best["1 fsync"], m)
        c.row(f"fsync=False, flush_every={args.batch}", best["b"], m)
        c.row(f"fsync=True,  flush_every={args.batch} (an fsync per batch)", best["b fsync"], m)
        print(
            f"   fsync per message costs {c.ratio(best['1 fsync'], best['1'])} the buffered write; "
            f"per {args.batch}-message batch {c.ratio(best['b fsync'], best['b'])}"
        )
        results.append(
            c.within(
                f"flush_every=1 (exclusive: the write path itself) within {TARGET:g}x of the os.write loop",
                timed["exclusive"],
                timed["os"],
                TARGET,
            )
        )
        print("   shared appends (lock per append) against exclusive (lock held), 4 processes:")
        runs4: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(max(1, args.repeat)):  # interleaved, as the load on the machine varies
            for exclusive in (False, True):
                fresh()
                runs4[exclusive].append(in_processes(path, items, 4, exclusive=exclusive))
                check_file(path, n)
        t_sh4, t_ex4 = statistics.median(runs4[False]), statistics.median(runs4[True])
        c.row("shared, 4 processes at once", t_sh4, n)
        c.row("exclusive, 4 processes taking turns", t_ex4, n)
        print(
            f"   1 process: shared takes {timed['shared'].wall / timed['exclusive'].wall:.2f}x exclusive's time; "
            "4 processes: "
            f"{t_sh4 / t_ex4:.2f}x (wall clock, {os.cpu_count()} cores)"
        )
    return c.finish(results)


def interleaved(runs: dict[str, Callable[[], object]], repeat: int, setup: Callable[[], object]) -> dict[str, c.Timing]:
    """Run every run once per round (``setup`` untimed before each), a warm-up round and then
    ``repeat`` timed rounds, so all see the same load; the medians of each run's wall and CPU time."""
    walls: dict[str, list[float]] = {label: [] for label in runs}
    cpus: dict[str, list[float]] = {label: [] for label in runs}
    for round_ in range(max(1, repeat) + 1):
        for label, run in runs.items():
            setup()
            gc.collect()
            cpu, wall = time.process_time(), time.perf_counter()
            run()
            if round_:  # round 0 warms up
                walls[label].append(time.perf_counter() - wall)
                cpus[label].append(time.process_time() - cpu)
    return {
        label: c.Timing(statistics.median(walls[label]), statistics.median(cpus[label]), walls[label], None)
        for label in runs
    }


def _child(path: str, items: list[tuple[str, bytes]], exclusive: bool, ready, go) -> None:
    """One writer process: open (shared: at once; exclusive: when its turn comes), write, close."""
    ready.set()
    go.wait()
    with StreamWriter(path, exclusive=exclusive, lock_timeout=600) as w:
        write = w.write
        for key, payload in items:
            write(key, payload)


def in_processes(path: str, items: list[tuple[str, bytes]], count: int, *, exclusive: bool) -> float:
    """Wall-clock seconds for ``count`` processes writing ``items`` between them (a slice each),
    timed from the moment every process is ready until the last one ends."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(count)]
    procs = [ctx.Process(target=_child, args=(path, items[i::count], exclusive, readies[i], go)) for i in range(count)]
    for proc in procs:
        proc.start()
    for ready in readies:
        ready.wait()
    started = time.perf_counter()
    go.set()
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a writer process failed (exit code {proc.exitcode})")
    return time.perf_counter() - started


def check_file(path: str, n: int) -> None:
    """The file the 4 processes wrote holds every message, each stream numbered 1, 2, 3, ..."""
    last: dict[str, int] = {}
    with StreamReader(path) as r:
        for m in r:
            assert m.seq == last.get(m.stream_key, 0) + 1, (m.stream_key, m.seq)
            last[m.stream_key] = m.seq
        assert r.end is not None and r.end.reason == "end", r.end
    assert sum(last.values()) == n, (sum(last.values()), n)


if __name__ == "__main__":
    sys.exit(main())
