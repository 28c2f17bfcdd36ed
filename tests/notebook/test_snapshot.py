"""Still pictures of widgets (nbkit.notebook.snapshot): what a notebook not run yet and the site show."""

from __future__ import annotations

import base64

import ipywidgets as widgets

from nbkit.notebook.snapshot import StaticSnapshot, snapshot_html

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def test_controls_are_drawn_inert_with_their_values():
    box = widgets.HBox(
        [
            widgets.IntSlider(value=4, description="max_attempts"),
            widgets.Checkbox(value=True, description="dead-letter key"),
            widgets.Checkbox(value=False, description="cap delays"),
            widgets.ToggleButtons(options=["fixed", "exponential"], value="exponential", description="backoff"),
            widgets.Button(description="Run"),
        ]
    )
    picture = snapshot_html(box, note="still")
    assert "max_attempts: <b>4</b>" in picture and "backoff: <b>exponential</b>" in picture
    assert "☑ dead-letter key" in picture and "☐ cap delays" in picture
    assert picture.count("class='nbkit-inert'") == 5 and "<input" not in picture and "<button" not in picture
    assert "display:flex;flex-direction:row" in picture


def test_html_views_and_images_are_kept_and_the_note_is_escaped():
    image = widgets.Image(value=PNG, format="png", layout=widgets.Layout(width="320px"))
    box = widgets.VBox([widgets.HTML("<table><tr><td>7</td></tr></table>"), image, widgets.Image()])
    picture = snapshot_html(box, note="at <clock>")
    assert "<table><tr><td>7</td></tr></table>" in picture
    assert f"src='data:image/png;base64,{base64.b64encode(PNG).decode()}'" in picture
    assert "width:320px;max-width:100%" in picture and picture.count("<img") == 1  # an empty image draws nothing
    assert "at &lt;clock&gt;" in picture


class Panel(StaticSnapshot, widgets.VBox):
    snapshot_name = "test panel"


def test_the_mixin_adds_the_picture_beside_the_widget_view():
    panel = Panel([widgets.HTML("<b>hello</b>")])
    bundle = panel._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    assert "A still picture of this test panel" in bundle["text/html"] and "<b>hello</b>" in bundle["text/html"]
    panel.close()
    assert panel._repr_mimebundle_ is None  # ipywidgets: a closed widget has nothing to show
