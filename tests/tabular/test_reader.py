"""The reader object and its conventions: chunks, nrows, columns, globs, lists and file objects each give the
matching slice of the whole read; bad arguments raise errors that name the problem."""

from __future__ import annotations

import io
import tracemalloc
import warnings

import pandas as pd
import pytest
from stream_files import Pipe

import nbkit
from nbkit.errors import InvalidArgumentError, MissingFileError
from nbkit.tabular import reader as reader_module
from nbkit.tabular.frames import read_arrow, read_stream
from nbkit.tabular.reader import FrameReader
from nbkit.transport.file_object_source import NotSeekableError

T0 = 1_700_000_000_000


def _write(path, n, *, keys=("orders", "audit"), field="id", start=0):
    with nbkit.StreamWriter(str(path), beacon_interval=1024) as writer:
        for i in range(start, start + n):
            key = keys[i % len(keys)]
            writer.write(key, b'{"%s": %d, "item": "thing-%d"}' % (field.encode(), i, i), timestamp_ms=T0 + i)
    return path


@pytest.fixture
def stream(tmp_path):
    return _write(tmp_path / "orders.ss", 700)


def _same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal rows; categories compared as sets (a chunk knows only its own keys)."""
    got, want = got.reset_index(drop=True), want.reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    for name in got.columns:
        a, b = got[name], want[name]
        if isinstance(b.dtype, pd.CategoricalDtype):
            a, b = a.astype(str), b.astype(str)
        assert a.tolist() == b.tolist(), name


@pytest.mark.parametrize("chunksize", [1, 7, 100, 699, 700, 5000])
@pytest.mark.parametrize("payload", ["json", "bytes", "auto"])
def test_chunks_are_the_whole_read_in_order(stream, chunksize, payload):
    whole = read_stream(stream, payload=payload)
    with read_stream(stream, payload=payload, chunksize=chunksize) as chunks:
        assert isinstance(chunks, FrameReader)
        parts = list(chunks)
    assert [len(p) for p in parts[:-1]] == [chunksize] * (len(parts) - 1)
    assert 0 < len(parts[-1]) <= chunksize
    _same(pd.concat(parts, ignore_index=True), whole)


def test_chunks_then_read_gives_the_rest_and_close_stops(stream):
    whole = read_stream(stream)
    reader = read_stream(stream, chunksize=50)
    first = next(reader)
    rest = reader.read()
    _same(pd.concat([first, rest], ignore_index=True), whole)
    assert list(reader) == []
    reader = read_stream(stream, chunksize=50)
    next(reader)
    reader.close()
    with pytest.raises(StopIteration):
        next(reader)


def test_chunked_read_holds_a_few_chunks_not_the_file(tmp_path):
    path = _write(tmp_path / "big.ss", 40_000)
    chunk_rows = 1000
    tracemalloc.start()
    try:
        with read_stream(path, payload="bytes", chunksize=chunk_rows) as chunks:
            for chunk in chunks:
                del chunk
        _, chunked_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = read_stream(path, payload="bytes")
        _, whole_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(whole) == 40_000
    assert chunked_peak * 4 < whole_peak  # 40 chunks in the file; the read holds a few at a time


@pytest.mark.parametrize("nrows", [0, 1, 5, 333, 700, 10_000])
def test_nrows_is_the_head_of_the_whole_read(stream, nrows):
    whole = read_stream(stream, payload="json")
    got = read_stream(stream, payload="json", nrows=nrows)
    assert len(got) == min(nrows, 700)
    if nrows:
        _same(got, whole.head(nrows))


def test_nrows_stops_reading(tmp_path, monkeypatch):
    path = _write(tmp_path / "big.ss", 20_000)
    sizes = []
    real = reader_module.read_rows

    def counting(reader, sel, **kw):
        for rows in real(reader, sel, **kw):
            sizes.append(reader.pos)
            yield rows

    monkeypatch.setattr(reader_module, "read_rows", counting)
    assert len(read_stream(path, nrows=10)) == 10
    assert max(sizes) < path.stat().st_size // 4


def test_nrows_with_keys_and_window(stream):
    whole = read_stream(stream, keys="audit", start=T0 + 100, payload="json")
    got = read_stream(stream, keys="audit", start=T0 + 100, payload="json", nrows=20)
    _same(got, whole.head(20))
    assert "read_end" not in got.attrs  # the read stopped at nrows, not at an end of the file or window
    assert whole.attrs["read_end"].reason in ("end", "eos")


def test_columns_keep_message_columns_and_fields_in_order(stream):
    whole = read_stream(stream, payload="json")
    got = read_stream(stream, payload="json", columns=["payload.item", "seq", "stream_key"])
    assert list(got.columns) == ["payload.item", "seq", "stream_key"]
    _same(got, whole[["payload.item", "seq", "stream_key"]])
    # payload="auto" with a field asked for reads the fields (as "json")
    _same(read_stream(stream, columns=["payload.id"]), whole[["payload.id"]])
    # no payload column asked: same values for the others
    _same(read_stream(stream, columns=["offset", "size"]), whole[["offset", "size"]])
    table = read_arrow(stream, payload="json", columns=["seq", "payload.id"], nrows=3)
    assert table.column_names == ["seq", "payload.id"]
    assert table.column("payload.id").to_pylist() == whole["payload.id"].head(3).tolist()


def test_columns_in_chunks(stream):
    whole = read_stream(stream, payload="json", columns=["seq", "payload.id"])
    parts = list(read_stream(stream, payload="json", columns=["seq", "payload.id"], chunksize=64))
    _same(pd.concat(parts, ignore_index=True), whole)


def test_glob_and_list_concatenate_in_order(tmp_path):
    a = _write(tmp_path / "a.ss", 300, keys=("orders",))
    b = _write(tmp_path / "b.ss", 200, keys=("audit", "refunds"), field="amount", start=300)
    fa, fb = read_stream(a, payload="json"), read_stream(b, payload="json")
    for source in (str(tmp_path / "*.ss"), [a, b], [str(a), b]):
        got = read_stream(source, payload="json", include_path_column=True)
        assert got["path"].tolist() == [str(a)] * 300 + [str(b)] * 200
        assert list(got["path"].cat.categories) == [str(a), str(b)]
        assert sorted(got["stream_key"].cat.categories) == ["audit", "orders", "refunds"]
        _same(got.head(300)[["seq", "offset", "payload.id"]], fa[["seq", "offset", "payload.id"]])
        _same(got.tail(200)[["seq", "offset", "payload.amount"]], fb[["seq", "offset", "payload.amount"]])
        assert got["payload.amount"].head(300).isna().all()
        assert list(got.index) == list(range(500))
    named = read_stream([b, a], include_path_column="source", columns=["seq", "source"])
    assert named["source"].tolist() == [str(b)] * 200 + [str(a)] * 300
    table = read_arrow(str(tmp_path / "?.ss"), payload="json", include_path_column=True)
    assert table.num_rows == 500 and table.column_names[-1] == "path"
    chunks = list(read_stream([a, b], chunksize=128, include_path_column=True))
    _same(pd.concat(chunks, ignore_index=True), read_stream([a, b], include_path_column=True))
    assert len(read_stream([a, b], nrows=350)) == 350


def test_file_objects_seekable_and_not(stream):
    whole = read_stream(stream, payload="json")
    data = stream.read_bytes()
    pd.testing.assert_frame_equal(read_stream(io.BytesIO(data), payload="json"), whole)
    with open(stream, "rb") as f:
        pd.testing.assert_frame_equal(read_stream(f, payload="json"), whole)
        assert not f.closed  # the caller's object stays open
    # byte 0 of the stream is where the object stands
    shifted = io.BytesIO(b"junk" + data)
    shifted.seek(4)
    _same(read_stream(shifted, payload="json", keys="audit"), read_stream(stream, payload="json", keys="audit"))
    pd.testing.assert_frame_equal(read_stream(io.BufferedReader(Pipe(data)), payload="json"), whole)
    parts = list(read_stream(io.BufferedReader(Pipe(data)), payload="json", chunksize=33))
    _same(pd.concat(parts, ignore_index=True), whole)
    _same(read_stream(Pipe(data), nrows=12), read_stream(stream).head(12))  # a raw object, short reads
    table = read_arrow(io.BytesIO(data), payload="json")
    assert table.num_rows == 700


def test_non_seekable_object_refuses_what_needs_a_seek(stream):
    data = stream.read_bytes()
    for option in ({"start": T0 + 5}, {"end": T0 + 5}, {"start": nbkit.FilePosition.sequence(3)}):
        with pytest.raises(NotSeekableError, match="needs a seekable file object"):
            read_stream(io.BufferedReader(Pipe(data)), **option)
    with pytest.raises(TypeError, match="binary"):
        read_stream(io.StringIO("text"))
    with pytest.raises(TypeError, match="io.BytesIO"):
        read_stream(data)


def test_a_truncated_tail_warns_at_the_callers_line(tmp_path, stream):
    cut = tmp_path / "cut.ss"
    cut.write_bytes(stream.read_bytes()[:-5])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_stream(cut)
        list(read_stream(cut, chunksize=100))
    assert [w.filename for w in caught] == [__file__, __file__]


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"nrows": -1}, InvalidArgumentError, "nrows"),
        ({"nrows": 1.5}, InvalidArgumentError, "nrows"),
        ({"chunksize": 0}, InvalidArgumentError, "chunksize"),
        ({"chunksize": True}, InvalidArgumentError, "chunksize"),
        ({"columns": "seq"}, InvalidArgumentError, r"columns=\['seq'\]"),
        ({"columns": ["sequence"]}, InvalidArgumentError, "no such column: 'sequence'"),
        ({"columns": ["seq", "seq"]}, InvalidArgumentError, "more than once"),
        ({"columns": ["payload.nope"], "payload": "json"}, InvalidArgumentError, "'payload.nope'"),
        ({"columns": ["payload.id"], "payload": "bytes"}, InvalidArgumentError, "payload='json'"),
        ({"include_path_column": "seq"}, InvalidArgumentError, "message column 'seq'"),
        ({"include_path_column": 3}, InvalidArgumentError, "include_path_column"),
    ],
)
def test_bad_arguments_name_the_problem(stream, options, error, words):
    with pytest.raises(error, match=words):
        read_stream(stream, **options)


def test_bad_inputs_name_the_problem(tmp_path):
    with pytest.raises(MissingFileError, match=r"no file matches"):
        read_stream(str(tmp_path / "*.ss"))
    with pytest.raises(InvalidArgumentError, match="empty list"):
        read_stream([])
    with pytest.raises(TypeError, match="not int"):
        read_stream(3)
