"""Notebook widgets: ``SessionPanel(session)``, ``StreamBrowser(path)`` and ``PolicyExplorer()``.

The implementation lives in :mod:`nbkit.notebook.widgets` and :mod:`nbkit.notebook.policy_explorer`.
"""

from nbkit.notebook.policy_explorer import PolicyExplorer
from nbkit.notebook.widgets import SessionPanel, StreamBrowser

__all__ = ["PolicyExplorer", "SessionPanel", "StreamBrowser"]
