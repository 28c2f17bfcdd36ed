"""One-line setup for the tutorial lessons: readable pandas display and a clean work folder."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = [
    "DISPLAY_OPTIONS",
    "setup",
]


#: Display options under which nothing a lesson talks about is cut off (header maps, outcome and action).
DISPLAY_OPTIONS: dict[str, object] = {
    "display.width": 160,
    "display.max_columns": None,
    "display.max_colwidth": None,
    "display.max_rows": 60,
}


def setup(lesson: str, *, root: str | Path = "work") -> Path:
    """Prepare a lesson: set pandas' display options and return an empty ``work/<lesson>`` folder.

    Parameters
    ----------
    lesson : str
        The lesson's number, such as ``"03"``; the folder every file the lesson writes lives in.
    root : str or Path, default "work"
        Where the lesson folders are made, relative to the notebook's directory.

    Returns
    -------
    pathlib.Path
        The lesson's folder, emptied and created again, so each run starts from nothing.

    Examples
    --------
    >>> import tempfile
    >>> from nbkit.notebook.lesson import setup
    >>> work = setup("03", root=tempfile.mkdtemp())
    >>> work.name, list(work.iterdir())
    ('03', [])
    """
    import pandas as pd

    for option, value in DISPLAY_OPTIONS.items():
        pd.set_option(option, value)
    work = Path(root) / lesson
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return work
