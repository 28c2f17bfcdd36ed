"""``new_slotted``, how the transports make a Delivery from its fields: both twins give ``cls(*values)``."""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, field

import pytest

from nbkit import Delivery
from nbkit.runtime import delivery as delivery_module
from nbkit.wire.core import compiled_module
from nbkit.wire.deliveries import file_deliveries_pure

FIELDS = (b"hi", {"stream-sequence": "7"}, "jobs", 0, 7, 1704067200000, "pipe", "work", None, 3)


def _twins():
    compiled = compiled_module()
    return [delivery_module.new_slotted_pure] + ([] if compiled is None else [compiled.new_slotted])


def _state(obj: object) -> object:
    """The fields of a Delivery (or what was made instead), comparable across objects."""
    if isinstance(obj, Delivery):
        return type(obj), [getattr(obj, name) for name in Delivery.__slots__]
    return type(obj), getattr(obj, "__dict__", obj)


def _made(make, cls, values):
    try:
        return _state(make(cls, values))
    except Exception as exc:  # noqa: BLE001 - the point is to compare any error
        return "error", type(exc).__name__, str(exc)


@dataclass(slots=True)
class _Checked:
    a: int
    b: int = 2

    def __post_init__(self) -> None:
        self.b += 10


@dataclass(slots=True)
class _Factory:
    a: int
    b: list = field(default_factory=list)


@dataclass
class _NoSlots:
    a: int
    b: int = 0


@dataclass(slots=True)
class _Derived(_NoSlots):
    c: int = 5


@pytest.mark.parametrize(
    ("cls", "values"),
    [
        (Delivery, FIELDS),
        (Delivery, FIELDS[:8]),  # the fields after them take their defaults
        (Delivery, (*FIELDS, {"json": 1})),  # every field given
        (Delivery, FIELDS[:5]),  # too few
        (Delivery, (*FIELDS, None, None)),  # too many
        (_Checked, (1,)),  # __post_init__ runs
        (_Factory, (1,)),
        (_NoSlots, (1, 2)),
        (_Derived, (1, 2, 3)),
        (dict, ()),
        (int, ("7",)),
    ],
)
def test_both_twins_make_what_the_class_makes(cls, values):
    want = _made(delivery_module.new_slotted_pure, cls, values)
    assert want == _made(lambda cls, values: cls(*values), cls, values)
    for make in _twins():
        assert _made(make, cls, values) == want


@pytest.mark.parametrize("make", _twins())
def test_a_delivery_made_holds_its_values_and_is_collectable(make):
    payload = b"payload-%d" % id(make)
    before = sys.getrefcount(payload)
    made = make(Delivery, (payload, *FIELDS[1:]))
    assert made.payload is payload and made.attempt == 1 and made._cache is None
    assert gc.is_tracked(made)  # it holds a dict: the collector must see it
    assert sys.getrefcount(payload) == before + 1
    del made
    assert sys.getrefcount(payload) == before


def test_the_compiled_file_deliveries_make_deliveries_as_the_pure_twin():
    compiled = compiled_module()
    if compiled is None:
        pytest.skip("the compiled core is not built")
    messages = [("orders", 0, n, 1704067200000 + n, b'{"id": %d}' % n, 64 * n, 64 * n + 40) for n in range(1, 4)]
    got = [_state(d) for d in compiled.file_deliveries(messages, "work", Delivery)]
    assert got == [_state(d) for d in file_deliveries_pure(messages, "work", Delivery)]
    assert [state[1][4] for state in got] == [1, 2, 3]
