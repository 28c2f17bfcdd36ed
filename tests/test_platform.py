"""nbkit is POSIX-only (stream files are locked with fcntl): on a system without fcntl, ``import nbkit`` says so."""

from __future__ import annotations

import subprocess
import sys

from checkout_env import checkout_env

#: A Python without fcntl, as on Windows: the module is made unimportable, then nbkit imported afresh.
WITHOUT_FCNTL = """
import importlib, sys
import nbkit
sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError, as where the module does not exist
try:
    importlib.reload(nbkit)
except ImportError as err:
    print(type(err).__name__, err)
else:
    print("imported")
"""


def test_import_without_fcntl_says_nbkit_needs_posix() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FCNTL], capture_output=True, text=True, env=checkout_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip()
    assert out.startswith("ImportError nbkit needs a POSIX system"), out
    assert "fcntl" in out and "WSL" in out


def test_import_with_fcntl_works() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import nbkit; print(nbkit.__version__)"],
        capture_output=True,
        text=True,
        env=checkout_env(),
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == __import__("nbkit").__version__, done.stderr
