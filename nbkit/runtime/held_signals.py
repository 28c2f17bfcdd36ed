"""Stop signals that arrive while the ``nbkit`` command is still starting, held until a run can act on them.

Importing the CLI, pandas and a service's module takes most of a second (several on a loaded machine).
A SIGINT or SIGTERM in that time used to kill the stage with a traceback, no run summary and the lines
waiting in its input pipe gone. :func:`hold` (called first thing by :mod:`nbkit.command`) records them
instead; ``App.run`` takes them when it installs its own handlers (:meth:`~nbkit.runtime.stopping.Stop.
install_signals`), so the run starts as if they had come the moment it began; any other command lets them
take effect as soon as its imports are done (:func:`deliver`). Light on purpose: only the standard library.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["deliver", "hold", "take"]

#: the signals held while starting: the ones that stop a run (stopping.STOP_SIGNALS, without its imports)
_HELD = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
_previous: dict[int, Any] = {}
_received: list[int] = []


def _record(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)


def hold() -> None:
    """From now on, record the stop signals instead of acting on them (main thread only; idempotent)."""
    if _previous or threading.current_thread() is not threading.main_thread():
        return
    for sig in _HELD:
        if signal.getsignal(sig) is not signal.SIG_IGN:  # one the shell told this process to ignore stays so
            _previous[sig] = signal.signal(sig, _record)


def take() -> list[int]:
    """Stop holding: put the earlier handlers back and return the signals received meanwhile, in order."""
    for sig, old in _previous.items():
        signal.signal(sig, old)
    _previous.clear()
    received = _received[:]
    _received.clear()
    return received


def deliver() -> None:
    """Stop holding and let the first signal received meanwhile take effect now, as it would have then
    (SIGINT raises KeyboardInterrupt, SIGTERM and SIGHUP end the process by default)."""
    received = take()
    if received:
        signal.raise_signal(received[0])
