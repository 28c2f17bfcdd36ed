"""The compiled envelope encoder and its pure-Python twin: identical bytes and identical errors.

The compiled :func:`envelope_encode` handles plain headers (lowercase printable ASCII names, printable
ASCII str values, neither padded) and header-less payloads itself and hands everything else to the
pure twin; the random headers below mix both kinds, so each run crosses that border many times.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbkit.wire import envelope
from nbkit.wire.core import compiled_module

COMPILED = compiled_module()
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")
HYPO = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# characters at the borders of the compiled case: space, ':', uppercase, controls, DEL, non-ASCII,
# Rust whitespace, and the information separators Python's strip() removes but Rust's trim keeps
_chars = st.sampled_from(list("az09-_.~ :AZ\t\n\r\x00\x1c\x7f\x85\xa0\u3000é€") + ["\U0001f600"])
_text = st.text(_chars, max_size=8)
_plain = st.text(st.sampled_from(list("abcxyz0123-_.~!/")), max_size=12)
_padded = st.one_of(_plain.map(lambda t: f" {t}"), _plain.map(lambda t: f"{t} "))
_names = st.one_of(_plain, _plain.map(str.upper), _padded, _text, st.just(""))
_values = st.one_of(_plain, _padded, _text, st.binary(max_size=6), st.just(""))
_headers: st.SearchStrategy[dict[str, str | bytes] | None] = st.one_of(
    st.none(),
    st.just({}),
    st.dictionaries(_plain, _plain, max_size=4),  # the compiled case
    st.dictionaries(_names, _values, max_size=4),
)
_payloads = st.one_of(
    st.binary(max_size=40),
    st.text(_chars, max_size=20).map(str.encode),
    st.sampled_from([b"rs1:", b"rs2:abc", b"rs1", b"rs3:x", b" padded", b"padded\t", b"a\nb", b"\x1cx\x1f", b""]),
)


def _outcome(encode, headers, payload, force_text):
    try:
        return encode(headers, payload, force_text=force_text)
    except Exception as exc:  # the error is part of the result compared
        return (type(exc), str(exc))


@HYPO
@given(headers=_headers, payload=_payloads, force_text=st.booleans())
@example(headers={"x-ruststream-retry-count": "1"}, payload=b'{"id": 1}', force_text=True)
@example(headers={"a": "b"}, payload=b"", force_text=False)  # base64 of 1, 2 and 3-byte tails
@example(headers={"a": "bc"}, payload=b"", force_text=False)
@example(headers={"a": "bcd"}, payload=b"", force_text=False)
@example(headers={"": ""}, payload=b"x", force_text=True)
@example(headers={"k": "v:w"}, payload=b"rs1:", force_text=False)
@example(headers={"K": "v"}, payload=b"x", force_text=False)
@example(headers={"k": " v"}, payload=b"x", force_text=False)
@example(headers={"k": "v "}, payload=b"x", force_text=False)
@example(headers={"k ": "v"}, payload=b"x", force_text=False)
@example(headers={"k": "v", "z": b"\xff"}, payload=b"x", force_text=False)
@example(headers=None, payload=b"\t", force_text=True)
@example(headers=None, payload=b"caf\xc3\xa9", force_text=True)
def test_compiled_encode_matches_the_twin(headers, payload, force_text):
    compiled = _outcome(COMPILED.envelope_encode, headers, payload, force_text)
    pure = _outcome(envelope.encode_pure, headers, payload, force_text)
    assert compiled == pure
    assert type(compiled) is type(pure)
    if isinstance(pure, bytes) and pure == payload:
        assert compiled is payload  # a payload sent verbatim is the caller's object, on both twins


@pytest.mark.parametrize(
    ("headers", "payload"),
    [
        ({"k": 1}, b"x"),  # a value that is neither str nor bytes
        ({1: "v"}, b"x"),  # a name that is not a str
        ({"k": "v"}, "text"),  # a str payload
        ({"k": "v"}, bytearray(b"x")),  # a bytes-like payload
        ([("k", "v")], b"x"),  # not a mapping
    ],
)
def test_unusual_arguments_give_the_twins_answer(headers, payload):
    for force_text in (False, True):
        compiled = _outcome(COMPILED.envelope_encode, headers, payload, force_text)
        assert compiled == _outcome(envelope.encode_pure, headers, payload, force_text)


def test_a_mapping_that_is_not_a_dict():
    from types import MappingProxyType

    headers = MappingProxyType({"Retry": "2", "x": "y"})
    assert COMPILED.envelope_encode(headers, b"p", force_text=True) == envelope.encode_pure(
        headers, b"p", force_text=True
    )
    assert envelope.decode(COMPILED.envelope_encode(headers, b"p", force_text=True)) == (
        {"retry": "2", "x": "y"},
        b"p",
    )


@HYPO
@given(
    data=st.one_of(
        _payloads,
        st.builds(lambda h, p: envelope.encode(h, p, force_text=False), _headers, _payloads).filter(
            lambda d: isinstance(d, bytes)
        ),
    ),
    seq=st.one_of(st.integers(0, 2**64 - 1), st.just(0)),
)
@example(data=b"rs1:AAAABWE6IGIKeA==", seq=3)
@example(data=b"rs", seq=1)
@example(data=b"r", seq=1)
def test_decode_delivery_twins_agree(data, seq):
    """A file delivery's headers (with stream-sequence) and payload: the same from both twins."""

    def result(fn):
        try:
            return fn(data, seq)
        except Exception as exc:
            return (type(exc), str(exc))

    assert result(COMPILED.decode_delivery) == result(envelope.decode_delivery_pure)
