"""The ``rs1:``/``rs2:`` header envelope that carries headers (and unsafe payloads) inside a payload.

Pure codec, no I/O. Spec: runtime-semantics.md §3. The file publisher encodes with
``force_text=False``, the stdio publisher with ``force_text=True``; decoding is the same for both.
"""

from __future__ import annotations

import binascii
import struct
from base64 import b64decode, b64encode
from binascii import b2a_base64
from collections.abc import Mapping

from nbkit.errors import PayloadTooLargeError
from nbkit.wire.core import pick
from nbkit.wire.limits import SEQUENCE_HEADER
from nbkit.wire.rust_text import RUST_WHITESPACE
from nbkit.wire.ssformat import MAX_U64

__all__ = [
    "RETRY_COUNT_HEADER",
    "copy_retry_count",
    "decode",
    "decode_delivery",
    "encode",
    "retry_count",
    "retry_count_problem",
]

#: Header carrying how many times a message has been retried (set on retry copies).
RETRY_COUNT_HEADER = "x-ruststream-retry-count"


def retry_count(headers: Mapping[str, object]) -> int:
    """The ``x-ruststream-retry-count`` value, 0 when absent or not a u64 (spec §1.5; upstream does the same).

    Examples
    --------
    >>> retry_count({"x-ruststream-retry-count": "2"}), retry_count({}), retry_count({"x-ruststream-retry-count": "-1"})
    (2, 0, 0)
    """
    raw = headers.get(RETRY_COUNT_HEADER)
    if raw is None:
        return 0
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("ascii")
        except UnicodeDecodeError:
            return 0
    if not isinstance(raw, str):
        return 0
    text = raw.lstrip("+") if raw.startswith("+") and raw[1:2].isdigit() else raw
    if not text.isascii() or not text.isdigit():
        return 0
    value = int(text)
    return value if value <= MAX_U64 else 0


def retry_count_problem(raw: str | bytes) -> str | None:
    """Why a retry count header reads as 0 although it says something else (None: it reads as written).

    Upstream reads a missing or unparsable value as 0 (spec §1.5), so such a copy starts its count
    again and the cap does not see the attempts before it; nbkit does the same, and a pipe stage says so.

    Parameters
    ----------
    raw : str or bytes
        The ``x-ruststream-retry-count`` value.

    Returns
    -------
    str or None

    Examples
    --------
    >>> retry_count_problem("3") is None
    True
    >>> retry_count_problem("-1")
    'not a whole number of digits'
    >>> retry_count_problem("18446744073709551616")
    'above u64 (18446744073709551615)'
    """
    if retry_count({RETRY_COUNT_HEADER: raw}) != 0:
        return None
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    body = text[1:] if text.startswith("+") and text[1:2].isdigit() else text
    if body.isascii() and body.isdigit():
        return None if int(body) == 0 else f"above u64 ({MAX_U64})"
    return "not a whole number of digits"


def copy_retry_count(attempt: int) -> int:
    """The retry count a copy of delivery ``attempt`` carries: the attempt, saturating at u64::MAX.

    The header is a u64. A delivery already at the top (count 18446744073709551615, attempt 2**64) gives a
    copy at the top again, so the copy stays past any cap instead of wrapping to a count that reads back
    as attempt 1.

    Examples
    --------
    >>> copy_retry_count(3), copy_retry_count(2**64) == 2**64 - 1
    (3, True)
    """
    return attempt if attempt <= MAX_U64 else MAX_U64


_RS1 = b"rs1:"
_RS2 = b"rs2:"
_U32 = struct.Struct(">I")
_U32_MAX = 0xFFFFFFFF
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

HeaderValue = str | bytes
Headers = dict[str, HeaderValue]


def _ascii_lower(name: str) -> str:
    """Lowercase ASCII letters only, like Rust ``to_ascii_lowercase`` (``str.lower`` maps e.g. U+212A)."""
    return name.lower() if name.isascii() else name.translate(_ASCII_LOWER)


def _normalise(headers: Mapping[str, HeaderValue] | None) -> Mapping[str, HeaderValue]:
    """Lowercase names keeping first-insertion order; a later duplicate replaces the value in place.

    A dict whose names are all already lowercase (the usual case) is returned as it is, not copied."""
    if not headers:
        return {}
    if type(headers) is dict and _plain_names(tuple(headers)):
        return headers
    out: Headers = {}
    for name, value in headers.items():
        out[_ascii_lower(name)] = value
    return out


def _plain_names(names: tuple[str, ...]) -> bool:
    """True when every name is a str that ASCII-lowercasing leaves as it is (cached: services reuse a few)."""
    plain = _PLAIN_NAMES.get(names)
    if plain is None:
        plain = all(type(n) is str and _ascii_lower(n) == n for n in names)
        if len(_PLAIN_NAMES) < 256:
            _PLAIN_NAMES[names] = plain
    return plain


_PLAIN_NAMES: dict[tuple[str, ...], bool] = {}


def _text_fits(text: str) -> bool:
    """The §3.1 item 3 test on text: no ``\\n`` and nothing Rust's ``trim`` would remove."""
    return "\n" not in text and text.strip(RUST_WHITESPACE) == text


def _fits_on_a_line(payload: bytes) -> bool:
    """True when ``payload`` can travel verbatim on a stdio line: UTF-8, no ``\\n``, not padded."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _text_fits(text)


def _needs_envelope(headers: Mapping[str, HeaderValue] | None, payload: bytes, force_text: bool) -> bool:
    """True when §3.1 requires an envelope: headers, an ``rs1:``/``rs2:`` look-alike, or unsafe stdio text."""
    if headers:
        return True
    if payload.startswith((_RS1, _RS2)):
        return True
    return force_text and not _fits_on_a_line(payload)


def _survives_a_line(value: HeaderValue) -> bool:
    """``survives_a_line`` of §3.2: UTF-8, no ``\\n``/``\\r``, and already trimmed."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if value.isascii() and value.isprintable():  # no control characters: only a space can be trimmed
        return not value or (value[0] != " " and value[-1] != " ")
    return "\r" not in value and _text_fits(value)


def _as_bytes(value: HeaderValue) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


def _u32(n: int, what: str) -> bytes:
    if n > _U32_MAX:
        raise PayloadTooLargeError(f"{what} of {n} bytes does not fit the envelope's u32 length field")
    return _U32.pack(n)


def _build_block(headers: Mapping[str, HeaderValue]) -> tuple[bytes, bytes]:
    """Return (prefix, block): the ``rs1:`` text block when every header survives a line, else ``rs2:``."""
    lines = []
    for n, v in headers.items():
        if ":" in n or not (_survives_a_line(n) and _survives_a_line(v)):
            break
        lines.append(b"%s: %s\n" % (n.encode("utf-8"), _as_bytes(v)))
    else:
        return _RS1, b"".join(lines)
    parts: list[bytes] = []
    for name, value in headers.items():
        raw_name = name.encode("utf-8")
        raw_value = _as_bytes(value)
        parts += (
            _u32(len(raw_name), "header name"),
            raw_name,
            _u32(len(raw_value), "header value"),
            raw_value,
        )
    return _RS2, b"".join(parts)


def encode(headers: Mapping[str, HeaderValue] | None, payload: bytes, *, force_text: bool) -> bytes:
    """Return ``payload`` verbatim, or ``rs1:``/``rs2:`` + base64(u32be(len(block)) + block + payload).

    Header names are ASCII-lowercased (a later duplicate replaces the earlier value in place); str
    values are UTF-8 encoded, bytes values are kept as-is (only ``rs2:`` preserves non-UTF-8 bytes).
    """
    normalised = _normalise(headers)
    if not _needs_envelope(normalised, payload, force_text):
        return payload
    prefix, block = _build_block(normalised)
    return prefix + b2a_base64(_u32(len(block), "header block") + block + payload, newline=False)


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
encode_pure = encode
encode = pick("envelope_encode", encode_pure)  # noqa: F811 (the twin this process runs)


def _b64decode_strict(text: bytes) -> bytes | None:
    """Decode like Rust's base64 STANDARD engine: canonical padding and zero trailing bits, else None."""
    if len(text) % 4:
        return None
    try:
        raw = b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    pad = text[-2:].count(b"=")
    if pad and b64encode(raw[len(raw) - (3 - pad) :]) != text[-4:]:
        return None  # non-zero bits in the last symbol: Rust rejects (InvalidLastSymbol)
    return raw


def _rust_lines(text: str) -> list[str]:
    """Split like Rust ``str::lines``: on ``\\n``, dropping a ``\\r`` before it; no final empty line."""
    lines = text.split("\n")
    tail = lines.pop()  # text after the last "\n": a line only when non-empty, and its "\r" stays
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    if tail:
        lines.append(tail)
    return lines


def _decode_rs1_block(block: bytes) -> Headers:
    headers: Headers = {}
    for line in _rust_lines(block.decode("utf-8", errors="replace")):
        name, colon, value = line.partition(":")
        if colon:
            headers[_ascii_lower(name.strip(RUST_WHITESPACE))] = value.strip(RUST_WHITESPACE)
    return headers


def _decode_rs2_block(block: bytes) -> Headers | None:
    """Parse length-prefixed name/value pairs; None when a field is truncated or a name is not UTF-8."""
    headers: Headers = {}
    pos, end = 0, len(block)
    unpack = _U32.unpack_from
    while pos < end:
        fields: list[bytes] = []
        for _ in range(2):
            if pos + 4 > end:
                return None
            (n,) = unpack(block, pos)
            pos += 4
            if pos + n > end:
                return None
            fields.append(block[pos : pos + n])
            pos += n
        try:
            name = fields[0].decode("utf-8")
        except UnicodeDecodeError:
            return None
        try:
            value: HeaderValue = fields[1].decode("utf-8")
        except UnicodeDecodeError:
            value = fields[1]
        headers[_ascii_lower(name)] = value
    return headers


def decode(data: bytes) -> tuple[Headers, bytes]:
    """Split an envelope into (headers, payload); anything malformed is ``({}, data)`` unchanged (§3.3).

    ``rs1:`` values are str; ``rs2:`` values are str when valid UTF-8, else bytes.
    """
    if not data.startswith(b"rs"):
        return {}, data
    prefix = data[:4]
    if prefix == _RS1:
        rs1 = True
    elif prefix == _RS2:
        rs1 = False
    else:
        return {}, data
    framed = _b64decode_strict(data[4:])
    if framed is None or len(framed) < 4:
        return {}, data
    (block_len,) = _U32.unpack_from(framed, 0)
    if 4 + block_len > len(framed):
        return {}, data
    block = framed[4 : 4 + block_len]
    if rs1:
        headers = _decode_rs1_block(block)
    else:
        parsed = _decode_rs2_block(block)
        if parsed is None:
            return {}, data
        headers = parsed
    return headers, framed[4 + block_len :]


def decode_delivery(data: bytes, seq: int) -> tuple[Headers, bytes]:
    """:func:`decode`, then the ``stream-sequence`` header set to ``seq``: a delivery's headers and payload.

    What a file subscription makes of each message it delivers (the transport adds the sequence header).

    Parameters
    ----------
    data : bytes
        The message's payload as stored (maybe an ``rs1:``/``rs2:`` envelope).
    seq : int
        The message's sequence number.

    Returns
    -------
    tuple of (dict, bytes)
        The headers (with ``stream-sequence``) and the payload.

    Examples
    --------
    >>> decode_delivery(b'{"id": 1}', 17)
    ({'stream-sequence': '17'}, b'{"id": 1}')
    """
    headers, payload = decode(data)
    headers[SEQUENCE_HEADER] = str(seq)
    return headers, payload


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
decode_delivery_pure = decode_delivery
decode_delivery = pick("decode_delivery", decode_delivery_pure)  # noqa: F811 (the twin this process runs)
