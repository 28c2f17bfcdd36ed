"""Build hook for nbkit: install the JupyterLab stream viewer's data files, and compile the core
(nbkit/wire/_speedups.pyx, the writer's short route
nbkit/transport/_writer.pyx and the JSON field parser nbkit/wire/_jsonfields.pyx; Cython) when a C
compiler is there.

The viewer's data files: its prebuilt front end (``nbkit/lab/labextension/``, built from
``labextension/`` by ``npm run build`` there and committed) goes to ``share/jupyter/labextensions/nbkit-viewer``,
and ``jupyter-config/jupyter_server_config.d/nbkit.json`` to ``etc/jupyter/jupyter_server_config.d`` (it
enables the server extension ``nbkit.lab``), so ``pip install .`` and ``pip install -e .`` need no JupyterLab
rebuild and no Node.js.

Everything else (metadata, extras, the ``nbkit`` script) lives in pyproject.toml. The compiled core is
optional by design: when Cython is missing or the compiler fails (no compiler, ``CC=false``), the
install still succeeds and nbkit runs on its pure-Python twin (``nbkit --version`` says which core is
active). A one-line notice says so (``pip install -v`` shows it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext

NOTICE = "nbkit: {what} was not built ({why}); nbkit will run on its pure-Python twin"


_told = False


def _notice(why: object, what: str = "the compiled core") -> None:
    """Print the one-line notice (once per build) with the first line of the reason."""
    global _told
    if _told:
        return
    _told = True
    text = str(why).strip().splitlines()[0] if str(why).strip() else type(why).__name__
    print(NOTICE.format(what=what, why=text[:120]), file=sys.stderr)


class OptionalBuildExt(build_ext):
    """``build_ext`` that never fails the install: compile errors become the one-line notice, which names
    the modules not built when others were (each has its pure-Python twin)."""

    def run(self) -> None:
        self._failed: list[tuple[str, Exception]] = []
        try:
            super().run()
        except Exception as exc:  # no compiler at all, or the toolchain failed
            _notice(exc)
            return
        if self._failed:
            built_none = len(self._failed) == len(self.extensions)
            names = ", ".join(name for name, _ in self._failed)
            _notice(self._failed[0][1], "the compiled core" if built_none else names)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # this module only: the others may still build
            self._failed.append((ext.name, exc))


def _extensions() -> list[Extension]:
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _notice(exc)
        return []
    return cythonize(
        [
            Extension("nbkit.wire._speedups", ["nbkit/wire/_speedups.pyx"]),
            # the writer's compiled short route (it cimports the wire's frame encoder, _speedups.pxd)
            Extension("nbkit.transport._writer", ["nbkit/transport/_writer.pyx"]),
            # flat JSON payloads to field columns (read_stream's payload="json"); glibc's strtod_l
            Extension("nbkit.wire._jsonfields", ["nbkit/wire/_jsonfields.pyx"]),
        ],
        compiler_directives={"language_level": "3"},
        quiet=True,
    )


HERE = Path(__file__).resolve().parent
LABEXTENSION = "nbkit/lab/labextension"


def _data_files() -> list[tuple[str, list[str]]]:
    """(install folder, files) of the viewer's front end build and of the server extension's config."""
    build = HERE / LABEXTENSION
    if not (build / "package.json").is_file():
        raise SystemExit(
            f"nbkit: the JupyterLab viewer's build is missing ({LABEXTENSION}/package.json); "
            "build it with `cd labextension && npm ci && npm run build`"
        )
    out = []
    for folder in sorted({p.parent for p in build.rglob("*") if p.is_file()}):
        dest = Path("share/jupyter/labextensions/nbkit-viewer") / folder.relative_to(build)
        files = sorted(p.relative_to(HERE).as_posix() for p in folder.iterdir() if p.is_file())
        out.append((dest.as_posix(), files))
    out.append(("etc/jupyter/jupyter_server_config.d", ["jupyter-config/jupyter_server_config.d/nbkit.json"]))
    return out


class NbkitDistribution(Distribution):
    """Answers ``has_data()``: setuptools' editable install (``pip install -e .``) asks the distribution
    for it (``has_<category>``) before installing data files, and a plain Distribution only has
    ``has_data_files()``, so without this an editable install would silently skip the viewer's files."""

    def has_data(self) -> bool:
        return self.has_data_files()


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": OptionalBuildExt},
    data_files=_data_files(),
    distclass=NbkitDistribution,
)
