"""Every public name is documented (numpy style) and the examples in its docstring run.

The names are those the API reference documents (``nbkit_api_namespaces`` in docs/conf.py, each
namespace's ``__all__``), so a name another change adds is checked with no edit here. The rules are in
``docstring_rules.py``. Examples run as doctests in a fresh temporary folder (they may write files
there); one marked ``# doctest: +SKIP`` is shown but not run (it needs a cluster, a display, or time).
"""

from __future__ import annotations

import doctest
import importlib
import inspect

import pytest
from docstring_rules import namespaces, problems, public_objects

PUBLIC = dict(public_objects())
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_the_reference_covers_the_namespaces():
    assert namespaces()[0] == "nbkit"
    assert {"nbkit.plot", "nbkit.widgets", "nbkit.exercises", "nbkit.dask"} <= set(namespaces())
    assert "nbkit.read_stream" in PUBLIC and "nbkit.widgets.SessionPanel" in PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_docstring_is_complete(name):
    missing = problems(PUBLIC[name])
    assert not missing, f"{name} (numpy-style docstring): " + "; ".join(missing)


def _doctests(name: str, obj: object) -> list[doctest.DocTest]:
    module = inspect.getmodule(obj)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return finder.find(obj, name, module=module, globs=dict(vars(module)) if module else {})


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tests = _doctests(name, PUBLIC[name])
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{name}: {results.failed} of {results.attempted} doctest examples failed (see above)"


@pytest.mark.parametrize("namespace", namespaces())
def test_namespace_examples_run(namespace, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(namespace)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in doctest.DocTestFinder(recurse=False, exclude_empty=True).find(module, namespace):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def _modules() -> list[str]:
    """Every module of the package (internal ones too: their examples are documentation as well)."""
    import pkgutil

    import nbkit

    return sorted(m.name for m in pkgutil.walk_packages(nbkit.__path__, "nbkit.") if not m.name.endswith("__main__"))


@pytest.mark.parametrize("module_name", _modules())
def test_every_modules_examples_run(module_name, tmp_path_factory, monkeypatch, capsys):
    """The examples of every docstring in every module run, each docstring in a fresh folder (so an internal
    helper's example cannot go stale unseen, as the public names' cannot)."""
    module = importlib.import_module(module_name)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, module_name):
        monkeypatch.chdir(tmp_path_factory.mktemp("doctest"))
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, f"{module_name}: {results.failed} of {results.attempted} examples failed (see above)"
