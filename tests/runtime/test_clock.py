"""The injected clocks: the virtual clock starts at 2024-01-01Z and moves only when told to."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from nbkit import RealClock, VirtualClock

from .helpers import START


def test_virtual_clock_starts_at_2024_and_moves_only_forward():
    clock = VirtualClock()
    assert clock.virtual is True
    assert clock.now() == START == dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()
    assert clock.advance(1.5) == START + 1.5
    clock.set(START)  # never backwards
    assert clock.now() == START + 1.5
    clock.set(START + 10)
    assert clock.now() == START + 10
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert repr(VirtualClock()) == "VirtualClock(2024-01-01T00:00:00+00:00)"


def test_virtual_clock_start():
    assert VirtualClock(dt.datetime(2025, 6, 1, 12, tzinfo=dt.UTC)).now() == 1748779200.0
    assert VirtualClock(100.0).now() == 100.0
    with pytest.raises(ValueError, match="aware"):
        VirtualClock(dt.datetime(2025, 6, 1))


def test_real_clock():
    clock = RealClock()
    assert clock.virtual is False
    assert abs(clock.now() - time.time()) < 1
