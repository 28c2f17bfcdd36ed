"""Dead-letter redrive: exactly the selected dead letters are appended again, once, and a service on the
target key handles them (files and pipe captures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nbkit import (
    App,
    ConfigurationError,
    FileBroker,
    FilePosition,
    HandlerOutcome,
    NbkitError,
    StdioBroker,
    VirtualClock,
)
from nbkit.runtime.redrive import REDRIVEN_AT_HEADER, REDRIVEN_FROM_HEADER, parse_where, redrive, redrive_lines
from nbkit.tabular.events import events_frame

from .helpers import RETRY, START, file_bytes, records, settle_all

BAD = {2, 5, 7}  # the orders the buggy service cannot handle


def buggy(delivery):
    """Fails orders in BAD on every attempt (retry after 1 s); the rest succeed."""
    return HandlerOutcome.retry_after(1) if delivery.json()["id"] in BAD else HandlerOutcome.ack()


def failed_run(path: Path, clock: VirtualClock, orders: int = 8) -> None:
    """Orders 1..n through the buggy service (max 2 attempts): BAD end under orders.dead."""
    broker = FileBroker(path)
    broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")(buggy)
    app = App(broker, clock=clock)
    app.start()
    for i in range(1, orders + 1):
        broker.publish("orders", json.dumps({"id": i, "item": "lamp" if i == 5 else "book"}), {"tenant": f"t{i % 2}"})
        settle_all(app)  # a bad order's copy falls due 1 s later and goes to orders.dead
        clock.advance(1)
    app.shutdown()


@pytest.fixture
def dead_file(tmp_path, clock) -> Path:
    path = tmp_path / "orders.ss"
    failed_run(path, clock)
    return path


def ids(recs) -> list[int]:
    return [json.loads(r.payload)["id"] for r in recs]


def test_redrive_appends_each_dead_letter_once_with_its_payload_and_headers(dead_file, clock):
    dead = records(dead_file, "orders.dead")
    assert ids(dead) == sorted(BAD) and all(r.headers[RETRY] == "2" for r in dead)
    before = file_bytes(dead_file)
    assert [r.ts_ms for r in dead] == [int((START + t) * 1000) for t in (2, 6, 9)]
    assert clock.now() == START + 11
    clock.advance(60)
    result = redrive(dead_file, source="orders.dead", target="orders", clock=clock)
    after = file_bytes(dead_file)
    assert after[: len(before)] == before  # nothing written before is touched
    redriven = [r for r in records(dead_file, "orders") if REDRIVEN_FROM_HEADER in r.headers]
    assert ids(redriven) == sorted(BAD)
    assert [r.seq for r in redriven] == list(result.seqs)
    for copy, original in zip(redriven, dead, strict=True):
        assert copy.payload == original.payload
        expected = {k: v for k, v in original.headers.items() if k != RETRY}
        expected[REDRIVEN_FROM_HEADER] = f"orders.dead#{original.seq}"
        expected[REDRIVEN_AT_HEADER] = "2024-01-01T00:01:11.000Z"
        assert copy.headers == expected
        assert copy.ts_ms == int((START + 71) * 1000)
    # a second run appends nothing and says why
    again = redrive(dead_file, source="orders.dead", target="orders", clock=clock)
    assert file_bytes(dead_file) == after
    assert again.redriven == () and [d.seq for d in again.skipped] == [r.seq for r in dead]
    assert "3 selected were redriven before" in again.describe()


def test_keep_count_keeps_the_retry_count(dead_file, clock):
    redrive(dead_file, source="orders.dead", target="orders", keep_count=True, clock=clock)
    redriven = [r for r in records(dead_file, "orders") if REDRIVEN_FROM_HEADER in r.headers]
    assert [r.headers[RETRY] for r in redriven] == ["2", "2", "2"]


@pytest.mark.parametrize(
    ("where", "chosen"),
    [
        ("seq=2..3", [5, 7]),
        ("seq=..1", [2]),
        ("seq>1", [5, 7]),
        ("seq=2", [5]),
        ("payload~lamp", [5]),
        ('payload={"id": 7, "item": "book"}', [7]),
        ("header.tenant=t1", [5, 7]),
        ("header.TENANT~0", [2]),
        ("header.tenant and seq<3", [2, 5]),
        ("time>=2024-01-01T00:00:06", [5, 7]),
        ("time=1704067200000..2024-01-01T00:00:05Z", [2]),
        ("time<2024-01-01T00:00:09.001", [2, 5, 7]),
    ],
)
def test_where_selects_by_sequence_time_payload_and_header(dead_file, clock, where, chosen):
    dry = redrive(dead_file, source="orders.dead", target="orders", where=where, dry_run=True)
    assert [json.loads(d.payload)["id"] for d in dry.redriven] == chosen
    assert dry.dry_run and dry.seqs == ()
    before = file_bytes(dead_file)
    done = redrive(dead_file, source="orders.dead", target="orders", where=where, clock=clock)
    assert [d.seq for d in done.redriven] == [d.seq for d in dry.redriven]
    redriven = [r for r in records(dead_file, "orders") if REDRIVEN_FROM_HEADER in r.headers]
    assert ids(redriven) == chosen
    # then everything: only the rest is appended
    rest = redrive(dead_file, source="orders.dead", target="orders", clock=clock)
    assert sorted(json.loads(d.payload)["id"] for d in rest.redriven) == sorted(BAD - set(chosen))
    assert len(file_bytes(dead_file)) > len(before)


def test_a_dry_run_changes_nothing(dead_file):
    before = file_bytes(dead_file)
    result = redrive(dead_file, source="orders.dead", target="orders", dry_run=True)
    assert len(result.redriven) == 3 and "would redrive 3 dead letters" in result.describe()
    assert file_bytes(dead_file) == before


def test_a_running_service_on_the_target_key_handles_the_redriven_messages(dead_file, clock):
    """The fix is deployed: a fresh service follows orders from the end; the redrive reaches it live."""
    broker = FileBroker(dead_file)
    handled = []

    @broker.subscriber("orders", max_attempts=2, dead_letter="orders.dead")  # live, from the end
    def fixed(delivery):
        handled.append((delivery.json()["id"], delivery.attempt))
        return HandlerOutcome.ack()

    app = App(broker, clock=clock)
    app.start()
    assert settle_all(app) == []  # caught up: nothing new
    clock.advance(30)
    redrive(dead_file, source="orders.dead", target="orders", clock=clock)
    events = settle_all(app)
    app.shutdown()
    assert handled == [(i, 1) for i in sorted(BAD)]  # the count was reset: attempt 1 again
    assert [e.redriven for e in events] == [True, True, True] and {e.action for e in events} == {"unsupported"}
    frame = events_frame(app.events)
    assert frame["redriven"].tolist() == [True, True, True]
    assert "(redriven)" in events[0].describe()


def test_ordinary_deliveries_are_not_marked_redriven(tmp_path, clock):
    path = tmp_path / "o.ss"
    broker = FileBroker(path)
    broker.subscriber("orders", start_at=FilePosition.beginning())(lambda d: None)
    app = App(broker, clock=clock)
    app.start()
    broker.publish("orders", "x", {REDRIVEN_AT_HEADER: "not enough on its own"})
    assert [e.redriven for e in settle_all(app)] == [False]


def _pipe_capture(clock: VirtualClock) -> list[str]:
    """A buggy pipe stage's stdout: retry copies and dead letters (loopback, like a chain of stages)."""
    out: list[str] = []
    broker = StdioBroker(stdin=[], stdout=out, loopback=True)
    options: dict[str, Any] = {"max_attempts": 2, "dead_letter": "orders.dead", "out_retry": "orders.retry"}
    broker.subscriber("orders", **options)(buggy)
    broker.subscriber("orders.retry", name="retries", **options)(buggy)
    app = App(broker, clock=clock)
    app.start()
    for i in range(1, 9):
        broker.feed(f"[2024-01-01T00:00:0{i} | orders | {i}] " + json.dumps({"id": i}))
    settle_all(app)
    app.shutdown()
    return list(out)


def test_a_pipe_capture_gives_stdio_lines_a_fixed_stage_handles(clock):
    capture = _pipe_capture(clock)
    assert sum(" | orders.dead | " in line for line in capture) == 3
    result = redrive_lines(capture, source="orders.dead", target="orders", clock=clock)
    assert len(result.lines) == 3 and all(line.endswith("\n") for line in result.lines)
    assert [line.split("]")[0] for line in result.lines] == [
        f"[2024-01-01T00:00:{clock.now() - START:02.0f} | orders | {n}" for n in range(3)
    ]
    seen = []
    broker = StdioBroker(stdin=list(result.lines), stdout=[])
    broker.subscriber("orders", out_retry="orders.retry", max_attempts=2)(
        lambda d: seen.append((d.json()["id"], d.attempt, d.headers[REDRIVEN_FROM_HEADER]))
    )
    app = App(broker, clock=clock)
    app.start()
    events = settle_all(app)
    assert [(i, a) for i, a, _ in seen] == [(i, 1) for i in sorted(BAD)]
    assert all(ref.startswith("orders.dead#") for _, _, ref in seen)
    assert all(e.redriven for e in events)
    # the capture plus what was redriven: nothing left to redrive
    again = redrive_lines(capture + list(result.lines), source="orders.dead", target="orders", clock=clock)
    assert again.lines == () and len(again.skipped) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "orders", "target": "orders"}, "both 'orders'"),
        ({"source": "bad key!", "target": "orders"}, "source (dead-letter) key"),
        ({"source": "orders.dead", "target": "orders", "where": "sequence=3"}, "cannot read 'sequence=3'"),
        ({"source": "orders.dead", "target": "orders", "where": "seq=three"}, "'three' is not a sequence number"),
        ({"source": "orders.dead", "target": "orders", "where": "time>yesterday"}, "'yesterday' is not a time"),
        ({"source": "orders.dead", "target": "orders", "where": "payload>3"}, "payload takes = (equals) or ~"),
        ({"source": "orders.dead", "target": "orders", "where": 42}, "where takes an expression"),
    ],
)
def test_bad_arguments_say_what_is_wrong(dead_file, kwargs, message):
    before = file_bytes(dead_file)
    with pytest.raises(ConfigurationError) as err:
        redrive(dead_file, **kwargs)
    assert message in str(err.value)
    assert file_bytes(dead_file) == before


def test_a_missing_file_is_not_created(tmp_path):
    with pytest.raises(NbkitError, match="no such stream file"):
        redrive(tmp_path / "nope.ss", source="orders.dead", target="orders")
    assert not (tmp_path / "nope.ss").exists()


def test_parse_where_needs_an_expression():
    with pytest.raises(ConfigurationError, match="needs an expression"):
        parse_where("  ")
