"""``nbkit doctor`` (nbkit.lab.setup_check): each item a learner's machine may miss fails with its own fix.

The failures are made by monkeypatching what each check reads (the minimum Python, the JupyterLab front-end
folders, the server configuration, the free disk, the stream writer); the report and the exit status follow.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections import namedtuple

import pytest

from nbkit import cli
from nbkit.lab import setup_check
from nbkit.lab.setup_check import Check, format_report, run_checks

Usage = namedtuple("Usage", "total used free")


def _front_end(folder, name, version="1.0.0"):
    (folder / name).mkdir(parents=True)
    (folder / name / "package.json").write_text(json.dumps({"name": name, "version": version}))


@pytest.fixture
def ready(monkeypatch, tmp_path):
    """A machine where every item passes: both front ends installed, the server extension on, disk to spare."""
    labextensions = tmp_path / "labextensions"
    _front_end(labextensions, setup_check.WIDGET_MANAGER)
    _front_end(labextensions, "nbkit-viewer", "0.1.0")
    monkeypatch.setattr(setup_check, "_labextension_dirs", lambda: [labextensions])
    monkeypatch.setattr(setup_check, "_server_extensions", lambda: {"nbkit.lab": True})
    monkeypatch.setattr(setup_check.shutil, "disk_usage", lambda _: Usage(10**12, 0, 10**11))
    return labextensions


def _by_item(checks):
    return {c.item: c for c in checks}


def test_a_ready_machine_passes_every_item(ready, tmp_path):
    checks = run_checks(tmp_path)
    assert all(c.ok for c in checks), format_report(checks)
    assert _by_item(checks)["core"].found.endswith("wrote and read back a stream file")
    assert format_report(checks).endswith("Ready for every lesson.")


def test_an_old_python_fails_with_the_version_to_install(ready, monkeypatch, tmp_path):
    monkeypatch.setattr(setup_check, "MIN_PYTHON", (99, 0))
    python = _by_item(run_checks(tmp_path))["Python"]
    assert not python.ok and python.required and "install Python 99.0 or later" in python.fix


def test_a_missing_viewer_or_widget_front_end_fails_with_the_reinstall(ready, monkeypatch, tmp_path):
    monkeypatch.setattr(setup_check, "_labextension_dirs", lambda: [tmp_path / "empty"])
    checks = _by_item(run_checks(tmp_path))
    viewer, widgets = checks["stream viewer"], checks["widgets in JupyterLab"]
    assert not viewer.ok and "nbkit-viewer is not among" in viewer.found and "reinstall nbkit" in viewer.fix
    assert not widgets.ok and "ipywidgets" in widgets.fix


def test_a_disabled_server_extension_fails_with_the_command_that_enables_it(ready, monkeypatch, tmp_path):
    monkeypatch.setattr(setup_check, "_server_extensions", lambda: {"nbkit.lab": False})
    viewer = _by_item(run_checks(tmp_path))["stream viewer"]
    assert not viewer.ok and viewer.fix.startswith("jupyter server extension enable nbkit.lab")


def test_missing_jupyterlab_fails_with_the_lessons_install(ready, monkeypatch, tmp_path):
    real = importlib.metadata.version

    def version(name):
        if name == "jupyterlab":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(setup_check.importlib.metadata, "version", version)
    lab = _by_item(run_checks(tmp_path))["JupyterLab"]
    assert not lab.ok and lab.found == "not installed" and "[lessons]" in lab.fix


def test_a_core_that_cannot_write_fails_with_its_fix(ready, monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(setup_check, "StreamWriter", broken)
    core = _by_item(run_checks(tmp_path))["core"]
    assert not core.ok and "no space left on device" in core.found and "NBKIT_PURE_PYTHON=1" in core.fix


def test_little_disk_only_warns_and_names_lesson_06(ready, monkeypatch, tmp_path):
    monkeypatch.setattr(setup_check.shutil, "disk_usage", lambda _: Usage(10**12, 0, 10**8))
    checks = run_checks(tmp_path)
    disk = _by_item(checks)["lesson 06: disk"]
    assert not disk.ok and not disk.required and "1 GB" in disk.fix
    report = format_report(checks)
    assert "warn  lesson 06: disk: 0.1 GB free" in report and report.endswith(
        "except lesson 06 (see the warnings above)."
    )
    assert setup_check.main(tmp_path) == 0


def test_nbkit_doctor_exits_1_and_prints_each_failure_with_its_fix(ready, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(setup_check, "MIN_PYTHON", (99, 0))
    monkeypatch.setattr(setup_check, "_server_extensions", lambda: {})
    assert cli.main(["doctor", "--folder", str(tmp_path)]) == 1
    out = capsys.readouterr().out.splitlines()
    failed = [i for i, line in enumerate(out) if line.startswith("FAIL")]
    assert [out[i].split(":")[0] for i in failed] == ["FAIL  Python", "FAIL  stream viewer"]
    assert all(out[i + 1].startswith("      fix: ") for i in failed)
    assert out[-1] == "2 of 8 checks failed: apply each fix above, then run `nbkit doctor` again."


def test_a_check_reads_as_one_line_and_a_fix():
    report = format_report([Check("Python", False, "Python 3.9", "install Python 3.11 or later")])
    assert report.splitlines()[:2] == ["FAIL  Python: Python 3.9", "      fix: install Python 3.11 or later"]


def test_a_folder_that_is_not_there_is_one_error_line(tmp_path, capsys):
    assert cli.main(["doctor", "--folder", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "nowhere: no such folder" in err and "Traceback" not in err
