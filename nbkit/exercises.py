"""Exercise checks for the tutorial notebooks (see :mod:`nbkit.notebook.exercises`)."""

from nbkit.notebook.exercises import Verdict, check, exercises

__all__ = ["Verdict", "check", "exercises"]
