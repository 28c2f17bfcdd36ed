"""What ``checkpoint=`` saves: upstream's ``seq + 1`` by default, and nbkit's ``at_least_once`` hold.

The process test kills ``nbkit run`` with SIGKILL while a ``retry_after`` copy is pending: the default
loses the message for good (as upstream does), ``at_least_once=True`` delivers it again on restart.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from waiting import wait_until

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, PositionStore, StreamWriter, VirtualClock
from nbkit.errors import ConfigurationError

from .helpers import RETRY, records, seed

_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _app(path, store, *, at_least_once, outcome):
    broker = FileBroker(path)

    @broker.subscriber("jobs", replay=True, checkpoint=store, at_least_once=at_least_once, max_attempts=3)
    def work(d):
        return outcome(d)

    return App(broker, clock=VirtualClock())


def _retry_second(d):
    return HandlerOutcome.retry_after(10) if d.payload == b"b" and d.attempt == 1 else None


@pytest.mark.parametrize(("at_least_once", "while_pending", "after"), [(False, 4, 5), (True, 2, 5)])
def test_the_saved_position_while_a_copy_is_pending(tmp_path, at_least_once, while_pending, after):
    path = tmp_path / "jobs.ss"
    seed(path, [("jobs", b"a"), ("jobs", b"b"), ("jobs", b"c")])  # seq 1, 2, 3
    store = PositionStore(tmp_path / "positions.json")
    app = _app(path, store, at_least_once=at_least_once, outcome=_retry_second)
    for _ in range(3):
        app.step()
    assert len(app.pending) == 1
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(while_pending)
    app.fire_due(app.next_due())  # the copy of b is appended as seq 4
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(4)
    app.step()  # the copy, attempt 2, acknowledged
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(after)


def test_an_abandoned_copy_keeps_the_position_held(tmp_path):
    path = tmp_path / "jobs.ss"
    seed(path, [("jobs", b"a"), ("jobs", b"b"), ("jobs", b"c")])
    store = PositionStore(tmp_path / "positions.json")
    app = _app(path, store, at_least_once=True, outcome=_retry_second)
    for _ in range(3):
        app.step()
    assert app.abandon_pending(log=False) == 1
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(2)


def test_two_pending_copies_hold_at_the_older(tmp_path):
    path = tmp_path / "jobs.ss"
    seed(path, [("jobs", b"a"), ("jobs", b"b"), ("jobs", b"c")])
    store = PositionStore(tmp_path / "positions.json")
    delays = {b"a": 20, b"b": 10}
    app = _app(
        path,
        store,
        at_least_once=True,
        outcome=lambda d: HandlerOutcome.retry_after(delays[d.payload]) if d.payload in delays else None,
    )
    for _ in range(3):
        app.step()
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(1)
    app.fire_due(app.next_due())  # b's copy (due first) is written: a's still holds the position
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(1)
    app.fire_due(app.next_due())
    assert PositionStore(store.path).position("jobs") == FilePosition.sequence(4)


def test_at_least_once_needs_a_checkpoint(tmp_path):
    broker = FileBroker(tmp_path / "jobs.ss")
    with pytest.raises(ConfigurationError, match="needs checkpoint="):
        broker.subscriber("jobs", at_least_once=True)
    with pytest.raises(ConfigurationError, match="True or False"):
        broker.subscriber("jobs", checkpoint=PositionStore(tmp_path / "p.json"), at_least_once="yes")


SERVICE = """
import os
from nbkit import App, FileBroker, HandlerOutcome, PositionStore

broker = FileBroker("jobs.ss")
store = PositionStore("positions.json")
log = open("handled.txt", "a", buffering=1)

@broker.subscriber("jobs", start_at=store.position("jobs"), checkpoint=store, at_least_once={alo}, max_attempts=3)
def work(d):
    log.write(f"{{d.seq}} {{d.payload.decode()}} {{d.attempt}}\\n")
    if d.payload == b"b" and d.attempt == 1 and os.environ.get("SLOW"):
        return HandlerOutcome.retry_after(60)  # the copy waits in the process: the kill comes first
    return None

app = App(broker)
"""


def _saved(tmp_path) -> FilePosition | None:
    """The position the service last saved for "jobs" (None before its first save)."""
    store = tmp_path / "positions.json"
    return PositionStore(store).position("jobs") if store.exists() else None


def _run_until(tmp_path, n_lines, *, slow, saved):
    """Start the service and wait until it has handled ``n_lines`` deliveries and saved the position ``saved``
    (a sequence number) after the last of them."""
    env = {**_ENV, "SLOW": "1"} if slow else _ENV
    proc = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "service:app"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    handled = tmp_path / "handled.txt"

    def there() -> bool:
        assert proc.poll() is None, "the service ended: " + proc.stderr.read().decode()
        done = handled.exists() and len(handled.read_text().splitlines()) >= n_lines
        return done and _saved(tmp_path) == FilePosition.sequence(saved)

    try:
        wait_until(there, what=lambda: f"{n_lines} deliveries handled and position {saved} saved ({_saved(tmp_path)})")
        return proc
    except BaseException:
        proc.kill()
        raise


@pytest.mark.parametrize("at_least_once", [False, True], ids=["default", "at_least_once"])
def test_sigkill_in_the_delay_window(tmp_path, at_least_once):
    (tmp_path / "service.py").write_text(textwrap.dedent(SERVICE.format(alo=at_least_once)))
    seed(tmp_path / "jobs.ss", [("jobs", b"a"), ("jobs", b"b"), ("jobs", b"c")])  # seq 1, 2, 3
    # saved after c: past b by default (upstream's rule), held at b (2) while its copy is pending with at_least_once
    first = _run_until(tmp_path, 3, slow=True, saved=2 if at_least_once else 4)
    first.send_signal(signal.SIGKILL)  # b's copy is pending in the process: it dies with it
    first.wait(5)
    assert [r.payload for r in records(tmp_path / "jobs.ss", "jobs")] == [b"a", b"b", b"c"]  # no copy written

    (tmp_path / "handled.txt").write_text("")
    with StreamWriter(tmp_path / "jobs.ss") as w:  # a new message, so the restart shows when it has caught up
        w.write("jobs", b"d")
    second = _run_until(tmp_path, 3 if at_least_once else 1, slow=False, saved=5)
    second.send_signal(signal.SIGTERM)
    second.wait(10)
    again = (tmp_path / "handled.txt").read_text().splitlines()
    if at_least_once:
        # the position was held at b: b comes again, as attempt 1 (the original has no retry count), then c, d
        assert again == ["2 b 1", "3 c 1", "4 d 1"]
    else:
        # upstream's rule: the position had passed b while its copy was pending; no run ever handles b again
        assert again == ["4 d 1"]
    assert PositionStore(tmp_path / "positions.json").position("jobs") == FilePosition.sequence(5)
    assert all(r.headers.get(RETRY) is None for r in records(tmp_path / "jobs.ss", "jobs"))
