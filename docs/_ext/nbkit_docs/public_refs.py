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


def _exists(target: str) -> bool:
    """Whether ``target`` names an importable nbkit module or an attribute path inside one."""
    if not (target == "nbkit" or target.startswith("nbkit.")):
        return False
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def resolve(app: Sphinx, env: BuildEnvironment, node: nodes.Element, contnode: nodes.Element) -> nodes.Node | None:
    """The ``missing-reference`` handler for the Python domain."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    namespaces = tuple(getattr(app.config, "nbkit_api_namespaces", None) or ["nbkit"])
    public = public_name(target, namespaces)
    if public is not None and public != target:
        domain = env.get_domain("py")
        found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, node, contnode)
        if found is not None:
            return found
        found = domain.resolve_any_xref(env, node["refdoc"], app.builder, public, node, contnode)
        if found:
            return found[0][1]
    if _exists(target):
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the handler."""
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True}
