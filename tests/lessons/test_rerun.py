"""A lesson survives Run All twice in one kernel, as a class does when a learner starts over.

Each lesson source is executed top to bottom, then every cell again in the same kernel (nbclient); the
second pass must raise nothing a cell does not expect (a cell tagged ``raises-exception`` may). Lessons
whose run takes minutes (06, the scale lesson) are left to the notebook tests.
"""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: The lessons run twice here: all but the slow ones (their measured times are in docs/learn/instructors.md).
QUICK = ("00", "01", "02", "03", "04", "05", "07", "08", "09", "self-check")


def _source(stem: str) -> Path:
    (source,) = NOTEBOOKS.glob(f"{stem}*.md")
    return source


@pytest.mark.parametrize("stem", QUICK)
def test_run_all_twice_in_one_kernel(stem):
    nb = jupytext.read(_source(stem))
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code" and "NBVAL_SKIP" in cell.source:
            cell.source = "pass"  # what nbval and tools/build_notebooks.py do with these cells
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    with client.setup_kernel():
        for _ in range(2):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)  # raises CellExecutionError, naming the cell, on an error
