"""Cross-references into implementation modules resolve to the public page of the same object.

Docstrings say ``:class:`~nbkit.errors.NbkitError``` or ``nbkit.runtime.app.App`` (that is where the
code lives); the site documents those objects once, under their public names (``nbkit.NbkitError``,
``nbkit.App``). This ``missing-reference`` handler maps such a target to the public name of the same
object (methods and attributes too). A target that names a real nbkit object with no page of its own
(an implementation module or helper) is shown as code without a link. Anything else stays unresolved,
so with ``nitpicky`` and ``-W`` a misspelt or removed name fails the build.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment


@cache
def public_targets(namespaces: tuple[str, ...]) -> dict[str, str]:
    """``{defining-module.qualname: public name}`` for every object the API pages document."""
    targets: dict[str, str] = {}
    for namespace in namespaces:
        module = importlib.import_module(namespace)
        for name in module.__all__:
            obj = getattr(module, name)
            where, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            if where and qualname:
                targets.setdefault(f"{where}.{qualname}", f"{namespace}.{name}")
            targets.setdefault(name, f"{namespace}.{name}")
    return targets


def public_name(target: str, namespaces: tuple[str, ...]) -> str | None:
    """The documented name for ``target`` (or its longest known prefix plus the rest), if any."""
    targets = public_targets(namespaces)
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        public = targets.get(".".join(parts[:cut]))
        if public is not None:
            return ".".join([public, *parts[cut:]])
    return None


_MISSING = object()


def _lookup(dotted: str) -> Any:
    """The object an ``nbkit...`` dotted name names (module, then attributes), or ``_MISSING``."""
    if not (dotted == "nbkit" or dotted.startswith("nbkit.")):
        return _MISSING
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, _MISSING)
            if obj is _MISSING:
                return _MISSING
        return obj
    return _MISSING


def _exists(target: str) -> bool:
    """Whether ``target`` names an importable nbkit module or an attribute path inside one."""
    return _lookup(target) is not _MISSING


def _home_targets(node: nodes.Element, target: str) -> list[str]:
    """``target`` as the code that documents it would read it: in the defining module of the object
    whose docstring holds the reference (``:class:`Advanced``` in ``nbkit.Session``'s docstring means
    ``nbkit.notebook.session.Advanced``), and as a member of that object's class. The object is the
    current class, or the one the API page (``api/generated/<name>``) documents."""
    page = node.get("refdoc", "")
    contexts = [".".join(part for part in (node.get("py:module"), node.get("py:class")) if part)]
    if page.startswith("api/generated/"):
        contexts.append(page.rsplit("/", 1)[1])
    candidates: list[str] = []
    for context in filter(None, contexts):
        owner = _lookup(context)
        if owner is _MISSING:
            continue
        if isinstance(owner, type):
            candidates += [f"{owner.__module__}.{target}", f"{owner.__module__}.{owner.__qualname__}.{target}"]
        elif getattr(owner, "__module__", None):
            candidates.append(f"{owner.__module__}.{target}")
        else:
            candidates.append(f"{getattr(owner, '__name__', context)}.{target}")
    return candidates


def _resolve_public(app: Sphinx, env: BuildEnvironment, node: nodes.Element, contnode: nodes.Element, target: str):
    namespaces = tuple(getattr(app.config, "nbkit_api_namespaces", None) or ["nbkit"])
    public = public_name(target, namespaces)
    if public is None or public == node["reftarget"]:
        return None
    domain = env.get_domain("py")
    found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)
    if found is not None:
        return found
    anything = domain.resolve_any_xref(env, node["refdoc"], app.builder, public, node, contnode)
    return anything[0][1] if anything else None


def resolve(app: Sphinx, env: BuildEnvironment, node: nodes.Element, contnode: nodes.Element) -> nodes.Node | None:
    """The ``missing-reference`` handler for the Python domain."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    for candidate in [target, *_home_targets(node, target)]:
        found = _resolve_public(app, env, node, contnode, candidate)
        if found is not None:
            return found
        if _exists(candidate):
            return contnode
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the handler."""
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True}
