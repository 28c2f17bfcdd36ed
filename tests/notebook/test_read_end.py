"""frame.attrs["read_end"]: a typed, immutable ReadEnd that reads as a sentence and survives pandas."""

from __future__ import annotations

import copy
import json
import pathlib
import pickle

import pandas as pd
import pytest

from nbkit import ChecksumError, ReadEnd, StreamWriter, concat_frames, read_stream


@pytest.fixture
def frame(tmp_path: pathlib.Path) -> pd.DataFrame:
    path = tmp_path / "orders.ss"
    with StreamWriter(path) as writer:
        for i in range(3):
            writer.write("orders", f'{{"id": {i}}}'.encode())
        writer.write_eos()
    return read_stream(path, payload="json")


def test_read_end_is_a_record_whose_str_is_the_sentence(frame: pd.DataFrame) -> None:
    end = frame.attrs["read_end"]
    assert isinstance(end, ReadEnd) and end.reason == "eos" and end.trailing_bytes == 0 and end.error is None
    assert str(end) == f"ended at the end-of-stream mark (offset {end.offset})" == end.describe()
    assert f"{end}" == str(end)


def test_read_end_survives_what_pandas_does_to_attrs(frame: pd.DataFrame) -> None:
    end = frame.attrs["read_end"]
    derived = [
        frame.head(2),
        frame.copy(deep=True),
        frame[frame["seq"] > 1],
        frame.assign(double=frame["seq"] * 2),
        concat_frames(frame, frame),
        pickle.loads(pickle.dumps(frame)),
    ]
    for other in derived:
        assert other.attrs["read_end"] == end
        assert str(other.attrs["read_end"]) == str(end)


def test_pandas_to_parquet_stores_the_attrs_with_the_record(frame: pd.DataFrame, tmp_path: pathlib.Path) -> None:
    pytest.importorskip("pyarrow")
    end = frame.attrs["read_end"]
    assert json.loads(json.dumps(frame.attrs))["read_end"] == ["eos", end.offset, 0, None]  # pandas' attrs encoder
    frame[["stream_key", "seq"]].to_parquet(tmp_path / "orders.parquet")
    back = pd.read_parquet(tmp_path / "orders.parquet")
    assert ReadEnd(*back.attrs["read_end"]) == end


def test_read_end_is_immutable_and_copies_to_itself() -> None:
    err = ChecksumError("payload checksum mismatch", received=1, computed=2, offset=300)
    end = ReadEnd("error", 300, 12, err)
    assert copy.deepcopy(end) is end and copy.copy(end) is end
    with pytest.raises(AttributeError):
        end.offset = 0  # type: ignore[misc]  # the point: a frozen record refuses assignment
    again = pickle.loads(pickle.dumps(ReadEnd("truncated", 4096, 7)))
    assert again == ReadEnd("truncated", 4096, 7) and "7 trailing bytes" in str(again)


def test_an_unknown_reason_is_refused_when_built() -> None:
    with pytest.raises(ValueError, match="'trunc' is not one of eos, end, truncated, removed, idle, error"):
        ReadEnd("trunc", 0)  # type: ignore[arg-type]  # the point: a reason outside the Literal
