"""``nbkit lineage``: the summary of what happened to each message, from a stream file or pipe captures."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run

from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.stdio_line import format_line

DATA = Path(__file__).resolve().parent / "data"


def copy_of(payload: bytes, count: int, seq: int) -> bytes:
    headers = {envelope.SEQUENCE_HEADER: str(seq), envelope.RETRY_COUNT_HEADER: str(count)}
    return envelope.encode(headers, payload, force_text=False)


def service_file(path: Path) -> Path:
    """Three orders: #1 handled at once; #2 retried after 2 s then 4 s; #3 retried after 2 s, 4 s and
    dead-lettered at the cap."""
    with StreamWriter(path, created_at_ms=0) as w:
        w.write("orders", b"1", timestamp_ms=0)  # seq 1
        w.write("orders", b"2", timestamp_ms=100)  # seq 2
        w.write("orders", b"3", timestamp_ms=200)  # seq 3
        w.write("orders", copy_of(b"2", 1, 2), timestamp_ms=2100)  # seq 4
        w.write("orders", copy_of(b"3", 1, 3), timestamp_ms=2200)  # seq 5
        w.write("orders", copy_of(b"2", 2, 4), timestamp_ms=6100)  # seq 6
        w.write("orders", copy_of(b"3", 2, 5), timestamp_ms=6200)  # seq 7
        w.write("orders.dead", copy_of(b"3", 3, 7), timestamp_ms=6200)
    return path


def test_the_summary_of_a_stream_file(capsys, tmp_path):
    path = service_file(tmp_path / "orders.ss")
    rc, out, err = run(capsys, "lineage", str(path))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == str(path)
    assert lines[1] == "3 messages in 8 records (file)"
    assert lines[2].startswith("attempts needed:  1: 1  3: 2")
    assert lines[3] == "final state:      dead-lettered 1, no further copy 2"
    assert lines[4] == "dead letters:     1"
    assert lines[6].split() == ["attempt", "copies", "median", "p95"]
    assert lines[7].split() == ["2", "2", "2.000", "s", "2.000", "s"]
    assert lines[8].split() == ["3", "2", "4.000", "s", "4.000", "s"]
    assert lines[9].startswith("unlinked copies:  0 ")


def test_json_output(capsys, tmp_path):
    path = service_file(tmp_path / "orders.ss")
    rc, out, _ = run(capsys, "lineage", str(path), "--json")
    got = json.loads(out)
    assert rc == 0
    assert got["messages"] == 3 and got["attempts"] == {"1": 1, "3": 2}
    assert got["final_states"] == {"dead-lettered": 1, "no further copy": 2}
    assert got["delays"] == {
        "2": {"copies": 2, "median_s": 2.0, "p95_s": 2.0},
        "3": {"copies": 2, "median_s": 4.0, "p95_s": 4.0},
    }


def test_a_named_dead_letter_key(capsys, tmp_path):
    path = tmp_path / "f.ss"
    with StreamWriter(path, created_at_ms=0) as w:
        w.write("jobs", b"x", timestamp_ms=0)
        w.write("parked", copy_of(b"x", 1, 1), timestamp_ms=0)
    assert json.loads(run(capsys, "lineage", str(path), "--json")[1])["dead_letters"] == 0
    rc, out, _ = run(capsys, "lineage", str(path), "--json", "--dead-letter-key", "parked")
    assert rc == 0 and json.loads(out)["dead_letters"] == 1


def test_pipe_captures_read_in_order(capsys, tmp_path):
    stdin = tmp_path / "in.txt"
    stdout = tmp_path / "out.txt"
    stdin.write_text(format_line(0, "jobs", 0, "a") + format_line(0, "jobs", 1, "b"))
    copy = envelope.encode({envelope.SEQUENCE_HEADER: "1", envelope.RETRY_COUNT_HEADER: "1"}, b"b", force_text=True)
    stdout.write_text(format_line(3000, "jobs.retry", 0, copy.decode()))
    rc, out, _ = run(capsys, "lineage", "--from", "stdio", str(stdout), "--json")
    assert rc == 0 and json.loads(out)["unlinked_copies"] == 1  # its original was on stdin
    rc, out, _ = run(capsys, "lineage", "--from", "stdio", str(stdin), str(stdout), "--json")
    got = json.loads(out)
    assert rc == 0 and got["unlinked_copies"] == 0 and got["messages"] == 2
    assert got["delays"] == {"2": {"copies": 1, "median_s": 3.0, "p95_s": 3.0}}


def test_a_rust_written_file(capsys):
    rc, out, err = run(capsys, "lineage", str(DATA / "sample-1.ss"))
    assert rc == 0 and err == ""
    assert "27 messages in 27 records (file)" in out and "observed delays:  none" in out


def test_bad_input_is_one_line_and_a_non_zero_exit(capsys, tmp_path):
    rc, out, err = run(capsys, "lineage", str(tmp_path / "missing.ss"))
    assert rc == 1 and out == "" and err.startswith("nbkit: ") and "no such file" in err and len(err.splitlines()) == 1
    rc, _, err = run(capsys, "lineage", "--from", "stdio", str(DATA / "sample-1.ss"))
    assert rc == 1 and "not UTF-8" in err and len(err.splitlines()) == 1
    bad = tmp_path / "bad.ss"
    bad.write_bytes(b"not a stream file at all, really not")
    rc, _, err = run(capsys, "lineage", str(bad))
    assert rc == 1 and err.startswith("nbkit: ") and len(err.splitlines()) == 1
