"""``StreamWriter(fsync=...)``: an ``os.fsync`` after every flush when asked, none otherwise; same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nbkit import FileBroker
from nbkit.transport.file_writer import StreamWriter


def _write(path: Path, monkeypatch, **options) -> int:
    """Write 4 messages with ``options``; how many times os.fsync was called meanwhile."""
    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    with StreamWriter(path, beacon_interval=1024, created_at_ms=0, clock_ms=lambda: 5, file_name="f", **options) as w:
        for i in range(4):
            w.write("k", b"x" * (300 * i))
    monkeypatch.setattr(os, "fsync", real)
    return len(calls)


@pytest.mark.parametrize(
    ("options", "syncs"),
    [
        ({}, 0),
        ({"fsync": False}, 0),
        ({"fsync": True}, 4),
        ({"fsync": True, "flush_every": 2}, 2),
    ],
)
def test_fsync_after_every_flush(tmp_path: Path, monkeypatch, options: dict, syncs: int) -> None:
    path = tmp_path / "f.ss"
    assert _write(path, monkeypatch, **options) == syncs
    plain = tmp_path / "plain.ss"
    _write(plain, monkeypatch)
    assert path.read_bytes() == plain.read_bytes()


def test_file_broker_passes_fsync_to_its_writer(tmp_path: Path) -> None:
    broker = FileBroker(tmp_path / "b.ss", fsync=True)
    assert broker.writer.fsync is True
    broker.writer.close()
    assert FileBroker(tmp_path / "c.ss").writer.fsync is False
