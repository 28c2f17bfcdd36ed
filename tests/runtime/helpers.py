"""Helpers for the runtime tests: seeding stream files, reading them back, parsing pipe output.

The decoders here are written from the spec (runtime-semantics §3, §5.2) independently of
``nbkit.wire``, so a test that reads a copy back does not trust the code under test to do it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import struct
from base64 import b64decode
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import FileBroker, HandlerOutcome, SettlementEvent, StreamReader, StreamWriter, VirtualClock
from nbkit.runtime.broker import Broker

RETRY = "x-ruststream-retry-count"
SEQ = "stream-sequence"
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC).timestamp()  # where a VirtualClock starts
START_MS = int(START * 1000)
ACK_TEXT = "acknowledgement is not supported by this broker"


# ---------------------------------------------------------------- envelope


def unenvelope(data: bytes) -> tuple[dict[str, str], bytes, str | None]:
    """(headers, payload, prefix) of an ``rs1:`` envelope; ``({}, data, None)`` for a verbatim payload."""
    if not data.startswith(b"rs1:"):
        return {}, data, None
    framed = b64decode(data[4:], validate=True)
    (n,) = struct.unpack(">I", framed[:4])
    block, payload = framed[4 : 4 + n], framed[4 + n :]
    headers = {}
    for line in block.decode("utf-8").split("\n"):
        if line:
            name, _, value = line.partition(": ")
            headers[name] = value
    return headers, payload, "rs1:"


# ---------------------------------------------------------------- files


@dataclass(frozen=True)
class Rec:
    """One message as read back from a stream file (payload still enveloped)."""

    key: str
    seq: int
    ts_ms: int
    raw: bytes

    @property
    def headers(self) -> dict[str, str]:
        return unenvelope(self.raw)[0]

    @property
    def payload(self) -> bytes:
        return unenvelope(self.raw)[1]


def seed(
    path: Path,
    messages: Iterable[tuple[str, bytes]],
    *,
    start_ms: int = START_MS,
    step_ms: int = 1000,
    eos: bool = False,
) -> None:
    """Write ``(key, payload)`` messages (sequences from 1 per key, timestamps ``start_ms + i*step_ms``)."""
    with StreamWriter(path, created_at_ms=start_ms) as w:
        for i, (key, payload) in enumerate(messages):
            w.write(key, payload, timestamp_ms=start_ms + i * step_ms)
        if eos:
            w.write_eos()


def records(path: Path, key: str | None = None) -> list[Rec]:
    """Every message in the file (or only ``key``'s), in file order."""
    with StreamReader(path) as r:
        out = [Rec(m.stream_key, m.seq, m.timestamp_ms, m.payload) for m in r]
    return [m for m in out if key is None or m.key == key]


def file_bytes(path: Path) -> bytes:
    return Path(path).read_bytes()


# ---------------------------------------------------------------- pipes

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d) \| ([A-Za-z0-9._-]+) \| (\d+)\] (.*)$")


@dataclass(frozen=True)
class Line:
    """One stdout line as the upstream producer writes it: ``[ts | key | seq] payload``."""

    ts: str
    key: str
    seq: int
    text: str

    @property
    def headers(self) -> dict[str, str]:
        return unenvelope(self.text.encode())[0]

    @property
    def payload(self) -> bytes:
        return unenvelope(self.text.encode())[1]

    @property
    def enveloped(self) -> bool:
        return self.text.startswith("rs1:")


def lines(out: list[str]) -> list[Line]:
    parsed = []
    for text in out:
        m = _LINE.match(text)
        assert m, f"not a producer line: {text!r}"
        parsed.append(Line(m[1], m[2], int(m[3]), m[4]))
    return parsed


class OpenPipe:
    """A real OS pipe used as a broker's stdin: it stays open (no EOF) until ``close()``."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.reader = os.fdopen(r, "rb", buffering=0)
        self._w = w

    def send(self, *texts: str) -> None:
        os.write(self._w, "".join(t + "\n" for t in texts).encode())

    def close(self) -> None:
        if self._w >= 0:
            os.close(self._w)
            self._w = -1


class KeepRecords(logging.Handler):
    """A logging handler that keeps every record it is given in ``records`` (the list passed in)."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__()
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def drain(app, limit: int = 1000) -> list[SettlementEvent]:
    """Step until nothing is ready (delayed copies that are not yet due stay pending)."""
    events: list[SettlementEvent] = []
    for _ in range(limit):
        ev = app.step()
        if ev is None:
            return events
        events.append(ev)
    raise AssertionError(f"still delivering after {limit} steps")


def settle_all(app, limit: int = 1000) -> list[SettlementEvent]:
    """Step and fire delayed copies (moving the virtual clock) until nothing is ready or pending."""
    events: list[SettlementEvent] = []
    for _ in range(limit):
        events += drain(app)
        due = app.next_due()
        if due is None:
            return events
        app.fire_due(due)
    raise AssertionError(f"copies still circulating after {limit} rounds")


def failing_broker(path: Path) -> FileBroker:
    """A broker replaying ``path`` to ``jobs``'s handler that raises on ``boom``, asks a retry of ``cap``
    (one attempt allowed: its copy goes to ``jobs.dead``) and returns None for anything else."""
    broker = FileBroker(path)

    @broker.subscriber("jobs", replay=True, max_attempts=1, dead_letter="jobs.dead")
    def handler(d):
        if d.payload == b"boom":
            raise RuntimeError("kaput")
        return HandlerOutcome.retry() if d.payload == b"cap" else None

    return broker


# ---------------------------------------------------------------- both transports


class Rig:
    """One subscription on stream key ``key`` (default ``jobs``) over either transport, step by step.

    On a file the subscription is live and copies go back to ``key``. On a pipe, stdin is an open
    OS pipe; copies go to ``<key>.retry`` (or, with ``loop=True``, to ``key`` under loopback, so the
    handler sees them the way a live file subscription does).
    """

    def __init__(
        self, transport: str, tmp_path: Path, clock: VirtualClock, *, loop: bool = False, key: str = "jobs"
    ) -> None:
        from nbkit import StdioBroker

        self.transport = transport
        self.clock = clock
        self.key = key
        self.injected: set[int] = set()
        self._n = 0
        self.broker: Broker[Any]
        if transport == "file":
            self.path = tmp_path / "rig.ss"
            self.broker = FileBroker(self.path)
            self.retry_key = self.key
        else:
            self.pipe = OpenPipe()
            self.out: list[str] = []
            self.broker = StdioBroker(stdin=self.pipe.reader, stdout=self.out, loopback=loop)
            self.retry_key = self.key if loop else f"{key}.retry"
        self.app = None

    def sub(self, **options):
        if self.transport == "pipe":
            options.setdefault("out_retry", self.retry_key)
        return self.broker.subscriber(self.key, **options)

    def start(self, **options):
        from nbkit import App

        self.app = App(self.broker, clock=self.clock, **options)
        self.app.start()
        return self.app

    def inject(self, payload: bytes | str, headers: dict | None = None) -> None:
        """Put one message on ``jobs`` from outside the app (a publish on the file, a stdin line)."""
        if isinstance(payload, str):
            payload = payload.encode()
        if self.transport == "file":
            # another producer appends; the app's broker holds the writer, so publish through it
            assert isinstance(self.broker, FileBroker)
            self.injected.add(self.broker.publish(self.key, payload, headers).seq)
        else:
            from nbkit.wire.envelope import encode

            text = encode(headers or {}, payload, force_text=True).decode()
            self.pipe.send(f"[2024-01-01T00:00:00 | {self.key} | {100 + self._n}] {text}")
            self.injected.add(100 + self._n)
        self._n += 1

    def written(self, key: str) -> list[tuple[dict[str, str], bytes]]:
        """(headers, payload) of what the app wrote under ``key`` (injections excluded)."""
        if self.transport == "file":
            return [
                (r.headers, r.payload)
                for r in records(self.path, key)
                if not (key == self.key and r.seq in self.injected)
            ]
        return [(ln.headers, ln.payload) for ln in lines(self.out) if ln.key == key]

    def all_written(self) -> list:
        """Everything the app wrote, any key (priming message excluded)."""
        if self.transport == "file":
            return [
                r
                for r in records(self.path)
                if r.key != "ruststream-internal" and not (r.key == self.key and r.seq in self.injected)
            ]
        return lines(self.out)

    def close(self) -> None:
        if self.transport == "pipe":
            self.pipe.close()
            self.pipe.reader.close()


def dispatch_records(caplog, text: str | None = None) -> list:
    """Records logged by the runtime's loggers that carry ``nbkit_text`` (optionally only ``text``)."""
    return [
        r
        for r in caplog.records
        if r.name.startswith("nbkit.") and (text is None or getattr(r, "nbkit_text", None) == text)
    ]
