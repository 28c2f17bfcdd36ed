"""Stop signals held while the ``nbkit`` command starts: recorded in order, handed to the run, or let
loose once the imports are done. Processes: tests/reliability/test_startup_signals.py."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from nbkit.runtime import held_signals


@pytest.fixture
def holding() -> Iterator[None]:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    held_signals.hold()
    yield
    held_signals.take()
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_signals_received_while_holding_are_kept_in_order(holding) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # delivered to this (main) thread before kill returns to Python
    os.kill(os.getpid(), signal.SIGINT)
    assert held_signals.take() == [signal.SIGTERM, signal.SIGINT]
    assert held_signals.take() == []


def test_deliver_lets_a_held_sigint_take_effect_as_ctrl_c(holding) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        held_signals.deliver()


def test_deliver_with_nothing_held_does_nothing(holding) -> None:
    held_signals.deliver()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_signal_the_process_was_told_to_ignore_stays_ignored() -> None:
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        held_signals.hold()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
        assert held_signals.take() == []
    finally:
        signal.signal(signal.SIGTERM, old)
