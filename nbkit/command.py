"""The ``nbkit`` command's entry point: hold stop signals first, then import and run the command line.

``nbkit`` and ``python -m nbkit`` start here rather than in :mod:`nbkit.cli`, whose imports take most of
a second: a SIGINT or SIGTERM that arrives in that time is held (:mod:`nbkit.runtime.held_signals`) and
acted on once the command can, so a pipe stage signalled while starting stops like a running one.
"""

from __future__ import annotations

from collections.abc import Sequence

from nbkit.runtime import held_signals

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``nbkit`` command line with stop signals held during its start-up; the exit status."""
    held_signals.hold()
    try:
        from nbkit.cli import main as run_command_line

        return run_command_line(argv)
    finally:
        held_signals.take()  # a command that never took them (an error before a run started)
