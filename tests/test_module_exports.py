"""Every module of the package says what it exports: one ``__all__``, a list literal naming each public
function and class it defines, and nothing it does not define. The order is ruff's (RUF022, in
``pyproject.toml``): ``ruff check`` sorts it, so this test does not."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbkit"
MODULES = sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for path in PACKAGE.rglob("*.py")
    if "labextension" not in path.parts
)
#: The package's own names are the public API, held to a list by tests/test_public_api.py (the IPython hook
#: ``load_ipython_extension`` is defined there but is not for ``from nbkit import *``).
API_MODULE = "nbkit"


def _source(module: str) -> ast.Module:
    path = PACKAGE.parent.joinpath(*module.split("."))
    source = (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")
    return ast.parse(source.read_text(encoding="utf-8"))


def _assignments(tree: ast.Module) -> list[ast.stmt]:
    """The top-level statements that assign or extend ``__all__``."""
    found: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Expr) and "__all__." in ast.unparse(node):
            found.append(node)
            continue
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            found.append(node)
    return found


def _public_definitions(tree: ast.Module) -> list[str]:
    """The functions and classes the module defines at top level under a public name."""
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    return [node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")]


def test_the_modules_are_found() -> None:
    wanted = {"nbkit", "nbkit.transport.file_reader", "nbkit.wire.ssformat", "nbkit.runtime.app", "nbkit.__main__"}
    assert wanted <= set(MODULES)
    assert "nbkit.notebook.exercise_bank.lesson03" in MODULES


@pytest.mark.parametrize("module", MODULES)
def test_all_is_written_once_and_names_what_the_module_defines(module: str) -> None:
    tree = _source(module)
    found = _assignments(tree)
    assert found, f"{module} has no __all__"
    assert len(found) == 1, f"{module}: __all__ is written more than once"
    [node] = found
    assert isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.List), (
        f"{module}: __all__ is not a list literal"
    )
    names = [ast.literal_eval(e) for e in node.value.elts]
    assert len(names) == len(set(names)), f"{module}: __all__ names something twice"
    if module != API_MODULE:
        unlisted = [name for name in _public_definitions(tree) if name not in names]
        assert not unlisted, f"{module}: public but not in __all__: {unlisted}"
    if module == "nbkit.__main__":
        return  # importing it is harmless (main() runs under __name__ == "__main__" only), but it has no names
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"{module}: __all__ names what it does not define: {missing}"


def _gathers_names(module: str, tree: ast.Module) -> bool:
    """True for the modules whose job is to gather names from elsewhere: the package (the public API),
    ``__init__`` modules, and the entry points ``nbkit.plot``, ``nbkit.dask``, ``nbkit.widgets``, ...
    (a module right under the package that defines no function or class of its own)."""
    if module == API_MODULE or (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").exists():
        return True
    kinds = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    return module.count(".") == 1 and not any(isinstance(node, kinds) for node in tree.body)


def test_the_entry_points_are_told_apart() -> None:
    gathering = {module for module in MODULES if _gathers_names(module, _source(module))}
    assert {"nbkit", "nbkit.plot", "nbkit.dask", "nbkit.widgets", "nbkit.exercises", "nbkit.tabular"} <= gathering
    assert not gathering & {"nbkit.cli", "nbkit.errors", "nbkit.tabular.frames", "nbkit.transport.file_reader"}


def test_a_module_re_exports_nothing_from_another_module_of_the_package() -> None:
    """A name has one home: a module's ``__all__`` lists what it defines, not what it imports from nbkit
    (the modules that gather names by design aside: :func:`_gathers_names`)."""
    leaks = {}
    for module in MODULES:
        tree = _source(module)
        if _gathers_names(module, tree):
            continue
        imported = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nbkit")
            for alias in node.names
        }
        [node] = _assignments(tree)
        assert isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        assert isinstance(node.value, ast.List | ast.Tuple), ast.unparse(node)
        names = {ast.literal_eval(e) for e in node.value.elts}
        if names & imported:
            leaks[module] = sorted(names & imported)
    assert not leaks, leaks
