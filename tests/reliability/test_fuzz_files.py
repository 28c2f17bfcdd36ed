"""Damaged ``.ss`` files through every reader: replay, follow, read_stream, summarize and the CLI.

``tests/transport/test_file_reader.py`` already cuts one file at every length and flips bytes in it
for the replay reader. Here the damage is structured (headers with a wrong magic, version or
interval; beacons with absurd marker counts or remainders; frames with a wrong size or key length;
zeroed tails, stale tails, splices, random files) over six seed files (intervals 128, 300, 1024,
2048 and 1 MiB, an append seam, an empty key, the upstream sample), and every entry point is checked
(see :mod:`.fuzzlib` for the promises each oracle enforces).
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.errors import (
    BeaconIntervalError,
    ByteMarkError,
    FormatError,
    NbkitError,
    TimestampRangeError,
    TruncatedError,
    Utf8Error,
    VersionError,
)
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.messages import ReadEnd

from . import fuzzlib
from .fuzzlib import FILE_ORACLES, MUTATIONS, Base

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples every run: CI stays deterministic; bench/fuzz.py explores
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_names = itertools.count()


def _fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / f"fuzz-{next(_names)}.ss"


@FUZZ
@given(rnd=st.randoms(use_true_random=False))
def test_damaged_files_only_raise_nbkit_errors_and_keep_the_intact_prefix(corpus, tmp_path_factory, rnd) -> None:
    fuzzlib.file_case(rnd, corpus, _fresh(tmp_path_factory))


@pytest.mark.parametrize("kind", sorted(set(MUTATIONS)))
@settings(FUZZ, max_examples=15)
@given(rnd=st.randoms(use_true_random=False))
def test_every_kind_of_damage(corpus, tmp_path_factory, kind, rnd) -> None:
    """Each mutation gets its own examples, so a rare kind is never starved by the random choice."""
    fuzzlib.file_case(rnd, corpus, _fresh(tmp_path_factory), kind=kind)


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_truncated_files_end_cleanly_in_every_mode(corpus, tmp_path_factory, data) -> None:
    """A cut (a crash, a copy in progress) is never reported as damage, in replay or in follow mode,
    and the follower says where the data stopped and how many bytes of a partial frame follow."""
    base: Base = data.draw(st.sampled_from(corpus))
    cut = data.draw(st.integers(128, len(base.data)))
    path = _fresh(tmp_path_factory)
    path.write_bytes(base.data[:cut])
    intact = base.intact(cut)
    with StreamReader(path, follow=True, idle_timeout=0.01, poll_min=0.0005, poll_max=0.002) as r:
        got = list(r)
        end = r.end
    assert got == intact
    last = intact[-1].end if intact else 128
    if intact and intact[-1].is_eos:
        assert end == ReadEnd("eos", last)
    else:
        assert end.reason == "idle" and end.offset == last and end.trailing_bytes == cut - last
        assert "idle timeout" in end.describe()
    fuzzlib.check_replay(path, base, cut, errors="raise", truncated_only=True)


# -- deterministic cases ---------------------------------------------------------------------------


def _header(
    *,
    magic: bytes = b"Ss",
    version: int = 1,
    name: bytes = b"h.ss",
    created: int = 0,
    interval: int = 1024,
    name_len: int | None = None,
) -> bytes:
    n = len(name) if name_len is None else name_len
    head = magic + bytes([version, n]) + name + struct.pack(">QI", created, interval)
    return head + bytes(127 - len(head)) + b"\r"


@pytest.mark.parametrize(
    ("raw", "error", "offset", "words"),
    [
        (b"", TruncatedError, 0, "0 bytes long"),
        (b"S", TruncatedError, 0, "1 bytes long"),
        (b"PK\x03\x04" + bytes(200), ByteMarkError, 0, "not a stream file"),
        (b'{"json": true}\n', ByteMarkError, 0, "not a stream file"),
        (_header(magic=b"sS"), ByteMarkError, 0, "'Ss'"),
        (_header(version=0), VersionError, 2, "version 0"),
        (_header(version=2), VersionError, 2, "version 2"),
        (_header(version=255), VersionError, 2, "version 255"),
        (_header(name_len=113, name=b""), ByteMarkError, 3, "112-byte maximum"),
        (_header(name=b"\xff\xfe.ss"), Utf8Error, 4, "not UTF-8"),
        (_header(interval=0), BeaconIntervalError, None, "minimum of 128"),
        (_header(interval=127), BeaconIntervalError, None, "minimum of 128"),
        (_header(created=(1 << 64) - 1), TimestampRangeError, None, "after year 9999"),
        (_header()[:100], TruncatedError, 0, "100 bytes long"),
    ],
    ids=[
        "empty",
        "one-byte",
        "zip",
        "json",
        "magic",
        "version-0",
        "version-2",
        "version-255",
        "name-length",
        "name-utf8",
        "interval-0",
        "interval-127",
        "created",
        "short",
    ],
)
@pytest.mark.parametrize("follow", [False, True], ids=["replay", "follow"])
def test_bad_headers_name_file_offset_and_problem(tmp_path: Path, raw, error, offset, words, follow) -> None:
    path = tmp_path / "bad.ss"
    path.write_bytes(raw)
    with pytest.raises(error) as info:
        StreamReader(path, follow=follow)
    message = str(info.value)
    assert message.startswith(f"{path}, ") and words in message, message
    if offset is not None:
        assert info.value.offset == offset and f"byte offset {offset}" in message


@pytest.mark.parametrize("interval", [128, 129, 1000, 1 << 31, (1 << 32) - 1])
def test_odd_but_legal_intervals_read_what_fits(tmp_path: Path, interval: int) -> None:
    """Any interval >= 128 is legal for a reader; a huge one just means no beacon is ever reached."""
    path = tmp_path / "odd.ss"
    path.write_bytes(fuzzlib.layout(interval, [("k", 0, i, 5, b"%d" % i * 20) for i in range(1, 30)]))
    with StreamReader(path) as r:
        got = list(r)
    assert [m.seq for m in got] == list(range(1, 30)) and r.end.reason == "end"


def _file_with_a_beacon_at_1024(tmp_path: Path) -> tuple[Path, bytes]:
    """Four 223-byte frames end exactly on the boundary at 1024, where the writer puts a beacon."""
    path = tmp_path / "exact.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        for _ in range(4):
            w.write("a", b"x" * 191)
    data = path.read_bytes()
    assert data[1024:1030] == b"\r\x00\x00\x00\x00\x01"  # remaining 0, one marker
    return path, data


@pytest.mark.parametrize("tail", [3000, 9000], ids=["ends-inside", "runs-past"])
def test_a_beacon_with_an_absurd_marker_count_is_damage(tmp_path: Path, tail: int) -> None:
    """255 markers of zeros parse (an empty key is legal) but cannot fit in a 1024-byte interval.

    Before the fix, a replay called the file "truncated: a writer may still be writing" when it
    ended inside the beacon, and a follower waited for it forever; when the file ran on, the reader
    jumped 6892 bytes past the boundary and blamed a checksum far from the damage."""
    path, data = _file_with_a_beacon_at_1024(tmp_path)
    path.write_bytes(data[:1024] + b"\r" + struct.pack(">IB", 0, 255) + bytes(tail))
    with StreamReader(path, errors="stop") as r:
        assert len(list(r)) == 4
    assert r.end.reason == "error" and r.end.offset == 1024
    assert "255 markers" in str(r.end.error) and "byte offset 1024" in str(r.end.error)
    waits: list[int] = []
    with (
        pytest.raises(FormatError, match="does not end before the next boundary"),
        StreamReader(path, follow=True, idle_timeout=5) as r,
    ):
        r.on_wait = lambda: waits.append(r.pos)
        list(r)
    assert waits == [], "the follower waited on damage as if it were a partial write"


def test_a_follower_reports_damage_written_while_it_follows(tmp_path: Path) -> None:
    """A second, misbehaving writer appends garbage behind the lock's back: the live follower gets the
    good messages, then an error that names the offset, instead of waiting forever."""
    path = tmp_path / "live.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        for i in range(3):
            w.write("a", b"good %d" % i)
        end = w.offset
    r = StreamReader(path, follow=True, idle_timeout=5, poll_max=0.01)
    try:
        got = [next(iter(r)) for _ in range(3)]
        assert [m.payload for m in got] == [b"good 0", b"good 1", b"good 2"]
        with open(path, "ab") as f:
            f.write(b"\x01a" + bytes(24) + struct.pack(">I", 2) + b"hi" + b"\x00\x00\r")  # wrong checksum
        with pytest.raises(NbkitError, match=f"byte offset {end}"):
            next(iter(r))
    finally:
        r.close()


def test_an_idle_follower_reports_where_it_stopped(tmp_path: Path) -> None:
    path, data = _file_with_a_beacon_at_1024(tmp_path)
    path.write_bytes(data + b"\x01a\x00")  # the start of a frame a writer is still writing
    with StreamReader(path, follow=True, idle_timeout=0.05, poll_max=0.01) as r:
        assert len(list(r)) == 4
    assert r.end == ReadEnd("idle", 1024, len(data) + 3 - 1024)
    assert r.end.describe() == (
        "stopped following at offset 1024: no new data within the idle timeout; "
        f"{len(data) + 3 - 1024} trailing bytes are not a complete frame"
    )


@pytest.mark.parametrize("oracle", sorted(FILE_ORACLES))
def test_oracles_accept_intact_files(corpus, tmp_path: Path, oracle: str) -> None:
    """The oracles themselves: on an undamaged file every message is intact and every check passes."""
    import random

    for base in corpus:
        path = tmp_path / base.name
        path.write_bytes(base.data)
        got = FILE_ORACLES[oracle](path, base, len(base.data), random.Random(1), False)
        assert got.error is None, (base.name, got)
