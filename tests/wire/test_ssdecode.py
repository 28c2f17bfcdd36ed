"""nbkit.wire.ssdecode: ss-decode's log and ndjson renderings (§13) and the ndjson reader, sans I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbkit.wire import envelope
from nbkit.wire.ssdecode import (
    NdjsonMessage,
    dumps,
    escape_controls,
    format_beacon,
    format_captured,
    format_header,
    format_message,
    json_payload,
    loads_strict,
    log_payload,
    parse_comment,
    parse_header_json,
    parse_message_json,
    payload_bytes,
)
from nbkit.wire.ssformat import MAX_U64, FileHeader, Marker

SAMPLE_HEADER = FileHeader("vec_map-1694767177436.firedbg.ss", 1_694_767_177_437, 1_048_576)
T = 1_694_767_177_437


def test_header_lines_as_ss_decode_prints_them() -> None:
    body = (
        '{"file_name":"vec_map-1694767177436.firedbg.ss","created_at":"2023-09-15T08:39:37.437",'
        '"beacon_interval":1048576}'
    )
    assert format_header("log", SAMPLE_HEADER) == f"# {body}\n"
    assert format_header("ndjson", SAMPLE_HEADER) == f"/* {body} */\n"
    assert format_header("stdio", SAMPLE_HEADER) == ""
    assert parse_header_json(body) == SAMPLE_HEADER


def test_beacon_lines() -> None:
    marker = Marker("hello", 0, 7, T, 42879)
    body = (
        '[{"header":{"stream_key":"hello","shard_id":0,"sequence":7,"timestamp":"2023-09-15T08:39:37.437"},'
        '"running_checksum":42879}]'
    )
    assert format_beacon("log", [marker]) == f"# {body}\n"
    assert format_beacon("ndjson", [marker]) == f"/* {body} */\n"
    assert format_beacon("stdio", [marker]) == ""


@pytest.mark.parametrize(
    ("payload", "log", "ndjson"),
    [
        (b'{"a":1}', '{"a":1}', {"a": 1}),
        (b"plain text", "plain text", "plain text"),
        (b"two\nlines\x1b[2J", "two\\nlines\\x1b[2J", "two\nlines\x1b[2J"),
        (b"\xff\x00", "<BINARY BLOB>", [255, 0]),
        (b"NaN", "NaN", "NaN"),  # not JSON: a string, as serde_json sees it
    ],
)
def test_message_lines(payload: bytes, log: str, ndjson: object) -> None:
    head = "[2023-09-15T08:39:37.437 | k | 3 | 1]"
    assert format_message("log", "k", 1, 3, T, payload) == f"{head} {log}\n"
    assert format_message("log", "k", 1, 3, T, payload, header_only=True) == f"{head}\n"
    line = format_message("ndjson", "k", 1, 3, T, payload)
    assert loads_strict(line) == {
        "header": {"stream_key": "k", "shard_id": 1, "sequence": 3, "timestamp": "2023-09-15T08:39:37.437"},
        "payload": ndjson,
    }
    assert loads_strict(format_message("ndjson", "k", 1, 3, T, payload, header_only=True))["payload"] is None
    assert log_payload(payload) == log and json_payload(payload) == ndjson


def test_stdio_lines_envelope_what_a_line_cannot_carry() -> None:
    head = "[2023-09-15T08:39:37.437 | k | 3 | 0]"
    assert format_message("stdio", "k", 0, 3, T, b"") == head + "\n"  # "] " would read back as " "
    line = format_message("stdio", "k", 0, 3, T, b"two\nlines")
    assert line.count("\n") == 1
    text = line[len(head) + 1 : -1]
    assert envelope.decode(text.encode()) == ({}, b"two\nlines")


@given(
    key=st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True),
    shard=st.integers(0, MAX_U64),
    seq=st.integers(0, MAX_U64),
    ts=st.integers(0, 253_402_300_799_999),
    payload=st.binary(max_size=40),
)
def test_ndjson_reads_back_what_it_prints(key: str, shard: int, seq: int, ts: int, payload: bytes) -> None:
    back = parse_message_json(format_message("ndjson", key, shard, seq, ts, payload).strip())
    assert back[:4] == (key, shard, seq, ts)
    value = json_payload(payload)
    if _byte_list(value) and bytes(value) != payload:
        return  # a JSON array of 0..255 reads back as those bytes: the format cannot tell them apart
    assert json_payload(back.payload) == value  # the same value (its JSON text may be re-spaced)


def _byte_list(value: object) -> bool:
    return isinstance(value, list) and all(type(b) is int and 0 <= b <= 255 for b in value)


def test_a_message_line_needs_only_its_key() -> None:
    assert parse_message_json('{"header":{"stream_key":"k"},"payload":[1,2]}') == NdjsonMessage(
        "k", 0, None, None, b"\x01\x02"
    )


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("[]", "expected {"),
        ('{"header":{},"payload":1}', "stream_key must be a string"),
        ('{"header":{"stream_key":"k","sequence":-1},"payload":1}', "header.sequence must be an unsigned 64-bit"),
        (f'{{"header":{{"stream_key":"k","shard_id":{MAX_U64 + 1}}},"payload":1}}', "header.shard_id"),
        ('{"header":{"stream_key":"k","timestamp":true},"payload":1}', "header.timestamp must be"),
        ('{"header":{"stream_key":"k","timestamp":"2024-02-30T00:00:00"},"payload":1}', "day 30"),
        ('{"header":{"stream_key":"k"},"payload":NaN}', "NaN is not JSON"),
        ('{"header":{"stream_key":"k"},"payload":1e999}', "out of range"),
        ('{"header":{"stream_key":"k"},"payload":"\\ud800"}', "lone surrogate"),
    ],
)
def test_a_bad_message_line_says_which_field(line: str, why: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        parse_message_json(line)
    assert why in str(info.value)


def test_comments_and_header_errors() -> None:
    assert parse_comment("/* x */") == "x" and parse_comment('{"a":1}') is None
    with pytest.raises(ValueError, match=r"must end with \*/"):
        parse_comment("/* x")
    with pytest.raises(ValueError, match="invalid header line"):
        parse_header_json('{"file_name":1,"created_at":0,"beacon_interval":1024}')


def test_payload_bytes_inverts_json_payload() -> None:
    for payload in (b'{"a":[1,2]}', b"text", b"\xff", b"", b'[1,"x"]', b"[256]"):
        assert json_payload(payload_bytes(json_payload(payload))) == json_payload(payload)
    assert payload_bytes(json_payload(b"[1,2]")) == b"\x01\x02"  # the one ambiguity of the ndjson rule
    assert dumps({"é": 1}) == '{"é":1}'
    assert escape_controls(b"\xff\t") == "\\xff\\t"


def test_captured_messages_show_their_opened_envelope() -> None:
    headers: dict[str, str | bytes] = {"x-ruststream-retry-count": "1", "raw": b"\xff\n"}
    args = (7, "jobs", 0, 2, None, headers, b"a\nb")
    assert format_captured("log", *args) == "[- | jobs | 2 | 0] {x-ruststream-retry-count=1 raw=\\xff\\n} a\\nb\n"
    assert (
        format_captured("log", *args, header_only=True)
        == "[- | jobs | 2 | 0] {x-ruststream-retry-count=1 raw=\\xff\\n}\n"
    )
    doc = loads_strict(format_captured("ndjson", *args))
    assert doc["header"] == {"stream_key": "jobs", "shard_id": 0, "sequence": 2, "timestamp": None, "line": 7}
    assert doc["headers"] == {"x-ruststream-retry-count": "1", "raw": "\\xff\\n"} and doc["payload"] == "a\nb"
    line = format_captured("stdio", 7, "jobs", 0, 2, T, headers, b"a\nb")
    head = "[2023-09-15T08:39:37.437 | jobs | 2 | 0]"
    assert line.startswith(head + " rs") and line.count("\n") == 1
    assert envelope.decode(line[len(head) + 1 : -1].encode()) == (headers, b"a\nb")
    assert format_captured("stdio", 7, "jobs", 0, 2, T, {}, b"") == head + "\n"
