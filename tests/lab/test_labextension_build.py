"""The viewer's shipped front end: built from the sources beside it, declared as the package installs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "nbkit" / "lab" / "labextension"
sys.path.insert(0, str(ROOT / "tools"))

from labextension_stamp import STAMP, source_files, source_hash  # noqa: E402


def test_the_shipped_build_is_not_older_than_its_sources():
    """A change of labextension/src, style, package.json or the lockfile without `npm run build` fails here."""
    recorded = STAMP.read_text().strip()
    assert recorded == source_hash(), (
        "nbkit/lab/labextension was built from other sources than labextension/ holds now: "
        "rebuild with `cd labextension && npm ci && npm run build` and commit the build"
    )


def test_the_stamp_changes_with_any_source(tmp_path):
    """The check can fail: one changed byte in a source file changes the hash."""
    copy = tmp_path / "labextension"
    for path in source_files():
        target = copy / path.relative_to(ROOT / "labextension")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    assert source_hash(copy) == source_hash()
    (copy / "src" / "index.ts").write_text((copy / "src" / "index.ts").read_text() + "\n")
    assert source_hash(copy) != source_hash()


def test_the_build_is_the_labextension_the_package_names():
    meta = json.loads((BUILD / "package.json").read_text())
    assert meta["name"] == "nbkit-viewer"
    load = meta["jupyterlab"]["_build"]["load"]
    assert (BUILD / load).is_file(), f"the build's entry point {load} is missing"
    from nbkit.lab import LABEXTENSION_NAME, _jupyter_labextension_paths

    assert _jupyter_labextension_paths() == [{"src": "labextension", "dest": LABEXTENSION_NAME}]
    assert meta["name"] == LABEXTENSION_NAME


def test_the_lockfile_pins_what_package_json_asks_for():
    package = json.loads((ROOT / "labextension" / "package.json").read_text())
    lock = json.loads((ROOT / "labextension" / "package-lock.json").read_text())
    locked = lock["packages"]
    for name in {**package["dependencies"], **package["devDependencies"]}:
        assert f"node_modules/{name}" in locked, f"{name} is not in package-lock.json: run npm install"


def test_the_stamp_tool_checks_the_build():
    tool = ROOT / "tools" / "labextension_stamp.py"
    done = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
