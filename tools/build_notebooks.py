"""Execute the lesson sources (``notebooks/*.md``, MyST Markdown paired by jupytext) and save the outputs.

Authors edit the ``.md`` files; this command runs each one top to bottom in a fresh kernel and writes the
paired ``.ipynb`` with its outputs (and widget state), which is what strict nbval compares and Binder opens:

    python tools/build_notebooks.py            # every lesson
    python tools/build_notebooks.py 03 05      # only the lessons whose names start with 03 or 05

Cells whose source contains ``NBVAL_SKIP`` are stored without running (nbval skips them too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: Cell metadata a lesson may set and the saved notebook keeps (tags such as ``solution``, collapsed source).
KEPT_METADATA = ("tags", "jupyter")


def build(source: Path) -> Path:
    """Run one lesson source and write its ``.ipynb`` beside it; returns the notebook's path."""
    nb = jupytext.read(source)
    nb.metadata["language_info"] = {"name": "python"}
    skipped = {i: c.source for i, c in enumerate(nb.cells) if c.cell_type == "code" and "NBVAL_SKIP" in c.source}
    for i in skipped:
        nb.cells[i].source = "pass"
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    for i, text in skipped.items():
        nb.cells[i].source = text
        nb.cells[i].outputs = []
        nb.cells[i].execution_count = None
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{source.stem[:2]}-{i:02d}"
        cell.metadata = {k: v for k, v in cell.metadata.items() if k in KEPT_METADATA}
    target = source.with_suffix(".ipynb")
    nbformat.write(nb, target)
    return target


def main(argv: list[str]) -> int:
    wanted = argv[1:] or [""]
    sources = sorted(p for p in NOTEBOOKS.glob("*.md") if any(p.name.startswith(w) for w in wanted))
    if not sources:
        print(f"no lesson source in {NOTEBOOKS} starts with {' or '.join(wanted)}", file=sys.stderr)
        return 1
    for source in sources:
        print("built", build(source).relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
