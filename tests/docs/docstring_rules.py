"""What every documented public name's docstring must have (numpy style), as a list of problems.

Used by ``tests/docs/test_docstrings.py``; kept apart so the rules read in one place:

- functions and classes: a summary line, ``Parameters`` (when there are any), ``Returns`` or
  ``Yields`` (unless it is annotated ``-> None``; classes are exempt) and ``Examples``;
- exceptions: a summary line and ``Examples``;
- a class's own public methods: a summary line, ``Parameters`` and ``Returns`` on the same terms;
  properties: a summary line.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path

from numpydoc.docscrape import NumpyDocString

ROOT = Path(__file__).resolve().parents[2]


def namespaces() -> list[str]:
    """The namespaces the API reference documents: ``nbkit_api_namespaces`` in docs/conf.py."""
    tree = ast.parse((ROOT / "docs" / "conf.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "nbkit_api_namespaces" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise LookupError("docs/conf.py does not set nbkit_api_namespaces")


def public_objects() -> Iterator[tuple[str, object]]:
    """``(qualified public name, object)`` for every documented name (dunders such as __version__ excepted)."""
    for namespace in namespaces():
        module = importlib.import_module(namespace)
        for name in module.__all__:
            if not name.startswith("__"):
                yield f"{namespace}.{name}", getattr(module, name)


def _parameters(func: object, *, skip_first: bool) -> list[str]:
    try:
        signature = inspect.signature(func)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    names = [
        p.name
        for p in signature.parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not p.name.startswith("_")
    ]
    return names[1:] if skip_first and names else names


def _returns_none(func: object) -> bool:
    try:
        annotation = inspect.signature(func).return_annotation  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return annotation in (None, "None")


def _parse(doc: str | None) -> NumpyDocString | None:
    if not doc or not doc.strip():
        return None
    return NumpyDocString(inspect.cleandoc(doc))


def function_problems(func: object, *, method: bool = False, examples: bool = True) -> list[str]:
    """What a function's (or method's) docstring lacks."""
    parsed = _parse(inspect.getdoc(func))  # a method without one inherits its base class method's
    if parsed is None:
        return ["no docstring"]
    problems = []
    if not parsed["Summary"]:
        problems.append("no summary line")
    documented = {p.name.split(":")[0].strip().lstrip("*") for p in parsed["Parameters"]}
    documented = {n.strip() for names in documented for n in names.split(",")}
    missing = [p for p in _parameters(func, skip_first=method and not inspect.ismethod(func)) if p not in documented]
    if missing:
        problems.append(f"Parameters does not document {', '.join(missing)}")
    if not _returns_none(func) and not (parsed["Returns"] or parsed["Yields"]):
        problems.append("no Returns (or Yields) section")
    if examples and not parsed["Examples"]:
        problems.append("no Examples section")
    return problems


def own_methods(cls: type) -> Iterator[tuple[str, object]]:
    """Public methods and properties the class or its nbkit bases define (not Python's own types')."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("nbkit"):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(value, property):
                yield name, value
            elif inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)):
                yield name, getattr(cls, name)


def class_problems(cls: type) -> list[str]:
    """What a class's docstring, and its methods' docstrings, lack."""
    parsed = _parse(cls.__doc__)
    if parsed is None:
        return ["no docstring"]
    problems = []
    if not parsed["Summary"]:
        problems.append("no summary line")
    if not parsed["Examples"]:
        problems.append("no Examples section")
    if issubclass(cls, BaseException):
        return problems
    init = cls.__dict__.get("__init__") or cls.__dict__.get("__new__")
    if init is not None and not _is_namedtuple(cls) and not issubclass(cls, enum.Enum):
        documented = {p.name.strip() for p in parsed["Parameters"]}
        documented = {n.strip().lstrip("*") for names in documented for n in names.split(",")}
        missing = [p for p in _parameters(init, skip_first=True) if p not in documented]
        if missing:
            problems.append(f"Parameters does not document {', '.join(missing)}")
    for name, member in own_methods(cls):
        if isinstance(member, property):
            doc = _parse(member.__doc__)
            if doc is None or not doc["Summary"]:
                problems.append(f"property {name}: no summary line")
            continue
        problems += [f"{name}(): {p}" for p in function_problems(member, method=True, examples=False)]
    return problems


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def problems(obj: object) -> list[str]:
    """Every rule the object's documentation breaks (empty when it is complete)."""
    if inspect.isclass(obj):
        return class_problems(obj)
    if callable(obj):
        return function_problems(obj)
    return []
