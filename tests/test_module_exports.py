"""Every module of the two lowest layers says what it exports: an ``__all__``, sorted, naming real objects."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "nbkit"
MODULES = sorted(
    ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    for layer in ("transport", "wire")
    for path in (PACKAGE / layer).glob("*.py")
)


def _declared(module: str) -> list[str] | None:
    """The names of the module's ``__all__`` as written in its source (None without one)."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    source = (path / "__init__.py") if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        targets = node.targets if isinstance(node, ast.Assign) else [target] if target is not None else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            value = node.value
            assert isinstance(value, ast.List), f"{module}: __all__ is not a list literal"
            return [ast.literal_eval(e) for e in value.elts]
    return None


def test_the_modules_are_found() -> None:
    assert {"nbkit.transport.file_reader", "nbkit.wire.ssformat", "nbkit.wire"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_all_is_present_sorted_and_resolves(module: str) -> None:
    names = _declared(module)
    assert names is not None, f"{module} has no __all__"
    assert names == sorted(names), f"{module}: __all__ is not sorted"
    loaded = importlib.import_module(module)
    missing = [name for name in names if not hasattr(loaded, name)]
    assert not missing, f"{module}: __all__ names what it does not define: {missing}"
