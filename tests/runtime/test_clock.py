"""The injected clocks: the virtual clock starts at 2024-01-01Z and moves only when told to; the clock owns
waiting (how long to sleep for a deadline, and what happens when it comes)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from nbkit import App, Clock, HandlerOutcome, RealClock, StdioBroker, VirtualClock

from .helpers import START


def test_virtual_clock_starts_at_2024_and_moves_only_forward():
    clock = VirtualClock()
    assert clock.now() == START == dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()
    assert clock.advance(1.5) == START + 1.5
    clock.set(START + 1.5)  # where it is: allowed
    clock.set(START + 10)
    assert clock.now() == START + 10
    with pytest.raises(ValueError, match="cannot go back"):
        clock.advance(-1)
    assert repr(VirtualClock()) == "VirtualClock(2024-01-01T00:00:00+00:00)"


def test_virtual_clock_set_refuses_going_backwards():
    clock = VirtualClock(100.0)
    clock.set(130.0)
    with pytest.raises(ValueError, match=r"cannot go back: set\(120\.0\) is 10 s before its time 130\.0; use reset"):
        clock.set(120.0)
    assert clock.now() == 130.0
    clock.reset()
    assert clock.now() == 100.0


def test_virtual_clock_start():
    assert VirtualClock(dt.datetime(2025, 6, 1, 12, tzinfo=dt.UTC)).now() == 1748779200.0
    assert VirtualClock(100.0).now() == 100.0
    # a naive datetime is UTC, the one rule for naive times
    assert VirtualClock(dt.datetime(2025, 6, 1, 12)).now() == 1748779200.0


def test_real_clock():
    clock = RealClock()
    assert abs(clock.now() - time.time()) < 1


@pytest.mark.parametrize("clock", [RealClock(), VirtualClock()], ids=["real", "virtual"])
def test_both_clocks_are_clocks(clock):
    assert isinstance(clock, Clock)
    assert not hasattr(clock, "virtual")  # the app never asks which clock it has


def test_the_virtual_clock_waits_by_jumping():
    clock = VirtualClock(100.0)
    assert clock.sleep_time(160.0) == 0.0  # no real time
    assert clock.now() == 100.0  # asking does not move it
    clock.reach(160.0)
    assert clock.now() == 160.0
    clock.reach(130.0)  # a deadline already past: no move, no error
    assert clock.now() == 160.0


def test_the_real_clock_waits_by_sleeping():
    clock = RealClock()
    now = clock.now()
    assert 59 < clock.sleep_time(now + 60) <= 60
    assert clock.sleep_time(now - 60) == 0.0
    clock.reach(now + 3600)  # real time reaches deadlines by itself: nothing happens
    assert clock.now() < now + 60


class RecordingClock:
    """A third clock (any object with now / sleep_time / reach will do): it jumps like a virtual clock and
    records the deadlines the app asked about, so the test sees the app wait through the protocol only."""

    def __init__(self) -> None:
        self.t = START
        self.asked: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep_time(self, deadline: float) -> float:
        self.asked.append(deadline)
        return 0.0

    def reach(self, deadline: float) -> None:
        self.t = max(self.t, deadline)


def test_an_app_waits_through_the_clock_protocol_only():
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=out)

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def handle(d):
        return HandlerOutcome.retry_after(30 if d.payload == b"a" else 45)

    clock = RecordingClock()
    app = App(broker, clock=clock)
    app.run()  # the input ends; the run then waits for the two copies on the clock
    assert [e.written_at for e in app.events] == [START + 30, START + 45]
    assert [line.split(" | ")[0] for line in out] == ["[2024-01-01T00:00:30", "[2024-01-01T00:00:45"]
    assert START + 30 in clock.asked and START + 45 in clock.asked
    assert clock.now() == START + 45
