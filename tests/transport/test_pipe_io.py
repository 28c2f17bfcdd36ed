"""Pipe I/O: LineSource never blocks and splits reads into lines; LineSink buffers and writes them out."""

from __future__ import annotations

import io
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nbkit.errors import ConfigurationError, LineParseError, StdoutClosedError, Utf8Error
from nbkit.transport.pipe_io import CHUNK_SIZE, MAX_LINE_BYTES, LineSink, LineSource
from nbkit.transport.polling import NEED_MORE


@pytest.fixture
def pipe():
    """(LineSource over a pipe's read end, its write end's descriptor); both ends closed afterwards."""
    r, w = os.pipe()
    reader = os.fdopen(r, "rb")
    ends = [w]
    yield LineSource(reader), ends
    reader.close()
    for fd in ends:
        try:
            os.close(fd)
        except OSError:
            pass


def drain(source: LineSource) -> list[object]:
    """Poll until NEED_MORE or the end; every answer, with the line numbers of the lines."""
    seen: list[object] = []
    while True:
        line = source.poll()
        seen.append(line if line is NEED_MORE or line is None else (line, source.lineno))
        if line is NEED_MORE or line is None:
            return seen


def test_partial_lines_wait_for_their_newline_and_eof_ends_the_last(pipe):
    source, (w,) = pipe
    assert source.poll() is NEED_MORE  # nothing written: never blocks
    os.write(w, b"one\ntw")
    assert drain(source) == [("one", 1), NEED_MORE]
    os.write(w, b"o\n\nthr")  # "two" completed across two reads, then an empty line, then a partial one
    assert drain(source) == [("two", 2), ("", 3), NEED_MORE]
    os.write(w, "é\r".encode())  # a multi-byte character; a "\r" stays part of the line
    assert drain(source) == [NEED_MORE]
    assert source.fileno() is not None
    os.close(w)
    assert drain(source) == [("thré\r", 4), None]
    assert source.poll() is None and source.fileno() is None


def test_a_character_split_between_reads_is_decoded_whole(pipe):
    source, (w,) = pipe
    data = "ü\n".encode()
    os.write(w, data[:1])
    assert source.poll() is NEED_MORE
    os.write(w, data[1:])
    assert source.poll() == "ü"


def test_many_lines_in_one_read_come_out_one_per_poll_in_order(pipe):
    source, (w,) = pipe
    lines = [f"[jobs | {i}] payload {i}" for i in range(3000)]  # more than one read's worth
    os.write(w, ("\n".join(lines) + "\n").encode()[:CHUNK_SIZE])
    got = []
    while (line := source.poll()) is not NEED_MORE:
        got.append(line)
    assert got == lines[: len(got)] and 0 < len(got) < len(lines)


def test_text_that_is_not_utf8_names_its_line_after_the_lines_before_it(pipe):
    source, (w,) = pipe
    os.write(w, b"good\n\xff bad\nnever\n")
    assert source.poll() == "good"
    with pytest.raises(Utf8Error, match="stdin line 2 is not valid UTF-8 \\(byte 0\\)"):
        source.poll()


def test_fed_lines_come_first(pipe):
    source, (w,) = pipe
    os.write(w, b"from the pipe\n")
    source.feed("fed back")
    assert source.queued == 1
    assert drain(source) == [("fed back", 1), ("from the pipe", 2), NEED_MORE]


def test_ready_hands_out_the_lines_read_already_and_leaves_the_rest_to_poll(pipe):
    source, (w,) = pipe
    assert list(source.ready()) == []  # nothing read yet: ready() never reads
    os.write(w, b"one\ntwo\nthree\nfou")
    assert source.poll() == "one" and source.lineno == 1
    ready = source.ready()
    assert next(ready) == "two" and source.lineno == 2  # each line taken as it is handed out
    source.feed("fed back")
    assert list(ready) == ["fed back", "three"] and source.lineno == 4  # fed lines first, as poll() gives them
    assert list(source.ready()) == []  # "fou" is not a line yet
    os.write(w, b"r\n")
    assert drain(source) == [("four", 5), NEED_MORE]


def test_ready_stops_before_a_line_that_is_not_utf8_and_poll_names_it(pipe):
    source, (w,) = pipe
    os.write(w, b"good\n\xff bad\nnever\n")
    assert source.poll() == "good"
    assert list(source.ready()) == [] and source.lineno == 1
    with pytest.raises(Utf8Error, match="stdin line 2 is not valid UTF-8"):
        source.poll()


@pytest.mark.parametrize(
    "given",
    [
        "a\nb\n",
        "a\nb",
        b"a\nb\n",
        ["a\n", b"b"],
        io.StringIO("a\nb\n"),
        io.BytesIO(b"a\nb"),
    ],
    ids=["str", "str-no-final-newline", "bytes", "iterable", "stringio", "bytesio"],
)
def test_other_sources_give_the_same_lines(given):
    source = LineSource(given)
    assert [source.poll(), source.poll(), source.poll()] == ["a", "b", None]
    assert source.lineno == 2 and source.fileno() is None


def test_an_item_that_is_not_text_is_refused():
    with pytest.raises(TypeError, match="stdin lines are str or bytes, not int"):
        LineSource([1]).poll()


def test_a_sink_list_gets_lines_without_newlines():
    lines: list[str] = []
    sink = LineSink(lines)
    sink.write("a\n")
    sink.write("b")
    sink.flush()
    assert lines == ["a", "b"]


def test_a_sink_file_gets_text_or_bytes():
    text, binary = io.StringIO(), io.BytesIO()
    for target in (text, binary):
        sink = LineSink(target)
        sink.write("é\n")
        sink.flush()
    assert text.getvalue() == "é\n" and binary.getvalue() == "é\n".encode()


def test_a_sink_on_stdout_buffers_until_flush_then_writes_the_bytes(monkeypatch):
    r, w = os.pipe()
    out = os.fdopen(w, "w")
    monkeypatch.setattr(sys, "stdout", out)
    try:
        sink = LineSink(None)
        sink.write("[x | 0] é\n")
        sink.write("[x | 1] b\n")
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 100)  # buffered: nothing written yet
        sink.flush()
        assert os.read(r, 100) == "[x | 0] é\n[x | 1] b\n".encode()
        os.close(r)
        sink.write("lost\n")
        with pytest.raises(StdoutClosedError, match="broken pipe"):
            sink.flush()
    finally:
        monkeypatch.undo()
        out.close()


def test_a_sink_refuses_what_it_cannot_write_to():
    with pytest.raises(ConfigurationError, match="stdout must be None, a list or a writable file"):
        LineSink(42)  # type: ignore[arg-type]


def _text_lines_twins():
    """text_lines' pure twin, and the compiled one where the compiled core is built."""
    from nbkit.transport import pipe_io
    from nbkit.wire.core import compiled_module

    compiled = compiled_module()
    return [pipe_io.text_lines_pure] + ([] if compiled is None else [compiled.text_lines])


@pytest.mark.parametrize("text_lines", _text_lines_twins())
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"\n\n",
        b"[jobs] a",
        b"[jobs] a\n[jobs] b\n",
        "[jobs] é\nü€\n𝄞".encode(),
        "x\u2028y\rz\x0bw".encode(),  # only \n splits (not str.splitlines' other breaks)
        b"\x00\n\x00",
        b"\xff",
        b"ok\n\xff\nok",
        b"\xe2\x82\nx",  # a sequence cut by a newline: not UTF-8
        "é".encode()[:1],
    ],
)
def test_text_lines_is_decode_then_split(text_lines, data):
    try:
        expected = data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        expected = None
    assert text_lines(data) == expected


@pytest.mark.skipif(len(_text_lines_twins()) < 2, reason="the compiled core is not built")
@given(st.lists(st.sampled_from([b"\n", b"a", b" ", b"\xc3", b"\xa9", "€".encode(), b"\xff", b"\x00"]), max_size=40))
def test_text_lines_twins_agree(pieces):
    pure, compiled = _text_lines_twins()
    data = b"".join(pieces)
    assert compiled(data) == pure(data)


# ---------------------------------------------------------------- the line bound


def test_a_line_over_the_bound_names_its_line_and_the_next_line_is_read(tmp_path):
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        source = LineSource(reader, max_line_bytes=1000)
        os.write(w, b"first\n" + b"x" * 999 + b"\n" + b"y" * 1001 + b"\nafter\n")
        assert source.poll() == "first" and source.poll() == "x" * 999  # at the bound: taken
        with pytest.raises(LineParseError, match=r"^line 3: stdin line 3 is longer than the line bound of 1,000 bytes"):
            source.poll()
        assert (source.poll(), source.lineno) == ("after", 4)
        os.close(w)
        assert source.poll() is None


def test_a_line_over_the_bound_is_refused_before_its_newline_arrives_and_its_rest_is_dropped():
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        source = LineSource(reader, max_line_bytes=1000)
        os.write(w, b"ok\n" + b"z" * 600)
        assert drain(source) == [("ok", 1), NEED_MORE]
        os.write(w, b"z" * 600)  # 1200 bytes and no newline: over the bound already
        with pytest.raises(LineParseError, match="stdin line 2 is longer"):
            source.poll()
        os.write(w, b"z" * 5000)  # more of the same line: read and dropped
        assert source.poll() is NEED_MORE
        os.write(w, b"zz\nnext\ntail")
        os.close(w)
        assert drain(source) == [("next", 3), ("tail", 4), None]


def test_the_read_holds_no_more_than_the_bound_of_a_long_line(tmp_path):
    import tracemalloc

    path = tmp_path / "long.txt"
    with path.open("wb") as f:
        f.write(b"short\n")
        for _ in range(32):  # a 32 MiB line
            f.write(b"p" * (1 << 20))
        f.write(b"\nlast\n")
    with path.open("rb") as stdin:
        source = LineSource(stdin, max_line_bytes=256 << 10)
        tracemalloc.start()
        try:
            assert source.poll() == "short"
            with pytest.raises(LineParseError, match="stdin line 2"):
                source.poll()
            assert (source.poll(), source.lineno) == ("last", 3)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 2 << 20, f"peak {peak:,} bytes while reading a 32 MiB line with a 256 KiB bound"


@pytest.mark.parametrize(
    "make",
    [
        lambda lines: lines,  # a list of str
        lambda lines: [s.encode() for s in lines],  # a list of bytes
        lambda lines: io.BytesIO("".join(s + "\n" for s in lines).encode()),  # readline in pieces
        lambda lines: io.StringIO("".join(s + "\n" for s in lines)),
        lambda lines: "\n".join(lines),
    ],
)
def test_every_kind_of_source_has_the_bound(make):
    lines = ["a", "é" * 500, "é" * 501, "b" * 1001, "c"]  # 1000 bytes, 1002 bytes, 1001 bytes
    source = LineSource(make(lines), max_line_bytes=1000)
    assert source.poll() == "a" and source.poll() == "é" * 500
    for lineno in (3, 4):
        with pytest.raises(LineParseError, match=f"stdin line {lineno} is longer"):
            source.poll()
    assert (source.poll(), source.lineno) == ("c", 5)
    assert source.poll() is None


def test_the_bound_can_be_lifted_and_is_checked():
    assert MAX_LINE_BYTES == 16 << 20
    assert LineSource(["x" * (MAX_LINE_BYTES + 1)], max_line_bytes=0).poll() == "x" * (MAX_LINE_BYTES + 1)
    with pytest.raises(LineParseError):
        LineSource(["x" * (MAX_LINE_BYTES + 1)]).poll()
    for bad in (-1, 1.5, "10"):
        with pytest.raises(ConfigurationError, match="max_line_bytes"):
            LineSource([], max_line_bytes=bad)  # type: ignore[arg-type]
