"""Child process: write N messages as fast as possible once told to go, then the end-of-stream mark.

    python load_writer.py PATH N [FLUSH_EVERY]

Creates PATH (beacon interval 1024, so beacons cut frames all the time), prints ``ready``, waits
for a line on stdin, writes N messages (key ``load``, every 7th on key ``side``), writes EOS and
prints ``done <seconds>``. Payloads depend only on the message number (:func:`payload`).
"""

from __future__ import annotations

import sys
import time

_TEXT = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" * 8


def key_of(i: int) -> str:
    """The stream key of message ``i`` (0-based)."""
    return "side" if i % 7 == 6 else "load"


def payload(i: int) -> bytes:
    """Message ``i``'s payload: its number, then 0-299 ASCII letters (never valid JSON)."""
    size = (i * 37) % 300
    return b"%d:" % i + _TEXT[i % 64 : i % 64 + size]


def main() -> None:
    from nbkit.transport.file_writer import StreamWriter

    path, n = sys.argv[1], int(sys.argv[2])
    flush_every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    with StreamWriter(path, beacon_interval=1024, flush_every=flush_every) as w:
        print("ready", flush=True)
        sys.stdin.readline()
        started = time.perf_counter()
        for i in range(n):
            w.write(key_of(i), payload(i))
        w.close(eos=True)
        print(f"done {time.perf_counter() - started:.3f}", flush=True)


if __name__ == "__main__":
    main()
