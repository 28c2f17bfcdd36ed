"""Dispatch: replaying a stream file through an App against a bare StreamReader loop.

The file holds N messages over 4 stream keys (JSON payloads of about 200 bytes). nbkit side:
``App(FileBroker(path))`` with one subscriber, ``@broker.subscriber("orders", replay=True)``, whose
handler acks; ``app.run()`` replays the file to its end (every frame is read, the quarter of them
under "orders" is delivered and settled). Baseline: a loop over ``StreamReader(path)`` that calls
the same handler on the same messages. Settling an ack logs the upstream WARNING "ack / nack
failed" per delivery, so the App runs twice: with the logger at its default level (WARNING on,
written to /dev/null through the handler ``nbkit run`` installs, :class:`~nbkit.runtime.run_log.RunLogHandler`)
and with ``nbkit.dispatch`` at ERROR. The stdlib ``StreamHandler`` (one format, write and flush per record)
is timed alone beside it, as is the run handler given a ready-made record per delivery.
A file subscription reads through ``StreamReader(keys=...)``, which skips the other keys' frames
without making messages of them; the same loop over such a reader is printed too (reported, no
target): what is left of the ratio then is the runtime's own work per delivery.

``App.run()`` settles the deliveries that are ready one after another (the subscription's
``Settlement.burst``): those the reader has scanned already come from its batch (``StreamReader.ready``), and
an ack's WARNING is gathered in the run handler by the settlement's ``AckLog.write`` while, per delivery, nothing
else would see a record.

The four sides run interleaved (one run of each per round, after one warm-up round), so a change in the
machine's load falls on all of them; the medians are compared. ``--profile`` then prints cProfile's top
entries of one App replay with the WARNING logged.

    python bench/dispatch.py                    # 1,000,000 messages, 3 timed rounds
    python bench/dispatch.py --messages 200000 --repeat 3 --profile
    python bench/dispatch.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import cProfile
import gc
import logging
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit import App, FileBroker, HandlerOutcome  # noqa: E402
from nbkit.runtime.logs import STREAM_ERROR, DeliveryFormatter  # noqa: E402
from nbkit.runtime.run_log import RUN_FORMAT, RunLogHandler  # noqa: E402
from nbkit.transport.file_reader import StreamReader  # noqa: E402

TARGET = 1.5  # App replay at most this many times the bare loop's time
KEY = "orders"
SINK_TEXT = 'ack / nack failed subscription=orders error="acknowledgement is not supported by this broker"'


def handle(delivery: object) -> HandlerOutcome:
    return HandlerOutcome.ack()


def run_app(path: str) -> int:
    broker = FileBroker(path, existing_only=True)
    broker.subscriber(KEY, replay=True)(handle)
    app = App(broker)
    app.run()
    return app.settled


def run_bare(path: str) -> int:
    n = 0
    with StreamReader(path) as reader:
        for msg in reader:
            if msg.stream_key == KEY:
                handle(msg)
                n += 1
    return n


def run_bare_filtered(path: str) -> int:
    n = 0
    with StreamReader(path, keys=KEY) as reader:
        for msg in reader:
            handle(msg)
            n += 1
    return n


def run_sink(records: int, handler: logging.Handler) -> int:
    """A log handler's own work: one ready-made "ack / nack failed" record handed to ``handler`` ``records``
    times (then flushed)."""
    logger = logging.getLogger("nbkit.dispatch")
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, SINK_TEXT, (), None)
    handle = handler.handle
    for _ in range(records):
        handle(record)
    handler.flush()
    return records


def interleaved(sides: dict[str, Callable[[], object]], repeat: int) -> dict[str, c.Timing]:
    """One warm-up round, then ``repeat`` rounds that run each side once, in turn; medians per side."""
    for fn in sides.values():
        fn()
    walls: dict[str, list[float]] = {name: [] for name in sides}
    cpus: dict[str, list[float]] = {name: [] for name in sides}
    results: dict[str, object] = {}
    for _ in range(max(1, repeat)):
        for name, fn in sides.items():
            gc.collect()
            c0 = time.process_time()
            t = time.perf_counter()
            results[name] = fn()
            walls[name].append(time.perf_counter() - t)
            cpus[name].append(time.process_time() - c0)
    return {
        name: c.Timing(statistics.median(walls[name]), statistics.median(cpus[name]), walls[name], results[name])
        for name in sides
    }


def with_level(level: int, fn: Callable[[], object]) -> Callable[[], object]:
    """``fn`` run with the ``nbkit.dispatch`` logger at ``level`` (NOTSET: the default, WARNING logged)."""

    def run() -> object:
        dispatch = logging.getLogger("nbkit.dispatch")
        dispatch.setLevel(level)
        try:
            return fn()
        finally:
            dispatch.setLevel(logging.NOTSET)

    return run


def profile(path: str, top: int = 15) -> None:
    """cProfile's top entries (by own time) of one App replay with the WARNING logged."""
    profiler = cProfile.Profile()
    profiler.enable()
    run_app(path)
    profiler.disable()
    print(f"   profile of one App replay, WARNING logged (top {top} by own time):")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--profile", action="store_true", help="print cProfile's top entries of one App replay")
    args = p.parse_args(argv)
    n = args.messages
    c.banner("dispatch: App replay vs bare StreamReader loop", args)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed at the end
    sink = RunLogHandler(devnull, skip_texts=(STREAM_ERROR,))  # what `nbkit run` installs
    stdlib = logging.StreamHandler(devnull)  # what it installed before (logging.basicConfig), timed alone
    stdlib.setFormatter(DeliveryFormatter(RUN_FORMAT))
    root = logging.getLogger()
    root.addHandler(sink)
    results = []
    try:
        with c.workdir(args, "dispatch") as tmp:
            path = os.path.join(tmp, "bench.ss")
            c.write_stream(path, n)
            delivered = run_bare(path)
            print(f"   {delivered:,} of {n:,} messages are under {KEY!r} and get delivered")

            timings = interleaved(
                {
                    "warn": with_level(logging.NOTSET, lambda: run_app(path)),  # WARNING (root's level) logged
                    "err": with_level(logging.ERROR, lambda: run_app(path)),
                    "bare": lambda: run_bare(path),
                    "filtered": lambda: run_bare_filtered(path),
                    "sink": lambda: run_sink(delivered, sink),
                    "stdlib": lambda: run_sink(delivered, stdlib),
                },
                args.repeat,
            )
            t_warn, t_err, t_bare, t_filtered = (timings[k] for k in ("warn", "err", "bare", "filtered"))
            assert t_warn.result == t_err.result == t_filtered.result == delivered, (timings, delivered)

            c.row("App.run(), WARNING logged per delivery", t_warn, delivered, "(per delivery)")
            c.row("App.run(), nbkit.dispatch at ERROR", t_err, delivered, "(per delivery)")
            c.row("bare StreamReader loop + handler", t_bare, delivered, "(per delivery)")
            c.row(f"bare StreamReader(keys={KEY!r}) loop + handler", t_filtered, delivered, "(per delivery)")
            t_sink, t_stdlib = timings["sink"], timings["stdlib"]
            c.row("nbkit run's log handler alone, given records", t_sink, delivered, "(per record)")
            c.row("stdlib StreamHandler alone, given records", t_stdlib, delivered, "(per record)")
            over_warn = (t_warn.wall - t_bare.wall) / delivered * 1e6
            over_err = (t_err.wall - t_bare.wall) / delivered * 1e6
            print(f"   runtime overhead per delivery: {over_warn:.2f} µs with the WARNING, {over_err:.2f} µs without")
            print(
                f"   a handler given a record per delivery costs {t_sink.wall / t_bare.wall:.2f}x the bare loop "
                f"(run handler), {t_stdlib.wall / t_bare.wall:.2f}x (stdlib StreamHandler); with no other handler "
                "the App hands the run handler its line without a record"
            )
            print(
                f"   against the key-filtered loop (reported, no target): {c.ratio(t_err, t_filtered)} at ERROR, "
                f"{c.ratio(t_warn, t_filtered)} with the WARNING"
            )
            results.append(c.within(f"App (WARNING logged) at most {TARGET:g}x the bare loop", t_warn, t_bare, TARGET))
            results.append(
                c.within(f"App (dispatch logger at ERROR) at most {TARGET:g}x the bare loop", t_err, t_bare, TARGET)
            )
            if args.profile:
                profile(path)
    finally:
        root.removeHandler(sink)
        sink.close()
        devnull.close()
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
