"""Flat JSON field columns (nbkit.wire.jsonfields): the pure twin reads what json.loads reads, and the
compiled twin gives the same result as the pure one on random payloads, twisted and damaged ones."""

from __future__ import annotations

import json
import math
from array import array

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbkit.wire import core, jsonfields
from nbkit.wire.jsonfields import MAX_FIELDS, NUMBER_LIMIT, flat_columns, flat_columns_pure

try:
    import nbkit.wire._jsonfields as compiled
except ImportError:  # built only where a C compiler is
    compiled = None

needs_compiled = pytest.mark.skipif(compiled is None, reason="the compiled field parser was not built here")
HYPO = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def buffer(bodies: list[bytes], gap: int = 1, sep: bytes = b"\n") -> tuple[bytes, array]:
    """The payloads back to back, each followed by ``gap`` separator bytes, and where each ends."""
    data = bytearray()
    ends = array("q")
    for body in bodies:
        data += body
        ends.append(len(data))
        data += sep * gap
    return bytes(data), ends


def values(columns: list | None) -> dict | None:
    """The columns as {name: (kind, list of values)}, decoded from their buffers."""
    if columns is None:
        return None
    out = {}
    for name, kind, buffers in columns:
        if kind == "string":
            offsets, text = buffers
            at = array("i", offsets)
            out[name] = (kind, [text[a:b].decode() for a, b in zip(at[:-1], at[1:], strict=True)])
        elif kind == "bool":
            out[name] = (kind, [bool(b) for b in buffers])
        else:
            out[name] = (kind, array("q" if kind == "int64" else "d", buffers).tolist())
    return out


# -- what the pure twin reads --------------------------------------------------------------------------


def test_flat_objects_become_typed_columns_in_the_first_payloads_field_order():
    data, ends = buffer(
        [b'{"id":1,"name":"a\\u00e9","price":2.5,"ok":true}', b'{"ok":false,"price":3,"name":"","id":-7}']
    )
    assert values(flat_columns(data, ends, 0, 2, 1)) == {
        "id": ("int64", [1, -7]),
        "name": ("string", ["a\u00e9", ""]),
        "price": ("double", [2.5, 3.0]),  # an int among floats: the field is double, as pyarrow makes it
        "ok": ("bool", [True, False]),
    }


def test_a_range_of_payloads_and_no_separator():
    data, ends = buffer([b'{"a":1}', b'{"a":2}', b'{"a":3}'], gap=0)
    assert values(flat_columns(data, ends, 1, 3, 0)) == {"a": ("int64", [2, 3])}
    assert flat_columns(data, ends, 2, 2, 0) is None  # no payloads: no columns


@pytest.mark.parametrize(
    "bodies",
    [
        [b'{"a":null}'],  # a null
        [b'{"a":{"b":1}}'],  # nested
        [b'{"a":[1]}'],
        [b"{}"],  # no fields
        [b'[["a",1]]'],  # an array, not an object
        [b'{"a":1}', b'{"b":1}'],  # another field
        [b'{"a":1}', b'{"a":1,"b":2}'],  # a field added
        [b'{"a":1,"b":2}', b'{"a":1}'],  # a field missing
        [b'{"a":1,"a":2}'],  # a duplicate field
        [b'{"a":1}', b'{"a":true}'],  # a field of two kinds
        [b'{"a":"x"}', b'{"a":1}'],
        [b'{"a":9223372036854775808}'],  # beyond int64
        [b'{"a":1e400}'],  # beyond double
        [b'{"a":1e-400}'],  # rounds to zero
        [b'{"a":NaN}'],  # not JSON
        [b'{"a":01}'],
        [b'{"a":1.}'],
        [b'{"a":1}{"a":2}'],  # two objects in one payload
        [b'{"a":"\\ud800"}'],  # a lone surrogate
        [b'{"a":"\xff"}'],  # not UTF-8
        [b'{"a":"\x01"}'],  # a raw control character
        [b""],
        [b"not json"],
        [b'{"a":' + b"1" * (NUMBER_LIMIT + 1) + b".5}"],  # a number longer than NUMBER_LIMIT
        [json.dumps({f"f{i}": i for i in range(MAX_FIELDS + 1)}).encode()],  # too many fields
    ],
)
def test_anything_off_the_flat_shape_gives_none(bodies):
    data, ends = buffer(bodies)
    assert flat_columns_pure(data, ends, 0, len(bodies), 1) is None
    assert flat_columns(data, ends, 0, len(bodies), 1) is None


@pytest.mark.parametrize(
    "body, value",
    [
        (b'{"a":-0.0}', -0.0),
        (b'{"a":0e-400}', 0.0),  # zero, however small the exponent
        (b'{"a":5e-324}', 5e-324),  # the least subnormal
        (b'{"a":1.7976931348623157e308}', 1.7976931348623157e308),
        (b'{"a":0.30000000000000004}', 0.30000000000000004),  # 17 digits: past the fast path
        (b'{"a":123456789012345678.5}', 123456789012345678.5),
        (b'{"a":1E+2}', 100.0),
        (b'{"a":' + b"1" * NUMBER_LIMIT + b"}", None),  # an integer beyond int64 even within the limit
    ],
)
def test_numbers_are_the_values_python_makes_of_them(body, value):
    got = values(flat_columns(*buffer([body]), 0, 1, 1))
    if value is None:
        assert got is None
        return
    assert got is not None
    kind, [number] = got["a"]
    assert kind == "double" and number == value and math.copysign(1, number) == math.copysign(1, value)


def test_integers_at_int64s_ends():
    bodies = [b'{"a":-9223372036854775808}', b'{"a":9223372036854775807}', b'{"a":-0}']
    assert values(flat_columns(*buffer(bodies), 0, 3, 1)) == {"a": ("int64", [-(2**63), 2**63 - 1, 0])}


# -- the twins agree -----------------------------------------------------------------------------------

NUMBER = r"-?(0|[1-9][0-9]{0,25})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,4})?"  # JSON's number grammar
KINDS = [
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(["\U0001f600", "a\x00b", "\\", '"', "\u2028", "\x7f\x1f"]),
]
scalars = st.one_of(
    *KINDS,
    st.integers(2**63, 2**70),
    st.floats(),  # infinity and NaN become the non-JSON "Infinity" and "NaN"
    st.none(),
    st.sampled_from(["\ud800", "\udfff"]),  # lone surrogates
)


@st.composite
def payloads(draw) -> list[bytes]:
    """Objects with the same fields (the usual case), written in various ways, with now and then a twist."""
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "é", "", "a\\"]), min_size=0, max_size=4, unique=True))
    kinds = {name: draw(st.sampled_from(KINDS)) for name in names}
    mixed = st.sampled_from([False] * 9 + [True])  # now and then a value of any kind
    out = []
    for _ in range(draw(st.integers(1, 8))):
        record = {name: draw(scalars if draw(mixed) else kinds[name]) for name in names}
        items = list(record.items())
        if draw(st.booleans()):
            items.reverse()
        text = json.dumps(
            dict(items),
            ensure_ascii=draw(st.booleans()),
            separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\t", " :\r\n")])),
        )
        twist = draw(st.sampled_from([None] * 30 + ["dup", "nested", "pad", "number", "cut"]))
        if twist == "dup" and names:
            text = text[:-1] + ("," if record else "") + json.dumps(names[0]) + ":1}"
        elif twist == "nested":
            text = '{"a":{"x":1}}'
        elif twist == "pad":
            text = " \n" + text + "\t "
        elif twist == "number":
            text = '{"a":' + draw(st.from_regex(NUMBER, fullmatch=True)) + "}"
        elif twist == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        out.append(text.encode("utf-8", "surrogatepass"))
    return out


@needs_compiled
@HYPO
@given(bodies=payloads(), gap=st.integers(0, 2), start=st.integers(0, 2))
@example(bodies=[b'{"a":1}', b'{"a":2.5}', b'{"a":3}'], gap=1, start=0)
@example(bodies=[b'{"a":"\\ud83d\\ude00"}'], gap=0, start=0)
def test_the_compiled_twin_agrees_with_the_pure_one(bodies, gap, start):
    data, ends = buffer(bodies, gap)
    first = min(start, len(bodies))
    assert compiled.flat_columns(data, ends, first, len(bodies), gap) == flat_columns_pure(
        data, ends, first, len(bodies), gap
    )


@needs_compiled
@HYPO
@given(
    bodies=payloads(),
    at=st.integers(0, 10_000),
    byte=st.integers(0, 255),
    how=st.sampled_from(["set", "insert", "delete"]),
)
def test_the_twins_agree_on_damaged_bytes(bodies, at, byte, how):
    data, ends = buffer(bodies, 0)
    raw = bytearray(data)
    if raw:
        i = at % len(raw)
        if how == "set":
            raw[i] = byte
        elif how == "insert":  # the payload boundaries stay where they were: one payload gains a byte
            raw.insert(i, byte)
            ends = array("q", [e + 1 if e > i else e for e in ends])
        else:
            del raw[i]
            ends = array("q", [e - 1 if e > i else e for e in ends])
    damaged = bytes(raw)
    assert compiled.flat_columns(damaged, ends, 0, len(ends), 0) == flat_columns_pure(damaged, ends, 0, len(ends), 0)


@needs_compiled
@given(bodies=payloads())
@settings(max_examples=100, deadline=None)
def test_the_pure_twin_reads_the_values_json_loads_reads(bodies):
    got = values(flat_columns_pure(*buffer(bodies), 0, len(bodies), 1))
    if got is None:
        return
    rows = [json.loads(body) for body in bodies]
    for name, (kind, column) in got.items():
        # a column with floats and integers is a double column, as in pyarrow.json and pandas: an integer
        # there is float(value), rounded where it is beyond 2**53
        want = [float(row[name]) if kind == "double" else row[name] for row in rows]
        assert column == want
        assert {"int64": int, "double": float, "bool": bool, "string": str}[kind] in {type(row[name]) for row in rows}


@needs_compiled
@pytest.mark.parametrize(
    "ends, first, last, gap",
    [
        ([7], 0, 1, 1),
        (array("i", [7]), 0, 1, 1),
        (array("q", [7]), 0, 1, -1),
        (array("q", [7]), 0, 2, 1),
        (array("q", [99]), 0, 1, 1),
        (array("q", [7, 3]), 0, 2, 0),
    ],
)
def test_arguments_off_the_common_shape_get_the_pure_twins_answer(ends, first, last, gap):
    data = b'{"a":1}\n'

    def outcome(fn):
        try:
            return ("ok", fn(data, ends, first, last, gap))
        except Exception as exc:  # noqa: BLE001 - any error, compared
            return ("error", type(exc).__name__, str(exc))

    assert outcome(compiled.flat_columns) == outcome(flat_columns_pure)


def test_compiled_says_which_twin_runs():
    expected = compiled is not None and not core.FORCED_PURE
    assert jsonfields.COMPILED is expected


@needs_compiled
@HYPO
@given(
    texts=st.lists(
        st.one_of(
            st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,5})?", fullmatch=True),
            st.floats(allow_nan=False, allow_infinity=False).map(repr),
            st.integers(-(2**64), 2**64).map(str),
        ),
        min_size=1,
        max_size=4,
    )
)
@example(texts=["9007199254740993", "1.5"])  # an int past 2**53 in a field that becomes double
@example(texts=["2.2250738585072011e-308"])  # near the least normal double
def test_number_texts_agree_and_are_pythons_values(texts):
    bodies = [b'{"a":' + text.encode() + b"}" for text in texts]
    data, ends = buffer(bodies)
    got = compiled.flat_columns(data, ends, 0, len(bodies), 1)
    assert got == flat_columns_pure(data, ends, 0, len(bodies), 1)
    if got is not None:
        kind, column = values(got)["a"]
        expected = [json.loads(text) for text in texts]
        assert column == ([float(v) for v in expected] if kind == "double" else expected)
