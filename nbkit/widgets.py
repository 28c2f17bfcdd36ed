"""Notebook widgets: ``SessionPanel(session)`` and ``StreamBrowser(path)``.

The implementation lives in :mod:`nbkit.notebook.widgets`.
"""

from nbkit.notebook.live_monitor import LiveMonitor
from nbkit.notebook.widgets import SessionPanel, StreamBrowser

__all__ = ["SessionPanel", "StreamBrowser", "LiveMonitor"]
