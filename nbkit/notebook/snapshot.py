"""A still picture of a widget, saved beside its live view, for the places the live view cannot run.

A notebook saved with outputs holds each widget as a reference to widget state. JupyterLab draws that
only once the notebook has run (before, a fresh, untrusted notebook shows a one-line text), and the
documentation site can draw it only as it was when the whole notebook had run, with controls that look
live and do nothing. :class:`StaticSnapshot` adds a ``text/html`` picture of the widget to the widget's
display data, taken when the cell displays it: JupyterLab shows it until the cell runs (the widget view
needs a trusted output, the picture does not), and the site shows it in place of the widget (``conf.py``
ranks ``text/html`` above the widget view). The picture says what it is, its controls are drawn greyed
out, and it shows the state of its own cell, not of the cells after it.
"""

from __future__ import annotations

import base64
import html
import inspect
from typing import Any

import ipywidgets as widgets

__all__ = ["StaticSnapshot", "snapshot_html"]

#: How an inert control looks in the picture: greyed, no pointer, never mistaken for a live one.
_INERT = (
    "display:inline-block;margin:2px 6px 2px 0;padding:2px 8px;border:1px dashed #9a9a9a;border-radius:3px;"
    "color:#555;background:#f2f2f2;cursor:not-allowed;font-size:90%"
)


def _image(widget: widgets.Image) -> str:
    """An Image widget as an ``<img>`` with its PNG inline (a data URI) and the widget's width."""
    if not widget.value:
        return ""
    data = base64.b64encode(bytes(widget.value)).decode("ascii")
    width = widget.layout.width or "auto"
    style = f"width:{width};max-width:100%" if width != "auto" else "max-width:100%"
    return f"<img alt='{html.escape(widget.__class__.__name__)}' style='{style}' src='data:image/png;base64,{data}'/>"


def _control(widget: widgets.Widget) -> str:
    """A button, checkbox or value control as greyed text: what it says and what it is set to."""
    if isinstance(widget, widgets.Button):
        return f"<span class='nbkit-inert' style='{_INERT}'>{html.escape(widget.description)}</span>"
    if isinstance(widget, widgets.Checkbox):
        mark = "☑" if widget.value else "☐"
        return f"<span class='nbkit-inert' style='{_INERT}'>{mark} {html.escape(widget.description)}</span>"
    description = getattr(widget, "description", "") or ""
    value = getattr(widget, "value", "")
    label = f"{html.escape(description)}: " if description else ""
    return f"<span class='nbkit-inert' style='{_INERT}'>{label}<b>{html.escape(str(value))}</b></span>"


def _render(widget: widgets.Widget) -> str:
    """One widget and its children as static HTML."""
    if isinstance(widget, widgets.HTML):
        return f"<div>{widget.value}</div>"
    if isinstance(widget, widgets.Image):
        return _image(widget)
    if isinstance(widget, widgets.Box):
        direction = "row" if isinstance(widget, widgets.HBox) else "column"
        wrap = "flex-wrap:wrap;align-items:flex-start;gap:0 1em;" if direction == "row" else ""
        inner = "".join(_render(child) for child in widget.children)
        return f"<div style='display:flex;flex-direction:{direction};{wrap}'>{inner}</div>"
    if isinstance(widget, widgets.Output):
        return ""  # an Output widget's content is the cell's, already shown as the cell's outputs
    return _control(widget)


def snapshot_html(widget: widgets.Widget, *, note: str) -> str:
    """The widget as a still HTML picture under a one-line ``note`` that says it is one.

    Parameters
    ----------
    widget : ipywidgets.Widget
        The widget (its HTML views, images and controls, recursively).
    note : str
        Plain text shown first, for example what moment the picture shows and where to run it live.

    Returns
    -------
    str
        ``<div class="nbkit-snapshot">...</div>``.

    Examples
    --------
    >>> import ipywidgets as widgets
    >>> box = widgets.VBox([widgets.Button(description="Step"), widgets.HTML("<b>clock</b> 0 s")])
    >>> picture = snapshot_html(box, note="A still picture.")
    >>> "A still picture." in picture, "Step" in picture, "cursor:not-allowed" in picture
    (True, True, True)
    """
    head = f"<p class='nbkit-snapshot-note' style='margin:0 0 4px 0;font-size:90%;color:#444'>{html.escape(note)}</p>"
    return (
        "<div class='nbkit-snapshot' style='border:1px solid #c8c8c8;border-radius:4px;padding:6px 8px'>"
        f"{head}{_render(widget)}</div>"
    )


class StaticSnapshot:
    """Mixin for an ``ipywidgets`` widget: its display data also holds a ``text/html`` still picture.

    Put it before the widget class (``class Panel(StaticSnapshot, widgets.VBox)``) and override
    :meth:`snapshot_note` to say what moment the picture shows.
    """

    #: What the widget is called in the note ("panel", "explorer", ...).
    snapshot_name = "widget"
    __signature__: inspect.Signature

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give each widget class the signature of its own ``__init__``.

        ipywidgets' base classes define ``__new__(cls, *args, **kwargs)``, which tools that read a
        class's signature from ``__new__`` first (Sphinx's autodoc, hence the API pages) would show
        instead of the real parameters.
        """
        super().__init_subclass__(**kwargs)
        init = inspect.signature(cls.__init__)
        parameters = list(init.parameters.values())[1:]  # without self
        cls.__signature__ = init.replace(parameters=parameters, return_annotation=inspect.Signature.empty)

    def snapshot_note(self) -> str:
        """The note above the picture: that it is one, and where its controls work.

        Returns
        -------
        str
        """
        return (
            f"A still picture of this {self.snapshot_name}, as this cell left it; its controls do nothing here. "
            "Run the notebook (JupyterLab, or Binder from the lesson page) to use them."
        )

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle: dict[str, Any] | None = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]
        if bundle is None:  # a closed widget shows nothing
            return None
        bundle["text/html"] = snapshot_html(self, note=self.snapshot_note())
        return bundle
