"""nbkit.exercises: predict, run, compare.

An unsolved exercise prints only a prompt; a prediction is compared part by part with the answer the check
recomputes by running the runtime; each listed wrong answer gets the hint for its misconception (never the
generic one, never the answer); a solution's measurement is put beside the prediction; any reasonable form of
an answer is accepted.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from nbkit import StreamWriter
from nbkit.exercises import Evidence, Verdict, check, evidence, exercises, expected, wrong_answers
from nbkit.notebook.exercises import (
    Choice,
    Count,
    Counts,
    Exercise,
    Number,
    Parts,
    Sequence,
    WrongAnswer,
    exercise,
    register,
)
from nbkit.transport.positions import FilePosition

# -- the machinery, on a small exercise of its own ------------------------------------------------------

_TOY = register(
    Exercise(
        "99-toy-pair",
        Parts(("copies", Count()), ("seconds", Number())),
        lambda *, n, **_: (n, 2.0 * n),
        explain="each copy waits 2 s.",
        hint="count the copies, then add their delays.",
        wrong=(
            WrongAnswer("one copy too many", lambda *, n, **_: (n + 1, 2.0 * n), "the first delivery is not a copy."),
            WrongAnswer(
                "delays of 1 s",
                lambda *, n, **_: (n, 1.0 * n),
                "the handler asks for 2 s each time.",
                matches=lambda answer, right, **_: answer[1] == answer[0],
            ),
        ),
    )
)


def test_no_prediction_prints_only_the_prompt():
    verdict = check("99-toy-pair", None, n=3)
    assert verdict.kind == "prompt" and not verdict
    assert repr(verdict) == "Predict first: set prediction to a pair (copies, seconds) and run this cell again."
    assert "count" not in verdict.message and "2 s" not in verdict.message


def test_a_right_prediction_in_any_reasonable_form():
    for form in [(3, 6.0), [3, 6], (3.0, 6), (3, pd.Timedelta(seconds=6)), (3, dt.timedelta(seconds=6))]:
        verdict = check("99-toy-pair", form, n=3)
        assert verdict and verdict.kind == "right" and repr(verdict) == "Right: Each copy waits 2 s.", form


def test_a_wrong_prediction_says_which_part_differs_and_the_misconception():
    verdict = check("99-toy-pair", (4, 6), n=3)
    assert not verdict and verdict.differs == ("copies",)
    assert repr(verdict) == "Not yet: Copies off, seconds right. The first delivery is not a copy."
    assert check("99-toy-pair", (5, 5), n=3).message == "Copies and seconds off. The handler asks for 2 s each time."
    generic = "Seconds off, copies right. Count the copies, then add their delays."
    assert check("99-toy-pair", (3, 7), n=3).message == generic


def test_a_wrong_form_names_the_form_wanted():
    for form in [3, "3, 6", (3,), (3, 6, 9), (True, 6), (3.5, 6)]:
        verdict = check("99-toy-pair", form, n=3)
        assert not verdict and verdict.differs == ("the form",), form
        assert "copies" in verdict.message or "pair" in verdict.message


def test_the_solution_puts_the_measurement_beside_the_prediction():
    shown = check("99-toy-pair", None, measured=[3, 6], n=3)
    assert shown.kind == "measured" and repr(shown).startswith("Measured: (3, 6). Each copy waits 2 s.")
    right = check("99-toy-pair", (3, 6), measured=(3, 6.0), n=3)
    assert right and right.message.startswith("you predicted (3, 6); the run measured (3, 6).")
    wrong = check("99-toy-pair", (4, 6), measured=(3, 6.0), n=3)
    assert not wrong and "you predicted (4, 6); the run measured (3, 6): they differ in copies" in wrong.message
    assert "The first delivery is not a copy." in wrong.message and "Why: Each copy waits 2 s." in wrong.message


def test_a_measurement_that_disagrees_with_the_runtime_is_flagged():
    verdict = check("99-toy-pair", (3, 6), measured=(3, 5), n=3)
    assert not verdict and verdict.differs == ("seconds",)
    assert "differs from a fresh run of the runtime ((3, 6)) in seconds" in verdict.message


def test_reveal_compares_with_the_right_answer():
    assert repr(check("99-toy-pair", None, reveal=True, n=2)).startswith("The answer: (2, 4). Each copy")
    assert check("99-toy-pair", (2, 4), reveal=True, n=2)


def test_wrong_answers_lists_each_with_its_own_hint():
    assert wrong_answers("99-toy-pair", n=3) == [
        ((4, 6.0), "Copies off, seconds right. The first delivery is not a copy."),
        ((3, 3.0), "Seconds off, copies right. The handler asks for 2 s each time."),
    ]


_TOY_IN_CONTEXT = register(
    Exercise(
        "99-toy-own-context",
        Count(),
        lambda *, n, **_: n + 1,
        explain=lambda right, *, n, **_: f"{n} failures, then one success.",
        hint="count the success too.",
        wrong=(WrongAnswer("the success is not a delivery", lambda *, n, **_: n, "the success is delivered too."),),
        context={"n": 3},
    )
)


def test_an_exercise_with_its_own_context_is_checked_in_it_unless_the_call_says_otherwise():
    """An exercise cell that passes no context (it must work run before the cells that define the lesson's
    values) is checked in the exercise's own; a value the call passes wins."""
    assert check("99-toy-own-context", None).kind == "prompt"
    assert check("99-toy-own-context", 4) and not check("99-toy-own-context", 4, n=5)
    assert expected("99-toy-own-context") == 4 and expected("99-toy-own-context", n=5) == 6
    assert wrong_answers("99-toy-own-context") == [(3, "The success is delivered too.")]
    assert check("99-toy-own-context", 6, measured=6, n=5)
    assert "5 failures" in check("99-toy-own-context", None, measured=6, n=5).message


def test_registration_rules():
    with pytest.raises(ValueError, match="registered twice"):
        register(Exercise("99-toy-pair", Count(), lambda **_: 1, explain="", hint=""))
    with pytest.raises(ValueError, match="NN-what"):
        Exercise("toy", Count(), lambda **_: 1, explain="", hint="")
    with pytest.raises(KeyError, match="00-retry-journey"):
        check("99-nothing", 1)
    with pytest.raises(ValueError, match="kind 'right' cannot have ok=False"):
        Verdict(False, "x", "right")


def test_shapes_accept_reasonable_forms():
    assert Number().coerce(pd.Timedelta(seconds=14)) == 14.0
    assert Count().coerce(12.0) == 12 and Count().coerce(pd.Series([12]).iloc[0]) == 12
    assert Sequence(Count()).coerce(pd.Series([1, 2])) == (1, 2)
    assert Counts().coerce(pd.Series({"jobs.retry": 3, "jobs.dead": 0})) == (("jobs.retry", 3),)
    assert Counts().present(Counts().coerce({"b": 1, "a": 2})) == {"a": 2, "b": 1}
    assert Choice({"a": "one", "b": "two"}).coerce(" B) ") == "b"
    bad = [(Number(), True), (Number(), "14"), (Count(), 1.5), (Sequence(Count()), "12"), (Counts(), [1])]
    for shape, value in bad:
        with pytest.raises(ValueError, match="answer with"):
            shape.coerce(value)
    with pytest.raises(ValueError, match="one of 'a', 'b'"):
        Choice({"a": "one", "b": "two"}).coerce("d")


# -- the lessons' exercises -----------------------------------------------------------------------------


def test_every_lesson_exercise_is_registered_with_two_or_three_wrong_answers():
    mine = [name for name in exercises() if name[:2] in {f"{n:02d}" for n in range(10)}]
    assert len(mine) >= 22
    for name in mine:
        assert 2 <= len(exercise(name).wrong) <= 3, name


def test_retry_journey_recomputes_from_the_runtime():
    assert expected("00-retry-journey", fails=3) == (4, 14.0)
    assert check("00-retry-journey", [4, 14], fails=3)
    near = check("00-retry-journey", (4, 8), fails=3)
    assert not near and near.differs == ("seconds",)


def test_cap_two_tells_three_misconceptions_apart():
    context = {"orders": 120, "seed": 7, "max_attempts": 2}
    hints = [hint for _answer, hint in wrong_answers("00-cap-two", **context)]
    assert len(set(hints)) == 3
    assert check("00-cap-two", 29.0, **context) and not check("00-cap-two", 29.5, **context)


def test_what_is_written_appends_the_copy():
    assert expected("02-what-is-written", script="rr", max_attempts=3) == ["r", "r", "r", "r", "r", "r"]
    assert expected("02-what-is-written", script="ad", max_attempts=2) == ["a", "d"]
    beside = check("02-what-is-written", ["a", "d", "r", "r", "x"], script="adrx", max_attempts=2)
    assert not beside and "append" in beside.message
    assert beside.differs == ("item 4", "item 5")


def test_resume_position_accepts_the_number_and_explains_the_off_by_one():
    assert check("02-resume-position", FilePosition.sequence(8), last_processed=7)
    assert check("02-resume-position", 8, last_processed=7)
    near = check("02-resume-position", FilePosition.sequence(7), last_processed=7)
    assert not near and "includes message n" in near.message


def test_a_timestamp_start_with_a_guessed_end_gets_the_hint_about_the_end(tmp_path):
    path = tmp_path / "events.ss"
    writer = StreamWriter(path, created_at_ms=1_700_000_000_000, clock_ms=lambda: 1_700_000_000_100)
    for i in range(1, 9):
        writer.write("event", b"{}", timestamp_ms=1_700_000_000_000 + i)
    writer.close()
    context = {"path": path, "key": "event", "seq": 3}
    assert expected("01-after-timestamp", **context) == [4, 5, 6, 7, 8]
    invented_end = check("01-after-timestamp", list(range(4, 16)), **context)
    short_end = check("01-after-timestamp", [4, 5, 6], **context)
    inclusive = check("01-after-timestamp", list(range(3, 9)), **context)
    for verdict in (invented_end, short_end):
        assert not verdict and "start is right" in verdict.message and "'event' messages" in verdict.message
    assert not inclusive and "strictly later than t" in inclusive.message


def test_cap_and_timing_exercises():
    assert expected("03-succeeds-on-cap", max_attempts=3, succeeds_on=4) == (3, 1)
    assert expected("03-dead-letter-time", max_attempts=3, base=1) == 3.0
    assert check("03-dead-letter-time", pd.Timedelta(seconds=3), max_attempts=3, base=1)


def test_pipe_stages_carry_the_retry_count():
    assert expected("04-one-stage", lines=2, max_attempts=3) == {"jobs.retry": 2}
    assert expected("04-second-stage", lines=2, max_attempts=3) == {"jobs.retry2": 2}
    assert expected("04-second-stage", lines=2, max_attempts=2) == {"jobs.dead": 2}
    assert check("04-one-stage", {"jobs.retry": 2, "jobs.dead": 0}, lines=2, max_attempts=3)


def test_missing_parcel_evidence_is_a_real_run(tmp_path):
    from nbkit.tabular.frames import read_stream

    found = evidence("03-missing-parcel", tmp_path)
    assert isinstance(found, Evidence)
    frame = read_stream(found.files["parcels.ss"])
    dead = frame[frame["stream_key"] == "parcels.dead"]["payload"].tolist()
    assert dead == ["p1", "p3"]
    assert any("handler raised; the delivery is dropped" in line and "seq=8" in line for line in found.log)
    assert check("03-missing-parcel", "B") and not check("03-missing-parcel", "a")


def test_stray_line_evidence_is_a_real_run(tmp_path):
    from nbkit.tabular.frames import read_pipe

    found = evidence("04-stray-line", tmp_path)
    piped = read_pipe(found.files["stage1.out"])
    assert sorted(piped["stream_key"].unique()) == ["broadcast", "orders.retry"]
    assert sum("stream_key=broadcast" in line and "handler raised" in line for line in found.log) == 2


def test_replayed_evidence_shows_each_order_handled_twice(tmp_path):
    from nbkit.tabular.frames import read_stream

    found = evidence("05-replayed", tmp_path)
    frame = read_stream(found.files["orders-replayed.ss"], payload="json")
    originals = frame[(frame["stream_key"] == "orders") & (frame["retry_count"] == 0)]
    assert originals["payload.id"].is_unique
    copies = frame[(frame["stream_key"] == "orders") & (frame["retry_count"] == 1)]
    assert copies["payload.id"].value_counts().min() >= 2
    assert sum("retry declaration" in line for line in found.log) == 2


def test_evidence_needs_a_debugging_exercise(tmp_path):
    with pytest.raises(ValueError, match="no scenario"):
        evidence("01-seq-per-key", tmp_path)


def test_item_rate_rejects_the_count_winner_as_the_rate_winner():
    most, rate = expected("05-item-rate", orders=2000, seed=11)
    assert most != rate
    wrong = check("05-item-rate", (most, most), orders=2000, seed=11)
    assert not wrong and "Divide" in wrong.message


def test_policy_goal_rejects_a_retry_storm_with_a_reason():
    from nbkit.notebook.simulate import RetryPolicy

    goal = {"messages": 1000, "span": 60, "failure_rate": 0.5, "poison": 0.005}
    storm = check("07-policy-goal", RetryPolicy(max_attempts=30, delay=0, backoff="fixed"), workload=goal)
    assert not storm and "retry storm" in storm.message
    slow_storm = check("07-policy-goal", RetryPolicy(max_attempts=30, delay=1, backoff="fixed"), workload=goal)
    assert not slow_storm and "30 attempts" in slow_storm.message
    assert check("07-policy-goal", RetryPolicy(max_attempts=10, delay=2, backoff="fixed"), workload=goal)


def test_keep_count_is_measured_by_a_redrive():
    assert expected("07-keep-count", max_attempts=4) == (5, "orders.dead")
    assert expected("07-keep-count", max_attempts=2) == (3, "orders.dead")
    assert check("07-keep-count", [5, "orders.dead"], max_attempts=4)


@pytest.mark.parametrize("attempt", [5, 6])
def test_keep_count_hint_on_the_key_does_not_second_guess_the_attempt(attempt):
    verdict = check("07-keep-count", [attempt, "orders"], max_attempts=4)
    assert not verdict and "where does a failure at or past the cap go?" in verdict.message
    assert verdict.message.lower().count("attempt right") <= 1 and "may be right" not in verdict.message


#: Lesson 09's shop: two yen orders (never paid, dead-lettered at 20 s), two cards declined once (paid at 30 s).
SHOP = ((1, "EUR", "ok"), (2, "JPY", "ok"), (3, "USD", "declined-once"), (4, "EUR", "ok"),
        (5, "JPY", "ok"), (6, "GBP", "ok"), (7, "USD", "declined-once"), (8, "EUR", "ok"))  # fmt: skip


@pytest.mark.parametrize(
    ("crash_at", "lost"),
    [(5, [2, 3, 5, 7]), (15, [2, 3, 5, 7]), (25, [3, 7]), (35, [])],
    ids=["before-the-first-copies", "in-both-delays", "after-the-dead-letters", "after-everything"],
)
def test_a_crash_loses_the_orders_whose_copies_were_waiting(crash_at, lost):
    assert expected("09-lost", orders=SHOP, crash_at=crash_at) == lost
    if lost:
        assert check("09-lost", list(reversed(lost)), orders=SHOP, crash_at=crash_at)  # any order


def test_the_capstone_exercises_know_the_lessons_shop_so_their_cells_run_first():
    """09's exercise cells pass no context: the shop and crash they ask about are the exercises' own."""
    assert check("09-lost", None).kind == "prompt" and check("09-twice", None).kind == "prompt"
    assert expected("09-lost") == expected("09-lost", orders=SHOP, crash_at=15) == [2, 3, 5, 7]
    assert expected("09-twice") == [4, 6, 8]
    assert expected("09-lost", crash_at=35) == []


def test_at_least_once_pays_again_what_follows_the_kept_position():
    assert expected("09-twice", orders=SHOP, crash_at=15) == [4, 6, 8]
    assert expected("09-twice", orders=SHOP, crash_at=35) == []  # nothing was waiting: nothing read again
    hint = check("09-twice", [], orders=SHOP, crash_at=15)
    assert not hint and "exactly once" not in hint.message and "loss window" in hint.message


def test_redrive_loop_evidence_is_a_real_run(tmp_path):
    from nbkit.tabular.frames import read_stream

    found = evidence("09-redrive-loop", tmp_path)
    frame = read_stream(found.files["mystery.ss"])
    assert frame["retry_count"].max() == 3
    assert (frame["stream_key"] == "orders.dead").sum() == 4
    redriven = [h.get("x-nbkit-redriven-from") for h in frame.loc[frame["retry_count"] == 0, "headers"]]
    assert redriven == [None, None, None, "orders.dead#1", "orders.dead#2", "orders.dead#3"]
    assert sum("retry attempts exhausted" in line for line in found.log) == 4
    assert check("09-redrive-loop", "b") and not check("09-redrive-loop", "a")
