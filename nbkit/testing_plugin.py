"""nbkit's pytest plugin: the fixtures ``nbkit_app`` and ``virtual_clock`` (registered through the entry
point ``pytest11``, so they are there in every test run once nbkit is installed).

It loads in every pytest run, so it imports nothing of the runtime until a test asks for a fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from nbkit.runtime.app import App
    from nbkit.runtime.broker import Broker
    from nbkit.runtime.clock import VirtualClock
    from nbkit.testing.app import TestApp

__all__ = [
    "nbkit_app",
    "virtual_clock",
]


@pytest.fixture
def nbkit_app(virtual_clock: VirtualClock) -> Iterator[Callable[..., TestApp]]:
    """A factory: ``nbkit_app(app)`` starts a :class:`~nbkit.testing.TestApp` on ``app`` and returns it.

    The app runs on the test's ``virtual_clock`` unless ``clock=`` says otherwise; the other options are
    TestApp's (``max_deliveries=``). Every test app it made is closed when the test ends (the brokers get
    their own streams, files and handlers back), whatever the test did.
    """
    from nbkit.testing.app import TestApp

    made: list[TestApp] = []

    def make(app: App | Broker[Any], **options: Any) -> TestApp:
        options.setdefault("clock", virtual_clock)
        test = TestApp(app, **options)
        made.append(test)
        return test.start()

    try:
        yield make
    finally:
        for test in reversed(made):
            test.close()


@pytest.fixture
def virtual_clock() -> VirtualClock:
    """A :class:`~nbkit.VirtualClock` at 2024-01-01T00:00:00Z: time that moves only when told to."""
    from nbkit.runtime.clock import VirtualClock

    return VirtualClock()
