"""Build the documentation site once per test run, for every test that needs it (pytest fixture).

``built_site`` runs ``sphinx-build -b html -n -W --keep-going -E`` on ``docs/`` in a subprocess, from
scratch (``-E``, fresh doctrees), into a folder under pytest's temporary directory. Under xdist the
workers share that folder and a lock, so the site is built once however the tests are spread. The
result (exit status, warnings, seconds) is kept for the tests to assert on; a failed build is not an
error here, so the test that checks the build reports it with Sphinx's own messages.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkout_env import checkout_env

ROOT = Path(__file__).resolve().parents[1]
#: The command, less its output folders (tests/docs/test_site.py prints it on failure).
SPHINX = [sys.executable, "-m", "sphinx", "-b", "html", "-n", "-W", "--keep-going", "-E", "-q"]
BUILD_TIMEOUT = 480


@dataclass(frozen=True)
class SiteBuild:
    """A finished build: where the HTML is, and what Sphinx said."""

    html: Path
    returncode: int
    output: str
    seconds: float


def build(out: Path) -> SiteBuild:
    """Run Sphinx on docs/ into ``out/html`` (doctrees in ``out/doctrees``)."""
    env = checkout_env()
    start = time.monotonic()
    done = subprocess.run(
        [*SPHINX, "-d", str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    return SiteBuild(out / "html", done.returncode, done.stdout + done.stderr, time.monotonic() - start)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> SiteBuild:
    """The site, built once per test run (shared by xdist workers through a lock)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, shared by every worker
    out = base / "docs-site"
    out.mkdir(exist_ok=True)
    with open(out / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = out / "result.json"
        if result.exists():
            saved = json.loads(result.read_text())
            return SiteBuild(Path(saved["html"]), saved["returncode"], saved["output"], saved["seconds"])
        site = build(out)
        result.write_text(json.dumps({**site.__dict__, "html": str(site.html)}))
        return site
