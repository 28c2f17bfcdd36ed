"""Dispatch: replaying a stream file through an App against a bare StreamReader loop.

The file holds N messages over 4 stream keys (JSON payloads of about 200 bytes). nbkit side:
``App(FileBroker(path))`` with one subscriber, ``@broker.subscriber("orders", replay=True)``, whose
handler acks; ``app.run()`` replays the file to its end (every frame is read, the quarter of them
under "orders" is delivered and settled). Baseline: a loop over ``StreamReader(path)`` that calls
the same handler on the same messages. Settling an ack logs the upstream WARNING "ack / nack
failed" per delivery, so the App runs twice: with the logger at its default level (WARNING on,
written through a handler to /dev/null in the CLI's format) and with ``nbkit.dispatch`` at ERROR.
A file subscription reads through ``StreamReader(keys=...)``, which skips the other keys' frames
without making messages of them; the same loop over such a reader is printed too (reported, no
target): what is left of the ratio then is the runtime's own work per delivery.

    python bench/dispatch.py                    # 1,000,000 messages, 3 timed runs per side
    python bench/dispatch.py --messages 2000 --repeat 1
"""

from __future__ import annotations

import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402

from nbkit import App, FileBroker, HandlerOutcome  # noqa: E402
from nbkit.transport.file_reader import StreamReader  # noqa: E402

TARGET = 1.5  # App replay at most this many times the bare loop's time
KEY = "orders"


def handle(delivery) -> HandlerOutcome:
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


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n = args.messages
    c.banner("dispatch: App replay vs bare StreamReader loop", args)
    dispatch = logging.getLogger("nbkit.dispatch")
    devnull = open(os.devnull, "w")  # noqa: SIM115 - closed at the end
    sink = logging.StreamHandler(devnull)
    sink.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(sink)
    results = []
    try:
        with c.workdir(args, "dispatch") as tmp:
            path = os.path.join(tmp, "bench.ss")
            c.write_stream(path, n)
            delivered = run_bare(path)
            print(f"   {delivered:,} of {n:,} messages are under {KEY!r} and get delivered")

            dispatch.setLevel(logging.NOTSET)  # the default: WARNING (root's level) and up are logged
            t_warn = c.time_it(lambda: run_app(path), args.repeat)
            assert t_warn.result == delivered, (t_warn.result, delivered)
            dispatch.setLevel(logging.ERROR)
            t_err = c.time_it(lambda: run_app(path), args.repeat)
            dispatch.setLevel(logging.NOTSET)
            t_bare = c.time_it(lambda: run_bare(path), args.repeat)
            t_filtered = c.time_it(lambda: run_bare_filtered(path), args.repeat)
            assert t_filtered.result == delivered, (t_filtered.result, delivered)

            c.row("App.run(), WARNING logged per delivery", t_warn, delivered, "(per delivery)")
            c.row("App.run(), nbkit.dispatch at ERROR", t_err, delivered, "(per delivery)")
            c.row("bare StreamReader loop + handler", t_bare, delivered, "(per delivery)")
            c.row(f"bare StreamReader(keys={KEY!r}) loop + handler", t_filtered, delivered, "(per delivery)")
            over_warn = (t_warn.wall - t_bare.wall) / delivered * 1e6
            over_err = (t_err.wall - t_bare.wall) / delivered * 1e6
            print(f"   runtime overhead per delivery: {over_warn:.2f} µs with the WARNING, {over_err:.2f} µs without")
            print(
                f"   against the key-filtered loop (reported, no target): {c.ratio(t_err, t_filtered)} at ERROR, "
                f"{c.ratio(t_warn, t_filtered)} with the WARNING"
            )
            results.append(
                c.verdict(
                    f"App (WARNING logged) at most {TARGET:g}x the bare loop",
                    t_warn.wall / t_bare.wall <= TARGET,
                    c.ratio(t_warn, t_bare),
                )
            )
            results.append(
                c.verdict(
                    f"App (dispatch logger at ERROR) at most {TARGET:g}x the bare loop",
                    t_err.wall / t_bare.wall <= TARGET,
                    c.ratio(t_err, t_bare),
                )
            )
    finally:
        root.removeHandler(sink)
        devnull.close()
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
