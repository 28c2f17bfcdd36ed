"""``nbkit redrive``: append dead letters again (file), or print stdio lines for the next stage (capture)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_run import one_error_line, run

from nbkit.transport.file_reader import iter_messages
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.stdio_line import format_line, parse_line

RETRY = envelope.RETRY_COUNT_HEADER
FROM = "x-nbkit-redriven-from"


@pytest.fixture
def dead_file(tmp_path: Path) -> Path:
    """orders 1..4, and orders 2 and 4 under orders.dead with retry count 3, as a runtime writes them."""
    path = tmp_path / "orders.ss"
    with StreamWriter(path, created_at_ms=1_704_067_200_000) as w:
        for i in range(1, 5):
            w.write("orders", b'{"id": %d}' % i, timestamp_ms=1_704_067_200_000 + i * 1000)
        for i in (2, 4):
            data = envelope.encode({RETRY: "3"}, b'{"id": %d}' % i, force_text=False)
            w.write("orders.dead", data, timestamp_ms=1_704_067_210_000 + i * 1000)
    return path


def redriven(path: Path) -> list[tuple[dict, bytes]]:
    out = []
    for m in iter_messages(path):
        if m.stream_key == "orders":
            headers, payload = envelope.decode(m.payload)
            if FROM in headers:
                out.append((headers, payload))
    return out


def test_redrive_appends_then_a_rerun_appends_nothing(capsys, dead_file):
    rc, out, err = run(capsys, "redrive", str(dead_file), "--from", "orders.dead", "--to", "orders")
    assert rc == 0 and out == ""
    assert one_error_line(err) == "nbkit: redrove 2 dead letters from 'orders.dead' to 'orders' (sequences 5..6)"
    got = redriven(dead_file)
    assert [(h[FROM], RETRY in h, p) for h, p in got] == [
        ("orders.dead#1", False, b'{"id": 2}'),
        ("orders.dead#2", False, b'{"id": 4}'),
    ]
    size = dead_file.stat().st_size
    rc, out, err = run(capsys, "redrive", str(dead_file), "--from", "orders.dead", "--to", "orders")
    assert rc == 0 and dead_file.stat().st_size == size
    assert one_error_line(err) == (
        "nbkit: redrove 0 dead letters from 'orders.dead' to 'orders'; 2 selected were redriven before (skipped)"
    )


def test_dry_run_prints_what_it_would_append_and_writes_nothing(capsys, dead_file):
    before = dead_file.read_bytes()
    rc, out, err = run(capsys, "redrive", str(dead_file), "--from", "orders.dead", "--to", "orders",
                       "--where", "seq>=2", "--dry-run")  # fmt: skip
    assert rc == 0 and dead_file.read_bytes() == before
    assert out.splitlines() == ['orders.dead#2 -> orders: {"id": 4}  [headers: x-ruststream-retry-count: 3]']
    assert one_error_line(err) == "nbkit: would redrive 1 dead letter from 'orders.dead' to 'orders'"


def test_keep_count(capsys, dead_file):
    rc, _, _ = run(capsys, "redrive", str(dead_file), "--from", "orders.dead", "--to", "orders", "--keep-count")
    assert rc == 0 and [h[RETRY] for h, _ in redriven(dead_file)] == ["3", "3"]


def capture_lines() -> str:
    dead = envelope.encode({RETRY: "2"}, b"job 7", force_text=True).decode()
    retry = envelope.encode({RETRY: "1"}, b"job 7", force_text=True).decode()
    return "".join(
        [
            format_line(1_704_067_200_000, "jobs.retry", 0, retry),
            format_line(1_704_067_201_000, "jobs.dead", 0, dead),
            format_line(1_704_067_202_000, "other", 0, "unrelated"),
        ]
    )


@pytest.mark.parametrize("from_stdin", [False, True])
def test_capture_prints_stdio_lines_for_the_next_stage(capsys, monkeypatch, tmp_path, from_stdin):
    text = capture_lines()
    path = tmp_path / "capture.txt"
    path.write_text(text)
    args = ["redrive", "-" if from_stdin else str(path), "--from", "jobs.dead", "--to", "jobs", "--capture"]
    rc, out, err = run(capsys, *args, stdin=text if from_stdin else None, monkeypatch=monkeypatch)
    assert rc == 0
    assert one_error_line(err) == "nbkit: redrove 1 dead letter from 'jobs.dead' to 'jobs'"
    (line,) = out.splitlines()
    parsed = parse_line(line)
    assert (parsed.stream_key, parsed.seq) == ("jobs", 0)
    headers, payload = envelope.decode(parsed.payload.encode())
    assert payload == b"job 7" and headers[FROM] == "jobs.dead#0" and RETRY not in headers
    # fed back together with the capture, it marks the dead letter as done
    rc, out, err = run(capsys, "redrive", "-", "--from", "jobs.dead", "--to", "jobs", "--capture",
                       stdin=text + line + "\n", monkeypatch=monkeypatch)  # fmt: skip
    assert rc == 0 and out == "" and "1 selected were redriven before" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "orders.dead", "--to", "orders", "--where", "seq=x"], "'x' is not a sequence number"),
        (["--from", "orders", "--to", "orders"], "both 'orders'"),
        (["--from", "bad key", "--to", "orders"], "source (dead-letter) key"),
    ],
)
def test_bad_arguments_are_one_line(capsys, dead_file, args, message):
    before = dead_file.read_bytes()
    rc, out, err = run(capsys, "redrive", str(dead_file), *args)
    assert rc == 2 and out == "" and message in one_error_line(err)  # a usage error, as argparse's
    assert dead_file.read_bytes() == before


def test_a_missing_file_and_a_bad_capture_line_are_one_line(capsys, monkeypatch, tmp_path):
    rc, _, err = run(capsys, "redrive", str(tmp_path / "nope.ss"), "--from", "a.dead", "--to", "a")
    assert rc == 1 and "no such stream file" in one_error_line(err)
    rc, _, err = run(capsys, "redrive", "-", "--capture", "--from", "a.dead", "--to", "a",
                     stdin="[2024-01-01T00:00:00 | a.dead | 0] ok\n[2024-99-01T00:00:00 | a.dead | 1] x\n",
                     monkeypatch=monkeypatch)  # fmt: skip
    assert rc == 1 and "line 2" in one_error_line(err)


def _holder(path: Path, exclusive: bool):
    """Another process with a StreamWriter open on ``path`` (as a running service's broker has); it holds it
    (its 60 s sleep) until the test kills it."""
    import subprocess

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom nbkit import StreamWriter\n"
         f"w = StreamWriter(sys.argv[1], exclusive={exclusive}); print('open', flush=True); time.sleep(60)",
         str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "open"
    return holder


def test_a_file_another_process_has_open_for_writing_is_redriven(capsys, dead_file):
    holder = _holder(dead_file, exclusive=False)  # shared, as a service's writer: appends take turns
    try:
        rc, _, err = run(capsys, "redrive", str(dead_file), "--from", "orders.dead", "--to", "orders")
        assert rc == 0 and "redrove 2 dead letters" in err
        assert len(redriven(dead_file)) == 2
    finally:
        holder.kill()
        holder.wait()


def test_a_file_another_process_holds_exclusively_is_refused_after_the_lock_timeout(dead_file):
    from nbkit import WriterLockedError
    from nbkit.runtime.redrive import redrive

    holder = _holder(dead_file, exclusive=True)
    try:
        before = dead_file.read_bytes()
        with pytest.raises(WriterLockedError, match="process"):
            redrive(dead_file, source="orders.dead", target="orders", lock_timeout=0.2)
        assert dead_file.read_bytes() == before
    finally:
        holder.kill()
        holder.wait()
