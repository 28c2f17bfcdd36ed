"""FileObjectSource: a binary file object as a reader's bytes, seekable or read front to back in a bounded buffer."""

from __future__ import annotations

import io

import pytest
from stream_files import Pipe

import nbkit
from nbkit.transport.file_object_source import FileObjectSource, NotSeekableError
from nbkit.transport.file_reader import StreamReader


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "s.ss"
    with nbkit.StreamWriter(str(path), beacon_interval=1024) as writer:
        for n in range(3000):
            writer.write("orders" if n % 2 else "audit", b'{"n": %d}' % n)
    return path.read_bytes()


def test_seekable_object_reads_as_the_file(tmp_path, data):
    path = tmp_path / "s.ss"
    want = [(m.stream_key, m.seq, m.offset, m.payload) for m in StreamReader(path)]
    source = FileObjectSource(io.BytesIO(data))
    assert source.seekable and source.size() == len(data) and source.pread(10, len(data) - 4) == data[-4:]
    got = [(m.stream_key, m.seq, m.offset, m.payload) for m in StreamReader(source)]
    assert got == want


def test_non_seekable_object_is_read_once_in_a_bounded_buffer(tmp_path, data):
    want = [(m.stream_key, m.seq, m.offset) for m in StreamReader(tmp_path / "s.ss")]
    source = FileObjectSource(Pipe(data), block_size=4096)
    assert not source.seekable
    got = []
    kept = 0
    with StreamReader(source) as reader:
        for m in reader:
            got.append((m.stream_key, m.seq, m.offset))
            kept = max(kept, len(source._buf))
        assert reader.end.reason == "end"
    assert got == want
    assert kept <= 3 * 4096 < len(data)  # a few blocks, never the whole stream
    assert source.size() == len(data)  # known once the end was reached


def test_non_seekable_object_refuses_to_go_back(data):
    source = FileObjectSource(Pipe(data), block_size=1024)
    source.pread(100, 20_000)
    with pytest.raises(NotSeekableError, match="went back to byte 0"):
        source.pread(10, 0)
    with pytest.raises(NotSeekableError, match="end= needs a seekable"):
        source.require_seekable("end=")


def test_text_objects_are_refused_with_the_fix():
    with pytest.raises(TypeError, match="'rb'"):
        FileObjectSource(io.StringIO("x"))
