"""The environment of a child process a test starts: this checkout's nbkit, not an installed one.

nbkit is not pip-installed for the tests (see tests/conftest.py), so a Python started by a test finds
the package only through ``PYTHONPATH``. Every test that starts one takes its environment from here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def checkout_env(*, scripts: bool = False, **extra: str) -> dict[str, str]:
    """``os.environ`` with this checkout first on ``PYTHONPATH`` (what was there kept after it).

    Parameters
    ----------
    scripts
        Also put this interpreter's script folder first on ``PATH``, so that a shell finds the
        ``nbkit`` command of the Python running the tests.
    extra
        More variables to set (``PYTHONUNBUFFERED="1"``, ...).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if scripts:
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra)
    return env
