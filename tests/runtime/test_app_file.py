"""The file transport under the app: deliveries, copies appended under the subscription's own key,
live versus replay subscriptions (§4.2, §4.5), and the broker's lifecycle (§4.1)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from nbkit import App, ConfigurationError, FileBroker, FilePosition, HandlerOutcome, NbkitError
from nbkit.wire import deliveries, envelope

from .helpers import RETRY, SEQ, START, START_MS, drain, records, seed


def _app(broker, clock, **options):
    app = App(broker, clock=clock, **options)
    app.start()
    return app


def test_priming_message_on_a_fresh_file(ss, clock):
    broker = FileBroker(ss)
    broker.subscriber("jobs")(lambda d: None)
    app = _app(broker, clock)
    assert [(r.key, r.seq, r.raw, r.ts_ms) for r in records(ss)] == [("ruststream-internal", 1, b"1", START_MS)]
    app.shutdown()
    # a file that already holds messages is not primed again
    broker2 = FileBroker(ss)
    broker2.subscriber("jobs")(lambda d: None)
    _app(broker2, clock).shutdown()
    assert [r.key for r in records(ss)] == ["ruststream-internal"]


def test_delivery_fields(ss, clock):
    seed(ss, [("jobs", b'{"id": 7}'), ("other", b"x"), ("jobs", b"\xffbin")], start_ms=1_700_000_000_123)
    broker = FileBroker(ss)
    seen = []
    broker.subscriber("jobs", replay=True)(seen.append)
    app = _app(broker, clock)
    drain(app)
    first, second = seen
    assert (first.payload, first.text, first.json(), first.stream_key, first.shard_id, first.seq) == (
        b'{"id": 7}',
        '{"id": 7}',
        {"id": 7},
        "jobs",
        0,
        1,
    )
    assert first.headers == {SEQ: "1"}
    assert first.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert first.timestamp.tzinfo is dt.UTC
    assert (first.attempt, first.transport, first.position) == (1, "file", FilePosition.sequence(1))
    assert (second.seq, second.payload, second.headers, second.position) == (
        2,
        b"\xffbin",
        {SEQ: "2"},
        FilePosition.sequence(2),
    )
    assert second.timestamp == dt.datetime(2023, 11, 14, 22, 13, 22, 123000, tzinfo=dt.UTC)
    with pytest.raises(UnicodeDecodeError):
        second.text  # noqa: B018


def _fields(delivery) -> dict:
    return {f.name: getattr(delivery, f.name) for f in dataclasses.fields(delivery)}


def _deliveries(ss, take) -> tuple[list[dict], int]:
    """Every delivery of the file's "jobs" messages, each poll() followed by what ``take`` takes; and the
    number of polls."""
    broker = FileBroker(ss, existing_only=True)
    broker.subscriber("jobs", replay=True)(lambda d: None)
    [sub] = broker.connect()
    made = []
    polls = 0
    while (delivery := sub.poll()) is not None:
        polls += 1
        made.append(_fields(delivery))
        made += [_fields(d) for d in take(sub)]
    broker.shutdown()
    return made, polls


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "pure"])
def test_poll_and_ready_make_the_same_deliveries(ss, monkeypatch, pure):
    """``poll()`` reads a message's fields by name; ``ready()`` hands the scanned batch to
    ``file_deliveries``, which takes them in Message's field order: one file, the same deliveries."""
    if pure:
        monkeypatch.setattr("nbkit.runtime.file_broker.file_deliveries", deliveries.file_deliveries_pure)
    messages = [("jobs", b'{"id": %d}' % i) for i in range(300)] + [("other", b"x"), ("jobs", b"\xff")]
    seed(ss, [*messages, ("jobs", envelope.encode({"trace": "a1"}, b"body", force_text=False))])
    one_by_one, polls = _deliveries(ss, lambda sub: ())
    batched, batches = _deliveries(ss, lambda sub: sub.ready())
    assert len(one_by_one) == polls == 302
    assert batches < 10  # the rest came from ready()
    assert batched == one_by_one
    last = one_by_one[-1]
    assert (last["headers"], last["payload"], last["seq"]) == ({"trace": "a1", SEQ: "302"}, b"body", 302)


def test_a_live_subscription_starts_at_the_tip_and_follows_appends(ss, clock):
    seed(ss, [("jobs", b"old-1"), ("jobs", b"old-2")])
    broker = FileBroker(ss)
    seen = []
    broker.subscriber("jobs")(lambda d: seen.append((d.seq, d.payload)))
    app = _app(broker, clock)
    assert app.step() is None
    broker.publish("jobs", b"new")
    broker.publish("elsewhere", b"ignored")
    assert len(drain(app)) == 1
    assert seen == [(3, b"new")]
    assert not app.all_ended()  # a live subscription follows forever


def test_each_subscription_sees_only_its_key(ss, clock):
    seed(ss, [("a", b"a1"), ("b", b"b1"), ("a", b"a2"), ("c", b"c1"), ("b", b"b2")])
    broker = FileBroker(ss)
    seen = []
    broker.subscriber("a", replay=True)(lambda d: seen.append((d.stream_key, d.payload)))
    broker.subscriber("b", replay=True)(lambda d: seen.append((d.stream_key, d.payload)))
    app = _app(broker, clock)
    drain(app)
    assert sorted(seen) == [("a", b"a1"), ("a", b"a2"), ("b", b"b1"), ("b", b"b2")]
    assert [p for k, p in seen if k == "a"] == [b"a1", b"a2"]
    assert app.all_ended()
    assert [s.end_reason for s in app.subscriptions] == ["end", "end"]


def test_copies_are_appended_under_the_subscription_key(ss, clock):
    broker = FileBroker(ss)
    broker.subscriber("jobs", max_attempts=2)(lambda d: HandlerOutcome.retry())
    broker.subscriber("other", max_attempts=2)(lambda d: HandlerOutcome.retry())
    app = _app(broker, clock)
    broker.publish("jobs", b"j")
    broker.publish("other", b"o")
    drain(app)
    assert [(r.key, r.seq, r.headers.get(RETRY), r.payload) for r in records(ss)[1:]] == [
        ("jobs", 1, None, b"j"),
        ("other", 1, None, b"o"),
        ("jobs", 2, "1", b"j"),
        ("other", 2, "1", b"o"),
    ]


def test_out_retry_elsewhere_is_refused_on_a_file(ss):
    broker = FileBroker(ss)
    with pytest.raises(ConfigurationError, match="out_retry is a pipe option"):
        broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: None)


def test_a_live_subscription_receives_its_own_copies(ss, clock):
    broker = FileBroker(ss)
    seen = []

    @broker.subscriber("jobs", max_attempts=3)
    def handler(d):
        seen.append((d.seq, d.attempt, d.headers.get(RETRY)))
        return HandlerOutcome.retry_after(dt.timedelta(minutes=1))

    app = _app(broker, clock)
    broker.publish("jobs", b"m")
    app.step()
    app.fire_due(START + 60)
    app.step()
    app.fire_due(START + 120)
    app.step()
    assert seen == [(1, 1, None), (2, 2, "1"), (3, 3, "2")]
    assert [e.action for e in app.events] == ["delayed-copy", "delayed-copy", "rejected"]


# ---------------------------------------------------------------- replay and copies (§4.5)


def test_replay_sees_a_copy_written_while_its_backlog_remains(ss, clock):
    seed(ss, [("jobs", b"m1"), ("jobs", b"m2"), ("jobs", b"m3")])
    broker = FileBroker(ss)
    seen = []

    @broker.subscriber("jobs", replay=True, max_attempts=2)
    def handler(d):
        seen.append((d.seq, d.payload, d.attempt))
        return HandlerOutcome.retry_after(0) if d.payload == b"m1" else None

    app = _app(broker, clock)
    drain(app)
    assert seen == [(1, b"m1", 1), (2, b"m2", 1), (3, b"m3", 1), (4, b"m1", 2)]
    assert app.all_ended()


def test_replay_that_finishes_first_never_sees_the_delayed_copy(ss, clock):
    seed(ss, [("jobs", b"m1"), ("jobs", b"m2")])
    broker = FileBroker(ss)
    seen = []

    @broker.subscriber("jobs", replay=True)
    def handler(d):
        seen.append((d.seq, d.payload, d.attempt))
        return HandlerOutcome.retry_after(5) if d.payload == b"m1" else None

    app = _app(broker, clock)
    drain(app)
    assert app.all_ended()  # the replay reached the end before the copy was due
    [copy_event] = app.fire_due(START + 5)
    assert copy_event.copy_seq == 3
    assert app.step() is None
    assert seen == [(1, b"m1", 1), (2, b"m2", 1)]
    # the copy is in the file, left unread
    assert [(r.seq, r.payload, r.headers.get(RETRY)) for r in records(ss, "jobs")] == [
        (1, b"m1", None),
        (2, b"m2", None),
        (3, b"m1", "1"),
    ]


def test_run_returns_after_the_replay_and_the_pending_copy(ss, clock):
    """run() on a virtual clock moves it to the copy's due time instead of sleeping an hour."""
    seed(ss, [("jobs", b"m1"), ("jobs", b"m2")])
    broker = FileBroker(ss)
    seen = []

    @broker.subscriber("jobs", replay=True)
    def handler(d):
        seen.append(d.payload)
        return HandlerOutcome.retry_after(3600) if d.attempt == 1 else None

    app = App(broker, clock=clock)
    app.run()  # an hour on the virtual clock: a run that slept in real time would not end before the test's timeout
    assert seen == [b"m1", b"m2"]
    assert clock.now() == START + 3600
    copies = [r for r in records(ss, "jobs") if r.seq > 2]
    assert [(r.payload, r.headers.get(RETRY), r.ts_ms) for r in copies] == [
        (b"m1", "1", START_MS + 3600_000),
        (b"m2", "1", START_MS + 3600_000),
    ]
    assert app.stopped


def test_end_with_eos_writes_the_mark_on_shutdown(ss, clock):
    broker = FileBroker(ss, end_with_eos=True)
    broker.subscriber("jobs")(lambda d: None)
    app = _app(broker, clock)
    app.shutdown()
    assert [(r.key, r.seq, r.raw) for r in records(ss)] == [
        ("ruststream-internal", 1, b"1"),
        ("SEA_STREAMER_INTERNAL", 0, b"EOS"),
    ]


def test_a_live_subscription_ends_at_the_eos_mark(ss, clock):
    seed(ss, [("jobs", b"m1"), ("jobs", b"m2")], eos=True)
    broker = FileBroker(ss)
    seen = []
    broker.subscriber("jobs", start_at=FilePosition.beginning())(lambda d: seen.append(d.payload))
    app = App(broker, clock=clock)
    app.run()
    assert seen == [b"m1", b"m2"]
    assert app.subscriptions[0].end_reason == "eos"


def test_existing_only_refuses_a_missing_file(tmp_path, clock):
    broker = FileBroker(tmp_path / "missing.ss", existing_only=True)
    broker.subscriber("jobs")(lambda d: None)
    with pytest.raises(NbkitError, match="missing.ss"):
        App(broker, clock=clock).start()
    assert not (tmp_path / "missing.ss").exists()


@pytest.mark.parametrize("interval", [0, 1000, 1536, -1024])
def test_bad_beacon_interval_is_refused(ss, interval):
    with pytest.raises(ConfigurationError, match=r"^invalid descriptor: invalid beacon interval: "):
        broker = FileBroker(ss, beacon_interval=interval)
        broker.subscriber("jobs")(lambda d: None)
        App(broker).start()


def test_publish_validates_keys_and_takes_str(ss, clock):
    broker = FileBroker(ss)
    broker.subscriber("jobs")(lambda d: None)
    _app(broker, clock)
    with pytest.raises(NbkitError, match="outside"):
        broker.publish("bad key!", b"x")
    p = broker.publish("jobs", "héllo", {"A": "1"})
    assert (p.stream_key, p.seq, p.time) == ("jobs", 1, START)
    [rec] = records(ss, "jobs")
    assert (rec.payload, rec.headers) == ("héllo".encode(), {"a": "1"})


def test_publish_after_shutdown_is_not_connected(ss, clock):
    broker = FileBroker(ss)
    broker.subscriber("jobs")(lambda d: None)
    _app(broker, clock).shutdown()
    with pytest.raises(NbkitError, match="^stream transport is not connected$"):
        broker.publish("jobs", b"late")


def test_registration_checks(ss):
    broker = FileBroker(ss)
    broker.subscriber("jobs")(lambda d: None)
    with pytest.raises(ConfigurationError, match="already registered"):
        broker.subscriber("jobs")(lambda d: None)
    broker.subscriber("jobs", name="jobs-2")(lambda d: None)  # a second name is fine
    for bad in (
        {"max_attempts": 0},
        {"max_attempts": True},
        {"dead_letter": "no good"},
        {"start_at": 5},
        {"checkpoint": object()},
    ):
        with pytest.raises(ConfigurationError):
            broker.subscriber("x", **bad)(lambda d: None)
    with pytest.raises(ConfigurationError):
        broker.subscriber("bad key")(lambda d: None)
