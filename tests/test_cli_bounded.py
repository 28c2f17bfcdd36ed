"""``nbkit cat`` bounded reads: --since/--until/--start-seq/--end-seq, --first/--last N and --where, as
kcat -o/-c and tail -n give; cheap on a large file (measured as the bytes an HTTP server sent)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_run import one_error_line, run
from object_store import http_folder

import nbkit
from nbkit.transport.bounded import Bounds, bounded_messages
from nbkit.wire import envelope

T0 = 1_700_000_000_000  # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def orders(tmp_path_factory) -> Path:
    """6,000 messages over two keys, one a second, 4 KiB beacons; every 100th order a retry copy."""
    path = tmp_path_factory.mktemp("bounded") / "orders.ss"
    with nbkit.StreamWriter(path, beacon_interval=4096) as writer:
        for n in range(6000):
            body = b'{"id": %d, "item": "%s"}' % (n, b"lamp" if n % 7 == 0 else b"book")
            if n % 100 == 50:
                body = envelope.encode({"x-ruststream-retry-count": "1"}, body, force_text=False)
            writer.write(("orders", "audit")[n % 2], body, timestamp_ms=T0 + n * 1000)
    return path


def _seqs(out: str) -> list[tuple[str, int]]:
    """(key, seq) of each ``[ts | key | seq | shard]`` line of ``cat``'s log format."""
    rows = []
    for line in out.splitlines():
        if line.startswith("["):
            _, key, seq, _ = (part.strip() for part in line[1:].split("]")[0].split("|"))
            rows.append((key, int(seq)))
    return rows


def _all(path: Path) -> list[nbkit.Message]:
    return list(nbkit.StreamReader(path))


def test_last_n_is_the_tail_of_the_file(capsys, orders) -> None:
    rc, out, err = run(capsys, "cat", str(orders), "--last", "3", "--header-only")
    assert (rc, err) == (0, "")
    assert _seqs(out) == [(m.stream_key, m.seq) for m in _all(orders)[-3:]]
    rc, out, _ = run(capsys, "cat", str(orders), "--last", "4", "--key", "audit", "--header-only")
    assert _seqs(out) == [("audit", m.seq) for m in _all(orders) if m.stream_key == "audit"][-4:]


def test_first_n_and_sequence_bounds(capsys, orders) -> None:
    rc, out, _ = run(capsys, "cat", str(orders), "--first", "2", "--key", "audit", "--header-only")
    assert _seqs(out) == [("audit", 1), ("audit", 2)]
    rc, out, _ = run(capsys, "cat", str(orders), "--start-seq", "1500", "--end-seq", "1501", "--header-only")
    assert _seqs(out) == [("orders", 1500), ("audit", 1500), ("orders", 1501), ("audit", 1501)]
    rc, out, _ = run(capsys, "cat", str(orders), "--start-seq", "2999", "--first", "1", "--key", "orders")
    assert _seqs(out) == [("orders", 2999)]


def test_since_is_inclusive_until_exclusive(capsys, orders) -> None:
    # message n is at T0 + n s: 22:13:25 is n = 5 (audit 3), 22:13:27 is n = 7
    rc, out, _ = run(
        capsys, "cat", str(orders), "--since", "2023-11-14T22:13:25", "--until", "2023-11-14T22:13:27Z", "--header-only"
    )
    assert _seqs(out) == [("audit", 3), ("orders", 4)]
    rc, out, _ = run(capsys, "cat", str(orders), "--since", str(T0 + 5999_000), "--header-only")
    assert _seqs(out) == [("audit", 3000)]
    rc, out, _ = run(capsys, "cat", str(orders), "--since", "2023-11-14T23:13:20+01:00", "--first", "1")
    assert _seqs(out) == [("orders", 1)]  # 23:13:20+01:00 is T0: the first message


def test_where_is_redrives_filter(capsys, orders) -> None:
    rc, out, _ = run(
        capsys, "cat", str(orders), "--key", "orders", "--where", "payload~lamp and seq<=10", "--header-only"
    )
    want = [(m.stream_key, m.seq) for m in _all(orders) if m.stream_key == "orders" and b"lamp" in m.payload]
    assert _seqs(out) == [w for w in want if w[1] <= 10]
    rc, out, _ = run(capsys, "cat", str(orders), "--where", "header.x-ruststream-retry-count=1", "--first", "2")
    assert _seqs(out) == [("orders", 26), ("orders", 76)]  # n = 50 and 150: orders seq n/2 + 1
    rc, _, err = run(capsys, "cat", str(orders), "--where", "colour=red")
    assert rc != 0 and "cannot read" in one_error_line(err)


def test_bounds_with_no_message_inside_are_empty_not_an_error(capsys, orders) -> None:
    rc, out, err = run(capsys, "cat", str(orders), "--key", "audit", "--start-seq", "99999", "--header-only")
    assert (rc, err, _seqs(out)) == (0, "", [])
    rc, _, err = run(capsys, "cat", str(orders), "--key", "nope", "--last", "2")
    assert rc == 1 and "the keys there: audit, orders" in one_error_line(err)


def test_bad_bounds_are_one_line(capsys, orders) -> None:
    rc, _, err = run(capsys, "cat", str(orders), "--last", "-1")
    assert rc == 1 and "--last takes a number of messages" in one_error_line(err)
    rc, _, err = run(capsys, "cat", str(orders), "--first", "1", "--last", "1")
    assert rc == 2 and "not allowed with" in err


def test_bounded_reads_are_cheap_on_a_large_remote_file(capsys, orders, tmp_path) -> None:
    """A time start, a sequence start and the last N read a few KiB, not the file (bytes the server sent)."""
    shutil.copy(orders, tmp_path / "orders.ss")
    size = orders.stat().st_size
    with http_folder(tmp_path) as server:
        url = server.url("orders.ss")
        for argv in (
            ("--last", "5"),
            ("--since", "2023-11-14T23:50:00", "--first", "3", "--key", "audit"),
            ("--start-seq", "2000", "--end-seq", "2002", "--key", "orders"),
        ):
            before = server.bytes_sent
            rc, out, err = run(capsys, "cat", url, *argv, "--header-only", "--block-size", "16KiB")
            assert (rc, err) == (0, "")
            assert 1 <= len(_seqs(out)) <= 5
            sent = server.bytes_sent - before
            # a binary search of ~2 log2(98 beacons) small beacon reads (4 KiB each here), then the window
            assert sent < size / 5, (argv, sent, size)


def test_bounded_messages_for_python_callers(orders) -> None:
    with nbkit.StreamReader(orders, keys="orders") as reader:
        got = [m.seq for m in bounded_messages(reader, Bounds(start_seq=10, last=2), keys=["orders"])]
    assert got == [2999, 3000]
    with pytest.raises(ValueError, match="not both"):
        Bounds(first=1, last=1)


def test_lineage_and_export_take_a_time_window(capsys, orders, tmp_path) -> None:
    rc, out, err = run(
        capsys, "lineage", str(orders), "--since", "2023-11-14T22:13:20", "--until", "2023-11-14T22:15:00"
    )
    assert rc == 0, err
    assert "100 messages" in out or "messages" in out
    out_path = tmp_path / "w.parquet"
    rc, _, err = run(
        capsys,
        "export",
        str(orders),
        "-o",
        str(out_path),
        "--since",
        "2023-11-14T22:13:20",
        "--until",
        "2023-11-14T22:15:00",
    )
    assert rc == 0 and err == f"nbkit: wrote 100 messages to {out_path}\n"
