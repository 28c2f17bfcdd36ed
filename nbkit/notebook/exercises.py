"""Predict, run, compare: the machinery behind every exercise of the tutorial lessons.

An exercise poses a situation the lesson has not shown. The learner writes a **prediction** first; the
exercise cell passes it to :func:`check`, which recomputes the right answer by running the runtime (or reading
the data) and says whether the prediction is right, and if not, *where* it differs and a hint aimed at the
misconception behind it (never the answer). With no prediction yet (``None``) the cell prints only a prompt
to predict: no hint, nothing to copy. The hidden solution cell measures the value by running the code and
calls ``check(name, prediction, measured=...)``, which puts the prediction beside the measurement.

Each exercise is an :class:`Exercise`: the form of its answer (a :class:`Shape`, which accepts any reasonable
way to write it: a list for a pair, ``3`` for ``3.0``, a Timedelta for seconds), the function that computes
the right answer from the context the lesson passes, its explanation, and two or three :class:`WrongAnswer`
entries, each a likely wrong answer with the hint for its misconception. The lessons' exercises are
registered by the modules of :mod:`nbkit.notebook.exercise_bank` (one per lesson), loaded on first use; a
new lesson adds a module there and calls :func:`register`.

Writing one (a new lesson's module ``nbkit/notebook/exercise_bank/lessonNN.py``)::

    register(Exercise(
        "09-lost-copies",                                  # NN-what: the lesson's number first
        Parts(("lost", Count()), ("redriven", Count())),   # the answer's form; a list or tuple is accepted
        solve=lambda *, kill_at, **_: run_the_pipeline(kill_at),  # recomputed by running the runtime
        explain="why the right answer is right (shown once the learner has it)",
        hint="what to look at for any other wrong answer (never the answer)",
        wrong=(                                            # two or three likely wrong answers
            WrongAnswer("a crash loses nothing", lambda **_: (0, 0), "the hint for this misconception"),
            WrongAnswer("...", lambda **c: ..., "...", matches=lambda answer, right, **c: answer[0] == 0),
        ),
        scenario=None,  # for a debugging exercise: scenario(folder, **context) -> Evidence (files and log)
        context={},     # the lesson's own values, for an exercise about the run its cells make (see below)
    ))

The lesson then has an exercise cell ``prediction = None`` / ``check("09-lost-copies", prediction, kill_at=12)``
and, right after it, a solution cell tagged ``solution`` and ``hide-cell`` with ``jupyter.source_hidden`` and
``jupyter.outputs_hidden`` set, whose first line is ``# Solution (open to compare with your prediction)`` and
which ends with ``check("09-lost-copies", prediction, measured=..., kill_at=12)`` (``reveal=True`` when the
solution reasons from evidence instead of measuring). ``tests/lessons`` holds every lesson to this.

An exercise cell must work when a learner runs it first, before the cells above it: it passes literal values
(or names it binds itself), never a name an earlier cell defines. An exercise about the run the lesson's own
cells make (the capstone's shop and its crash) keeps those values in its ``context=``, which :func:`check`
uses for whatever the call leaves out: the exercise cell passes nothing, and the solution, which measures
the lesson's run, passes the lesson's names (``tests/lessons`` checks that they hold the same values).

>>> from nbkit.exercises import check
>>> check("02-resume-position", None, last_processed=7)
Predict first: set prediction to a FilePosition (or the n of FilePosition.sequence(n)) and run
this cell again.
>>> check("02-resume-position", 7, last_processed=7)
Not yet: sequence(n) includes message n itself, and message 7 has been processed already.
>>> verdict = check("02-resume-position", 8, measured=8, last_processed=7)
>>> verdict.ok, verdict.message.split(";")[0]
(True, 'you predicted FilePosition.sequence(8)')
"""

from __future__ import annotations

import importlib
import math
import numbers
import pkgutil
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "AnswerFormError",
    "Choice",
    "Count",
    "Counts",
    "Evidence",
    "Exercise",
    "Instance",
    "Number",
    "Parts",
    "Sequence",
    "Shape",
    "Verdict",
    "WrongAnswer",
    "check",
    "evidence",
    "exercise",
    "exercises",
    "expected",
    "register",
    "wrong_answers",
]

#: A text shown to the learner: a string, or a function of (right answer, **context) that returns one.
Text = str | Callable[..., str]

#: A verdict prints wrapped at this width, so that no hint runs off a notebook or a page of the site.
WIDTH = 96

Kind = Literal["prompt", "right", "wrong", "measured", "answer"]
_LABELS: dict[str, str] = {
    "prompt": "Predict first: ",
    "right": "Right: ",
    "wrong": "Not yet: ",
    "measured": "Measured: ",
    "answer": "The answer: ",
}


@dataclass(frozen=True)
class Verdict:
    """What :func:`check` says: ``ok`` and the message shown to the learner.

    It shows as ``Right: ...``, ``Not yet: ...``, ``Predict first: ...`` (no prediction yet), or, in a
    solution cell run with no prediction, ``Measured: ...`` (or ``The answer: ...`` when the solution reasons
    from evidence), and is true only when the prediction is right.

    Parameters
    ----------
    ok : bool
        Whether the prediction is right.
    message : str
        The explanation, the hint for a wrong answer, or the prompt to predict.
    kind : {"right", "wrong", "prompt", "measured", "answer"}, optional
        Which of the five it is; by default ``"right"`` when ``ok`` and ``"wrong"`` otherwise.
    differs : tuple of str, optional
        The parts of the answer that differ from the right one (``("seconds",)``), empty when it is right.

    Examples
    --------
    >>> from nbkit.exercises import Verdict
    >>> verdict = Verdict(False, "count the dead-letter rows of the file transport only.")
    >>> verdict
    Not yet: count the dead-letter rows of the file transport only.
    >>> bool(verdict), verdict.kind
    (False, 'wrong')
    """

    ok: bool
    message: str
    kind: Kind | None = None
    differs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind is None:
            object.__setattr__(self, "kind", "right" if self.ok else "wrong")
        elif (self.kind == "right") != self.ok:
            raise ValueError(f"a Verdict of kind {self.kind!r} cannot have ok={self.ok}")

    def __repr__(self) -> str:
        text = _LABELS[self.kind or "wrong"] + self.message
        return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)

    def __bool__(self) -> bool:
        return self.ok


class AnswerFormError(ValueError):
    """An answer that is not written in the form the exercise asks for (the message says which form)."""


# -- shapes: how an answer may be written, and where two answers differ ----------------------------------


class Shape:
    """The form of an answer: :meth:`coerce` turns any reasonable way of writing it into one canonical value.

    Subclasses set :attr:`describe` (shown in the prompt, e.g. ``"a number of seconds"``) and implement
    :meth:`coerce`; :meth:`same` and :meth:`differences` compare canonical values.
    """

    describe: str = "an answer"

    def coerce(self, value: Any) -> Any:
        """The canonical form of ``value``; raises :class:`AnswerFormError` naming the form wanted."""
        return value

    def same(self, a: Any, b: Any) -> bool:
        """Whether two canonical answers are equal."""
        return bool(a == b)

    def present(self, value: Any) -> Any:
        """A canonical answer as a learner would write it (a list stays a list, counts are a dict)."""
        return value

    def differences(self, predicted: Any, right: Any) -> tuple[str, ...]:
        """The parts of ``predicted`` that differ from ``right`` (``()`` when they are the same)."""
        return () if self.same(predicted, right) else ("the answer",)

    def _wrong_form(self, value: Any) -> AnswerFormError:
        return AnswerFormError(f"answer with {self.describe} (you wrote {value!r}).")


def _as_float(value: Any) -> float | None:
    """A real number (or a Timedelta, in seconds) as a float; None for anything else, booleans included."""
    seconds = getattr(value, "total_seconds", None)
    if callable(seconds):
        value = seconds()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class Number(Shape):
    """A real number; ints, floats, NumPy numbers and (for seconds) a Timedelta are all accepted.

    >>> Number("a number of seconds").coerce(14)
    14.0
    """

    describe: str = "a number"
    tolerance: float = 1e-6

    def coerce(self, value: Any) -> float:
        number = _as_float(value)
        if number is None:
            raise self._wrong_form(value)
        return number

    def same(self, a: Any, b: Any) -> bool:
        return abs(float(a) - float(b)) <= self.tolerance * max(1.0, abs(float(b)))

    def present(self, value: Any) -> Any:
        return int(value) if float(value).is_integer() else float(value)


@dataclass(frozen=True)
class Count(Shape):
    """A whole number; ``12``, ``12.0`` and ``numpy.int64(12)`` are the same count.

    >>> Count().coerce(12.0)
    12
    """

    describe: str = "a whole number"

    def coerce(self, value: Any) -> int:
        number = _as_float(value)
        if number is None or not number.is_integer():
            raise self._wrong_form(value)
        return int(number)


@dataclass(frozen=True)
class Choice(Shape):
    """One of a few words (case and surrounding spaces ignored); ``options`` maps each to what it means.

    >>> Choice({"b": "the handler raised"}).coerce(" B) ")
    'b'
    """

    options: Mapping[str, str] = field(default_factory=dict)
    describe: str = "one of the options"

    def coerce(self, value: Any) -> str:
        if not isinstance(value, str):
            raise self._wrong_form(value)
        word = value.strip().casefold().rstrip(").:").strip()
        if self.options and word not in self.options:
            raise AnswerFormError(f"answer with one of {', '.join(map(repr, self.options))} (you wrote {value!r}).")
        return word


@dataclass(frozen=True)
class Instance(Shape):
    """An object of a given type, compared as it is (a ``FilePosition``, a ``RetryPolicy``)."""

    kind: type = object
    describe: str = "an object"
    convert: Callable[[Any], Any] | None = None

    def coerce(self, value: Any) -> Any:
        if self.convert is not None and not isinstance(value, self.kind):
            try:
                value = self.convert(value)
            except (TypeError, ValueError) as exc:
                raise self._wrong_form(value) from exc
        if not isinstance(value, self.kind):
            raise self._wrong_form(value)
        return value


def _items(value: Any) -> list[Any] | None:
    """A list, tuple, NumPy array or pandas Series as a list; None for anything else (a str is not a list)."""
    if isinstance(value, (str, bytes, Mapping)):
        return None
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        value = tolist()
    return list(value) if isinstance(value, (list, tuple)) else None


class Parts(Shape):
    """A fixed number of named parts, such as (deliveries, seconds); a tuple or a list is accepted.

    >>> pair = Parts(("deliveries", Count()), ("seconds", Number()))
    >>> pair.coerce([3, 6])
    (3, 6.0)
    >>> pair.differences((3, 8.0), (3, 6.0))
    ('seconds',)
    """

    def __init__(self, *parts: tuple[str, Shape]) -> None:
        self.parts = parts
        self.describe = "a pair " if len(parts) == 2 else f"{len(parts)} values "
        self.describe += "(" + ", ".join(name for name, _ in parts) + ")"

    def coerce(self, value: Any) -> tuple[Any, ...]:
        items = _items(value)
        if items is None or len(items) != len(self.parts):
            raise self._wrong_form(value)
        out = []
        for item, (name, shape) in zip(items, self.parts, strict=True):
            try:
                out.append(shape.coerce(item))
            except AnswerFormError as exc:
                raise AnswerFormError(f"{name}: {exc}") from exc
        return tuple(out)

    def same(self, a: Any, b: Any) -> bool:
        return not self.differences(a, b)

    def present(self, value: Any) -> Any:
        return tuple(shape.present(v) for (_, shape), v in zip(self.parts, value, strict=True))

    def differences(self, predicted: Any, right: Any) -> tuple[str, ...]:
        pairs = zip(self.parts, predicted, right, strict=True)
        return tuple(name for (name, shape), p, r in pairs if not shape.same(p, r))


class Sequence(Shape):
    """A list of values in order (a tuple, an array or a Series is accepted); differences name positions.

    >>> Sequence(Count(), "a list of sequence numbers").differences((1, 2, 2), (1, 1, 2))
    ('item 2',)
    """

    def __init__(self, item: Shape, describe: str = "a list") -> None:
        self.item = item
        self.describe = describe

    def coerce(self, value: Any) -> tuple[Any, ...]:
        items = _items(value)
        if items is None:
            raise self._wrong_form(value)
        try:
            return tuple(self.item.coerce(item) for item in items)
        except AnswerFormError as exc:
            raise AnswerFormError(f"each item: {exc}") from exc

    def same(self, a: Any, b: Any) -> bool:
        return len(a) == len(b) and all(self.item.same(x, y) for x, y in zip(a, b, strict=True))

    def present(self, value: Any) -> Any:
        return [self.item.present(v) for v in value]

    def differences(self, predicted: Any, right: Any) -> tuple[str, ...]:
        if len(predicted) != len(right):
            return ("the number of items",)
        pairs = enumerate(zip(predicted, right, strict=True), 1)
        return tuple(f"item {i}" for i, (p, r) in pairs if not self.item.same(p, r))


class Counts(Shape):
    """A count per key, such as ``{"jobs.retry": 3}``; keys with a count of 0 may be left out.

    >>> Counts("a dict {stream key: lines}").coerce({"jobs.retry": 3, "jobs.dead": 0})
    (('jobs.retry', 3),)
    """

    def __init__(self, describe: str = "a dict {key: count}") -> None:
        self.describe = describe

    def coerce(self, value: Any) -> tuple[tuple[str, int], ...]:
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict) and not isinstance(value, Mapping):
            value = to_dict()
        if isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            value = dict(value)  # the canonical form itself
        if not isinstance(value, Mapping):
            raise self._wrong_form(value)
        out = {}
        for key, count in value.items():
            out[str(key)] = Count().coerce(count)
        return tuple(sorted((k, v) for k, v in out.items() if v))

    def present(self, value: Any) -> Any:
        return dict(value)

    def differences(self, predicted: Any, right: Any) -> tuple[str, ...]:
        p, r = dict(predicted), dict(right)
        return tuple(f"{key!r}" for key in sorted(set(p) | set(r)) if p.get(key, 0) != r.get(key, 0))


# -- exercises -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WrongAnswer:
    """A likely wrong answer, and the hint aimed at the misconception that leads to it.

    Parameters
    ----------
    misconception : str
        What the learner believes (for authors and tests; not shown).
    example : callable
        ``example(**context)`` returns the wrong answer this misconception gives in that context.
    hint : str or callable
        What to think about instead; never the answer. A callable gets ``(right, **context)``.
    matches : callable, optional
        ``matches(prediction, right, **context)`` for other answers of the same misconception
        (canonical values); by default only ``example`` matches.
    """

    misconception: str
    example: Callable[..., Any]
    hint: Text
    matches: Callable[..., bool] | None = None


@dataclass(frozen=True)
class Evidence:
    """What a debugging exercise hands the learner: the files a real run left behind, and its log.

    Parameters
    ----------
    files : dict of str to Path
        Each file the scenario wrote, by a short name (``{"parcels.ss": Path(...)}``).
    log : tuple of str
        The runtime's log lines, as ``session.log`` captured them.

    Examples
    --------
    >>> from pathlib import Path
    >>> from nbkit.exercises import Evidence
    >>> Evidence({"jobs.ss": Path("jobs.ss")}, ("WARNING nbkit.dispatch: something",))
    WARNING nbkit.dispatch: something
    """

    files: dict[str, Path]
    log: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return "\n".join(self.log) if self.log else "(nothing logged)"


@dataclass(frozen=True)
class Exercise:
    """One exercise: the form of its answer, how to compute it, why it is right, and its wrong answers.

    Parameters
    ----------
    name : str
        The id the lesson passes to :func:`check`, ``NN-what`` (NN is the lesson number).
    shape : Shape
        The form of the answer; the prompt names it.
    solve : callable
        ``solve(**context)`` computes the right answer by running the runtime or reading the data.
    explain : str or callable
        Why the right answer is right (shown once the learner has it, or in the solution cell).
    hint : str or callable
        The hint for a wrong answer that matches none of ``wrong``; never the answer.
    wrong : tuple of WrongAnswer
        Two or three likely wrong answers, each with the hint for its misconception.
    accept : callable, optional
        For an exercise with many right answers (a policy that meets a goal): ``accept(prediction,
        **context)`` returns None when the answer is right, or the reason it is not. ``solve`` then gives one
        right answer, for :func:`expected`.
    prompt : str, optional
        What to predict, when the shape's description does not say enough.
    scenario : callable, optional
        For a debugging exercise: ``scenario(folder, **context)`` runs the runtime into ``folder`` and
        returns the :class:`Evidence` (files and log) the learner reads; see :func:`evidence`.
    context : mapping, optional
        The lesson's own values for the context (``{"crash_at": 15}``), for an exercise about the run the
        lesson's cells make: :func:`check` uses them for any the call leaves out, so that the exercise cell
        needs no name an earlier cell defines and works when a learner runs it first.
    """

    name: str
    shape: Shape
    solve: Callable[..., Any]
    explain: Text
    hint: Text
    wrong: tuple[WrongAnswer, ...] = ()
    accept: Callable[..., str | None] | None = None
    prompt: str | None = None
    scenario: Callable[..., Evidence] | None = None
    context: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def with_context(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """The context a check of this exercise runs in: its own :attr:`context`, then what the call passes."""
        return {**self.context, **context}

    def __post_init__(self) -> None:
        if len(self.name) < 4 or not self.name[:2].isdigit() or self.name[2] != "-":
            raise ValueError(f"exercise name {self.name!r} must look like 'NN-what' (NN is the lesson number)")


_REGISTRY: dict[str, Exercise] = {}
_LOADED = False


def register(item: Exercise) -> Exercise:
    """Add an exercise to the ones :func:`check` knows (the lesson modules of the exercise bank call it).

    Parameters
    ----------
    item : Exercise
        The exercise; its name must be new.

    Returns
    -------
    Exercise
        The same exercise.

    Raises
    ------
    ValueError
        If an exercise of that name is registered already.
    """
    if item.name in _REGISTRY and _REGISTRY[item.name] is not item:
        raise ValueError(f"exercise {item.name!r} is registered twice")
    _REGISTRY[item.name] = item
    return item


def _registry() -> dict[str, Exercise]:
    """Every registered exercise, after importing each module of :mod:`nbkit.notebook.exercise_bank` once."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from nbkit.notebook import exercise_bank

        for module in pkgutil.iter_modules(exercise_bank.__path__):
            importlib.import_module(f"{exercise_bank.__name__}.{module.name}")
    return _REGISTRY


def exercise(name: str) -> Exercise:
    """The exercise registered as ``name``.

    Parameters
    ----------
    name : str
        The exercise id.

    Returns
    -------
    Exercise
        Its definition: shape, solver, explanation, wrong answers.

    Raises
    ------
    KeyError
        If there is none; the message lists the known ones.

    Examples
    --------
    >>> from nbkit.notebook.exercises import exercise
    >>> exercise("03-dead-letter-time").shape.describe
    'a number of seconds'
    """
    found = _registry().get(name)
    if found is None:
        raise KeyError(f"no exercise {name!r}; known: {', '.join(sorted(_registry()))}")
    return found


def exercises() -> list[str]:
    """The ids of every exercise with a check.

    Returns
    -------
    list of str
        Sorted; the first two characters are the lesson number.

    Examples
    --------
    >>> from nbkit.exercises import exercises
    >>> all(name[:2].isdigit() and name[2] == "-" for name in exercises())
    True
    """
    return sorted(_registry())


def expected(name: str, **context: Any) -> Any:
    """The right answer to exercise ``name`` in the given context, in its canonical form.

    Parameters
    ----------
    name : str
        The exercise id.
    **context
        The same context the lesson passes to :func:`check`.

    Raises
    ------
    KeyError
        If there is no exercise of that id.

    Returns
    -------
    object
        The answer as a learner would write it (a list, a pair, a dict of counts...).

    Examples
    --------
    >>> from nbkit.exercises import expected
    >>> expected("01-seq-per-key", keys="ab")
    [1, 1]
    """
    item = exercise(name)
    return item.shape.present(item.shape.coerce(item.solve(**item.with_context(context))))


def wrong_answers(name: str, **context: Any) -> list[tuple[Any, str]]:
    """Each listed wrong answer of exercise ``name`` in this context, with the hint :func:`check` gives it.

    Parameters
    ----------
    name : str
        The exercise id.
    **context
        The context the lesson passes to :func:`check`.

    Returns
    -------
    list of (object, str)
        The wrong answer (as a learner would write it) and the hint, in the order the exercise lists them.

    Examples
    --------
    >>> from nbkit.exercises import wrong_answers
    >>> [answer for answer, _hint in wrong_answers("01-seq-per-key", keys="ab")]
    [[1, 2], [0, 0]]
    """
    item = exercise(name)
    context = item.with_context(context)
    return [(w.example(**context), check(name, w.example(**context), **context).message) for w in item.wrong]


def evidence(name: str, folder: str | Path, **context: Any) -> Evidence:
    """Run the scenario of debugging exercise ``name`` into ``folder``: the files and log to read.

    Parameters
    ----------
    name : str
        The exercise id.
    folder : str or Path
        Where the scenario writes its files (the lesson's work folder).
    **context
        The context the lesson passes to :func:`check`.

    Returns
    -------
    Evidence
        The files the run left in ``folder`` and its log; it shows as the log.

    Raises
    ------
    KeyError
        If there is no such exercise.
    ValueError
        If the exercise is not a debugging exercise (it has no scenario).

    Examples
    --------
    >>> import tempfile
    >>> from nbkit.exercises import evidence
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     case = evidence("03-missing-parcel", folder)
    ...     sorted(case.files)
    ['parcels.ss']
    >>> any("handler raised" in line for line in case.log)
    True
    """
    item = exercise(name)
    if item.scenario is None:
        raise ValueError(f"exercise {name!r} has no scenario: it is not a debugging exercise")
    return item.scenario(Path(folder), **item.with_context(context))


def _say(text: Text, right: Any, context: Mapping[str, Any]) -> str:
    return _capital(text(right, **context) if callable(text) else text)


def _capital(text: str) -> str:
    """Start a sentence with a capital, unless its first word is code (``sequence(n)``, ``max_attempts=2``)."""
    first = text.split(" ", 1)[0]
    return text[:1].upper() + text[1:] if first.isalpha() else text


def _show(shape: Shape, value: Any) -> str:
    """A canonical answer as a learner would write it (a pair as a tuple, counts as a dict, 14.0 as 14)."""
    shown = shape.present(value)
    if isinstance(shown, float) and shown.is_integer():
        return f"{shown:g}"
    return repr(shown)


def _where(item: Exercise, differs: tuple[str, ...]) -> str:
    """``"Seconds off, deliveries right."`` for an answer of several parts."""
    if not isinstance(item.shape, Parts) or not differs:
        return ""
    good = [name for name, _ in item.shape.parts if name not in differs]
    text = f"{' and '.join(differs)} off"
    text = text[:1].upper() + text[1:]
    return text + (f", {' and '.join(good)} right." if good else ".")


class _NotMeasured:
    def __repr__(self) -> str:
        return "<not measured>"


NOT_MEASURED: Any = _NotMeasured()


def _hint(item: Exercise, answer: Any, right: Any, context: Mapping[str, Any]) -> str:
    """The hint for a wrong canonical answer: its misconception's, the accept reason, or the generic one."""
    for wrong in item.wrong:
        if wrong.matches is not None:
            hit = wrong.matches(answer, right, **context)
        else:
            try:
                hit = item.shape.same(answer, item.shape.coerce(wrong.example(**context)))
            except AnswerFormError:
                hit = False
        if hit:
            return _say(wrong.hint, right, context)
    if item.accept is not None:
        reason = item.accept(answer, **context)
        if reason:
            return _capital(reason)
    return _say(item.hint, right, context)


def check(
    name: str, prediction: Any = None, *, measured: Any = NOT_MEASURED, reveal: bool = False, **context: Any
) -> Verdict:
    """Compare a prediction with the right answer, recomputed by running the runtime in ``context``.

    Parameters
    ----------
    name : str
        The exercise id, such as ``"03-dead-letter-time"`` (see :func:`exercises`).
    prediction : object, optional
        The learner's prediction; ``None`` (not predicted yet) prints only the prompt to predict.
    measured : object, optional
        What the solution measured by running the code; the verdict puts the prediction beside it.
    reveal : bool, optional
        For a solution that reasons from evidence rather than measuring (a debugging exercise, a policy):
        compare the prediction with the right answer as if it had been measured.
    **context
        What the check needs from the lesson (a path, the workload, the cap...); what it leaves out comes
        from the exercise's own ``context`` (see :class:`Exercise`).

    Returns
    -------
    Verdict
        ``Predict first``, ``Right`` or ``Not yet`` (with where the prediction differs, and a hint aimed
        at its misconception), or ``Measured`` when a solution runs with no prediction.

    Raises
    ------
    KeyError
        If there is no exercise of that id.

    Examples
    --------
    >>> from nbkit.exercises import check
    >>> check("01-seq-per-key", None, keys="ab")
    Predict first: set prediction to a list of sequence numbers, one per message, and run this cell
    again.
    >>> check("01-seq-per-key", (1, 1), keys="ab")
    Right: Each stream key counts its own messages, from 1: a message under another key does not
    move the count.
    """
    item = exercise(name)
    context = item.with_context(context)
    shown: Kind = "measured"
    if reveal and measured is NOT_MEASURED:
        measured, shown = item.solve(**context), "answer"
    if prediction is None and measured is NOT_MEASURED:
        what = item.prompt or item.shape.describe
        return Verdict(False, f"set prediction to {what} and run this cell again.", "prompt")
    right = item.shape.coerce(item.solve(**context))
    why = _say(item.explain, right, context)
    if measured is not NOT_MEASURED:
        got = item.shape.coerce(measured)
        off = item.shape.differences(got, right) if item.accept is None else ()
        if off:
            return Verdict(
                False,
                f"your measurement {_show(item.shape, got)} differs from a fresh run of the runtime "
                f"({_show(item.shape, right)}) in "
                f"{', '.join(off)}: look at how the solution measures it.",
                "wrong",
                off,
            )
        if prediction is None:
            return Verdict(
                False, f"{_show(item.shape, got)}. {why} (Predict before you open the next solution.)", shown
            )
    try:
        answer = item.shape.coerce(prediction)
    except AnswerFormError as exc:
        return Verdict(False, str(exc), "wrong", ("the form",))
    if item.accept is not None:
        wrong = any(w.matches is not None and w.matches(answer, right, **context) for w in item.wrong)
        ok = not wrong and item.accept(answer, **context) is None
        differs: tuple[str, ...] = () if ok else ("the answer",)
    else:
        differs = item.shape.differences(answer, right)
        ok = not differs
    if measured is NOT_MEASURED:
        if ok:
            return Verdict(True, why)
        where = _where(item, differs)
        return Verdict(False, f"{where} {_hint(item, answer, right, context)}".strip(), "wrong", differs)
    found = "the answer is" if shown == "answer" else "the run measured"
    compared = f"you predicted {_show(item.shape, answer)}; {found} {_show(item.shape, item.shape.coerce(measured))}"
    if ok:
        return Verdict(True, f"{compared}. {why}")
    return Verdict(
        False,
        f"{compared}: they differ in {', '.join(differs)}. {_hint(item, answer, right, context)} Why: {why}",
        "wrong",
        differs,
    )
