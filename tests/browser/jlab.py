"""What the JupyterLab browser tests share: the notebook they open and the kernel-idle probe they wait on."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import nbformat

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
