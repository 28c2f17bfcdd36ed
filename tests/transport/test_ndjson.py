"""Importing NDJSON (what ``nbkit cat --format ndjson`` prints) into a stream file: write_ndjson."""

from __future__ import annotations

from pathlib import Path

import pytest
from stream_files import iter_messages, read_header

from nbkit.errors import FormatError
from nbkit.transport.ndjson import write_ndjson

HEADER = '/* {"file_name":"orders.ss","created_at":"2023-11-14T22:13:20.0","beacon_interval":2048} */'


def _message(seq: int, payload: str = '{"id":1}', key: str = "orders") -> str:
    head = f'"stream_key":"{key}","shard_id":0,"sequence":{seq},"timestamp":"2023-11-14T22:13:20.0"'
    return f'{{"header":{{{head}}},"payload":{payload}}}'


def _numbered(*lines: str) -> list[tuple[int, str]]:
    return list(enumerate(lines, 1))


def test_a_new_file_takes_the_header_line_and_every_message(tmp_path: Path) -> None:
    path = tmp_path / "copy.ss"
    notes: list[str] = []
    lines = _numbered("", HEADER, _message(1), "/* a beacon's comment */", _message(2, '"two"'))
    write_ndjson(str(path), lines, beacon_interval=4096, eos=True, note=notes.append)
    header = read_header(path)
    assert (header.file_name, header.created_at_ms, header.beacon_interval) == ("orders.ss", 1_700_000_000_000, 2048)
    got = [(m.stream_key, m.seq, m.timestamp_ms, m.payload, m.is_eos) for m in iter_messages(path, stop_at_eos=False)]
    assert got[:2] == [
        ("orders", 1, 1_700_000_000_000, b'{"id":1}', False),
        ("orders", 2, 1_700_000_000_000, b"two", False),  # a JSON string payload is its text
    ]
    assert got[2][4] and len(got) == 3  # the end-of-stream mark, written once
    assert notes == ["note: --beacon-interval 4096 ignored: the input's header line sets 2048"]


def test_a_bad_line_is_named_and_a_file_left_without_messages_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "bad.ss"
    with pytest.raises(FormatError, match="line 2") as info:
        write_ndjson(str(path), _numbered(HEADER, "{not json"), source="input.ndjson")
    assert "input.ndjson" in str(info.value)
    assert not path.exists()


def test_an_idle_input_flushes_the_batch_before_each_wait(tmp_path: Path) -> None:
    path = tmp_path / "idle.ss"
    seen: list[int] = []

    def idle() -> bool:  # before each line is taken: how many messages are in the file by then
        seen.append(sum(1 for _ in iter_messages(path)) if path.exists() else 0)
        return True

    write_ndjson(str(path), _numbered(_message(1), _message(2), _message(3)), idle=idle)
    # each wait flushes what came before it (a batch of 64 otherwise): the file grows a message per line
    assert seen == [0, 1, 2]
