"""The notebook the viewer's "Open in a notebook" button makes: ``read_stream`` of the file, lineage, dashboard.

The notebook is written beside the stream file (so its cells name the file by its bare name, and run from
the notebook's folder as Jupyter kernels do), under a name not yet taken: ``orders-view.ipynb``, then
``orders-view-2.ipynb``, ...
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

__all__ = ["notebook_cells", "notebook_name"]


def notebook_name(stream_path: str, taken: Any) -> str:
    """A free notebook path beside ``stream_path`` (``/``-separated, relative to the server's root).

    Parameters
    ----------
    stream_path : str
        The stream file, relative to the root.
    taken : callable
        ``taken(path) -> bool``: whether that path exists already.

    Examples
    --------
    >>> notebook_name("data/orders.ss", lambda p: p == "data/orders-view.ipynb")
    'data/orders-view-2.ipynb'
    """
    pure = PurePosixPath(stream_path)
    for n in range(1, 1000):
        name = f"{pure.stem}-view.ipynb" if n == 1 else f"{pure.stem}-view-{n}.ipynb"
        candidate = (pure.parent / name).as_posix()
        if not taken(candidate):
            return candidate
    raise FileExistsError(f"no free notebook name beside {stream_path} (tried {pure.stem}-view-1..999.ipynb)")


def notebook_cells(stream_path: str) -> list[tuple[str, str]]:
    """The cells, as (``"markdown"`` or ``"code"``, source), for the stream file ``stream_path``.

    Examples
    --------
    >>> [kind for kind, _ in notebook_cells("data/orders.ss")]
    ['markdown', 'code', 'markdown', 'code', 'markdown', 'code']
    """
    name = PurePosixPath(stream_path).name
    return [
        (
            "markdown",
            f"# `{name}`\n\nOpened from the stream viewer. `read_stream` loads every message, one row each; "
            '`on_bad_frames="warn"` reads past damaged regions (each one warned) instead of stopping.',
        ),
        (
            "code",
            f"from nbkit import lineage, read_stream\nfrom nbkit.plot import dashboard\n\n"
            f'frame = read_stream({name!r}, on_bad_frames="warn")\nframe',
        ),
        (
            "markdown",
            "## Lineage\n\nEach record's original message, attempt and what became of it (retry copies and dead "
            "letters joined to the message they copy).",
        ),
        ("code", 'lin = lineage(frame)\nlin[["message", "attempt", "stream_key", "seq", "state", "final_state"]]'),
        ("markdown", "## Dashboard\n\nDeliveries per attempt, scheduled retry delays and dead letters over time."),
        ("code", "fig = dashboard(frame);"),
    ]
