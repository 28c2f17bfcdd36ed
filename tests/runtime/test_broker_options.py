"""Each broker's ``subscriber`` takes its own transport's options: a wrong one fails when the decorator is made."""

from __future__ import annotations

import pytest

from nbkit import FileBroker, FilePosition, PositionStore, StdioBroker
from nbkit.errors import ConfigurationError
from nbkit.runtime.registration import FileRegistration, PipeRegistration

FILE_TAKES = "FileBroker.subscriber takes: name, replay, start_at, max_attempts, dead_letter, checkpoint, at_least_once"
PIPE_TAKES = "StdioBroker.subscriber takes: name, max_attempts, dead_letter, out_retry"


@pytest.fixture
def file_broker(tmp_path):
    return FileBroker(tmp_path / "s.ss")


@pytest.fixture
def pipe_broker():
    return StdioBroker(stdin=[], stdout=[])


def test_a_pipe_option_on_a_file_fails_before_any_handler(file_broker):
    with pytest.raises(ConfigurationError) as info:
        file_broker.subscriber("jobs", out_retry="jobs.retry")  # no handler decorated yet
    assert str(info.value) == f"out_retry is a pipe option (StdioBroker.subscriber); {FILE_TAKES}"
    assert file_broker.registrations == []


@pytest.mark.parametrize(
    "option",
    [{"replay": True}, {"start_at": FilePosition.beginning()}, {"checkpoint": None}],
    ids=lambda o: next(iter(o)),
)
def test_a_file_option_on_a_pipe_fails_whatever_its_value(pipe_broker, option):
    (name,) = option
    with pytest.raises(ConfigurationError) as info:
        pipe_broker.subscriber("jobs", out_retry="jobs.retry", **option)
    assert str(info.value) == f"{name} is a file option (FileBroker.subscriber); {PIPE_TAKES}"


def test_an_option_no_broker_takes_is_named(file_broker, pipe_broker):
    with pytest.raises(ConfigurationError, match=rf"^FileBroker.subscriber has no option 'retries'; {FILE_TAKES}$"):
        file_broker.subscriber("jobs", retries=3)
    with pytest.raises(
        ConfigurationError, match=rf"^StdioBroker.subscriber has no option 'max_attempt'; {PIPE_TAKES}$"
    ):
        pipe_broker.subscriber("jobs", max_attempt=3)


def test_include_checks_the_same_options(file_broker, pipe_broker):
    with pytest.raises(ConfigurationError, match="out_retry is a pipe option"):
        file_broker.include(print, "jobs", out_retry="jobs.retry")
    with pytest.raises(ConfigurationError, match="start_at is a file option"):
        pipe_broker.include(print, "jobs", start_at=FilePosition.end())
    registration = pipe_broker.include(print, "jobs", out_retry="jobs.retry", max_attempts=2)
    assert registration == pipe_broker.registrations[0]


def test_each_broker_builds_its_own_registration(tmp_path, file_broker, pipe_broker):
    store = PositionStore(tmp_path / "p.json")
    file_broker.subscriber("jobs", replay=True, start_at=FilePosition.sequence(3), checkpoint=store, max_attempts=2)(
        print
    )
    pipe_broker.subscriber("jobs", name="worker", out_retry="jobs.retry", dead_letter="jobs.dead")(print)
    (on_file,) = file_broker.registrations
    (on_pipe,) = pipe_broker.registrations
    assert isinstance(on_file, FileRegistration) and not isinstance(on_file, PipeRegistration)
    assert (on_file.name, on_file.replay, on_file.start_at, on_file.checkpoint) == (
        "jobs",
        True,
        FilePosition.sequence(3),
        store,
    )
    assert on_file.declaration.max_attempts == 2
    assert isinstance(on_pipe, PipeRegistration)
    assert (on_pipe.name, on_pipe.out_retry, on_pipe.checkpoint) == ("worker", "jobs.retry", None)
    assert on_pipe.declaration.dead_letter == "jobs.dead"
    assert pipe_broker.retry_destination(on_pipe) == "jobs.retry"
    assert file_broker.retry_destination(on_file) == "jobs"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"max_attempts": 0}, "max_attempts must be a whole number"),
        ({"max_attempts": 2.5}, "max_attempts must be a whole number"),
        ({"dead_letter": "dead letters"}, "dead_letter key"),
        ({"name": 7}, "name takes a string"),
    ],
)
def test_the_shared_options_are_checked_alike_on_both(file_broker, pipe_broker, options, words):
    for broker in (file_broker, pipe_broker):
        with pytest.raises(ConfigurationError, match=words):
            broker.subscriber("jobs", **options)


def test_option_values_are_checked_at_decoration(file_broker, pipe_broker):
    with pytest.raises(ConfigurationError, match="start_at takes a FilePosition"):
        file_broker.subscriber("jobs", start_at=5)
    with pytest.raises(ConfigurationError, match="checkpoint takes a PositionStore"):
        file_broker.subscriber("jobs", checkpoint={"jobs": 1})
    with pytest.raises(ConfigurationError, match="out_retry key"):
        pipe_broker.subscriber("jobs", out_retry="jobs retry")
    with pytest.raises(ConfigurationError, match="subscription stream key"):
        pipe_broker.subscriber("bad key", out_retry="r")
    register = file_broker.subscriber("jobs")
    with pytest.raises(ConfigurationError, match="not callable"):
        register("not a handler")  # type: ignore[arg-type]
    assert file_broker.registrations == []
