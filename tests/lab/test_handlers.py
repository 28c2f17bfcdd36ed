"""The viewer's JSON pages through a real Jupyter Server (pytest-jupyter): pages, filters, locate,
damage, bounds, escaping, authentication and paths outside the root."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from tornado.httpclient import HTTPClientError

from nbkit.lab.pages import MAX_ROWS, PREVIEW_BYTES
from nbkit.transport.file_info import summarize
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire.envelope import encode

T0 = 1_704_067_200_000


def _write(path: Path, n: int, *, interval: int = 1 << 20, payload=None) -> None:
    with StreamWriter(path, beacon_interval=interval, created_at_ms=T0, clock_ms=lambda: T0) as w:
        for i in range(n):
            key = ("orders", "audit")[i % 2]
            data = payload(i) if payload else b'{"id": %d}' % i
            w.write(key, data, timestamp_ms=T0 + 10 * i)


async def _get(jp_fetch, route: str, **params) -> dict:
    response = await jp_fetch("nbkit", "viewer", route, params={k: str(v) for k, v in params.items()})
    return json.loads(response.body)


async def _refused(jp_fetch, route: str, **params) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("nbkit", "viewer", route, params={k: str(v) for k, v in params.items()})
    body = json.loads(caught.value.response.body)
    return caught.value.code, body["message"]


async def test_summary_is_nbkit_info(jp_fetch, jp_root_dir, sample_path):
    shutil.copy(sample_path, jp_root_dir / "sample-1.ss")
    body = await _get(jp_fetch, "summary", path="sample-1.ss")
    expected = summarize(jp_root_dir / "sample-1.ss").to_dict()
    for field in ("header", "size", "message_count", "streams", "beacon_count", "has_eos", "end"):
        assert body[field] == expected[field], field
    assert body["path"] == "sample-1.ss"
    assert body["progress"]["done"] is True
    assert "messages" in body["text"] and body["keys"]


async def test_pages_in_order_and_by_key(jp_fetch, jp_root_dir):
    _write(jp_root_dir / "orders.ss", 3000)
    page = await _get(jp_fetch, "messages", path="orders.ss", start=1500, count=10)
    assert page["total"] == 3000 and page["start"] == 1500
    assert [r["row"] for r in page["rows"]] == list(range(1500, 1510))
    assert [json.loads(r["payload"]["text"])["id"] for r in page["rows"]] == list(range(1500, 1510))
    only = await _get(jp_fetch, "messages", path="orders.ss", start=1100, count=3, key="audit")
    assert only["total"] == 1500
    assert [(r["key"], r["seq"]) for r in only["rows"]] == [("audit", 1101), ("audit", 1102), ("audit", 1103)]
    first = page["rows"][0]
    assert first["time"] == "2024-01-01T00:00:15.000Z" and first["attempt"] == 1
    assert first["payload"]["json"] == '{\n  "id": 1500\n}'


async def test_locate_by_seq_time_and_offset(jp_fetch, jp_root_dir):
    _write(jp_root_dir / "orders.ss", 3000)
    # orders seq 700 is message 1398 (orders are the even messages)
    assert (await _get(jp_fetch, "locate", path="orders.ss", seq=700, seq_key="orders"))["row"] == 1398
    assert (await _get(jp_fetch, "locate", path="orders.ss", seq=700, key="orders"))["row"] == 699
    assert (await _get(jp_fetch, "locate", path="orders.ss", time="2024-01-01T00:00:20Z"))["row"] == 2000
    assert (await _get(jp_fetch, "locate", path="orders.ss", time=T0 + 25))["row"] == 3
    page = await _get(jp_fetch, "messages", path="orders.ss", start=2500, count=1)
    at = page["rows"][0]["offset"]
    assert (await _get(jp_fetch, "locate", path="orders.ss", offset=at))["row"] == 2500
    assert (await _get(jp_fetch, "locate", path="orders.ss", offset=at + 1))["row"] == 2501
    code, message = await _refused(jp_fetch, "locate", path="orders.ss", seq=5000, seq_key="orders")
    assert code == 404 and "no sequence number 5000" in message
    code, message = await _refused(jp_fetch, "locate", path="orders.ss", seq=3)
    assert code == 400 and "needs the stream key" in message
    code, message = await _refused(jp_fetch, "locate", path="orders.ss", time="yesterday")
    assert code == 400 and "time='yesterday'" in message


async def test_envelope_headers_and_attempt(jp_fetch, jp_root_dir):
    def payload(i: int) -> bytes:
        headers = {"x-ruststream-retry-count": str(i)} if i else {}
        return encode(headers, b"job %d" % i, force_text=False) if i else b"job 0"

    _write(jp_root_dir / "jobs.ss", 4, payload=payload)
    rows = (await _get(jp_fetch, "messages", path="jobs.ss", start=0, count=4))["rows"]
    assert [r["attempt"] for r in rows] == [1, 2, 3, 4]
    assert rows[2]["headers"] == {"x-ruststream-retry-count": "2"}
    assert rows[2]["payload"]["text"] == "job 2" and rows[2]["payload"]["stored_length"] > 5
    summary = await _get(jp_fetch, "summary", path="jobs.ss")
    assert summary["streams"] == summarize(jp_root_dir / "jobs.ss").to_dict()["streams"]
    assert sum(st["retry_copies"] for st in summary["streams"]) == 3


async def test_damage_is_listed_and_rows_around_it_are_served(jp_fetch, jp_root_dir):
    path = jp_root_dir / "damaged.ss"
    _write(path, 400, interval=1024)
    raw = bytearray(path.read_bytes())
    hit = 5000  # inside some payload past the first beacons
    raw[hit : hit + 40] = bytes(40)
    path.write_bytes(bytes(raw))
    expected = summarize(path).to_dict()
    assert expected["damaged"], "the planted damage must be a damaged region"
    body = await _get(jp_fetch, "summary", path="damaged.ss")
    assert body["message_count"] == expected["message_count"]
    region = body["damaged"][0]
    assert (region["start"], region["end"]) == (expected["damaged"][0]["start"], expected["damaged"][0]["end"])
    assert region["recovered_after"] == expected["damaged"][0]["recovered_after"]
    row = region["row_after"]
    page = await _get(jp_fetch, "messages", path="damaged.ss", start=row - 2, count=4)
    assert [r["row"] for r in page["rows"]] == [row - 2, row - 1, row, row + 1]
    assert "damage_before" not in page["rows"][1]
    assert page["rows"][2]["damage_before"]["start"] == region["start"]
    assert page["rows"][2]["offset"] >= region["end"] > page["rows"][1]["offset"]


async def test_payloads_are_data_not_markup_and_pages_are_bounded(jp_fetch, jp_root_dir):
    big = b"x" * (PREVIEW_BYTES * 3)

    def payload(i: int) -> bytes:
        return b"<script>alert(1)</script>" if i == 0 else big

    _write(jp_root_dir / "hostile.ss", MAX_ROWS + 50, payload=payload)
    response = await jp_fetch("nbkit", "viewer", "messages", params={"path": "hostile.ss", "count": "100000"})
    assert response.headers["Content-Type"].startswith("application/json")
    page = json.loads(response.body)
    assert page["rows"][0]["payload"]["text"] == "<script>alert(1)</script>"  # data, for textContent
    assert len(page["rows"]) < MAX_ROWS and page["limited"] is True  # the byte bound cut it
    assert all(len(r["payload"]["text"]) <= PREVIEW_BYTES for r in page["rows"])
    assert page["rows"][1]["payload"]["length"] == len(big) and page["rows"][1]["payload"]["truncated"] is True
    assert len(response.body) < 2 << 20


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("../outside.ss", 403, "'..' is not allowed"),
        ("/etc/passwd", 403, "absolute path"),
        ("link.ss", 403, "leads outside"),
        ("missing.ss", 404, "no such file"),
        ("", 400, "relative to the server's root"),
        ("folder", 404, "not a regular file"),
    ],
)
async def test_paths_outside_the_root_are_refused(jp_fetch, jp_root_dir, tmp_path_factory, path, status, says):
    outside = tmp_path_factory.mktemp("outside") / "secret.ss"
    _write(outside, 3)
    os.symlink(outside, jp_root_dir / "link.ss")
    (jp_root_dir / "folder").mkdir()
    for route in ("summary", "messages", "locate"):
        code, message = await _refused(jp_fetch, route, path=path)
        assert (code, says in message) == (status, True), (route, message)


async def test_not_a_stream_file_is_a_clear_error(jp_fetch, jp_root_dir):
    (jp_root_dir / "notes.ss").write_text("hello, not a stream file\n" * 10)
    code, message = await _refused(jp_fetch, "summary", path="notes.ss")
    assert code == 422 and "notes.ss" in message


async def test_unknown_key_and_bad_numbers(jp_fetch, jp_root_dir):
    _write(jp_root_dir / "orders.ss", 10)
    code, message = await _refused(jp_fetch, "messages", path="orders.ss", key="nope")
    assert code == 404 and "no messages of stream key 'nope'" in message
    code, message = await _refused(jp_fetch, "messages", path="orders.ss", start="ten")
    assert code == 400 and "start='ten' is not an integer" in message


async def test_a_file_that_grows_is_indexed_where_it_stopped(jp_fetch, jp_root_dir):
    path = jp_root_dir / "live.ss"
    _write(path, 10)
    assert (await _get(jp_fetch, "summary", path="live.ss"))["message_count"] == 10
    with StreamWriter(path) as w:
        for i in range(5):
            w.write("orders", b'{"late": %d}' % i)
    body = await _get(jp_fetch, "summary", path="live.ss")
    for _ in range(50):
        if body["message_count"] == 15:
            break
        body = await _get(jp_fetch, "summary", path="live.ss")
    assert body["message_count"] == 15
    page = await _get(jp_fetch, "messages", path="live.ss", start=14, count=5)
    assert page["rows"][0]["payload"]["text"] == '{"late": 4}'


async def test_open_in_a_notebook_writes_one_beside_the_file(jp_fetch, jp_root_dir):
    (jp_root_dir / "data").mkdir()
    _write(jp_root_dir / "data" / "orders.ss", 4)
    names = []
    for _ in range(2):
        response = await jp_fetch(
            "nbkit", "viewer", "notebook", method="POST", body=json.dumps({"path": "data/orders.ss"})
        )
        assert response.code == 201
        names.append(json.loads(response.body)["path"])
    assert names == ["data/orders-view.ipynb", "data/orders-view-2.ipynb"]
    nb = json.loads((jp_root_dir / "data" / "orders-view.ipynb").read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "read_stream('orders.ss'" in code and "lineage(frame)" in code and "dashboard(frame)" in code


async def test_handlers_need_the_token(jp_fetch, jp_root_dir):
    _write(jp_root_dir / "orders.ss", 3)
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("nbkit", "viewer", "summary", params={"path": "orders.ss"}, headers={"Authorization": ""})
    assert caught.value.code == 403


async def test_hidden_files_are_refused_as_jupyter_refuses_them(jp_fetch, jp_root_dir, jp_serverapp):
    (jp_root_dir / ".hidden").mkdir()
    _write(jp_root_dir / ".hidden" / "secret.ss", 3)
    _write(jp_root_dir / ".dot.ss", 3)
    before = sorted(p.relative_to(jp_root_dir) for p in jp_root_dir.rglob("*"))
    for path in (".hidden/secret.ss", ".dot.ss", ".hidden/missing.ss"):
        for route in ("summary", "messages", "locate"):
            code, message = await _refused(jp_fetch, route, path=path)
            assert code == 404 and f"{path!r} is hidden" in message and "allow_hidden" in message, (route, message)
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch("nbkit", "viewer", "notebook", method="POST", body=json.dumps({"path": path}))
        assert caught.value.code == 404
        # Jupyter's own contents API refuses the same paths
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch("api", "contents", path)
        assert caught.value.code == 404
    assert sorted(p.relative_to(jp_root_dir) for p in jp_root_dir.rglob("*")) == before  # nothing written
    jp_serverapp.contents_manager.allow_hidden = True
    assert (await _get(jp_fetch, "summary", path=".hidden/secret.ss"))["message_count"] == 3
    assert (await _get(jp_fetch, "summary", path=".dot.ss"))["message_count"] == 3


async def test_refused_notebook_requests_write_nothing(jp_fetch, jp_root_dir):
    (jp_root_dir / "notes.ss").write_text("hello, not a stream file\n" * 10)
    for body, status in (
        (json.dumps({"path": "notes.ss"}), 422),
        (json.dumps({"path": 5}), 400),
        ("[1, 2]", 400),
        ("{not json", 400),
        (json.dumps({"path": "missing.ss"}), 404),
    ):
        with pytest.raises(HTTPClientError) as caught:
            await jp_fetch("nbkit", "viewer", "notebook", method="POST", body=body)
        assert caught.value.code == status, body
        message = json.loads(caught.value.response.body)["message"]
        assert str(jp_root_dir) not in message
    assert not list(jp_root_dir.glob("*.ipynb"))


@pytest.mark.parametrize(
    ("route", "params", "says"),
    [
        ("messages", {"start": "--5"}, "start='--5' is not an integer"),
        ("messages", {"start": "²"}, "start='²' is not an integer"),
        ("messages", {"start": "1_000"}, "start='1_000' is not an integer"),
        ("messages", {"start": "-1"}, "start=-1 is out of range"),
        ("messages", {"start": str(1 << 63)}, "is out of range"),
        ("messages", {"count": "0"}, "count=0 is out of range"),
        ("messages", {"count": "1e3"}, "count='1e3' is not an integer"),
        ("locate", {"offset": "abc"}, "offset='abc' is not an integer"),
        ("locate", {"seq": "-3", "key": "orders"}, "seq=-3 is out of range"),
        ("locate", {"time": "--5"}, "time='--5' is neither"),
        ("locate", {"time": "²"}, "time='²' is neither"),
        ("locate", {"time": "253402300800000"}, "time=253402300800000 is out of range"),
        ("locate", {"time": "9" * 40}, "is out of range"),
        ("locate", {"time": "-1"}, "time=-1 is out of range"),
        ("locate", {"time": "+10000-01-01T00:00:00"}, "is neither"),
        ("locate", {"time": "1969-12-31T23:59:59"}, "is out of range"),
        ("locate", {"time": "2024-02-30T00:00:00"}, "is neither"),
        ("locate", {"key": "a\x00b"}, "key= is not a stream key"),
    ],
)
async def test_every_bad_parameter_is_a_400_naming_it(jp_fetch, jp_root_dir, route, params, says):
    _write(jp_root_dir / "orders.ss", 10)
    code, message = await _refused(jp_fetch, route, path="orders.ss", **params)
    assert (code, says in message) == (400, True), message


async def test_a_parameter_given_twice_is_refused(jp_fetch, jp_root_dir):
    _write(jp_root_dir / "orders.ss", 10)
    with pytest.raises(HTTPClientError) as caught:
        await jp_fetch("nbkit", "viewer", "messages", params=[("path", "orders.ss"), ("start", "1"), ("start", "2")])
    assert caught.value.code == 400
    assert "start= is given 2 times" in json.loads(caught.value.response.body)["message"]


async def test_errors_name_paths_relative_to_the_root(jp_fetch, jp_root_dir):
    (jp_root_dir / "data").mkdir()
    (jp_root_dir / "data" / "notes.ss").write_bytes(b"\x00" * 300)
    code, message = await _refused(jp_fetch, "summary", path="data/notes.ss")
    assert code == 422 and "data/notes.ss" in message
    assert str(jp_root_dir) not in message and str(jp_root_dir.resolve()) not in message


async def test_a_file_rewritten_in_place_gets_a_new_index(jp_fetch, jp_root_dir, tmp_path):
    path = jp_root_dir / "redo.ss"
    _write(path, 10)  # keys orders and audit, created at T0
    body = await _get(jp_fetch, "summary", path="redo.ss")
    assert body["keys"] == ["audit", "orders"]
    other = tmp_path / "redo.ss"  # the same header (name, creation time), other records, larger
    with StreamWriter(other, beacon_interval=1 << 20, created_at_ms=T0, clock_ms=lambda: T0) as w:
        for i in range(30):
            w.write("books", b'{"book": %d}' % i, timestamp_ms=T0 + 1000 + i)
    inode = path.stat().st_ino
    path.write_bytes(other.read_bytes())  # truncated and rewritten: the same inode, larger
    assert path.stat().st_ino == inode
    body = await _get(jp_fetch, "summary", path="redo.ss")
    assert body["keys"] == ["books"] and body["message_count"] == 30
    assert body["streams"] == summarize(path).to_dict()["streams"]
    assert (await _get(jp_fetch, "locate", path="redo.ss", time=T0 + 1005))["row"] == 5
    page = await _get(jp_fetch, "messages", path="redo.ss", start=0, count=2)
    assert [r["payload"]["text"] for r in page["rows"]] == ['{"book": 0}', '{"book": 1}']


async def _settled(jp_fetch, path: str) -> dict:
    """The summary once indexing says it is done (a bounded number of polls: it must end)."""
    for _ in range(100):
        body = await _get(jp_fetch, "summary", path=path)
        if body["progress"]["done"]:
            return body
    raise AssertionError(f"indexing of {path} never said done: {body['progress']}")


async def test_damage_at_the_end_is_a_damaged_region_as_nbkit_info_says(jp_fetch, jp_root_dir):
    path = jp_root_dir / "tail.ss"
    _write(path, 400, interval=1024)
    raw = bytearray(path.read_bytes())
    raw[-150:-110] = bytes(40)  # in the last frames, no beacon after them
    path.write_bytes(bytes(raw))
    expected = summarize(path).to_dict()
    assert expected["damaged"] and expected["end"]["reason"] == "end"
    body = await _settled(jp_fetch, "tail.ss")
    assert body["end"] == expected["end"] and body["message_count"] == expected["message_count"]
    assert [(d["start"], d["end"], d["recovered_after"]) for d in body["damaged"]] == [
        (d["start"], d["end"], d["recovered_after"]) for d in expected["damaged"]
    ]
    assert "trailing bytes" not in body["text"] and "damaged" in body["text"]
    again = await _get(jp_fetch, "summary", path="tail.ss")
    assert again["progress"]["done"] is True and again["progress"]["busy"] is False


async def test_a_torn_last_frame_is_reported_as_nbkit_info_does_and_indexing_ends(jp_fetch, jp_root_dir):
    path = jp_root_dir / "torn.ss"
    _write(path, 50)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 7)  # the last frame cut short
    expected = summarize(path).to_dict()
    body = await _settled(jp_fetch, "torn.ss")
    assert body["end"] == expected["end"] and body["end"]["trailing_bytes"] > 0
    assert body["message_count"] == expected["message_count"] == 49
    assert body["damaged"] == [] == expected["damaged"]
    # the writer completes it: the index goes on from where it stopped
    with StreamWriter(path) as w:
        w.write("orders", b'{"late": 1}')
    for _ in range(100):
        body = await _get(jp_fetch, "summary", path="torn.ss")
        if body["progress"]["done"] and body["size"] == path.stat().st_size:
            break
    assert body["end"] == summarize(path).to_dict()["end"]


async def test_a_file_rewritten_with_its_old_size_and_time_gets_a_new_index(jp_fetch, jp_root_dir, tmp_path):
    path = jp_root_dir / "same.ss"
    _write(path, 10)  # keys orders and audit
    assert (await _get(jp_fetch, "summary", path="same.ss"))["keys"] == ["audit", "orders"]
    other = tmp_path / "same.ss"
    with StreamWriter(other, beacon_interval=1 << 20, created_at_ms=T0, clock_ms=lambda: T0) as w:
        for i in range(10):  # keys of the same lengths, the same payloads: the same size
            w.write(("ORDERS", "notes")[i % 2], b'{"id": %d}' % i, timestamp_ms=T0 + 10 * i)
    before = path.stat()
    path.write_bytes(other.read_bytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as cp -p or rsync -t leave it
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    body = await _get(jp_fetch, "summary", path="same.ss")
    assert body["keys"] == ["ORDERS", "notes"] and body["message_count"] == 10
