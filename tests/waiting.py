"""Waiting in tests: on a condition, with a deadline generous enough for a loaded machine.

A test that needs something to have happened (a file written, a line printed, a process ready) waits
for exactly that with :func:`wait_until`, never for a fixed time: a sleep is too short on a busy
machine and too long on an idle one. The deadline only bounds a failure; a passing test does not wait
for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["DEADLINE", "await_until", "wait_until"]

#: Seconds a test waits for something before it fails: minutes of margin on a machine whose load average
#: is several times its cores (a passing test waits only as long as the thing takes).
DEADLINE = 60.0

T = TypeVar("T")


def _describe(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def wait_until(
    condition: Callable[[], T],
    timeout: float = DEADLINE,
    *,
    what: str | Callable[[], str] = "the condition",
    interval: float = 0.01,
) -> T:
    """Call ``condition`` until it returns something true and return that; fail after ``timeout`` s.

    ``condition`` may itself raise (e.g. ``AssertionError`` when the process it waits on has died), which
    ends the wait at once. ``what`` names what was awaited in the failure (a callable is called then, to
    show e.g. the output so far); ``interval`` is the pause between two checks.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {_describe(what)}")
        time.sleep(interval)


async def await_until(
    condition: Callable[[], T] | Callable[[], Awaitable[T]],
    timeout: float = DEADLINE,
    *,
    what: str | Callable[[], str] = "the condition",
    interval: float = 0.01,
) -> T:
    """:func:`wait_until` inside an event loop: between checks the loop runs (``asyncio.sleep``)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return result  # type: ignore[return-value]  # awaited above when it was an awaitable
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout:g} s for {_describe(what)}")
        await asyncio.sleep(interval)
