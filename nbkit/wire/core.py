"""Which core runs nbkit's byte-level hot loops: the compiled twin or the pure-Python reference twin.

Chosen once, at import: the compiled extension ``nbkit.wire._speedups`` (built by ``pip install`` when
a C compiler is there) unless ``NBKIT_PURE_PYTHON=1`` is set or the extension is missing. The modules
with a hot loop (:mod:`nbkit.wire.crc`, :mod:`nbkit.wire.scan`, :mod:`nbkit.wire.ssformat`,
:mod:`nbkit.wire.stdio_line`) bind their public function to the chosen twin through :func:`pick`.
Both twins give the same results and raise the same errors (tests/wire/test_twins.py).

Every compiled twin the package builds (:data:`TWINS`: this core, the writer's short route and the JSON field
parser) is loaded by the one rule of :func:`load_compiled`, and :func:`twins_description` says which are
active, in the words ``nbkit --version`` prints.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = [
    "CORE",
    "FORCED_PURE",
    "TWINS",
    "UNAVAILABLE",
    "compiled_module",
    "core_description",
    "load_compiled",
    "pick",
    "twins_description",
]

#: True when ``NBKIT_PURE_PYTHON`` asks for the pure-Python twin (any value but empty or ``0``).
FORCED_PURE = os.environ.get("NBKIT_PURE_PYTHON", "") not in ("", "0")

#: The compiled twins the package builds (``setup.py``), each with what it is called when it is active and
#: when its pure twin runs instead, as ``nbkit --version`` says it (``{why}``: why the core is pure).
TWINS: dict[str, tuple[str, str]] = {
    "nbkit.wire._speedups": ("compiled core (nbkit.wire._speedups)", "pure-Python core ({why})"),
    "nbkit.transport._writer": ("compiled writer route", "pure-Python writer route"),
    "nbkit.wire._jsonfields": ("compiled JSON field parser", "pyarrow.json JSON field parser"),
}


def load_compiled(module: str) -> ModuleType | None:
    """The compiled twin ``module`` (one of :data:`TWINS`) when this process runs it, else None.

    The one rule every twin is chosen by: None when ``NBKIT_PURE_PYTHON`` forces the pure twins or the
    module was not built (no C compiler at install).

    Parameters
    ----------
    module
        The compiled module's dotted name.

    Returns
    -------
    ModuleType or None

    Examples
    --------
    >>> module = load_compiled("nbkit.wire._speedups")
    >>> module is None or callable(module.scan_frames)
    True
    """
    if FORCED_PURE:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


_compiled = load_compiled("nbkit.wire._speedups")
#: Why the compiled core is not active (None when it is).
UNAVAILABLE: str | None = (
    "NBKIT_PURE_PYTHON is set" if FORCED_PURE else None if _compiled is not None else "the compiled core was not built"
)

#: ``"compiled"`` or ``"pure-python"``: the core every hot loop of this process runs on.
CORE = "compiled" if _compiled is not None else "pure-python"


def pick(name: str, pure: Callable[..., Any]) -> Callable[..., Any]:
    """The twin of ``pure`` that this process runs: the compiled function ``name``, or ``pure`` itself.

    Parameters
    ----------
    name
        The function's name in ``nbkit.wire._speedups``.
    pure
        The pure-Python reference implementation.

    Returns
    -------
    Callable
        The compiled function when the compiled core is active, else ``pure``.

    Examples
    --------
    >>> from nbkit.wire.scan import scan_frames
    >>> callable(pick("scan_frames", scan_frames))
    True
    """
    if _compiled is None:
        return pure
    return getattr(_compiled, name)


def compiled_module() -> ModuleType | None:
    """The compiled extension module when it can be imported, even while the twin is forced, else None.

    The twin tests and benchmarks use it to run both cores in one process.

    Returns
    -------
    ModuleType or None
        ``nbkit.wire._speedups``, or None where it was not built.

    Examples
    --------
    >>> module = compiled_module()
    >>> module is None or callable(module.scan_frames)
    True
    """
    if _compiled is not None:
        return _compiled
    try:
        return importlib.import_module("nbkit.wire._speedups")
    except ImportError:
        return None


def core_description() -> str:
    """One line saying which core is active and, for the pure twin, why.

    Returns
    -------
    str
        ``"compiled core (nbkit.wire._speedups)"`` or ``"pure-Python core (<reason>)"``.

    Examples
    --------
    >>> core_description().split()[0] in ("compiled", "pure-Python")
    True
    """
    if CORE == "compiled":
        return "compiled core (nbkit.wire._speedups)"
    return f"pure-Python core ({UNAVAILABLE})"


def twins_description() -> str:
    """Which twin of each of :data:`TWINS` this process runs, in one line (what ``nbkit --version`` prints).

    Returns
    -------
    str
        The twins' names joined by ``"; "``, e.g. ``"compiled core (nbkit.wire._speedups); compiled writer
        route; compiled JSON field parser"``.

    Examples
    --------
    >>> twins_description().count("; ")
    2
    """
    return "; ".join(
        compiled if load_compiled(module) is not None else pure.format(why=UNAVAILABLE)
        for module, (compiled, pure) in TWINS.items()
    )
