"""read_pipe's inputs: a path or a text file, or lines=...; never a guess between a path and content."""

from __future__ import annotations

import io
import pathlib

import pandas as pd
import pytest

from nbkit import LineParseError, read_pipe
from nbkit.errors import Utf8Error

LINES = ["[2024-01-01T00:00:00 | jobs | 0] hello", "[2024-01-01T00:00:01 | jobs | 1] world\r"]


@pytest.fixture
def saved(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "stdout.txt"
    path.write_bytes(("\n".join(LINES) + "\n").encode("utf-8"))
    return path


def test_every_way_to_pass_the_lines_gives_the_same_frame(saved: pathlib.Path) -> None:
    expected = read_pipe(lines=LINES)
    assert expected["payload"].tolist() == ["hello", "world\r"]  # only \n ends a line, as on the pipe
    pd.testing.assert_frame_equal(read_pipe(saved), expected)
    pd.testing.assert_frame_equal(read_pipe(str(saved)), expected)
    pd.testing.assert_frame_equal(read_pipe(io.StringIO("\n".join(LINES) + "\n")), expected)
    with open(saved, encoding="utf-8", newline="") as f:
        pd.testing.assert_frame_equal(read_pipe(f), expected)
    pd.testing.assert_frame_equal(read_pipe(lines=iter([line + "\n" for line in LINES])), expected)


def test_a_str_is_always_a_path_never_content(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match=r"line breaks.*read_pipe\(lines=text.splitlines\(\)\)"):
        read_pipe("\n".join(LINES))
    with pytest.raises(FileNotFoundError) as info:
        read_pipe(LINES[0])  # one line of content is read as a path too: it names no file
    assert any("read_pipe(lines=[...])" in note for note in info.value.__notes__)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, r"needs what to read"),
        (("stdout.txt",), {"lines": LINES}, r"not both"),
        ((), {"lines": "\n".join(LINES)}, r"iterable of lines, not one str"),
        ((b"stdout.txt",), {}, r"decode bytes first"),
        ((LINES,), {}, r"not list.*read_pipe\(lines=\.\.\.\)"),
        ((), {"lines": [b"[jobs] x"]}, r"lines gave bytes"),
        ((io.BytesIO(b"[jobs] x\n"),), {}, r"the file gave bytes; open the file in text mode"),
    ],
)
def test_wrong_inputs_say_what_to_pass_instead(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        read_pipe(*args, **kwargs)


def test_errors_in_a_saved_file_name_the_file_and_the_line(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("[jobs] ok\n[jobs | x] broken\n", encoding="utf-8")
    with pytest.raises(LineParseError) as parse:
        read_pipe(bad)
    assert parse.value.line == 2 and parse.value.path == str(bad) and str(parse.value).startswith(f"{bad}, line 2")
    bad.write_bytes(b"[jobs] ok\n[jobs] \xff\xfe\n[jobs] fine\n")
    with pytest.raises(Utf8Error) as utf8:
        read_pipe(bad)
    assert utf8.value.line == 2 and utf8.value.path == str(bad) and "byte 7" in str(utf8.value)


def test_lines_in_memory_report_the_line_without_a_file() -> None:
    with pytest.raises(LineParseError) as info:
        read_pipe(lines=["[jobs] ok", "[jobs | x] broken"])
    assert info.value.line == 2 and info.value.path is None
