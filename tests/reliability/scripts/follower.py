"""Child process: follow a growing stream file to its end-of-stream mark and check every message.

    python follower.py PATH MODE

MODE ``reader``: ``StreamReader(follow=True)``; MODE ``app``: a live ``FileBroker`` subscription per
key (the runtime's path), from the beginning; MODE ``crash``: ``StreamReader(follow=True)`` on a
file that ``crash_writer.py`` processes write, get killed on and resume (payloads checked against
``crash_writer.payload``, each stream's sequence must continue by one).

Prints ``following`` once the file is open, then at the end one JSON line: how many messages
arrived, the first problems (a gap, a duplicate, a wrong payload: order and content are checked
against ``load_writer.payload``), and how it ended.
"""

from __future__ import annotations

import json
import sys
import time

from load_writer import payload  # this script's folder is on sys.path

MAX_WAIT = 60.0  # an idle guard: the parent's timeout is shorter, this only stops a stray child


class CrashChecker:
    def __init__(self) -> None:
        from crash_writer import payload as crash_payload

        self.payload = crash_payload
        self.count: dict[str, int] = {}
        self.problems: list[str] = []

    def see(self, key: str, seq: int, data: bytes) -> None:
        n = self.count.get(key, 0)
        if seq != n + 1 or data != self.payload(key, seq):
            self.problems.append(f"{key}: message {n + 1} arrived as seq {seq} ({data[:20]!r})")
        self.count[key] = n + 1


def number_of(key: str, n: int) -> int:
    """The writer's message number of the n-th (0-based) message of ``key`` (see ``key_of``)."""
    return 7 * n + 6 if key == "side" else n + n // 6


class Checker:
    def __init__(self) -> None:
        self.count = {"load": 0, "side": 0}
        self.problems: list[str] = []

    def see(self, key: str, seq: int, data: bytes) -> None:
        n = self.count.get(key)
        if n is None:
            self.problems.append(f"unexpected key {key!r}")
            return
        if seq != n + 1 or data != payload(number_of(key, n)):
            self.problems.append(f"{key}: message {n + 1} arrived as seq {seq} ({data[:20]!r})")
        self.count[key] = n + 1


def main() -> None:
    path, mode = sys.argv[1], sys.argv[2]
    check = CrashChecker() if mode == "crash" else Checker()
    started = time.perf_counter()
    if mode in ("reader", "crash"):
        from nbkit.transport.file_reader import StreamReader

        with StreamReader(path, follow=True, poll_max=0.01, idle_timeout=MAX_WAIT) as r:
            print("following", flush=True)
            for m in r:
                if not m.is_eos:
                    check.see(m.stream_key, m.seq, m.payload)
            end: str | None = r.end.reason if r.end else None
    else:
        import logging

        from nbkit import App, FileBroker, FilePosition

        logging.getLogger("nbkit").setLevel(logging.ERROR)  # not 100,000 "ack / nack failed" warnings
        broker = FileBroker(path, existing_only=True)
        for key in ("load", "side"):
            broker.subscriber(key, start_at=FilePosition.beginning())(
                lambda d: check.see(d.stream_key, d.seq, d.payload)
            )
        app = App(broker)
        app.start()
        print("following", flush=True)
        app.run()
        end = ",".join(sorted({s.end_reason or "?" for s in app.subscriptions}))
    print(
        json.dumps(
            {
                "count": check.count,
                "problems": check.problems[:5],
                "end": end,
                "seconds": round(time.perf_counter() - started, 3),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
