"""The nbkit command line, in process (``cli.main([...])`` + capsys) and twice as a real subprocess."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from checkout_env import checkout_env
from cli_run import one_error_line, run
from stream_files import iter_messages

from nbkit import cli
from nbkit.transport.file_info import summarize
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEY, PRIMING_KEY
from nbkit.wire.stdio_line import parse_line

SAMPLE_HEADER_LINE = (
    '{"file_name":"vec_map-1694767177436.firedbg.ss","created_at":"2023-09-15T08:39:37.437","beacon_interval":1048576}'
)


@pytest.fixture()
def orders_file(tmp_path: Path) -> Path:
    """The §6.1 file: orders/0, 19 messages, I = 1024 (the beacon at 1024 cuts message 19)."""
    path = tmp_path / "orders.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=1700000000000) as w:
        for n in range(1, 20):
            w.write("orders", b'{"order":%d}' % n, timestamp_ms=1700000000000 + 10 * n)
    return path


MIXED = [
    ("text", 0, b"hello world"),
    ("text", 0, b"two\nlines"),
    ("bin", 1, b"\xff\x00\x01binary"),
    ("text", 0, b"  padded \t"),
    ("text", 0, b""),
    ("uni", 0, "héllo ✓ — ok".encode()),
    ("bin", 1, b"rs1:looks like an envelope"),
    (PRIMING_KEY, 0, b"prime"),
    ("json", 0, b'{"a":[1,2.5,"x"],"b":null}'),
    ("json", 0, b"NaN"),
    ("json", 0, b'"\\ud800"'),
    ("json", 0, b"[1,2,3]"),
]


@pytest.fixture()
def mixed_file(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=1700000000000) as w:
        for i, (key, shard, payload) in enumerate(MIXED):
            w.write(key, payload, shard_id=shard, timestamp_ms=1700000000000 + 100 * i)
        w.write_eos()
    return path


# -- help and usage ----------------------------------------------------------------------------------


def test_help_for_every_command(capsys) -> None:
    rc, out, _ = run(capsys, "--help")
    assert rc == 0
    for name, _add, handler in cli._COMMANDS:
        summary = handler.__doc__.strip().splitlines()[0]
        assert name in out
        rc, out_cmd, err = run(capsys, name, "--help")
        assert rc == 0 and err == ""
        assert " ".join(summary.split()) in " ".join(out_cmd.split())
        assert out_cmd.startswith(f"usage: nbkit {name}")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["cat"],
        ["cat", "x.ss", "--format", "xml"],
        ["write"],
        ["info", "a", "b"],
        ["write", "x.ss", "--beacon-interval", "lots"],
    ],
)
def test_usage_errors_exit_2(capsys, argv: list[str]) -> None:
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert "usage: nbkit" in err and "Traceback" not in err


# -- cat --format log --------------------------------------------------------------------------------


def test_cat_log_sample(capsys, sample_path: Path) -> None:
    rc, out, err = run(capsys, "cat", str(sample_path))
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "# " + SAMPLE_HEADER_LINE
    assert len(lines) == 1 + 28
    assert lines[1].startswith('[2023-09-15T08:39:37.912 | file | 1 | 0] {"id":1,"path":"testcases/vec_map.rs"')
    assert lines[-1] == "[2023-09-15T08:39:38.569 | SEA_STREAMER_INTERNAL | 0 | 0] EOS"
    assert sum(line.startswith("[") and "| event |" in line for line in lines) == 22


def test_cat_log_header_only_and_binary(capsys, mixed_file: Path) -> None:
    rc, out, _ = run(capsys, "cat", "--header-only", str(mixed_file))
    assert rc == 0
    body = out.splitlines()[1:]
    assert body[0] == "[2023-11-14T22:13:20.0 | text | 1 | 0]"
    assert body[1] == "[2023-11-14T22:13:20.1 | text | 2 | 0]"
    assert all(line.endswith("]") for line in body)
    rc, out, _ = run(capsys, "cat", str(mixed_file))
    assert "[2023-11-14T22:13:20.2 | bin | 1 | 1] <BINARY BLOB>\n" in out
    assert "| text | 2 | 0] two\\nlines\n" in out  # escaped: a payload cannot split the line (ss-decode prints it raw)
    assert "| uni | 1 | 0] héllo ✓ — ok\n" in out


def test_cat_log_prints_beacons(capsys, orders_file: Path) -> None:
    rc, out, _ = run(capsys, "cat", str(orders_file))
    lines = out.splitlines()
    assert lines[0] == '# {"file_name":"orders.ss","created_at":"2023-11-14T22:13:20.0","beacon_interval":1024}'
    assert lines[19] == '[2023-11-14T22:13:20.19 | orders | 19 | 0] {"order":19}'
    assert lines[20] == (
        '# [{"header":{"stream_key":"orders","shard_id":0,"sequence":19,'
        '"timestamp":"2023-11-14T22:13:20.19"},"running_checksum":42879}]'
    )
    assert len(lines) == 21


def test_cat_beacon_count_matches_file(capsys, multi_file: Path) -> None:
    rc, out, _ = run(capsys, "cat", str(multi_file))
    beacon_lines = [line for line in out.splitlines() if line.startswith("# [")]
    # one line per beacon crossed, except a beacon right after the very last frame (none follows it)
    assert len(beacon_lines) == summarize(multi_file).beacon_count
    rc, out, _ = run(capsys, "cat", "--format", "ndjson", "--comments", str(multi_file))
    assert sum(line.startswith("/* [") for line in out.splitlines()) == len(beacon_lines)


# -- cat --format ndjson -----------------------------------------------------------------------------


def test_cat_ndjson(capsys, mixed_file: Path, sample_path: Path) -> None:
    rc, out, err = run(capsys, "cat", "--format", "ndjson", str(mixed_file))
    assert rc == 0 and err == ""
    lines = out.splitlines()  # JSON objects only: the file header is nbkit info's
    records = [json.loads(line) for line in lines]
    assert all(isinstance(r, dict) and set(r) == {"header", "payload"} for r in records)
    rc, commented, _ = run(capsys, "cat", "--format", "ndjson", "--comments", str(mixed_file))
    assert commented.splitlines()[0] == (
        '/* {"file_name":"mixed.ss","created_at":"2023-11-14T22:13:20.0","beacon_interval":1024} */'
    )
    assert [line for line in commented.splitlines() if not line.startswith("/*")] == lines
    assert records[0] == {
        "header": {"stream_key": "text", "shard_id": 0, "sequence": 1, "timestamp": "2023-11-14T22:13:20.0"},
        "payload": "hello world",
    }
    assert lines[0] == (
        '{"header":{"stream_key":"text","shard_id":0,"sequence":1,"timestamp":"2023-11-14T22:13:20.0"},'
        '"payload":"hello world"}'
    )
    payloads = [r["payload"] for r in records]
    assert payloads[2] == list(b"\xff\x00\x01binary")
    assert payloads[5] == "héllo ✓ — ok"
    assert payloads[8] == {"a": [1, 2.5, "x"], "b": None}
    assert payloads[9] == "NaN"  # Python would parse NaN; JSON (and serde_json) does not
    assert payloads[10] == '"\\ud800"'  # a lone surrogate is not text: kept as the raw string
    assert payloads[11] == [1, 2, 3]
    assert records[-1]["header"]["stream_key"] == INTERNAL_KEY and payloads[-1] == "EOS"
    assert "héllo" in out  # not \u-escaped
    rc, out, _ = run(capsys, "cat", "--format", "ndjson", "--header-only", str(sample_path))
    assert len(out.splitlines()) == 28 and all(json.loads(line)["payload"] is None for line in out.splitlines())
    rc, out, _ = run(capsys, "cat", "--format", "ndjson", "--comments", "--header-only", str(sample_path))
    assert out.splitlines()[0] == f"/* {SAMPLE_HEADER_LINE} */"


def test_cat_ndjson_is_json_lines_a_json_reader_takes(tmp_path: Path, multi_file: Path, mixed_file: Path) -> None:
    for path in (multi_file, mixed_file):  # many beacons; every kind of payload
        cat = subprocess.run(
            [sys.executable, "-m", "nbkit", "cat", "--format", "ndjson", str(path)],
            capture_output=True,
            env=checkout_env(),
            check=True,
        )
        checked = subprocess.run(
            [sys.executable, "-m", "json.tool", "--json-lines"], input=cat.stdout, capture_output=True
        )
        assert checked.returncode == 0, checked.stderr
        assert cat.stdout.count(b"\n") == summarize(path).message_count


def _copies_file(tmp_path: Path) -> Path:
    """A message, its retry copy (rs1: text headers) and a dead letter with a binary header (rs2:)."""
    path = tmp_path / "copies.ss"
    with StreamWriter(path, created_at_ms=1700000000000) as w:
        w.write("orders", b'{"id": 1}', timestamp_ms=1700000000000)
        copy = envelope.encode({"x-ruststream-retry-count": "1"}, b'{"id": 1}', force_text=False)
        w.write("orders", copy, timestamp_ms=1700000000100)
        dead = envelope.encode({"reason": "bad\nline", "raw": b"\xff"}, b"not json", force_text=False)
        w.write("orders.dead", dead, timestamp_ms=1700000000200)
    return path


def test_cat_decode_payload_shows_envelopes_opened(capsys, monkeypatch, tmp_path: Path) -> None:
    path = _copies_file(tmp_path)
    rc, plain, _ = run(capsys, "cat", "--format", "ndjson", str(path))
    assert [json.loads(line)["payload"][:4] for line in plain.splitlines()[1:]] == ["rs1:", "rs2:"]  # base64
    rc, out, err = run(capsys, "cat", "--format", "ndjson", "--decode-payload", str(path))
    assert (rc, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [(r["headers"], r["payload"]) for r in records] == [
        ({}, {"id": 1}),
        ({"x-ruststream-retry-count": "1"}, {"id": 1}),
        ({"reason": "bad\nline", "raw": "\\xff"}, "not json"),
    ]
    assert records[1]["header"] == {
        "stream_key": "orders",
        "shard_id": 0,
        "sequence": 2,
        "timestamp": "2023-11-14T22:13:20.1",
    }
    rc, out, _ = run(capsys, "cat", "--decode-payload", str(path))
    assert out.splitlines()[2] == '[2023-11-14T22:13:20.1 | orders | 2 | 0] {x-ruststream-retry-count=1} {"id": 1}'
    rc, out, _ = run(capsys, "cat", "--format", "ndjson", "--decode-payload", "--header-only", str(path))
    assert [json.loads(line)["payload"] for line in out.splitlines()] == [None, None, None]
    rc, _, err = run(capsys, "cat", "--format", "stdio", "--decode-payload", str(path))
    assert rc == 1 and "--decode-payload is for --format log or ndjson" in one_error_line(err)
    rc, _, err = run(capsys, "cat", "--comments", str(path))
    assert rc == 1 and "--comments is for --format ndjson" in one_error_line(err)
    # written back, a line's headers put its payload back in an envelope: the copy is a copy again
    rc, decoded, _ = run(capsys, "cat", "--format", "ndjson", "--decode-payload", "--key", "orders", str(path))
    out_path = tmp_path / "back.ss"
    rc, _, err = run(capsys, "write", str(out_path), stdin=decoded, monkeypatch=monkeypatch)
    assert (rc, err) == (0, "")
    copy = list(iter_messages(out_path))[1]
    assert envelope.decode(copy.payload) == ({"x-ruststream-retry-count": "1"}, b'{"id":1}')
    bad = '{"header":{"stream_key":"a"},"headers":{"n":1},"payload":"x"}\n'
    rc, _, err = run(capsys, "write", str(tmp_path / "bad.ss"), stdin=bad, monkeypatch=monkeypatch)
    assert rc == 1 and '"headers" must be an object of text values' in one_error_line(err)


# -- cat --format stdio ------------------------------------------------------------------------------


def test_cat_stdio_lines_parse_back(capsys, mixed_file: Path) -> None:
    rc, out, err = run(capsys, "cat", "--format", "stdio", str(mixed_file))
    assert rc == 0 and err == ""
    assert out.endswith("\n")
    lines = out[:-1].split("\n")
    expected = [(i, m) for i, m in enumerate(MIXED) if m[0] != PRIMING_KEY]
    assert len(lines) == len(expected)  # one line per message: no raw newline escapes; EOS/internal skipped
    seqs: dict[str, int] = {}
    for line, (i, (key, shard, payload)) in zip(lines, expected, strict=True):
        seqs[key] = seqs.get(key, 0) + 1
        parsed = parse_line(line)
        assert (parsed.timestamp_ms, parsed.stream_key, parsed.seq, parsed.shard_id) == (
            1700000000000 + 100 * i,
            key,
            seqs[key],
            shard,
        )
        headers, body = envelope.decode(parsed.payload.encode())
        assert (headers, body) == ({}, payload), line
    assert "| text | 1 | 0] hello world" in lines[0]
    assert lines[1].split("] ", 1)[1].startswith("rs1:")  # multi-line: enveloped
    assert lines[4] == "[2023-11-14T22:13:20.4 | text | 4 | 0]"  # empty payload: no trailing space


def test_cat_stdio_sample_parses(capsys, sample_path: Path) -> None:
    rc, out, _ = run(capsys, "cat", "--format", "stdio", str(sample_path))
    lines = out.splitlines()
    assert len(lines) == 27  # EOS left out
    for line in lines:
        p = parse_line(line)
        assert p.stream_key in {"file", "breakpoint", "event"} and p.shard_id == 0


# -- cat --key, end of data, follow ------------------------------------------------------------------


def test_cat_key_filter(capsys, sample_path: Path) -> None:
    rc, out, _ = run(capsys, "cat", "--key", "breakpoint", "--key", "file", str(sample_path))
    lines = out.splitlines()[1:]
    assert len(lines) == 5 and all("| breakpoint |" in x or "| file |" in x for x in lines)
    rc, out, err = run(capsys, "cat", "--format", "ndjson", "--key", "nothing", str(sample_path))
    assert rc == 1 and out == ""  # no such key: tests/test_cli_feed.py
    assert "the keys there: breakpoint, event, file" in one_error_line(err)


@pytest.mark.parametrize("key", ["a b", "", "x" * 250, "ü"])
def test_cat_invalid_key(capsys, sample_path: Path, key: str) -> None:
    rc, out, err = run(capsys, "cat", "--key", key, str(sample_path))
    assert rc == 1 and out == ""
    assert "--key" in one_error_line(err)


def test_cat_truncated_file_warns_on_stderr(capsys, tmp_path: Path, sample_bytes: bytes) -> None:
    path = tmp_path / "cut.ss"
    path.write_bytes(sample_bytes[:1000])
    rc, out, err = run(capsys, "cat", str(path))
    assert rc == 0
    msgs = list(iter_messages(path))
    assert len(out.splitlines()) == 1 + len(msgs)
    line = one_error_line(err)
    assert "truncated" in line and f"offset {msgs[-1].end}" in line
    assert f"{1000 - msgs[-1].end} trailing bytes" in line


def test_cat_damaged_file_fails_after_the_good_part(capsys, tmp_path: Path, sample_bytes: bytes) -> None:
    msgs = list(iter_messages_bytes(tmp_path, sample_bytes))
    bad = bytearray(sample_bytes)
    bad[msgs[3].end - 4] ^= 1
    path = tmp_path / "bad.ss"
    path.write_bytes(bytes(bad))
    rc, out, err = run(capsys, "cat", str(path))
    assert rc == 1
    assert len(out.splitlines()) == 1 + 3
    line = one_error_line(err)
    assert "checksum" in line and f"byte offset {msgs[3].offset}" in line and str(path) in line


def iter_messages_bytes(tmp_path: Path, data: bytes) -> list:
    path = tmp_path / "copy.ss"
    path.write_bytes(data)
    return list(iter_messages(path))


@pytest.mark.timeout(30)
def test_cat_follow_until_eos(capsys, tmp_path: Path) -> None:
    path = tmp_path / "live.ss"
    StreamWriter(path, beacon_interval=1024).close()

    def produce() -> None:
        with StreamWriter(path) as w:
            for i in range(300):
                w.write("tick", b"t%d" % i, timestamp_ms=1700000000000 + i)
                if i % 100 == 0:
                    time.sleep(0.05)  # pauses: cat --follow reaches the tip and waits (what is tested)
            w.write_eos()

    t = threading.Thread(target=produce)
    t.start()
    rc, out, err = run(capsys, "cat", "--follow", "--format", "stdio", str(path))
    t.join()
    assert rc == 0 and err == ""
    assert [parse_line(x).payload for x in out.splitlines()] == [f"t{i}" for i in range(300)]


@pytest.mark.timeout(30)
def test_cat_follow_ends_when_removed(capsys, tmp_path: Path) -> None:
    path = tmp_path / "gone.ss"
    with StreamWriter(path) as w:
        w.write("a", b"x")
    timer = threading.Timer(0.2, os.remove, args=(path,))
    timer.start()
    rc, out, err = run(capsys, "cat", "-f", str(path))
    timer.join()
    assert rc == 0 and len(out.splitlines()) == 2
    assert "removed" in one_error_line(err)


# -- errors ------------------------------------------------------------------------------------------


def _error_cases(tmp_path: Path) -> dict[str, Path]:
    text = tmp_path / "notes.txt"
    text.write_text("just some text, not a stream file\n")
    empty = tmp_path / "empty.ss"
    empty.write_bytes(b"")
    short = tmp_path / "short.ss"
    short.write_bytes(b"Ss\x01\x04")
    version = tmp_path / "v2.ss"
    version.write_bytes(b"Ss\x02" + bytes(125))
    return {
        "missing": tmp_path / "missing.ss",
        "directory": tmp_path,
        "not .ss": text,
        "empty": empty,
        "short": short,
        "version": version,
    }


@pytest.mark.parametrize("command", ["cat", "info"])
def test_bad_files_give_one_line(capsys, tmp_path: Path, command: str) -> None:
    expected = {
        "missing": "no such file",
        "directory": "directory",
        "not .ss": "not a stream file",
        "empty": "0 bytes long",
        "short": "4 bytes long",
        "version": "version 2",
    }
    for case, path in _error_cases(tmp_path).items():
        rc, out, err = run(capsys, command, str(path))
        assert rc == 1, case
        line = one_error_line(err)
        assert expected[case] in line and str(path) in line, (case, line)
        assert out == ""


def test_no_permission(capsys, tmp_path: Path, sample_bytes: bytes, monkeypatch) -> None:
    path = tmp_path / "secret.ss"
    path.write_bytes(sample_bytes)
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):
            pytest.skip("running as root: a mode-000 file is still readable")
        rc, out, err = run(capsys, "cat", str(path))
        assert rc == 1 and "permission denied" in one_error_line(err)
    finally:
        path.chmod(0o644)


def test_no_permission_simulated(capsys, tmp_path: Path, sample_bytes: bytes, monkeypatch) -> None:
    """The same path with the OS refusing the open (works as root too)."""
    path = tmp_path / "secret.ss"
    path.write_bytes(sample_bytes)
    import nbkit.transport.file_reader as fr

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(fr.os, "open", refuse)
    rc, out, err = run(capsys, "info", str(path))
    assert rc == 1 and out == ""
    assert "permission denied" in one_error_line(err)


def test_broken_pipe_and_interrupt_in_process(capsys, sample_path: Path, monkeypatch) -> None:
    class ClosedPipe(io.StringIO):
        def write(self, s: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert cli.main(["cat", str(sample_path)]) == cli.EXIT_BROKEN_PIPE == 141
    monkeypatch.undo()
    assert capsys.readouterr().err == ""

    def interrupted(args):
        """Pretend Ctrl-C arrives while the command runs."""
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_COMMANDS", [("info", cli._add_info, interrupted)])
    assert cli.main(["info", str(sample_path)]) == 130
    assert capsys.readouterr().err == ""


# -- info --------------------------------------------------------------------------------------------


def test_info_text(capsys, sample_path: Path) -> None:
    rc, out, err = run(capsys, "info", str(sample_path))
    assert rc == 0 and err == ""
    assert "vec_map-1694767177436.firedbg.ss" in out
    assert "2023-09-15T08:39:37.437Z" in out
    assert "1048576 bytes" in out and "3481 bytes" in out
    assert "28 in 4 streams" in out
    assert "yes (at offset 3425)" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("event ", "breakpoint "))}
    assert rows["event"][1:9] == [
        "0",
        "22",
        "22",
        "0",
        "0",
        "1..22",
        "2023-09-15T08:39:38.489Z",
        "2023-09-15T08:39:38.564Z",
    ]
    assert rows["breakpoint"][2] == "4" and rows["breakpoint"][6] == "1..4"


def test_info_json(capsys, multi_file: Path) -> None:
    rc, out, _ = run(capsys, "info", "--json", str(multi_file))
    assert rc == 0
    assert json.loads(out) == summarize(multi_file).to_dict()


def test_info_reports_trailing_and_damage(capsys, tmp_path: Path, sample_bytes: bytes) -> None:
    msgs = iter_messages_bytes(tmp_path, sample_bytes)
    cut = tmp_path / "cut.ss"
    cut.write_bytes(sample_bytes[: msgs[20].end + 7])
    rc, out, _ = run(capsys, "info", str(cut))
    assert rc == 0 and "end of stream    no" in out
    assert f"trailing data    7 bytes at offset {msgs[20].end}" in out
    bad = bytearray(sample_bytes)
    bad[200] ^= 0xFF
    dmg = tmp_path / "dmg.ss"
    dmg.write_bytes(bytes(bad))
    rc, out, _ = run(capsys, "info", str(dmg))
    assert rc == 0 and "damaged" in out and "checksum" in out


# -- write -------------------------------------------------------------------------------------------


def _ndjson(capsys, path: Path, *extra: str) -> bytes:
    rc, out, err = run(capsys, "cat", "--format", "ndjson", *extra, str(path))
    assert rc == 0 and err == ""
    return out.encode()


@pytest.fixture()
def generated_file(tmp_path: Path, make_messages) -> Path:
    """Text (non-JSON) and binary payloads over 4 streams, I = 1024 (many beacons), ending with EOS."""
    path = tmp_path / "gen.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=1234567890123, file_name="gen-orig.ss") as w:
        for i, (key, shard, seq, ts, payload) in enumerate(make_messages(250, seed=3)):
            if i % 3 == 0:
                payload = b"\xff" + payload  # never UTF-8
            elif i % 3 == 1:
                payload = b"text %d: \xc3\xa9 %s" % (i, payload.hex().encode())
            w.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=ts)
        w.write_eos()
    return path


def test_cat_write_round_trip_is_byte_identical(capsys, monkeypatch, tmp_path: Path, generated_file: Path) -> None:
    data = _ndjson(capsys, generated_file, "--comments")
    assert data.count(b"/* [") > 20  # beacons in the input are skipped, the writer rebuilds them
    out = tmp_path / "copy.ss"
    rc, stdout, err = run(capsys, "write", str(out), stdin=data, monkeypatch=monkeypatch)
    assert (rc, stdout, err) == (0, "", "")
    assert out.read_bytes() == generated_file.read_bytes()


def test_cat_write_round_trip_of_the_sample(capsys, monkeypatch, tmp_path: Path, sample_path: Path) -> None:
    out = tmp_path / "s.ss"
    data = _ndjson(capsys, sample_path, "--comments")
    rc, _, err = run(capsys, "write", str(out), stdin=data, monkeypatch=monkeypatch)
    assert rc == 0 and err == ""
    before, after = list(iter_messages(sample_path)), list(iter_messages(out))
    assert len(after) == 28
    for a, b in zip(before, after, strict=True):
        assert (a.stream_key, a.shard_id, a.seq, a.timestamp_ms) == (b.stream_key, b.shard_id, b.seq, b.timestamp_ms)
        try:
            assert json.loads(a.payload) == json.loads(b.payload)  # JSON payloads: same value
        except ValueError:
            assert a.payload == b.payload  # anything else: same bytes
    assert summarize(out).header == summarize(sample_path).header


def test_write_payload_rules_and_eos(capsys, monkeypatch, tmp_path: Path) -> None:
    def line(seq: int, payload) -> str:
        head = {"stream_key": "k", "shard_id": 0, "sequence": seq, "timestamp": "2024-01-01T00:00:00.5"}
        return json.dumps({"header": head, "payload": payload}, ensure_ascii=False)

    payloads = ["plain", [0, 255, 7], {"b": 1, "a": [True, None]}, 12.5, None, "ü", [], [1, 300]]
    stdin = "\n".join(line(i + 1, p) for i, p in enumerate(payloads)) + "\n\n"
    out = tmp_path / "rules.ss"
    rc, _, err = run(
        capsys, "write", str(out), "--eos", "--beacon-interval", "2048", stdin=stdin.encode(), monkeypatch=monkeypatch
    )
    assert rc == 0 and err == ""
    msgs = list(iter_messages(out))
    assert [m.payload for m in msgs[:-1]] == [
        b"plain",
        b"\x00\xff\x07",
        b'{"b":1,"a":[true,null]}',
        b"12.5",
        b"null",
        "ü".encode(),
        b"",
        b"[1,300]",
    ]
    assert all(m.timestamp_ms == 1704067200500 for m in msgs[:-1])
    assert msgs[-1].is_eos
    s = summarize(out)
    assert s.header.beacon_interval == 2048 and s.header.file_name == "rules.ss"


def test_write_keeps_an_input_eos_and_refuses_messages_after_it(
    capsys, monkeypatch, tmp_path: Path, sample_path: Path
) -> None:
    data = _ndjson(capsys, sample_path)
    extra = b'{"header":{"stream_key":"late","shard_id":0,"sequence":1,"timestamp":0},"payload":"x"}\n'
    out = tmp_path / "after.ss"
    rc, _, err = run(capsys, "write", str(out), "--eos", stdin=data + extra, monkeypatch=monkeypatch)
    assert rc == 1
    line = one_error_line(err)
    assert "line 29" in line and "end-of-stream" in line
    msgs = list(iter_messages(out))
    assert len(msgs) == 28 and msgs[-1].is_eos  # one EOS: --eos adds none when the input had one


def test_write_bad_line_names_it_and_keeps_earlier_messages(
    capsys, monkeypatch, tmp_path: Path, orders_file: Path
) -> None:
    lines = _ndjson(capsys, orders_file).splitlines(keepends=True)
    for bad, why in [
        (b"{not json\n", "invalid message line"),
        (b'{"header":{"stream_key":"a b","shard_id":0,"sequence":1,"timestamp":0},"payload":""}\n', "' '"),
        (b'{"header":{"stream_key":"a","shard_id":-1,"sequence":1,"timestamp":0},"payload":""}\n', "shard_id"),
        (
            b'{"header":{"stream_key":"a","shard_id":0,"sequence":1,"timestamp":"yesterday"},"payload":""}\n',
            "timestamp",
        ),
        (b'{"header":{"stream_key":"a","shard_id":0,"sequence":1,"timestamp":0}}\n', "invalid message line"),
        (b"/* unterminated comment\n", "*/"),
        (b"\xff\xfe not utf-8\n", "not UTF-8"),
    ]:
        out = tmp_path / f"bad{len(why)}{bad[:3].hex()}.ss"
        stdin = b"".join(lines[:5]) + bad + b"".join(lines[5:])
        rc, stdout, err = run(capsys, "write", str(out), stdin=stdin, monkeypatch=monkeypatch)
        assert rc == 1 and stdout == ""
        line = one_error_line(err)
        assert "stdin, line 6" in line and why in line, line
        assert [m.seq for m in iter_messages(out)] == [1, 2, 3, 4, 5]


def test_write_appends_to_an_existing_file(capsys, monkeypatch, tmp_path: Path, orders_file: Path) -> None:
    data = _ndjson(capsys, orders_file, "--comments")
    target = tmp_path / "existing.ss"
    with StreamWriter(target, beacon_interval=2048) as w:
        w.write("other", b"first")
    rc, _, err = run(capsys, "write", str(target), "--beacon-interval", "4096", stdin=data, monkeypatch=monkeypatch)
    assert rc == 0
    notes = err.splitlines()
    assert len(notes) == 2 and all(n.startswith("nbkit: note:") for n in notes)
    assert "header line is ignored" in notes[0] and "2048" in notes[1]
    s = summarize(target)
    assert s.header.beacon_interval == 2048 and s.message_count == 20
    assert [x.stream_key for x in s.streams] == ["other", "orders"]


def test_write_header_line_sets_new_file(capsys, monkeypatch, tmp_path: Path, orders_file: Path) -> None:
    out = tmp_path / "renamed.ss"
    rc, _, err = run(
        capsys,
        "write",
        str(out),
        "--beacon-interval",
        "4096",
        stdin=_ndjson(capsys, orders_file, "--comments"),
        monkeypatch=monkeypatch,
    )
    assert rc == 0 and "--beacon-interval 4096 ignored" in one_error_line(err)
    assert out.read_bytes() == orders_file.read_bytes()  # same name, time and interval as the source


def test_write_bad_interval(capsys, monkeypatch, tmp_path: Path) -> None:
    rc, _, err = run(
        capsys, "write", str(tmp_path / "i.ss"), "--beacon-interval", "1000", stdin=b"", monkeypatch=monkeypatch
    )
    assert rc == 1 and "multiple of 1024" in one_error_line(err)


# -- real subprocesses ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_subprocess_errors_and_broken_pipe(tmp_path: Path) -> None:
    env = checkout_env()
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "cat", str(tmp_path / "missing.ss")],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"nbkit: {tmp_path / 'missing.ss'}: no such file; check the path\n"
    big = tmp_path / "big.ss"
    with StreamWriter(big, flush_every=500) as w:
        for i in range(5000):
            w.write("lines", b"%06d " % i + b"x" * 100)
    child = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "cat", str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert child.stdout.readline().startswith(b"# {")
    child.stdout.close()  # like `| head -1`: the reader goes away mid-output
    assert child.wait(timeout=30) == 141
    assert child.stderr.read() == b""


@pytest.mark.timeout(60)
def test_subprocess_follow_ctrl_c(tmp_path: Path) -> None:
    path = tmp_path / "live.ss"
    with StreamWriter(path) as w:
        w.write("a", b"hello")
    child = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "cat", "--follow", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=checkout_env(),
    )
    try:
        assert child.stdout.readline().startswith(b"# {")
        assert child.stdout.readline().endswith(b"| a | 1 | 0] hello\n")
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 130
        assert child.stderr.read() == b""
    finally:
        if child.poll() is None:
            child.kill()


def test_version_names_the_active_core(capsys):
    from nbkit.wire import core

    code, out, err = run(capsys, "--version")
    assert code == 0 and err == ""
    assert out.startswith("nbkit 0.1.0 (")
    assert ("compiled core" in out) == (core.CORE == "compiled")
    from nbkit.transport.writer_state import COMPILED as writer_compiled
    from nbkit.wire.jsonfields import COMPILED as fields_compiled

    # the one description names each twin as the module that uses it chose it
    assert ("; compiled writer route;" if writer_compiled else "; pure-Python writer route;") in out
    assert ("; compiled JSON field parser;" if fields_compiled else "; pyarrow.json JSON field parser;") in out
    assert out.count("; ") == 3  # the three twins of core.TWINS, then the Python version


def test_the_pure_core_is_chosen_by_the_environment(tmp_path):
    """``NBKIT_PURE_PYTHON=1`` picks the twin (and no notice: it was asked for); ``cat`` still works."""
    path = tmp_path / "v.ss"
    with StreamWriter(path, created_at_ms=1) as w:
        w.write("orders", b"hello", timestamp_ms=5)
    env = checkout_env(NBKIT_PURE_PYTHON="1")
    version = subprocess.run([sys.executable, "-m", "nbkit", "--version"], env=env, capture_output=True, text=True)
    twins = "pure-Python core (NBKIT_PURE_PYTHON is set); pure-Python writer route; pyarrow.json JSON field parser;"
    assert twins in version.stdout
    cat = subprocess.run([sys.executable, "-m", "nbkit", "cat", str(path)], env=env, capture_output=True, text=True)
    assert cat.returncode == 0 and cat.stderr == "" and "hello" in cat.stdout


def test_run_help_says_stdout_is_data_and_lists_every_exit_code(capsys) -> None:
    from nbkit import cli

    assert cli.main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert "writes only data to stdout" in text and "handler prints goes to stderr" in text
    for code in ("0 ", "1 ", "2 ", "3 ", "129", "130", "141", "143"):
        assert f"\n  {code}" in text or f" {code} by" in text or f", {code} by" in text, code
    for option in ("--ack-log-rate", "--max-pending", "--skip-blank-lines", "--strip-cr", "--on-bad-lines"):
        assert option in text


def test_run_of_a_pipe_stage_does_not_load_the_file_transport(tmp_path: Path) -> None:
    """``nbkit run`` of a pipe-only service starts without the stream-file reader and writer (a start-up cost)."""
    (tmp_path / "service.py").write_text(
        "import atexit, sys\n"
        "from nbkit import App, StdioBroker\n"
        "broker = StdioBroker()\n"
        "broker.subscriber('jobs', out_retry='jobs.retry')(lambda delivery: None)\n"
        "app = App(broker)\n"
        "file_modules = ('nbkit.transport.file_', 'nbkit.runtime.file')\n"
        "loaded = lambda: sorted(m for m in sys.modules if m.startswith(file_modules))\n"
        "atexit.register(lambda: print('loaded:', loaded(), file=sys.stderr))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", "run", "service:app"],
        input=b"[jobs] a\n",
        capture_output=True,
        cwd=tmp_path,
        env=checkout_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stderr.decode()
