"""A lesson survives what learners do: Run All twice in one kernel, an exercise cell run before the cells
above it, and Restart & Run All in a folder where the lesson already ran.

Each lesson source is executed top to bottom, then every cell again in the same kernel (nbclient); the
second pass must raise nothing a cell does not expect (a cell tagged ``raises-exception`` may). Lessons
whose run takes minutes (06, the scale lesson) run twice on a small workload, and their exercise cells
are run first like every lesson's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
#: The lessons run twice here: all but the slow ones (their measured times are in docs/learn/instructors.md).
QUICK = ("00", "01", "02", "03", "04", "05", "07", "08", "09", "self-check")
#: Every lesson: running only its exercise cells is quick even where the lesson's own run is not.
EVERY = tuple(sorted((*QUICK, "06")))


def _source(stem: str) -> Path:
    (source,) = NOTEBOOKS.glob(f"{stem}*.md")
    return source


def _lesson_folder(tmp_path: Path) -> Path:
    """A folder laid out as notebooks/ for the files a lesson reads (its data/): lessons run here, never in
    notebooks/ itself, where the notebook tests run the same lessons at the same time on another worker
    and a lesson's ``setup()`` empties the folder its files go to."""
    for path in (NOTEBOOKS / "data").rglob("*"):
        if path.is_file():
            target = tmp_path / "data" / path.relative_to(NOTEBOOKS / "data")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    return tmp_path


@pytest.mark.parametrize("stem", QUICK)
def test_run_all_twice_in_one_kernel(stem, tmp_path):
    _run_all_twice(jupytext.read(_source(stem)), _lesson_folder(tmp_path))


def test_the_scale_lesson_runs_all_twice_in_one_kernel_on_a_small_workload(tmp_path):
    """06 at its own size makes a 990 MiB file (minutes); Run All twice is about its cluster, file and
    checkpoint being made again, which 2,000 orders show as well."""
    nb = jupytext.read(_source("06"))
    [setup] = [cell for cell in nb.cells if cell.cell_type == "code" and "ORDERS = 40_000" in cell.source]
    setup.source = setup.source.replace("ORDERS = 40_000", "ORDERS = 2_000")
    _run_all_twice(nb, _lesson_folder(tmp_path))


def _run_all_twice(nb, folder: Path) -> None:
    """Run every cell of ``nb`` top to bottom in ``folder``, then again in the same kernel; a cell's error
    raises."""
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        if cell.cell_type == "code" and "NBVAL_SKIP" in cell.source:
            cell.source = "pass"  # what nbval and tools/build_notebooks.py do with these cells
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    with client.setup_kernel():
        for _ in range(2):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)  # raises CellExecutionError, naming the cell, on an error


def _unsolved_exercise_cells(nb) -> list[int]:
    """The cells that ask an exercise (``check(...)`` with ``prediction = None``), solutions excluded."""
    return [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and "check(" in cell.source
        and "prediction = None" in cell.source
        and "solution" not in cell.metadata.get("tags", [])
    ]


def _text(cell) -> str:
    """What a cell printed and displayed, as text."""
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.get("outputs", []))


#: A prediction in no exercise's form: run with it, every exercise cell answers "Not yet" with the form it wants.
NOT_AN_ANSWER = "prediction = 'not an answer at all'"


@pytest.mark.parametrize("stem", EVERY)
def test_an_exercise_cell_run_before_the_cells_above_it_prints_its_prompt(stem, tmp_path):
    """A learner who jumps to an exercise and runs its cell first (a fresh kernel, nothing above it run)
    gets the prompt to predict, not a NameError, and once they write a prediction, a verdict: each exercise
    cell imports what it calls and passes the check literal values or names its own cell binds (or none,
    when the exercise bank holds the lesson's own values, as for the capstone's shop)."""
    nb = jupytext.read(_source(stem))
    nb.metadata["language_info"] = {"name": "python"}
    asks = _unsolved_exercise_cells(nb)
    if not asks:
        pytest.skip(f"{stem} asks no exercise")
    folder = _lesson_folder(tmp_path)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    with client.setup_kernel():
        for index in asks:
            cell = nb.cells[index]
            client.execute_cell(nbformat.v4.new_code_cell("%reset -f"), 0)
            client.execute_cell(cell, index)  # raises CellExecutionError, naming the cell, on an error
            assert _text(cell).startswith("Predict first: "), (stem, index, _text(cell))
            predicted = nbformat.v4.new_code_cell(cell.source.replace("prediction = None", NOT_AN_ANSWER, 1))
            client.execute_cell(nbformat.v4.new_code_cell("%reset -f"), 0)
            client.execute_cell(predicted, index)
            assert _text(predicted).startswith("Not yet: answer with "), (stem, index, _text(predicted))


@pytest.mark.parametrize("stem", QUICK)
def test_a_lesson_runs_again_in_a_folder_where_it_already_ran(stem, tmp_path):
    """Restart & Run All in a folder the lesson already ran in (its files, positions and work/ folder left
    from the first run) runs without an error, and its exercise cells print what they printed the first time."""
    folder = _lesson_folder(tmp_path)
    printed = []
    for _ in range(2):
        nb = jupytext.read(_source(stem))
        nb.metadata["language_info"] = {"name": "python"}
        for cell in nb.cells:
            if cell.cell_type == "code" and "NBVAL_SKIP" in cell.source:
                cell.source = "pass"
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
        printed.append([_text(nb.cells[i]) for i in _unsolved_exercise_cells(nb)])
    assert printed[1] == printed[0]
