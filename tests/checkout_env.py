"""The environment of a child process a test starts: this checkout's nbkit, not an installed one.

nbkit is not pip-installed for the tests (see tests/conftest.py), so a Python started by a test finds
the package only through ``PYTHONPATH``. Every test that starts one takes its environment from here.
"""

from __future__ import annotations

import os
import subprocess
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


def write_nbkit_command(folder: Path) -> Path:
    """Write ``folder/nbkit``: a command that runs ``python -m nbkit`` under this interpreter.

    A child process writes it. If this process held the file open for writing, a process it forked
    meanwhile from another thread (a server, a Dask worker) could inherit that descriptor. Running the
    script would then fail with "Text file busy" (ETXTBSY) for as long as that child lives. CI hit this
    once in a troubleshooting page's run.
    """
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nbkit"
    text = f'#!/bin/sh\nexec "{sys.executable}" -m nbkit "$@"\n'
    write = "import os, sys; open(sys.argv[1], 'w').write(sys.argv[2]); os.chmod(sys.argv[1], 0o755)"
    subprocess.run([sys.executable, "-c", write, str(script), text], check=True)
    return script
