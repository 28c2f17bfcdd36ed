"""Notebook widgets: ``SessionPanel(session)`` and ``StreamBrowser(path)``.

The implementation lives in :mod:`nbkit.notebook.widgets`.
"""

from nbkit.notebook.widgets import SessionPanel, StreamBrowser

__all__ = ["SessionPanel", "StreamBrowser"]
