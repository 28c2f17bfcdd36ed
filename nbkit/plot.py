"""Plots of retries and dead letters, file and pipe side by side, and every message's timeline:
``import nbkit.plot as nkp; nkp.attempts(session.events); nkp.timeline(session.events)``.

The implementation lives in :mod:`nbkit.notebook.plots`.
"""

from nbkit.notebook.plots import attempts, dashboard, dead_letters, retry_delays, timeline

__all__ = ["attempts", "dashboard", "dead_letters", "retry_delays", "timeline"]
