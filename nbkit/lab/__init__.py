"""The JupyterLab stream viewer's server side: a Jupyter Server extension serving ``.ss`` files in pages.

Installing nbkit enables it (``etc/jupyter/jupyter_server_config.d/nbkit.json``) and installs the
prebuilt front end (``share/jupyter/labextensions/nbkit-viewer``, built from ``labextension/`` into
``nbkit/lab/labextension/``); double-clicking a ``.ss`` file in JupyterLab then opens the viewer. The
handlers (:mod:`nbkit.lab.handlers`) read the file with nbkit's own reader, through a sparse index
(:mod:`nbkit.lab.index`), so the browser never receives the whole file. See docs/guide/viewer.md.

Importing this package does not import Jupyter Server; loading the extension does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LABEXTENSION_NAME"]

#: The front end's name: its folder under ``share/jupyter/labextensions`` and its npm package name.
LABEXTENSION_NAME = "nbkit-viewer"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Jupyter Server's entry point: this package is the extension."""
    return [{"module": "nbkit.lab"}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the built front end is, for ``jupyter labextension develop``."""
    return [{"src": "labextension", "dest": LABEXTENSION_NAME}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Add the viewer's handlers to the running server."""
    from nbkit.lab.handlers import setup_handlers

    setup_handlers(server_app.web_app)
    server_app.log.info("nbkit.lab: stream viewer handlers at %snbkit/viewer/", server_app.base_url)
