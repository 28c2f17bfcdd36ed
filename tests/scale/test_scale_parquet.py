"""Parquet export (nbkit.scale.parquet.to_parquet / read_parquet, ``nbkit export``).

Round trip: ``read_parquet(out)`` equals ``nbkit.read_stream(file, same options)`` (or the frame written)
exactly, columns and dtypes. The file holds the frame's columns and nothing else (layout 2); what another
tool sees is defined in ``test_plain_pandas_reads_the_layout``. Layout-1 files (written before, kept in
tests/data) still read. ``columns=``/``keys=`` equal the full read cut afterwards.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from nbkit.cli import main  # noqa: E402
from nbkit.scale.parquet import frame_to_table, read_parquet, to_parquet  # noqa: E402
from nbkit.tabular.frames import read_pipe, read_stream  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402

T0 = 1_700_000_000_000


@pytest.mark.parametrize("mode", ["auto", "bytes", "text", "json", "objects"])
def test_file_round_trip_in_every_payload_mode(tmp_path, scale_file, mode):
    out = tmp_path / f"{mode}.parquet"
    rows = to_parquet(scale_file, out, payload=mode, partition_size=4096)
    want = read_stream(scale_file, payload=mode)
    assert rows == len(want)
    pd.testing.assert_frame_equal(read_parquet(out), want)
    assert pq.ParquetFile(out).num_row_groups > 1  # one row group per range: memory stays flat


@pytest.mark.parametrize("mode", ["auto", "bytes", "text", "json", "objects"])
def test_frame_round_trip(tmp_path, scale_file, mode):
    want = read_stream(scale_file, payload=mode)
    out = tmp_path / "frame.parquet"
    assert to_parquet(want, out) == len(want)
    pd.testing.assert_frame_equal(read_parquet(out), want)


def test_options_filter_like_read_stream(tmp_path, scale_file):
    out = tmp_path / "opts.parquet"
    to_parquet(scale_file, out, keys=["beta"], start=T0 + 10, end=T0 + 120, include_internal=True)
    pd.testing.assert_frame_equal(
        read_parquet(out), read_stream(scale_file, keys=["beta"], start=T0 + 10, end=T0 + 120, include_internal=True)
    )


def test_plain_pandas_reads_the_layout(tmp_path, scale_file):
    """What another tool sees: the frame's columns only, UTC timestamps, signed ids, the payloads as stored,
    header maps whose values hold text or bytes; the dtypes recorded in the file's metadata."""
    out = tmp_path / "plain.parquet"
    to_parquet(scale_file, out)
    want = read_stream(scale_file)
    schema = pq.read_schema(out)
    assert schema.names == list(want.columns)  # no payload_bytes / headers_bytes beside them
    assert schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("shard_id").type == pa.int64()
    assert schema.field("payload").type == pa.large_binary()
    assert schema.field("headers").type == pa.map_(
        pa.string(), pa.struct([("text", pa.string()), ("bytes", pa.binary())])
    )
    meta = pq.read_metadata(out).metadata
    assert json.loads(meta[b"nbkit"]) == {"format": 2, "payload": "auto"}
    assert json.loads(meta[b"nbkit.dtypes"]) == {
        **{c: str(t) for c, t in want.dtypes.items()},
        "payload": None,  # a stream file's export: str, or object where a payload is not UTF-8, as read
    }
    plain = pq.read_table(out).to_pandas()
    typed = ["shard_id", "seq", "timestamp", "size", "retry_count", "attempt", "offset"]
    assert plain[typed].astype(object).equals(want[typed].astype(object))
    assert plain["stream_key"].astype(str).tolist() == want["stream_key"].astype(str).tolist()
    stored = [v.encode() if isinstance(v, str) else v for v in want["payload"]]
    assert plain["payload"].tolist() == stored
    for pairs, value in zip(plain["headers"], want["headers"], strict=True):
        assert {k: v["text"] if v["text"] is not None else v["bytes"] for k, v in pairs} == value
    assert any(isinstance(v, bytes) for h in want["headers"] for v in h.values())  # rs2 bytes values


@pytest.mark.parametrize("mode", ["json", "objects"])
def test_json_mode_columns_are_typed_and_text_for_objects(tmp_path, mode):
    path = tmp_path / "j.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=T0) as w:
        for i in range(50):
            w.write(
                "j",
                json.dumps({"id": i, "tags": ["a", i], "ok": i % 2 == 0, "v": i / 2}).encode(),
                seq=i + 1,
                timestamp_ms=T0 + i,
            )
        w.write("j", b"\xff not utf-8", seq=51, timestamp_ms=T0 + 51)
        w.write("j", b"plain text", seq=52, timestamp_ms=T0 + 52)
    out = tmp_path / "j.parquet"
    to_parquet(path, out, payload=mode, partition_size=1024)
    schema = pq.read_schema(out)
    assert schema.field("payload.id").type == pa.int64()  # ints and missing values: Int64, as read_stream
    assert schema.field("payload.ok").type == pa.bool_()  # bools and missing values: boolean
    plain = pq.read_table(out).to_pandas()
    record = {"id": 0, "tags": ["a", 0], "ok": True, "v": 0.0}
    # json: the text as stored; objects: the parsed value's JSON text
    text = json.dumps(record, separators=(",", ":") if mode == "objects" else None)
    assert plain["payload"].iloc[0] == text.encode()
    assert plain["payload.tags"].iloc[3] == '["a",3]'
    assert plain["payload"].iloc[50] == b"\xff not utf-8"  # bytes as they are, in either mode
    got = read_parquet(out)
    pd.testing.assert_frame_equal(got, read_stream(path, payload=mode))
    assert str(got["payload.id"].dtype) == "Int64" and str(got["payload.ok"].dtype) == "boolean"


def test_pipe_frame_round_trip(tmp_path):
    frame = read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hello", "no header line", "[jobs] second"])
    out = tmp_path / "pipe.parquet"
    to_parquet(frame, out)
    pd.testing.assert_frame_equal(read_parquet(out), frame)


def test_dask_frame_export(tmp_path, scale_file):
    dd = pytest.importorskip("nbkit.dask")
    out = tmp_path / "dask.parquet"
    ddf = dd.read_stream(scale_file, blocksize="4KiB")
    assert to_parquet(ddf, out) == 400
    pd.testing.assert_frame_equal(read_parquet(out), read_stream(scale_file))


def test_frame_options_are_refused(tmp_path, scale_file):
    with pytest.raises(ValueError, match="apply to a stream file"):
        to_parquet(read_stream(scale_file), tmp_path / "x.parquet", keys="a")
    with pytest.raises(ValueError, match="lacks"):
        frame_to_table(pd.DataFrame({"a": [1]}))


def test_cli_export(tmp_path, scale_file, capsys):
    out = tmp_path / "cli.parquet"
    assert main(["export", str(scale_file), "-o", str(out), "--key", "alpha", "--key", "beta"]) == 0
    err = capsys.readouterr().err
    want = read_stream(scale_file, keys=["alpha", "beta"])
    assert f"wrote {len(want)} messages to {out}" in err
    pd.testing.assert_frame_equal(read_parquet(out), want)
    assert main(["export", str(scale_file), "-o", str(tmp_path / "j.parquet"), "--payload", "json"]) == 0
    pd.testing.assert_frame_equal(read_parquet(tmp_path / "j.parquet"), read_stream(scale_file, payload="json"))


def test_cli_export_errors_are_one_line(tmp_path, capsys):
    assert main(["export", str(tmp_path / "missing.ss"), "-o", str(tmp_path / "o.parquet")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file" in err[0]
    assert main(["export", str(tmp_path / "missing.ss")]) == 2  # -o is required


def test_read_parquet_refuses_foreign_files(tmp_path):
    out = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(out)
    from nbkit.errors import NbkitError

    with pytest.raises(NbkitError, match="not written by nbkit.to_parquet"):
        read_parquet(out)


DATA = __import__("pathlib").Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("mode", ["auto", "json", "objects"])
def test_layout_1_files_still_read(mode):
    """Files written before layout 2 (payload_bytes/headers_bytes columns) read to today's read_stream frame."""
    old = DATA / f"sample-1-layout1-{mode}.parquet"
    assert json.loads(pq.read_metadata(old).metadata[b"nbkit"])["format"] == 1
    want = read_stream(DATA / "sample-1.ss", payload=mode)
    pd.testing.assert_frame_equal(read_parquet(old), want)
    cut = read_parquet(old, columns=["seq", "payload"], keys="event")
    pd.testing.assert_frame_equal(cut, _cut(want, ["seq", "payload"], ["event"]))


def _cut(frame: pd.DataFrame, columns: list[str] | None, keys: list[str] | None) -> pd.DataFrame:
    """The full read filtered afterwards: rows of ``keys`` (categories left: those kept), ``columns``."""
    if keys is not None:
        frame = frame[frame["stream_key"].isin(keys).to_numpy()].reset_index(drop=True)
        frame["stream_key"] = frame["stream_key"].cat.remove_unused_categories()
    return frame if columns is None else frame[columns]


@pytest.mark.parametrize("mode", ["auto", "json", "objects"])
def test_columns_and_keys_read_only_what_they_name(tmp_path, scale_file, mode):
    out = tmp_path / "cut.parquet"
    to_parquet(scale_file, out, payload=mode, partition_size=4096)
    full = read_parquet(out)
    for columns, keys in (
        (["seq", "payload"], None),
        (None, ["beta"]),
        (["stream_key", "headers", "offset"], ["alpha", "c.long-key_name"]),
        (["timestamp"], "alpha"),
    ):
        want = _cut(full, columns, [keys] if isinstance(keys, str) else keys)
        pd.testing.assert_frame_equal(read_parquet(out, columns=columns, keys=keys), want)
    assert read_parquet(out, keys=["beta"]).equals(read_stream(scale_file, keys=["beta"], payload=mode))
    with pytest.raises(ValueError, match="no column 'nope'"):
        read_parquet(out, columns=["seq", "nope"])


def test_mixed_key_frame_keeps_integer_and_boolean_fields(tmp_path):
    """Records that lack a field: Int64 / boolean in the frame and after a Parquet round trip (file and frame)."""
    path = tmp_path / "mixed.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=T0) as w:
        for i in range(40):
            record = {"order_id": i, "paid": i % 3 == 0} if i % 4 else {"note": f"n{i}"}
            w.write("orders" if i % 4 else "notes", json.dumps(record).encode(), seq=i + 1, timestamp_ms=T0 + i)
    want = read_stream(path, payload="json")
    assert str(want["payload.order_id"].dtype) == "Int64" and str(want["payload.paid"].dtype) == "boolean"
    assert want["payload.order_id"].tolist()[:3] == [pd.NA, 1, 2]
    for source in (path, want):
        out = tmp_path / "mixed.parquet"
        to_parquet(source, out, **({"payload": "json", "partition_size": 1024} if source is path else {}))
        got = read_parquet(out)
        pd.testing.assert_frame_equal(got, want)
        assert list(got.dtypes) == list(want.dtypes)
    # the rows of one key lack no field: int64 / bool there, in read_stream and in read_parquet
    orders = read_stream(path, payload="json", keys="orders")
    assert str(orders["payload.order_id"].dtype) == "int64"
    pd.testing.assert_frame_equal(read_parquet(out, keys="orders")[orders.columns[:11]], orders[orders.columns[:11]])


def test_frame_with_edited_dtypes_round_trips_exactly(tmp_path, scale_file):
    """A frame's dtypes are recorded as they are (a field made Float64, the payload made object)."""
    frame = read_stream(scale_file, payload="json")
    fields = [c for c in frame.columns if str(frame[c].dtype) == "Int64" and c.startswith("payload.")]
    frame[fields[0]] = frame[fields[0]].astype("Float64")
    frame["payload"] = frame["payload"].astype(object)
    out = tmp_path / "edited.parquet"
    to_parquet(frame, out)
    pd.testing.assert_frame_equal(read_parquet(out), frame)
