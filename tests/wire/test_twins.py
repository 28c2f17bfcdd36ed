"""The compiled core and the pure-Python twin agree: same results and same errors on the same random
streams, damaged bytes, frames and stdio lines (hypothesis). Skipped where the core was not built."""

from __future__ import annotations

import itertools
from array import array
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nbkit.transport import file_reader, frame_decode
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import core, stdio_line
from nbkit.wire.crc import crc16 as crc16_pure
from nbkit.wire.limits import MAX_TIMESTAMP_MS
from nbkit.wire.scan import (
    ColumnBuffers,
    compact_payloads_pure,
    new_columns,
    payload_lines_pure,
    scan_columns_pure,
    scan_frames_pure,
    split_payloads_pure,
)
from nbkit.wire.ssformat import encode_frame_pure

compiled = core.compiled_module()
pytestmark = pytest.mark.skipif(compiled is None, reason="the compiled core was not built here")

HYPO = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
_counter = itertools.count()


def outcome(fn, *args):
    """What a call gives: ("ok", result) or ("error", type name, message)."""
    try:
        return ("ok", fn(*args))
    except Exception as exc:  # noqa: BLE001 - the point is to compare any error
        return ("error", type(exc).__name__, str(exc))


# -- CRC ----------------------------------------------------------------------------------------------


@HYPO
@given(data=st.binary(max_size=600), initial=st.one_of(st.none(), st.integers(0, 0xFFFF)))
@example(data=b"123456789", initial=None)  # the catalogue check value 0x4C06
def test_crc16_twins_agree(data, initial):
    assert compiled.crc16(data, initial) == crc16_pure(data, initial)
    assert compiled.crc16(bytearray(data)) == crc16_pure(data)


# -- frame encoding -----------------------------------------------------------------------------------

u64ish = st.one_of(st.integers(0, 2**64 - 1), st.integers(-5, -1), st.integers(2**64, 2**64 + 3), st.booleans())


@HYPO
@given(
    key=st.one_of(st.binary(min_size=1, max_size=40), st.text(max_size=5)),
    shard=u64ish,
    seq=u64ish,
    ts=st.one_of(
        st.integers(0, MAX_TIMESTAMP_MS), st.integers(MAX_TIMESTAMP_MS + 1, MAX_TIMESTAMP_MS + 9), st.integers(-3, -1)
    ),
    payload=st.one_of(st.binary(max_size=300), st.just(bytearray(b"ba")), st.just("text")),
)
def test_encode_frame_twins_agree(key, shard, seq, ts, payload):
    assert outcome(compiled.encode_frame, key, shard, seq, ts, payload) == outcome(
        encode_frame_pure, key, shard, seq, ts, payload
    )


# -- the frame scanner --------------------------------------------------------------------------------

KEYS = [b"a", b"orders", b"q" * 30, b"SEA_STREAMER_INTERNAL"]
frames_st = st.lists(
    st.tuples(
        st.sampled_from(KEYS),
        st.integers(0, 2**64 - 1),
        st.integers(0, 2**64 - 1),
        st.integers(0, MAX_TIMESTAMP_MS),
        st.binary(max_size=200),
    ),
    max_size=30,
)


#: What the scanner twins are given: frames, where the scan starts (``base``, ``skew``) and stops
#: (``until``), the file's beacon interval, the keys it knows, and the damage done to the bytes.
SCAN_INPUTS = dict(
    frames=frames_st,
    base=st.integers(0, 300),
    interval=st.sampled_from([128, 1024, 4096, 1 << 20]),
    known=st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), max_size=4),
    damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 60),
    until=st.one_of(st.just(-1), st.integers(0, 8000)),
    skew=st.integers(0, 2),
)


def _damaged(frames, damage, cut: int) -> bytes:
    """The frames encoded back to back, bytes flipped (``(at, flip)`` pairs, ``at`` wrapped around the
    data) and ``cut`` bytes cut off the tail: what the scanner twins are given."""
    data = bytearray(b"".join(encode_frame_pure(*f)[0] for f in frames))
    for at, flip in damage:
        if data:
            data[at % len(data)] ^= flip
    return bytes(data[: max(0, len(data) - cut)])


@HYPO
@given(**SCAN_INPUTS)
def test_scan_frames_twins_agree(frames, base, interval, known, damage, cut, until, skew):
    """Random frames (a random key filter, flipped bytes, a cut tail, any start and stop) scan alike."""
    buf = _damaged(frames, damage, cut)
    keymap = {raw: (raw.decode() if take else None) for raw, take in known}
    pos = base + skew  # skew 1-2: a start that is not a frame start (garbage in, same answer out)
    results = []
    for scan in (scan_frames_pure, compiled.scan_frames):
        cols, ends = new_columns(), []
        stop = scan(buf, base, pos, until, interval, dict(keymap), cols, ends)
        results.append((stop, tuple(cols), ends))
    assert results[0] == results[1]


def _buffers(cols: ColumnBuffers) -> tuple:
    """Column buffers as comparable values."""
    return (
        list(cols.keys),
        cols.key_code.tolist(),
        cols.shard_id.tolist(),
        cols.seq.tolist(),
        cols.timestamp_ms.tolist(),
        cols.offset.tolist(),
        bytes(cols.data),
        cols.data_end.tolist(),
    )


@HYPO
@given(
    **SCAN_INPUTS,
    separator=st.sampled_from([b"", b"\n"]),
    before=st.lists(st.binary(max_size=20), max_size=3),
)
def test_scan_columns_twins_agree(frames, base, interval, known, damage, cut, until, skew, separator, before):
    """scan_columns: the same random frames, key filters, damage and bounds give the same buffers (also
    when the buffers already hold messages), and it stops where scan_frames stops."""
    buf = _damaged(frames, damage, cut)
    codes = {raw: (j if take else -1) for j, (raw, take) in enumerate(known)}
    pos = base + skew
    results = []
    for scan in (scan_columns_pure, compiled.scan_columns):
        cols = ColumnBuffers(separator)
        cols.keys.extend(raw.decode() for raw, _ in known)
        for j, payload in enumerate(before):  # messages already there
            cols.key_code.append(0)
            cols.shard_id.append(j)
            cols.seq.append(j)
            cols.timestamp_ms.append(j)
            cols.offset.append(j)
            cols.data += payload
            cols.data_end.append(len(cols.data))
            cols.data += separator
        stop = scan(buf, base, pos, until, interval, dict(codes), cols)
        results.append((stop, _buffers(cols)))
    assert results[0] == results[1]
    frames_cols = new_columns()
    keymap = {raw: (raw.decode() if take else None) for raw, take in known}
    assert results[0][0] == scan_frames_pure(buf, base, pos, until, interval, keymap, frames_cols, None)


@HYPO
@given(
    data=st.binary(max_size=300),
    ends=st.lists(st.integers(-3, 320), max_size=12),
    gap=st.integers(-1, 2),
    kind=st.sampled_from(["bytes", "bytearray"]),
    typecode=st.sampled_from(["q", "i"]),
)
def test_split_payloads_twins_agree(data, ends, gap, kind, typecode):
    """split_payloads and compact_payloads: any buffer, any ends (also out of order or past the end),
    any gap: the same result."""
    buf = bytes(data) if kind == "bytes" else bytearray(data)
    arr = array(typecode, ends)
    assert outcome(compiled.split_payloads, buf, arr, gap) == outcome(split_payloads_pure, buf, arr, gap)
    assert outcome(compiled.compact_payloads, buf, arr, gap) == outcome(compact_payloads_pure, buf, arr, gap)


@HYPO
@given(
    data=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")),  # newlines inside payloads too
    ends=st.lists(st.integers(-3, 320), max_size=12),
    first=st.integers(-2, 14),
    count=st.integers(-2, 14),
    gap=st.integers(-1, 2),
    kind=st.sampled_from(["bytes", "bytearray"]),
    typecode=st.sampled_from(["q", "i"]),
)
@example(data=b"ab\ncd\n", ends=[2, 5], first=0, count=2, gap=1, kind="bytes", typecode="q")
def test_payload_lines_twins_agree(data, ends, first, count, gap, kind, typecode):
    """payload_lines: any buffer, any ends and range (also out of order, past the end, or a payload holding
    a newline): the same lines, the same None, the same error."""
    buf = bytes(data) if kind == "bytes" else bytearray(data)
    arr = array(typecode, sorted(ends) if count % 2 else ends)  # in order half the time: the usual case
    args = (buf, arr, first, first + count, gap)
    assert outcome(compiled.payload_lines, *args) == outcome(payload_lines_pure, *args)


# -- whole files through the reader, on each twin ------------------------------------------------------

writes_st = st.lists(
    st.tuples(st.sampled_from(["a", "orders", "ruststream-internal"]), st.binary(max_size=700)), max_size=40
)


def _end(end):
    """A ReadEnd as comparable values (exceptions compare by identity)."""
    return None if end is None else (end.reason, end.offset, end.trailing_bytes, repr(end.error))


def _read_everything(path: Path, twin, monkeypatch):
    scan, scan_cols = twin
    monkeypatch.setattr(frame_decode, "scan_frames", scan)  # where the reader goes down to the scanner
    monkeypatch.setattr(frame_decode, "scan_columns", scan_cols)
    out: list[tuple[object, ...]] = []
    for mode in ("iterate", "columns", "buffers", "salvage"):
        try:
            with StreamReader(path, errors="raise", on_bad_frames="skip" if mode == "salvage" else "error") as r:
                if mode == "iterate":
                    got = [tuple(m) for m in r]
                elif mode == "columns":
                    got = [tuple(c) for c in r.read_columns()]
                else:
                    got = [_buffers(r.read_column_buffers(separator=b"\n"))]
                out.append(("ok", got, _end(r.end), [region.to_dict() for region in r.damaged]))
        except Exception as exc:  # noqa: BLE001
            out.append(("error", type(exc).__name__, str(exc)))
    with StreamReader(path, errors="stop", keys=["orders"]) as r:
        out.append(("stop", [tuple(m) for m in r], _end(r.end), r.beacons_seen))
    return out


@HYPO
@given(
    writes=writes_st,
    interval=st.sampled_from([1024, 2048]),
    damage=st.lists(st.tuples(st.integers(128, 40_000), st.integers(1, 255)), max_size=2),
    cut=st.integers(0, 40),
    eos=st.booleans(),
)
def test_stream_reader_on_each_twin_agrees(tmp_path_factory, monkeypatch, writes, interval, damage, cut, eos):
    path = tmp_path_factory.getbasetemp() / f"twin{next(_counter)}.ss"
    with StreamWriter(path, beacon_interval=interval, created_at_ms=1, clock_ms=itertools.count(1000).__next__) as w:
        for key, payload in writes:
            w.write(key, payload)
        if eos:
            w.write_eos()
    data = bytearray(path.read_bytes())
    for at, flip in damage:
        if at < len(data):
            data[at] ^= flip
    path.write_bytes(bytes(data[: len(data) - cut] if cut < len(data) - 128 else data))
    with monkeypatch.context() as m:
        pure = _read_everything(path, (scan_frames_pure, scan_columns_pure), m)
    with monkeypatch.context() as m:
        fast = _read_everything(path, (compiled.scan_frames, compiled.scan_columns), m)
    assert pure == fast


# -- stdio lines --------------------------------------------------------------------------------------

ts_st = st.one_of(
    st.builds(
        "{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}".format,
        st.integers(0, 9999),
        st.integers(0, 13),
        st.integers(0, 32),
        st.integers(0, 25),
        st.integers(0, 61),
        st.integers(0, 61),
    ),
    st.sampled_from(["2024-02-29T23:59:59", "2023-02-29T00:00:00", "-0001-01-01T00:00:00", "+2024-01-01T00:00:00"]),
)
frac_st = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,11}", fullmatch=True))
key_st = st.one_of(
    st.sampled_from(["orders", "a", "k" * 249, "k" * 250, "", "x y", "é"]),
    st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True),
)
num_st = st.one_of(st.integers(0, 2**64 + 5).map(str), st.sampled_from(["+7", "-1", "", "1e3", " 4"]))
sep_st = st.sampled_from([" | ", " | ", " | ", "|", " |", "  |  "])


@st.composite
def lines(draw) -> str:
    """Canonical headers and near misses: each field, separator and tail varied."""
    fields = [draw(ts_st) + draw(frac_st), draw(key_st), draw(num_st)]
    if draw(st.booleans()):
        fields.append(draw(num_st))
    if draw(st.integers(0, 5)) == 0:
        fields.append(draw(key_st))
    head = "[" + draw(sep_st).join(fields) + draw(st.sampled_from(["]", "]", "", " ]"]))
    tail = draw(st.one_of(st.text(max_size=20), st.sampled_from([" payload", "  x ", "\t", " ", ""])))
    return draw(st.sampled_from(["", "", "", "x", " "])) + head + tail


@HYPO
@given(line=st.one_of(lines(), st.text(max_size=40)), lineno=st.one_of(st.none(), st.integers(1, 99)))
@example(line="[2024-01-02T03:04:05.123 | orders | 17] {}", lineno=None)
@example(line="[2024-13-02T03:04:05 | orders | 17] x", lineno=3)
@example(line="[2024-01-02T03:04:05 | orders | 18446744073709551616] x", lineno=3)
def test_parse_line_twins_agree(line, lineno):
    assert outcome(compiled.parse_fields, line, lineno) == outcome(stdio_line.parse_fields_pure, line, lineno)


@HYPO
@given(
    ts=st.one_of(st.integers(-(10**15), 10**15), st.integers(-(2**70), 2**70)),
    key=key_st,
    seq=st.integers(0, 2**64 - 1),
    payload=st.text(max_size=30),
)
def test_format_line_twins_agree(ts, key, seq, payload):
    assert outcome(compiled.format_line, ts, key, seq, payload) == outcome(
        stdio_line.format_line_pure, ts, key, seq, payload
    )


# -- file deliveries ----------------------------------------------------------------------------------

from nbkit.wire import envelope as _envelope  # noqa: E402 (this section is appended; its imports are its own)
from nbkit.wire.deliveries import file_deliveries_pure  # noqa: E402


@st.composite
def stored_payloads(draw):
    """A payload as a file stores it: plain bytes, an envelope (valid, or cut or bent), or something odd."""
    body = draw(st.binary(max_size=40))
    headers = draw(st.dictionaries(st.sampled_from(["trace", "x-ruststream-retry-count", "Kind"]), st.text(max_size=8)))
    enveloped = _envelope.encode(headers, body, force_text=draw(st.booleans()))
    return draw(
        st.sampled_from(
            [body, enveloped, enveloped[: len(enveloped) // 2], b"rs" + body, b"rs2:" + body, b"r", b"", enveloped]
        )
    )


def _message(draw, payload):
    return (
        draw(st.sampled_from(["orders", "audit", "ü"])),
        draw(st.integers(0, 3)),
        draw(st.integers(0, 2**64 - 1)),
        draw(st.integers(0, MAX_TIMESTAMP_MS)),
        payload,
        draw(st.integers(64, 10**9)),
        draw(st.integers(64, 10**9)),
    )


@st.composite
def message_lists(draw):
    """Messages as the reader yields them (7-tuples, a NamedTuple too), now and then a wrong shape or type."""
    messages = []
    for _ in range(draw(st.integers(0, 6))):
        fields = _message(draw, draw(stored_payloads()))
        shape = draw(st.integers(0, 12))
        if shape == 0:
            fields = fields[: draw(st.integers(0, 6))] + fields[7:]  # too few
        elif shape == 1:
            fields = (*fields, "extra")
        elif shape == 2:
            messages.append(list(fields))
            continue
        elif shape == 3:
            messages.append(draw(st.sampled_from([None, 5, "orders"])))
            continue
        elif shape == 4:
            fields = (*fields[:4], draw(st.sampled_from(["text", bytearray(b"rs1:"), memoryview(b"x")])), *fields[5:])
        elif shape == 5:
            fields = file_reader.Message(*fields)
        messages.append(fields)
    return messages


def _made(fn, messages):
    """The deliveries made (as tuples of their fields), or the error where making one failed."""
    made = []
    try:
        for delivery in fn(messages, "work", lambda *fields: fields):
            made.append(tuple(bytes(f) if isinstance(f, memoryview) else f for f in delivery))
    except Exception as exc:  # noqa: BLE001 - the point is to compare any error
        made.append(("error", type(exc).__name__, str(exc)))
    return made


@HYPO
@given(messages=message_lists())
@example(messages=[("orders", 0, 17, 1704067200000, b'{"id": 1}', 100, 140)])
@example(messages=[("orders", 0, 1, 0, b"rs1:AAAAAA==", 64, 80), ("orders", 0, 2, 0, b"rs", 80, 90)])
def test_file_deliveries_twins_agree(messages):
    assert _made(compiled.file_deliveries, messages) == _made(file_deliveries_pure, messages)


def test_file_deliveries_take_messages_one_at_a_time():
    """A message is taken from the source only when its delivery is asked for (both twins)."""
    for fn in (compiled.file_deliveries, file_deliveries_pure):
        source = iter([("k", 0, n, 0, b"{}", 64 * n, 64 * n + 40) for n in range(1, 4)])
        deliveries = fn(source, "work", lambda *fields: fields[4])
        assert next(deliveries) == 1
        assert [m[2] for m in source] == [2, 3]
