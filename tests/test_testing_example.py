"""The example tests in examples/test_services.py pass, run by pytest from the folder as a user runs them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

pytestmark = pytest.mark.timeout(120)


def test_the_example_tests_pass_and_write_nothing_in_the_folder(tmp_path):
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("__pycache__", "*.ss", "*.json"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "nbkit.testing_plugin", "-p", "no:cacheprovider",
         "test_services.py"],
        cwd=folder, env=checkout_env(PYTHONDONTWRITEBYTECODE="1"), capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
    assert not [*folder.glob("*.ss"), *folder.glob("*.json")]  # no orders.ss, no positions file
