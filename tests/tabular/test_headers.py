"""The headers column's values: read-only dicts that behave as dicts everywhere else."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from nbkit.tabular.headers import EMPTY_HEADERS, FrozenHeaders, empty_headers, frozen_headers


def test_empty_column_shares_one_read_only_empty_dict():
    column = empty_headers(3)
    assert column.dtype == object and len(column) == 3
    assert all(value is EMPTY_HEADERS for value in column)
    with pytest.raises(TypeError, match="read-only"):
        column[0]["k"] = "v"
    assert EMPTY_HEADERS == {}


def test_frozen_headers_keep_the_shared_empty_value_and_copy_the_rest():
    assert frozen_headers({}) is EMPTY_HEADERS
    given = {"k": "v"}
    held = frozen_headers(given)
    given["k"] = "changed"  # the frame's value does not follow the dict it was made from
    assert held == {"k": "v"}


@pytest.mark.parametrize(
    "change",
    [
        lambda h: h.__setitem__("a", "1"),
        lambda h: h.__delitem__("k"),
        lambda h: h.update({"a": "1"}),
        lambda h: h.setdefault("a", "1"),
        lambda h: h.pop("k"),
        lambda h: h.popitem(),
        lambda h: h.clear(),
        lambda h: h.__ior__({"a": "1"}),
    ],
)
def test_every_change_is_refused_with_the_way_out(change):
    headers = FrozenHeaders({"k": "v"})
    with pytest.raises(TypeError, match=r"dict\(headers\) or headers.copy\(\) gives a dict you can change"):
        change(headers)
    assert headers == {"k": "v"}


def test_copies_are_plain_dicts_and_round_trips_keep_the_type():
    headers = FrozenHeaders({"k": "v", "b": b"\x00"})
    assert type(headers.copy()) is dict and type(headers | {"a": "1"}) is dict
    for back in (pickle.loads(pickle.dumps(headers)), copy.deepcopy(headers), copy.copy(headers)):
        assert type(back) is FrozenHeaders and back == headers
    assert json.loads(json.dumps(FrozenHeaders({"k": "v"}))) == {"k": "v"}
    assert repr(headers) == "{'k': 'v', 'b': b'\\x00'}"
