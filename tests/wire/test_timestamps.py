"""nbkit.wire.timestamps: the one parser and formatter of timestamp text (§13.1, §14.2)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbkit.errors import TimestampRangeError
from nbkit.wire.timestamps import (
    MAX_TEXT_MS,
    MIN_TEXT_MS,
    format_log_timestamp,
    iso_utc,
    isoformat_z,
    parse_log_timestamp,
    parse_timestamp,
    second_text,
    timestamp_problem,
)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def ms_of(moment: dt.datetime) -> int:
    return (moment - EPOCH) // dt.timedelta(milliseconds=1)


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999_999)))
def test_parse_agrees_with_datetime(moment: dt.datetime) -> None:
    m = moment
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}.{m.microsecond:06d}"
    expected = ms_of(m.replace(tzinfo=dt.UTC))  # the microseconds cut to the millisecond
    assert parse_timestamp(text) == expected
    assert parse_log_timestamp(text + "Z") == expected


@given(st.integers(MIN_TEXT_MS, MAX_TEXT_MS))
def test_format_then_parse_round_trips(ms: int) -> None:
    assert parse_log_timestamp(format_log_timestamp(ms)) == ms
    assert parse_timestamp(format_log_timestamp(ms)) == ms


@pytest.mark.parametrize(
    ("ms", "text"),
    [(912, ".912"), (910, ".91"), (900, ".9"), (0, ".0"), (1, ".001")],
)
def test_log_timestamp_has_the_shortest_fraction(ms: int, text: str) -> None:
    assert format_log_timestamp(1_686_000_000_000 + ms) == "2023-06-05T21:20:00" + text


def test_the_log_parser_also_takes_a_z_and_cuts_below_the_millisecond() -> None:
    assert parse_log_timestamp("2024-01-01T00:00:00Z") == 1_704_067_200_000
    assert parse_log_timestamp("2024-01-01T00:00:00.123456789Z") == 1_704_067_200_123
    assert parse_timestamp("2024-01-01T00:00:00Z") is None  # a stdio header takes no zone suffix


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("2024-13-01T00:00:00", "month 13 is not 01-12"),
        ("2023-02-29T00:00:00", "day 29 does not exist in 2023-02"),
        ("2024-01-01T24:00:00", "hour 24"),
        ("2024-01-01T00:00:00.", "a trailing '.'"),
        ("2024-01-01T00:00:00.1234567890", "10 fraction digits"),
        ("2024-01-01T00:00:00+01:00", "no zone suffix"),
        ("yesterday", "expected YYYY-MM-DDTHH:MM:SS"),
    ],
)
def test_a_bad_timestamp_says_what_is_wrong(text: str, why: str) -> None:
    assert parse_timestamp(text) is None
    assert why in timestamp_problem(text)
    with pytest.raises(ValueError, match="is not YYYY-MM-DDTHH:MM:SS") as info:
        parse_log_timestamp(text)
    assert why in str(info.value)


def test_second_text_covers_signed_years_and_refuses_beyond_them() -> None:
    assert second_text(0) == "1970-01-01T00:00:00"
    assert second_text(MIN_TEXT_MS // 1000) == "-9999-01-01T00:00:00"
    assert second_text(MAX_TEXT_MS // 1000) == "9999-12-31T23:59:59"
    with pytest.raises(TimestampRangeError, match="outside years -9999..9999"):
        second_text(MAX_TEXT_MS // 1000 + 1)


def test_iso_text_ends_in_z() -> None:
    assert isoformat_z(dt.datetime(2024, 1, 1, 0, 0, 0, 250_000, tzinfo=dt.UTC)) == "2024-01-01T00:00:00.250000Z"
    assert isoformat_z(dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "seconds") == "2024-01-01T00:00:00Z"
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"
    assert iso_utc(1_694_767_177_437) == "2023-09-15T08:39:37.437Z"
