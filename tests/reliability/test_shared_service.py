"""A running file service fed by four ``nbkit publish`` processes at once (issue 13, "Done when").

The service (``nbkit run``) follows ``orders.ss`` from the beginning and appends a retry copy of every
fifth order; meanwhile four publishers append 500 orders each. Afterwards every order was handled
exactly once (the fifth ones on their copy), the file reads strictly (every frame checksum), every
stream's sequence numbers go up by one, and the file is byte for byte what one writer would have
written with the same messages (so every beacon, marker and running checksum is right). The SIGKILL
variant kills publishers at random while they append: nothing a publisher reported is lost, and the
next writer repairs a torn tail.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from waiting import wait_until

from nbkit.transport.file_reader import StreamReader
from nbkit.wire import envelope

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

SERVICE = """
import json
from nbkit import App, FileBroker, FilePosition, HandlerOutcome

broker = FileBroker("orders.ss", beacon_interval=1024)

@broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
def handle(delivery):
    order = json.loads(delivery.payload)
    if order["n"] % 5 == 0 and delivery.attempt < 2:
        return HandlerOutcome.retry_after(0)      # a copy, appended while the publishers append
    print("handled", order["id"], delivery.attempt, flush=True)
    return HandlerOutcome.ack()

app = App(broker, shutdown_timeout=10)
"""

PUBLISHERS = 4
PER_PUBLISHER = 500


class Service:
    """``nbkit run service:app`` in ``folder``; its stdout lines are collected by a thread."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        (folder / "service.py").write_text(SERVICE)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nbkit", "run", "service:app", "--log-level", "ERROR"],
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        out = self.proc.stdout
        assert out is not None
        self._reader = threading.Thread(target=lambda: self.lines.extend(out), daemon=True)
        self._reader.start()
        path = folder / "orders.ss"
        wait_until(lambda: self._alive() and path.exists() and path.stat().st_size > 128, what="the service to start")

    def _alive(self) -> bool:
        assert self.proc.poll() is None, self.proc.stderr.read()
        return True

    def handled(self) -> list[tuple[str, int]]:
        return [(p[1], int(p[2])) for p in (ln.split() for ln in list(self.lines)) if p and p[0] == "handled"]

    def wait_for(self, count: int) -> None:
        wait_until(
            lambda: self._alive() and len(self.handled()) >= count,
            what=lambda: f"{count} orders handled ({len(self.handled())} so far)",
        )

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        self._reader.join(timeout=10)
        assert self.proc.returncode == 130, err  # stopped by SIGINT, nothing lost (nbkit run --help)
        return err


def publisher(folder: Path, env: dict[str, str], name: str, count: int) -> subprocess.Popen:
    source = folder / f"{name}.ndjson"
    source.write_text("".join(json.dumps({"id": f"{name}-{i}", "n": i}) + "\n" for i in range(1, count + 1)))
    with source.open("rb") as stdin:
        return subprocess.Popen(
            [sys.executable, "-m", "nbkit", "publish", "orders.ss", "orders"],
            cwd=folder,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def reported(out: bytes) -> list[int]:
    """The sequence numbers a publisher printed (``published orders seq N``): its messages in the file."""
    return [int(ln.split()[3]) for ln in out.decode().splitlines() if ln.startswith("published ")]


def check_file(path: Path, tmp: Path, write_ss) -> dict[int, dict]:
    """Strict read, sequences by one per stream, byte-equal to one writer's file (``write_ss``, the
    fixture); returns seq -> order."""
    with StreamReader(path) as r:
        header = r.header
        messages = list(r)
        assert r.end.reason == "end", r.end
    last: dict[tuple[str, int], int] = {}
    for m in messages:
        stream = (m.stream_key, m.shard_id)
        assert m.seq == last.get(stream, 0) + 1, (stream, m.seq, last.get(stream))
        last[stream] = m.seq
    copy = tmp / "one-writer.ss"
    write_ss(
        copy,
        [(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload) for m in messages],
        interval=header.beacon_interval,
        file_name=header.file_name,
        created_at_ms=header.created_at_ms,
    )
    assert path.read_bytes() == copy.read_bytes(), "the shared file differs from what one writer writes"
    orders = {}
    for m in messages:
        if m.stream_key == "orders":
            headers, payload = envelope.decode(m.payload)
            orders[m.seq] = {**json.loads(payload), "copy": envelope.RETRY_COUNT_HEADER in headers}
    return orders


def test_four_publishers_feed_a_running_service(tmp_path: Path, child_env, figures, write_ss) -> None:
    service = Service(tmp_path, child_env)
    procs = [publisher(tmp_path, child_env, f"p{i}", PER_PUBLISHER) for i in range(PUBLISHERS)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err
        outs.append(reported(out))
    total = PUBLISHERS * PER_PUBLISHER
    service.wait_for(total)
    service.stop()
    handled = service.handled()
    assert len(handled) == total and len(set(handled)) == total  # each order once
    for order_id, attempt in handled:
        assert attempt == (2 if int(order_id.split("-")[1]) % 5 == 0 else 1), (order_id, attempt)
    orders = check_file(tmp_path / "orders.ss", tmp_path, write_ss)
    copies = [o for o in orders.values() if o["copy"]]
    assert len(orders) == total + len(copies) and len(copies) == total // 5
    for i, seqs in enumerate(outs):  # every publisher's report names its own messages, in order
        assert [orders[s]["id"] for s in seqs] == [f"p{i}-{n}" for n in range(1, PER_PUBLISHER + 1)]
    assert len({s for seqs in outs for s in seqs}) == total
    figures(
        publishers=PUBLISHERS,
        published=total,
        copies=len(copies),
        handled=len(handled),
        file_bytes=(tmp_path / "orders.ss").stat().st_size,
        lost=0,
    )


def test_publishers_killed_mid_append_lose_nothing_they_reported(tmp_path: Path, child_env, figures, write_ss) -> None:
    rnd = random.Random(13)
    service = Service(tmp_path, child_env)
    procs = [publisher(tmp_path, child_env, f"k{i}", 20 * PER_PUBLISHER) for i in range(PUBLISHERS)]
    early = [b"".join(proc.stdout.readline() for _ in range(rnd.randint(1, PER_PUBLISHER))) for proc in procs]
    for proc in procs:  # each is killed while it still has thousands of lines to append
        proc.send_signal(signal.SIGKILL)
    outs = []
    for proc, head in zip(procs, early, strict=True):
        out = proc.stdout.read()  # the rest of what the buffered stdout holds (communicate() would skip it)
        proc.stderr.read()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        outs.append(reported(head + out))
    final = publisher(tmp_path, child_env, "last", 1)  # the next writer repairs a torn tail, if any
    out, err = final.communicate(timeout=30)
    assert final.returncode == 0, err

    def ids_in_file() -> set[str]:
        with StreamReader(tmp_path / "orders.ss", errors="stop") as r:
            return {json.loads(envelope.decode(m.payload)[1])["id"] for m in r if m.stream_key == "orders"}

    def all_handled() -> bool:  # every order now in the file
        ids = ids_in_file()
        return len({h for h, _ in service.handled()}) >= len(ids) and len(service.handled()) >= len(ids)

    wait_until(all_handled, what=lambda: f"{len(ids_in_file())} orders handled ({len(service.handled())} so far)")
    service.stop()
    orders = check_file(tmp_path / "orders.ss", tmp_path, write_ss)
    in_file = {o["id"] for o in orders.values()}
    for i, seqs in enumerate(outs):  # every write a killed publisher reported is in the file
        assert [orders[s]["id"] for s in seqs] == [f"k{i}-{n}" for n in range(1, len(seqs) + 1)]
    handled = service.handled()
    assert sorted(h for h, _ in handled) == sorted(in_file)  # each order in the file handled once
    assert sum(len(seqs) for seqs in outs) > 0
    figures(
        kills=len(procs), reported=sum(len(seqs) for seqs in outs), in_file=len(in_file), handled=len(handled), lost=0
    )
