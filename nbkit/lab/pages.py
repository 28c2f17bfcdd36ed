"""Pages of messages for the viewer: a bounded window of rows, found from the index's checkpoints.

A page starts at a row number of one numbering (every key, or one stream key) and holds at most
:data:`MAX_ROWS` rows and about :data:`MAX_PAGE_BYTES` of payload text. Each row carries the decoded
envelope headers (``rs1:``/``rs2:``, runtime spec §3), the attempt (from ``x-ruststream-retry-count``),
and a bounded preview of the payload as text, as pretty JSON and as hex, with the full length said.
Rows are read by a salvage reader (``on_bad_frames="skip"``) started at the nearest checkpoint, so a
page never decodes more than :data:`~nbkit.lab.index.CHECKPOINT_EVERY` frames it does not return.

Every value here is data for the browser, which renders it as text (never as HTML).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from nbkit.lab.index import CHECKPOINT_EVERY, RowIndex, StreamIndex
from nbkit.transport.damage import DamagedRegion
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import Message
from nbkit.wire.envelope import RETRY_COUNT_HEADER, decode, retry_count
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.timestamps import iso_utc

__all__ = [
    "HEX_BYTES",
    "JSON_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_ROWS",
    "PREVIEW_BYTES",
    "PageRequestError",
    "describe_region",
    "message_row",
    "read_page",
    "row_of",
]

#: The most rows one page holds, whatever the request asks for.
MAX_ROWS = 500
#: A page stops adding rows once its previews hold this many bytes (it always holds at least one row).
MAX_PAGE_BYTES = 1 << 20
#: Payload bytes shown as text per row.
PREVIEW_BYTES = 4096
#: Payload bytes shown as hex per row.
HEX_BYTES = 512
#: Payloads up to this size are parsed as JSON for the pretty view (larger ones are not parsed).
JSON_BYTES = 64 << 10


class PageRequestError(ValueError):
    """A page request that cannot be answered (an unknown key, a row past the end, a sequence the stream
    does not hold); the handlers answer it with status 400 or 404 and this message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "backslashreplace")


def message_row(msg: Message, row: int) -> dict[str, Any]:
    """One message as the viewer's table row: fields, headers, attempt and bounded payload previews.

    Parameters
    ----------
    msg : Message
        The message as the reader yields it.
    row : int
        Its row number in the page's numbering.

    Returns
    -------
    dict
        JSON-ready: ``row``, ``offset``, ``key``, ``shard``, ``seq``, ``timestamp_ms``, ``time``, ``attempt``,
        ``headers`` (name -> text), ``eos``, and ``payload`` with ``length``, ``text``, ``utf8``,
        ``json`` (pretty text or None), ``hex`` and ``truncated``.

    Examples
    --------
    >>> from nbkit import Message
    >>> r = message_row(Message("orders", 0, 3, 1_700_000_000_000, b'{"id":1}', 128, 160), 2)
    >>> r["attempt"], r["payload"]["json"], r["time"]
    (1, '{\\n  "id": 1\\n}', '2023-11-14T22:13:20.000Z')
    """
    headers, body = decode(msg.payload)
    attempt = retry_count(headers) + 1 if RETRY_COUNT_HEADER in headers else 1
    head = body[:PREVIEW_BYTES]
    try:
        text = head.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError as exc:
        # a cut at the preview's end may split a character: that is still UTF-8
        utf8 = exc.start >= len(head) - 3 and len(body) > PREVIEW_BYTES
        text = head.decode("utf-8", "replace")
    pretty = None
    if len(body) <= JSON_BYTES and body.lstrip()[:1] in (b"{", b"["):
        try:
            pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False)[: 2 * PREVIEW_BYTES]
        except (ValueError, RecursionError):
            pretty = None
    return {
        "row": row,
        "offset": msg.offset,
        "key": msg.stream_key,
        "shard": msg.shard_id,
        "seq": msg.seq,
        "timestamp_ms": msg.timestamp_ms,
        "time": iso_utc(msg.timestamp_ms),
        "attempt": attempt,
        "headers": {name: _text(value)[:PREVIEW_BYTES] for name, value in headers.items()},
        "eos": msg.is_eos,
        "payload": {
            "length": len(body),
            "stored_length": len(msg.payload),
            "text": text,
            "utf8": utf8,
            "json": pretty,
            "hex": body[:HEX_BYTES].hex(" "),
            "truncated": len(body) > PREVIEW_BYTES,
        },
    }


def _walk(index: StreamIndex, key: str | None, offset: int) -> tuple[StreamReader, Iterator[Message]]:
    """A salvage reader of the page's numbering, at a checkpoint's frame, and its messages."""
    reader = StreamReader(
        index.path, on_bad_frames="skip", errors="stop", keys=None if key is None else (key,), stop_at_eos=True
    )
    reader.seek_offset(offset)
    return reader, iter(reader)


def _rows(index: StreamIndex, key: str | None) -> RowIndex:
    rows, _ = index.snapshot(key)
    if rows is None:
        raise PageRequestError(f"{index.display_path} has no messages of stream key {key!r}", status=404)
    return rows


def read_page(index: StreamIndex, start: int, count: int, *, key: str | None = None) -> dict[str, Any]:
    """Rows ``start`` .. ``start + count - 1`` of the numbering of ``key`` (None: every key), bounded.

    Parameters
    ----------
    index : StreamIndex
        The file's index (rows past what it holds so far are not returned).
    start : int
        The first row (0-based).
    count : int
        How many rows are asked for; at most :data:`MAX_ROWS` are returned, fewer when the payload bytes
        reach :data:`MAX_PAGE_BYTES`.
    key : str, optional
        Number only this stream key's messages.

    Returns
    -------
    dict
        ``start``, ``rows`` (see :func:`message_row`; a row after a damaged region carries it as
        ``damage_before``), ``total`` (rows indexed so far), ``limited`` (whether the bounds cut the page).
    """
    if start < 0 or count < 1:
        raise PageRequestError(f"a page needs start >= 0 and count >= 1, not start={start}, count={count}")
    rows = _rows(index, key)
    total = rows.count
    if start >= total:
        return {"start": start, "rows": [], "total": total, "limited": False}
    want = min(count, MAX_ROWS, total - start)
    offset, row = rows.checkpoint(start)
    reader, messages = _walk(index, key, offset)
    out: list[dict[str, Any]] = []
    size = 0
    limited = want < count
    seen_damage = 0
    with reader:
        for msg in messages:
            if row >= start:
                item = message_row(msg, row)
                if len(reader.damaged) > seen_damage:
                    item["damage_before"] = reader.damaged[-1].to_dict()
                out.append(item)
                size += len(item["payload"]["text"]) + len(item["payload"]["hex"]) + len(item["payload"]["json"] or "")
                if len(out) >= want:
                    break
                if size >= MAX_PAGE_BYTES:
                    limited = True
                    break
            seen_damage = len(reader.damaged)
            row += 1
    return {"start": start, "rows": out, "total": total, "limited": limited}


def _row_at_offset(index: StreamIndex, rows: RowIndex, key: str | None, offset: int) -> int:
    """The row of the first message (of the numbering) whose frame starts at or after ``offset``."""
    check, row = rows.checkpoint_before_offset(offset)
    reader, messages = _walk(index, key, check)
    with reader:
        for msg in messages:
            if msg.offset >= offset or row >= rows.count:
                return min(row, rows.count)
            row += 1
    return min(row, rows.count)


def row_of(
    index: StreamIndex,
    *,
    key: str | None = None,
    offset: int | None = None,
    seq: int | None = None,
    seq_key: str | None = None,
    time_ms: int | None = None,
) -> int:
    """The row (in the numbering of ``key``) of a byte offset, a sequence number or a time.

    ``offset``: the first message at or after it. ``seq`` (of stream ``seq_key``, default ``key``): the
    first message of that stream with a sequence number at least ``seq``. ``time_ms``: the first message
    of the numbering at or after that instant.

    Raises
    ------
    PageRequestError
        Nothing asked for, a sequence without a stream key, or no such message (404).
    """
    rows = _rows(index, key)
    if rows.count == 0:
        raise PageRequestError(f"{index.display_path} has no messages yet", status=404)
    if offset is not None:
        return _row_at_offset(index, rows, key, offset)
    if seq is not None:
        stream = seq_key if seq_key is not None else key
        if stream is None:
            raise PageRequestError("going to a sequence number needs the stream key it counts (key=...)")
        target = _rows(index, stream)
        block = target.block_reaching(target.max_seq, seq)
        if block is None:
            raise PageRequestError(f"stream {stream!r} has no sequence number {seq} or later", status=404)
        found = _first(index, stream, target.offsets[block], lambda m: m.seq >= seq)
        return _row_at_offset(index, rows, key, found)
    if time_ms is not None:
        block = rows.block_reaching(rows.max_ts, time_ms)
        if block is None:
            raise PageRequestError(f"no message at or after {iso_utc(max(0, time_ms))}", status=404)
        found = _first(index, key, rows.offsets[block], lambda m: m.timestamp_ms >= time_ms)
        return _row_at_offset(index, rows, key, found)
    raise PageRequestError("say where to go: offset, seq (with key) or time")


def _first(index: StreamIndex, key: str | None, offset: int, match: Any) -> int:
    """The offset of the first message from ``offset`` on that ``match(msg)`` accepts (within a block, so
    at most :data:`CHECKPOINT_EVERY` messages are read)."""
    reader, messages = _walk(index, key, offset)
    with reader:
        for n, msg in enumerate(messages):
            if match(msg) and msg.stream_key != INTERNAL_KEY:
                return msg.offset
            if n > 2 * CHECKPOINT_EVERY:
                break
    raise PageRequestError(f"{index.display_path}: the index and the file disagree near offset {offset}")


def describe_region(region: DamagedRegion, row_after: int) -> dict[str, Any]:
    """A damaged region as the viewer lists it: its bytes, problem and the row after it."""
    return {**region.to_dict(), "row_after": row_after, "description": region.describe()}
