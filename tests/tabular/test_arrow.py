"""nbkit.read_arrow and read_stream(dtype_backend="pyarrow"): read_stream's values, as Arrow types."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

pa = pytest.importorskip("pyarrow")

import nbkit  # noqa: E402
from nbkit import FileBroker, StreamWriter  # noqa: E402
from nbkit.errors import NbkitError  # noqa: E402

KEYS = ["orders", "audit", "orders.dead"]


@pytest.fixture
def mixed_file(tmp_path):
    """Three keys, JSON payloads with an int, a str, a float and a bool field, envelope headers on some
    messages (retry copies), beacons every KiB."""
    path = tmp_path / "mixed.ss"
    broker = FileBroker(path, beacon_interval=1024)
    for n in range(300):
        key = KEYS[n % 3]
        payload = json.dumps({"id": n, "item": f"item-{n % 7}", "price": n / 4, "paid": n % 2 == 0})
        headers = {"x-ruststream-retry-count": str(n % 4)} if n % 5 == 0 else None
        broker.publish(key, payload, headers=headers)
    broker.shutdown()
    return path


def _as_python(values: list) -> list:
    """Arrow's map columns come back as lists of pairs: compare them as dicts."""
    return [dict(v) if isinstance(v, list) else v for v in values]


@pytest.mark.parametrize("payload", ["auto", "bytes", "text", "json"])
def test_the_table_holds_read_stream_values_column_by_column(mixed_file, payload):
    table = nbkit.read_arrow(mixed_file, payload=payload)
    frame = nbkit.read_stream(mixed_file, payload=payload)
    assert table.column_names == list(frame.columns)
    assert table.num_rows == len(frame) == 300
    for name in table.column_names:
        got = _as_python(table.column(name).to_pylist())
        want = [None if v is pd.NA else v for v in frame[name].astype(object).tolist()]
        assert got == want, name


def test_arrow_types_are_the_documented_ones(mixed_file):
    schema = nbkit.read_arrow(mixed_file, payload="json").schema
    assert pa.types.is_dictionary(schema.field("stream_key").type)
    assert schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert pa.types.is_map(schema.field("headers").type)
    assert schema.field("payload.id").type == pa.int64()
    assert schema.field("payload.price").type == pa.float64()
    assert schema.field("payload.paid").type == pa.bool_()
    assert pa.types.is_large_string(schema.field("payload.item").type)
    assert pa.types.is_large_binary(nbkit.read_arrow(mixed_file, payload="bytes").schema.field("payload").type)


def test_a_rust_written_file_reads_the_same(sample_path):
    table = nbkit.read_arrow(sample_path, include_internal=True)
    frame = nbkit.read_stream(sample_path, include_internal=True)
    assert table.column("seq").to_pylist() == frame["seq"].tolist()
    assert table.column("stream_key").to_pylist() == frame["stream_key"].astype(str).tolist()
    assert table.column("payload").to_pylist() == frame["payload"].tolist()


def test_keys_and_windows_select_the_same_rows(mixed_file):
    table = nbkit.read_arrow(mixed_file, keys=["audit"], start="2000-01-01", payload="json")
    frame = nbkit.read_stream(mixed_file, keys=["audit"], start="2000-01-01", payload="json")
    assert table.column("offset").to_pylist() == frame["offset"].tolist()
    assert set(table.column("stream_key").to_pylist()) == {"audit"}


def test_how_the_read_ended_and_the_damage_travel_in_the_schema_metadata(mixed_file, tmp_path):
    damaged = tmp_path / "damaged.ss"
    shutil.copy(mixed_file, damaged)
    data = bytearray(damaged.read_bytes())
    data[3000] ^= 0xFF  # inside a payload: the frame's checksum fails
    damaged.write_bytes(bytes(data))
    with pytest.warns(UserWarning):
        table = nbkit.read_arrow(damaged, on_bad_frames="warn")
    meta = table.schema.metadata
    assert b"nbkit.read_end" in meta
    regions = json.loads(meta[b"nbkit.damaged"])
    assert regions and regions[0]["start"] <= 3000 < regions[0]["end"]
    with pytest.raises(NbkitError):
        nbkit.read_arrow(damaged)


def test_objects_has_no_arrow_type(mixed_file):
    with pytest.raises((ValueError, NbkitError), match="objects"):
        nbkit.read_arrow(mixed_file, payload="objects")


def test_polars_and_duckdb_take_the_table(mixed_file):
    pl = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    table = nbkit.read_arrow(mixed_file, payload="json")
    frame = nbkit.read_stream(mixed_file, payload="json")
    by_key = pl.from_arrow(table).group_by("stream_key").agg(pl.col("payload.price").sum()).sort("stream_key")
    want = frame.groupby("stream_key", observed=True)["payload.price"].sum().sort_index()
    assert dict(zip(by_key["stream_key"].to_list(), by_key["payload.price"].to_list(), strict=True)) == want.to_dict()
    rows = duckdb.sql('SELECT count(*) FROM "table" WHERE "payload.paid" AND stream_key = \'orders\'').fetchall()
    assert rows[0][0] == int((frame["payload.paid"] & (frame["stream_key"] == "orders")).sum())


def test_dtype_backend_pyarrow_gives_arrow_dtypes_with_the_same_values(mixed_file):
    plain = nbkit.read_stream(mixed_file, payload="json")
    arrow = nbkit.read_stream(mixed_file, payload="json", dtype_backend="pyarrow")
    assert list(arrow.columns) == list(plain.columns)
    for name in ("seq", "timestamp", "offset", "attempt", "payload.id", "payload.item", "payload.price"):
        assert isinstance(arrow[name].dtype, pd.ArrowDtype), name
        assert arrow[name].tolist() == plain[name].tolist(), name
    assert (arrow["seq"].diff().dropna() == plain["seq"].diff().dropna()).all()


def test_dtype_backend_is_checked(mixed_file):
    with pytest.raises(ValueError, match="dtype_backend must be one of"):
        nbkit.read_stream(mixed_file, dtype_backend="arrow")


def test_a_stream_writer_file_without_envelopes_has_empty_header_maps(tmp_path):
    path = tmp_path / "plain.ss"
    with StreamWriter(path) as writer:
        writer.write("k", b"x")
    table = nbkit.read_arrow(path)
    assert table.column("headers").to_pylist() == [[]]
