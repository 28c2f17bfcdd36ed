"""The demo workload: deterministic summary on both transports, files written, CLI entry."""

from __future__ import annotations

from nbkit.notebook.demo import MAX_ATTEMPTS, make_orders, run_demo
from nbkit.tabular.frames import read_pipe, read_stream


def test_demo_summary_and_files(tmp_path):
    result = run_demo(str(tmp_path), png=False)
    s = result.summary
    assert list(s.index) == ["file", "pipe"]
    orders = make_orders()
    never = sum(1 for o in orders if o["valid"] and o["fails"] >= MAX_ATTEMPTS)
    invalid = sum(1 for o in orders if not o["valid"])
    for transport in ("file", "pipe"):
        row = s.loc[transport]
        assert row["first deliveries"] == 120
        assert row["dead letters"] == never
        assert row["dropped"] == invalid
        assert row["max attempt"] == MAX_ATTEMPTS
        assert row["deliveries"] == 120 + row["retry copies"] + 0
    file_frame = read_stream(result.stream_file)
    assert (file_frame["stream_key"] == "orders.dead").sum() == never
    pipe_frame = read_pipe(result.pipe_output)
    assert set(pipe_frame["stream_key"]) == {"orders.retry", "orders.dead"}
    assert (pipe_frame["stream_key"] == "orders.dead").sum() == never


def test_demo_is_deterministic(tmp_path):
    a = run_demo(str(tmp_path / "a"), png=False)
    b = run_demo(str(tmp_path / "b"), png=False)
    assert a.summary.equals(b.summary)
    assert (tmp_path / "a" / "orders.ss").read_bytes() == (tmp_path / "b" / "orders.ss").read_bytes()
