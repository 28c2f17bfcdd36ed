"""What each handler was called with during a test, and assertions on it in the manner of ``unittest.mock``.

:class:`HandlerCalls` wraps one registration's handler (an ``async def`` stays one, so the runtime
awaits it as before) and keeps a :class:`Call` per delivery: the delivery, what the handler returned
or raised. The ``assert_*`` methods compare payload, headers and key, and a failure lists every call,
numbered, with what differs.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nbkit.runtime.delivery import Delivery
from nbkit.runtime.registration import Registration
from nbkit.wire.limits import SEQUENCE_HEADER

__all__ = [
    "ANY",
    "Call",
    "HandlerCalls",
    "describe_payload",
    "payload_matches",
]


class _Any:
    """Matches anything (``unittest.mock.ANY``'s role): ``assert_any_call(ANY, headers={...})``."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "ANY"


#: A payload, header value or key that matches anything.
ANY: Any = _Any()


def describe_payload(payload: bytes, limit: int = 80) -> str:
    """A payload as a report shows it: its repr, cut at ``limit`` characters."""
    text = repr(payload)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def payload_matches(expected: object, payload: bytes) -> bool:
    """Whether ``payload`` is ``expected``: bytes as they are, str as UTF-8 text, anything else as JSON.

    Examples
    --------
    >>> payload_matches({"id": 1}, b'{"id": 1}'), payload_matches("hi", b"hi"), payload_matches(b"x", b"y")
    (True, True, False)
    """
    if expected is ANY:
        return True
    if isinstance(expected, (bytes, bytearray, memoryview)):
        return bytes(expected) == payload
    if isinstance(expected, str):
        return expected.encode("utf-8") == payload
    try:
        return bool(json.loads(payload) == expected)
    except ValueError:
        return False


@dataclass(eq=False, slots=True)
class Call:
    """One call of a handler: the delivery it got, and what it returned (or raised).

    ``payload``, ``headers``, ``key`` and ``attempt`` are the delivery's (``headers`` with the
    transport's ``stream-sequence``); ``returned`` is the handler's result (a ``HandlerOutcome``, None
    for ack), ``error`` the exception it raised (the runtime then drops the delivery).
    """

    delivery: Delivery
    returned: Any = None
    error: BaseException | None = None

    @property
    def payload(self) -> bytes:
        """The payload the handler got."""
        return self.delivery.payload

    @property
    def headers(self) -> dict[str, Any]:
        """The headers the handler got (``stream-sequence`` included)."""
        return self.delivery.headers

    @property
    def key(self) -> str:
        """The stream key it was delivered from."""
        return self.delivery.stream_key

    @property
    def attempt(self) -> int:
        """Which attempt this was (1 for the first delivery, retry count + 1 after)."""
        return self.delivery.attempt

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return json.loads(self.payload)

    def describe(self) -> str:
        """One line: key, attempt, payload, headers and the result."""
        shown = {k: v for k, v in self.headers.items() if k != SEQUENCE_HEADER}
        result = f"raised {self.error!r}" if self.error is not None else f"returned {self.returned!r}"
        payload = describe_payload(self.payload)
        return f"key {self.key!r}, attempt {self.attempt}, payload {payload}, headers {shown}, {result}"

    def differences(
        self, payload: object = ANY, headers: Mapping[str, Any] | None = None, key: object = ANY
    ) -> list[str]:
        """What of payload, headers and key differs from this call (empty: it matches).

        Headers are compared whole; the transport's ``stream-sequence`` only when ``headers`` names it.
        """
        found = []
        if not payload_matches(payload, self.payload):
            found.append(f"payload is {describe_payload(self.payload)}, not {payload!r}")
        if headers is not None:
            got = {k: v for k, v in self.headers.items() if k != SEQUENCE_HEADER or SEQUENCE_HEADER in headers}
            want = {k.lower(): v for k, v in headers.items()}
            if got != want:
                found.append(f"headers are {got}, not {want}")
        if key != self.key:
            found.append(f"key is {self.key!r}, not {key!r}")
        return found


def _expectation(payload: object, headers: Mapping[str, Any] | None, key: object) -> str:
    parts = [] if payload is ANY else [f"payload={payload!r}"]
    if headers is not None:
        parts.append(f"headers={dict(headers)!r}")
    if key is not ANY:
        parts.append(f"key={key!r}")
    return ", ".join(parts) or "anything"


class HandlerCalls:
    """The calls of one registration's handler during a test, with assertions in ``unittest.mock``'s manner.

    ``TestApp.handler(work)`` returns it. Each ``assert_*`` takes the expected ``payload`` (bytes; str,
    compared as UTF-8; or a JSON value such as a dict, compared with the payload parsed as JSON),
    ``headers`` (compared whole, the transport's ``stream-sequence`` aside unless named) and ``key``;
    what is not given is not compared. A failure raises ``AssertionError`` listing every call, numbered
    (``call 1: ...``), and what differs in each.

    Parameters
    ----------
    registration : Registration
        The registration whose handler is wrapped.
    """

    def __init__(self, registration: Registration) -> None:
        self.registration = registration
        #: The handler as registered (put back when the test app closes).
        self.handler = registration.handler
        #: Every call, oldest first.
        self.calls: list[Call] = []
        self.wrapper: Callable[..., Any] = self._wrap(registration.handler)

    def __repr__(self) -> str:
        return f"HandlerCalls({self.name!r}, call_count={self.call_count})"

    @property
    def name(self) -> str:
        """The registration's name (its key unless ``name=`` was given)."""
        return self.registration.name

    @property
    def call_count(self) -> int:
        """How many times the handler was called."""
        return len(self.calls)

    @property
    def last_call(self) -> Call | None:
        """The latest call, or None."""
        return self.calls[-1] if self.calls else None

    def _wrap(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """The handler, recording each call (an ``async def`` handler gets an ``async def`` wrapper)."""
        calls = self.calls
        if inspect.iscoroutinefunction(handler):

            @functools.wraps(handler)
            async def recording_async(delivery: Delivery) -> Any:
                call = Call(delivery)
                calls.append(call)
                try:
                    call.returned = await handler(delivery)
                except BaseException as exc:
                    call.error = exc
                    raise
                return call.returned

            return recording_async

        @functools.wraps(handler)
        def recording(delivery: Delivery) -> Any:
            call = Call(delivery)
            calls.append(call)
            try:
                call.returned = handler(delivery)
            except BaseException as exc:
                call.error = exc
                raise
            return call.returned

        return recording

    # -- assertions ------------------------------------------------------------------------------
    def _report(self, headline: str, payload: object = ANY, headers: Mapping[str, Any] | None = None,
                key: object = ANY) -> str:  # fmt: skip
        lines = [f"{self.name}: {headline}"]
        if not self.calls:
            lines.append("it was not called (deliveries happen in run_until_idle() and advance())")
        for n, call in enumerate(self.calls, 1):
            diff = call.differences(payload, headers, key)
            verdict = "; ".join(diff) if diff else "matches"
            lines.append(f"call {n}: {call.describe()}: {verdict}")
        return "\n".join(lines)

    def assert_called_with(
        self, payload: object = ANY, *, headers: Mapping[str, Any] | None = None, key: object = ANY
    ) -> None:
        """The latest call had this payload, these headers and this key."""
        last = self.last_call
        if last is None or last.differences(payload, headers, key):
            expected = _expectation(payload, headers, key)
            raise AssertionError(self._report(f"expected the last call with {expected}", payload, headers, key))

    def assert_called_once_with(
        self, payload: object = ANY, *, headers: Mapping[str, Any] | None = None, key: object = ANY
    ) -> None:
        """The handler was called exactly once, with this payload, these headers and this key."""
        if self.call_count != 1 or self.calls[0].differences(payload, headers, key):
            expected = _expectation(payload, headers, key)
            raise AssertionError(
                self._report(f"expected 1 call with {expected}, got {self.call_count} call(s)", payload, headers, key)
            )

    def assert_any_call(
        self, payload: object = ANY, *, headers: Mapping[str, Any] | None = None, key: object = ANY
    ) -> None:
        """Some call had this payload, these headers and this key."""
        if not any(not c.differences(payload, headers, key) for c in self.calls):
            expected = _expectation(payload, headers, key)
            raise AssertionError(
                self._report(
                    f"expected a call with {expected}, none of {self.call_count} matches", payload, headers, key
                )
            )

    def assert_called(self, times: int | None = None) -> None:
        """The handler was called (``times``: exactly that many times)."""
        if (times is None and not self.calls) or (times is not None and self.call_count != times):
            wanted = "at least 1 call" if times is None else f"{times} call(s)"
            raise AssertionError(self._report(f"expected {wanted}, got {self.call_count}"))

    def assert_not_called(self) -> None:
        """The handler was never called."""
        if self.calls:
            raise AssertionError(self._report(f"expected no call, got {self.call_count}"))
