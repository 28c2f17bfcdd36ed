"""A replay whose file gains a message in place of its EOS mark reads that message, at every file size.

An append cuts the file's trailing end-of-stream mark and writes in its place. A reader that decided
"EOS" from bytes it had read ahead (up to 4 MiB) before the append would end there and miss what the
append wrote: a replay's own retry copy (#28). The sizes straddle the reader's read-ahead. The wire and
transport tests also run on the pure-Python core in CI (``NBKIT_PURE_PYTHON=1``).
"""

from __future__ import annotations

import pytest

from nbkit import App, FileBroker, HandlerOutcome, StreamReader, StreamWriter, VirtualClock

SIZES = [(2, 1024), (1000, 1024), (3000, 1024), (5000, 1024), (1, 4_456_448)]  # the last: one 4.25 MB message
IDS = ["2x1KB", "1000x1KB", "3000x1KB", "5000x1KB", "4.25MB"]


def _file(path, n, size):
    with StreamWriter(path) as w:
        for i in range(n):
            w.write("orders", i.to_bytes(4, "big") * (size // 4))
        w.write("orders", b"last")
        w.write_eos()


@pytest.mark.parametrize(("n", "size"), SIZES, ids=IDS)
def test_an_append_in_place_of_the_eos_mark_is_read(tmp_path, n, size):
    path = tmp_path / "orders.ss"
    _file(path, n, size)
    with StreamReader(path) as reader:
        seqs = []
        while (msg := reader.poll()) is not None:
            if msg.is_eos:
                break
            seqs.append(msg.seq)
            if msg.payload == b"last":
                with StreamWriter(path) as w:  # cuts the EOS mark the reader has already read ahead
                    w.write("orders", b"copy")
        assert seqs == list(range(1, n + 3))
        assert reader.end is not None and reader.end.reason == "end"


@pytest.mark.parametrize(("n", "size"), SIZES, ids=IDS)
def test_a_replay_delivers_its_own_copy_written_over_the_eos_mark(tmp_path, n, size):
    path = tmp_path / "orders.ss"
    _file(path, n, size)
    broker = FileBroker(path)
    seen = []

    @broker.subscriber("orders", replay=True, max_attempts=2)
    def handle(d):
        if d.payload == b"last":
            seen.append(d.attempt)
            return HandlerOutcome.retry_after(0) if d.attempt == 1 else None
        return None

    app = App(broker, clock=VirtualClock())
    app.run()
    assert seen == [1, 2]  # before the fix: [1] below 4 MiB of file, the copy never delivered
    with StreamReader(path) as reader:
        tail = [m.payload for m in reader if not m.is_eos][-2:]
    assert tail[0] == b"last" and tail[1].startswith(b"rs1:")  # the copy, enveloped with its retry count


def test_an_eos_mark_nothing_replaced_still_ends_the_read(tmp_path):
    path = tmp_path / "orders.ss"
    _file(path, 3000, 1024)
    with StreamReader(path) as reader:
        msgs = list(reader)
        assert reader.end is not None and reader.end.reason == "eos"
    assert msgs[-1].is_eos and msgs[-2].payload == b"last"
