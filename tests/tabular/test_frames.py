"""read_stream / read_pipe: schema and values on the upstream sample and on files the runtime wrote."""

from __future__ import annotations

import datetime as dt
import io
import json
import pickle

import pandas as pd
import pytest

from nbkit import App, FileBroker, FilePosition, HandlerOutcome, StdioBroker, StreamWriter
from nbkit.notebook.session import Session
from nbkit.tabular import BYTES_DTYPE, FRAME_COLUMNS
from nbkit.tabular.frames import concat_frames, read_pipe, read_stream
from nbkit.wire import envelope

DTYPES = {
    "stream_key": "category",
    "shard_id": "Int64",
    "seq": "Int64",
    "timestamp": "datetime64[ms, UTC]",
    "size": "Int64",
    "payload": "object",
    "retry_count": "Int64",
    "attempt": "Int64",
    "headers": "object",
    "offset": "Int64",
    "transport": "category",
}


def test_sample_schema_and_values(sample_path):
    df = read_stream(sample_path)
    assert tuple(df.columns) == FRAME_COLUMNS
    assert {c: str(t) for c, t in df.dtypes.items()} == DTYPES
    assert len(df) == 27  # 28 frames minus the EOS mark
    counts = df.groupby("stream_key", observed=True).size().to_dict()
    assert counts == {"breakpoint": 4, "event": 22, "file": 1}
    events = df[df["stream_key"] == "event"]
    assert list(events["seq"]) == list(range(1, 23))
    first = df.iloc[0]
    assert first["stream_key"] == "file" and first["offset"] == 128 and first["size"] == 134
    assert first["timestamp"] == pd.Timestamp("2023-09-15T08:39:37.912Z")
    assert df["timestamp"].iloc[-1] == pd.Timestamp("2023-09-15T08:39:38.564Z")
    assert (df["retry_count"] == 0).all() and (df["attempt"] == 1).all()
    assert set(df["transport"]) == {"file"}
    assert df.attrs["read_end"].reason == "eos"
    assert str(df.attrs["read_end"]).startswith("ended at the end-of-stream mark")


def test_include_internal_keeps_eos(sample_path):
    df = read_stream(sample_path, include_internal=True)
    assert len(df) == 28
    assert df.iloc[-1]["stream_key"] == "SEA_STREAMER_INTERNAL" and df.iloc[-1]["payload"] == "EOS"
    assert df.iloc[-1]["offset"] == 3425


def test_json_payloads_expand_fields(sample_path):
    df = read_stream(sample_path, payload="json", keys="file")
    assert len(df) == 1
    assert json.loads(df.loc[0, "payload"])["crate_name"] == "vec_map"  # the JSON text
    assert df.loc[0, "payload.crate_name"] == "vec_map"
    assert df.loc[0, "payload.id"] == 1


def test_objects_payloads_are_parsed_with_the_same_fields(sample_path):
    df = read_stream(sample_path, payload="objects", keys="file")
    assert df.loc[0, "payload"]["crate_name"] == "vec_map"
    as_json = read_stream(sample_path, payload="json", keys="file")
    fields = [c for c in as_json.columns if c.startswith("payload.")]
    assert [c for c in df.columns if c.startswith("payload.")] == fields
    pd.testing.assert_frame_equal(df[fields], as_json[fields])


def test_the_old_columns_mode_says_to_pass_json(sample_path):
    with pytest.raises(ValueError, match='payload="json"'):
        read_stream(sample_path, payload="columns")  # type: ignore[arg-type]


JSON_EDGE_PAYLOADS = [
    b'{"n": 123456789012345678901234567890}',  # beyond 64 bits: an exact int, as json.loads gives
    b"-9223372036854775809",
    b'{"x": NaN, "y": -Infinity}',  # Python's extensions: the standard library's values
    b'"\\ud800"',  # a lone surrogate escape
    b"[1e400]",
    b'{"a": 1, "a": 2}',
    b'{"s": "\\ud800"}',  # a field no str column can hold: the payload.s column is object dtype
    b"5.8100000000000005",
    b"not json",  # kept as text
    b"\xff\xfe binary",  # kept as bytes
    b"",
]


def test_objects_mode_matches_the_standard_library(tmp_path):
    """Every payload's value is what ``json.loads`` makes of it (text if not JSON, bytes if not UTF-8),
    whichever parser read it: mixed into plain JSON and alone."""
    path = tmp_path / "edge.ss"
    with StreamWriter(path) as w:
        for i, payload in enumerate(JSON_EDGE_PAYLOADS):
            w.write("edge", payload)
            w.write("plain", b'{"i": %d}' % i)
    for keys in ("edge", None):
        df = read_stream(path, payload="objects", keys=keys)
        got = list(df[df["stream_key"] == "edge"]["payload"])
        for raw, value in zip(JSON_EDGE_PAYLOADS, got, strict=True):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                assert value == raw
                continue
            try:
                expected = json.loads(text)
            except ValueError:
                expected = text
            assert type(value) is type(expected) and repr(value) == repr(expected), raw
        column = df["payload.s"].dropna()
        assert column.dtype == object and list(column) == ["\ud800"]
        as_json = read_stream(path, payload="json", keys=keys)
        assert as_json["payload"].tolist() == read_stream(path, keys=keys)["payload"].tolist()  # text, as auto
        pd.testing.assert_frame_equal(as_json[list(df.columns[11:])], df[df.columns[11:]])


@pytest.mark.parametrize("mode, kind", [("bytes", bytes), ("text", str), ("auto", str)])
def test_payload_modes(sample_path, mode, kind):
    df = read_stream(sample_path, payload=mode, keys=["breakpoint"])
    assert all(isinstance(p, kind) for p in df["payload"])


def _bytes_sample(path) -> list[bytes]:
    """Write payloads of every kind (text, binary, empty, one with an rs2 envelope) and return them."""
    payloads = [b'{"id": 1}', bytes(range(256)), b"", b"\xff\xfe", b"rs not an envelope", b"last"]
    with StreamWriter(path) as w:
        for i, body in enumerate(payloads):
            w.write("blobs" if i % 2 else "texts", body)
    return payloads


def test_bytes_payload_is_an_arrow_binary_column_of_the_same_values(tmp_path):
    path = tmp_path / "blobs.ss"
    payloads = _bytes_sample(path)
    df = read_stream(path, payload="bytes")
    assert df["payload"].dtype == BYTES_DTYPE
    assert str(df["payload"].dtype) == "large_binary[pyarrow]"
    assert df["payload"].tolist() == payloads  # what the object column held
    assert all(type(v) is bytes for v in df["payload"])
    assert df["payload"].iloc[1] == bytes(range(256)) and type(df["payload"].iloc[1]) is bytes
    assert df["size"].tolist() == [len(p) for p in payloads]
    assert pickle.loads(pickle.dumps(df)).equals(df)
    keyed = read_stream(path, payload="bytes", keys="blobs")  # a subset: offsets into the buffer still right
    assert keyed["payload"].tolist() == payloads[1::2]


def test_bytes_payload_with_envelopes_is_unwrapped_row_by_row(tmp_path):
    path = tmp_path / "env.ss"
    wrapped = envelope.encode({"x-trace": b"\x00\x01"}, b"inner \xff", force_text=False)
    with StreamWriter(path) as w:
        w.write("k", b"plain")
        w.write("k", wrapped)
        w.write("k", b"")
    df = read_stream(path, payload="bytes")
    assert df["payload"].dtype == BYTES_DTYPE
    assert df["payload"].tolist() == [b"plain", b"inner \xff", b""]
    assert df["headers"].tolist() == [{}, envelope.decode(wrapped)[0], {}]
    assert df["headers"].iloc[1]["x-trace"] in ("\x00\x01", b"\x00\x01")
    assert df["size"].tolist() == [5, 7, 0]


def test_bytes_payload_empty_frame_and_concat(tmp_path):
    empty = tmp_path / "empty.ss"
    StreamWriter(empty).close()
    nothing = read_stream(empty, payload="bytes")
    assert len(nothing) == 0 and nothing["payload"].dtype == BYTES_DTYPE
    path = tmp_path / "blobs.ss"
    payloads = _bytes_sample(path)
    df = read_stream(path, payload="bytes")
    piped = read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hello"], payload="bytes")
    assert piped["payload"].dtype == BYTES_DTYPE and piped["payload"].tolist() == [b"hello"]
    both = concat_frames(df, piped, nothing)
    assert both["payload"].dtype == BYTES_DTYPE
    assert both["payload"].tolist() == [*payloads, b"hello"]


@pytest.mark.parametrize("payload", ["bytes", "json", "auto"])
def test_headers_are_read_only_dicts_so_no_row_can_change_another(tmp_path, payload):
    path = tmp_path / "blobs.ss"
    _bytes_sample(path)
    with StreamWriter(path) as w:
        w.write("blobs", envelope.encode({"x-ruststream-retry-count": "2"}, b"{}", force_text=False))
    df = read_stream(path, payload=payload)
    first, last = df["headers"].iloc[0], df["headers"].iloc[-1]
    assert isinstance(first, dict) and first == {} and last == {"x-ruststream-retry-count": "2"}
    for change in (
        lambda h: h.__setitem__("mine", "1"),
        lambda h: h.update(mine="1"),
        lambda h: h.setdefault("mine", "1"),
        lambda h: h.pop("x-ruststream-retry-count"),
        lambda h: h.clear(),
    ):
        for headers in (first, last):
            with pytest.raises(TypeError, match=r"read-only: dict\(headers\)"):
                change(headers)
    assert df["headers"].tolist() == [{}] * (len(df) - 1) + [{"x-ruststream-retry-count": "2"}]
    mine = last.copy()  # the copy is a plain dict, yours to change
    mine["mine"] = "1"
    assert type(mine) is dict and last == {"x-ruststream-retry-count": "2"}


def test_headers_survive_pickle_deepcopy_and_json(tmp_path):
    import copy

    path = tmp_path / "blobs.ss"
    _bytes_sample(path)
    with StreamWriter(path) as w:
        w.write("blobs", envelope.encode({"k": "v"}, b"x", force_text=False))
    df = read_stream(path, payload="bytes")
    back = pickle.loads(pickle.dumps(df))
    pd.testing.assert_frame_equal(back, df)
    assert copy.deepcopy(df["headers"].iloc[-1]) == {"k": "v"}
    assert json.dumps(df["headers"].tolist()[-2:]) == '[{}, {"k": "v"}]'


def test_bad_payload_mode(sample_path):
    with pytest.raises(ValueError, match="payload must be one of"):
        read_stream(sample_path, payload="yaml")


def test_time_window_and_sequence_start(sample_path):
    start = dt.datetime(2023, 9, 15, 8, 39, 38, 500_000, tzinfo=dt.UTC)
    df = read_stream(sample_path, start=start)
    assert (df["timestamp"] > pd.Timestamp(start)).all()
    assert len(df) == 20  # every message after 08:39:38.500 (checked against StreamReader)
    df = read_stream(sample_path, end="2023-09-15T08:39:38.490Z")
    assert list(df["stream_key"]) == ["file", "breakpoint", "breakpoint", "breakpoint", "event"]
    df = read_stream(sample_path, keys="event", start=FilePosition.sequence(20))
    assert list(df["seq"]) == [20, 21, 22]
    # several keys (or all): each key from its own sequence number 3 on
    every = read_stream(sample_path)
    df = read_stream(sample_path, start=FilePosition.sequence(3))
    assert df["offset"].tolist() == every.loc[every["seq"] >= 3, "offset"].tolist()


def test_binary_payloads_auto(tmp_path):
    path = tmp_path / "bin.ss"
    with StreamWriter(path, beacon_interval=1024) as w:
        w.write("blobs", bytes(range(256)))
        w.write("blobs", b"text")
    df = read_stream(path)
    assert df["payload"].tolist() == [bytes(range(256)), "text"]
    assert df["size"].tolist() == [256, 4]


def test_truncated_tail_warns_and_keeps_messages(tmp_path):
    path = tmp_path / "t.ss"
    with StreamWriter(path) as w:
        for i in range(5):
            w.write("k", b"message %d" % i)
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    with pytest.warns(UserWarning, match="trailing bytes"):
        df = read_stream(path)
    assert len(df) == 4


def test_runtime_written_file_has_attempts_and_dead_letters(tmp_path):
    path = tmp_path / "orders.ss"
    broker = FileBroker(path)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    def always_retry(delivery):
        return HandlerOutcome.retry_after(4)

    session = Session(App(broker))
    broker.publish("orders", '{"id": 1}')
    session.run()
    df = read_stream(path)
    assert list(df["stream_key"]) == ["orders", "orders", "orders", "orders.dead"]
    assert list(df["retry_count"]) == [0, 1, 2, 3]
    assert list(df["attempt"]) == [1, 2, 3, 4]
    assert df["payload"].tolist() == ['{"id": 1}'] * 4
    assert df.loc[1, "headers"] == {"stream-sequence": "1", "x-ruststream-retry-count": "1"}
    gaps = df["timestamp"].diff().dt.total_seconds().tolist()[1:]
    assert gaps == [4.0, 4.0, 0.0]


def test_read_pipe_from_captured_stdout(tmp_path):
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=out)

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def retry(delivery):
        return HandlerOutcome.retry_after(0)

    Session(App(broker)).run()
    df = read_pipe(lines=out)
    assert tuple(df.columns) == FRAME_COLUMNS
    assert list(df["stream_key"]) == ["jobs.retry", "jobs.retry"]
    assert list(df["seq"]) == [0, 1]
    assert df["payload"].tolist() == ["a", "b"]
    assert list(df["attempt"]) == [2, 2]
    assert list(df["offset"]) == [1, 2]
    assert set(df["transport"]) == {"pipe"}
    assert df["timestamp"].iloc[0] == pd.Timestamp("2024-01-01T00:00:00Z")
    # the same from a file and from text in memory
    saved = tmp_path / "stdout.txt"
    saved.write_text("\n".join(out) + "\n")
    pd.testing.assert_frame_equal(read_pipe(saved), df)
    pd.testing.assert_frame_equal(read_pipe(str(saved)), df)
    pd.testing.assert_frame_equal(read_pipe(io.StringIO("\n".join(out))), df)


def test_read_pipe_fills_missing_fields_like_the_consumer():
    df = read_pipe(lines=["hello", "[k | 5] x", "[k] y"])
    assert list(df["stream_key"]) == ["broadcast", "k", "k"]
    assert list(df["seq"]) == [0, 5, 5]  # an explicit seq sets the counter (upstream quirk)
    assert df["timestamp"].isna().all()


def test_read_pipe_reports_the_bad_line():
    from nbkit import LineParseError

    with pytest.raises(LineParseError, match="line 2"):
        read_pipe(lines=["[a] ok", "[a | b] bad"])


def test_concat_file_and_pipe(sample_path):
    both = concat_frames(read_stream(sample_path), read_pipe(lines=["[event] x"]))
    assert len(both) == 28
    assert str(both["stream_key"].dtype) == "category"
    assert both["transport"].value_counts().to_dict() == {"file": 27, "pipe": 1}


# -- payload="json": the fields, columnar ----------------------------------------------------

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_json_scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
    st.sampled_from(["2024-01-02T03:04:05", "2024-01-02"]),
)


@st.composite
def _json_payloads(draw) -> list[bytes]:
    """Records with the same fields (the usual case), with now and then a twist the fast path must refuse."""
    import json

    names = draw(st.lists(st.sampled_from(["a", "b", "c", "ts"]), min_size=0, max_size=4, unique=True))
    kinds = {name: draw(_json_scalars) for name in names}
    out = []
    for _ in range(draw(st.integers(1, 12))):
        record = {name: draw(st.one_of(st.just(kinds[name]), _json_scalars)) for name in names}
        text = json.dumps(record, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
        twists = ["list", "empty", "newline", "dup", "nested", "notjson", "notutf8"]
        twist = draw(st.sampled_from([None] * 8 + twists))
        if twist == "list":
            text = "[1, 2]"
        elif twist == "empty":
            text = ""
        elif twist == "newline":
            text = text.replace("{", "{\n", 1)
        elif twist == "dup" and names:
            text = text[:-1] + (", " if record else "") + f'"{names[0]}": 1}}'
        elif twist == "nested":
            text = '{"a": {"x": 1}}'
        elif twist == "notjson":
            text = "not json"
        elif twist == "notutf8":  # JSON pyarrow parses without checking the text's UTF-8
            out.append(b'{"a": "\xff"}')
            continue
        out.append(text.encode())
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=_json_payloads())
@example(payloads=[b'{"a": 9223372036854775808}', b'{"a": 1}'])  # pyarrow would make it a double
@example(payloads=[b'{"t": "2024-01-02T03:04:05", "n": 1.5}', b'{"t": "x", "n": 2}'])  # text, not timestamps
@example(payloads=[b'{"a": 1}', b'{"a": null}'])
@example(payloads=[b'{"a": 1}', b'{"a": 2.5}', b'{"a": 3}'])  # in pieces of one payload: int, double, int
@example(payloads=[b'{"a": "x"}', b'{"a": "\xff"}'])  # pyarrow.json does not check UTF-8
@example(payloads=[b'{"a": 1, "b": "x"}', b'{"b": "y", "a": 2}'])  # pieces whose fields come in another order
@pytest.mark.parametrize("piece_bytes", [1, 30, 24 << 20])  # pieces of the buffer parsed apart, or one
def test_json_mode_has_the_objects_modes_fields(tmp_path_factory, payloads, piece_bytes, monkeypatch):
    """payload="json" and "objects" (pyarrow where it is exact, the row-by-row path elsewhere) give
    the payload.<field> columns of the row-by-row path alone; "json" keeps the text "auto" gives."""
    path = tmp_path_factory.mktemp("cols") / "c.ss"
    with StreamWriter(path, created_at_ms=1) as w:
        for p in payloads:
            w.write("k", p, timestamp_ms=5)
    from nbkit.tabular import payloads as payload_module

    with monkeypatch.context() as m:  # the reference: no pyarrow, no compiled field parser: row by row only
        m.setattr(payload_module, "_arrow_table", lambda data: None)
        m.setattr(payload_module, "_FLAT_COMPILED", False)
        as_objects = read_stream(path, payload="objects")
    monkeypatch.setattr(payload_module, "PIECE_BYTES", piece_bytes)
    as_json = read_stream(path, payload="json")
    pd.testing.assert_frame_equal(read_stream(path, payload="objects"), as_objects)
    fields = [c for c in as_objects.columns if c.startswith("payload.")]
    assert [c for c in as_json.columns if c.startswith("payload.")] == fields
    pd.testing.assert_frame_equal(as_json[fields], as_objects[fields])
    assert as_json["payload"].tolist() == read_stream(path)["payload"].tolist()


@settings(max_examples=80, deadline=None)
@given(payloads=_json_payloads())
@example(payloads=[b'{"a": 1,\n "b": "x"}', b'{"b": "y", "a": 2.5}'])  # a newline inside, fields reordered
def test_field_columns_of_a_list_of_payloads_are_the_row_by_row_columns(payloads):
    """The list path (pipes, enveloped files): the compiled field parser or pyarrow, where they read the
    payloads, give exactly the row-by-row path's columns."""
    from nbkit.tabular.payloads import arrow_json_fields, json_field_columns

    fast = arrow_json_fields(payloads)
    if fast is None:
        return
    reference = json_field_columns(payloads, arrow=False)
    assert list(fast) == list(reference)
    for name, column in fast.items():
        pd.testing.assert_series_equal(column, reference[name])


def test_json_mode_keeps_text_arrow_backed(sample_path):
    df = read_stream(sample_path, payload="json", keys="breakpoint")
    assert df["payload"].dtype == pd.Series([], dtype="str").dtype
    objects = read_stream(sample_path, payload="objects", keys="breakpoint")
    assert df.loc[0, "payload.id"] == objects.loc[0, "payload.id"]


def _flip_payload_byte(path, message_index: int) -> None:
    """Flip the last payload byte of the ``message_index``-th message (so its checksum fails)."""
    from nbkit import StreamReader

    with StreamReader(path) as r:
        victim = list(r)[message_index]
    raw = bytearray(path.read_bytes())
    raw[victim.end - 4] ^= 0xFF
    path.write_bytes(raw)


def test_on_bad_frames_skip_and_warn_record_the_damage(tmp_path):
    from nbkit import ChecksumError, DamageWarning

    path = tmp_path / "damaged.ss"
    with StreamWriter(path, beacon_interval=1024, created_at_ms=0, clock_ms=lambda: 0) as w:
        for i in range(300):
            w.write("k", f"message {i}".encode())
    _flip_payload_byte(path, 60)
    with pytest.raises(ChecksumError, match="on_bad_frames"):
        read_stream(path)
    frame = read_stream(path, on_bad_frames="skip")
    (region,) = frame.attrs["damaged"]
    assert set(region) == {"start", "end", "problem", "skipped", "lost"} and "checksum" in region["problem"]
    assert frame["payload"].iloc[59] == "message 59" and "message 60" not in set(frame["payload"])
    assert frame["payload"].iloc[-1] == "message 299" and 280 < len(frame) < 300
    with pytest.warns(DamageWarning, match="checksum"):
        warned = read_stream(path, on_bad_frames="warn")
    pd.testing.assert_frame_equal(warned, frame)


# -- payload="json" read in slices ---------------------------------------------------------------------


def _slices_file(path, twist: str) -> None:
    """Records over three keys, small beacon interval, with a twist in the middle of the file."""
    with StreamWriter(path, beacon_interval=1024, created_at_ms=1) as w:
        for i in range(120):
            payload = b'{"id": %d, "item": "x%d", "price": %d.5}' % (i, i % 7, i)
            if i == 70 and twist == "envelope":
                payload = envelope.encode({"x-trace": "t"}, payload, force_text=True)
            elif i == 70 and twist == "not-utf8":
                payload = b'{"id": 70, "item": "\xff", "price": 1.5}'
            elif i == 70 and twist == "int-then-double":
                payload = b'{"id": 70.5, "item": "x", "price": 1.5}'
            elif i == 70 and twist == "new-field":
                payload = b'{"id": 70, "item": "x", "price": 1.5, "extra": true}'
            w.write(("orders", "audit", "refunds")[i % 3], payload, timestamp_ms=10 + i)


@pytest.mark.parametrize(
    "twist", ["none", "envelope", "not-utf8", "int-then-double", "new-field", "damaged", "truncated"]
)
@pytest.mark.parametrize("slice_bytes", [1, 300, 4096])
def test_json_read_in_slices_is_the_read_in_one_go(tmp_path, monkeypatch, twist, slice_bytes):
    """read_stream(payload="json") reads a file in slices whose fields parse while the next is read: the
    frame (and its attrs: damage skipped, how the read ended) is the one a single read gives, whatever
    the slice size, keys kept or payloads met."""
    import warnings

    from nbkit.tabular import payloads as payload_module
    from nbkit.tabular import reader as reader_module

    path = tmp_path / "s.ss"
    _slices_file(path, twist)
    if twist == "damaged":
        _flip_payload_byte(path, 50)
    elif twist == "truncated":
        path.write_bytes(path.read_bytes()[:-7])

    def read(**options):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frame = read_stream(path, payload="json", on_bad_frames="skip", **options)
        return frame, [str(w.message) for w in caught]

    monkeypatch.setattr(reader_module, "_SLICE_BYTES", 1 << 40)
    whole = {keys: read(keys=keys) for keys in (None, "audit")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the truncated tail's warning, checked above
        objects = read_stream(path, payload="objects", on_bad_frames="skip")
    monkeypatch.setattr(reader_module, "_SLICE_BYTES", slice_bytes)
    monkeypatch.setattr(payload_module, "PIECE_BYTES", 200)
    for keys, (want, said) in whole.items():
        got, told = read(keys=keys)
        pd.testing.assert_frame_equal(got, want)
        assert got.attrs["damaged"] == want.attrs["damaged"] and told == said
        assert str(got.attrs.get("read_end")) == str(want.attrs.get("read_end"))
    if twist == "damaged":
        assert whole[None][0].attrs["damaged"]
    fields = [c for c in objects.columns if c.startswith("payload.")]
    pd.testing.assert_frame_equal(whole[None][0][fields], objects[fields])


@pytest.mark.parametrize("mode", ["auto", "bytes", "text", "json", "objects"])
def test_a_builder_given_several_reads_builds_the_frame_of_one(tmp_path, mode):
    """FrameBuilder.extend with the column buffers of consecutive reads (the keys met in another order
    in each): the frame of one read of them all, in every payload mode."""
    from nbkit import StreamReader
    from nbkit.tabular import FrameBuilder, payload_separator

    path = tmp_path / "s.ss"
    _slices_file(path, "not-utf8")
    with StreamReader(path) as reader:
        whole = FrameBuilder(mode)
        whole.extend(reader.read_column_buffers(separator=payload_separator(mode)))
    pieces = FrameBuilder(mode)
    with StreamReader(path) as reader:
        while reader.end is None:
            pieces.extend(reader.read_column_buffers(separator=payload_separator(mode), until=reader.pos + 700))
    pd.testing.assert_frame_equal(pieces.frame("file"), whole.frame("file"))
    pd.testing.assert_frame_equal(pieces.frame("file", release=True), whole.frame("file"))


def test_seq_is_signed_so_arithmetic_is_exact(tmp_path):
    path = tmp_path / "mixed.ss"
    with StreamWriter(path) as w:
        for _ in range(60):
            w.write("orders", b"{}")
        w.write("audit", b"{}")
    df = read_stream(path)
    assert str(df["seq"].dtype) == "Int64" and str(df["shard_id"].dtype) == "Int64"
    assert df["seq"].diff().iloc[-1] == 1 - 60  # -59, not 2**64 - 59
    assert str((df["seq"] - df["retry_count"]).dtype) == "Int64"


def test_seq_above_the_signed_range_keeps_uint64_and_warns(tmp_path):
    from nbkit.tabular.builder import UnsignedFallbackWarning

    path = tmp_path / "huge.ss"
    with StreamWriter(path) as w:
        w.write("orders", b"{}", seq=(1 << 64) - 1)
    with pytest.warns(UnsignedFallbackWarning, match="above 2\\*\\*63 - 1"):
        df = read_stream(path)
    assert str(df["seq"].dtype) == "UInt64" and int(df["seq"].iloc[0]) == (1 << 64) - 1


@pytest.mark.parametrize("mode", ["json", "objects"])
def test_fields_some_keys_lack_stay_integers_and_booleans(tmp_path, mode):
    """A field missing from some records: Int64 / boolean (not float64 / object); with dtype_backend="pyarrow"
    Arrow types with nulls. Where every record has it, numpy int64 / bool as before."""
    path = tmp_path / "mixed.ss"
    with StreamWriter(path) as w:
        for i in range(6):
            record = {"order_id": i, "paid": i % 3 == 0, "price": i / 2} if i % 2 else {"note": f"n{i}"}
            w.write("orders" if i % 2 else "notes", json.dumps(record).encode())
    df = read_stream(path, payload=mode)
    assert str(df["payload.order_id"].dtype) == "Int64" and str(df["payload.paid"].dtype) == "boolean"
    assert df["payload.order_id"].tolist() == [pd.NA, 1, pd.NA, 3, pd.NA, 5]
    assert df["payload.paid"].tolist() == [pd.NA, False, pd.NA, True, pd.NA, False]
    assert str(df["payload.price"].dtype) == "float64" and str(df["payload.note"].dtype) == "str"
    only = read_stream(path, payload=mode, keys="orders")
    assert str(only["payload.order_id"].dtype) == "int64" and str(only["payload.paid"].dtype) == "bool"
    if mode == "json":
        arrow = read_stream(path, payload=mode, dtype_backend="pyarrow")
        assert str(arrow["payload.order_id"].dtype) == "int64[pyarrow]"
        assert str(arrow["payload.paid"].dtype) == "bool[pyarrow]"
        assert arrow["payload.order_id"].tolist() == df["payload.order_id"].tolist()
    lines = [f"[orders] {json.dumps({'n': 1})}", "[orders] {}", f"[orders] {json.dumps({'n': 3})}"]
    piped = read_pipe(lines=lines, payload=mode)
    assert str(piped["payload.n"].dtype) == "Int64" and piped["payload.n"].tolist() == [1, pd.NA, 3]


def test_text_mode_is_str_dtype(tmp_path):
    path = tmp_path / "t.ss"
    with StreamWriter(path) as w:
        w.write("k", b"plain")
        w.write("k", b"\xff bad")
    df = read_stream(path, payload="text")
    assert df["payload"].dtype == "str" and df["payload"].tolist() == ["plain", "\ufffd bad"]
