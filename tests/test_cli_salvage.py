"""The CLI on damaged files: ``nbkit info`` lists every damaged region, ``nbkit cat --on-bad-frames``."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbkit import cli
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter


@pytest.fixture()
def damaged(tmp_path: Path) -> tuple[Path, list]:
    """300 small messages (interval 1024) with the last payload byte of messages 60 and 200 flipped."""
    path = tmp_path / "damaged.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=0, clock_ms=lambda: 0) as w:
        for i in range(300):
            w.write("k", f"message {i}".encode())
    with StreamReader(path) as r:
        msgs = list(r)
    raw = bytearray(path.read_bytes())
    for i in (60, 200):
        raw[msgs[i].end - 4] ^= 0xFF
    path.write_bytes(bytes(raw))
    return path, msgs


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_info_lists_every_damaged_region_with_what_was_recovered(capsys, damaged) -> None:
    path, msgs = damaged
    rc, out, _ = _run(capsys, "info", str(path))
    rows = [line for line in out.splitlines() if line.startswith("damaged")]
    assert rc == 0 and len(rows) == 2
    assert f"bytes {msgs[60].offset}.." in rows[0] and "checksum" in rows[0] and "recovered after it" in rows[0]
    assert f"bytes {msgs[200].offset}.." in rows[1]


@pytest.mark.parametrize("mode", ["skip", "warn"])
def test_cat_on_bad_frames(capsys, damaged, mode: str) -> None:
    path, msgs = damaged
    rc, out, err = _run(capsys, "cat", str(path), "--on-bad-frames", mode, "--format", "ndjson")
    printed = [line for line in out.splitlines() if not line.startswith("/*")]
    assert rc == 0 and 280 < len(printed) < 298 and '"message 299"' in printed[-1]
    assert not any('"message 60"' in line or '"message 200"' in line for line in printed)
    warnings = [line for line in err.splitlines() if "damaged" in line]
    assert len(warnings) == (2 if mode == "warn" else 0)
    assert all(line.startswith("nbkit: warning: ") for line in warnings)


def test_cat_default_stops_with_a_hint(capsys, damaged) -> None:
    path, _ = damaged
    rc, _, err = _run(capsys, "cat", str(path))
    assert rc == 1 and "checksum" in err and "on_bad_frames='skip'" in err and len(err.splitlines()) == 1


def test_export_on_bad_frames(capsys, damaged, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from nbkit import read_parquet
    from nbkit.tabular.frames import read_stream

    path, _ = damaged
    out = tmp_path / "out.parquet"
    rc, _, err = _run(capsys, "export", str(path), "-o", str(out))
    assert rc == 1 and "checksum" in err
    rc, _, err = _run(capsys, "export", str(path), "-o", str(out), "--on-bad-frames", "warn")
    assert rc == 0 and len([line for line in err.splitlines() if "damaged bytes" in line]) == 2
    exported = read_parquet(out)  # layout 2 stores an auto payload as its bytes; nbkit's reader decodes it
    assert list(exported["payload"]) == list(read_stream(path, on_bad_frames="skip")["payload"])
