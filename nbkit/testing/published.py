"""What an app wrote on its transports during a test, read back per stream key.

A pipe's stdout lines and a stream file's messages are read as the next reader would read them (the
envelope decoded, ``stream-sequence`` set by the transport), so a test sees what a real stage or tail
would see. :func:`published_report` is what a failed ``expect_published`` says it saw.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nbkit.transport.file_reader import StreamReader
from nbkit.wire.envelope import RETRY_COUNT_HEADER, decode_delivery
from nbkit.wire.keys import INTERNAL_KEYS
from nbkit.wire.limits import SEQUENCE_HEADER
from nbkit.wire.stdio_line import line_delivery

__all__ = [
    "PublishedMessage",
    "file_messages",
    "pipe_messages",
    "published_report",
]

#: How many messages of one key a report lists.
REPORT_LIMIT = 20


@dataclass(frozen=True, slots=True)
class PublishedMessage:
    """One message an app wrote: its stream key, sequence, payload and headers (the envelope decoded).

    ``headers`` are what the next reader gets, ``stream-sequence`` included; ``retry_count`` reads the
    ``x-ruststream-retry-count`` header (0 when absent).
    """

    key: str
    seq: int
    payload: bytes
    headers: Mapping[str, Any]
    transport: str

    @property
    def text(self) -> str:
        """The payload as UTF-8 text."""
        return self.payload.decode("utf-8")

    def json(self) -> Any:
        """The payload parsed as JSON."""
        return json.loads(self.payload)

    @property
    def retry_count(self) -> int:
        """The ``x-ruststream-retry-count`` header as a number (0 when absent)."""
        try:
            return int(self.headers.get(RETRY_COUNT_HEADER, 0))
        except (TypeError, ValueError):
            return 0

    def describe(self) -> str:
        """One line: sequence, payload and the headers (``stream-sequence`` aside)."""
        shown = {k: v for k, v in self.headers.items() if k != SEQUENCE_HEADER}
        payload = repr(self.payload)
        if len(payload) > 80:
            payload = payload[:77] + "..."
        return f"#{self.seq} {payload}" + (f" headers {shown}" if shown else "")


def pipe_messages(lines: Iterable[str]) -> list[PublishedMessage]:
    """The messages of a pipe stage's stdout lines, as the next stage reads them.

    Examples
    --------
    >>> [m.describe() for m in pipe_messages(["[2024-01-01T00:00:00 | jobs.done | 0] ok"])]
    ["#0 b'ok'"]
    """
    counters: dict[tuple[str, int], int] = {}
    found = []
    for n, line in enumerate(lines, 1):
        got = line_delivery(line, n, counters)
        found.append(PublishedMessage(got.stream_key, got.seq, got.payload, got.headers, "pipe"))
    return found


def file_messages(path: str, skip: Iterable[tuple[str, int]] = ()) -> list[PublishedMessage]:
    """The messages of a stream file, in file order, as a subscription reads them.

    The internal messages (the priming message, the end-of-stream mark) and the ``(key, seq)`` in
    ``skip`` (what the test itself published) are left out.
    """
    left_out = set(skip)
    found = []
    with StreamReader(path) as reader:
        for msg in reader:
            if msg.stream_key in INTERNAL_KEYS or (msg.stream_key, msg.seq) in left_out:
                continue
            headers, payload = decode_delivery(msg.payload, msg.seq)
            found.append(PublishedMessage(msg.stream_key, msg.seq, payload, headers, "file"))
    return found


def published_report(by_key: Mapping[str, list[PublishedMessage]], limit: int = REPORT_LIMIT) -> str:
    """What was published, key by key: how many messages, then each one (at most ``limit`` per key).

    Examples
    --------
    >>> print(published_report({}))
    nothing was published
    """
    if not by_key:
        return "nothing was published"
    counts = ", ".join(f"{key}: {len(msgs)}" for key, msgs in by_key.items())
    lines = [f"published per key: {counts}"]
    for key, msgs in by_key.items():
        lines.append(f"under {key!r}:")
        lines.extend(f"  {n}. {m.describe()}" for n, m in enumerate(msgs[:limit], 1))
        if len(msgs) > limit:
            lines.append(f"  ... and {len(msgs) - limit} more")
    return "\n".join(lines)
