"""Kill a writer process with SIGKILL again and again on one file, and check the file after each kill.

Used by ``test_crash_writer.py`` (a few dozen kills) and ``bench/fuzz.py --crash-runs N`` (more).
The child is ``scripts/crash_writer.py``: it resumes the file, writes as fast as it can and prints
every write call that returned. After each kill the parent checks, with a strict reader
(``errors="raise"``):

- the bytes that were verified before are unchanged (neither the crash nor the resume touched them);
- the new part reads without an error up to the last complete frame (a torn last frame is the only
  thing allowed after it, reported as ``truncated``);
- every stream's sequence numbers continue by exactly one, and every payload is byte-for-byte right;
- every write that returned is in the file (``flush_every=1``), or at most ``flush_every - 1`` of
  them are missing (buffered in the killed process);
- the next writer resumes exactly after the last complete frame (it cuts off only the torn bytes).
"""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from checkout_env import checkout_env

from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter

SCRIPT = Path(__file__).resolve().parent / "scripts" / "crash_writer.py"
_spec = importlib.util.spec_from_file_location("crash_writer", SCRIPT)
assert _spec is not None and _spec.loader is not None
crash_writer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_writer)


@dataclass
class CrashFigures:
    runs: int = 0
    kills: int = 0
    kills_before_ready: int = 0
    torn_tails: int = 0
    torn_bytes: int = 0
    returned_writes: int = 0
    lost_returned_writes: int = 0
    max_lost_in_one_run: int = 0
    messages_checked: int = 0
    file_bytes: int = 0
    seconds: float = 0.0
    flush_every: int = 1
    per_run_lost: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("per_run_lost")
        return d


def crash_chain(
    path: Path, *, runs: int, seed: int, flush_every: int = 1, max_delay: float = 0.04, early_kill_every: int = 4
) -> CrashFigures:
    """Run ``runs`` writer processes on ``path`` one after another, SIGKILL each at a random moment
    (every ``early_kill_every``-th one possibly before it is ready: during start-up or the resume),
    check the file after each kill, then append cleanly and check the whole file once more."""
    rnd = random.Random(seed)
    fig = CrashFigures(flush_every=flush_every)
    started = time.monotonic()
    last: dict[str, int] = {}  # per stream: the last sequence verified in the file
    verified_end = 0  # the end of the last complete frame verified so far
    prefix = b""
    env = checkout_env()
    for run in range(runs):
        size_before = path.stat().st_size if path.exists() else 0
        child = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(path), str(seed * 10_000 + run), str(flush_every)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        early = early_kill_every and run % early_kill_every == early_kill_every - 1
        if early:
            time.sleep(rnd.uniform(0.0, 0.25))  # start-up, the scan of the file, or the first writes
        else:
            ready = child.stdout.readline()
            assert ready.startswith(b"ready "), ready
            truncated = int(ready.split()[1])
            if verified_end:  # the resume cut off exactly the torn bytes, nothing good
                assert truncated == size_before - verified_end, (truncated, size_before, verified_end)
            time.sleep(rnd.uniform(0.0, max_delay))  # a random moment of its writes: where the kill lands
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        out = (b"" if early else b"ready 0\n") + child.stdout.read()
        child.stdout.close()
        fig.runs += 1
        fig.kills += 1
        lines = out.splitlines()
        if not lines or not lines[0].startswith(b"ready "):
            fig.kills_before_ready += 1
            lines = []
        returned = [(k.decode(), int(s)) for k, s in (ln.split() for ln in lines[1:] if ln.count(b" ") == 1)]
        fig.returned_writes += len(returned)
        if not path.exists():  # killed before the file was created
            continue
        data = path.read_bytes()
        assert data[:verified_end] == prefix[:verified_end], f"run {run}: bytes verified before were changed"
        if not data:  # killed between creating the file and writing its header: the next writer starts it
            continue
        assert len(data) >= 128, f"run {run}: the file holds a partial header ({len(data)} bytes)"
        with StreamReader(path) as r:
            if verified_end:
                r.pos = verified_end
            new = list(r)
            end = r.end
        assert end is not None and end.reason in ("end", "truncated"), f"run {run}: {end}"
        if end.reason == "truncated":
            fig.torn_tails += 1
            fig.torn_bytes += end.trailing_bytes
        for m in new:
            expected = last.get(m.stream_key, 0) + 1
            assert m.seq == expected, f"run {run}: {m.stream_key} seq {m.seq} after {expected - 1}"
            assert m.payload == crash_writer.payload(m.stream_key, m.seq), f"run {run}: payload of {m.seq}"
            last[m.stream_key] = m.seq
        lost = sum(1 for key, seq in returned if seq > last.get(key, 0))
        fig.per_run_lost.append(lost)
        fig.lost_returned_writes += lost
        fig.max_lost_in_one_run = max(fig.max_lost_in_one_run, lost)
        assert lost <= flush_every - 1, f"run {run}: {lost} returned writes are missing (flush_every={flush_every})"
        verified_end = end.offset
        prefix = data
    # a clean writer resumes after the last kill, and the whole file reads back strictly
    size_before = path.stat().st_size
    with StreamWriter(path, beacon_interval=1024) as w:
        if verified_end:
            # the torn tail is cut; a complete beacon right at the last verified frame's end (a frame that
            # ended on a boundary: Message.end stops before the beacon) is kept, the rest of the tail is not
            kept = size_before - w.truncated_bytes - verified_end
            assert kept == 0 or (verified_end % 1024 == 0 and 0 < kept < 1024), (kept, verified_end)
        for key in crash_writer.KEYS:
            w.write(key, crash_writer.payload(key, w.next_seq(key)))
            last[key] = last.get(key, 0) + 1
        w.close(eos=True)
    counts: dict[str, int] = {}
    with StreamReader(path) as r:
        for m in r:
            if m.is_eos:
                continue
            counts[m.stream_key] = counts.get(m.stream_key, 0) + 1
            assert m.seq == counts[m.stream_key] and m.payload == crash_writer.payload(m.stream_key, m.seq)
        assert r.end.reason == "eos", r.end
    assert counts == last, (counts, last)
    fig.messages_checked = sum(counts.values())
    fig.file_bytes = path.stat().st_size
    fig.seconds = round(time.monotonic() - started, 2)
    return fig


# ------------------------------------------------------------------------------------ position store


@dataclass
class PositionFigures:
    kills: int = 0
    damaged: int = 0
    kills_with_a_save_in_flight: int = 0
    temp_files_found: int = 0
    temp_files_left: int = 0
    last_value: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def _saver(path: Path, start: int, report: int) -> None:
    """Forked child: save start, start+1, ... forever, writing each returned value to ``report``."""
    from nbkit.runtime.position_store import PositionStore

    try:
        store = PositionStore(path)
        n = start
        while True:
            store.save("jobs", n)
            store.save("audit", n * 2)
            os.write(report, b"%d\n" % n)
            n += 1
    finally:
        os._exit(1)  # never return into the parent's code


def _kill_one_saver(path: Path, start: int, delay: float) -> list[int]:
    """Fork a saver, wait until its first save returned (however slow the machine), then SIGKILL it
    ``delay`` seconds later, most often inside a later save; returns the values it reported as saved."""
    import select

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        _saver(path, start, w)
    os.close(w)
    first = b""
    if select.select([r], [], [], 60)[0]:  # its first report: it has saved once
        first = os.read(r, 65536)
    assert first, "the saver reported no save within 60 s"
    time.sleep(delay)  # the kill lands at a random point of the saves that follow
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    data = first
    while select.select([r], [], [], 0)[0]:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    return [int(x) for x in data.split()]


def position_kills(folder: Path, *, kills: int, seed: int, max_delay: float = 0.03) -> PositionFigures:
    """Kill a process that saves positions in a loop ``kills`` times; after each kill the store must
    load and hold the last value whose save returned, or the one in flight (its rename happened),
    never a damaged file; temporary files of killed savers must not pile up."""
    from nbkit.errors import NbkitError
    from nbkit.runtime.position_store import PositionStore

    rnd = random.Random(seed)
    fig = PositionFigures()
    started = time.monotonic()
    path = folder / "positions.json"
    PositionStore(path).save("jobs", 0)
    current = 0
    for _ in range(kills):
        reported = _kill_one_saver(path, current + 1, rnd.uniform(0.0, max_delay))
        fig.kills += 1
        fig.temp_files_found += sum(1 for p in folder.iterdir() if p.name.endswith(".tmp"))
        try:
            store = PositionStore(path)  # also removes the killed saver's temporary file
        except NbkitError as exc:
            fig.damaged += 1
            raise AssertionError(f"the position store is damaged after a kill: {exc}") from None
        got = store.get("jobs")
        last = reported[-1] if reported else current
        assert got in (last, last + 1), f"the store holds {got}; the last save that returned wrote {last}"
        fig.kills_with_a_save_in_flight += got == last + 1
        audit = store.get("audit")  # saved after "jobs": equal to it, or one save behind (or older)
        assert audit is None or (audit % 2 == 0 and audit <= 2 * got), (got, audit)
        current = got
    fig.temp_files_left = sum(1 for p in folder.iterdir() if p.name != "positions.json")
    fig.last_value = current
    fig.seconds = round(time.monotonic() - started, 2)
    return fig
