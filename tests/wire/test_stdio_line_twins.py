"""The compiled line-to-delivery and copy-line functions and their pure-Python twins: same results, same errors.

``line_delivery`` (parse a stdio line, resolve its missing fields with the sequence counters, decode its
envelope) and ``copy_line`` (a payload's envelope on a line) run on random lines, counters, headers and
payloads; the counters dict is part of the result compared. Skipped where the core was not built.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbkit.wire import stdio_line
from nbkit.wire.core import compiled_module
from nbkit.wire.envelope import encode

COMPILED = compiled_module()
pytestmark = pytest.mark.skipif(COMPILED is None, reason="the compiled core is not built")
HYPO = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_keys = st.one_of(
    st.sampled_from(["jobs", "a.b", "k" * 250, "x y", "é", ""]), st.from_regex(r"[a-z.]{1,6}", fullmatch=True)
)
_times = st.sampled_from(
    ["2024-01-01T00:00:00", "2024-01-01T00:00:01.5", "2024-13-01T00:00:00", "+2024-01-01T00:00:00"]
)
_nums = st.one_of(st.integers(0, 2**64 + 3).map(str), st.sampled_from(["+7", "-1", "", "x"]))
_payloads = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["rs1:", "rs2:abc", "rs", "r", "rs1:AAAAAA==", "rs1:AAAABWE6IGIKeA==", " padded ", "{}"]),
    st.builds(
        lambda h, p: encode(h, p, force_text=True).decode("utf-8"),
        st.dictionaries(st.sampled_from(["a", "x-ruststream-retry-count", "stream-sequence"]), st.text(max_size=4)),
        st.binary(max_size=8),
    ),
)


@st.composite
def lines(draw) -> str:
    """Lines with every kind of header (full, partial, none, malformed) and payloads with and without envelopes."""
    fields = draw(st.lists(st.one_of(_times, _keys, _nums), min_size=0, max_size=4))
    head = draw(st.sampled_from(["", "[" + " | ".join(fields) + "] ", "[" + "|".join(fields) + "]"]))
    return head + draw(_payloads)


_u64s = st.one_of(
    st.integers(0, 2**64 + 3).map(str),
    st.sampled_from(["+7", "007", "18446744073709551615", "18446744073709551616", "0" * 30 + "18446744073709551615"]),
)


@st.composite
def canonical(draw) -> str:
    """``[ts | key | seq]`` / ``[ts | key | seq | shard]`` and a payload: the lines the compiled twin reads itself
    (ASCII, one space, a payload starting with no whitespace), with every field at and past its limits."""
    ts = draw(
        st.sampled_from(
            [
                "2024-01-01T00:00:00",
                "2024-02-29T23:59:59.123456789",
                "-0001-01-01T00:00:00",
                "2024-01-01T00:00:00.1234567890",
                "2023-02-29T00:00:00",
                "2024-01-01T24:00:00",
            ]
        )
    )
    key = draw(
        st.one_of(st.from_regex(r"[A-Za-z0-9._-]{1,8}", fullmatch=True), st.sampled_from(["k" * 249, "k" * 250]))
    )
    fields = [ts, key, draw(_u64s)] + ([draw(_u64s)] if draw(st.booleans()) else [])
    payload = draw(st.one_of(_payloads, st.sampled_from(["", " ", " x", "\tx", "x ", "é", "\x85x"])))
    return "[" + " | ".join(fields) + "] " + payload


_counters = st.dictionaries(
    st.tuples(st.sampled_from(["jobs", "broadcast", "a.b"]), st.integers(0, 2)),
    st.one_of(st.integers(0, 10), st.just(2**64 - 1)),
    max_size=3,
)


def _delivery(fn, line, lineno, counters):
    mine = dict(counters)
    try:
        return fn(line, lineno, mine), mine
    except Exception as exc:  # the error is part of the result compared
        return (type(exc), str(exc)), mine


@HYPO
@given(line=st.one_of(lines(), canonical()), lineno=st.one_of(st.none(), st.integers(1, 99)), counters=_counters)
@example(line="[2024-01-01T00:00:00 | jobs | 7] hello", lineno=1, counters={})
@example(line="[2024-01-01T00:00:00 | jobs] rs1:AAAAAA==", lineno=1, counters={("jobs", 0): 2**64 - 1})
@example(
    line="[2024-01-01T00:00:00 | jobs | 3] rs1:AAAAG3gtcnVzdHN0cmVhbS1yZXRyeS1jb3VudDogMQp4", lineno=2, counters={}
)
@example(line="hello", lineno=None, counters={})
@example(line="[2024-01-01T00:00:00 | jobs | 18446744073709551615 | +0] x", lineno=None, counters={})
@example(line="[2024-01-01T00:00:00 | jobs | 18446744073709551616] x", lineno=None, counters={})
@example(line="[2024-01-01T00:00:00 | jobs | 000000000000000000000018446744073709551615] x", lineno=1, counters={})
@example(line="[2024-01-01T00:00:00 | jobs | 1]  two spaces", lineno=1, counters={})
@example(line="[2024-01-01T00:00:00 | jobs | 1] é", lineno=1, counters={})
@example(line="[2024-13-01T00:00:00 | jobs | 1] x", lineno=4, counters={})
@example(line="[jobs | x] y", lineno=5, counters={})
def test_line_delivery_twins_agree(line, lineno, counters):
    assert _delivery(COMPILED.line_delivery, line, lineno, counters) == _delivery(
        stdio_line.line_delivery_pure, line, lineno, counters
    )


def test_line_delivery_twins_agree_on_a_run_of_lines():
    """The timestamp the compiled twin keeps from the line before never leaks into the next line's result."""
    run = [
        "[2024-01-01T00:00:00 | jobs | 0] a",
        "[2024-01-01T00:00:00 | jobs | 1] b",
        "[2024-01-01T00:00:00.5 | jobs | 2] c",
        "[2024-01-01T00:00:01 | jobs] d",
        "[2024-01-01T00:00:0 | jobs] e",
        "[2024-01-01T00:00:00 | jobs] f",
    ]
    got = [_delivery(COMPILED.line_delivery, line, n, {}) for n, line in enumerate(run, 1)]
    want = [_delivery(stdio_line.line_delivery_pure, line, n, {}) for n, line in enumerate(run, 1)]
    assert got == want
    assert [r[0][0] for r in got[:4]] == [1704067200000, 1704067200000, 1704067200500, 1704067201000]


_header_values = st.one_of(st.text(max_size=6), st.sampled_from(["1", " padded", "UPPER"]))


@HYPO
@given(
    ts=st.one_of(st.integers(0, 10**13), st.integers(-(2**70), 2**70)),
    key=_keys,
    seq=st.integers(0, 2**64 - 1),
    headers=st.one_of(
        st.none(),
        st.just({}),
        st.dictionaries(st.sampled_from(["a", "x-ruststream-retry-count", "Up", " s"]), _header_values, max_size=3),
    ),
    payload=st.one_of(st.binary(max_size=20), st.sampled_from([b"rs1:x", b"a\nb", b" x", b"\xff", b""])),
)
@example(ts=1704067200000, key="jobs.retry", seq=0, headers={"x-ruststream-retry-count": "1"}, payload=b"{}")
@example(ts=1704067200000, key="jobs.retry", seq=0, headers=None, payload=b"plain")
def test_copy_line_twins_agree(ts, key, seq, headers, payload):
    def result(fn):
        try:
            return fn(ts, key, seq, headers, payload)
        except Exception as exc:
            return (type(exc), str(exc))

    assert result(COMPILED.copy_line) == result(stdio_line.copy_line_pure)
