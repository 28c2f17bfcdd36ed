"""nbkit.exercises: each check recomputes its answer, accepts it, and answers a near miss with a hint."""

from __future__ import annotations

import pytest

from nbkit.exercises import check, exercises, expected
from nbkit.transport.positions import FilePosition


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="00-retry-journey"):
        check("99-nothing", 1)


def test_every_lesson_exercise_states_its_expected_answer():
    mine = [name for name in exercises() if name[:2] in {"00", "01", "02", "03", "04", "05", "06"}]
    assert len(mine) >= 13
    for name in mine:
        try:
            expected(name)
        except KeyError as exc:
            pytest.fail(f"{name}: {exc}")
        except TypeError:
            pass  # it needs its context: stated, just not given here


def test_retry_journey_recomputes_from_the_runtime():
    assert expected("00-retry-journey", fails=3) == (4, 14.0)
    assert check("00-retry-journey", (4, 14), fails=3)
    near = check("00-retry-journey", (4, 8), fails=3)
    assert not near and "number of deliveries is right" in near.message


def test_resume_position_explains_the_inclusive_off_by_one():
    assert check("02-resume-position", FilePosition.sequence(4), last_processed=3)
    near = check("02-resume-position", FilePosition.sequence(3), last_processed=3)
    assert not near and "inclusive" in near.message


def test_what_is_written_follows_the_cap():
    assert expected("02-what-is-written", script="rr", max_attempts=3) == ["r", "r", "r", "r", "r", "r"]
    assert expected("02-what-is-written", script="ad", max_attempts=2) == ["a", "d"]
    assert not check("02-what-is-written", ["a", "d", "r"], script="adr", max_attempts=2)


def test_cap_and_timing_exercises():
    assert expected("03-succeeds-on-cap", max_attempts=3, succeeds_on=4) == (3, 1)
    assert expected("03-dead-letter-time", max_attempts=3, base=1) == 3.0
    assert check("03-dead-letter-time", 3, max_attempts=3, base=1)


def test_pipe_stages_carry_the_retry_count():
    assert expected("04-one-stage", lines=2, max_attempts=3) == {"jobs.retry": 2}
    assert expected("04-second-stage", lines=2, max_attempts=3) == {"jobs.retry2": 2}
    assert expected("04-second-stage", lines=2, max_attempts=2) == {"jobs.dead": 2}
    assert check("04-one-stage", {"jobs.retry": 2, "jobs.dead": 0}, lines=2, max_attempts=3)
