"""Binder's environment, rebuilt without Docker: a fresh venv from exactly the files in binder/, in which
every notebook must execute without an error (repo2docker would add Jupyter; we add nbclient+ipykernel)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RUN_NOTEBOOKS = textwrap.dedent(
    """
    import sys, nbformat
    from nbclient import NotebookClient
    failed = []
    for path in sorted(__import__("pathlib").Path(sys.argv[1]).glob("*.ipynb")):
        nb = nbformat.read(path, 4)
        try:
            NotebookClient(nb, timeout=180, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            print("ok", path.name, flush=True)
        except Exception as exc:
            failed.append(path.name)
            print("FAILED", path.name, type(exc).__name__, str(exc)[-2000:], flush=True)
    sys.exit(1 if failed else 0)
    """
)


def _pins() -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of binder/constraints.txt."""
    lines = (ROOT / "binder" / "constraints.txt").read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def test_binder_installs_the_jupyterlab_the_viewer_is_built_against():
    pinned = _pins()["jupyterlab"]
    for package in (ROOT / "labextension" / "package.json", ROOT / "nbkit" / "lab" / "labextension" / "package.json"):
        wanted = json.loads(package.read_text())["dependencies"]["@jupyterlab/application"]
        assert wanted.lstrip("~^") == pinned, (
            f"{package.relative_to(ROOT)} builds against {wanted}, Binder pins {pinned}"
        )
    requirements = (ROOT / "binder" / "requirements.txt").read_text().splitlines()
    assert "jupyterlab" in requirements and "-c constraints.txt" in requirements


@pytest.mark.timeout(900)
def test_notebooks_run_in_the_binder_environment(tmp_path):
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    assert sys.version_info[:2] == (3, 11), "the binder runtime pins Python 3.11; run this test on 3.11"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    # exactly what repo2docker runs, from the repository root
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "-r", "binder/requirements.txt"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    # what repo2docker's base image brings: a Jupyter kernel and something to run notebooks with
    extra = subprocess.run(
        [python, "-m", "pip", "install", "-q", "nbclient", "ipykernel", "-c", "binder/constraints.txt"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert extra.returncode == 0, extra.stderr[-3000:]
    probe = subprocess.run(
        [python, "-c", "import nbkit, pandas; print(nbkit.__file__, pandas.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert probe[0].startswith(str(ROOT)) and probe[1] == "3.1.1"
    lab = subprocess.run(
        [python, "-c", "import jupyterlab; print(jupyterlab.__version__)"], env=env, capture_output=True, text=True
    )
    assert lab.stdout.strip() == _pins()["jupyterlab"], lab.stdout + lab.stderr
    # the stream viewer comes with the install: its prebuilt front end and the config enabling its server side
    viewer = venv / "share" / "jupyter" / "labextensions" / "nbkit-viewer" / "package.json"
    assert json.loads(viewer.read_text())["name"] == "nbkit-viewer"
    config = venv / "etc" / "jupyter" / "jupyter_server_config.d" / "nbkit.json"
    assert json.loads(config.read_text())["ServerApp"]["jpserver_extensions"] == {"nbkit.lab": True}
    books = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", books, ignore=shutil.ignore_patterns("work", ".ipynb_checkpoints"))
    (tmp_path / "runner.py").write_text(RUN_NOTEBOOKS)
    done = subprocess.run(
        [python, str(tmp_path / "runner.py"), str(books)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.count("ok ") == len(list((ROOT / "notebooks").glob("*.ipynb")))
