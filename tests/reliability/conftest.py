"""Reliability suite: fuzzing, crash safety, locking, follow under load, positions, shutdown, bad input.

Markers: ``slow`` (a test that runs real processes for several seconds; ``-m "not slow"`` skips them).
Every test has a wall-clock guard (``pytest.mark.timeout``) so a hang fails instead of blocking CI.

Figures: tests that count faults and messages call the ``figures`` fixture; with the environment
variable ``NBKIT_RELIABILITY_FIGURES=path`` each record is appended to that file as one JSON line (what
``docs/reliability.md`` quotes). Without it they are only printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from checkout_env import checkout_env

from .fuzzlib import Base, build_corpus

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPTS = HERE / "scripts"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: runs real processes for several seconds (deselect with -m 'not slow')")


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Base]:
    """The fuzz seed files (intact), built once per worker."""
    return build_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def child_env() -> dict[str, str]:
    """Environment for child processes: this checkout's nbkit first on the path, unbuffered output."""
    return checkout_env(scripts=True, PYTHONUNBUFFERED="1")


@pytest.fixture(scope="session")
def script() -> Callable[[str], list[str]]:
    """``script("crash_writer.py")`` -> the argv prefix that runs a helper script with this Python."""
    return lambda name: [sys.executable, str(SCRIPTS / name)]


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``figures(runs=.., faults=.., checked=.., lost=.., **more)`` records one test's figures."""

    def record(**values: object) -> None:
        entry = {"test": request.node.nodeid, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), **values}
        line = json.dumps(entry, sort_keys=True)
        print(f"\nFIGURES {line}")
        target = os.environ.get("NBKIT_RELIABILITY_FIGURES")
        if target:
            with open(target, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    return record
