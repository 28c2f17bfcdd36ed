"""Exercise checks for the tutorial notebooks: predict, run, compare.

What a lesson's cells call: :func:`check` (a prediction against a fresh run), :func:`evidence` (the files and
log of a debugging exercise), and, for the lesson tests, :func:`expected` and :func:`wrong_answers`. How an
exercise is written (its answer's shape, its wrong answers and their hints) is
:mod:`nbkit.notebook.exercises`.
"""

from nbkit.notebook.exercises import (
    Evidence,
    Verdict,
    check,
    evidence,
    exercises,
    expected,
    wrong_answers,
)

__all__ = ["Evidence", "Verdict", "check", "evidence", "exercises", "expected", "wrong_answers"]
