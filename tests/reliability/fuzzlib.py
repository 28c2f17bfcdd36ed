"""Fuzz machinery shared by ``tests/reliability`` and ``bench/fuzz.py``: corpora, mutations, oracles.

Every case is built from a ``random.Random`` (hypothesis's ``st.randoms()`` in the tests, so failures
shrink; a seeded ``Random`` in the long script, so failures replay). An oracle runs one nbkit entry
point on the case and raises ``AssertionError`` when a promise is broken:

- only :class:`nbkit.errors.NbkitError` subclasses come out (or a reported :class:`ReadEnd`);
- a bounded read returns (replay never waits; follow mode stops at its idle timeout);
- every message that lies wholly before the first damaged byte is still returned, unchanged;
- the CLI returns an int and prints at most one-line ``nbkit: ...`` messages on stderr, no traceback;
- a malformed stdio line raises ``LineParseError``/``Utf8Error`` naming that line.

Any other exception escapes the oracle as itself, so a test or the fuzz script sees its traceback.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import random
import struct
import sys
import tempfile
import warnings
from base64 import b64encode
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ss_layout import layout_ss

from nbkit import cli
from nbkit.errors import LineParseError, NbkitError, Utf8Error
from nbkit.runtime.app import App
from nbkit.runtime.clock import VirtualClock
from nbkit.runtime.file_broker import FileBroker
from nbkit.runtime.outcome import HandlerOutcome
from nbkit.runtime.stdio_broker import StdioBroker
from nbkit.tabular import PayloadMode
from nbkit.tabular.frames import read_pipe, read_stream
from nbkit.transport.file_info import summarize
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.messages import Message, ReadEnd
from nbkit.transport.polling import NEED_MORE
from nbkit.transport.positions import FilePosition
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEY, INTERNAL_KEYS
from nbkit.wire.stdio_line import LineFormatter, parse_line

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000
#: Follow-mode reads stop after this long without new bytes (the bounded-read guard).
FOLLOW_IDLE = 0.004


# ------------------------------------------------------------------------------------ corpora


def layout(interval: int, messages: Iterable[tuple[str, int, int, int, bytes]], *, name: str = "f.ss") -> bytes:
    """A whole ``.ss`` file laid out from the spec (§3-§6) without nbkit's writer; any interval >= 128.

    Kept independent of :class:`StreamWriter` so the corpus also holds intervals the writer refuses.
    """
    return layout_ss(name, T0, interval, messages)


def workload(rnd: random.Random, n: int, keys: tuple[str, ...] = ("a", "b.b", "c-long_key.name")) -> list[tuple]:
    """``n`` messages over ``keys`` (and shard 1 of the first), sizes chosen so frames cross beacons."""
    seqs: dict[tuple[str, int], int] = {}
    out = []
    streams = [(k, 0) for k in keys] + [(keys[0], 1)]
    for i in range(n):
        key, shard = rnd.choice(streams)
        seq = seqs[(key, shard)] = seqs.get((key, shard), 0) + 1
        size = rnd.choice([0, 1, 3, 17, 40, 90, 300, 700, 1500, 2600])
        payload = rnd.choice([b"x", b"\0", b"{}", b"rs1:"]) * size if rnd.random() < 0.3 else rnd.randbytes(size)
        out.append((key, shard, seq, T0 + i, payload))
    return out


@dataclass(frozen=True)
class Base:
    """An intact stream file and what a reader returns from it (the oracle's reference)."""

    name: str
    data: bytes
    interval: int
    messages: tuple[Message, ...]

    def intact(self, damage: int) -> list[Message]:
        """The messages lying wholly before byte ``damage``."""
        return [m for m in self.messages if m.end <= damage]


def _read_all(path: Path) -> tuple[Message, ...]:
    with StreamReader(path) as r:
        got = tuple(r)
        assert r.end is not None and r.end.reason in ("eos", "end"), (path, r.end)
    return got


def build_corpus(folder: Path, seed: int = 20240601) -> list[Base]:
    """Write the seed files into ``folder`` (deterministic for a seed) and return them, read back."""
    folder.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(seed)
    made: list[tuple[str, Path, int]] = []

    def writer_file(name: str, interval: int, n: int, *, eos: bool, append: bool = False) -> None:
        path = folder / name
        path.unlink(missing_ok=True)
        msgs = workload(rnd, n)
        half = len(msgs) // 2 if append else len(msgs)
        with StreamWriter(path, beacon_interval=interval, file_name=name, created_at_ms=T0) as w:
            for key, shard, seq, ts, payload in msgs[:half]:
                w.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=ts)
            if append:
                w.write_eos()
        if append:  # a second writer overwrites the EOS and continues (the append seam)
            with StreamWriter(path, beacon_interval=interval) as w:
                for key, shard, seq, ts, payload in msgs[half:]:
                    w.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=ts)
                if eos:
                    w.write_eos()
        elif eos:
            with StreamWriter(path) as w:
                w.write_eos()
        made.append((name, path, interval))

    writer_file("multi-1024-eos.ss", 1024, 120, eos=True)
    writer_file("multi-2048.ss", 2048, 90, eos=False)
    writer_file("appended-1024.ss", 1024, 80, eos=True, append=True)
    for interval in (128, 300):
        msgs = workload(rnd, 70)
        msgs.insert(5, ("", 0, 1, T0, b"empty key: the reader accepts it"))
        msgs.append((INTERNAL_KEY, 0, 0, T0 + 999, b"EOS"))
        path = folder / f"layout-{interval}.ss"
        path.write_bytes(layout(interval, msgs, name=path.name))
        made.append((path.name, path, interval))
    for sample in (ROOT.parent / "shared/testdata/ss/sample-1.ss", ROOT / "tests/data/sample-1.ss"):
        if sample.is_file():
            path = folder / "sample-1.ss"
            path.write_bytes(sample.read_bytes())
            made.append((path.name, path, 1 << 20))
            break
    return [Base(name, path.read_bytes(), interval, _read_all(path)) for name, path, interval in made]


# ------------------------------------------------------------------------------------ mutations

#: Beacon intervals a damaged header may claim (0 and < 128 are refused; huge ones are legal).
ODD_INTERVALS = (0, 1, 7, 127, 128, 129, 1000, 1023, 1024, 4096, 1 << 20, 1 << 31, (1 << 32) - 1)


def _frame_at(base: Base, rnd: random.Random) -> Message | None:
    """A message whose 29+K header bytes lie inside one interval (so its fields sit at fixed offsets)."""
    fits = [
        m for m in base.messages if m.offset // base.interval == (m.offset + 29 + len(m.stream_key)) // base.interval
    ]
    return rnd.choice(fits) if fits else None


def mutate(rnd: random.Random, base: Base, kind: str | None = None) -> tuple[str, bytes, int]:
    """Damage ``base`` one way; returns (kind, bytes, damage) where ``damage`` is the first changed byte."""
    data = bytearray(base.data)
    n = len(data)
    kind = kind or rnd.choice(MUTATIONS)
    if kind == "truncate":
        cut = rnd.randrange(n + 1)
        return kind, bytes(data[:cut]), cut
    if kind == "bitflip":
        spots = [rnd.randrange(n) for _ in range(rnd.randint(1, 4))]
        for p in spots:
            data[p] ^= 1 << rnd.randrange(8)
        return kind, bytes(data), min(spots)
    if kind == "overwrite":
        p = rnd.randrange(n)
        junk = rnd.randbytes(rnd.randint(1, 16))
        data[p : p + len(junk)] = junk
        return kind, bytes(data[:n]), p
    if kind == "insert":
        p = rnd.randrange(128, n + 1)
        data[p:p] = rnd.randbytes(rnd.randint(1, 40))
        return kind, bytes(data), p
    if kind == "delete":
        p = rnd.randrange(128, n)
        del data[p : p + rnd.randint(1, 40)]
        return kind, bytes(data), p
    if kind == "zero-tail":  # what a power loss can leave: the file's last blocks read as zeros
        p = rnd.randrange(128, n)
        data[p:] = bytes(n - p)
        return kind, bytes(data), p
    if kind == "stale-tail":  # upstream appends never truncate: old bytes can follow the last frame
        m = rnd.choice(base.messages)
        tail = base.data[m.offset : m.end][: rnd.randint(1, 80)]
        return kind, bytes(data) + tail, n
    if kind == "splice":
        a, b = sorted(rnd.randrange(128, n) for _ in range(2))
        p = rnd.randrange(128, n)
        chunk = base.data[a : b + 1][:400]
        data[p:p] = chunk
        return kind, bytes(data), p
    if kind == "random":
        size = rnd.choice([0, 1, 3, 4, 60, 127, 128, 129, 300, 2000, 9000])
        noise = bytearray(rnd.randbytes(size))
        prefix = rnd.choice([b"", b"Ss", b"Ss\x01", base.data[:128]])
        noise[: len(prefix)] = prefix[:size]
        return kind, bytes(noise), 0
    if kind == "header":
        name_len = data[3]
        field = rnd.choice(["magic", "version", "name-length", "name", "created", "interval", "padding"])
        if field == "magic":
            p = rnd.randrange(2)
            data[p] = rnd.choice([x for x in range(256) if x != data[p]])
        elif field == "version":
            p = 2
            data[p] = rnd.choice([0, 2, 3, 0x7F, 0xFF])
        elif field == "name-length":
            p = 3
            data[p] = rnd.choice([0, 1, name_len + 1, 111, 112, 113, 200, 255])
        elif field == "name":
            p = 4 + rnd.randrange(max(1, name_len))
            data[p] = rnd.choice([0x80, 0xC3, 0xFF, 0x00])
        elif field == "created":
            p = 4 + name_len
            data[p : p + 8] = struct.pack(">Q", rnd.choice([0, 253_402_300_800_000, (1 << 64) - 1]))
        elif field == "interval":
            p = 12 + name_len
            data[p : p + 4] = struct.pack(">I", rnd.choice(ODD_INTERVALS))
        else:
            p = rnd.randrange(16 + name_len, 128)
            data[p] = rnd.randrange(256)
        return f"header-{field}", bytes(data), p
    if kind == "beacon":
        boundaries = range(base.interval, n - 6, base.interval)
        if not boundaries:
            return mutate(rnd, base, "bitflip")
        b = rnd.choice(boundaries)
        field = rnd.choice(["count", "remaining", "marker-key-length", "marker"])
        if field == "count":
            data[b + 5] = rnd.choice([0, 1, 2, 3, 8, 127, 128, 200, 254, 255])
        elif field == "remaining":
            data[b + 1 : b + 5] = struct.pack(
                ">I", rnd.choice([0, 1, base.interval - 1, base.interval, 1 << 20, (1 << 32) - 1])
            )
        elif field == "marker-key-length" and b + 6 < n:
            data[b + 6] = rnd.choice([0, 1, 100, 249, 250, 255])
        else:
            p = rnd.randrange(b + 6, min(n, b + 60))
            data[p] = rnd.randrange(256)
        return f"beacon-{field}", bytes(data[:n]), b
    if kind == "frame":
        frame = _frame_at(base, rnd)
        if frame is None:
            return mutate(rnd, base, "bitflip")
        k = len(frame.stream_key)
        field = rnd.choice(["key-length", "size", "size", "timestamp", "checksum"])
        if field == "key-length":
            data[frame.offset] = rnd.choice([0, 1, k + 1, 249, 250, 255])
        elif field == "size":
            size = len(frame.payload)
            new = rnd.choice([0, 1, max(0, size - 1), size + 1, size + 4096, 1 << 20, (1 << 32) - 1])
            data[frame.offset + 25 + k : frame.offset + 29 + k] = struct.pack(">I", new)
        elif field == "timestamp":
            data[frame.offset + 17 + k : frame.offset + 25 + k] = struct.pack(
                ">Q", rnd.choice([253_402_300_800_000, (1 << 64) - 1])
            )
        else:
            if frame.end % base.interval < 3:  # the checksum may sit after a beacon: flip a payload byte
                return mutate(rnd, base, "bitflip")
            data[frame.end - 3] ^= 0xFF
        return f"frame-{field}", bytes(data), frame.offset
    raise ValueError(f"unknown mutation {kind!r}")


MUTATIONS = (
    "truncate",
    "truncate",
    "bitflip",
    "bitflip",
    "overwrite",
    "insert",
    "delete",
    "zero-tail",
    "stale-tail",
    "splice",
    "random",
    "header",
    "header",
    "beacon",
    "beacon",
    "frame",
    "frame",
)


# ------------------------------------------------------------------------------------ file oracles


@dataclass
class Outcome:
    """What one oracle saw: messages returned, how the read ended, and which nbkit error (if any)."""

    messages: int = 0
    end: str | None = None
    error: str | None = None


def _same(got: list[Message], intact: list[Message], what: str) -> None:
    if got[: len(intact)] != intact:
        first = next((i for i, (a, b) in enumerate(zip(got, intact, strict=False)) if a != b), len(got))
        raise AssertionError(
            f"{what}: the messages before the damage changed or went missing: {len(intact)} intact, "
            f"{len(got)} returned, first difference at message {first}"
        )


def _poll_to_end(reader: StreamReader, size: int, got: list[Message], what: str) -> None:
    """Poll a replay read of a ``size``-byte file to its end, appending each message to ``got`` (kept when
    the read raises): it never asks to wait, and ends within ``size // 32 + 3`` polls (every frame is at
    least 32 bytes, so more polls would mean no progress)."""
    polls = size // 32 + 3
    for _ in range(polls):
        item = reader.poll()
        if item is None:
            return
        assert item is not NEED_MORE, "a replay read asked to wait"
        got.append(item)
    raise AssertionError(f"{what} of a {size}-byte file did not end after {polls} polls")


def check_replay(path: Path, base: Base, damage: int, *, errors: str, truncated_only: bool = False) -> Outcome:
    """Replay: bounded, never waits, ends with a ReadEnd, keeps every intact message (truncation: exactly)."""
    out = Outcome()
    size = path.stat().st_size
    got: list[Message] = []
    try:
        with StreamReader(path, errors=errors) as r:
            _poll_to_end(r, size, got, "the replay")
            assert isinstance(r.end, ReadEnd), f"the read ended without a ReadEnd: {r.end!r}"
            out.end = r.end.reason
            if r.end.reason == "error":
                assert errors == "stop" and isinstance(r.end.error, NbkitError), r.end
    except NbkitError as exc:
        out.error = type(exc).__name__
        if truncated_only and size >= 128:
            raise AssertionError(f"truncation at {size} bytes was reported as damage: {exc}") from None
    out.messages = len(got)
    intact = base.intact(damage)
    _same(got, intact, "replay")
    if truncated_only and size >= 128:
        assert got == intact, f"truncated at {size}: {len(got)} messages returned, {len(intact)} intact"
    return out


def check_follow(path: Path, base: Base, damage: int, *, errors: str = "raise") -> Outcome:
    """Follow mode with an idle timeout: returns, keeps every intact message, reports how it ended."""
    out = Outcome()
    got: list[Message] = []
    try:
        with StreamReader(
            path, follow=True, idle_timeout=FOLLOW_IDLE, poll_min=0.0005, poll_max=0.002, errors=errors
        ) as r:
            for m in r:
                got.append(m)
                assert len(got) <= path.stat().st_size // 32 + 1, "follow mode returned more frames than fit"
            assert isinstance(r.end, ReadEnd), f"a follow read stopped without a ReadEnd: {r.end!r}"
            out.end = r.end.reason
    except NbkitError as exc:
        out.error = type(exc).__name__
    out.messages = len(got)
    _same(got, base.intact(damage), "follow")
    return out


def check_read_stream(path: Path, base: Base, damage: int, payload: PayloadMode = "bytes") -> Outcome:
    """``read_stream``: a DataFrame holding every intact user message in order, or an NbkitError."""
    out = Outcome()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frame = read_stream(path, payload=payload, include_internal=True)
    except NbkitError as exc:
        out.error = type(exc).__name__
        return out
    out.messages = len(frame)
    intact = base.intact(damage)
    assert len(frame) >= len(intact), f"read_stream kept {len(frame)} rows, {len(intact)} messages are intact"
    assert list(frame["offset"][: len(intact)]) == [m.offset for m in intact]
    assert list(frame["seq"][: len(intact)]) == [m.seq for m in intact]
    return out


def check_summarize(path: Path, base: Base, damage: int) -> Outcome:
    """``summarize`` (``nbkit info``): a summary counting at least the intact messages, or an NbkitError."""
    out = Outcome()
    try:
        s = summarize(path)
    except NbkitError as exc:
        out.error = type(exc).__name__
        return out
    json.dumps(s.to_dict())
    out.messages, out.end = s.message_count, s.end.reason
    assert s.message_count >= len(base.intact(damage))
    return out


def run_cli(
    argv: list[str], *, stdin: bytes | None = None, sleeps_before_ctrl_c: int | None = None
) -> tuple[int, str, str]:
    """``cli.main(argv)`` in process with captured stdout/stderr (and ``stdin`` bytes); checks the CLI
    contract: an int comes back, nothing escapes, stderr holds only ``nbkit: ...`` lines, no traceback.

    ``sleeps_before_ctrl_c``: ``cat --follow`` is interrupted (as by Ctrl-C) at that many idle waits.
    """
    out, err = io.StringIO(), io.StringIO()
    saved_stdin, saved_sleep = sys.stdin, cli.time.sleep
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    if sleeps_before_ctrl_c is not None:
        counter = itertools.count()

        def sleep(seconds: object) -> None:
            if next(counter) >= sleeps_before_ctrl_c:
                raise KeyboardInterrupt

        cli.time.sleep = sleep
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main(argv)
            except BaseException as exc:  # noqa: BLE001 - the contract says nothing escapes main()
                raise AssertionError(f"cli.main({argv!r}) raised {type(exc).__name__}: {exc}") from exc
    finally:
        sys.stdin = saved_stdin
        cli.time.sleep = saved_sleep
    text = err.getvalue()
    assert isinstance(rc, int), f"cli.main returned {rc!r}"
    assert "Traceback" not in text, text
    bad = [line for line in text.splitlines() if not line.startswith("nbkit: ")]
    assert not bad, f"stderr lines that are not one-line nbkit messages: {bad}"
    return rc, out.getvalue(), text


def check_cli_file(path: Path, base: Base, damage: int, rnd: random.Random) -> Outcome:
    """``nbkit cat`` (a random format and options, sometimes ``--follow``) or ``nbkit info``."""
    out = Outcome()
    intact = base.intact(damage)
    command = rnd.choice(["cat", "cat", "cat-follow", "info"])
    if command == "info":
        argv = ["info", str(path)] + (["--json"] if rnd.random() < 0.5 else [])
        rc, _, err = run_cli(argv)
        assert rc in (0, 1), (argv, rc, err)
        out.end = f"rc={rc}"
        return out
    fmt = rnd.choice(["log", "ndjson", "stdio"])
    argv = ["cat", "--format", fmt, str(path)]
    follow = command == "cat-follow"
    if follow:
        argv.insert(1, "--follow")
    if rnd.random() < 0.2:
        argv.insert(1, "--header-only")
    filtered = rnd.random() < 0.2
    if filtered:
        argv[1:1] = ["--key", rnd.choice(["a", "b.b", "SEA_STREAMER_INTERNAL", "absent"])]
    rc, text, err = run_cli(argv, sleeps_before_ctrl_c=3 if follow else None)
    assert rc in ((0, 1, 130) if follow else (0, 1)), (argv, rc, err)
    assert len(err.splitlines()) <= 2, err
    if fmt == "ndjson":  # one JSON object per message and nothing else (no header or beacon comments)
        shown = text.splitlines()
        for line in shown:
            assert isinstance(json.loads(line), dict), line
        out.messages = len(shown)
        if not filtered:
            assert len(shown) >= len(intact), f"{argv}: {len(shown)} messages printed, {len(intact)} intact"
    out.end = f"rc={rc}"
    return out


def check_seek(path: Path, base: Base, damage: int, rnd: random.Random) -> Outcome:
    """Start a read at a random position (the tip, a beacon, a sequence, an instant) on a damaged file:
    only NbkitErrors, a bounded read, a ReadEnd. (Where it lands is not checked: a damaged beacon can
    mislead the beacon survey, and the seek tests of tests/transport pin the answers on intact files.)"""
    out = Outcome()
    kind = rnd.choice(["end", "beacon", "sequence", "timestamp"])
    target = rnd.choice(base.messages) if base.messages else None
    key = target.stream_key if target is not None and target.stream_key else "a"
    if kind == "end":
        position = FilePosition.end()
    elif kind == "beacon":
        position = FilePosition.beacon(rnd.randrange(0, len(base.data) // base.interval + 3))
    elif kind == "sequence":
        position = FilePosition.sequence(target.seq if target is not None and rnd.random() < 0.8 else rnd.randrange(99))
    else:
        position = FilePosition.timestamp(target.timestamp_ms - 1 if target is not None else 0)
    size = path.stat().st_size
    try:
        with StreamReader(path, start=position, key=key, errors=rnd.choice(["raise", "stop"])) as r:
            got: list[Message] = []
            _poll_to_end(r, size, got, "a read after a seek")
            assert isinstance(r.end, ReadEnd)
            out.messages, out.end = len(got), r.end.reason
    except NbkitError as exc:
        out.error = type(exc).__name__
    return out


def check_service(path: Path, base: Base, damage: int, rnd: random.Random) -> Outcome:
    """A replay service over the damaged file, its retry copies appended to it: every intact message
    of its key is delivered in order, only NbkitErrors come out, and every copy is published, reported
    lost (the damage refuses the append) or reported abandoned. Runs last: it may append to the file."""
    out = Outcome()
    keys = sorted({m.stream_key for m in base.messages if m.stream_key and m.stream_key not in INTERNAL_KEYS})
    key = rnd.choice(keys or ["a"])
    broker = FileBroker(path, existing_only=True)
    seen: list[tuple[int, int | None]] = []

    def handler(d):
        seen.append((d.seq, d.offset))
        return rnd.choice(
            [
                None,
                HandlerOutcome.drop(),
                HandlerOutcome.retry(),
                HandlerOutcome.retry_after(0),
                HandlerOutcome.retry_after(rnd.choice([1, 5])),
            ]
        )

    broker.subscriber(
        key, replay=True, max_attempts=rnd.choice([2, 3]), dead_letter=rnd.choice([None, "dead.letters"])
    )(handler)
    app = App(broker, clock=VirtualClock(), shutdown_timeout=rnd.choice([None, 0, 2]))
    try:
        app.run()
    except NbkitError as exc:
        out.error = type(exc).__name__
        app.crash()
    intact = [(m.seq, m.offset) for m in base.intact(damage) if m.stream_key == key]
    assert seen[: len(intact)] == intact, f"the service missed intact messages: {len(seen)} seen, {len(intact)} intact"
    for e in app.events:
        if e.action in ("copy", "delayed-copy", "dead-letter"):
            assert e.written_at is not None or e.abandoned or (e.error or "").startswith("copy lost"), e
    out.messages = len(seen)
    return out


FILE_ORACLES: dict[str, Callable[..., Outcome]] = {
    "replay-raise": lambda p, b, d, rnd, t: check_replay(p, b, d, errors="raise", truncated_only=t),
    "replay-stop": lambda p, b, d, rnd, t: check_replay(p, b, d, errors="stop", truncated_only=t),
    "follow": lambda p, b, d, rnd, t: check_follow(p, b, d, errors=rnd.choice(["raise", "stop"])),
    "read_stream": lambda p, b, d, rnd, t: check_read_stream(p, b, d, rnd.choice(["bytes", "auto", "json"])),
    "summarize": lambda p, b, d, rnd, t: check_summarize(p, b, d),
    "cli": lambda p, b, d, rnd, t: check_cli_file(p, b, d, rnd),
    "seek": lambda p, b, d, rnd, t: check_seek(p, b, d, rnd),
    "service": lambda p, b, d, rnd, t: check_service(p, b, d, rnd),  # last: it appends to the file
}


def file_case(
    rnd: random.Random, corpus: list[Base], path: Path, oracles: Iterable[str] = FILE_ORACLES, kind: str | None = None
) -> dict[str, Outcome]:
    """Damage a random corpus file one way, write it to ``path`` and run the named oracles on it."""
    base = rnd.choice(corpus)
    kind, data, damage = mutate(rnd, base, kind)
    path.write_bytes(data)
    truncated_only = kind == "truncate"
    return {name: FILE_ORACLES[name](path, base, damage, rnd, truncated_only) for name in oracles}


# ------------------------------------------------------------------------------------ stdio lines

_FIELDS = (
    "2024-01-01T00:00:00",
    "2024-01-01T00:00:00.5",
    "2024-02-30T00:00:00",
    "+2024-01-01T00:00:00.123456789",
    "-0001-01-01T00:00:00",
    "9999-12-31T23:59:59.9999999999",
    "2024-01-01T00:00:00Z",
    "jobs",
    "jobs.retry",
    "other",
    "a" * 249,
    "a" * 250,
    "0",
    "+7",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "",
    " ",
    "x y",
    "é",
    "broadcast",
    "\u3000jobs\u2028",
    "SEA_STREAMER_INTERNAL",
)
_CHARS = "[]|:. -_aZ09T+\t\r\u0085\u00a0\u2028é\x00\x1c"


_HEADER_VALUES: list[str | bytes] = ["1", "2", "18446744073709551616", "x", " padded ", "two\nlines", b"\xff\x00"]


def _envelope_text(rnd: random.Random) -> str:
    headers: dict[str, str | bytes] = {}
    for _ in range(rnd.randint(0, 3)):
        headers[rnd.choice(["x-ruststream-retry-count", "tenant", "Bad:Name", " pad"])] = rnd.choice(_HEADER_VALUES)
    text = envelope.encode(headers, rnd.randbytes(rnd.randint(0, 20)), force_text=True).decode()
    if text and rnd.random() < 0.4:  # damage the envelope: a flipped character or a cut
        i = rnd.randrange(len(text))
        text = text[:i] + rnd.choice("A+/=!:\u00e9") + text[i + 1 :] if rnd.random() < 0.5 else text[:i]
    if rnd.random() < 0.2:
        prefix = rnd.choice(["rs1:", "rs2:"])
        framed = struct.pack(">I", rnd.choice([0, 3, 1 << 31, (1 << 32) - 1])) + rnd.randbytes(rnd.randint(0, 12))
        text = prefix + b64encode(framed).decode()
    return text


def random_line(rnd: random.Random) -> str:
    """One stdio line (without ``\\n``): valid, almost valid, envelope-carrying or junk."""
    kind = rnd.randrange(6)
    if kind == 0:
        key = rnd.choice(["jobs", "jobs", "other", "broadcast"])
        return LineFormatter().format(key, _envelope_text(rnd) or "p", T0 + rnd.randrange(10**6)).rstrip("\n")
    if kind == 1:
        parts = [rnd.choice(_FIELDS) for _ in range(rnd.randint(1, 5))]
        sep = rnd.choice(["|", " | ", "||", " |"])
        return "[" + sep.join(parts) + "]" + rnd.choice(["", " ", "  "]) + rnd.choice(["hi", "", _envelope_text(rnd)])
    if kind == 2:
        return rnd.choice(["[jobs] ", "[jobs | 3] ", "", "[jobs]"]) + _envelope_text(rnd)
    if kind == 3:
        return "".join(rnd.choice(_CHARS) for _ in range(rnd.randrange(40)))
    if kind == 4:
        good = LineFormatter().format("jobs", "payload", T0).rstrip("\n")
        i = rnd.randrange(len(good))
        return good[:i] + rnd.choice(_CHARS) + good[i + 1 :]
    return rnd.randbytes(rnd.randrange(30)).decode("latin-1")


def random_lines(rnd: random.Random) -> list[str]:
    return [random_line(rnd).replace("\n", " ") for _ in range(rnd.randint(1, 8))]


def _first_bad(lines: list[str]) -> int | None:
    """1-based number of the first line whose ``[...]`` header does not parse, or None."""
    for n, line in enumerate(lines, 1):
        try:
            parse_line(line, lineno=n)
        except LineParseError:
            return n
    return None


def check_parse_lines(lines: list[str]) -> Outcome:
    """``parse_line`` + ``envelope.decode``: a StdioLine or a LineParseError naming the line."""
    out = Outcome()
    for n, line in enumerate(lines, 1):
        try:
            parsed = parse_line(line, lineno=n)
        except LineParseError as exc:
            assert exc.line == n and f"line {n}" in str(exc), f"the error does not name line {n}: {exc}"
            out.error = "LineParseError"
            continue
        headers, payload = envelope.decode(parsed.payload.encode("utf-8", "surrogatepass"))
        assert isinstance(headers, dict) and isinstance(payload, bytes)
        out.messages += 1
    return out


def check_read_pipe(lines: list[str]) -> Outcome:
    """``read_pipe``: one row per non-empty line, or a LineParseError naming the first bad line."""
    out = Outcome()
    bad = _first_bad(lines)
    try:
        frame = read_pipe(lines=lines, payload="bytes")
    except LineParseError as exc:
        assert exc.line == bad, f"read_pipe named line {exc.line}; the first bad line is {bad}"
        out.error = "LineParseError"
        return out
    assert bad is None, f"line {bad} does not parse but read_pipe accepted it"
    out.messages = len(frame)
    assert len(frame) == sum(1 for line in lines if line), (len(frame), lines)
    return out


def check_stdio_app(rnd: random.Random, lines: list[str], *, as_bytes: bool = False) -> Outcome:
    """A pipe service over these stdin lines (str lines, or raw bytes with some non-UTF-8 lines).

    Deliveries before the first bad line all arrive; the bad line is named by a LineParseError or a
    Utf8Error; every copy is published (stdout line) or reported abandoned; the counts match the events.
    """
    out = Outcome()
    stdout: list[str] = []
    raw = [line.encode("utf-8", "surrogatepass") for line in lines]
    if as_bytes:
        for i in range(len(raw)):
            if rnd.random() < 0.15:
                raw[i] = rnd.randbytes(rnd.randint(1, 12)).replace(b"\n", b"")
    undecodable = {n for n, b in enumerate(raw, 1) if not _utf8(b)}
    texts = [b.decode("utf-8", "replace") for b in raw]
    bad_parse = _first_bad([t if n not in undecodable else "" for n, t in enumerate(texts, 1)])
    bad = min([n for n in (bad_parse, min(undecodable, default=None)) if n is not None], default=None)
    stdin = b"".join(b + b"\n" for b in raw) if as_bytes else lines
    broker = StdioBroker(stdin=stdin, stdout=stdout)
    app = App(broker, clock=VirtualClock(), shutdown_timeout=rnd.choice([None, None, 0, 1.5]))
    seen: list[int] = []

    def handler(d):
        seen.append(d.line)
        return rnd.choice(
            [
                None,
                HandlerOutcome.drop(),
                HandlerOutcome.retry(),
                HandlerOutcome.retry_after(0),
                HandlerOutcome.retry_after(rnd.choice([0.5, 1, 3])),
                ValueError("handler bug"),
            ]
        )

    def raising(d):
        result = handler(d)
        if isinstance(result, Exception):
            raise result
        return result

    broker.subscriber(
        "jobs",
        out_retry="jobs.retry",
        max_attempts=rnd.choice([None, 2, 3]),
        dead_letter=rnd.choice([None, "jobs.dead"]),
    )(raising)
    try:
        app.run()
    except (LineParseError, Utf8Error) as exc:
        assert exc.line == bad, f"the error names line {exc.line}; the first bad line is {bad}: {exc}"
        assert f"line {bad}" in str(exc)
        out.error = type(exc).__name__
    else:
        assert bad is None, f"line {bad} is malformed but the service ran to the end"
    routed = [n for n, t in enumerate(texts, 1) if (bad is None or n < bad) and _routes_to_jobs(t, n)]
    assert seen[: len(routed)] == routed, f"deliveries {seen} do not start with the lines before the damage {routed}"
    copies = [e for e in app.events if e.action in ("copy", "delayed-copy", "dead-letter")]
    written = [e for e in copies if e.written_at is not None]
    abandoned = [e for e in copies if e.abandoned]
    assert len(written) + len(abandoned) == len(copies), "a copy was neither published nor reported abandoned"
    assert len(stdout) == len(written), f"{len(stdout)} stdout lines, {len(written)} copies published"
    for n, line in enumerate(stdout, 1):
        parsed = parse_line(line, lineno=n)
        assert parsed.stream_key in ("jobs.retry", "jobs.dead")
    out.messages = len(seen)
    out.end = f"copies={len(copies)} abandoned={len(abandoned)}"
    return out


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _routes_to_jobs(text: str, n: int) -> bool:
    parsed = parse_line(text, lineno=n)
    return parsed.stream_key in (None, "jobs")


def check_cli_write(rnd: random.Random, corpus: list[Base], path: Path) -> Outcome:
    """``nbkit write`` on random or damaged ndjson stdin: one-line errors, and a readable file after."""
    out = Outcome()
    base = rnd.choice(corpus)
    lines = ndjson_lines(base)
    if rnd.random() < 0.7 and lines:
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(lines))
            choice = rnd.randrange(4)
            if choice == 0:
                lines[i] = random_line(rnd).encode("utf-8", "surrogatepass")
            elif choice == 1:
                lines[i] = lines[i][: rnd.randrange(len(lines[i]) + 1)]
            elif choice == 2:
                lines[i] = rnd.randbytes(rnd.randint(1, 30)).replace(b"\n", b"")
            else:
                j = rnd.randrange(len(lines[i]) + 1)
                lines[i] = lines[i][:j] + rnd.choice([b'"', b"}", b"\xff", b"9" * 25, b"-1", b"null"]) + lines[i][j:]
    path.unlink(missing_ok=True)
    rc, _, err = run_cli(["write", str(path)] + (["--eos"] if rnd.random() < 0.3 else []), stdin=b"\n".join(lines))
    assert rc in (0, 1), (rc, err)
    assert rc == 0 or len(err.splitlines()) >= 1, "exit 1 without saying why"
    out.error = None if rc == 0 else err.splitlines()[-1][:60]
    if path.exists() and path.stat().st_size:
        with StreamReader(path) as r:  # whatever the input, what was written is an intact stream file
            out.messages = sum(1 for _ in r)
            out.end = r.end.reason
            assert r.end.reason in ("end", "eos"), r.end
    return out


_NDJSON: dict[str, list[bytes]] = {}


def ndjson_lines(base: Base) -> list[bytes]:
    """The ``nbkit cat --format ndjson`` lines of an intact corpus file (cached per file)."""
    cached = _NDJSON.get(base.name)
    if cached is None:
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder) / base.name
            tmp.write_bytes(base.data)
            rc, text, err = run_cli(["cat", "--format", "ndjson", str(tmp)])
        assert rc == 0, err
        cached = _NDJSON[base.name] = text.encode().splitlines()
    return list(cached)


LINE_ORACLES = ("parse", "read_pipe", "app-text", "app-bytes")


def lines_case(rnd: random.Random) -> dict[str, Outcome]:
    """Random stdin lines through the parser, read_pipe and a pipe service (text and raw bytes)."""
    lines = random_lines(rnd)
    return {
        "parse": check_parse_lines(lines),
        "read_pipe": check_read_pipe(lines),
        "app-text": check_stdio_app(rnd, lines),
        "app-bytes": check_stdio_app(rnd, lines, as_bytes=True),
    }


# ------------------------------------------------------------------------------------ cut + append


def check_cut_and_append(rnd: random.Random, corpus: list[Base], path: Path) -> Outcome:
    """A torn write leaves any prefix of a file; a new writer cuts off only the partial frame (and a
    trailing EOS), keeps the file's interval, continues every stream's sequence, and the result reads
    back cleanly with the old messages unchanged."""
    base = rnd.choice(corpus)
    cut = rnd.randint(128, len(base.data))
    path.unlink(missing_ok=True)
    path.write_bytes(base.data[:cut])
    kept = base.intact(cut)
    while kept and kept[-1].is_eos:  # an EOS at the very end is overwritten by an append
        kept.pop()
    resume = kept[-1].end if kept else 128
    last: dict[tuple[str, int], int] = {}
    for m in kept:
        last[(m.stream_key, m.shard_id)] = max(m.seq, last.get((m.stream_key, m.shard_id), 0))
    new = []
    with StreamWriter(path, beacon_interval=2048) as w:
        assert w.header.beacon_interval == base.interval, "the append changed the file's beacon interval"
        if resume % base.interval == 0 and w.truncated_bytes == cut - w.offset:
            # a shared writer keeps a complete beacon at a boundary where the data stops
            assert base.data[resume : w.offset] == path.read_bytes()[resume : w.offset]
        else:
            assert w.truncated_bytes == cut - resume, (w.truncated_bytes, cut, resume)
        for key in ("a", "b.b", "brand-new"):
            assert w.next_seq(key) == last.get((key, 0), 0) + 1, key
            new.append(w.write(key, rnd.randbytes(rnd.choice([0, 10, 900, 3000]))))
    with StreamReader(path, stop_at_eos=False) as r:
        got = list(r)
        assert r.end.reason == "end", r.end
    assert got[: len(kept)] == kept, "the messages before the cut changed"
    assert [(m.stream_key, m.seq, m.payload) for m in got[len(kept) :]] == [
        (n.stream_key, n.seq, m.payload) for n, m in zip(new, got[len(kept) :], strict=True)
    ]
    return Outcome(messages=len(got), end=f"cut={cut} resume={resume}")


__all__ = [
    "FILE_ORACLES",
    "LINE_ORACLES",
    "MUTATIONS",
    "Base",
    "Outcome",
    "build_corpus",
    "check_cli_write",
    "check_cut_and_append",
    "file_case",
    "layout",
    "lines_case",
    "mutate",
    "random_line",
    "random_lines",
    "run_cli",
    "workload",
]
