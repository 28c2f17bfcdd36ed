"""The text renderings of a stream file (stream-file-format.md §13), sans I/O: ss-decode's ``log`` and
``ndjson`` formats and the ``stdio`` lines a pipe stage reads, and the ndjson reader ``nbkit write`` uses.

``nbkit cat`` prints with the ``format_*`` functions, ``nbkit write`` reads with the ``parse_*`` ones;
each ``parse_*`` raises ``ValueError`` saying what is wrong (the caller adds the line number). Every
timestamp is :func:`~nbkit.wire.timestamps.format_log_timestamp`'s ``YYYY-MM-DDTHH:MM:SS.f``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from nbkit.wire import envelope
from nbkit.wire.ssformat import MAX_U64, FileHeader, Marker
from nbkit.wire.timestamps import format_log_timestamp, parse_log_timestamp

__all__ = [
    "NdjsonMessage",
    "TextFormat",
    "dumps",
    "escape_controls",
    "format_beacon",
    "format_captured",
    "format_header",
    "format_message",
    "json_payload",
    "loads_strict",
    "log_payload",
    "message_header_json",
    "parse_comment",
    "parse_header_json",
    "parse_message_json",
    "payload_bytes",
]

#: The formats of ``nbkit cat``.
TextFormat = Literal["log", "ndjson", "stdio"]

_JSON_SEPARATORS = (",", ":")

#: ``log`` text: control characters (C0, DEL, C1) as escapes, so a payload cannot move the cursor,
#: clear the screen or split the line on a terminal (``\n`` -> ``\\n``, ESC -> ``\\x1b``)
_CONTROL_ESCAPES = {
    c: {9: "\\t", 10: "\\n", 13: "\\r"}.get(c, f"\\x{c:02x}") for c in (*range(0x20), *range(0x7F, 0xA0))
}


# -- JSON ------------------------------------------------------------------------------------------


def dumps(value: Any) -> str:
    """Compact JSON that keeps non-ASCII text as it is (as serde_json prints it).

    Parameters
    ----------
    value : Any
        A JSON-serialisable value.

    Returns
    -------
    str
        The JSON text, no spaces after ``,`` and ``:``.

    Examples
    --------
    >>> dumps({"city": "Zürich", "n": [1, 2]})
    '{"city":"Zürich","n":[1,2]}'
    """
    return json.dumps(value, separators=_JSON_SEPARATORS, ensure_ascii=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range")
    return value


def loads_strict(text: str) -> Any:
    """``json.loads`` without Python's extensions (NaN, Infinity, 1e999 -> inf, lone surrogates).

    Parameters
    ----------
    text : str
        JSON text.

    Returns
    -------
    Any
        The value.

    Raises
    ------
    ValueError
        When ``text`` is not strict JSON (``json.JSONDecodeError`` is one).

    Examples
    --------
    >>> loads_strict('{"a": 1.5}')
    {'a': 1.5}
    >>> loads_strict("NaN")
    Traceback (most recent call last):
    ...
    ValueError: NaN is not JSON
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if "\\u" in text:  # escapes can produce lone surrogates, which are not Unicode text
        try:
            dumps(value).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("lone surrogate in a \\u escape") from None
    return value


def json_payload(payload: bytes) -> Any:
    """The ndjson rendering of a payload (§13.2): its JSON value, else its text, else its byte values.

    Parameters
    ----------
    payload : bytes
        The message payload.

    Returns
    -------
    Any
        The JSON value when the payload is UTF-8 JSON, the string when it is other UTF-8 text, else the
        list of byte values.

    Examples
    --------
    >>> json_payload(b'{"id":1}'), json_payload(b"hello"), json_payload(b"\\xff\\x00")
    ({'id': 1}, 'hello', [255, 0])
    """
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return list(payload)
    try:
        return loads_strict(text)
    except ValueError:
        return text


def payload_bytes(value: Any) -> bytes:
    """The inverse of :func:`json_payload`: a string -> its UTF-8, a list of byte values -> those bytes,
    any other JSON value -> its compact JSON text.

    Parameters
    ----------
    value : Any
        The ``payload`` of an ndjson message line.

    Returns
    -------
    bytes
        The payload bytes.

    Raises
    ------
    ValueError
        When a string holds a lone surrogate (not Unicode text).

    Examples
    --------
    >>> payload_bytes({"id": 1}), payload_bytes("hello"), payload_bytes([255, 0])
    (b'{"id":1}', b'hello', b'\\xff\\x00')
    """
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("the payload string holds a lone surrogate (not Unicode text)") from None
    if isinstance(value, list) and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value):
        return bytes(value)
    return dumps(value).encode("utf-8")


# -- rendering ---------------------------------------------------------------------------------------


def escape_controls(value: str | bytes) -> str:
    """A header value or payload as one line of log text: control characters as escapes (``\\n``,
    ``\\x1b``), bytes that are not UTF-8 as ``\\xNN``.

    Parameters
    ----------
    value : str or bytes
        The text (bytes are decoded as UTF-8 first).

    Returns
    -------
    str
        Text that cannot move the cursor or split the line on a terminal.

    Examples
    --------
    >>> print(escape_controls("a\\nb\\x1b[2J"))
    a\\nb\\x1b[2J
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="backslashreplace")
    return value.translate(_CONTROL_ESCAPES)


def log_payload(payload: bytes) -> str:
    """A payload as ``log`` text: UTF-8 with its control characters escaped, else ``<BINARY BLOB>``.

    Parameters
    ----------
    payload : bytes
        The payload.

    Returns
    -------
    str
        The text to print after the ``[...]`` header.

    Examples
    --------
    >>> log_payload(b"paid\\n"), log_payload(b"\\xff")
    ('paid\\\\n', '<BINARY BLOB>')
    """
    try:
        return payload.decode("utf-8").translate(_CONTROL_ESCAPES)
    except UnicodeDecodeError:
        return "<BINARY BLOB>"


def message_header_json(stream_key: str, shard_id: int, seq: int, timestamp_ms: int) -> dict[str, Any]:
    """The ``header`` object of an ndjson message line and of a beacon marker (§13).

    Parameters
    ----------
    stream_key : str
        The stream key.
    shard_id : int
        The shard id.
    seq : int
        The sequence number.
    timestamp_ms : int
        The timestamp, epoch milliseconds.

    Returns
    -------
    dict
        ``stream_key``, ``shard_id``, ``sequence`` and ``timestamp`` (log text).

    Examples
    --------
    >>> message_header_json("orders", 0, 7, 1704067200250)["timestamp"]
    '2024-01-01T00:00:00.25'
    """
    return {
        "stream_key": stream_key,
        "shard_id": shard_id,
        "sequence": seq,
        "timestamp": format_log_timestamp(timestamp_ms),
    }


def _header_json(header: FileHeader) -> dict[str, Any]:
    return {
        "file_name": header.file_name,
        "created_at": format_log_timestamp(header.created_at_ms),
        "beacon_interval": header.beacon_interval,
    }


def format_header(fmt: TextFormat, header: FileHeader) -> str:
    """The line a format prints for the file header: ``# {...}`` (log), ``/* {...} */`` (ndjson), none
    (stdio).

    Parameters
    ----------
    fmt : {"log", "ndjson", "stdio"}
        The format.
    header : FileHeader
        The file header.

    Returns
    -------
    str
        The line with its ``\\n``, or ``""``.

    Examples
    --------
    >>> from nbkit.wire.ssformat import FileHeader
    >>> format_header("ndjson", FileHeader("o.ss", 0, 1024))
    '/* {"file_name":"o.ss","created_at":"1970-01-01T00:00:00.0","beacon_interval":1024} */\\n'
    """
    return _wrapped(fmt, dumps(_header_json(header)))


def format_beacon(fmt: TextFormat, markers: Sequence[Marker]) -> str:
    """The line a format prints after a message that crossed a beacon: its markers as JSON (§13.1).

    Parameters
    ----------
    fmt : {"log", "ndjson", "stdio"}
        The format.
    markers : sequence of Marker
        The beacon's markers.

    Returns
    -------
    str
        The line with its ``\\n``, or ``""`` (stdio shows no beacons).

    Examples
    --------
    >>> from nbkit.wire.ssformat import Marker
    >>> line = format_beacon("log", [Marker("a", 0, 1, 0, 42)])
    >>> line[:46]
    '# [{"header":{"stream_key":"a","shard_id":0,"s'
    >>> line[-24:]
    '"running_checksum":42}]\\n'
    """
    body = [
        {
            "header": message_header_json(m.stream_key, m.shard_id, m.seq, m.timestamp_ms),
            "running_checksum": m.running_checksum,
        }
        for m in markers
    ]
    return _wrapped(fmt, dumps(body))


def _wrapped(fmt: TextFormat, text: str) -> str:
    if fmt == "log":
        return f"# {text}\n"
    if fmt == "ndjson":
        return f"/* {text} */\n"
    return ""


def format_message(
    fmt: TextFormat,
    stream_key: str,
    shard_id: int,
    seq: int,
    timestamp_ms: int,
    payload: bytes,
    *,
    header_only: bool = False,
) -> str:
    """One message as a line of ``fmt``.

    ``log``: ``[ts | key | seq | shard] payload`` with control characters escaped (``<BINARY BLOB>``
    when not UTF-8); ``ndjson``: ``{"header":{...},"payload":P}``; ``stdio``: the log header and the
    payload as a pipe stage's publisher writes it (binary, multi-line and padded payloads in the text
    envelope; an empty payload as the bare header, since ``"] "`` would read back as one space).

    Parameters
    ----------
    fmt : {"log", "ndjson", "stdio"}
        The format.
    stream_key, shard_id, seq, timestamp_ms, payload
        The message.
    header_only : bool
        Leave the payload out (``null`` in ndjson).

    Returns
    -------
    str
        The line, with its ``\\n``.

    Examples
    --------
    >>> format_message("log", "orders", 0, 1, 1704067200000, b"paid")
    '[2024-01-01T00:00:00.0 | orders | 1 | 0] paid\\n'
    >>> format_message("ndjson", "orders", 0, 1, 1704067200000, b'{"id":1}')
    '{"header":{"stream_key":"orders","shard_id":0,"sequence":1,"timestamp":"2024-01-01T00:00:00.0"},"payload":{"id":1}}\\n'
    """
    if fmt == "ndjson":
        head = message_header_json(stream_key, shard_id, seq, timestamp_ms)
        return dumps({"header": head, "payload": None if header_only else json_payload(payload)}) + "\n"
    head_text = f"[{format_log_timestamp(timestamp_ms)} | {stream_key} | {seq} | {shard_id}]"
    if header_only:
        return head_text + "\n"
    if fmt == "log":
        text = log_payload(payload)
    else:  # stdio: a copy's headers stay on its line
        headers, body = envelope.decode(payload)
        text = envelope.encode(headers, body, force_text=True).decode("utf-8")
        if not text:
            return head_text + "\n"
    return f"{head_text} {text}\n"


def format_captured(
    fmt: TextFormat,
    line: int,
    stream_key: str,
    shard_id: int,
    seq: int,
    timestamp_ms: int | None,
    headers: Mapping[str, str | bytes],
    payload: bytes,
    *,
    header_only: bool = False,
) -> str:
    """One message of a pipe capture (``nbkit cat --from stdio``) as a line of ``fmt``, its envelope
    opened: a line without a timestamp shows ``-`` (``null`` in ndjson).

    ``log``: ``[ts | key | seq | shard] {name=value ...} payload``, control characters escaped;
    ``ndjson``: ``{"header":{..., "line":N},"headers":{...},"payload":P}``; ``stdio``: the line again,
    with the headers and payload in the text envelope.

    Parameters
    ----------
    fmt : {"log", "ndjson", "stdio"}
        The format.
    line : int
        The message's line number in the capture.
    stream_key, shard_id, seq, timestamp_ms
        Its fields, as the pipe consumer resolved them (``timestamp_ms`` None when the line has none).
    headers : mapping of str to str or bytes
        The headers decoded from its envelope.
    payload : bytes
        The payload without the envelope.
    header_only : bool
        Leave the payload out.

    Returns
    -------
    str
        The line, with its ``\\n``.

    Examples
    --------
    >>> format_captured("log", 3, "jobs", 0, 2, None, {"x-ruststream-retry-count": "1"}, b"work")
    '[- | jobs | 2 | 0] {x-ruststream-retry-count=1} work\\n'
    """
    ts = "-" if timestamp_ms is None else format_log_timestamp(timestamp_ms)
    if fmt == "ndjson":
        head = {
            "stream_key": stream_key,
            "shard_id": shard_id,
            "sequence": seq,
            "timestamp": None if timestamp_ms is None else ts,
            "line": line,
        }
        shown = {k: escape_controls(v) if isinstance(v, bytes) else v for k, v in headers.items()}
        body = None if header_only else json_payload(payload)
        return dumps({"header": head, "headers": shown, "payload": body}) + "\n"
    prefix = f"[{ts} | {stream_key} | {seq} | {shard_id}]"
    if fmt == "stdio":
        text = envelope.encode(headers, payload, force_text=True).decode("utf-8")
        return f"{prefix} {text}\n" if text and not header_only else prefix + "\n"
    pairs = " ".join(f"{k}={escape_controls(v)}" for k, v in headers.items())
    parts = [prefix] + ([f"{{{pairs}}}"] if pairs else [])
    if not header_only:
        parts.append(log_payload(payload))
    return " ".join(parts) + "\n"


# -- reading ndjson (nbkit write) ----------------------------------------------------------------------


def parse_comment(text: str) -> str | None:
    """The inside of a ``/* ... */`` line (a header or beacon line of ndjson), or None for other lines.

    Parameters
    ----------
    text : str
        One line, trimmed.

    Returns
    -------
    str or None
        The text between ``/*`` and ``*/``, trimmed.

    Raises
    ------
    ValueError
        When the line starts with ``/*`` but does not end with ``*/``.

    Examples
    --------
    >>> parse_comment("/* [] */"), parse_comment("{}")
    ('[]', None)
    """
    if not text.startswith("/*"):
        return None
    if not text.endswith("*/"):
        raise ValueError("a comment line must end with */")
    return text[2:-2].strip()


def parse_header_json(body: str) -> FileHeader:
    """The file header of an ndjson header comment's inside (``created_at`` as text or epoch ms).

    Parameters
    ----------
    body : str
        ``{"file_name":..,"created_at":..,"beacon_interval":N}``.

    Returns
    -------
    FileHeader
        The header it describes.

    Raises
    ------
    ValueError
        When a field is missing or has the wrong type; the message shows the expected shape.

    Examples
    --------
    >>> parse_header_json('{"file_name":"o.ss","created_at":"2024-01-01T00:00:00.0","beacon_interval":1024}')
    FileHeader(file_name='o.ss', created_at_ms=1704067200000, beacon_interval=1024)
    """
    try:
        obj = json.loads(body)
        name, created, interval = obj["file_name"], obj["created_at"], obj["beacon_interval"]
        if not isinstance(name, str):
            raise ValueError("file_name must be a string")
        created_ms = created if isinstance(created, int) else parse_log_timestamp(created)
        if not isinstance(interval, int) or isinstance(interval, bool):
            raise ValueError("beacon_interval must be an integer")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(
            f"invalid header line ({exc}); expected "
            '/* {"file_name":..,"created_at":"YYYY-MM-DDTHH:MM:SS.f","beacon_interval":N} */'
        ) from None
    return FileHeader(name, created_ms, interval)


class NdjsonMessage(NamedTuple):
    """One message line of ndjson: the fields it gives (None where the writer assigns them)."""

    stream_key: str
    shard_id: int
    seq: int | None
    timestamp_ms: int | None
    payload: bytes


def _u64(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_U64:
        raise ValueError(f"{what} must be an unsigned 64-bit integer, not {dumps(value)}")
    return value


def parse_message_json(text: str) -> NdjsonMessage:
    """One ndjson message line as :func:`format_message` writes it; only ``header.stream_key`` is
    required (shard 0, and the writer's next sequence and current time, otherwise).

    Parameters
    ----------
    text : str
        The line, trimmed.

    Returns
    -------
    NdjsonMessage
        ``stream_key``, ``shard_id``, ``seq``, ``timestamp_ms`` (None when not given) and ``payload``.

    Raises
    ------
    ValueError
        When the line is not such a message; the message says which field is wrong.

    Examples
    --------
    >>> parse_message_json('{"header":{"stream_key":"orders","timestamp":"2024-01-01T00:00:00Z"},"payload":"paid"}')
    NdjsonMessage(stream_key='orders', shard_id=0, seq=None, timestamp_ms=1704067200000, payload=b'paid')
    """
    obj = loads_strict(text)
    if not isinstance(obj, dict) or not isinstance(obj.get("header"), dict) or "payload" not in obj:
        raise ValueError(
            'expected {"header":{"stream_key":..,"shard_id":..,"sequence":..,"timestamp":..},"payload":..}'
        )
    h = obj["header"]
    key = h.get("stream_key")
    if not isinstance(key, str):
        raise ValueError("header.stream_key must be a string")
    shard = 0 if h.get("shard_id") is None else _u64(h.get("shard_id"), "header.shard_id")
    seq = None if h.get("sequence") is None else _u64(h.get("sequence"), "header.sequence")
    ts = h.get("timestamp")
    if isinstance(ts, str):
        ts = parse_log_timestamp(ts)
    elif ts is not None and (isinstance(ts, bool) or not isinstance(ts, int)):
        raise ValueError("header.timestamp must be YYYY-MM-DDTHH:MM:SS[.fff] or epoch milliseconds")
    return NdjsonMessage(key, shard, seq, ts, payload_bytes(obj["payload"]))
