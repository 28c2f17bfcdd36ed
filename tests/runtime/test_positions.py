"""Positions on the file transport (§4.3, §4.4): delivery positions, start_at, refused seeks,
checkpoints with PositionStore, and resuming a stopped service where it left off."""

from __future__ import annotations

import json
import logging

import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, NbkitError, PositionStore

from .helpers import START_MS, drain, records, seed


def _run(path, clock, key="jobs", **options):
    broker = FileBroker(path)
    seen = []
    broker.subscriber(key, **options)(lambda d: seen.append(d))
    app = App(broker, clock=clock)
    app.start()
    return broker, app, seen


@pytest.fixture
def five(ss):
    # jobs 1..5 interleaved with other keys; timestamps START_MS + i*1000 (i = file order)
    seed(
        ss,
        [
            ("jobs", b"j1"),
            ("x", b"x1"),
            ("jobs", b"j2"),
            ("jobs", b"j3"),
            ("x", b"x2"),
            ("jobs", b"j4"),
            ("jobs", b"j5"),
        ],
    )
    return ss


def test_every_delivery_position_is_its_sequence(five, clock):
    _, app, seen = _run(five, clock, replay=True)
    drain(app)
    assert [d.seq for d in seen] == [1, 2, 3, 4, 5]
    assert [d.position for d in seen] == [FilePosition.sequence(n) for n in range(1, 6)]
    assert all(d.position == FilePosition.sequence(int(d.headers["stream-sequence"])) for d in seen)


def test_positions_of_copies_are_their_own_sequences(ss, clock):
    broker = FileBroker(ss)
    seen = []
    broker.subscriber("jobs", max_attempts=3)(lambda d: seen.append(d) or HandlerOutcome.retry())
    app = App(broker, clock=clock)
    app.start()
    broker.publish("jobs", b"a")
    drain(app)
    assert [(d.attempt, d.position) for d in seen] == [(n, FilePosition.sequence(n)) for n in (1, 2, 3)]


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (FilePosition.beginning(), [b"j1", b"j2", b"j3", b"j4", b"j5"]),
        (FilePosition.sequence(1), [b"j1", b"j2", b"j3", b"j4", b"j5"]),
        (FilePosition.sequence(3), [b"j3", b"j4", b"j5"]),  # inclusive
        (FilePosition.sequence(5), [b"j5"]),
        # j2 was written at START_MS + 2000: a timestamp position is strictly after it
        (FilePosition.timestamp(START_MS + 2000), [b"j3", b"j4", b"j5"]),
        (FilePosition.timestamp(START_MS + 1999), [b"j2", b"j3", b"j4", b"j5"]),
        (FilePosition.timestamp(START_MS - 1), [b"j1", b"j2", b"j3", b"j4", b"j5"]),
        (FilePosition.end(), []),
    ],
)
@pytest.mark.parametrize("replay", [False, True], ids=["live", "replay"])
def test_start_at(five, clock, start, expected, replay):
    broker, app, seen = _run(five, clock, replay=replay, start_at=start)
    drain(app)
    assert [d.payload for d in seen] == expected
    assert app.all_ended() is replay  # a replay ends, a live subscription keeps following
    if not replay:
        broker.publish("jobs", b"j6")  # the tip is followed
        drain(app)
        assert [d.payload for d in seen] == [*expected, b"j6"]


@pytest.mark.parametrize(
    "start", [FilePosition.sequence(7), FilePosition.sequence(99), FilePosition.timestamp(START_MS + 6000)]
)
def test_a_refused_seek_ends_a_live_subscription(five, clock, caplog, start):
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        broker, app, seen = _run(five, clock, start_at=start)
    assert app.all_ended()
    assert app.subscriptions[0].end_reason == "seek refused"
    broker.publish("jobs", b"j6")
    assert app.step() is None
    assert seen == []
    [refused] = [r for r in caplog.records if getattr(r, "nbkit_text", None) == "seek refused"]
    assert refused.name == "nbkit.subscriber" and refused.nbkit_fields["subscription"] == "jobs"
    assert "subscriber stream ended" in [getattr(r, "nbkit_text", None) for r in caplog.records]


def test_a_caught_up_replay_delivers_nothing(five, clock):
    # sequence(6) is the one after the last written: nbkit starts at the tip instead of refusing
    broker, app, seen = _run(five, clock, replay=True, start_at=FilePosition.sequence(6))
    drain(app)
    assert seen == [] and app.all_ended()


@pytest.mark.parametrize("start", [FilePosition.sequence(7), FilePosition.timestamp(START_MS + 6000)])
def test_a_refused_seek_leaves_a_replay_at_the_beginning(five, clock, start):
    broker, app, seen = _run(five, clock, replay=True, start_at=start)
    drain(app)
    assert [d.payload for d in seen] == [b"j1", b"j2", b"j3", b"j4", b"j5"]


def test_a_seek_on_an_unknown_key_is_refused(five, clock):
    _, app, seen = _run(five, clock, key="nobody", start_at=FilePosition.sequence(1))
    assert app.all_ended()


# ---------------------------------------------------------------- PositionStore


def test_position_store_round_trip(tmp_path):
    path = tmp_path / "pos.json"
    store = PositionStore(path)
    assert store.get("jobs") is None
    assert store.position("jobs") == FilePosition.beginning()
    store.save("jobs", 4)
    store.save("other", 10)
    assert json.loads(path.read_text()) == {"jobs": 4, "other": 10}
    again = PositionStore(path)
    assert again.position("jobs") == FilePosition.sequence(4)
    assert again.as_dict() == {"jobs": 4, "other": 10}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pos.json"]  # no temporary files left


def test_position_store_refuses_a_damaged_file(tmp_path):
    path = tmp_path / "pos.json"
    path.write_text("{not json")
    with pytest.raises(NbkitError, match="pos.json"):
        PositionStore(path)
    path.write_text('{"jobs": -1}')
    with pytest.raises(NbkitError, match="maps stream keys"):
        PositionStore(path)


def test_checkpoint_saves_the_next_sequence_after_each_settle(five, tmp_path, clock):
    store_path = tmp_path / "pos.json"
    store = PositionStore(store_path)
    on_disk_during_handler = []
    broker = FileBroker(five)

    @broker.subscriber("jobs", replay=True, checkpoint=store)
    def handler(d):
        on_disk_during_handler.append(PositionStore(store_path).get("jobs"))
        return HandlerOutcome.drop() if d.seq == 2 else None

    app = App(broker, clock=clock)
    app.start()
    after = []
    while app.step() is not None:
        after.append(PositionStore(store_path).get("jobs"))
    # saved after the settle: the handler still sees the previous value
    assert on_disk_during_handler == [None, 2, 3, 4, 5]
    assert after == [2, 3, 4, 5, 6]
    assert store.position("jobs") == FilePosition.sequence(6)


def test_a_stopped_service_resumes_where_it_left_off(five, tmp_path, clock):
    store_path = tmp_path / "pos.json"

    def service(limit: int | None):
        store = PositionStore(store_path)
        broker = FileBroker(five)
        seen = []
        broker.subscriber("jobs", start_at=store.position("jobs"), checkpoint=store)(lambda d: seen.append(d.payload))
        app = App(broker, clock=clock)
        app.start()
        while (limit is None or len(seen) < limit) and app.step() is not None:
            pass
        return broker, app, seen

    _, app1, first = service(limit=2)
    app1.shutdown()  # the service stops
    assert first == [b"j1", b"j2"]
    assert PositionStore(store_path).get("jobs") == 3

    broker2, app2, second = service(limit=None)  # new store, broker and app objects
    assert second == [b"j3", b"j4", b"j5"]
    broker2.publish("jobs", b"j6")
    drain(app2)
    assert second == [b"j3", b"j4", b"j5", b"j6"]
    assert PositionStore(store_path).get("jobs") == 7
    app2.crash()  # even a crash keeps the saved position
    assert PositionStore(store_path).position("jobs") == FilePosition.sequence(7)
    assert [r.payload for r in records(five, "jobs")] == [b"j1", b"j2", b"j3", b"j4", b"j5", b"j6"]


def test_a_caught_up_service_resumes_at_the_tip(five, tmp_path, clock):
    store = PositionStore(tmp_path / "pos.json")
    store.save("jobs", 6)  # everything up to j5 was processed
    broker, app, seen = _run(five, clock, start_at=store.position("jobs"), checkpoint=store)
    broker.publish("jobs", b"j6")
    drain(app)
    assert [d.payload for d in seen] == [b"j6"]


def test_position_store_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "pos.json"
    store = PositionStore(path)
    store.save("jobs", 3)

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", fail)
    with pytest.raises(OSError, match="disk full"):
        store.save("jobs", 4)
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"jobs": 3}  # the old positions survive whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pos.json"]  # the temporary file is gone
