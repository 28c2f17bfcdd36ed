"""bench/dask_read.py runs on tiny data (a 3 MiB file in 1 MiB partitions; a 1 MiB one gathered to the client)
and checks its own results.

It has ``--size`` where the other benchmarks have ``--messages``, so it is run here rather than from
tests/test_bench_smoke.py; no timing is asserted, only that it runs, compares and reports.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env

pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]


def _run_bench(*args: str, timeout: float) -> str:
    """Run bench/dask_read.py with ``args`` from the repository root; check it succeeds, return its stdout."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dask_read.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=checkout_env(),
        cwd=str(ROOT),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_dask_benchmark_runs_on_tiny_data(tmp_path):
    args = ["--size", "3MiB", "--partition-size", "1MiB", "--repeat", "2", "--path", str(tmp_path / "b.ss")]
    out = _run_bench(*args, timeout=300)
    assert "PASS  results equal" in out, out
    assert "partitions equal to the sequential frame: True; group sizes equal: True" in out, out
    parts = os.path.getsize(tmp_path / "b.ss") // (1 << 20) + 1  # cut at every 1 MiB beacon
    assert f"[{parts} parts]" in out, out
    for line in ("CPU seconds (medians):", "dask workers: user", "distributed's background"):
        assert line in out, out
    assert out.splitlines()[-1].endswith("targets met")


def test_benchmark_runs_on_tiny_data(tmp_path):
    """bench/dask_read.py end to end on a 1 MiB file, results gathered to the client (``--to-client``)."""
    out = _run_bench(
        "--size", "1MiB", "--partition-size", "128KiB", "--path", str(tmp_path / "b.ss"), "--to-client", timeout=180
    )
    lines = out.splitlines()
    assert lines[0].startswith("== ") and "machine:" in lines[1]
    assert any(line.strip().startswith("PASS  results equal") for line in lines), out
    assert lines[-1].endswith("targets met")
