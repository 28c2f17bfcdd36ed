"""file_info.summarize: spec §15 numbers for sample-1, beacon counting, and how damaged files end."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from stream_files import iter_messages

from nbkit.errors import ByteMarkError, ChecksumError, NbkitError
from nbkit.transport.file_info import FileSummary, StreamSummary, iso_utc, summarize
from nbkit.transport.messages import ReadEnd
from nbkit.wire.keys import INTERNAL_KEY


def test_sample_summary_matches_spec(sample_path: Path) -> None:
    s = summarize(sample_path)
    assert isinstance(s, FileSummary)
    assert (s.header.file_name, s.header.created_at_ms, s.header.beacon_interval) == (
        "vec_map-1694767177436.firedbg.ss",
        1694767177437,
        1_048_576,
    )
    assert s.size == 3481 and s.message_count == 28 and s.beacon_count == 0
    assert s.has_eos and s.eos_offset == 3425
    assert s.end == ReadEnd("eos", 3481)
    assert [(x.stream_key, x.shard_id, x.count) for x in s.streams] == [
        ("file", 0, 1),
        ("breakpoint", 0, 4),
        ("event", 0, 22),
        (INTERNAL_KEY, 0, 1),
    ]
    event = s.stream("event")
    assert (event.first_seq, event.last_seq) == (1, 22)
    assert iso_utc(event.first_timestamp_ms) == "2023-09-15T08:39:38.489Z"
    assert iso_utc(event.last_timestamp_ms) == "2023-09-15T08:39:38.564Z"
    bp = s.stream("breakpoint")
    assert (iso_utc(bp.first_timestamp_ms), iso_utc(bp.last_timestamp_ms)) == (
        "2023-09-15T08:39:37.917Z",
        "2023-09-15T08:39:38.493Z",
    )
    assert s.stream("event", 1) is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.size = 0  # type: ignore[misc]


def test_summary_to_dict_is_json(sample_path: Path) -> None:
    d = json.loads(json.dumps(summarize(sample_path).to_dict()))
    assert d["header"]["created_at"] == "2023-09-15T08:39:37.437Z"
    assert d["end"]["reason"] == "eos" and d["end"]["error"] is None
    assert d["streams"][0] == StreamSummary("file", 0, 1, 1, 1, 1694767177912, 1694767177912, originals=1).to_dict()


@pytest.mark.parametrize(("ms", "text"), [(0, "1970-01-01T00:00:00.000Z"), (1700000000010, "2023-11-14T22:13:20.010Z")])
def test_iso_utc(ms: int, text: str) -> None:
    assert iso_utc(ms) == text


def test_multi_stream_summary_and_beacon_count(multi_file: Path, multi_messages: list) -> None:
    s = summarize(multi_file)
    assert s.message_count == len(multi_messages) and not s.has_eos and s.eos_offset is None
    assert s.end == ReadEnd("end", s.size)
    assert s.beacon_count == (s.size - 1) // 1024 > 30
    for x in s.streams:
        mine = [m for m in multi_messages if (m[0], m[1]) == (x.stream_key, x.shard_id)]
        assert x.count == len(mine)
        assert (x.first_seq, x.last_seq) == (mine[0][2], mine[-1][2])
        # the time range by value, not in file order
        assert (x.first_timestamp_ms, x.last_timestamp_ms) == (min(m[3] for m in mine), max(m[3] for m in mine))
    assert sum(x.count for x in s.streams) == s.message_count


def test_beacon_count_is_boundaries_below_size(tmp_path: Path, multi_file: Path) -> None:
    data = multi_file.read_bytes()
    path = tmp_path / "cut.ss"
    for size, beacons in [(1023, 0), (1024, 0), (1025, 1), (2048, 1), (2049, 2), (3000, 2)]:
        path.write_bytes(data[:size])
        assert summarize(path).beacon_count == beacons, size


def test_truncated_file_reports_trailing_bytes(tmp_path: Path, multi_file: Path) -> None:
    data = multi_file.read_bytes()
    msgs = list(iter_messages(multi_file))
    cut = msgs[100].offset + 10
    path = tmp_path / "t.ss"
    path.write_bytes(data[:cut])
    s = summarize(path)
    assert s.message_count == 100
    assert s.end == ReadEnd("truncated", msgs[99].end, cut - msgs[99].end)
    assert s.end.offset + s.end.trailing_bytes == s.size


def test_damaged_file_reports_the_error(tmp_path: Path, multi_file: Path) -> None:
    data = bytearray(multi_file.read_bytes())
    msgs = list(iter_messages(multi_file))
    victim = next(m for m in msgs[50:] if m.payload and m.end - m.offset < 200)
    data[victim.end - 4] ^= 0x55  # last payload byte
    path = tmp_path / "d.ss"
    path.write_bytes(bytes(data))
    s = summarize(path, on_bad_frames="error")
    assert s.message_count == msgs.index(victim)
    assert s.end.reason == "error" and s.end.offset == victim.offset
    assert isinstance(s.end.error, ChecksumError)
    assert s.to_dict()["end"]["error"].startswith(str(path))


def test_damaged_file_lists_each_region_and_what_came_after(tmp_path: Path, multi_file: Path) -> None:
    data = bytearray(multi_file.read_bytes())
    msgs = list(iter_messages(multi_file))
    victims = [next(m for m in msgs[k:] if m.payload and m.end - m.offset < 200) for k in (50, 200)]
    for victim in victims:
        data[victim.end - 4] ^= 0x55  # last payload byte
    path = tmp_path / "d.ss"
    path.write_bytes(bytes(data))
    s = summarize(path)
    assert [r.start for r in s.damaged] == [v.offset for v in victims]
    assert s.end.reason == summarize(multi_file).end.reason
    lost = [m for m in msgs if any(r.start <= m.offset < r.end for r in s.damaged)]
    assert s.message_count == len(msgs) - len(lost)
    after_first = [m for m in msgs if s.damaged[0].end <= m.offset < s.damaged[1].start]
    assert s.recovered_after == (len(after_first), s.message_count - msgs.index(victims[0]) - len(after_first))
    assert s.to_dict()["damaged"][0]["recovered_after"] == len(after_first)


def test_header_problems_raise(tmp_path: Path) -> None:
    bad = tmp_path / "x.ss"
    bad.write_bytes(b"PK\x03\x04 a zip file")
    with pytest.raises(ByteMarkError):
        summarize(bad)
    with pytest.raises(NbkitError, match="no such file"):
        summarize(tmp_path / "missing.ss")
