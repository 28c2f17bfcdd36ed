"""What a run did, counted: the one summary line ``nbkit run`` writes at exit, and its exit status.

An :class:`~nbkit.App` counts as it settles (deliveries per outcome, copies written, dead letters,
rejects, each kind of loss); a pipe broker counts what became of its stdin lines
(:class:`~nbkit.runtime.stdio_broker.PipeInputCounts`). :class:`RunSummary` puts both together, says
it in one line, and maps it to the exit status the CLI reference documents: a run that lost a copy
or dropped a line it had read exits :data:`EXIT_LOST` whatever ended it, a broken pipe exits 141, a
signal 128 + its number.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbkit.runtime.broker import Broker

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_LOST",
    "EXIT_OK",
    "RunCounts",
    "RunSummary",
    "signal_name",
]

EXIT_OK = 0
#: Copies were abandoned or lost, or lines read were never delivered (whatever else ended the run).
EXIT_LOST = 3
#: stdout's reader went away (128 + SIGPIPE), as a shell reports for ``cat`` in the same spot.
EXIT_BROKEN_PIPE = 141


@dataclass
class RunCounts:
    """The app's running counts (kept for the whole run; ``App.events`` keeps only the latest events).

    ``outcomes`` counts settled deliveries per handler outcome (a handler that raised counts as ``drop``,
    and in ``raised`` too). ``copies`` are retry copies published, ``dead_letters`` copies published to
    a dead-letter key; ``rejected`` deliveries reached the cap with no dead-letter key; ``requeued_nothing``
    are ``retry()`` outcomes without ``max_attempts`` or ``dead_letter`` (nothing is written: the message
    is gone). Losses: ``abandoned`` delayed copies, ``copies_lost`` copies whose publish failed.
    """

    outcomes: dict[str, int] = field(default_factory=dict)
    raised: int = 0
    copies: int = 0
    dead_letters: int = 0
    rejected: int = 0
    requeued_nothing: int = 0
    abandoned: int = 0
    copies_lost: int = 0
    #: how many times input waited because ``max_pending`` copies were pending
    backpressure: int = 0

    def outcome(self, kind: str, n: int = 1) -> None:
        """Count ``n`` settled deliveries whose outcome is ``kind``."""
        self.outcomes[kind] = self.outcomes.get(kind, 0) + n


@dataclass
class RunSummary:
    """One run of an app, counted; ``to_text()`` is the line ``nbkit run`` writes at exit.

    Parameters
    ----------
    counts : RunCounts
        The app's counts.
    stop : str
        What ended the run: ``"input ended"``, ``"SIGINT"`` (or another signal's name), ``"broken pipe"``.
    signal : int, optional
        The signal that stopped it, if one did.
    lines : dict, optional
        What became of stdin's lines (a pipe stage): ``read``, ``blank_skipped``, ``bad_skipped``,
        ``unsubscribed``, ``bad_retry_counts``, ``undelivered``, ``unread``, ``unread_exact``.
    stdout_written, stdout_lost : int
        Lines a pipe stage wrote to stdout, and lines lost when its reader had gone.
    pending : int
        Delayed copies still pending when the summary was made.

    Examples
    --------
    >>> counts = RunCounts(outcomes={"retry_after": 3}, copies=2, abandoned=1)
    >>> summary = RunSummary(counts, stop="SIGINT", signal=2, lines={"read": 3})
    >>> print(*summary.to_text().split("; "), sep="\\n")
    run summary: stopped by SIGINT
    3 deliveries (retry_after 3)
    2 copies published
    lost: 1 copy abandoned
    stdout: 0 lines written
    3 lines read
    >>> summary.exit_status
    3
    """

    counts: RunCounts
    stop: str = "input ended"
    signal: int | None = None
    lines: dict[str, int | bool] | None = None
    stdout_written: int = 0
    stdout_lost: int = 0
    pending: int = 0

    @classmethod
    def collect(
        cls, counts: RunCounts, brokers: Iterable[Broker], *, stop: str, signal: int | None, pending: int
    ) -> RunSummary:
        """The summary of an app's run: its ``counts``, and what its ``brokers`` say of their input and output.

        Parameters
        ----------
        counts : RunCounts
            The app's counts.
        brokers : iterable of Broker
            The app's brokers: their input counts are added up (a pipe stage's lines), and their output's.
        stop : str
            What ended the run.
        signal : int, optional
            The signal that stopped it, if one did.
        pending : int
            Delayed copies still pending.

        Returns
        -------
        RunSummary
        """
        lines: dict[str, int | bool] | None = None
        written = lost = 0
        for b in brokers:
            got = b.input_counts()
            if got is not None:
                if lines is None:
                    lines = dict(got)
                else:
                    for k, v in got.items():
                        lines[k] = (lines[k] and v) if isinstance(v, bool) else int(lines[k]) + v
            w, lo = b.output_counts()
            written += w
            lost += lo
        return cls(
            counts,
            stop=stop,
            signal=signal,
            lines=lines,
            stdout_written=written,
            stdout_lost=lost,
            pending=pending,
        )

    @property
    def lost(self) -> int:
        """Copies and lines lost: abandoned or failed copies, stdout lines lost to a broken pipe, and lines
        read but never delivered."""
        c = self.counts
        undelivered = int(self.lines.get("undelivered", 0)) if self.lines else 0
        return c.abandoned + c.copies_lost + self.stdout_lost + undelivered

    @property
    def exit_status(self) -> int:
        """141 after a broken pipe; :data:`EXIT_LOST` (3) when anything was lost; 128 + the signal's number
        after a signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP); else 0."""
        if self.stop == "broken pipe":
            return EXIT_BROKEN_PIPE
        if self.lost:
            return EXIT_LOST
        if self.signal is not None:
            return 128 + self.signal
        return EXIT_OK

    def to_text(self) -> str:
        """The summary as one line (counts that are 0 are left out, except deliveries and copies).

        Returns
        -------
        str
        """
        c = self.counts
        parts = [f"stopped by {self.stop}" if self.stop != "input ended" else "input ended"]
        total = sum(c.outcomes.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(c.outcomes.items()) if n)
        raised = f", {c.raised} raised" if c.raised else ""
        parts.append(f"{_n(total, 'delivery', 'deliveries')}" + (f" ({kinds}{raised})" if kinds else ""))
        parts.append(", ".join(_written(c)))
        lost = []
        if c.abandoned:
            lost.append(_n(c.abandoned, "copy", "copies") + " abandoned")
        if c.copies_lost:
            lost.append(_n(c.copies_lost, "copy", "copies") + " not published")
        if self.stdout_lost:
            lost.append(
                _n(self.stdout_lost, "stdout line", "stdout lines") + " (copies, publishes) lost to the broken pipe"
            )
        lines = self.lines or {}
        if lines.get("undelivered"):
            lost.append(_n(int(lines["undelivered"]), "line", "lines") + " read and not delivered")
        if lost:
            parts.append("lost: " + ", ".join(lost))
        if self.pending:
            parts.append(_n(self.pending, "copy", "copies") + " still pending")
        if self.lines is not None:
            parts.append(f"stdout: {_n(self.stdout_written, 'line', 'lines')} written")
        if self.lines is not None:
            text = _n(int(lines.get("read", 0)), "line", "lines") + " read"
            extra = []
            for key, what in (
                ("unsubscribed", "for no subscription"),
                ("blank_skipped", "blank skipped"),
                ("bad_skipped", "bad skipped"),
                ("bad_retry_counts", "with an unreadable retry count"),
            ):
                if lines.get(key):
                    extra.append(f"{lines[key]} {what}")
            if lines.get("unread"):
                extra.append(
                    ("" if lines.get("unread_exact", True) else "at least ") + f"{lines['unread']} left unread"
                )
            parts.append(text + (f" ({', '.join(extra)})" if extra else ""))
        if c.backpressure:
            parts.append(f"input waited {_n(c.backpressure, 'time', 'times')} for max_pending")
        return "run summary: " + "; ".join(parts)


def signal_name(signum: int) -> str:
    """``SIGINT`` for 2 (the number itself when the platform has no name for it)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _written(c: RunCounts) -> list[str]:
    """What the run wrote, or wrote nothing for, counted: each counter of the outcome vocabulary once, in its
    order (copies always, the others when not 0)."""
    from nbkit.runtime.vocabulary import ACTION_TERMS

    said: list[str] = []
    for terms in ACTION_TERMS.values():
        n = getattr(c, terms.counter) if terms.counter and terms.said[0] else 0
        if n or terms.always_said:
            said.append((terms.said[0] if n == 1 else terms.said[1]).format(n=n))
    return said


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
