"""Which core runs nbkit's byte-level hot loops: the compiled twin or the pure-Python reference twin.

Chosen once, at import: the compiled extension ``nbkit.wire._speedups`` (built by ``pip install`` when
a C compiler is there) unless ``NBKIT_PURE_PYTHON=1`` is set or the extension is missing. The modules
with a hot loop (:mod:`nbkit.wire.crc`, :mod:`nbkit.wire.scan`, :mod:`nbkit.wire.ssformat`,
:mod:`nbkit.wire.stdio_line`) bind their public function to the chosen twin through :func:`pick`.
Both twins give the same results and raise the same errors (tests/wire/test_twins.py).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["CORE", "FORCED_PURE", "UNAVAILABLE", "compiled_module", "core_description", "pick"]

#: True when ``NBKIT_PURE_PYTHON`` asks for the pure-Python twin (any value but empty or ``0``).
FORCED_PURE = os.environ.get("NBKIT_PURE_PYTHON", "") not in ("", "0")

_compiled: ModuleType | None = None
#: Why the compiled core is not active (None when it is).
UNAVAILABLE: str | None = "NBKIT_PURE_PYTHON is set" if FORCED_PURE else None
if not FORCED_PURE:
    try:
        _compiled = importlib.import_module("nbkit.wire._speedups")
    except ImportError:
        UNAVAILABLE = "the compiled core was not built"

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
