"""Lineage on a damaged production-like file: histories cut by damage are marked, columns kept on request,
one row per message, delays summarised per origin key (each key has its own retry policy)."""

from __future__ import annotations

import pytest

import nbkit
from nbkit import lineage, messages_table, overview, read_stream, summarize
from nbkit.notebook.production import POLICIES, write_production_file


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lin")
    path = folder / "prod.ss"
    write_production_file(path, messages=4000, beacon_interval=4096)
    frame = read_stream(path, payload="json")
    bad = folder / "bad.ss"
    raw = bytearray(path.read_bytes())
    # break a payload byte in the middle of the outage, where retries are pending
    row = frame[frame["retry_count"] > 0].iloc[len(frame[frame["retry_count"] > 0]) // 2]
    raw[int(row["offset"]) + 1 + len(str(row["stream_key"])) + 28 + 5] ^= 0x40
    bad.write_bytes(bytes(raw))
    return path, bad, frame


def test_histories_cut_by_damage_are_marked(files):
    path, bad, frame = files
    intact = lineage(frame)
    assert not intact["cut_by_damage"].any()
    damaged = read_stream(bad, payload="json", on_bad_frames="skip")
    region = damaged.attrs["damaged"][0]
    lin = lineage(damaged)
    cut = lin[lin["cut_by_damage"]]
    assert len(cut) > 0
    # every history with a record inside the lost bytes (in the intact file) whose other records survive is cut
    lost = frame[(frame["offset"] >= region["start"]) & (frame["offset"] < region["end"])]["offset"]
    whole = lineage(frame)
    touched = set(whole.loc[whole["offset"].isin(lost), "message"])
    surviving = set(whole.loc[whole["message"].isin(touched) & ~whole["offset"].isin(lost), "offset"])
    marked = set(cut["offset"].astype(int))
    assert surviving and surviving <= marked
    assert summarize(lin).cut_by_damage == cut["message"].nunique()
    assert "cut by damage" in summarize(lin).to_text()


def test_keep_headers_and_payload_fields(files):
    _, _, frame = files
    lin = lineage(frame, keep=["headers", "payload.*"])
    assert {"headers", "payload.id", "payload.amount"} <= set(lin.columns)
    joined = lin.set_index("offset")["payload.id"].dropna()
    want = frame.set_index("offset").loc[joined.index, "payload.id"]
    assert (joined == want).all()
    with pytest.raises(ValueError, match="no column 'payload.nope'"):
        lineage(frame, keep="payload.nope")


def test_one_row_per_message_and_summaries_per_key(files):
    _, _, frame = files
    lin = lineage(frame)
    table = messages_table(lin)
    assert len(table) == lin["message"].nunique() == int((frame["retry_count"] == 0).sum())
    assert (table["records"] == lin.groupby("message").size()).all()
    assert set(table["stream_key"].astype(str)) == set(POLICIES)
    summary = summarize(lin)
    by_key = summary.by_key
    # orders retry after 2 s then 30 s, payments after 1, 2, 4, 8 s: their delays are not pooled
    assert by_key.loc[("orders", 2), "median"] == pytest.approx(2.0)
    assert by_key.loc[("orders", 3), "median"] == pytest.approx(30.0)
    assert by_key.loc[("payments", 5), "median"] == pytest.approx(8.0)
    assert "per origin key" in summary.to_text()
    assert summary.to_dict()["by_key"]["payments"]["2"]["median"] == pytest.approx(1.0)


def test_overview_is_public_and_counts_per_key(files):
    path, _, frame = files
    view = overview(path)
    assert "overview" in nbkit.__all__ and "summarize" in nbkit.__all__
    orders = view.set_index("stream_key").loc["orders"]
    rows = frame["stream_key"] == "orders"
    assert orders["originals"] == int((rows & (frame["retry_count"] == 0)).sum())
    assert orders["retry_copies"] == int((rows & (frame["retry_count"] > 0)).sum())
    assert view.set_index("stream_key").loc["orders.dead", "dead_letters"] == int(
        (frame["stream_key"] == "orders.dead").sum()
    )
