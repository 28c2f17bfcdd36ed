"""The self-check (``notebooks/self-check.md``) is well formed, and its right answers are what nbkit does.

The self-check is a notebook of Markdown cells only: each question is one cell, marked with an HTML
comment ``<!-- question: ID -->``, and each answer is a ``<details><summary>A. ...</summary>`` whose
feedback starts with ``**✓ Right.**`` or ``**✗ Not so.**``. The first half of this file checks that
shape (3 or 4 answers, exactly one right, every answer explained with a link to the page that shows
it) and that the paired ``.ipynb`` holds the same cells. The second half demonstrates each question's
right answer through nbkit's public API (a :class:`~nbkit.notebook.session.Session` on a temporary
file, an :class:`~nbkit.App` on a virtual clock, ``nbkit run`` on a real pipe), so a change in the
runtime that makes an answer wrong fails here, and so does a quiz edit that marks another answer right.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import pytest

from nbkit import (
    App,
    FileBroker,
    FilePosition,
    HandlerOutcome,
    PositionStore,
    RetryDestinationError,
    StdioBroker,
    VirtualClock,
    read_stream,
)
from nbkit.notebook.session import Session

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "notebooks" / "self-check.md"
NOTEBOOK = SOURCE.with_suffix(".ipynb")
SITE = "https://nbkit.readthedocs.io/en/latest/"
RETRY = "x-ruststream-retry-count"

QUESTION_ID = re.compile(r"^<!-- question: ([a-z0-9-]+) -->$", re.M)
OPTION = re.compile(
    r"<details><summary>([A-D])\. (.+?)</summary>\n\n(.+?)\n\n</details>",
    re.S,
)
MARK = re.compile(r"^\*\*(✓ Right|✗ Not so)\.\*\* \S")
PAGE_LINK = re.compile(r"\]\(" + re.escape(SITE) + r"(?:learn|guide)/[^)\s]+\)")


@dataclass(frozen=True)
class Option:
    """One answer: its letter, the text shown before it is opened, its feedback, whether it is right."""

    letter: str
    summary: str
    feedback: str
    right: bool


@dataclass(frozen=True)
class Question:
    """One question cell: its id, the whole cell, and its answers in order."""

    qid: str
    text: str
    options: tuple[Option, ...]

    @property
    def answer(self) -> Option:
        """The one answer marked right (the shape test checks there is exactly one)."""
        (right,) = [o for o in self.options if o.right]
        return right


def markdown_cells() -> list[str]:
    """The self-check's cells, as jupytext reads the source."""
    notebook = jupytext.read(SOURCE)
    assert all(c.cell_type == "markdown" for c in notebook.cells), "the self-check has a code cell"
    return [c.source for c in notebook.cells]


def parse(cells: list[str]) -> list[Question]:
    """Every question cell (a cell with a question id), with its answers."""
    questions = []
    for cell in cells:
        ids = QUESTION_ID.findall(cell)
        if not ids:
            continue
        assert len(ids) == 1, f"one question per cell: {ids}"
        options = []
        for letter, summary, feedback in OPTION.findall(cell):
            mark = MARK.match(feedback.strip())
            right = mark is not None and mark.group(1).startswith("✓")
            options.append(Option(letter, summary.strip(), feedback.strip(), right))
        questions.append(Question(ids[0], cell, tuple(options)))
    return questions


QUESTIONS = parse(markdown_cells())


# -- the shape ------------------------------------------------------------------------------------------


def test_at_least_twelve_questions_with_distinct_ids():
    ids = [q.qid for q in QUESTIONS]
    assert len(ids) >= 12
    assert len(set(ids)) == len(ids), f"a question id is used twice: {ids}"


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.qid)
def test_each_question_has_three_or_four_explained_answers_and_one_is_right(question):
    opened = question.text.count("<details>")
    assert opened == question.text.count("</details>") == len(question.options), (
        f"{question.qid}: a <details> block does not have the shape <details><summary>X. ...</summary>, "
        "a blank line, the feedback, a blank line, </details>"
    )
    assert 3 <= len(question.options) <= 4, f"{question.qid}: {len(question.options)} answers"
    assert "".join(o.letter for o in question.options) == "ABCD"[: len(question.options)]
    for option in question.options:
        assert MARK.match(option.feedback), f"{question.qid} {option.letter}: feedback without ✓ Right. / ✗ Not so."
        assert PAGE_LINK.search(option.feedback), f"{question.qid} {option.letter}: no link to a lesson or guide page"
        words = MARK.sub("", option.feedback)
        assert len(re.findall(r"(?<=[.!?])\s+(?=[A-Z`\[])", words)) <= 2, f"{question.qid} {option.letter}: too long"
    assert sum(o.right for o in question.options) == 1, f"{question.qid}: not exactly one right answer"


def test_the_notebook_holds_the_same_cells_as_its_source_and_nothing_to_run():
    stored = nbformat.read(NOTEBOOK, as_version=4)
    assert [c.cell_type for c in stored.cells] == ["markdown"] * len(stored.cells)
    assert [c.source for c in stored.cells] == markdown_cells(), (
        "notebooks/self-check.ipynb is out of step with self-check.md: run "
        "`jupytext --sync notebooks/self-check.md` (or `python tools/build_notebooks.py self-check`)"
    )


def test_a_marker_on_the_wrong_answer_is_noticed():
    cell = (
        "<!-- question: x -->\n## 1. x\n\n"
        "<details><summary>A. yes</summary>\n\n**✓ Right.** a\n\n</details>\n\n"
        "<details><summary>B. no</summary>\n\n**✓ Right.** b\n\n</details>\n"
    )
    (question,) = parse([cell])
    assert [o.right for o in question.options] == [True, True]
    with pytest.raises(ValueError):
        question.answer  # noqa: B018  (the property raises)


# -- the right answers, demonstrated --------------------------------------------------------------------


def file_session(tmp_path: Path, handler: Callable, key: str = "orders", **options) -> tuple[FileBroker, Session]:
    """A file service of one registration read from the beginning, driven by a Session."""
    broker = FileBroker(tmp_path / f"{key}.ss")
    options.setdefault("start_at", FilePosition.beginning())
    broker.subscriber(key, **options)(handler)
    return broker, Session(App(broker))


def records(path: Path) -> list[tuple[str, int, int]]:
    """(stream key, sequence, retry count) of every message in the file (0: no retry-count header)."""
    frame = read_stream(path)
    return [
        (key, int(seq), int(count))  # no retry-count header reads as 0
        for key, seq, count in zip(frame["stream_key"], frame["seq"], frame["retry_count"], strict=True)
    ]


def drop_dead_letter(tmp_path):
    broker, session = file_session(tmp_path, lambda d: HandlerOutcome.drop(), max_attempts=3, dead_letter="orders.dead")
    broker.publish("orders", "bad order")
    steps = session.run()
    assert [(e.outcome, e.action) for e in steps] == [("drop", "unsupported")]
    assert records(broker.path) == [("orders", 1, 0)]
    assert "ack / nack failed" in session.log[-1]


def undeclared_retry(tmp_path):
    seen = []
    broker, session = file_session(tmp_path, lambda d: seen.append(d.attempt) or HandlerOutcome.retry())
    broker.publish("orders", "o")
    session.run()
    session.close()
    assert seen == [1]
    assert records(broker.path) == [("orders", 1, 0)]
    assert (
        session.log[-1].startswith("ERROR nbkit.dispatch: ack / nack failed")
        and "the message is lost" in session.log[-1]
    )


def dead_letter_count(tmp_path):
    broker, session = file_session(
        tmp_path, lambda d: HandlerOutcome.retry(), max_attempts=3, dead_letter="orders.dead"
    )
    broker.publish("orders", "o")
    assert [e.attempt for e in session.run()] == [1, 2, 3]
    assert records(broker.path) == [("orders", 1, 0), ("orders", 2, 1), ("orders", 3, 2), ("orders.dead", 1, 3)]


def cap_without_dead_letter(tmp_path):
    broker, session = file_session(tmp_path, lambda d: HandlerOutcome.retry(), max_attempts=3)
    broker.publish("orders", "o")
    steps = session.run()
    assert [(e.attempt, e.action) for e in steps] == [(1, "copy"), (2, "copy"), (3, "rejected")]
    assert session.pending == []
    assert [key for key, _, _ in records(broker.path)] == ["orders"] * 3  # the original and two copies
    assert any(line.startswith("ERROR") and "rejecting the delivery" in line for line in session.log)


def dead_letter_without_cap(tmp_path):
    broker, session = file_session(tmp_path, lambda d: HandlerOutcome.retry_after(10), dead_letter="orders.dead")
    broker.publish("orders", "o")
    start = session.now
    steps = session.run()
    assert [(e.attempt, e.action) for e in steps] == [(1, "dead-letter")]
    assert session.now == start and session.pending == []  # at once: the clock did not move
    assert records(broker.path) == [("orders", 1, 0), ("orders.dead", 1, 1)]


def exception(tmp_path):
    seen = []

    def handler(d):
        seen.append(d.attempt)
        raise ValueError("cannot parse")

    broker, session = file_session(tmp_path, handler, max_attempts=3, dead_letter="orders.dead")
    broker.publish("orders", "o")
    steps = session.run()
    session.close()
    assert seen == [1]
    assert [(e.outcome, e.action) for e in steps] == [("drop", "unsupported")]
    assert "cannot parse" in steps[0].error
    assert any(line.startswith("ERROR nbkit.dispatch: handler raised; the delivery is dropped") for line in session.log)
    assert records(broker.path) == [("orders", 1, 0)]


def attempt_source(tmp_path):
    seen = []
    broker, session = file_session(tmp_path, lambda d: seen.append(d.attempt))
    broker.publish("orders", "first")
    broker.publish("orders", "from elsewhere", headers={RETRY: "1"})
    session.run()
    assert seen == [1, 2]  # a fresh process: the attempt comes with the message


def ack_on_file(tmp_path):
    broker, session = file_session(tmp_path, lambda d: HandlerOutcome.ack())
    broker.publish("orders", "o")
    size = Path(broker.path).stat().st_size
    session.run()
    session.close()
    assert Path(broker.path).stat().st_size == size
    assert session.log[-1].startswith("WARNING nbkit.dispatch: ack / nack failed")
    again, session2 = file_session(tmp_path, lambda d: HandlerOutcome.ack())
    assert [e.seq for e in session2.run()] == [1]  # still there for the next reader


def restart(tmp_path):
    path = tmp_path / "orders.ss"
    seen = []

    def service(**options) -> App:
        broker = FileBroker(path)
        broker.subscriber("orders", **options)(lambda d: seen.append(d.text))
        return App(broker, clock=VirtualClock())

    first = service()
    first.start()
    FileBroker(path).publish("orders", "while up")
    assert first.step() is not None
    first.shutdown()
    writer = FileBroker(path)
    writer.publish("orders", "while down 1")
    writer.publish("orders", "while down 2")
    second = service()
    second.start()
    assert second.step() is None
    assert seen == ["while up"]  # the live subscription started at the tip
    resumed = service(start_at=FilePosition.sequence(2))
    resumed.start()
    while resumed.step() is not None:
        pass
    assert seen == ["while up", "while down 1", "while down 2"]


def replay_copies(tmp_path):
    seen = []

    def replay(delay: float, name: str) -> list[tuple[str, int, int]]:
        broker = FileBroker(tmp_path / f"{name}.ss")
        for text in ("a", "b", "c"):
            broker.publish("jobs", text)
        broker.subscriber("jobs", replay=True, max_attempts=3)(
            lambda d: (
                seen.append((name, d.attempt))
                or (HandlerOutcome.retry_after(delay) if d.attempt == 1 and d.text == "a" else None)
            )
        )
        session = Session(App(broker))
        session.run()
        session.close()
        return records(Path(broker.path))

    assert replay(0, "backlog")[-1] == ("jobs", 4, 1)
    assert ("backlog", 2) in seen  # written while the replay had b and c ahead: delivered
    assert replay(5, "late")[-1] == ("jobs", 4, 1)
    assert ("late", 2) not in seen  # written after the replay ended: in the file, never read


def file_copy_destination(tmp_path):
    broker, session = file_session(
        tmp_path, lambda d: HandlerOutcome.retry_after(5) if d.attempt == 1 else None, max_attempts=3
    )
    broker.publish("orders", "o")
    steps = session.run()
    assert [(e.seq, e.attempt) for e in steps] == [(1, 1), (2, 2)]  # the copy came back to the same registration
    assert records(broker.path) == [("orders", 1, 0), ("orders", 2, 1)]


def graceful_shutdown(tmp_path):
    delays = {"soon": 30, "later": 3600}
    broker, session = file_session(tmp_path, lambda d: HandlerOutcome.retry_after(delays[d.text]), max_attempts=3)
    for text in delays:
        broker.publish("orders", text)
    session.step(2)
    start = session.now
    session.close()
    assert (session.now - start).total_seconds() == 3600  # it waited out the longest delay, no longer
    frame = read_stream(broker.path)
    copies = frame[frame["retry_count"] == 1]
    waited = (copies["timestamp"] - frame["timestamp"].iloc[0]).dt.total_seconds().tolist()
    assert waited == [30, 3600]  # each copy written when due

    bounded = FileBroker(tmp_path / "bounded.ss")
    bounded.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3)(
        lambda d: HandlerOutcome.retry_after(delays[d.text])
    )
    for text in delays:
        bounded.publish("orders", text)
    app = App(bounded, clock=VirtualClock(), shutdown_timeout=60)
    app.start()
    app.step()
    app.step()
    app.shutdown()
    assert sorted(e.abandoned for e in app.events) == [False, True]  # shutdown_timeout bounds the wait


def crash_pending(tmp_path):
    store = PositionStore(tmp_path / "positions.json")
    broker, session = file_session(
        tmp_path,
        lambda d: HandlerOutcome.retry_after(30) if d.text == "o" else None,
        max_attempts=3,
        checkpoint=store,
    )
    broker.publish("orders", "o")
    session.step()
    session.advance(10)
    size = Path(broker.path).stat().st_size
    assert session.crash() == 1  # one copy lost
    assert Path(broker.path).stat().st_size == size
    assert PositionStore(store.path).position("orders") == FilePosition.sequence(2)  # past the original
    seen = []
    again = FileBroker(broker.path)
    again.subscriber("orders", start_at=PositionStore(store.path).position("orders"))(lambda d: seen.append(d.text))
    Session(App(again)).run()
    assert seen == []  # no run handles it again


def at_least_once(tmp_path):
    path = tmp_path / "jobs.ss"
    writer = FileBroker(path)
    for text in ("a", "b", "c"):
        writer.publish("jobs", text)
    handled = []

    def service(store: PositionStore, outcome: Callable) -> App:
        broker = FileBroker(path)
        broker.subscriber(
            "jobs", start_at=store.position("jobs"), checkpoint=store, at_least_once=True, max_attempts=3
        )(lambda d: handled.append((d.text, d.attempt)) or outcome(d))
        return App(broker, clock=VirtualClock())

    store = PositionStore(tmp_path / "positions.json")
    first = service(store, lambda d: HandlerOutcome.retry_after(10) if d.text == "b" else None)
    first.start()
    for _ in range(3):
        first.step()
    assert first.crash() == 1  # b's copy was pending
    second = service(PositionStore(store.path), lambda d: None)
    second.start()
    while second.step() is not None:
        pass
    assert handled == [("a", 1), ("b", 1), ("c", 1), ("b", 1), ("c", 1)]  # nothing lost; c handled twice


PIPE_SERVICE = """
from nbkit import App, HandlerOutcome, StdioBroker

broker = StdioBroker()

@broker.subscriber("jobs", {options})
def work(d):
    import sys
    print("delivered", d.attempt, file=sys.stderr)
    return {outcome}

app = App(broker)
"""


def run_stage(tmp_path: Path, options: str, outcome: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """``nbkit run svc:app`` as a real process reading ``stdin`` from a pipe."""
    (tmp_path / "svc.py").write_text(textwrap.dedent(PIPE_SERVICE.format(options=options, outcome=outcome)))
    return subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "svc:app"],
        input=stdin, cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def pipe_own_copies(tmp_path):
    done = run_stage(
        tmp_path,
        'out_retry="jobs", max_attempts=3',
        "HandlerOutcome.retry_after(0) if d.attempt == 1 else None",
        "[2024-01-01T00:00:00 | jobs | 0] m\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("delivered") == 1 and "delivered 1" in done.stderr
    (line,) = done.stdout.splitlines()
    assert re.match(r"\[[0-9T:-]+ \| jobs \| 0\] rs1:", line)  # the copy went to stdout, for the next stage
    loopback = StdioBroker(stdin=["[jobs | 0] m"], stdout=[], loopback=True)  # the test aid that reads it back
    seen = []
    loopback.subscriber("jobs", out_retry="jobs", max_attempts=3)(
        lambda d: seen.append(d.attempt) or (HandlerOutcome.retry_after(0) if d.attempt == 1 else None)
    )
    App(loopback, clock=VirtualClock()).run()
    assert seen == [1, 2]


def pipe_without_out_retry(tmp_path):
    seen = []
    broker = StdioBroker(stdin=["[jobs | 0] m"], stdout=[])
    broker.subscriber("jobs")(lambda d: seen.append(d) or HandlerOutcome.ack())
    with pytest.raises(RetryDestinationError, match="out_retry"):
        App(broker, clock=VirtualClock()).start()
    assert seen == []
    done = run_stage(tmp_path, "", "HandlerOutcome.ack()", "[2024-01-01T00:00:00 | jobs | 0] m\n")
    assert done.returncode == 2 and "delivered" not in done.stderr and "out_retry" in done.stderr


#: question id -> (words of the answer that must be the one marked right, its demonstration)
DEMONSTRATIONS: dict[str, tuple[str, Callable[[Path], None]]] = {
    "drop-dead-letter": ("never reaches the dead-letter key", drop_dead_letter),
    "undeclared-retry": ("not delivered again", undeclared_retry),
    "dead-letter-count": ("3, the number of attempts made", dead_letter_count),
    "cap-without-dead-letter": ("rejected", cap_without_dead_letter),
    "dead-letter-without-cap": ("at once; no retry copy", dead_letter_without_cap),
    "exception": ("treats it as <code>drop()</code>", exception),
    "attempt-source": ("header plus 1", attempt_source),
    "ack-on-file": ("Nothing: the runtime logs", ack_on_file),
    "restart": ("Neither", restart),
    "replay-copies": ("Only if the replay has not reached the end", replay_copies),
    "file-copy-destination": ("same stream key", file_copy_destination),
    "graceful-shutdown": ("when it falls due", graceful_shutdown),
    "crash-pending": ("It is lost", crash_pending),
    "at-least-once": ("handled twice", at_least_once),
    "pipe-own-copies": ("never reads its own stdout", pipe_own_copies),
    "pipe-without-out-retry": ("refuses to start", pipe_without_out_retry),
}


def test_every_question_has_a_demonstration():
    assert {q.qid for q in QUESTIONS} == set(DEMONSTRATIONS)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.qid)
def test_the_right_answer_is_what_nbkit_does(question, tmp_path):
    words, demonstrate = DEMONSTRATIONS[question.qid]
    assert words in question.answer.summary, (
        f"{question.qid}: the answer marked right is {question.answer.letter} ({question.answer.summary!r}), "
        f"but the demonstration shows the one saying {words!r}"
    )
    assert sum(words in o.summary for o in question.options) == 1, f"{question.qid}: {words!r} names two answers"
    demonstrate(tmp_path)
