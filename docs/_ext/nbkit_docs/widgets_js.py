"""Serve the ipywidgets HTML manager from the site itself, so widget snapshots render with no CDN.

The notebooks store their widget state; myst-nb writes it into each page with the widget views, and the
``@jupyter-widgets/html-manager`` bundle (``embed.js``, standalone: no require.js) renders them. By
default that bundle loads from a CDN; here :mod:`.npm_assets` fetches the pinned release from the npm
registry at build time, and ``embed.js`` with the Font Awesome files it references is served from the
site's ``_static/jupyter-widgets/``.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx
from sphinx.config import Config

from .npm_assets import NpmAsset, cache_root, fetch

__all__ = ["HTML_MANAGER", "setup"]

_FONT_SUFFIXES = (".woff2", ".woff", ".ttf", ".eot", ".svg")

#: The release that renders ipywidgets 8 state (widget protocol 2), pinned with its bundle's checksum.
HTML_MANAGER = NpmAsset(
    package="@jupyter-widgets/html-manager",
    version="1.0.15",
    main="embed.js",
    sha256="8f6d2d3f856d8595d1841dec3019d99bbe74d331f2a5178c2a33bfec729e3d6a",
    folder="jupyter-widgets",
    extra=lambda name: name == "embed.js.LICENSE.txt" or name.endswith(_FONT_SUFFIXES),
)


def add_static_path(app: Sphinx, config: Config) -> None:
    """Fetch the bundle if needed and add its folder to ``html_static_path``; point myst-nb at it."""
    static_root = cache_root(app.confdir, HTML_MANAGER)
    fetch(HTML_MANAGER, static_root)
    config.html_static_path = [*config.html_static_path, str(static_root)]
    config.nb_ipywidgets_js = {HTML_MANAGER.uri: {}}


def setup(app: Sphinx) -> dict[str, Any]:
    """Run after conf.py is read (myst-nb reads ``nb_ipywidgets_js`` when the builder starts)."""
    app.connect("config-inited", add_static_path, priority=900)
    return {"parallel_read_safe": True}
