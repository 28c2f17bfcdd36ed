"""``nbkit.simulate``: a real App on a virtual clock, checked against outcomes worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

import nbkit
from nbkit import RetryPolicy, Workload, policy_summary, read_stream, simulate

BOTH = ("file", "pipe")


def per_message(events: pd.DataFrame, transport: str) -> dict[int, list[tuple[float, int, str]]]:
    """message -> [(seconds from the start, attempt, action)] in settlement order."""
    ev = events[events["transport"] == transport]
    start = pd.Timestamp("2024-01-01", tz="UTC")
    out: dict[int, list] = {}
    for t, message, attempt, action in zip(ev["time"], ev["message"], ev["attempt"], ev["action"], strict=True):
        out.setdefault(int(message), []).append(((t - start).total_seconds(), int(attempt), str(action)))
    return out


def test_no_failures_means_one_delivery_each_and_nothing_written():
    events = simulate(Workload(messages=5, span=10, failure_rate=0.0), RetryPolicy())
    for transport in BOTH:
        assert per_message(events, transport) == {i: [(2.0 * (i - 1), 1, "unsupported")] for i in range(1, 6)}
    summary = policy_summary(events)
    assert summary.loc["file"].tolist() == summary.loc["pipe"].tolist() == [5, 5, 0, 0, 0, 0, 0.0, 0.0, 0.0]


def test_always_failing_with_exponential_backoff_dead_letters_each_message_after_its_last_attempt():
    # 3 messages 1 s apart; attempts at t, t+2, t+2+4; the 3rd attempt is at the cap: dead letter
    events = simulate(Workload(messages=3, span=3, failure_rate=1.0), RetryPolicy(max_attempts=3, delay=2))
    for transport in BOTH:
        history = per_message(events, transport)
        for i in (1, 2, 3):
            t = float(i - 1)
            assert history[i] == [(t, 1, "delayed-copy"), (t + 2, 2, "delayed-copy"), (t + 6, 3, "dead-letter")]
        ev = events[events["transport"] == transport]
        assert sorted(ev["delay"].tolist()) == [0.0] * 3 + [2.0] * 3 + [4.0] * 3
    summary = policy_summary(events)
    for transport in BOTH:
        row = summary.loc[transport]
        assert (row["delivered"], row["dead-lettered"], row["rejected"], row["copies written"]) == (0, 3, 0, 9)
        assert row["longest wait (s)"] == 6.0 and pd.isna(row["mean to success (s)"])
    file_rows = events[events["transport"] == "file"]
    pipe_rows = events[events["transport"] == "pipe"]
    assert set(file_rows["destination"].dropna()) == {"orders", "orders.dead"}  # copies under the same key
    assert set(pipe_rows["destination"].dropna()) == {"orders.retry", "orders.dead"}  # copies to out_retry


def test_without_a_dead_letter_key_the_last_attempt_is_rejected_and_nothing_written():
    policy = RetryPolicy(max_attempts=2, delay=1, backoff="fixed", dead_letter=False)
    events = simulate(Workload(messages=2, span=10, failure_rate=1.0), policy)
    summary = policy_summary(events)
    for transport in BOTH:
        assert per_message(events, transport)[2] == [(5.0, 1, "delayed-copy"), (6.0, 2, "rejected")]
        assert summary.loc[transport, ["dead-lettered", "rejected", "copies written"]].tolist() == [0, 2, 2]


def test_the_workload_heals_after_heal_after_seconds():
    # message 1 at 0 s fails, retries after 3 s (fails, 3 < 5), then after 3 s more: at 6 s >= 5 it succeeds;
    # message 2 arrives at 5 s: healed, one delivery
    policy = RetryPolicy(max_attempts=5, delay=3, backoff="fixed")
    events = simulate(Workload(messages=2, span=10, failure_rate=1.0, heal_after=5), policy)
    summary = policy_summary(events)
    for transport in BOTH:
        history = per_message(events, transport)
        assert history[1] == [(0.0, 1, "delayed-copy"), (3.0, 2, "delayed-copy"), (6.0, 3, "unsupported")]
        assert history[2] == [(5.0, 1, "unsupported")]
        row = summary.loc[transport]
        assert (row["delivered"], row["copies written"], row["mean to success (s)"], row["longest wait (s)"]) == (
            2, 2, 3.0, 6.0,
        )  # fmt: skip


def test_poison_messages_fail_every_attempt_even_after_healing():
    workload = Workload(messages=10, span=10, failure_rate=0.0, poison=0.3, heal_after=0)
    poisoned = workload.poisoned(seed=4)
    assert len(poisoned) == 3
    events = simulate(workload, RetryPolicy(max_attempts=2, delay=1), seed=4)
    for transport in BOTH:
        ev = events[events["transport"] == transport]
        assert sorted(ev.loc[ev["action"] == "dead-letter", "message"]) == sorted(poisoned)
    assert workload.poisoned(seed=5) != poisoned or len(poisoned) in (0, 10)  # the seed picks them


def test_linear_backoff_is_capped_by_max_delay():
    policy = RetryPolicy(max_attempts=5, delay=2, backoff="linear", max_delay=5)
    assert policy.delays() == [2.0, 4.0, 5.0, 5.0]
    events = simulate(Workload(messages=1, failure_rate=1.0), policy, transport="file")
    assert events["delay"].tolist() == [2.0, 4.0, 5.0, 5.0, 0.0]
    assert events["transport"].unique().tolist() == ["file"]


def test_random_failures_and_jitter_are_the_same_on_both_transports_and_fixed_by_the_seed():
    workload = Workload(messages=200, span=20, failure_rate=0.4)
    policy = RetryPolicy(max_attempts=4, delay=1, jitter=0.5)
    events = simulate(workload, policy, seed=3)
    file, pipe = per_message(events, "file"), per_message(events, "pipe")
    assert file == pipe  # the same failures at the same times with the same delays
    delays = events.loc[events["action"] == "delayed-copy", ["attempt", "delay"]]
    base = delays["attempt"].map(lambda a: policy.base_delay(int(a)))
    assert ((delays["delay"] >= base * 0.5) & (delays["delay"] <= base * 1.5)).all()
    assert delays["delay"].nunique() > 10  # jitter spreads them
    again = simulate(workload, policy, seed=3)
    pd.testing.assert_frame_equal(events, again)
    other = simulate(workload, policy, seed=4)
    assert not events["action"].equals(other["action"]) or not events["delay"].equals(other["delay"])


def test_bytes_added_is_what_the_copies_add_to_the_file(tmp_path):
    path = tmp_path / "kept.ss"
    workload = Workload(messages=4, span=4, failure_rate=1.0)
    policy = RetryPolicy(max_attempts=2, delay=1)
    events = simulate(workload, policy, transport="file", path=path)
    quiet = simulate(Workload(messages=4, span=4, failure_rate=0.0), policy, transport="file", path=tmp_path / "q.ss")
    added = policy_summary(events).loc["file", "bytes added"]
    assert added == path.stat().st_size - (tmp_path / "q.ss").stat().st_size > 0
    assert policy_summary(quiet).loc["file", "bytes added"] == 0
    frame = read_stream(path)
    assert (frame["stream_key"] == "orders.dead").sum() == 4
    assert sorted(frame.loc[frame["stream_key"] == "orders", "retry_count"]) == [0] * 4 + [1] * 4


def test_the_lazy_names_resolve():
    assert nbkit.simulate is simulate and nbkit.Workload is Workload and nbkit.RetryPolicy is RetryPolicy


# The cases marked type: ignore[arg-type] pass a wrong type on purpose: the checks made at run time are tested.
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Workload(messages=0), "messages must be a whole number from 1"),
        (lambda: Workload(messages=2.5), "messages must be a whole number"),  # type: ignore[arg-type]
        (lambda: Workload(span=0), "span must be > 0"),
        (lambda: Workload(failure_rate=-0.1), "failure_rate must be from 0 to 1"),
        (lambda: Workload(heal_after=-1), "heal_after must be >= 0"),
        (lambda: Workload(poison=1.5), "poison must be from 0 to 1"),
        (lambda: Workload(span=float("nan")), "span must be a finite number"),
        (lambda: RetryPolicy(max_attempts=0), "max_attempts must be a whole number from 1"),
        (lambda: RetryPolicy(delay=-1), "delay must be >= 0"),
        (lambda: RetryPolicy(backoff="expo"), "backoff must be one of 'fixed', 'linear', 'exponential'"),
        (lambda: RetryPolicy(max_delay=-2), "max_delay must be >= 0"),
        (lambda: RetryPolicy(jitter=2), "jitter must be from 0 to 1"),
        (lambda: RetryPolicy(dead_letter="orders.dead"), "dead_letter must be True or False"),  # type: ignore[arg-type]
        (lambda: simulate(Workload(messages=1), RetryPolicy(), transport="kafka"), "transport must be one of"),
        (lambda: simulate(Workload(messages=1), RetryPolicy(), seed="x"), "seed must be a whole number"),  # type: ignore[arg-type]
        (lambda: simulate({"messages": 1}, RetryPolicy()), "workload must be an nbkit.Workload"),  # type: ignore[arg-type]
        (lambda: simulate(Workload(messages=1), 3), "policy must be an nbkit.RetryPolicy"),  # type: ignore[arg-type]
        (lambda: policy_summary(pd.DataFrame({"time": []})), "needs the column 'message'"),
    ],
)
def test_bad_arguments_name_the_field_and_what_is_allowed(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert message in str(err.value)
