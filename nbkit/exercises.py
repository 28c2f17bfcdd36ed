"""Exercise checks for the tutorial notebooks (see :mod:`nbkit.notebook.exercises`)."""

from nbkit.notebook.exercises import Verdict, check, exercises, expected

__all__ = ["Verdict", "check", "exercises", "expected"]
