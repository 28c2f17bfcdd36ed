"""The layer contract (../shared/DESIGN.md): imports point down, and no module reaches into another package's privates.

wire -> transport -> runtime -> tabular -> notebook -> scale -> lab -> cli (``lab``: the Jupyter Server handlers of
the JupyterLab stream viewer, above the readers they serve). Each layer may import its own layer and the ones below
it, and ``nbkit.errors`` (the one hierarchy every layer raises). The top-level namespaces users type (``nbkit``,
``nbkit.plot``, ``nbkit.widgets``, ``nbkit.exercises``, ``nbkit.dask``, ``python -m nbkit``, the test kit
``nbkit.testing`` and its pytest plugin ``nbkit.testing_plugin``) share the top with the CLI (which reads
``nbkit.__version__``). An import of an underscore name (or module) from another package is a leak, whatever the
layers. The walk covers every import statement, including the lazy ones inside functions, in the Python sources and
in the compiled core's Cython sources (``.pyx``). A ``cimport`` of a module that has a ``.pxd`` beside it is that
module's declared C interface, so it is not a leak (it must still point down).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbkit"

#: The layers, lowest first; a module's layer is its first dotted part under nbkit.
LAYERS = ["errors", "wire", "transport", "runtime", "tabular", "notebook", "scale", "lab", "cli"]
#: Modules above every layer: the public namespaces.
TOP = {"__init__", "__main__", "command", "plot", "widgets", "exercises", "dask", "polars"}


#: Modules of a layer that sit beside its module instead of inside a package: the CLI's --help examples.
BESIDE = {"cli_examples": "cli", "completion": "cli"}

#: The test kit and its pytest plugin are at the top too: a test drives every layer.
TOP |= {"testing", "testing_plugin"}


def _part(module: str) -> str:
    """``nbkit.wire.keys`` -> ``wire``; ``nbkit`` -> ``__init__``; ``nbkit.cli_examples`` -> ``cli``."""
    parts = module.split(".")
    part = parts[1] if len(parts) > 1 else "__init__"
    return BESIDE.get(part, part)


def _rank(part: str) -> int:
    return LAYERS.index("cli") if part in TOP else LAYERS.index(part)


#: A Cython import statement: ``from X import|cimport names`` (maybe parenthesised over lines) or ``import|cimport X``.
_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<module>[\w.]+)[ \t]+(?P<kind>c?import)[ \t]+(?P<names>\([^)]*\)|[^\n#]+)"
    r"|(?P<plain>c?import)[ \t]+(?P<modules>[\w., \t]+))",
    re.MULTILINE,
)


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyx")]):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts)
        found.append((name.removesuffix(".__init__"), path))
    return found


def _pyx_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """:func:`_imports` of a Cython source (which ``ast`` cannot parse); a ``cimport`` of a module with a ``.pxd``
    is reported without its private names (the ``.pxd`` declares them for other modules)."""
    text = path.read_text(encoding="utf-8")
    out: list[tuple[int, str, str | None]] = []
    for m in _PYX_IMPORT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m["module"]:
            target = m["module"]
            names = [n.split(" as ")[0].strip() for n in m["names"].strip("()").split(",") if n.strip()]
            declared = (
                m["kind"] == "cimport" and (PACKAGE.parent / target.replace(".", "/")).with_suffix(".pxd").exists()
            )
            if target.split(".")[0] == "nbkit":
                public = ".".join(p.lstrip("_") for p in target.split(".")) if declared else target
                out.extend((line, public, None if declared else n) for n in names)
        else:
            for name in m["modules"].split(","):
                target = name.split(" as ")[0].strip()
                if target.split(".")[0] == "nbkit":
                    out.append((line, target, None))
    return out


def _imports(path: Path, module: str) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) for every nbkit import in the file."""
    if path.suffix == ".pyx":
        return _pyx_imports(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "nbkit")
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([target] if target else [])])
            if target.split(".")[0] == "nbkit":
                out.extend((node.lineno, target, a.name) for a in node.names)
    return out


def _violations() -> list[str]:
    problems = []
    for module, path in _modules():
        here = _part(module)
        for line, target, name in _imports(path, module):
            there = _part(target)
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if there not in TOP and there not in LAYERS:
                problems.append(f"{where}: {target} is in no layer (add it to LAYERS in tests/test_layers.py)")
                continue
            if here in TOP:
                continue
            if _rank(there) > _rank(here):
                problems.append(f"{where}: {here} imports {target}, an upper layer")
            if there != here:
                private = [p for p in target.split(".")[1:] if p.startswith("_")]
                if private or (name is not None and name.startswith("_")):
                    problems.append(f"{where}: {here} imports a private name of {there}: {target} {name or ''}")
    return problems


def test_every_package_has_a_layer() -> None:
    parts = {_part(module) for module, _ in _modules()}
    assert parts <= set(LAYERS) | TOP, sorted(parts - set(LAYERS) - TOP)


def test_imports_point_down_and_privates_stay_home() -> None:
    problems = _violations()
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from nbkit.notebook.plots import timeline\n", "runtime imports nbkit.notebook.plots, an upper layer"),
        ("from nbkit.wire.scan import _hidden\n", "imports a private name of wire"),
        ("import nbkit.wire._speedups\n", "imports a private name of wire"),
    ],
)
def test_the_walk_catches_a_leak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, expected: str) -> None:
    """The checker itself can fail: a planted upward or private import is reported."""
    fake = tmp_path / "nbkit"
    (fake / "runtime").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "runtime" / "__init__.py").write_text("")
    (fake / "runtime" / "leaky.py").write_text(source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake, raising=True)
    assert any(expected in p for p in _violations())


@pytest.mark.parametrize(
    ("source", "pxd", "expected"),
    [
        (
            "from nbkit.notebook.plots import timeline\n",
            False,
            "runtime imports nbkit.notebook.plots, an upper layer",
        ),
        ("from nbkit.wire._hidden cimport fast\n", False, "imports a private name of wire"),
        ("from nbkit.wire._hidden cimport fast\n", True, None),
        (
            "def f():\n    from nbkit.wire.scan import (\n        _a,\n        b,\n    )\n",
            False,
            "private name of wire",
        ),
    ],
)
def test_the_walk_reads_cython_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, pxd: bool, expected: str | None
) -> None:
    """A ``.pyx`` is walked too; a ``cimport`` through a module's ``.pxd`` is its declared interface."""
    fake = tmp_path / "nbkit"
    for package in ("runtime", "wire"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    if pxd:
        (fake / "wire" / "_hidden.pxd").write_text("cdef int fast(int x)\n")
    (fake / "runtime" / "_leaky.pyx").write_text("# cython: language_level=3\ncimport cython\n" + source)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake, raising=True)
    problems = _violations()
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems
