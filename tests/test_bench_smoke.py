"""The benchmarks in bench/ run (tiny data, one timed run each), and the fast paths they measure agree
with the reference paths they stand in for. No timing is asserted here: figures live in bench/README.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from checkout_env import checkout_env

from nbkit import tabular
from nbkit.tabular import frames
from nbkit.tabular.payloads import infer_column
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.ssformat import encode_frame
from nbkit.wire.stdio_line import parse_fields, parse_general

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
TINY = {
    "read": ["--messages", "2000", "--repeat", "1"],
    "write": ["--messages", "2000", "--repeat", "1", "--batch", "64", "--fsync-messages", "200"],
    "dispatch": ["--messages", "2000", "--repeat", "1"],
    "pipe": ["--messages", "2000", "--repeat", "1", "--payload-bytes", "75", "1024"],
    "memory": ["--messages", "2000", "--repeat", "1", "--size-mb", "4"],
    "policy_explorer": ["--messages", "100", "--repeat", "1"],
    "lineage": ["--messages", "2000", "--repeat", "1"],
    "peers": ["--messages", "2000", "--repeat", "1"],
    "parquet": ["--messages", "2000", "--repeat", "1"],
    "salvage": ["--messages", "60", "--repeat", "1", "--files", "5"],
    "suspects": ["--messages", "2000", "--repeat", "1", "--files", "4"],
    "viewer": ["--messages", "3000", "--repeat", "1", "--pages", "3"],
    "scan": ["--messages", "2000", "--repeat", "1"],
}


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = checkout_env()
    return subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,  # a deadline for a stuck script, generous enough for a loaded machine (not a timing)
        env=env,
        cwd=str(ROOT),
    )


def test_every_benchmark_is_listed_in_the_readme():
    readme = (BENCH / "README.md").read_text()
    scripts = {p.stem for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert set(TINY) <= scripts
    for name in sorted(scripts):
        assert f"python bench/{name}.py" in readme, f"bench/README.md does not list bench/{name}.py"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs_on_tiny_data(script):
    assert "--messages" in _run(script, "--help").stdout
    done = _run(script, *TINY[script])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("== ") and "machine:" in lines[1]
    assert any(line.strip().startswith(("PASS", "FAIL")) for line in lines)
    assert lines[-1].endswith("targets met")
    if script in ("read", "peers", "scan"):  # the value check must hold whatever the timings say
        assert any(line.strip().startswith("PASS  identical values") for line in lines), done.stdout
    if script == "lineage":  # linking must be right whatever the timings say
        assert any(line.strip().startswith("PASS  every copy linked") for line in lines), done.stdout
    if script == "suspects":  # no cry of wolf and every seq flip caught, whatever the timings say
        assert any(line.strip().startswith("PASS  no false positive") for line in lines), done.stdout
        assert any(line.strip().startswith("PASS  every seq flip caught") for line in lines), done.stdout
    if script == "pipe":
        assert any(line.strip().startswith("PASS  every line written back") for line in lines), done.stdout


def test_payload_column_benchmark_prints_the_page_cost_and_the_zero_copy_verdict():
    """bench/payload_column.py: the cost of fresh pages, each pandas operation on a binary_view column, and
    one verdict that says whether a zero-copy payload column would be usable (whichever way it goes)."""
    done = _run("payload_column", "--mib", "1", "--repeat", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("== ") and "machine:" in lines[1]
    assert any("fresh memory costs about" in line and "per 4 KiB page" in line for line in lines), done.stdout
    assert any(line.strip().startswith("s.take([1, 0])") for line in lines), done.stdout
    verdicts = [line.strip() for line in lines if line.strip().startswith(("PASS", "FAIL"))]
    assert len(verdicts) == 1 and "binary_view" in verdicts[0], done.stdout
    assert lines[-1] in ("== 0/1 targets met", "== 1/1 targets met")


@pytest.mark.timeout(900)
def test_notebooks_benchmark_runs_on_one_notebook(tmp_path):
    # A copy of 00-start-here in tmp_path: the kernel runs beside the notebook and writes work/00 there, so
    # this cannot collide with the suite's own nbval run of notebooks/ (the README command runs both at once).
    copy = tmp_path / "00-start-here.ipynb"
    copy.write_bytes((ROOT / "notebooks" / "00-start-here.ipynb").read_bytes())
    assert "--notebooks" in _run("notebooks", "--help").stdout
    done = _run("notebooks", "--repeat", "1", "--workers", "0", "--notebooks", str(copy))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("== ") and "machine:" in lines[1]
    assert any(line.strip().startswith("median") and " s wall" in line for line in lines), done.stdout
    assert any("00-start-here.ipynb" in line and "cells;" in line for line in lines), done.stdout  # per notebook
    assert any(line.strip().startswith(("PASS", "FAIL")) for line in lines)
    assert lines[-1].endswith("targets met")
    assert (tmp_path / "work" / "00").is_dir()  # the copy's kernel wrote beside the copy


# -- the fast paths agree with the reference paths -------------------------------------------------


def _messages(tmp_path: Path, payloads: list[bytes], *, interval: int = 1024) -> Path:
    path = tmp_path / "m.ss"
    with StreamWriter(path, beacon_interval=interval, created_at_ms=1) as w:
        for i, p in enumerate(payloads):
            w.write(("a", "bb", "ruststream-internal")[i % 3], p, timestamp_ms=1000 + i)
        w.write_eos()
    return path


def test_read_columns_and_batched_poll_match_frame_by_frame_parsing(tmp_path):
    path = _messages(tmp_path, [bytes([i % 251]) * (i % 700) for i in range(600)])
    with StreamReader(path) as r:  # the reference: one frame at a time, no scan ahead
        reference = []
        while r.end is None and (m := r._poll_frame()) is not None:
            reference.append((tuple(m), r.beacons_seen))
        ref_end = r.end
    with StreamReader(path) as r:
        polled = [(tuple(m), r.beacons_seen) for m in r]
        assert (polled, r.end) == (reference, ref_end)
    with StreamReader(path) as r:
        cols = r.read_columns(accept=lambda key: key != "bb")
        assert r.end == ref_end
    assert list(zip(*cols, strict=True)) == [m[:6] for m, _ in reference if m[0] != "bb"]


def test_a_damaged_frame_is_reported_the_same_way_by_every_path(tmp_path):
    path = _messages(tmp_path, [b"x" * 50] * 40)
    data = bytearray(path.read_bytes())
    data[700] ^= 0xFF
    path.write_bytes(bytes(data))
    outcomes = []
    for read in (lambda r: list(r), lambda r: r.read_columns().offset):
        with StreamReader(path, errors="stop") as r:
            got = read(r)
            end = r.end
            outcomes.append((len(got), end.reason, end.offset, end.trailing_bytes, str(end.error)))
    assert outcomes[0] == outcomes[1] and outcomes[0][1] == "error"


@pytest.mark.parametrize(
    "bodies",
    [
        [b'{"a": 1}', b"[1, 2]", b" 3 ", b'"s"', b"NaN", b"1e400", b"1" * 30],
        [b"[1", b"2]", b"3,4"],  # parses as one array if simply joined: must not
        [b'"x', b'y"', b"1],[2"],
        [b"", b"  ", b"\xff", "é".encode(), b'{"a":1}\n', b'"\\ud800"', b"\xef\xbb\xbf{}"],
    ],
)
def test_json_payloads_parse_as_json_loads_does_one_by_one(bodies):
    assert repr(tabular.json_values(list(bodies))) == repr([tabular.json_value(b) for b in bodies])


def test_a_too_deep_json_payload_still_raises_recursion_error():
    with pytest.raises(RecursionError):
        tabular.json_values([b"1", b"[" * 100_000])


@pytest.mark.parametrize(
    "values",
    [[1, 2], [2**63], [-(2**63) - 1], [1.5, float("nan")], [True], ["a", "b"], [1, True], [1, 2.5], [None], []],
)
def test_typed_columns_match_infer_objects(values):
    fast = infer_column(list(values))
    slow = pd.Series(list(values), dtype=object).infer_objects()
    assert fast.dtype == slow.dtype and fast.equals(slow)


def test_read_stream_frames_match_row_by_row_construction(tmp_path):
    payloads = [json.dumps({"id": i, "name": f"n{i}", "price": i / 4, "ok": i % 2 == 0}).encode() for i in range(50)]
    payloads += [envelope.encode({"x-ruststream-retry-count": "2"}, b'{"id": 99}', force_text=False), b"\xff"]
    path = _messages(tmp_path, payloads)
    for mode in tabular.PAYLOAD_MODES:
        df = frames.read_stream(path, payload=mode, include_internal=True)
        cols = tabular.FrameBuilder(mode)
        with StreamReader(path) as r:
            for m in r:
                cols.add(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload, m.offset)
        pd.testing.assert_frame_equal(df, cols.frame("file"), check_exact=True)
        assert list(df["retry_count"])[-3:] == [2, 0, 0]


def test_writer_frames_are_encode_frame_bytes(tmp_path):
    path = tmp_path / "w.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=1) as w:
        written = [w.write("k", bytes([i]) * (i * 13 % 300), shard_id=i % 3, timestamp_ms=i) for i in range(40)]
    data = path.read_bytes()
    for i, at in enumerate(written):
        if at.offset // 1024 == (at.end - 1) // 1024:  # not cut by a beacon
            frame, _ = encode_frame(b"k", i % 3, at.seq, i, bytes([i]) * (i * 13 % 300))
            assert data[at.offset : at.end] == frame


@pytest.mark.parametrize(
    "line",
    [
        "[2024-01-01T00:00:00 | jobs | 5] x",
        "[2024-01-01T00:00:00.123456789 | a.b | +7 | 3]   padded ",
        "[2023-02-29T00:00:00 | jobs | 5] x",
        "[2024-01-01T00:00:00 | jobs | 18446744073709551616] x",
        "[2024-01-01T00:00:00 | jobs | 1]",
        "[2024-01-01T00:00:00 | jobs | 1]\u3000",
    ],
)
def test_canonical_lines_parse_as_the_general_parser_does(line):
    try:
        expected = parse_general(line, 1)
    except Exception as exc:  # noqa: BLE001 - compared below
        expected = (type(exc), str(exc))
    try:
        got = parse_fields(line, 1)
    except Exception as exc:  # noqa: BLE001
        got = (type(exc), str(exc))
    assert got == expected
