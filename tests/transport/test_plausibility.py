"""Damage never passes as data, and says what it cost: on a production-like file (several keys, retries,
dead letters), a damaged copy, a copy with a header byte flipped and a truncated copy."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from nbkit import DamageWarning, StreamWriter, read_stream
from nbkit.cli import main
from nbkit.notebook.production import write_production_file
from nbkit.transport.damage import SuspectRecordWarning
from nbkit.transport.file_info import summarize
from nbkit.transport.plausibility import TIME_TOLERANCE_MS, suspects
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


# -- the rule: one flipped bit from fitting its own (key, shard) stream; no cry of wolf on healthy files --

DAY = 86_400_000
T0 = 1_700_000_000_000


def _write(path, records, *, created_at_ms=T0):
    """A stream file of ``(key, shard, seq, timestamp_ms)`` records, in order; appends if the file exists."""
    with StreamWriter(path, created_at_ms=created_at_ms) as w:
        for i, (key, shard, seq, ts) in enumerate(records):
            w.write(key, b'{"i": %d}' % i, shard_id=shard, seq=seq, timestamp_ms=ts)


def _run(n, *, t0=T0, seq0=1, keys=("a", "b")):
    return [(keys[i % len(keys)], 0, seq0 + i // len(keys), t0 + 10 * i) for i in range(n)]


def _read_quietly(path):
    """read_stream with every warning an error: a healthy file must not warn."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = read_stream(path, include_internal=True)
    assert frame.attrs["suspect"] == []
    return frame


def test_an_eos_mark_written_days_after_the_last_message_is_no_suspect(tmp_path):
    path = tmp_path / "eos.ss"
    _write(path, _run(200))
    with StreamWriter(path, clock_ms=lambda: T0 + 1116 * DAY) as w:  # the stream ends three years later
        w.write_eos()
    frame = _read_quietly(path)
    assert str(frame["stream_key"].iloc[-1]) == "SEA_STREAMER_INTERNAL"
    assert summarize(path).suspects == ()


def test_appends_days_apart_are_no_suspects_whether_numbering_continues_or_restarts(tmp_path):
    path = tmp_path / "appends.ss"
    _write(path, _run(100))
    _write(path, _run(100, t0=T0 + 5 * DAY, seq0=51))  # a later session continuing each key's numbering
    _write(path, _run(100, t0=T0 + 9 * DAY))  # another, numbering from 1 again
    _write(path, _run(100, t0=T0 + 2 * DAY, seq0=51))  # one whose clock is days behind the others
    assert len(_read_quietly(path)) == 400


@pytest.mark.parametrize("burst", [1, 3, 50])
def test_merged_producers_interleaving_their_own_sequences_are_no_suspects(tmp_path, burst):
    rng = np.random.default_rng(burst)
    skew = (0, 2_500, -7_300, 1)  # each writer's clock, ms off the first's
    seqs = np.zeros((4, 2), dtype=np.int64)
    records, writer = [], 0
    for i in range(3000):
        if i % burst == 0:
            writer = int(rng.integers(4))
        k = int(rng.integers(2))
        seqs[writer, k] += 1
        records.append((("a", "b")[k], 0, int(seqs[writer, k]), T0 + i + skew[writer]))
    path = tmp_path / "merged.ss"
    _write(path, records)
    _read_quietly(path)


def test_clock_steps_back_and_forward_are_no_suspects(tmp_path):
    records = []
    for key, shard, seq, ts in _run(400):
        step = 0
        if seq > 50:
            step -= 3_600_000  # an hour back
        if seq > 100:
            step += DAY  # a day forward
        if seq > 150:
            step -= 5  # a few ms back
        records.append((key, shard, seq, ts + step))
    path = tmp_path / "steps.ss"
    _write(path, records)
    _read_quietly(path)


def test_records_stamped_before_they_were_written_are_no_suspects(tmp_path):
    # one run of seqs whose timestamps were taken before a wait for the file's lock (up to 10 s), or are
    # the producer's event times arriving up to 30 minutes late
    rng = np.random.default_rng(5)
    records = []
    for i, (key, shard, seq, _) in enumerate(_run(4000)):
        late = int(rng.integers(10_000)) if i % 50 == 7 else int(rng.integers(1_800_000)) if i % 50 == 31 else 0
        records.append((key, shard, seq, T0 + 100 * i - late))
    path = tmp_path / "late.ss"
    _write(path, records)
    _read_quietly(path)


def test_a_key_over_several_shards_is_no_suspect(tmp_path):
    rng = np.random.default_rng(7)
    seqs: dict[tuple[str, int], int] = {}
    records = []
    for i in range(600):
        key, shard = ("a", "b")[i % 2], int(rng.integers(3))
        seqs[key, shard] = seqs.get((key, shard), 0) + 1
        records.append((key, shard, seqs[key, shard], T0 + i))
    records.append(("a", 4, 1, T0 + 600))  # one message alone on its shard (1, 0 and 5 are one bit from 4)
    records.append(("a", 0, seqs["a", 0] + 1, T0 + 601))
    path = tmp_path / "shards.ss"
    _write(path, records)
    _read_quietly(path)


def _flip_field(path, dst, frame, row, field, bit):
    """Copy ``path`` to ``dst`` with one bit of one record's u64 header field flipped (big-endian)."""
    at = {"shard_id": 0, "seq": 8, "timestamp": 16}[field]
    offset, k = _frame_at(frame, row)
    _flip(path, dst, [offset + 1 + k + at + 7 - bit // 8], bit=1 << (bit % 8))
    return offset


@pytest.mark.parametrize(
    ("field", "bit"),
    [("seq", b) for b in (0, 1, 5, 17, 40, 63)]
    + [("timestamp", b) for b in (22, 26, 29, 41, 46)]
    + [("shard_id", b) for b in (0, 9, 63)],
)
def test_one_flipped_bit_in_seq_timestamp_or_shard_is_flagged(tmp_path, field, bit):
    path = tmp_path / "ok.ss"
    _write(path, _run(300, keys=("a", "b", "c")))
    frame = read_stream(path)
    bad = tmp_path / "bad.ss"
    offset = _flip_field(path, bad, frame, 151, field, bit)
    with pytest.warns(SuspectRecordWarning, match=f"at byte offset {offset}"):
        got = read_stream(bad)
    assert [(s["offset"], s["field"]) for s in got.attrs["suspect"]] == [(offset, field)]


def test_a_first_record_flipped_before_the_files_creation_is_flagged(tmp_path):
    path = tmp_path / "ok.ss"
    _write(path, _run(30), created_at_ms=T0)
    frame = read_stream(path)
    bad = tmp_path / "bad.ss"
    offset = _flip_field(path, bad, frame, 0, "timestamp", 33)  # about 99 days earlier
    with pytest.warns(SuspectRecordWarning, match="before its neighbours"):
        got = read_stream(bad)
    assert [s["offset"] for s in got.attrs["suspect"]] == [offset]


def test_a_timestamp_moved_by_less_than_the_tolerance_is_not_flagged(tmp_path):
    path = tmp_path / "ok.ss"
    _write(path, _run(60))
    bad = tmp_path / "bad.ss"
    _flip_field(path, bad, read_stream(path), 31, "timestamp", 20)  # 17 minutes: below TIME_TOLERANCE_MS
    assert TIME_TOLERANCE_MS > 2**20
    assert read_stream(bad).attrs["suspect"] == []


def test_internal_keys_are_ignored_unless_asked():
    keys = ["k", "SEA_STREAMER_INTERNAL"]
    code = np.array([0, 0, 1, 1, 1, 0, 0])
    seq = np.array([1, 2, 1, 2 ^ 2**20, 3, 3, 4])  # the internal stream runs 1, 2 ^ 2**20, 3
    ts = T0 + np.arange(7)
    z = np.zeros(7, dtype=np.int64)
    assert suspects(keys, code, z, seq, ts, np.arange(7)) == []
    flagged = suspects(keys, code, z, seq, ts, np.arange(7), ignore_keys=())
    assert [(s.stream_key, s.field) for s in flagged] == [("SEA_STREAMER_INTERNAL", "seq")]


def test_a_seq_that_fits_no_single_flip_is_not_flagged():
    z = np.zeros(5, dtype=np.int64)
    ts = T0 + np.arange(5)
    assert suspects(["k"], z, z, np.array([1, 2, 3 ^ 0b11, 4, 5]), ts, np.arange(5)) == []  # two bits off
    assert [s.field for s in suspects(["k"], z, z, np.array([1, 2, 3 ^ 0b10, 4, 5]), ts, np.arange(5))] == ["seq"]
