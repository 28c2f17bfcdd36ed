"""nbkit.lineage: services run by nbkit's App on a virtual clock with known schedules, on a file and on a
pipe, give back exactly their schedules as observed delays and the right final state per message.

The runtime's own settlement events are the oracle: every copy the runtime wrote (``destination``,
``copy_seq``) must be linked to the delivery it copies (``stream_key``, ``seq``), with the scheduled
delay (0 s for a copy at once or a dead-letter copy) as the observed one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, StdioBroker, StreamWriter
from nbkit.notebook.session import Session
from nbkit.runtime.delivery import Delivery
from nbkit.tabular.frames import concat_frames, read_pipe, read_stream
from nbkit.tabular.lineage import LINEAGE_COLUMNS, lineage, summarize
from nbkit.tabular.timeline_steps import steps_from_lineage
from nbkit.wire import envelope
from nbkit.wire.stdio_line import format_line

DATA = Path(__file__).resolve().parents[1] / "data"
Handler = Callable[[Delivery], HandlerOutcome]


# -- running a service with a known schedule ------------------------------------------------------------
def advance(session: Session, seconds: float) -> None:
    """Move the virtual clock ``seconds`` on, delivering each copy at the moment it is written (so the
    service never lags: observed delays equal scheduled ones)."""
    target = session.clock.now() + seconds
    session.step(1_000_000)
    while (due := session.app.next_due()) is not None and due <= target:
        session.app.fire_due(until=due)
        session.step(1_000_000)
    session.advance(target - session.clock.now())


def run_file(tmp_path: Path, messages: Iterable[tuple[str, str]], handler: Handler, **options):
    """Publish ``messages`` one virtual second apart into a file served by ``handler``; run to the end.
    Returns (the file as read_stream reads it, the runtime's events)."""
    messages = list(messages)
    path = tmp_path / "service.ss"
    broker = FileBroker(str(path), end_with_eos=True)
    for key in dict.fromkeys(k for k, _ in messages):
        broker.subscriber(key, name=key, start_at=FilePosition.beginning(), **options)(handler)
    session = Session(App(broker))
    session.step(0)
    for key, payload in messages:
        broker.publish(key, payload)
        advance(session, 1)
    session.run()
    session.close()
    return read_stream(path), session.events


def run_pipe(messages: Iterable[tuple[str, str]], handler: Handler, **options):
    """The same service as a pipe stage that reads its own copies back (loopback), each key ``K`` with
    ``out_retry="K.retry"``. Returns (stdin and stdout captures concatenated, the runtime's events)."""
    messages = list(messages)
    broker = StdioBroker(stdin=[], stdout=[], loopback=True)
    for key in dict.fromkeys(k for k, _ in messages):
        retry = f"{key}.retry"
        broker.subscriber(key, name=key, out_retry=retry, **options)(handler)
        broker.subscriber(retry, name=retry, out_retry=retry, **options)(handler)
    session = Session(App(broker))
    stdin: list[str] = []
    session.step(0)
    for i, (key, payload) in enumerate(messages):
        line = format_line(int(session.clock.now() * 1000), key, i, payload)
        stdin.append(line)
        broker.feed(line)
        advance(session, 1)
    session.run()
    session.close()
    return concat_frames(read_pipe(lines=stdin), read_pipe(lines=session.output())), session.events


def on_both(tmp_path: Path, messages, handler_factory: Callable[[], Handler], **options):
    """[(transport, frame, events)] for the file and the pipe run of the same service."""
    file_frame, file_events = run_file(tmp_path, messages, handler_factory(), **options)
    pipe_frame, pipe_events = run_pipe(messages, handler_factory(), **options)
    return [("file", file_frame, file_events), ("pipe", pipe_frame, pipe_events)]


# -- the oracle -----------------------------------------------------------------------------------------
def runtime_links(events: pd.DataFrame) -> dict[tuple[str, int], tuple[tuple[str, int], float]]:
    """{copy (key, seq): (the delivery it copies (key, seq), scheduled delay in s)} from the events."""
    written = events[events["copy_seq"].notna()]
    return {
        (str(e.destination), int(e.copy_seq)): ((str(e.stream_key), int(e.seq)), 0.0 if pd.isna(e.delay) else e.delay)
        for e in written.itertuples()
    }


def lineage_links(lin: pd.DataFrame) -> dict[tuple[str, int], tuple[tuple[str, int], float]]:
    """The same map as the lineage frame tells it: each record with a predecessor, its observed delay."""
    prev_key = lin.groupby("message")["stream_key"].shift().astype(object)
    prev_seq = lin.groupby("message")["seq"].shift()
    out = {}
    for row, pk, ps in zip(lin.itertuples(), prev_key, prev_seq, strict=True):
        if isinstance(pk, str):
            out[(str(row.stream_key), int(row.seq))] = ((pk, int(ps)), row.delay.total_seconds())
    return out


def assert_matches_runtime(lin: pd.DataFrame, events: pd.DataFrame) -> None:
    assert lineage_links(lin) == runtime_links(events)
    dead_copies = {
        (str(e.destination), int(e.copy_seq)) for e in events[events["action"] == "dead-letter"].itertuples()
    }
    dead_messages = {
        m
        for m, k, s in zip(lin["message"], lin["stream_key"], lin["seq"], strict=True)
        if (str(k), int(s)) in dead_copies
    }
    finals = lin.groupby("message")["final_state"].first()
    assert set(finals[finals == "dead-lettered"].index) == dead_messages
    assert set(finals[finals != "dead-lettered"]) <= {"no further copy"}
    assert lin.attrs["unlinked_copies"] == 0


def delays_by_message(lin: pd.DataFrame) -> list[list[float]]:
    """Observed delays (s) of each message's retry copies, messages in order (dead letters left out)."""
    copies = lin[lin["delay"].notna() & ~lin["dead_letter"]]
    per = copies.groupby("message")["delay"].apply(lambda d: [x.total_seconds() for x in d])
    return [per.get(m, []) for m in sorted(lin["message"].unique())]


def until(attempts: int, delay: Callable[[int], float]) -> Callable[[], Handler]:
    """A handler factory: retry_after(delay(attempt)) while attempt < ``attempts``, then ack."""

    def factory() -> Handler:
        def handle(d: Delivery) -> HandlerOutcome:
            return HandlerOutcome.retry_after(delay(d.attempt)) if d.attempt < attempts else HandlerOutcome.ack()

        return handle

    return factory


ORDERS = [("jobs", f'{{"id": {i}}}') for i in range(1, 5)]


# -- schedules ------------------------------------------------------------------------------------------
def test_fixed_delay_is_observed_exactly_on_both_transports(tmp_path):
    for transport, frame, events in on_both(tmp_path, ORDERS, until(3, lambda a: 5)):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        originals = lin[lin["attempt"] == 1]
        assert len(originals) == 4, transport
        assert delays_by_message(lin) == [[5.0, 5.0]] * 4
        assert set(lin["final_state"]) == {"no further copy"}
        assert lin.attrs["ambiguous_links"] == 0


def test_exponential_backoff_is_observed_exactly(tmp_path):
    for _, frame, events in on_both(tmp_path, ORDERS, until(4, lambda a: 2**a)):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert delays_by_message(lin) == [[2.0, 4.0, 8.0]] * 4
        summary = summarize(lin)
        assert summary.attempts.to_dict() == {4: 4}
        assert summary.delays["median"].to_dict() == {2: 2.0, 3: 4.0, 4: 8.0}
        assert summary.delays["p95"].to_dict() == {2: 2.0, 3: 4.0, 4: 8.0}


def test_mixed_keys_with_their_own_schedules(tmp_path):
    messages = [("orders", '{"n": 1}'), ("refunds", '{"n": 1}'), ("orders", '{"n": 2}'), ("refunds", '{"n": 2}')]

    def factory() -> Handler:
        def handle(d: Delivery) -> HandlerOutcome:
            fast = d.stream_key.startswith("orders")
            if d.attempt >= (2 if fast else 3):
                return HandlerOutcome.ack()
            return HandlerOutcome.retry_after(2 if fast else 7)

        return handle

    for _, frame, events in on_both(tmp_path, messages, factory):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert delays_by_message(lin) == [[2.0], [7.0, 7.0], [2.0], [7.0, 7.0]]


def test_a_cap_with_a_dead_letter_key_ends_dead_lettered(tmp_path):
    for transport, frame, events in on_both(
        tmp_path, ORDERS, until(99, lambda a: 3), max_attempts=3, dead_letter="jobs.dead"
    ):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert delays_by_message(lin) == [[3.0, 3.0]] * 4
        assert set(lin["final_state"]) == {"dead-lettered"}
        dead = lin[lin["dead_letter"]]
        assert list(dead["stream_key"].astype(str)) == ["jobs.dead"] * 4, transport
        assert list(dead["attempt"]) == [4] * 4  # the count incremented once more than the last delivery
        assert list(dead["delay"].dt.total_seconds()) == [0.0] * 4  # written at once
        summary = summarize(lin)
        assert summary.attempts.to_dict() == {3: 4}
        assert summary.dead_letters == 4
        assert summary.final_states.to_dict() == {"dead-lettered": 4, "no further copy": 0}


def test_a_cap_without_a_dead_letter_key_leaves_no_further_copy(tmp_path):
    for _, frame, events in on_both(tmp_path, ORDERS, until(99, lambda a: 3), max_attempts=3):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert not lin["dead_letter"].any()
        assert set(lin["final_state"]) == {"no further copy"}
        assert summarize(lin).attempts.to_dict() == {3: 4}
        last = lin.groupby("message").tail(1)
        assert list(last["attempt"]) == [3] * 4 and set(last["state"]) == {"no further copy"}
        assert set(lin.groupby("message").head(2)["state"]) == {"copied-again"}


def test_dead_letter_without_a_cap_goes_straight_to_the_dead_letter_key(tmp_path):
    for _, frame, events in on_both(tmp_path, ORDERS[:2], until(99, lambda a: 1), dead_letter="jobs.dlq"):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert list(lin["dead_letter"]) == [False, True, False, True]
        assert set(lin["final_state"]) == {"dead-lettered"}


def test_identical_payloads_with_different_delays_keep_their_own_histories(tmp_path):
    # Four messages with the same payload; the delay depends on the call, so copies overtake each other.
    messages = [("jobs", "same")] * 4

    def factory() -> Handler:
        delays = iter([9, 1, 5, 2, 4, 1, 6, 3])

        def handle(d: Delivery) -> HandlerOutcome:
            return HandlerOutcome.retry_after(next(delays)) if d.attempt < 3 else HandlerOutcome.ack()

        return handle

    for transport, frame, events in on_both(tmp_path, messages, factory):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)  # stream-sequence names each copy's predecessor
        assert lin.attrs["ambiguous_links"] == 0, transport
        scheduled = sorted(events["delay"].dropna().tolist())
        assert sorted(lin["delay"].dropna().dt.total_seconds().tolist()) == scheduled


def mixed_outcomes(fraction: float) -> Callable[[], Handler]:
    """Drops, retries at once (retry()) and delays of n % 3 + ``fraction`` s."""

    def factory() -> Handler:
        def handle(d: Delivery) -> HandlerOutcome:
            n = d.json()["n"]
            if n % 4 == 0:
                return HandlerOutcome.drop()
            if n % 4 == 1:
                return HandlerOutcome.retry()
            return HandlerOutcome.retry_after(n % 3 + fraction)

        return handle

    return factory


def test_a_mix_of_outcomes_matches_the_runtime(tmp_path):
    messages = [("jobs", f'{{"n": {i}}}') for i in range(12)]
    for _, frame, events in on_both(tmp_path, messages, mixed_outcomes(0), max_attempts=3, dead_letter="jobs.dead"):
        lin = lineage(frame)
        assert_matches_runtime(lin, events)
        assert lin["message"].nunique() == 12


def test_a_file_keeps_milliseconds_a_pipe_whole_seconds(tmp_path):
    messages = [("jobs", f'{{"n": {i}}}') for i in range(12)]
    frame, events = run_file(tmp_path, messages, mixed_outcomes(0.25)(), max_attempts=3, dead_letter="jobs.dead")
    assert_matches_runtime(lineage(frame), events)  # 0.25 s, 1.25 s, 2.25 s exactly
    frame, events = run_pipe(messages, mixed_outcomes(0.25)(), max_attempts=3, dead_letter="jobs.dead")
    lin = lineage(frame)
    observed, scheduled = lineage_links(lin), runtime_links(events)
    assert {k: v[0] for k, v in observed.items()} == {k: v[0] for k, v in scheduled.items()}
    for copy, (_, delay) in observed.items():
        assert delay == int(delay) and abs(delay - scheduled[copy][1]) < 1


# -- linking rule, limits and attrs ----------------------------------------------------------------------
def _write(path: Path, records: list[tuple[str, int, bytes, dict]]) -> Path:
    """A hand-made file: (key, timestamp ms, payload, headers) per record, enveloped when headers."""
    with StreamWriter(path, created_at_ms=0) as w:
        for key, ts, payload, headers in records:
            data = envelope.encode(headers, payload, force_text=False) if headers else payload
            w.write(key, data, timestamp_ms=ts)
    return path


def count(c: int, **more: str) -> dict:
    return {envelope.RETRY_COUNT_HEADER: str(c), **more}


def test_without_stream_sequence_the_earliest_unlinked_candidate_wins(tmp_path):
    path = _write(
        tmp_path / "f.ss",
        [
            ("jobs", 0, b"x", {}),
            ("jobs", 1000, b"x", {}),
            ("jobs", 3000, b"x", count(1)),  # two candidates: the first one wins
            ("jobs", 7000, b"x", count(1)),  # the second one is left
            ("jobs", 8000, b"y", count(1)),  # no original with payload y: unlinked
        ],
    )
    lin = lineage(read_stream(path))
    assert list(lin["message"]) == [0, 0, 1, 1, 2]
    assert list(lin["seq"]) == [1, 3, 2, 4, 5]
    assert list(lin["delay"].dt.total_seconds().fillna(-1)) == [-1, 3.0, -1, 6.0, -1]
    assert lin.attrs["ambiguous_links"] == 1 and lin.attrs["unlinked_copies"] == 1
    assert list(lin["attempt"]) == [1, 2, 1, 2, 2]


def test_other_headers_must_match_apart_from_the_count_and_stream_sequence(tmp_path):
    path = _write(
        tmp_path / "f.ss",
        [
            ("jobs", 0, b"x", {"tenant": "a"}),
            ("jobs", 10, b"x", {"tenant": "b"}),
            ("jobs", 50, b"x", count(1, tenant="b", **{"stream-sequence": "2"})),
            ("jobs", 90, b"x", count(2, tenant="b", **{"stream-sequence": "3"})),
        ],
    )
    lin = lineage(read_stream(path))
    assert lin.groupby("message")["seq"].apply(list).tolist() == [[1], [2, 3, 4]]
    assert lin["delay"].dt.total_seconds().dropna().tolist() == [0.04, 0.04]


def test_stream_sequence_overrides_order_and_a_copy_never_links_to_a_later_record(tmp_path):
    path = _write(
        tmp_path / "f.ss",
        [
            ("jobs", 0, b"x", {}),
            ("jobs", 1, b"x", {}),
            ("jobs", 5, b"x", count(1, **{"stream-sequence": "2"})),  # copies seq 2, although seq 1 is earlier
            ("jobs", 6, b"x", count(1, **{"stream-sequence": "9"})),  # names a record not in the file
            ("jobs", 7, b"x", {}),
        ],
    )
    lin = lineage(read_stream(path))
    assert lin.groupby("message")["seq"].apply(list).tolist() == [[1], [2, 3], [4], [5]]
    assert lin.attrs["unlinked_copies"] == 1 and lin.attrs["ambiguous_links"] == 0


def test_a_file_read_from_the_middle_counts_copies_whose_original_is_not_there(tmp_path):
    frame, _ = run_file(tmp_path, ORDERS, until(3, lambda a: 5)())
    later = read_stream(tmp_path / "service.ss", start="2024-01-01T00:00:04.5Z")
    lin = lineage(later)
    assert lin.attrs["unlinked_copies"] == len(later[later["attempt"] == 2])
    assert lin.groupby("message").head(1)["delay"].isna().all()
    assert len(lineage(frame)) == len(frame)


def test_a_pipe_stdout_alone_links_from_the_first_copy_on(tmp_path):
    frame, events = run_pipe(ORDERS, until(4, lambda a: 2**a)())
    stdout = frame[frame["stream_key"].astype(str) != "jobs"]
    lin = lineage(stdout)
    assert lin.attrs["unlinked_copies"] == 4  # the originals were on stdin
    assert delays_by_message(lin) == [[4.0, 8.0]] * 4


@pytest.mark.parametrize("mode", ["json", "objects"])
def test_json_payloads_link_as_the_bytes_do(tmp_path, mode):
    run_file(tmp_path, ORDERS, until(3, lambda a: 5)())
    auto = lineage(read_stream(tmp_path / "service.ss"))
    parsed = lineage(read_stream(tmp_path / "service.ss", payload=mode))
    pd.testing.assert_series_equal(auto["message"], parsed["message"])
    pd.testing.assert_series_equal(auto["delay"], parsed["delay"])


def test_dead_letter_keys_can_be_named(tmp_path):
    path = _write(tmp_path / "f.ss", [("jobs", 0, b"x", {}), ("parked", 5, b"x", count(1))])
    assert lineage(read_stream(path))["final_state"].tolist() == ["no further copy"] * 2
    named = lineage(read_stream(path), dead_letter_keys="parked")
    assert named["final_state"].tolist() == ["dead-lettered"] * 2
    assert named["state"].tolist() == ["copied-again", "dead-lettered"]
    assert lineage(read_stream(path), dead_letter_keys=lambda k: k == "parked")["dead_letter"].tolist() == [False, True]


def test_columns_dtypes_and_kept_attrs():
    frame = read_stream(DATA / "sample-1.ss")
    lin = lineage(frame)
    assert tuple(lin.columns) == LINEAGE_COLUMNS
    assert str(lin["delay"].dtype) == "timedelta64[ms]" and str(lin["timestamp"].dtype) == "datetime64[ms, UTC]"
    assert lin["payload"].dtype == frame["payload"].dtype and lin["stream_key"].dtype == "category"
    assert lin.attrs["read_end"] == frame.attrs["read_end"]


def test_rust_written_samples_give_a_lineage(tmp_path):
    samples = sorted(Path("/work/shared/testdata/ss").glob("*.ss")) or [DATA / "sample-1.ss"]
    for path in samples + [DATA / "sample-1.ss"]:
        frame = read_stream(path)
        lin = lineage(frame)
        assert len(lin) == len(frame)
        assert sorted(lin["offset"].tolist()) == sorted(frame["offset"].tolist())
        assert (
            lin["message"].nunique()
            == len(frame) - int((frame["retry_count"] > 0).sum()) + lin.attrs["unlinked_copies"]
        )
        summarize(lin).to_text()


def test_empty_frames_and_wrong_input(tmp_path):
    empty = read_pipe(lines=[])
    lin = lineage(empty)
    assert lin.empty and tuple(lin.columns) == LINEAGE_COLUMNS
    assert summarize(lin).messages == 0
    with pytest.raises(ValueError, match="events frame"):
        lineage(pd.DataFrame({"action": [], "attempt": []}))
    with pytest.raises(TypeError, match="DataFrame"):
        lineage([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lineage frame"):
        summarize(empty)


def test_long_histories_link_through_every_attempt(tmp_path):
    frame, events = run_file(tmp_path, ORDERS[:1], until(40, lambda a: 0.5)())
    lin = lineage(frame)
    assert_matches_runtime(lin, events)
    assert lin["attempt"].tolist() == list(range(1, 41))
    assert np.allclose(lin["delay"].dt.total_seconds().dropna(), 0.5)


def test_timeline_steps_one_lane_per_message_from_the_file(tmp_path):
    frame, _ = run_file(tmp_path, ORDERS[:2], until(99, lambda a: 3)(), max_attempts=3, dead_letter="jobs.dead")
    steps = steps_from_lineage(lineage(frame))
    assert list(steps["message"].cat.categories) == ["file jobs #1", "file jobs #2"]
    assert steps["attempt"].tolist() == [1, 2, 3, 1, 2, 3]  # the dead-letter copies are not deliveries
    assert steps["state"].tolist() == ["retried", "retried", "dead-letter"] * 2
    assert steps["delay"].fillna(-1).tolist() == [3.0, 3.0, -1] * 2
    assert steps["destination"].tolist() == ["jobs", "jobs", "jobs.dead"] * 2
    assert ((steps["copy_at"] - steps["time"]).dt.total_seconds().tolist()) == [3.0, 3.0, 0.0] * 2
    (tmp_path / "b").mkdir()
    ended = steps_from_lineage(lineage(run_file(tmp_path / "b", ORDERS[:1], until(2, lambda a: 1)())[0]))
    assert ended["state"].tolist() == ["retried", "no further copy"] and ended["copy_at"].isna().tolist() == [
        False,
        True,
    ]


def test_payload_hash_collisions_fall_back_to_exact_comparison(tmp_path, monkeypatch):
    path = _write(tmp_path / "f.ss", [("jobs", 0, b"a", {}), ("jobs", 10, b"b", {}), ("jobs", 30, b"b", count(1))])
    frame = read_stream(path)
    expected = lineage(frame)
    assert expected.groupby("message")["seq"].apply(list).tolist() == [[1], [2, 3]]
    monkeypatch.setattr(pd.util, "hash_array", lambda values, **_: np.zeros(len(values), dtype=np.uint64))
    collided = lineage(frame)  # every payload "hashes" alike: the link to "a" is caught and redone exactly
    pd.testing.assert_frame_equal(collided, expected)


def test_lines_without_timestamps_link_with_unknown_delays():
    copy = envelope.encode({envelope.RETRY_COUNT_HEADER: "1"}, b"job", force_text=True).decode()
    lin = lineage(read_pipe(lines=["[jobs] job", f"[jobs.retry] {copy}"]))
    assert lin["message"].tolist() == [0, 0] and lin["delay"].isna().all()
    summary = summarize(lin)
    assert summary.attempts.to_dict() == {2: 1} and summary.delays.empty
    assert "observed delays:  none" in summary.to_text()


def test_a_file_and_a_pipe_together_never_link_across_transports(tmp_path):
    file_frame, file_events = run_file(tmp_path, ORDERS, until(3, lambda a: 5)())
    pipe_frame, pipe_events = run_pipe(ORDERS, until(3, lambda a: 5)())
    both = lineage(concat_frames(file_frame, pipe_frame))
    assert (both.groupby("message")["transport"].nunique() == 1).all()
    assert both["message"].nunique() == 8 and both.attrs["unlinked_copies"] == 0
    assert delays_by_message(both) == [[5.0, 5.0]] * 8


# -- the dead-letter naming rule ------------------------------------------------------------------------
def test_every_reader_falls_back_to_the_one_dead_letter_naming_rule(tmp_path):
    """Without ``dead_letter_keys``, lineage, the plots, ``FileWatch`` (``nbkit watch``, ``LiveMonitor``)
    and ``summarize_capture`` (``nbkit info --from stdio``) all call a key a dead-letter key by
    :func:`nbkit.wire.keys.is_dead_letter_key`; naming the keys overrides the rule everywhere."""
    from nbkit.tabular.plot_data import deliveries
    from nbkit.transport.file_watch import FileWatch
    from nbkit.transport.stdio_capture import read_capture, summarize_capture
    from nbkit.wire.keys import is_dead_letter_key

    keys = ["orders", "orders.dead", "jobs.dlq", "jobs-dead", "jobs_DLQ", "orders.dead-letter", "deadline"]
    rule = {k: is_dead_letter_key(k) for k in keys}
    assert set(rule.values()) == {True, False}
    path = tmp_path / "keys.ss"
    with StreamWriter(path) as w:
        for i, key in enumerate(keys):
            w.write(key, f"m{i}".encode(), timestamp_ms=1000 * i)
    lines = [format_line(1000 * i, key, 0, f"m{i}") for i, key in enumerate(keys)]

    def readers(dead_letter_keys):
        frame = read_stream(path)
        lin = lineage(frame, dead_letter_keys=dead_letter_keys)
        yield dict(zip(lin["stream_key"].astype(str), lin["dead_letter"], strict=True))
        plotted = deliveries(frame, dead_letter_keys=dead_letter_keys)
        yield dict(zip(frame["stream_key"].astype(str), plotted["is_dead_letter"], strict=True))
        with FileWatch(path, dead_letter_keys=dead_letter_keys) as watch:
            yield {k: a.dead_letter for k, a in watch.update().keys.items()}
        summary = summarize_capture(read_capture(lines), dead_letter_keys=dead_letter_keys)
        yield {k: s.dead_letter for k, s in summary.keys.items()}

    for got in readers(None):
        assert got == rule
    for got in readers(["deadline"]):
        assert got == {k: k == "deadline" for k in keys}
