"""Tests for the rs1:/rs2: header envelope (runtime-semantics.md §3) and Rust's whitespace."""

from __future__ import annotations

import struct
from base64 import b64encode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbkit.wire import envelope
from nbkit.wire.envelope import RETRY_COUNT_HEADER, decode, encode
from nbkit.wire.limits import SEQUENCE_HEADER
from nbkit.wire.rust_text import RUST_WHITESPACE


def u32(n: int) -> bytes:
    return struct.pack(">I", n)


def rs1(block: bytes, payload: bytes) -> bytes:
    return b"rs1:" + b64encode(u32(len(block)) + block + payload)


def rs2(block: bytes, payload: bytes) -> bytes:
    return b"rs2:" + b64encode(u32(len(block)) + block + payload)


def rs2_field(b: bytes) -> bytes:
    return u32(len(b)) + b


# ------------------------------------------------------------------------------ Rust whitespace


def test_rust_whitespace_set_is_exactly_unicode_white_space():
    expected = {
        0x09,
        0x0A,
        0x0B,
        0x0C,
        0x0D,
        0x20,
        0x85,
        0xA0,
        0x1680,
        0x2028,
        0x2029,
        0x202F,
        0x205F,
        0x3000,
    }
    expected |= set(range(0x2000, 0x200B))
    assert {ord(c) for c in RUST_WHITESPACE} == expected
    assert len(RUST_WHITESPACE) == len(expected)


def test_rust_whitespace_keeps_information_separators_that_python_strip_removes():
    for cp in range(0x1C, 0x20):
        s = f"{chr(cp)}x{chr(cp)}"
        assert s.strip() == "x"  # the Python pitfall
        assert s.strip(RUST_WHITESPACE) == s
        assert s.lstrip(RUST_WHITESPACE) == s
        assert s.rstrip(RUST_WHITESPACE) == s


def test_rust_whitespace_trims_as_str_trim():
    s = "\u3000\t a b \u00a0\r\n\u2028"
    assert s.strip(RUST_WHITESPACE) == "a b"  # str::trim
    assert s.lstrip(RUST_WHITESPACE) == "a b \u00a0\r\n\u2028"  # str::trim_start
    assert s.rstrip(RUST_WHITESPACE) == "\u3000\t a b"  # str::trim_end
    assert "\u200b".strip(RUST_WHITESPACE) == "\u200b"  # zero-width space is not White_Space


# ------------------------------------------------------------------------------------ constants


def test_header_constants():
    assert RETRY_COUNT_HEADER == "x-ruststream-retry-count"
    assert SEQUENCE_HEADER == "stream-sequence"


# ----------------------------------------------------------------------------- when to envelope


@pytest.mark.parametrize("force_text", [False, True])
def test_empty_payload_without_headers_is_verbatim(force_text):
    assert encode({}, b"", force_text=force_text) == b""
    assert encode(None, b"", force_text=force_text) == b""


def test_spec_example_empty_block_empty_payload():
    assert rs1(b"", b"") == b"rs1:AAAAAA=="
    assert decode(b"rs1:AAAAAA==") == ({}, b"")


def test_plain_text_is_verbatim_on_both_transports():
    p = b'{"id":7}'
    assert encode({}, p, force_text=False) is p
    assert encode({}, p, force_text=True) is p


def test_binary_payload_on_stdio_is_rs1_with_empty_block():
    p = b"\x00\xff\xfe binary"
    assert encode({}, p, force_text=True) == b"rs1:" + b64encode(b"\x00\x00\x00\x00" + p)
    assert encode({}, p, force_text=False) is p  # the .ss file is binary-safe
    assert decode(encode({}, p, force_text=True)) == ({}, p)


@pytest.mark.parametrize("p", [b"rs1:", b"rs2:", b"rs1:AAAAAA==", b"rs2:hello world"])
@pytest.mark.parametrize("force_text", [False, True])
def test_look_alike_payload_is_escaped_on_both_transports(p, force_text):
    out = encode({}, p, force_text=force_text)
    assert out == rs1(b"", p)
    assert decode(out) == ({}, p)


@pytest.mark.parametrize("p", [b"rs3:x", b"rs1", b"RS1:x", b"rs", b" rs1:"])
def test_near_look_alikes_stay_verbatim(p):
    assert encode({}, p, force_text=False) is p
    assert decode(p) == ({}, p)


def test_padded_payload_verbatim_on_file_enveloped_on_stdio():
    p = b" padded\n"
    assert encode({}, p, force_text=False) is p
    out = encode({}, p, force_text=True)
    assert out == rs1(b"", p)
    assert decode(out) == ({}, p)


@pytest.mark.parametrize(
    ("payload", "fits"),
    [
        (b"", True),
        (b"plain", True),
        (b"inner\ttab and \r cr", True),
        (b"\x1cseparators\x1f", True),  # not Rust whitespace
        ("caf\u00e9".encode(), True),
        (b"two\nlines", False),
        (b"trailing cr\r", False),
        (b" leading", False),
        (b"trailing\t", False),
        ("nbsp\u00a0".encode(), False),
        ("\u3000ideographic".encode(), False),
        ("\u0085nel".encode(), False),
        (b"\xff", False),
        (b"\xc3", False),
    ],
)
def test_a_payload_travels_verbatim_on_a_line_only_when_it_fits(payload, fits):
    assert (encode({}, payload, force_text=True) is payload) is fits
    assert encode({}, payload, force_text=False) is payload  # (a file frame takes any bytes)


def test_headers_always_take_an_envelope():
    assert encode({"a": "b"}, b"x", force_text=False).startswith(b"rs1:")
    assert encode({"a": "b"}, b"", force_text=True).startswith(b"rs1:")
    assert encode(None, b"x", force_text=False) == b"x"
    assert encode({}, b"x", force_text=True) == b"x"


# ------------------------------------------------------------------------------ layout: rs1/rs2


def test_rs1_layout_lowercases_names_in_insertion_order():
    out = encode({"Content-Type": "text/plain", "X-Retry": "1"}, b"hi", force_text=False)
    assert out == rs1(b"content-type: text/plain\nx-retry: 1\n", b"hi")
    assert decode(out) == ({"content-type": "text/plain", "x-retry": "1"}, b"hi")


def test_duplicate_after_lowercasing_replaces_value_in_place():
    headers = {"A": "1", "b": "2", "a": "3"}
    out = encode(headers, b"", force_text=False)
    assert out == rs1(b"a: 3\nb: 2\n", b"")
    decoded, _ = decode(out)
    assert list(decoded.items()) == [("a", "3"), ("b", "2")]


def test_names_are_ascii_lowercased_only():
    # U+212A KELVIN SIGN lowercases to "k" in Python's str.lower(); Rust's ASCII lowercasing keeps it.
    out = encode({"\u212aELVIN": "1", "\u00c4": "2"}, b"", force_text=False)
    assert decode(out)[0] == {"\u212aelvin": "1", "\u00c4": "2"}


def test_value_may_contain_colon_in_rs1():
    out = encode({"url": "http://x:80/a"}, b"p", force_text=True)
    assert out.startswith(b"rs1:")
    assert decode(out) == ({"url": "http://x:80/a"}, b"p")


def test_bytes_value_that_is_utf8_uses_rs1_and_decodes_as_str():
    out = encode({"k": b"v"}, b"p", force_text=False)
    assert out == rs1(b"k: v\n", b"p")
    assert decode(out) == ({"k": "v"}, b"p")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("k", "two\nlines"),
        ("k", "cr\rinside"),
        ("k", " leading"),
        ("k", "trailing "),
        ("k", "nbsp\u00a0"),
        ("k", b"\xff\x00raw"),
        ("a:b", "v"),
        (" k", "v"),
        ("k\n", "v"),
    ],
)
def test_rs2_is_chosen_when_a_header_does_not_survive_a_line(name, value):
    out = encode({name: value}, b"payload", force_text=False)
    assert out.startswith(b"rs2:")
    raw_value = value if isinstance(value, bytes) else value.encode()
    assert out == rs2(rs2_field(name.encode()) + rs2_field(raw_value), b"payload")
    assert decode(out) == ({name: value}, b"payload")


def test_rs2_keeps_all_headers_when_one_forces_it():
    out = encode({"A": "plain", "B": "x\ny", "C": b"\xfe"}, b"\x00", force_text=True)
    assert out.startswith(b"rs2:")
    decoded, payload = decode(out)
    assert list(decoded.items()) == [("a", "plain"), ("b", "x\ny"), ("c", b"\xfe")]
    assert payload == b"\x00"


# ------------------------------------------------------------------------------------ decoding


def test_rs1_decode_rules():
    block = (
        b"  Name  :  Value \r\n"  # trimmed halves, lowercased name, CR dropped
        b"no colon line\n"  # skipped
        b"k: a:b: c\n"  # split at the first colon
        b"sep: \x1cv\x1f\n"  # U+001C..U+001F are not Rust whitespace
        b"\n"
        b"empty:\n"
        b"last:x\r"  # final line without "\n"; its "\r" is trimmed away as whitespace anyway
    )
    assert decode(rs1(block, b"PAY")) == (
        {"name": "Value", "k": "a:b: c", "sep": "\x1cv\x1f", "empty": "", "last": "x"},
        b"PAY",
    )


def test_rs1_decode_later_duplicate_wins_in_place():
    decoded, _ = decode(rs1(b"a: 1\nb: 2\nA: 3\n", b""))
    assert list(decoded.items()) == [("a", "3"), ("b", "2")]


def test_rs1_decode_is_lossy_utf8():
    assert decode(rs1(b"k: \xffv\n", b"")) == ({"k": "\ufffdv"}, b"")


def test_rs1_is_checked_before_rs2():
    # An rs2-shaped block under the rs1 prefix is read as text lines (here: none with a colon).
    block = rs2_field(b"k") + rs2_field(b"v")
    assert decode(rs1(block, b"p")) == ({}, b"p")


def test_rs2_decode_non_utf8_value_is_bytes_and_name_lowercased():
    block = rs2_field(b"Key") + rs2_field(b"\xff") + rs2_field(b"e") + rs2_field(b"")
    assert decode(rs2(block, b"p")) == ({"key": b"\xff", "e": ""}, b"p")


@pytest.mark.parametrize(
    "block",
    [
        b"\x00\x00",  # name length truncated
        u32(5) + b"abc",  # name truncated
        rs2_field(b"k"),  # value length missing
        rs2_field(b"k") + b"\x00\x00\x00",  # value length truncated
        rs2_field(b"k") + u32(9) + b"v",  # value truncated
        rs2_field(b"\xff") + rs2_field(b"v"),  # name not UTF-8
    ],
)
def test_rs2_malformed_block_reads_as_raw(block):
    data = rs2(block, b"payload")
    result = decode(data)
    assert result == ({}, data)
    assert result[1] is data


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"r",
        b"rs",
        b"rs1:",  # decodes to zero bytes: shorter than 4
        b"rs1:AAA=",  # 2 bytes: shorter than 4
        b"rs1:AAAAAA",  # missing padding
        b"rs1:AAAAAA=",  # wrong padding
        b"rs1:AAAA==",  # excess padding after a full quantum
        b"rs1:AAAAAB==",  # non-zero trailing bits (Rust rejects)
        b"rs1:AAAA AA==",  # whitespace
        b"rs1:AAAAAA==\n",  # trailing newline
        b"rs1:AA-_AA==",  # URL-safe alphabet
        b"rs1:!!!!",
        b"rs1:\xff\xfe\xfd\xfc",  # not UTF-8
        b"rs1:AAAAAQ==",  # block length 1 runs past the end
        b"rs2:" + b64encode(u32(100) + b"short"),
        b"rs3:AAAAAA==",
        b"Rs1:AAAAAA==",
    ],
)
def test_malformed_envelopes_come_back_raw(data):
    result = decode(data)
    assert result == ({}, data)
    assert result[1] is data


def test_common_path_returns_the_same_object():
    data = b'{"id": 7}' * 100
    headers, payload = decode(data)
    assert headers == {}
    assert payload is data


# ----------------------------------------------------------------------------------- properties

_WEIRD = list(" \t\r\n:\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\u212aAZaz")
_chars = st.one_of(st.sampled_from(_WEIRD), st.characters(codec="utf-8"))
_names = st.text(_chars, max_size=6)
_values = st.one_of(st.text(_chars, max_size=8), st.binary(max_size=8))
_headers = st.dictionaries(_names, _values, max_size=4)
_payloads = st.one_of(
    st.binary(max_size=24),
    st.text(_chars, max_size=12).map(str.encode),
    st.sampled_from([b"rs1:", b"rs2:x", b"rs1:AAAAAA==", b" x", b"x\n"]),
)


def _ascii_lower(s: str) -> str:
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def _expected_headers(headers: dict) -> list[tuple[str, str | bytes]]:
    out: dict[str, str | bytes] = {}
    for k, v in headers.items():
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError:
                pass
        out[_ascii_lower(k)] = v
    return list(out.items())


def _fits_on_a_line(payload: bytes) -> bool:
    """§3.1 item 3: UTF-8, no ``\\n``, and nothing Rust's ``trim`` would remove."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return "\n" not in text and text.strip(RUST_WHITESPACE) == text


def _survives(x: str | bytes) -> bool:
    if isinstance(x, bytes):
        try:
            x = x.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return "\n" not in x and "\r" not in x and x.strip(RUST_WHITESPACE) == x


@settings(max_examples=300, deadline=None)
@given(headers=_headers, payload=_payloads, force_text=st.booleans())
def test_round_trip(headers, payload, force_text):
    out = encode(headers, payload, force_text=force_text)
    expect_envelope = (
        bool(headers) or payload.startswith((b"rs1:", b"rs2:")) or (force_text and not _fits_on_a_line(payload))
    )
    assert (out is not payload) is expect_envelope
    decoded, body = decode(out)
    assert body == payload
    if expect_envelope:
        lowered = {_ascii_lower(k): v for k, v in headers.items()}
        line_safe = all(":" not in k and _survives(k) and _survives(v) for k, v in lowered.items())
        assert out[:4] == (b"rs1:" if line_safe else b"rs2:")
        assert list(decoded.items()) == _expected_headers(headers)
    else:
        assert out == payload
        assert decoded == {}
    if force_text:
        text = out.decode("utf-8")
        assert "\n" not in text
        assert text.strip(RUST_WHITESPACE) == text


@settings(max_examples=200, deadline=None)
@given(
    data=st.one_of(
        st.binary(max_size=40),
        st.binary(max_size=30).map(lambda b: b"rs1:" + b),
        st.binary(max_size=30).map(lambda b: b"rs2:" + b64encode(b)),
    )
)
def test_decode_never_raises(data):
    headers, payload = decode(data)
    if not headers and payload is not data:
        # Only a genuine envelope with no headers may return a new payload object.
        assert data.startswith((b"rs1:", b"rs2:"))


def test_module_exports():
    assert set(envelope.__all__) == {
        "RETRY_COUNT_HEADER",
        "copy_retry_count",
        "decode",
        "decode_delivery",
        "encode",
        "retry_count",
        "retry_count_problem",
    }
