"""The one rule that chooses every compiled twin, and the one line that names them (``nbkit --version``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from checkout_env import checkout_env

from nbkit.transport import writer_state
from nbkit.wire import core, jsonfields


def test_every_twin_is_loaded_by_the_one_rule() -> None:
    """Each module that has a compiled twin holds what load_compiled gives for it: both agree in this process."""
    assert (core.load_compiled("nbkit.wire._speedups") is not None) == (core.CORE == "compiled")
    assert core.load_compiled("nbkit.transport._writer") is writer_state.COMPILED
    assert (core.load_compiled("nbkit.wire._jsonfields") is not None) is jsonfields.COMPILED


def test_a_twin_that_was_not_built_is_none() -> None:
    assert core.load_compiled("nbkit.wire._no_such_twin") is None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"NBKIT_PURE_PYTHON": "1"}, ["pure-Python core (NBKIT_PURE_PYTHON is set)", "pure-Python writer route"]),
        ({"NBKIT_PURE_PYTHON": "0"}, None),  # "0" does not force the pure twins: each is compiled if built
    ],
)
def test_the_description_names_each_twin_as_chosen(env: dict[str, str], expected: list[str] | None) -> None:
    """In a fresh process (the choice is made at import): one part per twin of TWINS, in their order."""
    code = "from nbkit.wire import core; print(core.twins_description())"
    out = subprocess.run(
        [sys.executable, "-c", code], env=checkout_env(**env), capture_output=True, text=True, check=True
    ).stdout.strip()
    parts = out.split("; ")
    assert len(parts) == len(core.TWINS)
    if expected is None:
        assert parts[0].startswith("compiled core") == (core.compiled_module() is not None)
    else:
        assert parts[:2] == expected and parts[2] == "pyarrow.json JSON field parser"
