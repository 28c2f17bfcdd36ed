"""The Dask reader on a damaged file: ``on_bad_frames`` partitions together return what one sequential
salvage read returns, also when the damage hits a beacon that starts a partition."""

from __future__ import annotations

import pytest

dd = pytest.importorskip("dask.dataframe")

import nbkit.dask  # noqa: E402
from nbkit.errors import ChecksumError, FormatError  # noqa: E402
from nbkit.tabular.frames import read_stream  # noqa: E402
from nbkit.transport.file_reader import StreamReader  # noqa: E402


@pytest.fixture()
def damaged_file(tmp_path, scale_file):
    """``scale_file`` with a payload byte flipped, a zeroed block and a zeroed beacon at 8 KiB."""
    with StreamReader(scale_file) as r:
        msgs = list(r)
    raw = bytearray(scale_file.read_bytes())
    raw[msgs[40].end - 4] ^= 0xFF
    raw[30_000:30_300] = bytes(300)
    raw[8192:8199] = b"\xff" * 7
    path = tmp_path / "damaged.ss"
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("partition_size", ["1KiB", "8KiB", "64MiB"])
def test_partitions_equal_the_sequential_salvage_read(damaged_file, partition_size, same_rows):
    want = read_stream(damaged_file, on_bad_frames="skip")
    assert len(want.attrs["damaged"]) >= 2
    got = nbkit.dask.read_stream(damaged_file, blocksize=partition_size, on_bad_frames="skip").compute()
    same_rows(got, want)


def test_default_raises(damaged_file):
    with pytest.raises((ChecksumError, FormatError)):
        nbkit.dask.read_stream(damaged_file, blocksize="1KiB").compute()
