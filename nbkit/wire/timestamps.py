"""Timestamp text, sans I/O: ss-decode's ``YYYY-MM-DDTHH:MM:SS.f`` and the stdio header's timestamp.

One parser and one formatter for every text timestamp nbkit reads or writes: the stdio line header
(stream-file-format.md §14.2), ``nbkit cat``'s log and ndjson output and ``nbkit write``'s input (§13.1),
and ISO text of aware datetimes (:func:`isoformat_z`). All times are UTC; the proleptic Gregorian
calendar is computed by hand, so years -9999..9999 work where :mod:`datetime` stops at year 1.
"""

from __future__ import annotations

import datetime as dt
import re

from nbkit.errors import TimestampRangeError

__all__ = [
    "MAX_TEXT_MS",
    "MIN_TEXT_MS",
    "format_log_timestamp",
    "iso_utc",
    "isoformat_z",
    "parse_log_timestamp",
    "parse_timestamp",
    "second_text",
    "timestamp_problem",
]

_TS_BASE = r"([+-]?)([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
_TS_RE = re.compile(_TS_BASE + r"(?:\.([0-9]{1,9}))?")
_TS_BASE_RE = re.compile(_TS_BASE)
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


#: Epoch milliseconds of -9999-01-01T00:00:00, the earliest instant the text's signed 4-digit year holds.
MIN_TEXT_MS = _days_from_civil(-9999, 1, 1) * _MS_PER_DAY
#: Epoch milliseconds of 9999-12-31T23:59:59.999, the latest instant the text holds.
MAX_TEXT_MS = _days_from_civil(10000, 1, 1) * _MS_PER_DAY - 1


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


# --------------------------------------------------------------------------------------- parsing

_ts_cache: tuple[str, int | None] = ("", None)


def parse_timestamp(text: str) -> int | None:
    """Epoch milliseconds (UTC) of ``[+-]YYYY-MM-DDTHH:MM:SS[.f]``, or None when ``text`` is not one.

    The stdio header's rule (§14.2): no zone suffix, 1-9 fraction digits (cut to the millisecond), an
    optional sign on the year. The last text parsed is remembered: consecutive lines mostly carry the
    same second.

    Parameters
    ----------
    text : str
        The timestamp text, already trimmed.

    Returns
    -------
    int or None
        Epoch milliseconds, or None when the text is not a valid timestamp.

    Examples
    --------
    >>> parse_timestamp("2024-01-01T00:00:01.5")
    1704067201500
    >>> parse_timestamp("2024-02-30T00:00:00") is None
    True
    """
    global _ts_cache
    cached = _ts_cache
    if cached[0] == text:
        return cached[1]
    ms = _parse_text(text)
    _ts_cache = (text, ms)
    return ms


def _parse_text(text: str) -> int | None:
    m = _TS_RE.fullmatch(text)
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


def timestamp_problem(text: str) -> str:
    """Explain why ``text`` is not a timestamp :func:`parse_timestamp` accepts (for error messages).

    Parameters
    ----------
    text : str
        Text that :func:`parse_timestamp` refused.

    Returns
    -------
    str
        What is wrong, in words: the field out of range, or the shape expected.

    Examples
    --------
    >>> timestamp_problem("2024-13-01T00:00:00")
    'month 13 is not 01-12'
    """
    m = _TS_BASE_RE.match(text)
    if m is None:
        return "expected YYYY-MM-DDTHH:MM:SS or YYYY-MM-DDTHH:MM:SS.f (UTC, no zone suffix)"
    rest = text[m.end() :]
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


def parse_log_timestamp(text: str) -> int:
    """Epoch ms of ``YYYY-MM-DDTHH:MM:SS[.f]`` (UTC; a trailing ``Z`` is allowed), the inverse of
    :func:`format_log_timestamp`; digits below the millisecond are dropped.

    The same grammar as :func:`parse_timestamp` (which reads stdio headers), plus the ``Z``.

    Parameters
    ----------
    text : str
        The timestamp text, e.g. ``"2024-01-01T00:00:00.25"`` or ``"2024-01-01T00:00:00Z"``.

    Returns
    -------
    int
        Epoch milliseconds.

    Raises
    ------
    ValueError
        When ``text`` is not such a timestamp; the message says what is wrong.

    Examples
    --------
    >>> parse_log_timestamp("2024-01-01T00:00:00.25Z")
    1704067200250
    >>> parse_log_timestamp(format_log_timestamp(1704067200250))
    1704067200250
    """
    bare = text[:-1] if text.endswith("Z") else text
    ms = parse_timestamp(bare)
    if ms is None:
        raise ValueError(f"timestamp {text!r} is not YYYY-MM-DDTHH:MM:SS[.fff] (UTC): {timestamp_problem(bare)}")
    return ms


# ------------------------------------------------------------------------------------ formatting

_second_cache: tuple[int, str] = (0, "1970-01-01T00:00:00")


def second_text(sec: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` (UTC) of an epoch second; the last one is cached for the hot path.

    Parameters
    ----------
    sec : int
        Seconds since 1970-01-01T00:00:00 UTC (negative before it).

    Returns
    -------
    str
        The text, with a ``-`` before years below 0.

    Raises
    ------
    TimestampRangeError
        When the second lies outside years -9999..9999.

    Examples
    --------
    >>> second_text(1704067200)
    '2024-01-01T00:00:00'
    """
    global _second_cache
    cached = _second_cache
    if cached[0] == sec:
        return cached[1]
    if not MIN_TEXT_MS <= sec * 1000 <= MAX_TEXT_MS:
        raise TimestampRangeError(f"timestamp {sec * 1000} ms lies outside years -9999..9999")
    days, rem = divmod(sec, 86_400)
    year, month, day = _civil_from_days(days)
    hour, rem = divmod(rem, 3600)
    minute, second = divmod(rem, 60)
    ys = f"{year:04d}" if year >= 0 else f"-{-year:04d}"
    text = f"{ys}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
    _second_cache = (sec, text)
    return text


def format_log_timestamp(ms: int) -> str:
    """ss-decode's timestamp (§13.1): ``YYYY-MM-DDTHH:MM:SS.f``, the shortest fraction, no ``Z``.

    Parameters
    ----------
    ms : int
        Epoch milliseconds (UTC).

    Returns
    -------
    str
        The text: 912 ms -> ``.912``, 910 -> ``.91``, 0 -> ``.0``.

    Examples
    --------
    >>> format_log_timestamp(1704067200910)
    '2024-01-01T00:00:00.91'
    """
    sec, frac = divmod(ms, 1000)
    return f"{second_text(sec)}.{f'{frac:03d}'.rstrip('0') or '0'}"


def isoformat_z(moment: dt.datetime, timespec: str = "auto") -> str:
    """ISO 8601 text of an aware UTC datetime with ``Z`` for its zone (``+00:00`` elsewhere in Python).

    Parameters
    ----------
    moment : datetime.datetime
        An aware datetime in UTC (a ``pandas.Timestamp`` works too); a naive one is printed as it is.
    timespec : str, default "auto"
        As for :meth:`datetime.datetime.isoformat` (``"milliseconds"``, ``"seconds"``, ...).

    Returns
    -------
    str
        For example ``"2024-01-01T00:00:00.250Z"``.

    Examples
    --------
    >>> import datetime as dt
    >>> isoformat_z(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "milliseconds")
    '2024-01-01T00:00:00.000Z'
    """
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z")


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def iso_utc(ms: int) -> str:
    """ISO 8601 UTC text with exactly 3 millisecond digits and a ``Z`` (the TS decoder's form, §13.3).

    Parameters
    ----------
    ms : int
        Epoch milliseconds, 0 .. 9999-12-31T23:59:59.999.

    Returns
    -------
    str
        For example ``"2023-09-15T08:39:37.437Z"``.

    Examples
    --------
    >>> iso_utc(1694767177437)
    '2023-09-15T08:39:37.437Z'
    """
    return isoformat_z(_EPOCH + dt.timedelta(milliseconds=ms), "milliseconds")
