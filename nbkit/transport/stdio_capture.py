"""Reading a pipe capture: the stdio lines a stage wrote, with their ``rs1:``/``rs2:`` envelopes opened.

A capture (``nbkit run stage:app > out.txt``, the demo's ``pipe-stdout.txt``) is one message per line;
retry and dead-letter copies carry their headers (``x-ruststream-retry-count``) inside a base64
envelope, which makes the file unreadable as it is. :func:`read_capture` parses each line as the
upstream consumer does (missing fields filled the same way), decodes the envelope, and reports a
malformed line as a :class:`LineProblem` with its line number instead of stopping, so the rest is
still read. :func:`summarize_capture` counts messages, copies and dead letters per key (what
``nbkit info --from stdio`` prints).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nbkit.errors import FormatError, NbkitError, Utf8Error
from nbkit.transport.file_info import text_table
from nbkit.wire import envelope
from nbkit.wire.keys import is_dead_letter_key
from nbkit.wire.stdio_line import LineDecoder, parse_line
from nbkit.wire.timestamps import format_log_timestamp

__all__ = [
    "CaptureSummary",
    "CapturedMessage",
    "KeySummary",
    "LineProblem",
    "read_capture",
    "summarize_capture",
]


class CapturedMessage(NamedTuple):
    """One message of a capture: where it is (line number), its fields, its decoded headers and payload.

    ``timestamp_ms`` is None when the line carries none; ``headers`` are the envelope's (empty for a
    plain line); ``payload`` is the payload without the envelope.
    """

    line: int
    timestamp_ms: int | None
    stream_key: str
    seq: int
    shard_id: int
    headers: dict[str, str | bytes]
    payload: bytes

    @property
    def retry_count(self) -> int:
        """The ``x-ruststream-retry-count`` header as a number (0 for a first delivery or no header)."""
        value = self.headers.get(envelope.RETRY_COUNT_HEADER)
        try:
            return int(value) if value is not None else 0
        except ValueError:
            return 0


class LineProblem(NamedTuple):
    """A line that could not be read: its number and the error (which names file and line)."""

    line: int
    error: NbkitError


def read_capture(lines: Iterable[bytes | str], *, source: str = "stdin") -> Iterator[CapturedMessage | LineProblem]:
    """Read stdio lines, yielding a :class:`CapturedMessage` per message and a :class:`LineProblem` per
    malformed line (not UTF-8, or a ``[...]`` header that breaks the grammar); blank lines are skipped.

    Parameters
    ----------
    lines : iterable of bytes or str
        The capture's lines (an open binary file works), with or without their line endings.
    source : str
        The name errors give the capture (a path, or ``stdin``).

    Returns
    -------
    iterator of CapturedMessage or LineProblem
        In line order.

    Examples
    --------
    >>> [m.headers for m in read_capture(["[2024-01-01T00:00:00 | jobs | 0] hi"])]
    [{}]
    >>> problem, = read_capture(["[nope | jobs] x"], source="out.txt")
    >>> problem.line
    1
    """
    decoder = LineDecoder()
    for lineno, raw in enumerate(lines, 1):
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield LineProblem(
                    lineno,
                    Utf8Error(
                        f"the line is not UTF-8 ({exc.reason} at byte {exc.start}); a stdio line is UTF-8 text",
                        path=source,
                        line=lineno,
                    ),
                )
                continue
        else:
            text = raw
        text = text.rstrip("\r\n")
        if not text:
            continue
        try:
            parsed = parse_line(text, lineno=lineno)
        except FormatError as exc:
            yield LineProblem(lineno, exc if exc.path else exc.located(path=source))
            continue
        resolved = decoder.resolve(parsed, now_ms=0)
        headers, payload = envelope.decode(resolved.payload.encode("utf-8"))
        yield CapturedMessage(
            lineno, parsed.timestamp_ms, resolved.stream_key, resolved.seq, resolved.shard_id, headers, payload
        )


@dataclass(slots=True)
class KeySummary:
    """The messages of one stream key in a capture: how many, how many are copies, the highest retry count,
    and the first and last line numbers and timestamps."""

    stream_key: str
    dead_letter: bool
    count: int = 0
    copies: int = 0
    max_retry_count: int = 0
    first_line: int = 0
    last_line: int = 0
    first_timestamp_ms: int | None = None
    last_timestamp_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return dataclasses.asdict(self)


@dataclass(slots=True)
class CaptureSummary:
    """What ``nbkit info --from stdio`` shows: lines, messages, keys (first appearance order), problems."""

    source: str
    lines: int = 0
    messages: int = 0
    copies: int = 0
    dead_letters: int = 0
    keys: dict[str, KeySummary] = field(default_factory=dict)
    problems: list[LineProblem] = field(default_factory=list)

    def to_text(self) -> str:
        """What ``nbkit info --from stdio`` prints: the counts, a table per key, the first 20 problems.

        Returns
        -------
        str
            Lines ending with a newline.
        """
        n = len(self.keys)
        first = f" (first: line {self.problems[0].line})" if self.problems else ""
        rows = [
            ("capture", self.source),
            ("lines", str(self.lines)),
            ("messages", f"{self.messages} under {n} key{'s' if n != 1 else ''}"),
            ("retry copies", f"{self.copies} (messages with an {envelope.RETRY_COUNT_HEADER} header)"),
            ("dead letters", str(self.dead_letters)),
            ("malformed lines", f"{len(self.problems)}{first}"),
        ]
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        if self.keys:
            table = [
                ("key", "messages", "copies", "max retry count", "dead letter", "first timestamp", "last timestamp")
            ]
            for ks in self.keys.values():
                table.append(
                    (
                        ks.stream_key,
                        str(ks.count),
                        str(ks.copies),
                        str(ks.max_retry_count),
                        "yes" if ks.dead_letter else "",
                        "-" if ks.first_timestamp_ms is None else format_log_timestamp(ks.first_timestamp_ms),
                        "-" if ks.last_timestamp_ms is None else format_log_timestamp(ks.last_timestamp_ms),
                    )
                )
            lines += ["", *text_table(table)]
        if self.problems:
            lines += ["", *(str(problem.error) for problem in self.problems[:20])]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (problems as line number and message)."""
        return {
            "source": self.source,
            "lines": self.lines,
            "messages": self.messages,
            "copies": self.copies,
            "dead_letters": self.dead_letters,
            "keys": [k.to_dict() for k in self.keys.values()],
            "malformed_lines": [{"line": p.line, "error": str(p.error)} for p in self.problems],
        }


def summarize_capture(
    items: Iterable[CapturedMessage | LineProblem],
    *,
    source: str = "stdin",
    dead_letter_keys: Iterable[str] | None = None,
) -> CaptureSummary:
    """Count a capture's messages per key: copies (a retry count header), dead letters, malformed lines.

    Parameters
    ----------
    items : iterable of CapturedMessage or LineProblem
        What :func:`read_capture` yields.
    source : str
        The capture's name, kept in the summary.
    dead_letter_keys : iterable of str, optional
        The dead-letter keys; by default keys named like one
        (:func:`nbkit.wire.keys.is_dead_letter_key`).

    Returns
    -------
    CaptureSummary
        Totals, one :class:`KeySummary` per key, and the malformed lines.

    Examples
    --------
    >>> lines = ["[2024-01-01T00:00:00 | jobs | 0] a", "[2024-01-01T00:00:01 | jobs.dead | 0] b"]
    >>> s = summarize_capture(read_capture(lines))
    >>> s.messages, s.dead_letters
    (2, 1)
    """
    dead = set(dead_letter_keys) if dead_letter_keys is not None else None
    summary = CaptureSummary(source)
    for item in items:
        summary.lines = max(summary.lines, item.line)
        if isinstance(item, LineProblem):
            summary.problems.append(item)
            continue
        key = summary.keys.get(item.stream_key)
        if key is None:
            is_dead = item.stream_key in dead if dead is not None else is_dead_letter_key(item.stream_key)
            key = summary.keys[item.stream_key] = KeySummary(
                item.stream_key, is_dead, first_line=item.line, first_timestamp_ms=item.timestamp_ms
            )
        key.count += 1
        key.last_line = item.line
        if item.timestamp_ms is not None:
            key.last_timestamp_ms = item.timestamp_ms
            if key.first_timestamp_ms is None:
                key.first_timestamp_ms = item.timestamp_ms
        retries = item.retry_count
        if retries:
            key.copies += 1
            summary.copies += 1
            key.max_retry_count = max(key.max_retry_count, retries)
        summary.messages += 1
        if key.dead_letter:
            summary.dead_letters += 1
    return summary
