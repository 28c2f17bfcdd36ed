"""Diagrams from text: a ```` ```mermaid ```` fence becomes a drawn diagram, with no CDN.

Lessons and guide pages write their diagrams as Mermaid text in an ordinary fenced block, which
JupyterLab (4.1 and later) draws by itself. On the site, myst-parser turns that fence into a literal
block with the language ``mermaid``; this transform replaces it with ``<pre class="mermaid">`` holding
the same text (HTML-escaped), and pages that have one load the Mermaid bundle that :mod:`.npm_assets`
fetched from the npm registry at build time, plus ``nbkit-mermaid.js``, which draws every such block
once the page has loaded. Without JavaScript the reader still sees the diagram's text.
"""

from __future__ import annotations

import html
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.transforms import SphinxTransform

from .npm_assets import NpmAsset, cache_root, fetch

__all__ = ["MERMAID", "setup"]

#: The Mermaid release the site serves (the self-contained IIFE build), pinned with its checksum.
MERMAID = NpmAsset(
    package="mermaid",
    version="11.12.2",
    main="mermaid.min.js",
    sha256="d0830a6c05546e9edb8fe20a8f545f3e0dc7c4c3134d584bad9c13a99d7a71e0",
    folder="mermaid",
)
#: The page script that starts the drawing (in docs/_static, next to nbkit.css).
STARTER = "nbkit-mermaid.js"
#: The class the diagram blocks carry (what the starter script and the tests look for).
CSS_CLASS = "mermaid"


class MermaidFences(SphinxTransform):
    """Turn every literal block whose language is ``mermaid`` into a diagram block for the HTML page."""

    default_priority = 400  # before highlighting: Pygments has no Mermaid lexer and would warn

    def apply(self, **kwargs: Any) -> None:
        """Replace each such block by a raw HTML ``<pre class="mermaid">`` in a ``nbkit-diagram`` container."""
        for block in list(self.document.findall(nodes.literal_block)):
            if str(block.get("language", "")).strip().lower() != "mermaid":
                continue
            text = block.astext()
            markup = f'<pre class="{CSS_CLASS}">{html.escape(text)}</pre>'
            raw = nodes.raw(text, markup, format="html")
            container = nodes.container("", raw, classes=["nbkit-diagram"])
            block.replace_self(container)


def add_static_path(app: Sphinx, config: Config) -> None:
    """Fetch the bundle if needed and add its folder to ``html_static_path``."""
    static_root = cache_root(app.confdir, MERMAID)
    fetch(MERMAID, static_root)
    config.html_static_path = [*config.html_static_path, str(static_root)]


def add_scripts(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Load Mermaid and the starter on the pages that have a diagram (and only there: 2.7 MB)."""
    if f'<pre class="{CSS_CLASS}">' in str(context.get("body", "")):
        app.add_js_file(MERMAID.uri, priority=600)
        app.add_js_file(STARTER, priority=601)


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the transform, the static folder and the per-page scripts."""
    app.add_transform(MermaidFences)
    app.connect("config-inited", add_static_path, priority=900)
    app.connect("html-page-context", add_scripts)
    return {"parallel_read_safe": True}
