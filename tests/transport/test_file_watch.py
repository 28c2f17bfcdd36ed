"""FileWatch: incremental summary of a followed file (what nbkit watch and LiveMonitor show)."""

from __future__ import annotations

import os
from pathlib import Path

from nbkit.transport.file_watch import FileWatch, render_text, sparkline
from nbkit.transport.file_writer import StreamWriter
from nbkit.wire import envelope

T0 = 1_700_000_000_000


def copy(n: int, retries: int) -> bytes:
    return envelope.encode({envelope.RETRY_COUNT_HEADER: str(retries)}, b"%d" % n, force_text=False)


def test_counts_rates_attempts_and_dead_letters_grow_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "w.ss"
    w = StreamWriter(path)
    for i in range(20):  # one message a second
        w.write("orders", b"%d" % i, timestamp_ms=T0 + 1000 * i)
    watch = FileWatch(path, window=10, latest=3)
    state = watch.update()
    assert state.following and state.messages == 20 and state.offset == state.size == path.stat().st_size
    orders = state.keys["orders"]
    assert (orders.count, orders.last_seq, orders.rate(10)) == (20, 20, 1.0)  # 10 messages in the last 10 s
    w.write("orders", copy(3, 1), timestamp_ms=T0 + 20_000)
    w.write("orders", copy(3, 2), timestamp_ms=T0 + 21_000)
    w.write("orders.dead", copy(3, 3), timestamp_ms=T0 + 22_000)
    state = watch.update()
    assert state.messages == 23 and state.attempt_totals() == {1: 20, 2: 1, 3: 1}
    assert state.keys["orders.dead"].dead_letter and state.dead_letter_times == [T0 + 22_000]
    assert state.dead_letters_over_time(bucket=10, buckets=3) == [0, 0, 1]
    assert [m["seq"] for m in state.latest] == [21, 22, 1]
    assert state.latest[-1]["headers"] == {envelope.RETRY_COUNT_HEADER: "3"} and state.latest[-1]["payload"] == b"3"
    text = render_text(state, latest=2)
    assert "orders.dead (dead letters)" in text and "attempt 2: 1" in text and "x-ruststream-retry-count=3" in text
    w.close()
    watch.close()


def test_an_update_reads_at_most_max_messages(tmp_path: Path) -> None:
    path = tmp_path / "m.ss"
    with StreamWriter(path) as w:
        for _ in range(10):
            w.write("k", b"x")
    with FileWatch(path) as watch:
        assert [watch.update(max_messages=4).messages for _ in range(4)] == [4, 8, 10, 10]


def test_the_end_of_stream_mark_removal_and_rotation_stop_the_watch(tmp_path: Path) -> None:
    path = tmp_path / "e.ss"
    with StreamWriter(path) as w:
        w.write("k", b"1")
        w.write_eos()
    with FileWatch(path) as watch:
        state = watch.update()
        assert (state.status, state.following, state.messages) == ("eos", False, 1)
        assert "end-of-stream mark" in state.detail
    with StreamWriter(tmp_path / "r.ss") as w:
        w.write("k", b"1")
    watch = FileWatch(tmp_path / "r.ss")
    watch.update()
    os.replace(path, tmp_path / "r.ss")
    assert watch.update().status == "rotated" and "new file" in watch.state.detail
    watch.close()
    gone = tmp_path / "s.ss"
    with StreamWriter(gone) as w:
        w.write("k", b"1")
    with FileWatch(gone) as watch:
        os.unlink(gone)
        state = watch.update()
    assert state.status == "removed" and "removed" in state.detail and state.messages == 1
    assert render_text(state).splitlines()[1] == state.detail


def test_sparkline() -> None:
    assert sparkline([]) == "" and sparkline([0, 0]) == "  "
    assert sparkline([1, 8]) == "▁█"


def test_a_file_the_rust_writer_wrote_is_summarized_like_nbkit_info(sample_path: Path) -> None:
    from nbkit.transport.file_info import summarize
    from nbkit.wire.keys import INTERNAL_KEYS

    with FileWatch(sample_path) as watch:
        state = watch.update()
    summary = summarize(sample_path)
    expected = {s.stream_key: s.count for s in summary.streams if s.stream_key not in INTERNAL_KEYS}
    assert {k: a.count for k, a in state.keys.items()} == expected
    assert state.status == ("eos" if summary.has_eos else "following")
