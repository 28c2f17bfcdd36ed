"""nbkit.dask.message_counts: the workers' counts draw the same dashboard as every row would."""

from __future__ import annotations

import matplotlib
import matplotlib.pyplot as plt
import pandas as pd
import pytest

pytest.importorskip("dask")

import nbkit.dask  # noqa: E402
import nbkit.plot  # noqa: E402
from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session, read_stream  # noqa: E402
from nbkit.runtime.clock import VirtualClock  # noqa: E402
from nbkit.runtime.redrive import redrive  # noqa: E402
from nbkit.scale.counts import COUNT_COLUMNS  # noqa: E402

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture
def served_file(tmp_path):
    """A service's file: retries with backoff, dead letters over several minutes, some redriven, beacons
    every KiB so that the Dask frame has many partitions."""
    path = tmp_path / "orders.ss"
    broker = FileBroker(path, beacon_interval=1024)

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    def handle(delivery):
        n = delivery.json()["id"]
        return HandlerOutcome.ack() if delivery.attempt > n % 4 else HandlerOutcome.retry_after(20 * delivery.attempt)

    session = Session(App(broker))
    session.step(0)
    for n in range(200):
        broker.publish("orders", f'{{"id": {n}}}')
        session.step(1000)
        session.advance(1.5)
    session.run()
    session.close()
    after_the_run = VirtualClock(start=1_704_067_200 + 900)
    redrive(path, source="orders.dead", target="orders", where="seq <= 20", clock=after_the_run)
    return path


def _bar_heights(fig):
    return [[round(patch.get_height(), 6) for patch in ax.patches] for ax in fig.axes]


def test_counts_sum_to_every_message_per_key_attempt_and_bin(served_file):
    counts = nbkit.dask.message_counts(nbkit.dask.read_stream(served_file, blocksize="2KiB"), freq="30s")
    frame = read_stream(served_file)
    assert list(counts.columns) == COUNT_COLUMNS
    assert counts["count"].sum() == len(frame)
    want = (
        frame.assign(bin=frame["timestamp"].dt.floor("30s"), stream_key=frame["stream_key"].astype(str))
        .groupby(["stream_key", "attempt", "bin"])
        .size()
    )
    got = counts.groupby(["stream_key", "attempt", "timestamp"])["count"].sum()
    got.index = got.index.set_names(["stream_key", "attempt", "bin"])
    pd.testing.assert_series_equal(got.sort_index(), want.sort_index(), check_names=False, check_dtype=False)
    assert counts["redriven"].sum() > 0
    assert len(counts) < len(frame) / 4  # small: that is the point


def test_dashboard_of_counts_is_the_dashboard_of_rows(served_file):
    ddf = nbkit.dask.read_stream(served_file, blocksize="2KiB")
    counts = nbkit.dask.message_counts(ddf, freq="1min")
    rows = read_stream(served_file)
    by_rows = nbkit.plot.dashboard(rows, freq="1min")
    by_counts = nbkit.plot.dashboard(counts, freq="1min")
    assert _bar_heights(by_counts) == _bar_heights(by_rows)
    assert [ax.get_xlabel() for ax in by_counts.axes] == [ax.get_xlabel() for ax in by_rows.axes]
    redriven = [line for line in by_counts.axes[2].get_lines() if line.get_gid() == "redriven"]
    want = [line for line in by_rows.axes[2].get_lines() if line.get_gid() == "redriven"]
    assert redriven and list(redriven[0].get_ydata()) == list(want[0].get_ydata())


def test_attempts_of_counts_with_a_log_scale(served_file):
    counts = nbkit.dask.message_counts(nbkit.dask.read_stream(served_file, blocksize="2KiB"))
    _, ax = plt.subplots()
    nbkit.plot.attempts(counts, ax=ax)
    ax.set_yscale("log")
    rows = read_stream(served_file)
    delivered = rows[rows["stream_key"] == "orders"].groupby("attempt").size()
    assert [p.get_height() for p in ax.patches] == delivered.sort_index().tolist()
    assert ax.get_ylim()[0] > 0  # a log scale that works: no bar starts at 0


@pytest.mark.parametrize("freq", ["1M", "often", "0s"])
def test_freq_must_be_a_fixed_width(served_file, freq):
    with pytest.raises(ValueError, match="fixed pandas frequency"):
        nbkit.dask.message_counts(nbkit.dask.read_stream(served_file), freq=freq)


def test_columns_it_needs_are_named(served_file):
    ddf = nbkit.dask.read_stream(served_file)[["stream_key", "timestamp"]]
    with pytest.raises(ValueError, match=r"missing \['transport', 'attempt', 'retry_count'\]"):
        nbkit.dask.message_counts(ddf)


def test_a_negative_count_is_refused_by_the_plots(served_file):
    counts = nbkit.dask.message_counts(nbkit.dask.read_stream(served_file))
    counts.loc[0, "count"] = -1
    with pytest.raises(ValueError, match="'count' column"):
        nbkit.plot.attempts(counts)
