"""Plots of retries and dead letters, file vs pipe: ``import nbkit.plot as nkp; nkp.attempts(session.events)``.

The implementation lives in :mod:`nbkit.notebook.plots`.
"""

from nbkit.notebook.plots import attempts, dashboard, dead_letters, retry_delays, timeline

__all__ = ["attempts", "dashboard", "dead_letters", "retry_delays", "timeline"]
