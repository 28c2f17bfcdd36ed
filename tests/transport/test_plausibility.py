"""Damage never passes as data, and says what it cost: on a production-like file (several keys, retries,
dead letters), a damaged copy, a copy with a header byte flipped and a truncated copy."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from nbkit import DamageWarning, read_stream
from nbkit.cli import main
from nbkit.notebook.production import write_production_file
from nbkit.transport.damage import SuspectRecordWarning
from nbkit.transport.file_info import summarize
from nbkit.transport.plausibility import suspects
from nbkit.transport.repair import repair


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    path = tmp_path_factory.mktemp("prod") / "prod.ss"
    write_production_file(path, messages=6000, beacon_interval=4096)
    return path, read_stream(path)


def _flip(src, dst, positions, bit=0x40):
    raw = bytearray(src.read_bytes())
    for pos in positions:
        raw[pos] ^= bit
    dst.write_bytes(bytes(raw))


def _frame_at(frame, i):
    row = frame.iloc[i]
    return int(row["offset"]), len(str(row["stream_key"]))


def test_a_flipped_timestamp_byte_is_flagged_named_and_left_out_of_the_time_range(intact, tmp_path):
    path, frame = intact
    i = len(frame) // 2
    offset, k = _frame_at(frame, i)
    bad = tmp_path / "ts.ss"
    _flip(path, bad, [offset + 1 + k + 16 + 4])  # byte 4 of the timestamp: about 12 days earlier
    with pytest.warns(SuspectRecordWarning) as seen:
        got = read_stream(bad)
    row = frame.iloc[i]
    message = str(seen[0].message)
    assert f"{str(row['stream_key'])!r} seq {int(row['seq'])} at byte offset {offset}" in message
    assert "12 days after its neighbours" in message or "12 days before its neighbours" in message
    assert [s["offset"] for s in got.attrs["suspect"]] == [offset]
    assert got.attrs["suspect"][0]["field"] == "timestamp"
    # nbkit info: the time range by value leaves the suspect record out, and says so
    summary = summarize(bad)
    assert summary.time_range == (frame["timestamp"].min().value // 10**6, frame["timestamp"].max().value // 10**6)
    assert [s.offset for s in summary.suspects] == [offset]
    text = summary.to_text()
    assert "1 suspect record left out" in text and f"at byte offset {offset}" in text


def test_flipped_seq_and_shard_bytes_are_flagged(intact, tmp_path):
    path, frame = intact
    inner = frame[frame["stream_key"] == "orders"].index[100:102]
    (o1, k1), (o2, k2) = (_frame_at(frame, int(j)) for j in inner)
    bad = tmp_path / "seq.ss"
    _flip(path, bad, [o1 + 1 + k1 + 8 + 6, o2 + 1 + k2 + 7], bit=0x01)  # seq byte 6; shard's low byte
    with pytest.warns(SuspectRecordWarning):
        got = read_stream(bad)
    fields = {s["offset"]: s["field"] for s in got.attrs["suspect"]}
    assert fields == {o1: "seq", o2: "shard_id"}


def test_the_intact_file_has_no_suspect(intact):
    path, frame = intact
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_stream(path).attrs["suspect"] == []
    assert summarize(path).suspects == ()


def test_losses_per_key_equal_what_the_intact_file_holds_there(intact, tmp_path):
    path, frame = intact
    size = path.stat().st_size
    bad = tmp_path / "damaged.ss"
    spots = [size // 5, size // 2, size * 4 // 5]
    payload_bytes = []
    for spot in spots:  # a payload byte of the frame that starts after each spot (the checksum catches it)
        row = frame[frame["offset"] > spot].iloc[0]
        payload_bytes.append(int(row["offset"]) + 1 + len(str(row["stream_key"])) + 28 + 2)
    _flip(path, bad, payload_bytes)
    with pytest.warns(DamageWarning) as seen:
        got = read_stream(bad, on_bad_frames="warn")
    regions = got.attrs["damaged"]
    assert len(regions) == 3 and len(seen) == 3
    offsets = frame["offset"].to_numpy()
    for region, warning in zip(regions, seen, strict=True):
        lost_rows = frame[(offsets >= region["start"]) & (offsets < region["end"])]
        want = {
            str(k): (int(g["seq"].min()), int(g["seq"].max()), len(g))
            for k, g in lost_rows.groupby("stream_key", observed=True)
        }
        have = {x["stream_key"]: (x["first_seq"], x["last_seq"], x["count"]) for x in region["lost"]}
        assert have == want
        assert sum(x["count"] for x in region["lost"]) == len(lost_rows)
        first = region["lost"][0]
        assert f"lost {first['stream_key']!r} seq {first['first_seq']}" in str(warning.message)
    # the same losses in nbkit info and in nbkit repair's summary
    summary = summarize(bad)
    assert [[loss.to_dict() for loss in cost] for cost in summary.lost] == [r["lost"] for r in regions]
    report = repair(bad, tmp_path / "clean.ss")
    first_loss = summary.lost[0][0].describe()
    assert any(first_loss in line for line in report.lines())
    assert first_loss in summary.to_text()


def test_cli_info_json_has_the_losses_and_the_overview(intact, tmp_path, capsys):
    path, frame = intact
    assert main(["info", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    streams = {s["stream_key"]: s for s in doc["streams"]}
    copies = frame["retry_count"] > 0
    for key, s in streams.items():
        rows = frame["stream_key"] == key
        if key.endswith(".dead"):
            assert (s["dead_letters"], s["originals"], s["retry_copies"]) == (int(rows.sum()), 0, 0)
        else:
            assert s["originals"] == int((rows & ~copies).sum()) and s["retry_copies"] == int((rows & copies).sum())
        assert s["first_timestamp"].startswith(str(frame.loc[rows, "timestamp"].min().date()))
    assert doc["suspect"] == [] and doc["time_range"]["first"] == "2024-03-04T08:00:00.000Z"


def test_a_truncated_copy_reports_its_tail_and_loses_nothing_in_between(intact, tmp_path):
    path, frame = intact
    cut = tmp_path / "cut.ss"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.warns(UserWarning, match="trailing bytes"):
        got = read_stream(cut)
    assert got.attrs["damaged"] == [] and got.attrs["suspect"] == []
    assert got["offset"].tolist() == frame["offset"].tolist()[: len(got)]
    assert "trailing data" in summarize(cut).to_text()


def test_suspects_needs_neighbours_that_agree():
    t = np.array([0, 10**10, 2 * 10**10, 3 * 10**10])  # hours apart, in order: nothing stands out
    z = np.zeros(4, dtype=np.int64)
    assert suspects(["k"], z, z, np.arange(1, 5), t, np.arange(4)) == []
