"""Test a service's handlers in memory: ``with TestApp(app) as test: test.publish(...)``.

:class:`TestApp` runs an app's own brokers in process on a virtual clock, with the runtime ``nbkit run``
drives; :class:`HandlerCalls` records what each handler was called with; :class:`PublishedMessage` is a
message the app wrote. The pytest fixtures ``nbkit_app`` and ``virtual_clock`` come with the package
(:mod:`nbkit.testing_plugin`). The guide's page "Test your handlers" shows them.
"""

from __future__ import annotations

from nbkit.testing.app import MAX_DELIVERIES, TestApp
from nbkit.testing.calls import ANY, Call, HandlerCalls
from nbkit.testing.published import PublishedMessage

__all__ = [
    "ANY",
    "MAX_DELIVERIES",
    "Call",
    "HandlerCalls",
    "PublishedMessage",
    "TestApp",
]
