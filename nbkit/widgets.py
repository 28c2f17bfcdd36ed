"""Notebook widgets: ``SessionPanel(session)``, ``StreamBrowser(path)``, ``LiveMonitor`` and ``PolicyExplorer()``.

The implementations live in :mod:`nbkit.notebook.widgets`, :mod:`nbkit.notebook.live_monitor` and
:mod:`nbkit.notebook.policy_explorer`.
"""

from nbkit.notebook.live_monitor import LiveMonitor
from nbkit.notebook.policy_explorer import PolicyExplorer
from nbkit.notebook.widgets import SessionPanel, StreamBrowser

__all__ = ["LiveMonitor", "PolicyExplorer", "SessionPanel", "StreamBrowser"]
