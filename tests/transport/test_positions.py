"""FilePosition: the five kinds, a validating constructor, equality, hashing and the repr of its class methods."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from nbkit import FilePosition
from nbkit.transport.positions import POSITION_KINDS


def test_the_class_methods_make_each_kind():
    made = [
        FilePosition.beginning(),
        FilePosition.end(),
        FilePosition.sequence(42),
        FilePosition.timestamp(dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        FilePosition.beacon(3),
    ]
    assert [p.kind for p in made] == list(POSITION_KINDS)
    assert [repr(p) for p in made] == [
        "FilePosition.beginning()",
        "FilePosition.end()",
        "FilePosition.sequence(42)",
        "FilePosition.timestamp(1704067200000)",
        "FilePosition.beacon(3)",
    ]


def test_equal_positions_are_equal_and_hash_alike():
    assert FilePosition("end") == FilePosition.end()
    assert FilePosition("sequence", 7) == FilePosition.sequence(7)
    assert FilePosition.sequence(7) != FilePosition.beacon(7)
    assert len({FilePosition.sequence(7), FilePosition("sequence", 7), FilePosition.end()}) == 2


@pytest.mark.parametrize("kind", ["bogus", "start", "Beginning", "", None, 3])
def test_an_unknown_kind_is_refused_naming_the_kinds(kind):
    with pytest.raises(ValueError) as info:
        FilePosition(kind)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"{kind!r} is not a FilePosition kind; the kinds are beginning, end, sequence, timestamp, beacon"
    )


@pytest.mark.parametrize(
    ("kind", "value", "words"),
    [
        ("beginning", 0, "FilePosition.beginning() takes no value"),
        ("end", 5, "FilePosition.end() takes no value"),
        ("sequence", None, "a sequence position needs an integer value"),
        ("timestamp", 1.5, "a timestamp position needs an integer value"),
        ("beacon", True, "a beacon position needs an integer value"),
    ],
)
def test_a_value_that_does_not_fit_the_kind_is_refused(kind, value, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        FilePosition(kind, value)


def test_the_class_methods_check_their_ranges():
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        FilePosition.sequence(-1)
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        FilePosition.sequence(1 << 64)
    with pytest.raises(ValueError, match="non-negative"):
        FilePosition.beacon(-2)
    # a naive datetime is UTC, the one rule for naive times (as for read_stream's start/end)
    assert FilePosition.timestamp(dt.datetime(2024, 1, 1)) == FilePosition.timestamp(
        dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    )
