"""Child process: append messages to a stream file until it is killed (crash-safety tests, bench/fuzz.py).

    python crash_writer.py PATH SEED [FLUSH_EVERY [PAUSE [exclusive]]]

Opens ``StreamWriter(PATH)`` (creating the file, or resuming after its last complete frame), prints
``ready <truncated_bytes>``, then writes forever. After each ``write()`` returns it prints
``<key> <seq>`` with one unbuffered ``os.write`` to stdout: the pipe keeps those lines even after a
SIGKILL, so the parent knows every write call that returned. Payloads depend only on (key, seq)
(:func:`payload`), so the parent can check every byte of what it reads back. ``PAUSE`` seconds of
sleep between writes make it a slow, steady writer (the lock tests use it as the lock holder);
``exclusive`` opens the writer in exclusive mode (it holds the lock until it dies).
"""

from __future__ import annotations

import os
import random
import sys
import time

KEYS = ("orders", "payments")
_PATTERN = bytes(range(256)) * 12


def payload(key: str, seq: int) -> bytes:
    """The payload of message ``seq`` of ``key``: 0-1199 bytes, so frames often cross beacons."""
    size = (seq * 2_654_435_761 + len(key)) % 1200
    start = seq % 256
    return b"%s:%d:" % (key.encode(), seq) + _PATTERN[start : start + size]


def main() -> None:
    from nbkit.transport.file_writer import StreamWriter

    path, seed = sys.argv[1], int(sys.argv[2])
    flush_every = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    exclusive = len(sys.argv) > 5 and sys.argv[5] == "exclusive"
    rnd = random.Random(seed)
    writer = StreamWriter(path, beacon_interval=1024, flush_every=flush_every, exclusive=exclusive)
    os.write(1, b"ready %d\n" % writer.truncated_bytes)
    while True:
        key = KEYS[rnd.random() < 0.3]
        seq = writer.next_seq(key)
        writer.write(key, payload(key, seq))
        os.write(1, b"%s %d\n" % (key.encode(), seq))
        if pause:
            time.sleep(pause)  # a slow, steady writer (the lock tests' holder)


if __name__ == "__main__":
    main()
