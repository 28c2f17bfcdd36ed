"""One API reference page per public namespace, generated from its ``__all__`` before the sources are read.

``nbkit_api_namespaces`` (conf.py) names the namespaces; each gets ``api/<namespace>.rst`` with an
``autosummary`` table per kind (classes, functions, exceptions), grouped for ``nbkit`` itself by the
layer that defines the name. Autosummary then writes one page per name into ``api/generated/``. A name
added to a namespace's ``__all__`` is on the site at the next build; nothing is listed by hand.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

#: Section titles for ``nbkit``'s own names, by the package layer that defines them (first match wins).
LAYERS = (
    ("nbkit.errors", "Errors"),
    ("nbkit.transport", "Stream files"),
    ("nbkit.wire", "Stream files"),
    ("nbkit.runtime", "The runtime"),
    ("nbkit.notebook", "The notebook layer"),
    ("nbkit.scale", "Scale-out"),
)

#: The order of those sections on the page: what a reader uses first, errors last.
SECTION_ORDER = ("Stream files", "The runtime", "The notebook layer", "Scale-out", "Errors")


def public_names(namespace: str) -> list[str]:
    """The documented names of a namespace: its ``__all__`` without dunders, in a stable order."""
    module = importlib.import_module(namespace)
    return sorted((name for name in module.__all__ if not name.startswith("__")), key=str.lower)


def type_aliases(namespaces: list[str]) -> dict[str, str]:
    """``{"StreamReader": "nbkit.StreamReader", ...}``: numpydoc links a docstring type to its page with these.

    Every public class of the namespaces, by its short name (how docstrings write types); the first
    namespace that has a name wins, so ``nbkit``'s own names come before a subpackage's.
    """
    aliases: dict[str, str] = {}
    for namespace in namespaces:
        module = importlib.import_module(namespace)
        for name in public_names(namespace):
            if inspect.isclass(getattr(module, name)):
                aliases.setdefault(name, f"{namespace}.{name}")
    return aliases


def _kind(obj: object) -> str:
    if inspect.isclass(obj):
        return "Exceptions" if issubclass(obj, BaseException) else "Classes"
    return "Functions" if callable(obj) else "Data"


def _group(namespace: str, obj: object) -> str:
    if namespace != "nbkit":
        return _kind(obj)
    defined_in = getattr(obj, "__module__", "") or ""
    layer = next((title for prefix, title in LAYERS if defined_in.startswith(prefix)), "Other")
    return layer if layer == "Errors" else f"{layer}: {_kind(obj).lower()}"


def _section_rank(group: str) -> tuple[int, str]:
    rank = next((i for i, title in enumerate(SECTION_ORDER) if group.startswith(title)), len(SECTION_ORDER))
    return rank, group


def page_text(namespace: str) -> str:
    """The reStructuredText of one namespace's page."""
    module = importlib.import_module(namespace)
    groups: dict[str, list[str]] = {}
    for name in public_names(namespace):
        groups.setdefault(_group(namespace, getattr(module, name)), []).append(name)
    title = f"``{namespace}``"
    lines = [
        title,
        "=" * len(title),
        "",
        f".. automodule:: {namespace}",
        "   :no-members:",
        "",
        f".. currentmodule:: {namespace}",
        "",
    ]
    for group in sorted(groups, key=_section_rank):
        lines += [group, "-" * len(group), "", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in groups[group]]
        lines.append("")
    return "\n".join(lines)


def write_pages(app: Sphinx, config: Config) -> None:
    """Write ``api/<namespace>.rst`` for every configured namespace (files that did not change are kept)."""
    folder = Path(app.srcdir) / "api"
    folder.mkdir(exist_ok=True)
    documented = {f"{ns}.{name}" for ns in config.nbkit_api_namespaces for name in public_names(ns)}
    for stub in (folder / "generated").glob("*.rst"):
        if stub.stem not in documented:  # a name no longer public: its old page would be an orphan
            stub.unlink()
    for namespace in config.nbkit_api_namespaces:
        target = folder / f"{namespace}.rst"
        text = page_text(namespace)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def skip_foreign_members(app: Sphinx, what: str, name: str, obj: object, skip: bool, options: Any) -> bool | None:
    """Leave out class members that Python's own types define (``str.maketrans``, ``tuple.count``...).

    Class pages list inherited members, so a broker's page shows ``subscriber`` from its nbkit base;
    members of builtin bases (an Enum's ``str`` methods, a named tuple's ``count``) are noise.
    """
    if what not in ("class", "exception"):
        return None
    owner = obj.fget if isinstance(obj, property) else obj
    module = getattr(owner, "__module__", None)
    if module is None or not module.startswith("nbkit"):
        return True
    return None


def protocol_signature(
    app: Sphinx, what: str, name: str, obj: object, options: Any, args: str | None, retann: str | None
) -> tuple[str, str] | None:
    """No call signature for a ``typing.Protocol`` (``Clock``): it describes methods, nobody calls it.

    Python gives every protocol the ``(*args, **kwargs)`` of its placeholder ``__init__``, which
    would read as if ``Clock(...)`` took anything.
    """
    if what == "class" and getattr(obj, "_is_protocol", False):
        return "", ""
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    """Generate the pages when the configuration is read, before Sphinx and autosummary look for sources."""
    app.add_config_value("nbkit_api_namespaces", ["nbkit"], "env")
    app.connect("config-inited", write_pages, priority=400)
    app.connect("autodoc-skip-member", skip_foreign_members)
    app.connect("autodoc-process-signature", protocol_signature)
    return {"parallel_read_safe": True}
