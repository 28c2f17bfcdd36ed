"""Importing NDJSON messages into a stream file: what ``nbkit cat --format ndjson`` prints, written back.

The input is numbered lines, one JSON object per message (:func:`~nbkit.wire.ssdecode.parse_message_json`).
A message line with a ``headers`` object (``nbkit cat --decode-payload``) has its payload put back in the
``rs1:``/``rs2:`` envelope with those headers, so a retry copy stays a copy. ss-decode's ndjson also has
``/* ... */`` comment lines: a header comment first (the file header's JSON,
:func:`~nbkit.wire.ssdecode.parse_header_json`) sets a new file's header; other comments (beacons) are
skipped, since the writer rebuilds the beacons. :func:`write_ndjson` appends the messages through one
:class:`~nbkit.transport.file_writer.StreamWriter` (shared, ``strict_seq``), so another writer may append
meanwhile, and an error names the input line. ``nbkit write`` reads stdin with it.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nbkit.errors import FormatError, NbkitError
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.ssdecode import loads_strict, parse_comment, parse_header_json, parse_message_json
from nbkit.wire.ssformat import DEFAULT_BEACON_INTERVAL, FileHeader, is_eos

__all__ = ["write_ndjson"]


def write_ndjson(
    path: str,
    lines: Iterable[tuple[int, str]],
    *,
    beacon_interval: int | None = None,
    eos: bool = False,
    lock_timeout: float = 10.0,
    idle: Callable[[], bool] | None = None,
    note: Callable[[str], None] | None = None,
    source: str = "stdin",
) -> None:
    """Append the messages of NDJSON ``lines`` ((line number, text) pairs) to the stream file ``path``.

    A new (or empty) file takes the input's header line (file name, creation time, beacon interval) when
    there is one, else ``beacon_interval``; an existing file keeps its own. ``eos`` writes the
    end-of-stream mark at the end unless the input held one. ``idle()`` says the input has nothing ready
    right now: the writer then flushes its batch (which holds the file's lock) before waiting. ``note``
    is told what was ignored (one sentence each). When the import fails on a file it created, a file
    left without any message is removed.

    Raises
    ------
    FormatError
        A line that is not a header, comment or message (it names ``source`` and the line).
    """
    told = note if note is not None else (lambda message: None)
    numbered = iter(lines)
    first: tuple[int, str] | None = None
    header: FileHeader | None = None
    for lineno, raw in numbered:
        text = raw.strip()
        if text:
            first = (lineno, text)
            break
    if first is not None:
        body = _comment(first[1], first[0], source)
        if body is not None and body.startswith("{"):
            try:
                header = parse_header_json(body)
            except ValueError as exc:
                raise _line_error(first[0], str(exc), source) from None
            first = None
    options: dict[str, Any] = {"flush_every": 64, "lock_timeout": lock_timeout, "strict_seq": True}
    interval = beacon_interval
    if _is_new_file(path):
        if header is not None:
            if interval is not None and interval != header.beacon_interval:
                told(
                    f"note: --beacon-interval {interval} ignored: the input's header line sets {header.beacon_interval}"
                )
            interval = header.beacon_interval
            options.update(file_name=header.file_name, created_at_ms=header.created_at_ms)
    elif header is not None:
        told(f"note: {path} exists: appending to it; the input's header line is ignored")
    new_file = not os.path.exists(path)
    try:
        _write_messages(path, first, numbered, interval, options, eos, idle, told, source)
    except BaseException:
        if new_file:
            _remove_if_empty(path)
        raise


def _write_messages(
    path: str,
    first: tuple[int, str] | None,
    lines: Iterator[tuple[int, str]],
    interval: int | None,
    options: dict[str, Any],
    eos: bool,
    idle: Callable[[], bool] | None,
    told: Callable[[str], None],
    source: str,
) -> None:
    """The appending part of :func:`write_ndjson`: every message line through one writer."""
    with StreamWriter(path, beacon_interval=interval or DEFAULT_BEACON_INTERVAL, **options) as writer:
        if writer.appended and interval is not None and interval != writer.header.beacon_interval:
            told(f"note: {path} keeps its beacon interval {writer.header.beacon_interval}")
        eos_line = None
        if idle is not None:
            # a batch waiting for more input would hold the file's lock: flush whenever the input has nothing ready
            lines = _flushing_when_idle(lines, idle, writer.flush)
        for lineno, raw in itertools.chain([first] if first is not None else [], lines):
            text = raw.strip()
            if not text:
                continue
            body = _comment(text, lineno, source)
            if body is not None:
                if body.startswith("{"):
                    told(f"note: {source}, line {lineno}: a second header line is ignored")
                continue  # beacons are rebuilt by the writer
            try:
                key, shard, seq, ts, payload = parse_message_json(text)
                headers = _envelope_headers(text)
            except ValueError as exc:
                raise _line_error(lineno, f"invalid message line: {exc}", source) from None
            if headers:
                payload = envelope.encode(headers, payload, force_text=False)
            if eos_line is not None:
                raise _line_error(lineno, f"a message after the end-of-stream mark of line {eos_line}", source)
            try:
                writer.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=ts)
            except NbkitError as exc:
                detail = getattr(exc, "detail", None) or str(exc)
                raise _line_error(lineno, detail, source) from None
            if is_eos(key, payload):
                eos_line = lineno
        if eos and eos_line is None:
            writer.write_eos()


def _flushing_when_idle(
    lines: Iterator[tuple[int, str]], idle: Callable[[], bool], flush: Callable[[], None]
) -> Iterator[tuple[int, str]]:
    """``lines``, calling ``flush`` before each wait for input (``idle()``: nothing ready right now): a shared
    writer holds the lock while messages wait in its batch, and a slow producer (a person typing,
    ``tail -f``) must not keep a running service from appending meanwhile."""
    while True:
        if idle():
            flush()
        try:
            item = next(lines)
        except StopIteration:
            return
        yield item


def _envelope_headers(text: str) -> dict[str, str] | None:
    """The ``headers`` object of a message line (``nbkit cat --decode-payload`` prints one), or None."""
    if '"headers"' not in text:  # most lines: no second parse
        return None
    headers = loads_strict(text).get("headers")
    if headers is None:
        return None
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ValueError('"headers" must be an object of text values, as nbkit cat --decode-payload prints')
    return headers


def _line_error(lineno: int, detail: str, source: str) -> FormatError:
    return FormatError(detail, path=source, line=lineno)


def _comment(text: str, lineno: int, source: str) -> str | None:
    """:func:`~nbkit.wire.ssdecode.parse_comment` of input line ``lineno``; its error names the line."""
    try:
        return parse_comment(text)
    except ValueError as exc:
        raise _line_error(lineno, str(exc), source) from None


def _is_new_file(path: str) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False  # let the writer say what is wrong
    return stat.S_ISREG(st.st_mode) and st.st_size == 0


def _remove_if_empty(path: str) -> None:
    """After a failed import that created ``path``: remove it if it holds no message (only a header)."""
    try:
        with StreamReader(path) as reader:
            if next(iter(reader), None) is not None:
                return
    except (NbkitError, OSError):
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return  # not a stream file of ours to judge: leave it
    try:
        os.remove(path)
    except OSError:
        pass
