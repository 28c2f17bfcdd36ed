"""How an app's run stops: a request (``request_stop``, a signal), a second signal, or a broken pipe.

A first request stops the input gracefully (each broker stops or drains it, :meth:`Broker.stop_input`) and
the app shuts down waiting for its delayed copies; a second signal, or a pipe stage's stdout reader going
away, stops at once: pending copies are abandoned and named, and lines read and not delivered are counted.
:class:`Stop` holds that state for one app and says what it means at each point of the run.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from nbkit.runtime import held_signals, logs
from nbkit.runtime.broker import Broker
from nbkit.runtime.run_summary import signal_name

__all__ = ["BROKEN_PIPE", "STOP_SIGNALS", "Stop"]

#: The signals that stop ``run()`` gracefully (a second one stops it at once); SIGHUP where it exists
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
#: The stop reason when the next stage closed a pipe stage's stdout
BROKEN_PIPE = "broken pipe"


class Stop:
    """One app's stop state: whether a stop was requested, why, and whether it is graceful or at once."""

    __slots__ = ("requested", "abandon", "stopping", "signal", "reason")

    def __init__(self) -> None:
        #: a stop was asked for and the loop has not yet acted on it
        self.requested = False
        #: stop at once: abandon the pending copies (a second signal)
        self.abandon = False
        #: a graceful stop is under way: the brokers stop or drain their input
        self.stopping = False
        #: the signal that stopped the run (None: none did)
        self.signal: int | None = None
        #: what ended the run, as the summary says it: "input ended", a signal's name, "broken pipe"
        self.reason = "input ended"

    @property
    def at_once(self) -> bool:
        """Nothing is waited for: a second signal came, or the pipe broke."""
        return self.abandon or self.reason == BROKEN_PIPE

    def output_closed(self, broker: Broker) -> None:
        """A broker's output is gone (a pipe's reader left): stop at once; the summary says what was lost."""
        self.reason = BROKEN_PIPE
        self.requested = True

    def install_signals(self) -> Callable[[], None]:
        """Make SIGINT/SIGTERM/SIGHUP request a stop (in the main thread); returns what puts the old handlers back.

        Signals the ``nbkit`` command held while it started (:mod:`~nbkit.runtime.held_signals`) count as
        if they came now: one starts a graceful stop, two stop at once."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        held = held_signals.take()
        previous: dict[signal.Signals, Any] = {}

        def handler(signum: int, frame: FrameType | None) -> None:
            if self.signal is not None or self.stopping:  # a second signal: stop at once
                self.abandon = True
            else:
                self.signal = signum
            self.requested = True

        for sig in STOP_SIGNALS:
            previous[sig] = signal.signal(sig, handler)
        for signum in held:
            handler(signum, None)

        def restore() -> None:
            for sig, old in previous.items():
                signal.signal(sig, old)

        return restore

    def keep_going(self, brokers: Sequence[Broker], pending: int) -> bool:
        """A stop was requested: whether the run goes on (the brokers stop or drain their input) or ends now.

        The first request asks each broker to stop its input (:meth:`Broker.stop_input`) and says what the
        stage now waits for; a second one (a second signal), a broken pipe, or a broker without such a stop
        (a file's subscriptions end at once) ends the loop. ``pending``: how many delayed copies are held.
        """
        if self.at_once:
            return False
        if self.stopping:  # request_stop() again: nothing new
            self.requested = False
            return True
        self.stopping = True
        self.reason = signal_name(self.signal) if self.signal is not None else "request_stop()"
        stops = [b.stop_input() for b in brokers]
        if any(stop is None for stop in stops):
            return False
        self.requested = False
        if any(stops):
            logs.emit(
                logs.APP,
                logging.WARNING,
                logs.SHUTDOWN_DRAINING,
                signal=self.reason,
                pending=pending,
                then="a second signal stops at once and abandons every pending copy",
            )
        else:
            logs.emit(logs.APP, logging.WARNING, logs.SHUTDOWN_STOPPING, signal=self.reason, pending=pending)
        return True

    def count_unread(self, brokers: Sequence[Broker]) -> None:
        """The stage stops before its input ends: each broker counts (and drops) what it read and did not
        deliver, logged as a loss (ERROR), and what it never read (in the summary)."""
        for b in brokers:
            undelivered = b.count_unread(wait_for_end=self.reason != BROKEN_PIPE)
            if undelivered and self.reason != BROKEN_PIPE:  # (a broken pipe's summary says it)
                logs.emit(logs.APP, logging.ERROR, logs.LINES_NOT_DELIVERED, count=undelivered, stop=self.reason)
