"""The sea-streamer-stdio line format: ``[timestamp | stream_key | seq | shard] payload``.

Pure codec, no I/O. Spec: stream-file-format.md §14 (and §13.1 for the log timestamp). Upstream
panics on a malformed ``[...]`` header; nbkit raises :class:`~nbkit.errors.LineParseError` instead.
"""

from __future__ import annotations

import re
from functools import partial
from typing import NamedTuple

from nbkit.errors import LineParseError, StreamKeyError, TimestampRangeError
from nbkit.wire.core import pick
from nbkit.wire.rust_text import RUST_WHITESPACE

__all__ = [
    "BROADCAST_KEY",
    "LineDecoder",
    "LineFormatter",
    "ResolvedLine",
    "StdioLine",
    "format_line",
    "format_log_timestamp",
    "parse_line",
]

#: Stream key given to a line whose header names no key; such a line goes to every consumer.
BROADCAST_KEY = "broadcast"

U64_MAX = 2**64 - 1
_MAX_KEY_LEN = 249
_KEY_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_KEY_CHARS_RE = re.compile(r"[A-Za-z0-9._-]+")
_U64_RE = re.compile(r"\+?[0-9]+")
_TS_BASE = r"([+-]?)([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
_TS_RE = re.compile(_TS_BASE + r"(?:\.([0-9]{1,9}))?")
_TS_BASE_RE = re.compile(_TS_BASE)
_TS_LIKE_RE = re.compile(r"[+-]?[0-9]{4}-[0-9]{2}-[0-9]{2}T")
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MS_PER_DAY = 86_400_000


# --------------------------------------------------------------------------- calendar arithmetic


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (works for negative years too)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """Inverse of :func:`_days_from_civil`: (year, month, day)."""
    days += 719_468
    era = days // 146_097
    doe = days - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


# Years -9999..9999 are what the parser's 4-digit (optionally signed) year can express.
_MIN_MS = _days_from_civil(-9999, 1, 1) * _MS_PER_DAY
_MAX_MS = _days_from_civil(10000, 1, 1) * _MS_PER_DAY - 1


def _field_problem(year: int, month: int, day: int, hour: int, minute: int, second: int) -> str | None:
    """Why these calendar fields are not a valid date and time, or None when they are."""
    if not 1 <= month <= 12:
        return f"month {month:02d} is not 01-12"
    last = 29 if month == 2 and _is_leap(year) else _DAYS_IN_MONTH[month - 1]
    if not 1 <= day <= last:
        return f"day {day:02d} does not exist in {year:04d}-{month:02d}"
    if hour > 23:
        return f"hour {hour:02d} is not 00-23"
    if minute > 59:
        return f"minute {minute:02d} is not 00-59"
    if second > 59:
        return f"second {second:02d} is not 00-59"
    return None


_ts_cache: tuple[str, int | None] = ("", None)


def _parse_timestamp(part: str) -> int | None:
    """Epoch milliseconds (UTC) of ``YYYY-MM-DDTHH:MM:SS[.f]``, or None when ``part`` is not one.

    The last text parsed is remembered: consecutive lines mostly carry the same second."""
    global _ts_cache
    cached = _ts_cache
    if cached[0] == part:
        return cached[1]
    ms = _parse_timestamp_text(part)
    _ts_cache = (part, ms)
    return ms


def _parse_timestamp_text(part: str) -> int | None:
    m = _TS_RE.fullmatch(part)
    if m is None:
        return None
    sign, y, mo, d, h, mi, s, frac = m.groups()
    year, month, day = int(y), int(mo), int(d)
    hour, minute, second = int(h), int(mi), int(s)
    if sign == "-":
        year = -year
    if _field_problem(year, month, day, hour, minute, second) is not None:
        return None
    ms = int(frac[:3].ljust(3, "0")) if frac else 0
    return _days_from_civil(year, month, day) * _MS_PER_DAY + (hour * 3600 + minute * 60 + second) * 1000 + ms


def _timestamp_problem(part: str) -> str:
    """Explain why a timestamp-looking ``part`` did not parse (only called on the error path)."""
    m = _TS_BASE_RE.match(part)
    if m is None:
        return "expected YYYY-MM-DDTHH:MM:SS or YYYY-MM-DDTHH:MM:SS.f (UTC, no zone suffix)"
    rest = part[m.end() :]
    if rest == ".":
        return "a trailing '.' must be followed by 1-9 fraction digits"
    if re.fullmatch(r"\.[0-9]{10,}", rest):
        return f"{len(rest) - 1} fraction digits; at most 9 are allowed"
    if rest and not re.fullmatch(r"\.[0-9]{1,9}", rest):
        return f"unexpected {rest!r} after the seconds (no zone suffix is allowed; the time is UTC)"
    sign, y, mo, d, h, mi, s = m.groups()
    year = -int(y) if sign == "-" else int(y)
    problem = _field_problem(year, int(mo), int(d), int(h), int(mi), int(s))
    return problem or "not a valid timestamp"


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
    return value if value <= U64_MAX else None


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
                msg = f"invalid timestamp {q} in header {h}: {_timestamp_problem(part)}"
        elif _KEY_CHARS_RE.fullmatch(part):
            msg = f"stream key of {len(part)} characters in header {h} exceeds {_MAX_KEY_LEN}"
        elif numeric:
            msg = (
                f"{q} in header {h} is not a stream key ('+' is not a key character), and a "
                "sequence number is only allowed after a stream key"
            )
        elif any_filled:
            msg = f"invalid stream key {q} in header {h}: expected 1-{_MAX_KEY_LEN} of [A-Za-z0-9._-]"
        else:
            msg = (
                f"invalid header field {q} in header {h}: expected a timestamp "
                f"(YYYY-MM-DDTHH:MM:SS[.f]) or a stream key (1-{_MAX_KEY_LEN} of [A-Za-z0-9._-])"
            )
    elif shard is not None:
        msg = (
            f"unexpected extra field {q} in header {h}: a header holds at most "
            "timestamp | stream key | sequence | shard id"
        )
    else:
        what = "sequence" if seq is None else "shard id"
        if numeric:
            msg = f"{what} {part} exceeds u64 (max {U64_MAX}) in header {h}"
        elif _KEY_RE.fullmatch(part) and part[0] not in "0123456789+-":
            msg = f"second stream key {q} in header {h}"
        else:
            msg = f"invalid {what} {q} in header {h}: expected ASCII digits with an optional leading '+'"
    return LineParseError(msg, line=lineno)


def parse_line(line: str, *, lineno: int | None = None) -> StdioLine:
    """Parse one stdio line (its trailing ``\\n`` already removed) per §14.2.

    A line that does not start with ``[``, has no ``]``, or has nothing between them is a raw payload.
    A ``[...]`` header that breaks the grammar raises :class:`LineParseError` (``line=lineno``).
    """
    return _new_stdio_line(_parse_fields(line, lineno))


#: The header every producer writes, ``[timestamp | key | seq]`` or ``[timestamp | key | seq | shard]``,
#: which :func:`_parse_fields` reads with one match; anything else takes the general path.
_CANONICAL = re.compile(
    r"\[([+-]?[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?)"  # as _TS_RE
    r" \| ([A-Za-z0-9._-]{1,249}) \| (\+?[0-9]+)(?: \| (\+?[0-9]+))?\]"  # as _KEY_RE, _U64_RE
)


def _parse_fields(line: str, lineno: int | None) -> tuple[int | None, str | None, int | None, int | None, str]:
    """(timestamp_ms, stream_key, seq, shard_id, payload) of a line, as :func:`parse_line` reads it."""
    m = _CANONICAL.match(line)
    if m is not None:
        ts_text, key, seq_text, shard_text = m.groups()
        ts = _parse_timestamp(ts_text)
        seq = int(seq_text)
        shard = None if shard_text is None else int(shard_text)
        if ts is not None and seq <= U64_MAX and (shard is None or shard <= U64_MAX):
            rest = line[m.end() :]
            return ts, key, seq, shard, rest.lstrip(RUST_WHITESPACE) or rest
    return _parse_general(line, lineno)


def _parse_general(line: str, lineno: int | None) -> tuple[int | None, str | None, int | None, int | None, str]:
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
            ms = _parse_timestamp(part)
            if ms is not None:
                ts = ms
                continue
        if key is None:
            if _KEY_RE.fullmatch(part):
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
_parse_fields_pure = _parse_fields
_parse_fields = pick("parse_fields", _parse_fields_pure)  # noqa: F811 (the twin this process runs)


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

    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[tuple[str, int], int] = {}

    def decode(self, line: str, *, lineno: int | None = None, now_ms: int) -> ResolvedLine:
        """Parse ``line`` (no trailing ``\\n``) and resolve its missing fields."""
        return self._resolve(*_parse_fields(line, lineno), now_ms)

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
            seq = self._counters.get(slot, 0)
            self._counters[slot] = (seq + 1) & U64_MAX  # u64 arithmetic, wrapping like release Rust
        else:
            self._counters[slot] = seq
        return _new_resolved_line((now_ms if ts is None else ts, stream_key, seq, shard, payload, key is None))


# a pipe stage makes one of each per line: built from a tuple at C speed
_new_stdio_line = partial(tuple.__new__, StdioLine)
_new_resolved_line = partial(tuple.__new__, ResolvedLine)


# ------------------------------------------------------------------------------------ formatting

_second_cache: tuple[int, str] = (0, "1970-01-01T00:00:00")


def _second_text(sec: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` (UTC) of an epoch second; the last one is cached for the hot path."""
    global _second_cache
    cached = _second_cache
    if cached[0] == sec:
        return cached[1]
    if not _MIN_MS <= sec * 1000 <= _MAX_MS:
        raise TimestampRangeError(f"timestamp {sec * 1000} ms lies outside years -9999..9999")
    days, rem = divmod(sec, 86_400)
    year, month, day = _civil_from_days(days)
    hour, rem = divmod(rem, 3600)
    minute, second = divmod(rem, 60)
    ys = f"{year:04d}" if year >= 0 else f"-{-year:04d}"
    text = f"{ys}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    _second_cache = (sec, text)
    return text


def format_line(timestamp_ms: int, stream_key: str, seq: int, payload: str) -> str:
    """The producer's line ``[YYYY-MM-DDTHH:MM:SS | key | seq] payload\\n`` (UTC, fraction dropped).

    No checks on the hot path: ``payload`` must not contain ``\\n`` (envelope it first).
    """
    return f"[{_second_text(timestamp_ms // 1000)} | {stream_key} | {seq}] {payload}\n"


#: The pure-Python twin, kept under its own name for the twin tests and benchmarks.
format_line_pure = format_line
format_line = pick("format_line", format_line_pure)  # noqa: F811 (the twin this process runs)


def format_log_timestamp(ms: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.f`` with the shortest fraction (912→.912, 910→.91, 0→.0), no Z (§13.1)."""
    sec, frac = divmod(ms, 1000)
    return f"{_second_text(sec)}.{f'{frac:03d}'.rstrip('0') or '0'}"


class LineFormatter:
    """Producer side: numbers lines per stream key from 0 and skips empty payloads (§14.3)."""

    __slots__ = ("_seqs",)

    def __init__(self) -> None:
        self._seqs: dict[str, int] = {}

    def next_seq(self, stream_key: str) -> int:
        """The sequence number the next non-empty line of ``stream_key`` will carry."""
        return self._seqs.get(stream_key, 0)

    def format(self, stream_key: str, payload: str, timestamp_ms: int) -> str | None:
        """Return the line for ``payload``, or None for an empty payload (which uses no seq)."""
        if not payload:
            return None
        seq = self._seqs.get(stream_key)
        if seq is None:
            if _KEY_RE.fullmatch(stream_key) is None:
                raise StreamKeyError(
                    f"stream key {_quote(stream_key)} must be 1-{_MAX_KEY_LEN} characters of [A-Za-z0-9._-]"
                )
            seq = 0
        self._seqs[stream_key] = seq + 1
        return format_line(timestamp_ms, stream_key, seq, payload)
