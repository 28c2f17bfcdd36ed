"""``nbkit doctor``: is this machine ready for the lessons? Each item checked, and each failure with its fix.

Learners run it before a workshop (``nbkit doctor``, or ``python -m nbkit.lab.setup_check``), in the folder
the lessons will run in: the Python version, the install, the compiled core (or its pure-Python twin)
writing and reading back a stream file, JupyterLab with the widget manager and nbkit's stream viewer (its
front end and its server extension), and for lesson 06 the Dask extra and free disk. It exits 0 when every
required item passes; the optional ones (lesson 06's) only warn.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nbkit.errors import DISTRIBUTION, MissingFileError, install_hint
from nbkit.lab import LABEXTENSION_NAME
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import core

__all__ = [
    "LESSONS_INSTALL",
    "LESSON_06_BYTES",
    "MIN_JUPYTERLAB",
    "MIN_PYTHON",
    "WIDGET_MANAGER",
    "Check",
    "check_core",
    "check_disk",
    "check_install",
    "check_jupyterlab",
    "check_python",
    "check_scale",
    "check_viewer",
    "check_widgets",
    "format_report",
    "main",
    "run_checks",
]

#: The oldest Python nbkit supports (``requires-python`` in pyproject.toml).
MIN_PYTHON = (3, 11)
#: The oldest JupyterLab the lessons and the viewer are tested with (the ``lessons`` extra).
MIN_JUPYTERLAB = (4, 2)
#: Free disk lesson 06 needs: its file is about 1 GB; the rest is room for Dask's spill and the Parquet export.
LESSON_06_BYTES = 2_000_000_000
#: The JupyterLab front end that draws ipywidgets (the lessons' sliders and live panels).
WIDGET_MANAGER = "@jupyter-widgets/jupyterlab-manager"
#: What installs everything the lessons use.
LESSONS_INSTALL = install_hint("lessons")


@dataclass(frozen=True)
class Check:
    """One item of the setup check: what was found and, when it fails, how to fix it.

    ``required=False`` marks an item only some lessons need (lesson 06's): its failure warns.
    """

    item: str
    ok: bool
    found: str
    fix: str = ""
    required: bool = True


def _version_tuple(text: str) -> tuple[int, ...]:
    """``"4.6.6"`` -> ``(4, 6, 6)``; a part that is not a number ends it (``"4.2.0rc1"`` -> ``(4, 2)``)."""
    parts = []
    for part in text.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def check_python() -> Check:
    """Python is recent enough for nbkit."""
    found = f"Python {platform.python_version()} at {sys.executable}"
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("Python", True, found)
    return Check(
        "Python",
        False,
        found,
        f"install Python {_dotted(MIN_PYTHON)} or later (python.org, or `conda create -n nbkit "
        f"python={_dotted(MIN_PYTHON)}`), then install nbkit into it: {LESSONS_INSTALL}",
    )


def check_install() -> Check:
    """nbkit is installed as a distribution (not only importable from a folder on the path)."""
    package = Path(__file__).resolve().parents[1]
    try:
        installed = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return Check(
            "nbkit install",
            False,
            f"nbkit imported from {package}, but not installed",
            f"install it: {LESSONS_INSTALL}",
        )
    return Check("nbkit install", True, f"{DISTRIBUTION} {installed}, nbkit imported from {package}")


def check_core(folder: str | os.PathLike[str] = ".") -> Check:
    """The core (compiled, or its pure-Python twin) writes a stream file and reads it back."""
    found = core.twins_description()
    try:
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            path = Path(tmp, "check.ss")
            with StreamWriter(path) as writer:
                for i in range(3):
                    writer.write("check", f'{{"n": {i}}}'.encode())
            with StreamReader(path) as reader:
                payloads = [m.payload for m in reader]
    except Exception as exc:  # any failure here is what the learner must see, with the fix
        return Check(
            "core",
            False,
            f"{found}: writing and reading a stream file failed: {exc}",
            f"reinstall nbkit: {LESSONS_INSTALL}; if it still fails, set NBKIT_PURE_PYTHON=1 and try again",
        )
    if [bytes(p) for p in payloads] != [f'{{"n": {i}}}'.encode() for i in range(3)]:
        return Check(
            "core",
            False,
            f"{found}: a stream file did not read back as written",
            "reinstall nbkit, then report this check's output as a bug",
        )
    found += ": wrote and read back a stream file"
    if core.CORE != "compiled" and not core.FORCED_PURE:
        found += " (the pure-Python twin works; the compiled core, built at install with a C compiler, is faster)"
    return Check("core", True, found)


def _labextension_dirs() -> list[Path]:
    """The folders JupyterLab looks for prebuilt front ends in (``jupyter labextension list`` lists them)."""
    from jupyter_core.paths import jupyter_path

    return [Path(p) for p in jupyter_path("labextensions")]


def _labextension(name: str) -> str | None:
    """The version of the prebuilt JupyterLab front end ``name``, or None when none is installed."""
    for folder in _labextension_dirs():
        package = folder / name / "package.json"
        if package.is_file():
            return str(json.loads(package.read_text(encoding="utf-8")).get("version", "?"))
    return None


def _server_extensions() -> dict[str, bool]:
    """The Jupyter Server extensions the configuration enables (``jupyter server extension list``)."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    enabled: dict[str, bool] = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    return enabled


def check_jupyterlab() -> Check:
    """JupyterLab is installed and recent enough."""
    fix = f"install it with the lessons' extra: {LESSONS_INSTALL}"
    try:
        version = importlib.metadata.version("jupyterlab")
    except importlib.metadata.PackageNotFoundError:
        return Check("JupyterLab", False, "not installed", fix)
    if _version_tuple(version) < MIN_JUPYTERLAB:
        return Check("JupyterLab", False, f"JupyterLab {version}, older than {_dotted(MIN_JUPYTERLAB)}", fix)
    return Check("JupyterLab", True, f"JupyterLab {version}")


def _front_end(item: str, name: str, fix: str) -> Check:
    try:
        version = _labextension(name)
    except ImportError:
        return Check(item, False, "Jupyter is not installed", f"install it with the lessons' extra: {LESSONS_INSTALL}")
    if version is None:
        return Check(item, False, f"{name} is not among JupyterLab's extensions", fix)
    return Check(item, True, f"{name} {version}")


def check_widgets() -> Check:
    """JupyterLab can draw the lessons' widgets (the ipywidgets manager is installed)."""
    return _front_end(
        "widgets in JupyterLab",
        WIDGET_MANAGER,
        "pip install 'ipywidgets>=8.1' (it brings jupyterlab_widgets), then restart JupyterLab",
    )


def check_viewer() -> Check:
    """nbkit's stream viewer is there: its front end and its server extension, enabled."""
    item = "stream viewer"
    reinstall = f"reinstall nbkit in the environment JupyterLab runs from: {LESSONS_INSTALL}"
    front = _front_end(item, LABEXTENSION_NAME, reinstall)
    if not front.ok:
        return front
    try:
        enabled = _server_extensions().get("nbkit.lab", False)
    except ImportError:
        return Check(
            item, False, "Jupyter Server is not installed", f"install it with the lessons' extra: {LESSONS_INSTALL}"
        )
    if not enabled:
        return Check(
            item,
            False,
            f"{front.found}, but the server extension nbkit.lab is not enabled",
            "jupyter server extension enable nbkit.lab, then restart JupyterLab",
        )
    return Check(item, True, f"{front.found}; server extension nbkit.lab enabled")


def check_scale() -> Check:
    """Lesson 06's extra (Dask, distributed, pyarrow) is installed."""
    missing = [m for m in ("dask", "distributed", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        return Check("lesson 06: Dask", False, f"missing {', '.join(missing)}", install_hint("scale"), required=False)
    return Check("lesson 06: Dask", True, "dask, distributed and pyarrow installed", required=False)


def check_disk(folder: str | os.PathLike[str] = ".") -> Check:
    """Enough free disk where the lessons write, for lesson 06's large file."""
    free = shutil.disk_usage(folder).free
    found = f"{free / 1e9:.1f} GB free in {Path(folder).resolve()}"
    if free >= LESSON_06_BYTES:
        return Check("lesson 06: disk", True, found, required=False)
    return Check(
        "lesson 06: disk",
        False,
        found,
        f"free {LESSON_06_BYTES / 1e9:.0f} GB there (lesson 06 writes a file of about 1 GB), or run the "
        "lessons from a folder on a larger disk",
        required=False,
    )


def run_checks(folder: str | os.PathLike[str] = ".") -> list[Check]:
    """Every item, in the order a learner fixes them: Python, install, core, JupyterLab, widgets, viewer, lesson 06."""
    checks: list[Callable[[], Check]] = [
        check_python,
        check_install,
        lambda: check_core(folder),
        check_jupyterlab,
        check_widgets,
        check_viewer,
        check_scale,
        lambda: check_disk(folder),
    ]
    return [check() for check in checks]


def format_report(checks: Sequence[Check]) -> str:
    """The report ``nbkit doctor`` prints: one line per item, a fix under each failure, a verdict last."""
    lines = []
    for c in checks:
        mark = "ok  " if c.ok else "FAIL" if c.required else "warn"
        lines.append(f"{mark}  {c.item}: {c.found}")
        if not c.ok:
            lines.append(f"      fix: {c.fix}")
    failed = [c for c in checks if not c.ok and c.required]
    warned = [c for c in checks if not c.ok and not c.required]
    if failed:
        lines.append(
            f"{len(failed)} of {len(checks)} checks failed: apply each fix above, then run `nbkit doctor` again."
        )
    elif warned:
        lines.append("Ready for the lessons, except lesson 06 (see the warnings above).")
    else:
        lines.append("Ready for every lesson.")
    return "\n".join(lines)


def main(folder: str | os.PathLike[str] = ".") -> int:
    """Print the report for ``folder``; 0 when every required item passes, 1 otherwise.

    Raises
    ------
    MissingFileError
        If ``folder`` is not a folder.
    """
    if not Path(folder).is_dir():
        raise MissingFileError(f"{folder}: no such folder; give the folder the lessons will run in")
    checks = run_checks(folder)
    print(format_report(checks))
    return 1 if any(not c.ok and c.required for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
