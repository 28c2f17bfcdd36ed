"""Layouts that keep a widget inside a notebook's column, however narrow (JupyterLab beside its file
browser, the documentation site): rows that wrap, and widths that leave room for ipywidgets' margins."""

from __future__ import annotations

import ipywidgets as widgets

__all__ = ["FULL_WIDTH", "wrapping_row"]

#: As wide as the enclosing box at most, less the 2 px margin ipywidgets gives a widget on each side
#: (``100%`` plus the margins reaches past the box's edge and makes it scroll sideways).
FULL_WIDTH = "calc(100% - 4px)"


def wrapping_row() -> widgets.Layout:
    """An HBox's layout whose children move to a new line instead of running past the box's right edge.

    Returns
    -------
    ipywidgets.Layout
    """
    return widgets.Layout(flex_flow="row wrap", max_width=FULL_WIDTH)
