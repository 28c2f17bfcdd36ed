"""What the JupyterLab browser tests share: the notebook they open, the kernel-idle probe they wait on and
the artifacts they leave when they fail."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parents[2]

# True when the notebook in the main area is ours and its kernel is connected and idle.
KERNEL_IDLE_JS = """(path) => {
    const app = window.jupyterapp;
    const w = app && app.shell.currentWidget;
    if (!w || !w.sessionContext || !w.context || w.context.path !== path) return false;
    const sc = w.sessionContext;
    const k = sc.session && sc.session.kernel;
    return !!(sc.isReady && k && k.connectionStatus === 'connected' && k.status === 'idle');
}"""


def write_code_notebook(path: Path, cells: Sequence[str]) -> None:
    """Write a valid Python 3 notebook of these code cells (unexecuted) for the browser to open."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    nbformat.validate(nb)
    nbformat.write(nb, str(path))


def open_notebook(page: Any, lab_server: Any, notebook: str, budget: Any) -> None:
    """Open ``notebook`` in JupyterLab (a fresh workspace) and wait until its kernel is connected and idle."""
    page.goto(f"{lab_server.url}/lab/tree/{notebook}?reset&token={lab_server.token}", timeout=budget.ms(30))
    page.wait_for_function("() => !!(window.jupyterapp && window.jupyterapp.shell)", timeout=budget.ms(30))
    page.wait_for_function(KERNEL_IDLE_JS, arg=notebook, timeout=budget.ms(40), polling=250)


def open_saved(page: Any, lab_server: Any, notebook: str, budget: Any) -> None:
    """Copy ``notebooks/<notebook>`` as saved (outputs and widget state, not run) into the server's folder
    and open it (:func:`open_notebook`)."""
    shutil.copy(ROOT / "notebooks" / notebook, lab_server.root_dir / notebook)
    open_notebook(page, lab_server, notebook, budget)


@contextmanager
def failure_artifacts(
    page: Any, shot: Path, artifacts_dir: Path, name: str, console: Sequence[str], lab_server: Any, budget: Any
) -> Iterator[None]:
    """Run a browser test's checks; on failure save a screenshot, the console and the page, and print the
    server's log tail (the original failure is re-raised); always print how long the test took."""
    try:
        yield
    except BaseException:
        try:
            page.screenshot(path=str(shot) + "-FAILED.png", timeout=10_000)
            (artifacts_dir / f"{name}-FAILED-console.txt").write_text("\n".join(console))
            (artifacts_dir / f"{name}-FAILED-page.html").write_text(page.content())
        except Exception as exc:  # keep the original failure
            print(f"could not save failure artifacts: {exc!r}")
        print(f"JupyterLab log tail:\n{lab_server.log_tail()}")
        raise
    finally:
        print(f"browser test: {budget.elapsed():.1f} s from server start to the end of the checks")


@contextmanager
def lab_page(browser_page: Any, lab_server: Any, artifacts_dir: Path, request: Any, budget: Any) -> Iterator[tuple]:
    """A browser test's page and its screenshots' path stem (``artifacts_dir/<test name>``), with
    :func:`failure_artifacts` saved under the test's name if the checks inside fail."""
    page, name = browser_page.page, request.node.name
    shot = artifacts_dir / name
    with failure_artifacts(page, shot, artifacts_dir, name, browser_page.console, lab_server, budget):
        yield page, shot
