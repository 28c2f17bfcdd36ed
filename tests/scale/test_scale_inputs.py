"""nbkit.dask.read_stream takes Dask's blocksize=, globs and lists of files, and include_path_column=."""

from __future__ import annotations

import io

import pandas as pd
import pytest

import nbkit

pytest.importorskip("dask.dataframe")
import nbkit.dask  # noqa: E402


def _write(path, n, key):
    with nbkit.StreamWriter(str(path), beacon_interval=1024) as writer:
        for i in range(n):
            writer.write(key, b'{"id": %d}' % i)
    return path


def test_blocksize_is_the_partition_size(scale_file, same_rows):
    by_blocksize = nbkit.dask.read_stream(scale_file, blocksize="4KiB")
    with pytest.warns(DeprecationWarning, match=r"partition_size= is deprecated: pass blocksize='4KiB'") as seen:
        by_old_name = nbkit.dask.read_stream(scale_file, partition_size="4KiB")
    assert seen[0].filename == __file__  # the warning points at the caller's line
    assert by_blocksize.npartitions == by_old_name.npartitions > 1
    with pytest.warns(DeprecationWarning, match="partition_size"):
        old_plan = nbkit.dask.plan(scale_file, partition_size="4KiB")
    assert nbkit.dask.plan(scale_file, blocksize="4KiB") == old_plan
    same_rows(by_blocksize.compute(scheduler="sync"), nbkit.read_stream(scale_file))
    same_rows(by_old_name.compute(scheduler="sync"), nbkit.read_stream(scale_file))
    with pytest.raises(ValueError, match="pass blocksize only"):
        nbkit.dask.read_stream(scale_file, blocksize="4KiB", partition_size="4KiB")
    with pytest.raises(ValueError, match="blocksize"):
        nbkit.dask.read_stream(scale_file, blocksize=0)


def test_glob_and_list_read_every_file_in_order(tmp_path):
    a = _write(tmp_path / "a.ss", 400, "orders")
    b = _write(tmp_path / "b.ss", 300, "audit")
    want = nbkit.read_stream([a, b], payload="json", include_path_column=True)
    for source in (str(tmp_path / "*.ss"), [a, b]):
        ddf = nbkit.dask.read_stream(source, blocksize=2048, payload="json", include_path_column=True)
        assert not ddf.known_divisions  # offsets restart in each file
        got = ddf.compute(scheduler="sync").reset_index(drop=True)
        assert got["path"].tolist() == want["path"].tolist()
        for name in ("seq", "offset", "payload.id"):
            assert got[name].tolist() == want[name].tolist()
        assert set(got["stream_key"].astype(str)) == {"orders", "audit"}
    one = nbkit.dask.read_stream(a, blocksize=2048)
    assert one.known_divisions


def test_file_objects_are_refused_with_the_reason(tmp_path):
    a = _write(tmp_path / "a.ss", 10, "orders")
    with pytest.raises(TypeError, match="cannot travel to the workers"):
        nbkit.dask.read_stream(io.BytesIO(a.read_bytes()))


def test_empty_glob_names_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file matches"):
        nbkit.dask.read_stream(str(tmp_path / "none-*.ss"))


def test_path_column_has_known_categories(tmp_path):
    a = _write(tmp_path / "a.ss", 50, "orders")
    ddf = nbkit.dask.read_stream([a], include_path_column="source")
    assert list(ddf["source"].cat.categories) == [str(a)]
    assert isinstance(ddf.compute(scheduler="sync")["source"].dtype, pd.CategoricalDtype)
