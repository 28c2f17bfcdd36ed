"""bench/dask_read.py runs on tiny data (a 3 MiB file, 1 MiB partitions) and checks its own results.

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


def test_dask_benchmark_runs_on_tiny_data(tmp_path):
    env = checkout_env()
    args = ["--size", "3MiB", "--partition-size", "1MiB", "--repeat", "2", "--path", str(tmp_path / "b.ss")]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "dask_read.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=str(ROOT),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "PASS  results equal" in out, out
    assert "partitions equal to the sequential frame: True; group sizes equal: True" in out, out
    parts = os.path.getsize(tmp_path / "b.ss") // (1 << 20) + 1  # cut at every 1 MiB beacon
    assert f"[{parts} parts]" in out, out
    for line in ("CPU seconds (medians):", "dask workers: user", "distributed's background"):
        assert line in out, out
    assert out.splitlines()[-1].endswith("targets met")
