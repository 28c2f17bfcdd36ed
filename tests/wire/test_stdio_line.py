"""Tests for the stdio line format (stream-file-format.md §14) and the ss-decode log timestamp (§13.1)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbkit.errors import FormatError, InvalidKeyError, LineParseError, TimestampRangeError
from nbkit.wire.rust_text import RUST_WHITESPACE
from nbkit.wire.stdio_line import (
    LineDecoder,
    LineFormatter,
    ResolvedLine,
    StdioLine,
    format_line,
    parse_line,
)
from nbkit.wire.timestamps import format_log_timestamp

U64_MAX = 2**64 - 1


def ms(y: int, mo: int, d: int, h: int = 0, mi: int = 0, s: int = 0, micro: int = 0) -> int:
    dt = datetime(y, mo, d, h, mi, s, micro, tzinfo=UTC)
    return int(dt.timestamp()) * 1000 + micro // 1000


def raw(payload: str) -> StdioLine:
    return StdioLine(None, None, None, None, payload)


# ------------------------------------------------------------------- upstream parser.rs unit tests


def test_upstream_meta_0_raw_lines():
    assert parse_line("a plain, raw message") == raw("a plain, raw message")
    assert parse_line('{ "payload": "anything" }') == raw('{ "payload": "anything" }')


def test_upstream_meta_1_timestamp_only():
    assert parse_line('[2022-01-02T03:04:05] { "payload": "anything" }') == StdioLine(
        ms(2022, 1, 2, 3, 4, 5), None, None, None, '{ "payload": "anything" }'
    )


def test_upstream_meta_2_timestamp_fraction_and_key():
    assert parse_line('[2022-01-02T03:04:05.678 | my-fancy_topic.1] ["array", "of", "values"]') == StdioLine(
        ms(2022, 1, 2, 3, 4, 5, 678_000), "my-fancy_topic.1", None, None, '["array", "of", "values"]'
    )


def test_upstream_meta_3_timestamp_key_seq():
    assert parse_line('[2022-01-02T03:04:05 | my-fancy_topic.1 | 123] { "payload": "anything" }') == StdioLine(
        ms(2022, 1, 2, 3, 4, 5), "my-fancy_topic.1", 123, None, '{ "payload": "anything" }'
    )


def test_upstream_meta_4_all_four_fields():
    line = '[2022-01-02T03:04:05 | my-fancy_topic.1 | 123 | 4] { "payload": "anything" }'
    assert parse_line(line) == StdioLine(
        ms(2022, 1, 2, 3, 4, 5), "my-fancy_topic.1", 123, 4, '{ "payload": "anything" }'
    )


def test_upstream_meta_5_key_only():
    assert parse_line('[my-fancy_topic.1] { "payload": "anything" }') == StdioLine(
        None, "my-fancy_topic.1", None, None, '{ "payload": "anything" }'
    )


def test_upstream_meta_6_key_seq():
    assert parse_line('[my-fancy_topic.1 | 123] ["array", "of", "values"]') == StdioLine(
        None, "my-fancy_topic.1", 123, None, '["array", "of", "values"]'
    )


def test_upstream_meta_7_key_seq_shard():
    assert parse_line('[my-fancy_topic.1 | 123 | 4] { "payload": "anything" }') == StdioLine(
        None, "my-fancy_topic.1", 123, 4, '{ "payload": "anything" }'
    )


def test_upstream_error_1_blank_header():
    with pytest.raises(LineParseError, match="empty header field"):
        parse_line("[ ]")


# ------------------------------------------------------------------------------- spec examples


def test_ss_decode_example_line():
    got = parse_line("[2023-06-05T13:55:53.001 | hello | 1 | 0] message-1")
    assert got == StdioLine(ms(2023, 6, 5, 13, 55, 53, 1000), "hello", 1, 0, "message-1")


def test_readme_line_declared_invalid_is_accepted_by_the_parser():
    assert parse_line("[2022-01-01T00:00:00] 12345") == StdioLine(ms(2022, 1, 1), None, None, None, "12345")


def test_docs_example_line():
    assert parse_line('[2024-01-01T00:00:00 | jobs | 1] {"id":7}') == StdioLine(
        ms(2024, 1, 1), "jobs", 1, None, '{"id":7}'
    )


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("[ ]", "empty header field in header '[ ]'"),
        ("[ ] payload", "empty header field"),
        ("[a | | 1]", "empty header field"),
        ("[Jan 1, 2022] {}", "'Jan 1, 2022'"),
        ("[a | b]", "second stream key 'b' in header '[a | b]'"),
        ("[a | 1 | b]", "second stream key 'b'"),
        ("[+5]", "'+5' in header '[+5]' is not a stream key"),
        ("[2022-01-01T00:00:00 | +5]", "'+5' in header '[2022-01-01T00:00:00 | +5]' is not a stream key"),
        ("[2022-01-01T00:00:00 | a b]", "invalid stream key 'a b'"),
        ("[a | topic2]", "second stream key 'topic2'"),
        ("[2022-01-01T00:00:00.] x", "invalid timestamp '2022-01-01T00:00:00.'"),
        ("[2022-01-01T00:00:00.1234567890]", "10 fraction digits"),
        ("[2022-01-01T00:00:00Z]", "invalid timestamp"),
        ("[2022-01-01T00:00:60]", "second 60"),
        ("[2022-01-01T24:00:00]", "hour 24"),
        ("[2022-01-01T00:60:00]", "minute 60"),
        ("[2022-13-01T00:00:00]", "month 13"),
        ("[2023-02-29T00:00:00]", "day 29 does not exist in 2023-02"),
        ("[2022-01-01T00:00:00 | 2022-01-02T00:00:00]", "second timestamp"),
        ("[a | 18446744073709551616]", "sequence 18446744073709551616 exceeds u64"),
        ("[a | 1 | 18446744073709551616]", "shard id 18446744073709551616 exceeds u64"),
        ("[a | -1]", "invalid sequence '-1'"),
        ("[a | 1_000]", "invalid sequence '1_000'"),
        ("[a | \u0661]", "invalid sequence"),  # ARABIC-INDIC DIGIT ONE: int() would accept it
        ("[a | 1 | 2 | 3]", "unexpected extra field '3'"),
        ("[2022-01-01T00:00:00 | a | 1 | 2 | 3]", "unexpected extra field"),
        ("[" + "k" * 250 + "]", "250 characters"),
        ("[\x1ca]", "invalid header field"),  # U+001C is not trimmed and not a key character
        ("[a b]", "invalid header field 'a b'"),
    ],
)
def test_malformed_headers_raise_with_a_reason_and_line_number(line, fragment):
    with pytest.raises(LineParseError) as info:
        parse_line(line, lineno=42)
    err = info.value
    assert fragment in str(err)
    assert err.line == 42
    assert str(err).startswith("line 42: ")
    assert isinstance(err, FormatError)


def test_error_without_line_number():
    with pytest.raises(LineParseError) as info:
        parse_line("[a | b]")
    assert info.value.line is None
    assert str(info.value) == "second stream key 'b' in header '[a | b]'"


# --------------------------------------------------------------------------- header detection


@pytest.mark.parametrize(
    "line",
    ["", "[]", "[] payload", " [a] x", "\t[a] x", "[no closing bracket", "[", "x [a] y", "]a["],
)
def test_lines_without_a_header_are_raw(line):
    assert parse_line(line) == raw(line)


def test_header_ends_at_first_closing_bracket():
    assert parse_line("[a] [b] c]") == StdioLine(None, "a", None, None, "[b] c]")
    assert parse_line("[a]]") == StdioLine(None, "a", None, None, "]")


# ----------------------------------------------------------------------------------- payloads


def test_payload_keeps_trailing_whitespace_and_crlf_cr():
    assert parse_line("[a] x  ").payload == "x  "
    assert parse_line("[a] x\r").payload == "x\r"
    assert parse_line("plain\r").payload == "plain\r"  # raw line: whole line, CR kept


def test_payload_leading_whitespace_uses_rust_set():
    assert parse_line("[a]\t\u3000\u00a0 x").payload == "x"
    assert parse_line("[a] \x1cx").payload == "\x1cx"  # U+001C is not Rust whitespace
    assert parse_line("[a]x").payload == "x"


def test_payload_edge_cases():
    assert parse_line("[a]").payload == ""
    # everything after "]" is whitespace: Rust's trim yields an empty slice at the start of the rest
    assert parse_line("[a]   ").payload == "   "
    assert parse_line("[a] \r").payload == " \r"


# -------------------------------------------------------------------------------------- fields


def test_parts_are_trimmed_with_rust_whitespace():
    line = "[\u2003 2022-01-01T00:00:00\u00a0|\tkey\u3000|\u2028 7 \u205f| \u0085 9\u202f] p"
    assert parse_line(line) == StdioLine(ms(2022, 1, 1), "key", 7, 9, "p")
    assert parse_line("[a|1|2] p") == StdioLine(None, "a", 1, 2, "p")


def test_numeric_part_is_a_key_unless_a_key_is_filled():
    assert parse_line("[123] p") == StdioLine(None, "123", None, None, "p")
    assert parse_line("[2022-01-01T00:00:00 | 123] p") == StdioLine(ms(2022, 1, 1), "123", None, None, "p")
    assert parse_line("[5 | 6] p") == StdioLine(None, "5", 6, None, "p")
    assert parse_line("[2022-01-01] p") == StdioLine(None, "2022-01-01", None, None, "p")


def test_numbers_follow_rust_u64_parsing():
    assert parse_line("[a | +5 | +0]").seq == 5
    assert parse_line("[a | 007 | 0]").seq == 7
    assert parse_line(f"[a | {U64_MAX} | {U64_MAX}]") == StdioLine(None, "a", U64_MAX, U64_MAX, "")


def test_stream_key_length_limit():
    key = "k" * 249
    assert parse_line(f"[{key}]").stream_key == key


@pytest.mark.parametrize(
    ("text", "expected_ms"),
    [
        ("2022-01-02T03:04:05", ms(2022, 1, 2, 3, 4, 5)),
        ("2022-01-02T03:04:05.6", ms(2022, 1, 2, 3, 4, 5) + 600),
        ("2022-01-02T03:04:05.06", ms(2022, 1, 2, 3, 4, 5) + 60),
        ("2022-01-02T03:04:05.0069", ms(2022, 1, 2, 3, 4, 5) + 6),
        ("2022-01-02T03:04:05.999999999", ms(2022, 1, 2, 3, 4, 5) + 999),
        ("2024-02-29T23:59:59", ms(2024, 2, 29, 23, 59, 59)),
        ("2000-02-29T00:00:00", ms(2000, 2, 29)),
        ("1970-01-01T00:00:00", 0),
        ("1969-12-31T23:59:59.999", -1),
        ("9999-12-31T23:59:59.999", ms(9999, 12, 31, 23, 59, 59) + 999),
        ("+2022-01-02T03:04:05", ms(2022, 1, 2, 3, 4, 5)),  # the time crate's optional year sign
    ],
)
def test_timestamps(text, expected_ms):
    assert parse_line(f"[{text}] p").timestamp_ms == expected_ms


@pytest.mark.parametrize(
    "text",
    [
        "1900-02-29T00:00:00",
        "2022-01-01 00:00:00",
        "2022-01-01t00:00:00",
        "22-01-01T00:00:00",
        "2022-1-01T00:00:00",
        "2022-01-01T00:00",
        "2022-01-01T00:00:00+00:00",
        "2022-00-10T00:00:00",
        "2022-01-00T00:00:00",
    ],
)
def test_invalid_timestamps(text):
    with pytest.raises(LineParseError):
        parse_line(f"[{text}] p")


# --------------------------------------------------------------------------------- LineDecoder


def test_decoder_fills_defaults():
    dec = LineDecoder()
    got = dec.decode("hello", now_ms=1234)
    assert got == ResolvedLine(1234, "broadcast", 0, 0, "hello", True)
    got = dec.decode("[2022-01-01T00:00:00] x", now_ms=1234)
    assert got == ResolvedLine(ms(2022, 1, 1), "broadcast", 1, 0, "x", True)


def test_decoder_explicit_broadcast_key_is_not_a_broadcast():
    got = LineDecoder().decode("[broadcast] x", now_ms=0)
    assert got.stream_key == "broadcast"
    assert got.broadcast is False


def test_decoder_seq_quirk_explicit_seq_sets_the_counter():
    dec = LineDecoder()
    seqs = [dec.decode(line, now_ms=0).seq for line in ["[k] a", "[k] b", "[k | 5] c", "[k] d", "[k] e"]]
    assert seqs == [0, 1, 5, 5, 6]


def test_decoder_counts_per_key_and_shard():
    dec = LineDecoder()
    lines = ["[a | 3 | 1] x", "[a] x", "[b] x", "[a] x", "raw", "[a | 0 | 1] x", "raw"]
    got = [(r.stream_key, r.shard_id, r.seq) for r in (dec.decode(line, now_ms=0) for line in lines)]
    assert got == [
        ("a", 1, 3),
        ("a", 0, 0),
        ("b", 0, 0),
        ("a", 0, 1),
        ("broadcast", 0, 0),
        ("a", 1, 0),
        ("broadcast", 0, 1),
    ]


def test_decoder_wraps_counter_like_u64():
    dec = LineDecoder()
    assert dec.decode(f"[k | {U64_MAX}] x", now_ms=0).seq == U64_MAX
    assert dec.decode("[k] x", now_ms=0).seq == U64_MAX
    assert dec.decode("[k] x", now_ms=0).seq == 0


def test_decoder_reports_line_number_and_keeps_state_on_error():
    dec = LineDecoder()
    dec.decode("[k] a", now_ms=0)
    with pytest.raises(LineParseError) as info:
        dec.decode("[k | x]", lineno=7, now_ms=0)
    assert info.value.line == 7
    assert dec.decode("[k] b", now_ms=0).seq == 1


def test_resolve_of_a_parsed_line():
    dec = LineDecoder()
    assert dec.resolve(StdioLine(5, "k", None, 2, "p"), now_ms=9) == ResolvedLine(5, "k", 0, 2, "p", False)


# ---------------------------------------------------------------------------------- formatting


def test_format_line_matches_producer_example():
    t = ms(2023, 2, 24, 8, 13, 10) + 987
    line = format_line(t, "relay", 0, '{"relay":1,"tick":0}')
    assert line == '[2023-02-24T08:13:10 | relay | 0] {"relay":1,"tick":0}\n'


def test_format_line_cache_follows_the_second():
    base = ms(2023, 2, 24, 8, 13, 10)
    assert format_line(base + 999, "k", 1, "p") == "[2023-02-24T08:13:10 | k | 1] p\n"
    assert format_line(base + 1000, "k", 2, "p") == "[2023-02-24T08:13:11 | k | 2] p\n"
    assert format_line(base - 1, "k", 3, "p") == "[2023-02-24T08:13:09 | k | 3] p\n"
    assert format_line(0, "k", 4, "p") == "[1970-01-01T00:00:00 | k | 4] p\n"


def test_format_rejects_out_of_range_timestamps():
    with pytest.raises(TimestampRangeError):
        format_line(ms(9999, 12, 31, 23, 59, 59) + 1000, "k", 0, "p")


@pytest.mark.parametrize(
    ("millis", "text"),
    [(912, ".912"), (910, ".91"), (900, ".9"), (0, ".0"), (1, ".001"), (10, ".01"), (999, ".999")],
)
def test_format_log_timestamp_shortest_fraction(millis, text):
    base = ms(2023, 6, 5, 13, 55, 53)
    assert format_log_timestamp(base + millis) == "2023-06-05T13:55:53" + text


def test_format_log_timestamp_parses_back():
    t = ms(2023, 6, 5, 13, 55, 53) + 1
    assert parse_line(f"[{format_log_timestamp(t)} | hello | 1 | 0] message-1").timestamp_ms == t


@settings(max_examples=200, deadline=None)
@given(t=st.integers(0, ms(9999, 12, 31, 23, 59, 59) + 999))
def test_format_line_agrees_with_datetime(t):
    expected = datetime.fromtimestamp(t // 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert format_line(t, "k", 0, "p") == f"[{expected} | k | 0] p\n"
    assert format_log_timestamp(t).startswith(expected + ".")


_keys = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)
_payload_text = st.text(st.characters(codec="utf-8", exclude_characters="\n"), min_size=1, max_size=20).filter(
    lambda s: s.strip(RUST_WHITESPACE) == s
)


@settings(max_examples=200, deadline=None)
@given(t=st.integers(0, 2**41), key=_keys, seq=st.integers(0, U64_MAX), payload=_payload_text)
def test_format_line_round_trips_through_parse_line(t, key, seq, payload):
    line = format_line(t, key, seq, payload)
    assert line.endswith("\n")
    got = parse_line(line[:-1])
    assert got == StdioLine(t - t % 1000, key, seq, None, payload)


def test_line_formatter_counts_per_key_and_skips_empty_payloads():
    fmt = LineFormatter()
    t = ms(2024, 1, 1)
    assert fmt.format("a", "x", t) == "[2024-01-01T00:00:00 | a | 0] x\n"
    assert fmt.format("a", "", t) is None
    assert fmt.format("b", "y", t) == "[2024-01-01T00:00:00 | b | 0] y\n"
    assert fmt.format("a", "z", t) == "[2024-01-01T00:00:00 | a | 1] z\n"
    assert fmt.format("broadcast", "", t) is None
    assert fmt.format("broadcast", "m", t) == "[2024-01-01T00:00:00 | broadcast | 0] m\n"


@pytest.mark.parametrize("key", ["", "a b", "a|b", "k" * 250, "caf\u00e9"])
def test_line_formatter_rejects_bad_keys(key):
    with pytest.raises(InvalidKeyError):
        LineFormatter().format(key, "x", 0)


def test_formatter_output_feeds_the_decoder():
    fmt, dec = LineFormatter(), LineDecoder()
    lines = [fmt.format("jobs", f"m{i}", 1_700_000_000_123 + i) for i in range(3)]
    got = [dec.decode(line[:-1], now_ms=0) for line in lines]
    assert [(r.stream_key, r.seq, r.payload, r.timestamp_ms) for r in got] == [
        ("jobs", 0, "m0", 1_700_000_000_000),
        ("jobs", 1, "m1", 1_700_000_000_000),
        ("jobs", 2, "m2", 1_700_000_000_000),
    ]
