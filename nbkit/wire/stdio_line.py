"""The sea-streamer-stdio line format: ``[timestamp | stream_key | seq | shard] payload``.

Pure codec, no I/O. Spec: stream-file-format.md §14 (and §13.1 for the log timestamp). Upstream
panics on a malformed ``[...]`` header; nbkit raises :class:`~nbkit.errors.LineParseError` instead.
"""

from __future__ import annotations

import re
from functools import partial
from typing import NamedTuple

from nbkit.errors import LineParseError
from nbkit.wire import envelope
from nbkit.wire.core import pick
from nbkit.wire.keys import BROADCAST_KEY, MAX_KEY_LEN, is_valid_key, validate_key
from nbkit.wire.rust_text import RUST_WHITESPACE
from nbkit.wire.ssformat import MAX_U64
from nbkit.wire.timestamps import parse_timestamp, second_text, timestamp_problem

__all__ = [
    "LineDecoder",
    "LineDelivery",
    "LineFormatter",
    "ResolvedLine",
    "StdioLine",
    "copy_line",
    "format_line",
    "line_delivery",
    "parse_fields",
    "parse_fields_pure",
    "parse_general",
    "parse_line",
]

_KEY_CHARS_RE = re.compile(r"[A-Za-z0-9._-]+")
_U64_RE = re.compile(r"\+?[0-9]+")
_TS_LIKE_RE = re.compile(r"[+-]?[0-9]{4}-[0-9]{2}-[0-9]{2}T")


# --------------------------------------------------------------------------------------- parsing


class StdioLine(NamedTuple):
    """One stdio line as written: header fields are None when the line does not carry them."""

    timestamp_ms: int | None
    stream_key: str | None
    seq: int | None
    shard_id: int | None
    payload: str


def _quote(text: str, limit: int = 80) -> str:
    return "'" + (text if len(text) <= limit else text[:limit] + "...") + "'"


def _parse_u64(part: str) -> int | None:
    """Rust ``u64::from_str``: ASCII digits with an optional leading '+', at most 2**64-1."""
    if _U64_RE.fullmatch(part) is None:
        return None
    value = int(part)
    return value if value <= MAX_U64 else None


def _part_error(
    part: str,
    header: str,
    *,
    any_filled: bool,
    key: str | None,
    seq: int | None,
    shard: int | None,
    lineno: int | None,
) -> LineParseError:
    """Build the error for a header part that no rule of §14.2 accepts, naming what is wrong."""
    h = _quote(header)
    q = _quote(part)
    numeric = _U64_RE.fullmatch(part) is not None
    if part == "":
        msg = f"empty header field in header {h}"
    elif key is None:
        if _TS_LIKE_RE.match(part):
            if any_filled:
                msg = f"second timestamp {q} in header {h}: only the first field may be a timestamp"
            else:
                msg = f"invalid timestamp {q} in header {h}: {timestamp_problem(part)}"
        elif _KEY_CHARS_RE.fullmatch(part):
            msg = f"stream key of {len(part)} characters in header {h} exceeds {MAX_KEY_LEN}"
        elif numeric:
            msg = (
                f"{q} in header {h} is not a stream key ('+' is not a key character), and a "
                "sequence number is only allowed after a stream key"
            )
        elif any_filled:
            msg = f"invalid stream key {q} in header {h}: expected 1-{MAX_KEY_LEN} of [A-Za-z0-9._-]"
        else:
            msg = (
                f"invalid header field {q} in header {h}: expected a timestamp "
                f"(YYYY-MM-DDTHH:MM:SS[.f]) or a stream key (1-{MAX_KEY_LEN} of [A-Za-z0-9._-])"
            )
    elif shard is not None:
        msg = (
            f"unexpected extra field {q} in header {h}: a header holds at most "
            "timestamp | stream key | sequence | shard id"
        )
    else:
        what = "sequence" if seq is None else "shard id"
        if numeric:
            msg = f"{what} {part} exceeds u64 (max {MAX_U64}) in header {h}"
        elif is_valid_key(part) and part[0] not in "0123456789+-":
            msg = f"second stream key {q} in header {h}"
        else:
            msg = f"invalid {what} {q} in header {h}: expected ASCII digits with an optional leading '+'"
    return LineParseError(msg, line=lineno)


def parse_line(line: str, *, lineno: int | None = None) -> StdioLine:
    """Parse one stdio line (its trailing ``\\n`` already removed) per §14.2.

    A line that does not start with ``[``, has no ``]``, or has nothing between them is a raw payload.
    A ``[...]`` header that breaks the grammar raises :class:`LineParseError` (``line=lineno``).
    """
    return _new_stdio_line(parse_fields(line, lineno))


#: The header every producer writes, ``[timestamp | key | seq]`` or ``[timestamp | key | seq | shard]``,
#: which :func:`parse_fields` reads with one match; anything else takes the general path.
_CANONICAL = re.compile(
    r"\[([+-]?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?)"  # as _TS_RE
    r" \| ([A-Za-z0-9._-]{1,249}) \| (\+?[0-9]+)(?: \| (\+?[0-9]+))?\]"  # as is_valid_key, _U64_RE
)


def parse_fields(line: str, lineno: int | None) -> tuple[int | None, str | None, int | None, int | None, str]:
    """(timestamp_ms, stream_key, seq, shard_id, payload) of a line, as :func:`parse_line` reads it."""
    m = _CANONICAL.match(line)
    if m is not None:
        ts_text, key, seq_text, shard_text = m.groups()
        ts = parse_timestamp(ts_text)
        seq = int(seq_text)
        shard = None if shard_text is None else int(shard_text)
        if ts is not None and seq <= MAX_U64 and (shard is None or shard <= MAX_U64):
            rest = line[m.end() :]
            return ts, key, seq, shard, rest.lstrip(RUST_WHITESPACE) or rest
    return parse_general(line, lineno)


def parse_general(line: str, lineno: int | None) -> tuple[int | None, str | None, int | None, int | None, str]:
    if not line.startswith("["):
        return None, None, None, None, line
    end = line.find("]", 1)
    if end <= 1:  # no "]" at all, or "[]"
        return None, None, None, None, line
    inner = line[1:end]
    ts: int | None = None
    key: str | None = None
    seq: int | None = None
    shard: int | None = None
    for raw in inner.split("|"):
        part = raw.strip(RUST_WHITESPACE)
        if ts is None and key is None:  # nothing filled yet (seq/shard need a key)
            ms = parse_timestamp(part)
            if ms is not None:
                ts = ms
                continue
        if key is None:
            if is_valid_key(part):
                key = part
                continue
        elif shard is None:
            n = _parse_u64(part)
            if n is not None:
                if seq is None:
                    seq = n
                else:
                    shard = n
                continue
        raise _part_error(
            part,
            line[: end + 1],
            any_filled=ts is not None or key is not None,
            key=key,
            seq=seq,
            shard=shard,
            lineno=lineno,
        )
    rest = line[end + 1 :]
    # Rust trims the remainder and keeps the line from the start of the trimmed slice; an
    # all-whitespace remainder trims to an empty slice at its start, so it is kept whole.
    payload = rest.lstrip(RUST_WHITESPACE) or rest
    return ts, key, seq, shard, payload


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
parse_fields_pure = parse_fields
parse_fields = pick("parse_fields", parse_fields_pure)  # noqa: F811 (the twin this process runs)


class ResolvedLine(NamedTuple):
    """A stdio line with every field filled in the way the upstream consumer fills missing ones."""

    timestamp_ms: int
    stream_key: str
    seq: int
    shard_id: int
    payload: str
    broadcast: bool


class LineDecoder:
    """Consumer side: parse lines and resolve missing fields, counting seq per (key, shard).

    Missing key → ``broadcast`` (and ``broadcast=True``: it goes to every consumer); missing shard
    → 0; missing timestamp → ``now_ms``. Seq quirk copied from upstream: a line without seq takes
    the counter and bumps it (0, 1, 2, ...), but an explicit seq *sets* the counter to that value
    (not value+1), so the next implicit seq repeats it: explicit 5 → 5, then implicit → 5, 6, ...
    """

    __slots__ = ("counters",)

    def __init__(self) -> None:
        #: The next implicit sequence number per (stream key, shard), as :func:`line_delivery` takes it.
        self.counters: dict[tuple[str, int], int] = {}

    def decode(self, line: str, *, lineno: int | None = None, now_ms: int) -> ResolvedLine:
        """Parse ``line`` (no trailing ``\\n``) and resolve its missing fields."""
        return self._resolve(*parse_fields(line, lineno), now_ms)

    def resolve(self, parsed: StdioLine, *, now_ms: int) -> ResolvedLine:
        """Fill the missing fields of an already parsed line, advancing the seq counter."""
        return self._resolve(
            parsed.timestamp_ms, parsed.stream_key, parsed.seq, parsed.shard_id, parsed.payload, now_ms
        )

    def _resolve(
        self, ts: int | None, key: str | None, seq: int | None, shard: int | None, payload: str, now_ms: int
    ) -> ResolvedLine:
        stream_key = BROADCAST_KEY if key is None else key
        if shard is None:
            shard = 0
        slot = (stream_key, shard)
        if seq is None:
            seq = self.counters.get(slot, 0)
            self.counters[slot] = (seq + 1) & MAX_U64  # u64 arithmetic, wrapping like release Rust
        else:
            self.counters[slot] = seq
        return _new_resolved_line((now_ms if ts is None else ts, stream_key, seq, shard, payload, key is None))


class LineDelivery(NamedTuple):
    """Everything a pipe delivery is made of, read from one stdin line: what :func:`line_delivery` gives.

    ``timestamp_ms`` is None when the line carries no time (the reader fills in the time it read the line);
    ``broadcast`` is True for a line that names no key (its ``stream_key`` is then ``broadcast``).
    """

    timestamp_ms: int | None
    stream_key: str
    seq: int
    shard_id: int
    payload: bytes
    headers: dict[str, str]
    broadcast: bool


def line_delivery(line: str, lineno: int | None, counters: dict[tuple[str, int], int]) -> LineDelivery:
    """Everything a pipe delivery is made of, from one line: parse, resolve, decode the envelope.

    What :meth:`LineDecoder.decode` resolves (``counters`` is its per (key, shard) sequence counter, and
    advances the same way), then :func:`nbkit.wire.envelope.decode` of the payload's UTF-8 bytes, and the
    ``stream-sequence`` header set to the line's sequence. The timestamp is None when the line carries
    none (the caller fills in the time it read the line); ``broadcast`` is True for a line that names no
    key (its ``stream_key`` is then ``broadcast``).

    Parameters
    ----------
    line : str
        One line, without its ``\\n``.
    lineno : int or None
        Its line number, for the error a malformed header raises.
    counters : dict
        The sequence counters per (stream key, shard), updated in place.

    Returns
    -------
    LineDelivery
        (timestamp_ms or None, stream_key, seq, shard_id, payload bytes, headers dict, broadcast).

    Raises
    ------
    LineParseError
        If the ``[...]`` header is malformed (as :func:`parse_line`).

    Examples
    --------
    >>> got = line_delivery("[2024-01-01T00:00:00 | jobs | 7] hello", 1, {})
    >>> got.timestamp_ms, got.stream_key, got.seq, got.shard_id, got.payload, got.headers, got.broadcast
    (1704067200000, 'jobs', 7, 0, b'hello', {'stream-sequence': '7'}, False)
    >>> line_delivery("hello", 2, {}).stream_key, line_delivery("hello", 2, {}).broadcast
    ('broadcast', True)
    """
    ts, key, seq, shard, text = parse_fields(line, lineno)
    stream_key = BROADCAST_KEY if key is None else key
    if shard is None:
        shard = 0
    slot = (stream_key, shard)
    if seq is None:
        seq = counters.get(slot, 0)
        counters[slot] = (seq + 1) & MAX_U64  # u64 arithmetic, wrapping like release Rust
    else:
        counters[slot] = seq
    headers, payload = envelope.decode(text.encode("utf-8"))
    headers[envelope.SEQUENCE_HEADER] = str(seq)
    return _new_line_delivery((ts, stream_key, seq, shard, payload, headers, key is None))


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
line_delivery_pure = line_delivery
line_delivery = pick("line_delivery", line_delivery_pure)  # noqa: F811 (the twin this process runs)


# a pipe stage makes one of each per line: built from a tuple at C speed
_new_stdio_line = partial(tuple.__new__, StdioLine)
_new_resolved_line = partial(tuple.__new__, ResolvedLine)
_new_line_delivery = partial(tuple.__new__, LineDelivery)


# ------------------------------------------------------------------------------------ formatting


def format_line(timestamp_ms: int, stream_key: str, seq: int, payload: str) -> str:
    """The producer's line ``[YYYY-MM-DDTHH:MM:SS | key | seq] payload\\n`` (UTC, fraction dropped).

    No checks on the hot path: ``payload`` must not contain ``\\n`` (envelope it first).
    """
    return f"[{second_text(timestamp_ms // 1000)} | {stream_key} | {seq}] {payload}\n"


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
format_line_pure = format_line
format_line = pick("format_line", format_line_pure)  # noqa: F811 (the twin this process runs)


def copy_line(timestamp_ms: int, stream_key: str, seq: int, headers: dict | None, payload: bytes) -> str:
    """The line that carries ``payload`` and its headers: :func:`format_line` of its envelope's text.

    ``envelope.encode(headers, payload, force_text=True)``, as text, on a line under ``stream_key``
    (what a pipe stage writes for a retry copy or a publish). No checks on the key here.

    Parameters
    ----------
    timestamp_ms : int
        The line's time, epoch milliseconds.
    stream_key : str
        Its key.
    seq : int
        Its sequence number.
    headers : dict or None
        The headers the envelope carries.
    payload : bytes
        The payload (not empty unless there are headers).

    Returns
    -------
    str
        The line, ending in ``\\n``.

    Raises
    ------
    PayloadTooLargeError
        If the envelope's header block does not fit its 32-bit length (as ``envelope.encode``).

    Examples
    --------
    >>> copy_line(1704067200000, "jobs.retry", 0, None, b"hello")
    '[2024-01-01T00:00:00 | jobs.retry | 0] hello\\n'
    >>> copy_line(1704067200000, "jobs.retry", 1, {"x-ruststream-retry-count": "1"}, b"hi")[:45]
    '[2024-01-01T00:00:00 | jobs.retry | 1] rs1:AA'
    """
    return format_line(
        timestamp_ms, stream_key, seq, envelope.encode(headers, payload, force_text=True).decode("utf-8")
    )


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
copy_line_pure = copy_line
copy_line = pick("copy_line", copy_line_pure)  # noqa: F811 (the twin this process runs)


class LineFormatter:
    """Producer side: numbers lines per stream key from 0 and skips empty payloads (§14.3)."""

    __slots__ = ("_seqs",)

    def __init__(self) -> None:
        self._seqs: dict[str, int] = {}

    def next_seq(self, stream_key: str) -> int:
        """The sequence number the next non-empty line of ``stream_key`` will carry."""
        return self._seqs.get(stream_key, 0)

    def copy(self, stream_key: str, headers: dict | None, payload: bytes, timestamp_ms: int) -> tuple[int, str]:
        """The next line of ``stream_key`` carrying ``payload`` and ``headers`` (:func:`copy_line`), and its seq.

        Parameters
        ----------
        stream_key : str
            The key (validated the first time it is used).
        headers : dict or None
            The envelope's headers.
        payload : bytes
            The payload; with no headers it must not be empty (an empty line carries nothing).
        timestamp_ms : int
            The line's time.

        Returns
        -------
        tuple of (int, str)
            The line's sequence number and the line.
        """
        seq = self._seqs.get(stream_key)
        if seq is None:
            validate_key(stream_key)
            seq = 0
        line = copy_line(timestamp_ms, stream_key, seq, headers, payload)
        self._seqs[stream_key] = seq + 1
        return seq, line

    def format(self, stream_key: str, payload: str, timestamp_ms: int) -> str | None:
        """Return the line for ``payload``, or None for an empty payload (which uses no seq)."""
        if not payload:
            return None
        seq = self._seqs.get(stream_key)
        if seq is None:
            validate_key(stream_key)
            seq = 0
        self._seqs[stream_key] = seq + 1
        return format_line(timestamp_ms, stream_key, seq, payload)
