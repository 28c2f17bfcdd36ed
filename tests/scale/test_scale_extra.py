"""The scale extra is optional: without Dask or pyarrow, a clear ImportError says how to install it.

The missing modules are simulated (``sys.modules[name] = None`` makes ``import name`` fail), so these
tests run whether or not the extra is installed.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from nbkit.cli import main


def _forget(monkeypatch, *names: str) -> None:
    for name in names:
        monkeypatch.delitem(sys.modules, name, raising=False)


def _block(monkeypatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def test_nbkit_dask_without_dask_names_the_extra(monkeypatch):
    _forget(monkeypatch, "nbkit.dask", "nbkit.scale.dask_reader")
    _block(monkeypatch, "dask", "dask.dataframe")
    with pytest.raises(ImportError, match=r"nbkit\.dask needs 'dask'") as info:
        importlib.import_module("nbkit.dask")
    assert "pip install -e '.[scale]'" in str(info.value)
    assert "pip install 'nbkit-ruststream[scale]'" in str(info.value)


def test_partitions_need_neither_dask_nor_pyarrow(monkeypatch):
    _forget(monkeypatch, "nbkit.scale", "nbkit.scale.partitions", "nbkit.scale.parquet")
    _block(monkeypatch, "dask", "dask.dataframe", "pyarrow", "pyarrow.parquet")
    importlib.import_module("nbkit.scale.partitions")
    parquet = importlib.import_module("nbkit.scale.parquet")  # importable; calls say what is missing
    assert callable(parquet.to_parquet)


def test_to_parquet_without_pyarrow_names_the_extra(monkeypatch, tmp_path, scale_file):
    from nbkit.scale.parquet import read_parquet, to_parquet

    _block(monkeypatch, "pyarrow", "pyarrow.parquet")
    with pytest.raises(ImportError, match=r"nbkit\.to_parquet needs 'pyarrow'.*nbkit-ruststream\[scale\]"):
        to_parquet(scale_file, tmp_path / "o.parquet")
    with pytest.raises(ImportError, match=r"pip install -e '\.\[scale\]'"):
        read_parquet(tmp_path / "o.parquet")


def test_cli_export_without_pyarrow_is_one_line(monkeypatch, tmp_path, scale_file, capsys):
    _block(monkeypatch, "pyarrow", "pyarrow.parquet")
    assert main(["export", str(scale_file), "-o", str(tmp_path / "o.parquet")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'nbkit-ruststream[scale]'" in err[0]
    assert not (tmp_path / "o.parquet").exists()
