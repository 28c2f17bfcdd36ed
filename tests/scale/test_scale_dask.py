"""nbkit.dask.read_stream: partitions of a Dask DataFrame hold exactly nbkit.read_stream's rows."""

from __future__ import annotations

import os
import warnings

import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import nbkit.dask  # noqa: E402
from nbkit.errors import NbkitError  # noqa: E402
from nbkit.tabular.frames import read_stream  # noqa: E402
from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.transport.positions import FilePosition  # noqa: E402

T0 = 1_700_000_000_000


@pytest.mark.parametrize("partition_size", ["1KiB", 3000, "16KiB", "64MiB"])
def test_default_scheduler_equals_sequential_read(scale_file, partition_size, same_rows):
    ddf = nbkit.dask.read_stream(scale_file, blocksize=partition_size)
    want = read_stream(scale_file)
    got = ddf.compute()
    same_rows(got, want)
    assert (got.index == got["offset"].to_numpy()).all()
    assert ddf.known_divisions
    assert list(ddf.columns) == list(want.columns)
    if partition_size == "64MiB":
        assert ddf.npartitions == 1


@pytest.mark.parametrize("payload", ["auto", "bytes"])
def test_meta_matches_every_partition(scale_file, payload):
    ddf = nbkit.dask.read_stream(scale_file, blocksize="4KiB", payload=payload)
    meta = ddf._meta
    assert not ddf["stream_key"].cat.known  # unknown categories (Dask's convention)
    assert list(ddf["transport"].cat.categories) == ["file", "pipe"]
    assert str(meta.index.dtype) == "int64"
    for part in ddf.to_delayed():
        frame = part.compute()
        assert frame.dtypes.astype(str).to_dict() == meta.dtypes.astype(str).to_dict()
    want = read_stream(scale_file, payload=payload)
    assert meta.dtypes.astype(str).to_dict() == want.dtypes.astype(str).to_dict()


def test_object_columns_are_not_converted_to_strings(scale_file):
    with dask.config.set({"dataframe.convert-string": True}):
        ddf = nbkit.dask.read_stream(scale_file, blocksize="8KiB")
        got = ddf.compute()
    assert ddf["payload"].dtype == object and got["payload"].dtype == object
    assert any(isinstance(v, bytes) for v in got["payload"])


def test_divisions_prune_offset_lookups(scale_file):
    ddf = nbkit.dask.read_stream(scale_file, blocksize="4KiB")
    want = read_stream(scale_file)
    lo, hi = int(want["offset"].iloc[100]), int(want["offset"].iloc[150])
    part = ddf.loc[lo:hi]
    assert part.npartitions < ddf.npartitions
    got = part.compute()
    assert got["offset"].tolist() == want["offset"].iloc[100:151].tolist()


def test_options_match_read_stream(scale_file, same_rows):
    for options in (
        dict(keys="beta"),
        dict(start=T0 + 40, end=T0 + 100),
        dict(start=FilePosition.sequence(20), keys="alpha"),
        dict(payload="bytes"),
        dict(payload="text"),
    ):
        got = nbkit.dask.read_stream(scale_file, blocksize="4KiB", **options).compute()
        same_rows(got, read_stream(scale_file, **options))


def test_reductions_run_per_partition(scale_file):
    ddf = nbkit.dask.read_stream(scale_file, blocksize="4KiB")
    want = read_stream(scale_file)
    got = ddf.groupby("stream_key", observed=True)["size"].sum().compute().sort_index()
    exp = want.groupby("stream_key", observed=True)["size"].sum().sort_index()
    assert got.to_dict() == exp.to_dict()


def test_mid_file_eos_ends_the_frame(tmp_path, same_rows):
    path = tmp_path / "eos.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=T0) as w:
        for i in range(50):
            w.write("k", b"m" * (i * 41 % 900), seq=i + 1, timestamp_ms=T0 + i)
        w.write_eos()
        for i in range(80):
            w.write("late", b"z" * 300, seq=i + 1, timestamp_ms=T0 + i)
    ddf = nbkit.dask.read_stream(path, blocksize="1KiB", include_internal=True)
    got = ddf.compute()
    same_rows(got, read_stream(path, include_internal=True))
    assert got["stream_key"].iloc[-1] == "SEA_STREAMER_INTERNAL"
    assert "late" not in set(got["stream_key"].astype(str))


def test_truncated_file_warns_when_planned(tmp_path, scale_file, same_rows):
    path = tmp_path / "cut.ss"
    path.write_bytes(scale_file.read_bytes()[:-5])
    with pytest.warns(UserWarning, match="trailing bytes"):
        ddf = nbkit.dask.read_stream(path, blocksize="4KiB")
    with pytest.warns(UserWarning):
        want = read_stream(path)
    same_rows(ddf.compute(), want)


def test_small_file_is_one_partition(tmp_path, write_ss):
    path = tmp_path / "small.ss"
    write_ss(path, [("k", 0, i + 1, T0 + i, b"hi") for i in range(3)], interval=1 << 20)
    ddf = nbkit.dask.read_stream(path, blocksize=1024)
    assert ddf.npartitions == 1
    pd.testing.assert_frame_equal(ddf.compute().reset_index(drop=True), read_stream(path))


def test_plan_is_inspectable(scale_file):
    plan = nbkit.dask.plan(scale_file, blocksize="4KiB")
    ddf = nbkit.dask.read_stream(scale_file, blocksize="4KiB")
    assert tuple(ddf.divisions) == plan.divisions
    assert len(plan.ranges) == ddf.npartitions


def test_bad_options_fail_early(scale_file):
    with pytest.raises(ValueError, match="payload must be one of"):
        nbkit.dask.read_stream(scale_file, payload="xml")
    with pytest.raises(ValueError, match="blocksize"):
        nbkit.dask.read_stream(scale_file, blocksize=0)
    with pytest.raises(nbkit.UnknownKeyError, match="payment"):
        nbkit.dask.read_stream(scale_file, keys="payment")
    with pytest.raises(NbkitError, match="no such file"):
        nbkit.dask.read_stream(os.path.join(str(scale_file) + ".missing"))


# -- payload="json" --------------------------------------------------------------------------------


def _json_file(path, rows):
    with StreamWriter(path, beacon_interval=1024, created_at_ms=T0) as w:
        for i, text in enumerate(rows):
            w.write("j", text.encode(), seq=i + 1, timestamp_ms=T0 + i)


def test_json_fields_from_the_sample_match_read_stream(tmp_path, same_rows):
    path = tmp_path / "j.ss"
    _json_file(
        path,
        [f'{{"id":{i},"name":"n{i}","ok":{str(i % 2 == 0).lower()},"x":{i / 4}}}' for i in range(300)]
        + ["not json", '"a string"', "[1,2]"],
    )
    ddf = nbkit.dask.read_stream(path, payload="json", blocksize="2KiB")
    want = read_stream(path, payload="json")
    assert list(ddf.columns) == list(want.columns)
    same_rows(ddf.compute(), want)


def _late_row_raises(path: os.PathLike, last: str, match: str) -> None:
    """200 ``{"id": n}`` payloads then ``last``, read with a 1 KiB sample: computing it raises ``match``."""
    _json_file(path, [f'{{"id":{i}}}' for i in range(200)] + [last])
    ddf = nbkit.dask.read_stream(path, payload="json", blocksize="1KiB", sample=1024)
    with pytest.raises(NbkitError, match=match):
        ddf.compute()


def test_json_field_after_the_sample_raises_with_the_fix(tmp_path):
    path = tmp_path / "late-field.ss"
    _late_row_raises(path, '{"id":1,"late":true}', r"'late' first appear.*json_fields=")
    fields = {"id": "int64", "late": object}
    fixed = nbkit.dask.read_stream(path, payload="json", blocksize="1KiB", json_fields=fields)
    got = fixed.compute()
    assert got["payload.late"].iloc[-1] is True and got["payload.late"].iloc[0] is None


def test_json_value_the_dtype_cannot_hold_raises(tmp_path):
    path = tmp_path / "late-null.ss"
    _late_row_raises(path, '{"id":null}', r"'id'.*cannot hold")
    got = nbkit.dask.read_stream(path, payload="json", blocksize="1KiB", json_fields=["id"]).compute()
    assert got["payload.id"].dtype == object and got["payload.id"].iloc[-1] is None


# -- dask.distributed ------------------------------------------------------------------------------


def test_local_cluster_threads(scale_file, same_rows):
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        got = nbkit.dask.read_stream(scale_file, blocksize="4KiB").compute()
    same_rows(got, read_stream(scale_file))


def test_local_cluster_processes(scale_file, same_rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster),
        ):
            ddf = nbkit.dask.read_stream(scale_file, blocksize="4KiB", payload="json")
            got = ddf.compute()
    same_rows(got, read_stream(scale_file, payload="json"))
