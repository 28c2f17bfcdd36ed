"""Plots, tested by their data (bar heights, line points, labels, legends), never by pixels."""

from __future__ import annotations

import end_states
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

import nbkit.plot
from nbkit.notebook import plots
from nbkit.notebook.plots import attempts, dashboard, dead_letters, retry_delays, timeline
from nbkit.tabular.frames import concat_frames, read_pipe, read_stream
from nbkit.tabular.plot_data import MAX_DISTINCT_DELAYS, auto_freq, deliveries

T0 = pd.Timestamp("2024-01-01T00:00:00Z")


def heights(ax) -> list[list[float]]:
    return [[float(v) for v in c.datavalues] for c in ax.containers]


def legend(ax) -> list[str]:
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


def ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_xticklabels()]


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def messages(ran) -> pd.DataFrame:
    """What the runtime wrote: the file, and the pipe's stdout, as one read_* frame."""
    return concat_frames(read_stream(ran.path), read_pipe(lines=ran.out))


# -- the normaliser ------------------------------------------------------------------------------------
def test_deliveries_reads_an_events_frame(ran):
    d = deliveries(ran.session.events)
    assert list(d.columns) == [
        "transport", "group", "attempt", "delivered", "delay", "is_dead_letter", "time", "redriven", "weight",
    ]  # fmt: skip
    assert (d["weight"] == 1).all()
    assert d.attrs["kind"] == "events"
    assert d["delivered"].all()
    file, pipe = d[d.transport == "file"], d[d.transport == "pipe"]
    assert sorted(file["delay"].dropna()) == [5, 5, 5, 10, 10, 10]
    assert sorted(pipe["delay"].dropna()) == [2, 2, 2]
    assert file["is_dead_letter"].sum() == 3 and pipe["is_dead_letter"].sum() == 1
    # a dead letter is placed at the time its copy was written
    assert (file.loc[file.is_dead_letter, "time"] == T0 + pd.Timedelta(seconds=15)).all()
    assert d.loc[d.is_dead_letter, "delay"].isna().all()  # a dead-letter copy is no scheduled retry


def test_deliveries_reads_a_messages_frame(ran):
    d = deliveries(messages(ran))
    assert d.attrs["kind"] == "messages"
    assert d["delay"].isna().all()
    # orders.dead (3 on file) and orders.dlq (1 on pipe) are the dead letters and not deliveries
    assert d.groupby("transport")["is_dead_letter"].sum().to_dict() == {"file": 3, "pipe": 1}
    assert (d["delivered"] == ~d["is_dead_letter"]).all()


@pytest.mark.parametrize(
    ("keys", "expected"),
    [(None, 4), ("orders.dead", 3), (["orders.dlq"], 1), ([], 0), (lambda k: k.startswith("orders."), 7)],
)
def test_dead_letter_keys_option(ran, keys, expected):
    # lambda: orders.dead (3), orders.dlq (1) and orders.retry (3 copies on the pipe)
    assert deliveries(messages(ran), dead_letter_keys=keys)["is_dead_letter"].sum() == expected


def test_copy_now_is_a_zero_second_delay(tmp_path):
    from nbkit import App, FileBroker, FilePosition, HandlerOutcome
    from nbkit.notebook.session import Session

    broker = FileBroker(tmp_path / "o.ss")
    broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2)(lambda d: HandlerOutcome.retry())
    session = Session(App(broker))
    broker.publish("orders", "x")
    session.run()
    assert list(session.events["action"]) == ["copy", "rejected"]
    d = deliveries(session.events)
    assert d["delay"].iloc[0] == 0.0 and np.isnan(d["delay"].iloc[1])
    ax = retry_delays(session.events)
    assert ticks(ax) == ["0 s"] and heights(ax) == [[1.0]]


@pytest.mark.parametrize(
    ("frame", "missing"),
    [
        (pd.DataFrame({"x": [1]}), "'attempt'"),
        (pd.DataFrame({"attempt": [1]}), "'action'"),
        (pd.DataFrame({"attempt": [1], "action": ["copy"]}), "'time'"),
        (pd.DataFrame({"attempt": [1], "retry_count": [0]}), "'stream_key'"),
    ],
)
def test_frames_of_neither_kind_name_the_missing_column(frame, missing):
    for plot in (attempts, retry_delays, dead_letters, dashboard):
        with pytest.raises(ValueError, match=missing):
            plot(frame)


def test_missing_by_column_and_not_a_frame(ran):
    with pytest.raises(ValueError, match="'colour'"):
        attempts(ran.session.events, by="colour")
    with pytest.raises(TypeError, match="DataFrame"):
        attempts([1, 2, 3])


# -- attempts ------------------------------------------------------------------------------------------
def test_attempts_from_events_file_and_pipe_side_by_side(ran):
    ax = attempts(ran.session.events)
    assert heights(ax) == [[3, 3, 3], [2, 1, 1]]
    assert legend(ax) == ["file", "pipe"]
    assert ticks(ax) == ["1", "2", "3"]
    assert "attempt" in ax.get_xlabel()
    assert ax.get_ylabel() == "deliveries (count)"
    assert ax.get_title() == "Deliveries per attempt"
    file_bars, pipe_bars = ax.containers
    # side by side: the pipe bar of attempt n sits right of the file bar of attempt n
    assert [p.get_x() for p in file_bars][0] < [p.get_x() for p in pipe_bars][0] < 1.5
    assert file_bars[0].get_facecolor() == to_rgba("C0") and pipe_bars[0].get_facecolor() == to_rgba("C1")


def test_attempts_by_none_and_by_another_column(ran):
    ax = attempts(ran.session.events, by=None, ax=plt.figure().gca())
    assert heights(ax) == [[5, 4, 4]]
    assert ax.get_legend() is None
    ax = attempts(ran.session.events, by="action", ax=plt.figure().gca())
    assert legend(ax) == ["delayed-copy", "dead-letter"]  # the categorical's order, observed only
    assert heights(ax) == [[5, 4, 0], [0, 0, 4]]


def test_attempts_from_what_the_runtime_wrote(ran):
    ax = attempts(messages(ran))
    # file: originals (1) and copies (2, 3); pipe stdout: copies only (2, 2, 3). Dead letters left out.
    assert heights(ax) == [[3, 3, 3], [0, 2, 1]]
    ax = attempts(messages(ran), dead_letter_keys=[], ax=plt.figure().gca())
    assert heights(ax) == [[3, 3, 3, 3], [0, 2, 1, 1]]  # counted: the dead-letter copies carry attempt 4


def test_attempts_of_a_loopback_pipe_that_redelivers_its_own_copies():
    from nbkit import App, HandlerOutcome, StdioBroker
    from nbkit.notebook.session import Session

    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=out, loopback=True)
    broker.subscriber("jobs", max_attempts=3, dead_letter="jobs.dlq", out_retry="jobs")(
        lambda d: HandlerOutcome.retry_after(2)
    )
    session = Session(App(broker))
    session.run()
    ax = attempts(session.events)
    assert heights(ax) == [[2, 2, 2]] and legend(ax) == ["pipe"]
    ax = attempts(read_pipe(lines=out), ax=plt.figure().gca())  # stdout: the copies (2, 3) and 2 dead letters
    assert heights(ax) == [[0, 2, 2]]
    # stdout holds only copies: the plot says so, in the legend and where attempt 1's bar would be
    assert legend(ax) == ["pipe (stdout: copies only)"]
    (note,) = [t for t in ax.texts if t.get_gid() == "pipe-output-note"]
    assert "stdin" in note.get_text() and note.get_position() == (1, 0)
    ax = dead_letters(read_pipe(lines=out), ax=plt.figure().gca())
    assert heights(ax) == [[0, 0, 2]]  # 1 s bins over what stdout covers (+2 s to +4 s); both at +4 s


def test_attempts_draws_on_the_current_axes_by_default(ran):
    fig, (left, right) = plt.subplots(1, 2)
    plt.sca(right)
    assert attempts(ran.session.events) is right
    assert left.containers == []


def test_a_pipe_only_frame_keeps_the_pipe_colour(make_scenario):
    sc = make_scenario(file=False)
    sc.session.run()
    ax = attempts(sc.session.events)
    assert legend(ax) == ["pipe"]
    assert ax.containers[0][0].get_facecolor() == to_rgba("C1")


# -- retry delays --------------------------------------------------------------------------------------
def test_retry_delays_one_bar_group_per_distinct_delay(ran):
    ax = retry_delays(ran.session.events)
    assert ticks(ax) == ["2 s", "5 s", "10 s"]
    assert heights(ax) == [[0, 3, 3], [3, 0, 0]]
    assert legend(ax) == ["file", "pipe"]
    assert ax.get_xlabel() == "retry delay (s)"
    assert ax.get_ylabel() == "retry copies (count)"
    assert ax.get_title() == "Scheduled retry delays"


def test_retry_delays_histogram_when_bins_are_given(ran):
    ax = retry_delays(ran.session.events, bins=[0, 5, 20])
    assert heights(ax) == [[0, 6], [3, 0]]  # [0, 5) and [5, 20], file then pipe
    assert legend(ax) == ["file", "pipe"]
    assert ax.get_xlabel() == "retry delay (s)"


def test_retry_delays_histogram_when_delays_are_many(ran):
    ev = ran.session.events.copy()
    ev["delay"] = pd.array(np.where(ev["action"] == "delayed-copy", np.arange(len(ev)) * 0.5, np.nan), "Float64")
    assert ev["delay"].nunique() == 9 <= MAX_DISTINCT_DELAYS
    ax = retry_delays(ev)
    assert len(ticks(ax)) == 9 and all(t.endswith(" s") for t in ticks(ax))
    ev = pd.concat([ev, ev.assign(delay=ev["delay"] + 100)], ignore_index=True)
    ax = retry_delays(ev, ax=plt.figure().gca())
    assert sum(sum(h) for h in heights(ax)) == 18
    assert not any(t.endswith(" s") for t in ticks(ax))  # numeric histogram axis, not labelled bars


def test_retry_delays_of_a_messages_frame_say_no_data(ran):
    ax = retry_delays(messages(ran))
    assert texts(ax)[0].startswith("no data")
    assert "does not record delays" in texts(ax)[0] and "session.events" in texts(ax)[0]
    assert ax.get_xlabel() == "retry delay (s)"


# -- dead letters --------------------------------------------------------------------------------------
def bar_centers(ax) -> list[list[float]]:
    return [[round(p.get_x() + p.get_width() / 2, 6) for p in c] for c in ax.containers]


def test_dead_letters_per_bin_over_the_same_moments_per_transport(ran):
    ax = dead_letters(ran.session.events, freq="5s")
    # the run lasts 15 s (first delivery to the last dead letter): 4 bins of 5 s from its start
    assert heights(ax) == [[0, 0, 0, 3], [1, 0, 0, 0]]
    file, pipe = bar_centers(ax)
    assert file == pipe == [2.5, 7.5, 12.5, 17.5]  # both over the bin they count: never dodged in time
    assert all(bar.get_width() == 5 for c in ax.containers for bar in c)
    assert ax.containers[0][0].get_fill() and not ax.containers[1][0].get_fill()  # bars, then an outline
    assert ax.containers[1][0].get_linestyle() == "--"
    assert ax.get_xlim() == (0, 20)
    assert legend(ax) == ["file", "pipe (outline)"]
    assert ax.get_ylabel() == "dead letters per 5 s"
    assert ax.get_xlabel() == "time (s) from 2024-01-01 00:00:00 UTC"
    assert ax.get_title() == "Dead letters over time"


def test_dead_letters_of_a_one_minute_run_span_about_a_minute(tmp_path):
    from nbkit import App, FileBroker, FilePosition, HandlerOutcome
    from nbkit.notebook.session import Session

    broker = FileBroker(tmp_path / "o.ss")

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")
    def fail(d):
        return HandlerOutcome.retry_after(30)

    session = Session(App(broker))
    broker.publish("orders", "a")
    session.step()
    session.advance(30)
    session.step()  # attempt 2 at +30 s: dead letter
    session.advance(30)
    broker.publish("orders", "b")
    session.step()  # a first delivery at +60 s ends the minute
    ax = dead_letters(session.events)
    low, high = ax.get_xlim()
    assert ax.get_xlabel().startswith("time (s) from ")
    assert 60 <= high - low < 3600  # seconds: about a minute, not years
    assert ax.get_ylabel() == "dead letters per 5 s"  # the label names the real bin: 13 bins of 5 s
    assert heights(ax) == [[0] * 6 + [1] + [0] * 6]


def test_identical_file_and_pipe_series_both_stay_visible():
    times = pd.to_datetime(["2024-01-01T00:00:00Z", "2024-01-01T00:00:03Z"]).astype("datetime64[ms, UTC]")
    rows = [
        {"time": t, "transport": tr, "attempt": a, "action": act}
        for tr in ("file", "pipe")
        for t, a, act in ((times[0], 1, "delayed-copy"), (times[1], 2, "dead-letter"))
    ]
    events = pd.DataFrame(rows)
    events["transport"] = pd.Categorical(events["transport"], categories=["file", "pipe"])
    ax = attempts(events, ax=plt.figure().gca())  # counts per attempt: side by side
    file, pipe = ax.containers
    assert heights(ax)[0] == heights(ax)[1] and sum(heights(ax)[0]) > 0  # the same series...
    for f, p in zip(file, pipe, strict=True):  # ...drawn side by side, never on top of each other
        assert f.get_x() + f.get_width() <= p.get_x() + 1e-9
    assert file[0].get_facecolor() != pipe[0].get_facecolor()
    ax = dead_letters(events, ax=plt.figure().gca())  # a time axis: the same moments, bar and outline
    file, pipe = ax.containers
    assert heights(ax)[0] == heights(ax)[1] and sum(heights(ax)[0]) > 0
    for f, p in zip(file, pipe, strict=True):
        assert (f.get_x(), f.get_width()) == (p.get_x(), p.get_width())
        assert p.get_zorder() > f.get_zorder() and to_rgba(p.get_edgecolor()) == to_rgba("C1")


def test_dead_letters_chooses_the_bin_from_the_span(ran):
    ax = dead_letters(ran.session.events)
    assert ax.get_ylabel() == "dead letters per 1 s"  # 15 s span -> 16 one-second bins
    assert [len(c) for c in ax.containers] == [16, 16]
    assert auto_freq(pd.Timedelta(hours=3)) == "15min"
    assert auto_freq(pd.Timedelta(0)) == "1s"
    assert auto_freq(pd.Timedelta(milliseconds=300)) == "100ms"
    assert auto_freq(pd.Timedelta(days=10_000)) == "28D"
    assert [plots._duration_text(pd.Timedelta(x)) for x in ("100ms", "5s", "1min", "3h", "1D", "7D")] == [
        "100 ms", "5 s", "1 min", "3 h", "1 day", "7 days",
    ]  # fmt: skip


def test_dead_letters_from_what_the_runtime_wrote(ran):
    ax = dead_letters(read_stream(ran.path))
    # the file's first message is at +0 s, its dead letters at +15 s: 16 one-second bins
    assert heights(ax) == [[0] * 15 + [3]]
    assert legend(ax) == ["file"]


def test_dead_letters_fall_back_to_the_settlement_time(ran):
    ev = ran.session.events.copy()
    ev["written_at"] = pd.Series(pd.NaT, index=ev.index, dtype="datetime64[ms, UTC]")  # e.g. copy lost
    ax = dead_letters(ev, freq="5s", by=None)
    # pipe at +0 s, file dead-lettered at +15 s (settled then), all in one group
    assert heights(ax) == [[1, 0, 0, 3]]


def test_dead_letters_rejects_a_bad_freq(ran):
    with pytest.raises(ValueError, match="freq"):
        dead_letters(ran.session.events, freq="fortnightly")
    with pytest.raises(ValueError, match="fixed bin width"):
        dead_letters(ran.session.events, freq="1MS")


# -- empty data and the dashboard ----------------------------------------------------------------------
def test_empty_data_gives_labelled_empty_axes(scenario):
    empty_events = scenario.session.events  # nothing ran yet
    empty_messages = read_pipe(lines=[])
    assert empty_events.empty and empty_messages.empty
    for frame in (empty_events, empty_messages):
        for plot, xlabel in ((attempts, "attempt"), (retry_delays, "retry delay"), (dead_letters, "time")):
            ax = plot(frame, ax=plt.figure().gca())
            assert texts(ax)[0].startswith("no data")
            assert xlabel in ax.get_xlabel()
            assert ax.get_ylabel() and ax.get_title()
            assert len(ax.containers) == 0 and len(ax.lines) == 0


def test_dashboard_has_three_labelled_panels(ran):
    fig = dashboard(ran.session.events, figsize=(12, 3))
    assert isinstance(fig, Figure)
    assert tuple(fig.get_size_inches()) == (12, 3)
    assert fig.get_suptitle() == "Retries and dead letters: file and pipe"
    a, r, d = fig.axes
    assert [ax.get_title() for ax in fig.axes] == [
        "Deliveries per attempt",
        "Scheduled retry delays",
        "Dead letters over time",
    ]
    assert heights(a) == [[3, 3, 3], [2, 1, 1]]
    assert heights(r) == [[0, 3, 3], [3, 0, 0]]
    assert heights(d) == [[0] * 15 + [3], [1] + [0] * 15]
    for ax in (a, r):
        assert legend(ax) == ["file", "pipe"]
    assert legend(d) == ["file", "pipe (outline)"]  # a time axis: the pipe drawn over the same bins


def test_dashboard_titles_name_only_the_transports_present(make_scenario):
    for options, title in (({"pipe": False}, "file"), ({"file": False}, "pipe")):
        sc = make_scenario(**options)
        sc.session.run()
        fig = dashboard(sc.session.events)
        assert fig.get_suptitle() == f"Retries and dead letters: {title}"
        assert all(legend(ax) == [title] for ax in fig.axes)
        plt.close(fig)


def test_dashboard_of_a_messages_frame_and_of_nothing(ran, scenario):
    fig = dashboard(messages(ran), freq="5s")
    assert len(fig.axes) == 3
    assert texts(fig.axes[1])[0].startswith("no data\na file or a pipe does not record delays")
    assert fig.axes[2].get_ylabel() == "dead letters per 5 s"
    assert legend(fig.axes[0]) == ["file", "pipe (stdout: copies only)"]
    fig = dashboard(ran.session.events.iloc[:0])
    assert fig.get_suptitle() == "Retries and dead letters"
    assert [texts(ax)[0] for ax in fig.axes] == [
        "no data\nno delivery in this frame yet",
        "no data\nno retry copy was scheduled",
        "no data\nnothing recorded yet",
    ]


def test_public_alias_module():
    assert nbkit.plot.__all__ == ["attempts", "dashboard", "dead_letters", "retry_delays", "timeline"]
    assert nbkit.plot.attempts is attempts and nbkit.plot.dashboard is dashboard
    for name in nbkit.plot.__all__:
        doc = getattr(nbkit.plot, name).__doc__
        assert ">>> " in doc
        assert not any("{" + key + "}" in doc for key in plots._DOCS)  # shared docs filled in


# -- timeline ------------------------------------------------------------------------------------------
def artist(ax, gid: str):
    """The one Line2D drawn with ``gid`` (deliveries-file, end-dead-letter, ...), or None."""
    found = [line for line in ax.get_lines() if line.get_gid() == gid]
    assert len(found) <= 1
    return found[0] if found else None


def points(ax, gid: str) -> list[tuple[float, int]]:
    line = artist(ax, gid)
    return [] if line is None else sorted(zip(map(float, line.get_xdata()), map(int, line.get_ydata()), strict=True))


def lanes(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def ends(ax) -> list[str]:
    return [t.get_text() for t in ax.child_axes[0].get_yticklabels()]


def test_timeline_one_lane_per_message_with_a_marker_per_delivery(ran):
    ax = nbkit.plot.timeline(ran.session.events)
    # file: 3 messages delivered 3 times each (their copies continue the lane); pipe: 4 input lines
    assert lanes(ax) == [f"file orders #{i}" for i in (1, 2, 3)] + [f"pipe orders #{i}" for i in range(4)]
    assert points(ax, "deliveries-file") == sorted((t, lane) for lane in range(3) for t in (0.0, 5.0, 15.0))
    assert points(ax, "deliveries-pipe") == [(0.0, lane) for lane in range(3, 7)]
    assert points(ax, "end-dead-letter") == [(0.0, 6), (15.0, 0), (15.0, 1), (15.0, 2)]
    assert points(ax, "end-copy-out") == [(2.0, 3), (2.0, 4), (2.0, 5)]  # pipe copies leave on stdout
    assert ends(ax) == ["dead letter → orders.dead"] * 3 + ["copy out → orders.retry"] * 3 + [
        "dead letter → orders.dlq"
    ]
    # the retry delays are lines from each delivery to its copy: 5 s, then 10 s, on the file lanes
    (file_delays,) = [c for c in ax.collections if c.get_gid() == "delay-file"]
    spans = sorted((float(s[0][0]), float(s[1][0])) for s in file_delays.get_segments())
    assert spans == [(0.0, 5.0)] * 3 + [(5.0, 15.0)] * 3
    assert {t.get_text() for t in ax.texts} >= {"5 s", "10 s", "2 s", "1", "2", "3"}
    assert ax.get_xlabel() == "time since the first delivery (s)"
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
        "file delivery (number: attempt)",
        "pipe delivery (number: attempt)",
    ]


def test_timeline_marks_every_kind_of_end(tmp_path):
    session = end_states.every_end(end_states.first_deliveries(tmp_path))
    ax = timeline(session.events)
    assert ends(ax) == ["handled", "dropped", "dropped (exception)", "rejected", "handled", "copy due"]
    assert points(ax, "end-handled") == [(0.0, 0), (4.0, 4)]
    assert points(ax, "end-rejected") == [(4.0, 3)]
    assert points(ax, "end-pending") == [(30.0, 5)]
    assert points(ax, "deliveries-file") == [(0.0, lane) for lane in range(6)] + [(4.0, 3), (4.0, 4)]


def test_timeline_pending_then_lost_in_a_crash(tmp_path):
    from nbkit import App, FileBroker, FilePosition, HandlerOutcome
    from nbkit.notebook.session import Session

    broker = FileBroker(tmp_path / "o.ss")

    @broker.subscriber("orders", start_at=FilePosition.beginning())
    def later(d):
        return HandlerOutcome.retry_after(30)

    session = Session(App(broker))
    broker.publish("orders", "x")
    session.step()
    ax = timeline(session.events)
    assert points(ax, "end-pending") == [(30.0, 0)] and ends(ax) == ["copy due"]
    (dashed,) = [c for c in ax.collections if c.get_gid() == "unwritten-file"]
    assert [(float(s[0][0]), float(s[1][0])) for s in dashed.get_segments()] == [(0.0, 30.0)]
    session.crash()
    fig = Figure()
    ax = timeline(session.events, ax=fig.add_subplot())
    assert points(ax, "end-lost") == [(0.0, 0)] and ends(ax) == ["copy lost"]  # lost at the crash, at 0 s
    assert artist(ax, "end-pending") is None
    assert [t.get_text() for t in ax.texts if t.get_gid() == "delay-label"] == ["was due in 30 s"]


def test_timeline_limits_lanes_and_says_so(ran):
    ax = timeline(ran.session.events, max_lanes=2)
    assert lanes(ax) == ["file orders #1", "file orders #2"]
    assert ax.get_title() == "Each message through time (first 2 of 7 messages)"
    assert len(points(ax, "deliveries-file")) == 6 and artist(ax, "deliveries-pipe") is None
    with pytest.raises(ValueError, match="max_lanes"):
        timeline(ran.session.events, max_lanes=0)


def test_timeline_of_nothing_and_of_a_messages_frame(scenario):
    ax = timeline(scenario.session.events)
    assert texts(ax) == ["no data\nno message delivered yet"]
    scenario.session.run()
    with pytest.raises(ValueError, match="timeline needs an events frame"):
        timeline(messages(scenario))


def legend_covers_a_bar(ax) -> bool:
    """True when the legend's box, as drawn, overlaps any bar of ``ax`` (its figure is drawn first)."""
    ax.figure.canvas.draw()
    box = ax.get_legend().get_window_extent()
    return any(box.overlaps(bar.get_window_extent()) for c in ax.containers for bar in c if bar.get_height() > 0)


@pytest.mark.parametrize("size", [(13, 4), (4, 2.5)])  # the dashboard, and the SessionPanel's small chart
def test_legends_sit_above_the_bars(ran, size):
    fig = Figure(figsize=size, layout="constrained")
    for plot in (attempts, retry_delays, dead_letters):
        ax = plot(ran.session.events, ax=fig.add_subplot())
        assert not legend_covers_a_bar(ax), plot.__name__
        fig.clear()


def test_an_empty_dead_letter_panel_says_why(tmp_path):
    from nbkit import App, FileBroker, FilePosition, HandlerOutcome
    from nbkit.notebook.session import Session

    broker = FileBroker(tmp_path / "o.ss")
    broker.subscriber("orders", start_at=FilePosition.beginning())(lambda d: HandlerOutcome.ack())
    session = Session(App(broker))
    broker.publish("orders", "x")
    session.step()
    ax = dead_letters(session.events)
    assert texts(ax) == ["no data\nno dead letter: no message reached\nthe cap with a dead-letter key"]
    ax = dead_letters(read_stream(tmp_path / "o.ss"), ax=plt.figure().gca())
    assert texts(ax) == [
        "no data\nno message on a dead-letter key\n(like orders.dead or jobs.dlq; see dead_letter_keys)"
    ]


def test_timeline_follows_a_loopback_pipe_through_its_own_copies():
    session = end_states.loopback_pipe()
    ax = timeline(session.events)
    # each input line is one lane: read back as jobs.retry (another subscription) at +2 s and +4 s
    assert lanes(ax) == ["pipe jobs #0", "pipe jobs #1"]
    assert points(ax, "deliveries-pipe") == [(t, lane) for t in (0.0, 2.0, 4.0) for lane in (0, 1)]
    assert points(ax, "end-dead-letter") == [(4.0, 0), (4.0, 1)]
    assert artist(ax, "end-copy-out") is None


# -- what a class reads when it is projected (issues 25 and 29) ----------------------------------------
def test_a_copy_abandoned_at_a_later_crash_is_lost_when_the_process_died(tmp_path):
    session = end_states.crashed_in_the_delay_window(tmp_path)
    assert session.events["lost_at"].iloc[0] == T0 + pd.Timedelta(seconds=12)
    ax = timeline(session.events, ax=Figure().add_subplot())
    assert points(ax, "end-lost") == [(12.0, 0)]


def test_attempt_digits_sit_inside_markers_large_enough_to_project(ran):
    ax = timeline(ran.session.events)
    digits = [t for t in ax.texts if t.get_gid() == "attempt-number"]
    assert digits and all(t.get_fontsize() >= 9 for t in digits if t.get_color() == "white")
    assert artist(ax, "deliveries-file").get_markersize() >= 14


def test_handled_and_dead_letter_ends_differ_in_shape_not_only_colour(tmp_path):
    handled = artist(timeline(end_states.every_end(end_states.first_deliveries(tmp_path)).events), "end-handled")
    dead = artist(timeline(end_states.loopback_pipe().events), "end-dead-letter")
    handled, dead = handled.get_marker(), dead.get_marker()
    assert {handled, dead} == {"$\\checkmark$", "X"}  # a tick and a cross, whatever the colours


def test_the_ends_are_drawn_in_the_vocabulary_order(tmp_path):
    from nbkit.runtime.vocabulary import END_STATES

    session = end_states.every_end(end_states.first_deliveries(tmp_path))
    drawn = [str(line.get_gid()).removeprefix("end-") for line in timeline(session.events).lines]
    drawn = [gid for gid in drawn if gid in END_STATES]
    assert len(drawn) >= 4 and drawn == [s for s in END_STATES if s in drawn]  # the legend lists them in that order


def short_delays(tmp_path, delays):
    """One message whose copies wait the given delays, in turn, on a virtual clock."""
    from nbkit import App, FileBroker, FilePosition, HandlerOutcome
    from nbkit.notebook.session import Session

    broker = FileBroker(tmp_path / "short.ss")

    @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=len(delays) + 1)
    def handle(d):
        return HandlerOutcome.retry_after(delays[d.attempt - 1]) if d.attempt <= len(delays) else None

    session = Session(App(broker))
    broker.publish("orders", "x")
    session.run()
    return session


def test_delay_labels_never_overlap(tmp_path):
    session = short_delays(tmp_path, [0.2, 0.2, 0.2, 0.2, 60])  # four short delays beside a long one
    fig = Figure(figsize=(8, 2.5), layout="constrained")
    ax = timeline(session.events, ax=fig.add_subplot())
    fig.canvas.draw()
    labels = [t for t in ax.texts if t.get_gid() == "delay-label"]
    assert "60 s" in [t.get_text() for t in labels] and len(labels) < 5  # crowded ones are left out
    boxes = [t.get_window_extent() for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    (tmp_path / "wide").mkdir()
    ax = timeline(short_delays(tmp_path / "wide", [5, 5]).events, ax=Figure().add_subplot())
    assert [t.get_text() for t in ax.texts if t.get_gid() == "delay-label"] == ["5 s", "5 s"]  # room: all kept


def test_attempts_on_a_log_scale_keeps_its_bars(ran):
    fig = Figure()
    ax = attempts(ran.session.events, ax=fig.add_subplot())
    top = max(max(h) for h in heights(ax))
    assert ax.get_ylim()[0] == 0 and ax.get_ylim()[1] >= top * 1.3  # linear: from 0, room for the legend
    ax.set_yscale("log")
    fig.canvas.draw()
    low, high = ax.get_ylim()
    assert 0 < low <= 1 and high >= top  # every bar of one delivery or more is on the chart


def long_run() -> pd.DataFrame:
    """Dead letters over eight hours, with an outage at 11:00."""
    start = pd.Timestamp("2024-03-05T08:00:00Z")
    times = [start, start + pd.Timedelta(hours=3, minutes=1), start + pd.Timedelta(hours=8)]
    events = pd.DataFrame(
        {"time": pd.to_datetime(times).astype("datetime64[ms, UTC]"), "transport": "file", "attempt": [1, 3, 1],
         "action": ["unsupported", "dead-letter", "unsupported"], "stream_key": "orders", "seq": [1, 2, 3],
         "outcome": ["ack", "retry_after", "ack"]}
    )  # fmt: skip
    events["transport"] = pd.Categorical(events["transport"], categories=["file", "pipe"])
    return events


def test_long_spans_read_in_clock_time_and_short_ones_on_request():
    fig = Figure(figsize=(8, 3))
    ax = dead_letters(long_run(), ax=fig.add_subplot())
    fig.canvas.draw()
    assert ax.get_xlabel() == "time (UTC, 2024-03-05)"
    shown = [t.get_text() for t in ax.get_xticklabels()]
    assert "10:00" in shown or "11:00" in shown  # clock times, not hours since the start
    ax = dead_letters(long_run(), ax=Figure().add_subplot(), clock="elapsed")
    assert ax.get_xlabel().startswith("time (h) from 2024-03-05 08:00:00")
    ax = timeline(long_run(), ax=Figure().add_subplot(), clock="elapsed")
    assert ax.get_xlabel() == "time since the first delivery (h)"
    ax = timeline(long_run(), ax=Figure().add_subplot())
    assert ax.get_xlabel() == "time (UTC, 2024-03-05)"
    with pytest.raises(ValueError, match="clock must be one of"):
        dead_letters(long_run(), clock="local")


def test_observed_delays_are_read_against_the_scheduled_ones(ran):
    from nbkit import lineage

    ax = retry_delays(lineage(read_stream(ran.path)), bins=[0, 4, 8, 12], scheduled=[5, 10])
    lines = [line for line in ax.lines if line.get_gid() == "scheduled"]
    assert [line.get_xdata()[0] for line in lines] == [5, 10] and "scheduled delay" in legend(ax)


def test_the_top_lanes_delay_label_stays_inside_the_frame(ran):
    fig = Figure(figsize=(9, 3), layout="constrained")
    ax = timeline(ran.session.events, ax=fig.add_subplot())
    fig.canvas.draw()
    frame = ax.get_window_extent()
    top_lane = [t for t in ax.texts if t.get_gid() == "delay-label" and t.xy[1] == 0]
    assert top_lane and all(t.get_window_extent().y1 < frame.y1 for t in top_lane)
