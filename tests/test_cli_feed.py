"""The commands that feed and read a running service: ``publish``, ``cat``/``info --from stdio``, and the
rough edges of issue 13 (``cat --key`` with an unknown key, control bytes in ``log``, the EOS offset of
``info``, ``write`` with a minimal header, a non-increasing sequence, a failed write on a new file, a
malformed stdio header under ``nbkit run``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env
from cli_run import one_error_line, run
from waiting import wait_until

from nbkit import cli
from nbkit.transport.file_reader import iter_messages
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope

ROOT = Path(__file__).resolve().parents[1]


# -- publish -----------------------------------------------------------------------------------------


def test_publish_one_message_with_headers_and_a_shard(capsys, tmp_path: Path) -> None:
    path = tmp_path / "p.ss"
    rc, out, err = run(
        capsys, "publish", str(path), "orders", '{"id": 1}', "-H", "x-tenant: acme", "-H", "X-Trace:7", "--shard", "3"
    )
    assert (rc, out, err) == (0, "published orders seq 1\n", "")
    [m] = iter_messages(path)
    assert (m.stream_key, m.shard_id, m.seq) == ("orders", 3, 1)
    assert envelope.decode(m.payload) == ({"x-tenant": "acme", "x-trace": "7"}, b'{"id": 1}')


def test_publish_stdin_lines_continue_the_files_sequence(capsys, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "p.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"first")
    rc, out, _ = run(capsys, "publish", str(path), "orders", stdin=b"a\n\nb\r\nc", monkeypatch=monkeypatch)
    assert rc == 0 and out.splitlines() == [
        "published orders seq 2",
        "published orders seq 3",
        "published orders seq 4",
    ]
    assert [m.payload for m in iter_messages(path)] == [b"first", b"a", b"b", b"c"]
    rc, out, _ = run(capsys, "publish", "-q", str(path), "orders", "d")
    assert (rc, out) == (0, "")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["bad key", "x"], "stream key 'bad key'"),
        (["k", "x", "-H", "nocolon"], "-H 'nocolon': expected NAME:VALUE"),
        (["k", "x", "--shard", "-1"], "--shard -1"),
    ],
)
def test_publish_refuses_bad_arguments_in_one_line(capsys, tmp_path: Path, argv, expected) -> None:
    path = tmp_path / "p.ss"
    rc, out, err = run(capsys, "publish", str(path), *argv)
    assert rc == 1 and out == "" and expected in one_error_line(err)
    assert not path.exists()


def test_publish_help_names_every_option(capsys) -> None:
    rc, out, _ = run(capsys, "publish", "--help")
    assert rc == 0
    for word in ("KEY", "PAYLOAD", "NAME:VALUE", "--shard", "--lock-timeout", "stdin"):
        assert word in out


# -- pipe captures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_capture(tmp_path_factory) -> Path:
    """The pipe stage output ``nbkit demo`` writes (every line a retry or dead-letter copy)."""
    out = tmp_path_factory.mktemp("demo")
    assert cli.main(["demo", "--out", str(out), "--orders", "30", "--no-png"]) == 0
    return out / "pipe-stdout.txt"


def test_cat_from_stdio_shows_the_retry_count_of_every_copy(capsys, demo_capture: Path) -> None:
    lines = demo_capture.read_text().splitlines()
    assert lines and all("rs1:" in ln for ln in lines)  # unreadable as it is
    rc, out, err = run(capsys, "cat", "--from", "stdio", str(demo_capture))
    assert rc == 0 and err == ""
    shown = out.splitlines()
    assert len(shown) == len(lines)
    for line in shown:
        assert "x-ruststream-retry-count=" in line and "rs1:" not in line, line
        assert '"id":' in line  # the payload, decoded
    rc, out, _ = run(capsys, "cat", "--from", "stdio", "--format", "ndjson", str(demo_capture))
    docs = [json.loads(ln) for ln in out.splitlines()]
    assert all(int(d["headers"]["x-ruststream-retry-count"]) >= 1 for d in docs)
    assert [d["header"]["line"] for d in docs] == list(range(1, len(lines) + 1))
    rc, out, _ = run(capsys, "cat", "--from", "stdio", "--format", "stdio", str(demo_capture))
    # the stdio format gives lines a stage reads back with the same headers and payloads
    again = [(m.stream_key, m.headers, m.payload) for m in _read(out)]
    assert again == [(m.stream_key, m.headers, m.payload) for m in _read(demo_capture.read_text())]


def _read(text: str):
    from nbkit.transport.stdio_capture import read_capture

    return list(read_capture(text.splitlines()))


def test_info_from_stdio_counts_keys_copies_and_dead_letters(capsys, demo_capture: Path) -> None:
    rc, out, _ = run(capsys, "info", "--from", "stdio", "--json", str(demo_capture))
    summary = json.loads(out)
    keys = {k["stream_key"]: k for k in summary["keys"]}
    assert rc == 0 and set(keys) == {"orders.retry", "orders.dead"}
    assert summary["copies"] == summary["messages"] == summary["lines"]
    assert summary["dead_letters"] == keys["orders.dead"]["count"] > 0 and keys["orders.dead"]["dead_letter"]
    assert keys["orders.dead"]["max_retry_count"] == 4  # dead-lettered at the cap: attempt 4 = 3 retries + 1
    rc, out, _ = run(capsys, "info", "--from", "stdio", str(demo_capture))
    assert rc == 0 and "dead letters" in out and "orders.dead" in out and "malformed lines  0" in out


def test_a_malformed_line_is_reported_by_number_and_the_rest_is_read(capsys, tmp_path: Path, monkeypatch) -> None:
    good = "[2024-01-01T00:00:00 | jobs | 0] one"
    data = (
        f"{good}\n[2024-01-01T00:00:00 | jobs | zz] two\n".encode()
        + b"\xff\xfe\n"
        + b"[2024-01-01T00:00:01 | jobs] three\n"
    )
    rc, out, err = run(capsys, "cat", "--from", "stdio", "-", stdin=data, monkeypatch=monkeypatch)
    assert rc == 1
    assert [ln.split("] ", 1)[1] for ln in out.splitlines()] == ["one", "three"]
    errors = err.splitlines()
    assert len(errors) == 2 and errors[0].startswith("nbkit: stdin, line 2: ") and "line 3" in errors[1]
    path = tmp_path / "cap.txt"
    path.write_bytes(data)
    rc, out, _ = run(capsys, "info", "--from", "stdio", str(path))
    assert rc == 0 and "malformed lines  2 (first: line 2)" in out and f"{path}, line 3" in out


def test_cat_from_stdio_without_the_file_is_one_error_line(capsys, tmp_path: Path) -> None:
    rc, _, err = run(capsys, "cat", "--from", "stdio", str(tmp_path / "none.txt"))
    assert rc == 1 and "no such file" in one_error_line(err)


# -- rough edges ---------------------------------------------------------------------------------------


def test_cat_with_an_unknown_key_names_the_keys_there(capsys, tmp_path: Path) -> None:
    path = tmp_path / "k.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"1")
        w.write("payments", b"2")
    rc, out, err = run(capsys, "cat", str(path), "--key", "order")
    assert rc == 1 and out.startswith("# ")  # the header line, no message
    assert one_error_line(err) == f"nbkit: {path}: no message has the key order; the keys there: orders, payments"
    rc, _, err = run(capsys, "cat", str(path), "--key", "orders")
    assert rc == 0 and err == ""


def test_log_format_escapes_control_bytes(capsys, tmp_path: Path) -> None:
    path = tmp_path / "c.ss"
    with StreamWriter(path) as w:
        w.write("k", b"red \x1b[31m\tbell\x07 two\nlines \xc2\x85end")
    rc, out, _ = run(capsys, "cat", str(path))
    line = out.splitlines()[1]
    assert rc == 0 and line.endswith(r"red \x1b[31m\tbell\x07 two\nlines \x85end")
    assert "\x1b" not in out and "\x07" not in out


def test_info_gives_the_eos_one_offset(capsys, tmp_path: Path) -> None:
    path = tmp_path / "e.ss"
    with StreamWriter(path) as w:
        w.write("k", b"1")
        eos = w.write_eos()
    rc, text, _ = run(capsys, "info", str(path))
    assert f"yes (at offset {eos.offset})" in text
    rc, out, _ = run(capsys, "info", "--json", str(path))
    doc = json.loads(out)
    assert doc["eos_offset"] == eos.offset
    assert doc["end"]["description"] == f"ended at the end-of-stream mark (offset {eos.offset})"


def test_write_takes_a_header_with_only_the_stream_key(capsys, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "w.ss"
    with StreamWriter(path) as w:
        w.write("k", b"0", timestamp_ms=5)
    lines = b'{"header":{"stream_key":"k"},"payload":"a"}\n{"header":{"stream_key":"k","sequence":9},"payload":"b"}\n'
    rc, _, err = run(capsys, "write", str(path), stdin=lines, monkeypatch=monkeypatch)
    assert (rc, err) == (0, "")
    got = list(iter_messages(path))
    assert [(m.seq, m.shard_id, m.payload) for m in got] == [(1, 0, b"0"), (2, 0, b"a"), (9, 0, b"b")]
    assert got[1].timestamp_ms > 5  # now


def test_write_refuses_a_sequence_that_does_not_increase(capsys, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "w.ss"
    with StreamWriter(path) as w:
        w.write("k", b"0")
        w.write("k", b"1")
    line = b'{"header":{"stream_key":"k","sequence":2},"payload":"again"}\n'
    rc, _, err = run(capsys, "write", str(path), stdin=line, monkeypatch=monkeypatch)
    assert rc == 1
    assert one_error_line(err) == (
        "nbkit: stdin, line 1: sequence 2 of stream 'k' does not increase: the "
        "file's last is 2; leave the sequence out to get 3"
    )
    assert [m.payload for m in iter_messages(path)] == [b"0", b"1"]


@pytest.mark.parametrize(
    "stdin",
    [
        b'{"header":{"stream_key":"k"},"payload":"a"}\n{"header":{"stream_key":"no good"},"payload":"b"}\n',
        b"not json\n",
    ],
)
def test_a_failed_write_on_a_new_file_leaves_no_file(capsys, tmp_path: Path, monkeypatch, stdin) -> None:
    path = tmp_path / "new.ss"
    rc, _, err = run(capsys, "write", str(path), stdin=stdin, monkeypatch=monkeypatch)
    one_error_line(err)
    if b"no good" in stdin:  # the first message went in before the bad line: the file keeps it
        assert rc == 1 and [m.payload for m in iter_messages(path)] == [b"a"]
    else:
        assert rc == 1 and not path.exists()


def test_a_failed_write_on_a_new_file_with_no_message_removes_it(capsys, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "new.ss"
    line = b'{"header":{"stream_key":"no good"},"payload":"b"}\n'
    rc, _, err = run(capsys, "write", str(path), stdin=line, monkeypatch=monkeypatch)
    assert rc == 1 and "no good" in one_error_line(err) and not path.exists()


STAGE = """
from nbkit import App, HandlerOutcome, StdioBroker
broker = StdioBroker()
@broker.subscriber("jobs", out_retry="jobs.retry")
def work(d):
    return HandlerOutcome.ack()
app = App(broker)
"""


def test_a_malformed_stdio_header_is_one_line_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "stage.py").write_text(STAGE)
    env = checkout_env()
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "stage:app", "--log-level", "ERROR"],
        cwd=tmp_path,
        input=b"[2024-01-01T00:00:00 | jobs | 0] a\n[bad | jobs | x] b\n",
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    error, summary = done.stderr.decode().splitlines()  # the one error line, then the run's summary
    assert error.startswith("nbkit: line 2: ") and "Traceback" not in done.stderr.decode()
    assert summary.startswith("nbkit: run summary: stopped by LineParseError; 1 delivery")


# -- watch -------------------------------------------------------------------------------------------


def test_watch_once_prints_the_summary(capsys, tmp_path: Path) -> None:
    path = tmp_path / "w.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"1")
        w.write("orders", envelope.encode({envelope.RETRY_COUNT_HEADER: "1"}, b"1", force_text=False))
        w.write("orders.dead", b"2")
    rc, out, _ = run(capsys, "watch", "--once", str(path))
    assert rc == 0
    assert out.splitlines()[0] == f"{path}: following, 3 messages, byte {path.stat().st_size} of {path.stat().st_size}"
    assert "deliveries per attempt: attempt 1: 1, attempt 2: 1" in out and "orders.dead (dead letters)" in out


def test_watch_and_info_take_the_declared_dead_letter_keys(capsys, tmp_path: Path, demo_capture: Path) -> None:
    """``--dead-letter-key`` is one option for info, watch and lineage: a key the naming rule misses counts."""
    path = tmp_path / "w.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"1")
        w.write("parked", b"1")
    rc, out, _ = run(capsys, "watch", "--once", str(path))
    assert rc == 0 and "parked (dead letters)" not in out
    rc, out, _ = run(capsys, "watch", "--once", "--dead-letter-key", "parked", str(path))
    assert rc == 0 and "parked (dead letters)" in out
    args = ("info", "--from", "stdio", "--json", str(demo_capture))
    rc, out, _ = run(capsys, *args, "--dead-letter-key", "orders.retry")
    keys = {k["stream_key"]: k for k in json.loads(out)["keys"]}
    assert rc == 0 and keys["orders.retry"]["dead_letter"] and not keys["orders.dead"]["dead_letter"]


def test_watch_a_missing_file_is_one_error_line(capsys, tmp_path: Path) -> None:
    rc, _, err = run(capsys, "watch", str(tmp_path / "none.ss"))
    assert rc == 1 and "start the service first" in one_error_line(err)


def test_watch_follows_until_the_file_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "live.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"first")
    env = checkout_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "watch", "--every", "0.05", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().startswith(f"{path}: following, 1 messages")
        with StreamWriter(path) as w:
            w.write("orders", b"second")
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            if line.startswith(f"{path}: following, 2 messages"):
                break
        path.unlink()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"{path}: removed, 2 messages" in out and f"{path} was removed" in out


def test_write_from_a_slow_producer_lets_other_writers_append_between_lines(tmp_path: Path) -> None:
    """nbkit write batches 64 messages per write, but flushes (and so releases the lock) whenever stdin
    has nothing ready: a shared writer with lock_timeout=0 gets in while the producer is slow."""
    path = tmp_path / "slow.ss"
    env = checkout_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "write", str(path)], stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        proc.stdin.write(b'{"header":{"stream_key":"k"},"payload":"from write"}\n')
        proc.stdin.flush()
        wait_until(lambda: path.exists() and any(True for _ in iter_messages(path)), what="nbkit write's first message")
        with StreamWriter(path, lock_timeout=0) as other:  # the lock is free while write waits for stdin
            assert other.write("k", b"from another writer").seq == 2
        proc.stdin.write(b'{"header":{"stream_key":"k"},"payload":"again"}\n')
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    assert [(m.seq, m.payload) for m in iter_messages(path)] == [
        (1, b"from write"),
        (2, b"from another writer"),
        (3, b"again"),
    ]
