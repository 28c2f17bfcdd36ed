"""Plots of retries and dead letters, file and pipe side by side (matplotlib, seaborn-style).

:func:`attempts`, :func:`retry_delays` and :func:`dead_letters` count; :func:`timeline` shows every
message through time (its deliveries, the delays between them, how it ended); :func:`dashboard`
puts the three counts in one Figure. Where file and pipe give the same numbers their bars stand
side by side, so both stay visible; a panel with nothing to draw says why, in the panel.

Every function takes the data first and keyword-only options, draws on ``ax`` (default: the current
Axes, ``plt.gca()``) and returns it; :func:`dashboard` returns a Figure. Nothing calls
``plt.show()``: in a notebook end the cell with ``;`` (or ``plt.show()``) so the figure shows once
and no ``<Axes ...>`` repr is printed.

What each plot draws is prepared by :mod:`nbkit.tabular.plot_data` (tested there without matplotlib);
this module only draws it. Three kinds of frame are accepted, told apart by their columns:

- an **events frame** (``session.events``, ``nbkit.events_frame(app.events)``; columns ``action``, ``attempt``,
  schema in :mod:`nbkit.runtime.events`): one row per settlement. Every row is a delivery; delays
  are the ``delay`` column of ``copy`` (0 s) and ``delayed-copy`` rows; dead letters are the
  ``dead-letter`` rows, at ``written_at`` (``time`` if the copy was not written).
- a **messages frame** (:func:`~nbkit.tabular.frames.read_stream`, ``read_pipe``, ``concat_frames``;
  columns ``retry_count``, ``attempt``): one row per message as written. Rows on a dead-letter key
  are dead letters (at their ``timestamp``) and are not counted as deliveries; every other row is a
  delivery of attempt ``attempt``. Scheduled delays are not written anywhere, so they are unknown.
  A messages frame with a ``count`` column (:func:`nbkit.dask.message_counts`: messages counted on
  Dask workers per key, attempt and time bin) is drawn the same way, each row standing for ``count``
  messages; its ``redriven`` column, where present, marks redriven dead letters.
- a **lineage frame** (:func:`~nbkit.tabular.lineage.lineage`; columns ``message``, ``final_state``):
  one row per record, linked into messages. As a messages frame, plus the **observed** delays: the
  ``delay`` of each retry copy since the record it copies (dead-letter copies left out).

:func:`timeline` needs an events frame or a lineage frame: a plain messages frame does not say which
records are one message.

In a messages frame, a stream key is a dead-letter key when it is in ``dead_letter_keys``; by default
(None) when it is named like one (:func:`nbkit.wire.keys.is_dead_letter_key`: ``orders.dead``,
``jobs.dlq``, ``orders-dead``, ...), since a file does not record the declared key. An events frame
needs no guess: its ``dead-letter`` rows are the declaration at work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from nbkit.runtime.vocabulary import END_STATES, STEP_STATES
from nbkit.tabular.lineage import DeadLetterKeys
from nbkit.tabular.plot_data import (
    RetryDelayCounts,
    attempt_counts,
    dead_letter_bins,
    deliveries,
    frame_kind,
    retry_delay_counts,
    steps_of,
    time_unit,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

_F = TypeVar("_F", bound=Callable[..., Any])

__all__ = ["attempts", "dashboard", "dead_letters", "retry_delays", "timeline"]

_TRANSPORT_COLORS = {"file": "C0", "pipe": "C1"}

_DOCS = {
    "data": """data : DataFrame
        An events frame (``session.events``) or a messages frame (``read_stream``/``read_pipe``);
        see the module docstring for how each is read.""",
    "ax": """ax : matplotlib Axes, optional
        Where to draw; default the current Axes (``plt.gca()``).""",
    "by": """by : str or None, default "transport"
        Column whose values get one bar group / line each (file and pipe side by side, with a
        legend); None draws a single group.""",
    "dead_letter_keys": """dead_letter_keys : str, iterable of str or callable, optional
        Which stream keys of a messages frame are dead-letter keys: one key, a collection of
        keys, or a predicate ``key -> bool``. Default: keys named like one
        (:func:`nbkit.wire.keys.is_dead_letter_key`). Ignored for events and lineage frames:
        they already say which rows are dead letters (``action``, ``dead_letter``).""",
    "returns_ax": """Returns
    -------
    matplotlib Axes""",
}


def _share_docs(func: _F) -> _F:
    """Fill ``{data}``, ``{ax}``, ... in a docstring with the shared parameter text (written once)."""
    doc = func.__doc__ or ""
    for name, text in _DOCS.items():
        doc = doc.replace("{" + name + "}", text)
    func.__doc__ = doc
    return func


# -- drawing helpers ----------------------------------------------------------------------------------
def _transport_text(transports: list[str]) -> str:
    """ "file", "pipe", "file and pipe" -- for titles that name only what is drawn."""
    return " and ".join(transports)


def _colors(groups: list[str], by: str | None) -> dict[str, str]:
    if by == "transport":
        spare = (f"C{i}" for i in range(2, 10_000))
        return {g: _TRANSPORT_COLORS.get(g) or next(spare) for g in groups}
    return {g: f"C{i % 10}" for i, g in enumerate(groups)}


def _axes(ax: Axes | None) -> Axes:
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax


def _integer_ticks(axis: Axis) -> None:
    """Whole-number ticks on a count axis: the default locator (a MaxNLocator) told to use integers."""
    from matplotlib.ticker import MaxNLocator

    locator = axis.get_major_locator()
    if isinstance(locator, MaxNLocator):
        locator.set_params(integer=True)


def _root_figure(ax: Axes) -> Figure:
    """The Figure ``ax`` is drawn on (through any subfigure): offsets in points are relative to its dpi."""
    fig = ax.get_figure(root=True)
    if fig is None:
        raise ValueError("the Axes belongs to no Figure")
    return fig


def _no_data(ax: Axes, reason: str) -> Axes:
    """Leave ``ax`` empty with a sentence, in the panel, saying why there is nothing to draw."""
    ax.text(
        0.5,
        0.5,
        f"no data\n{reason}",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color="0.3",
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _grouped_bars(
    ax: Axes,
    positions: np.ndarray,
    table: pd.DataFrame,
    groups: list[str],
    by: str | None,
    *,
    spacing: float = 1.0,
    labels: dict[str, str] | None = None,
) -> None:
    """One bar per (position, group), groups side by side, so equal series stay visible; ``table``
    is indexed by position with one column per group, ``spacing`` the distance between positions.
    The legend is one row at the top, above the tallest bar (the y axis leaves room for it)."""
    colors = _colors(groups, by)
    n = len(groups)
    width = 0.8 * spacing / n
    for i, g in enumerate(groups):
        heights = table[g].to_numpy() if g in table.columns else np.zeros(len(positions))
        offset = (i - (n - 1) / 2) * width
        ax.bar(positions + offset, heights, width, label=(labels or {}).get(g, g), color=colors[g])
    title = None if by in (None, "transport") else by
    _headroom(ax, table, groups, 1.3 if title is None else 1.45)
    if by is not None:
        _top_legend(ax, title=title)


def _headroom(ax: Axes, table: pd.DataFrame, groups: list[str], factor: float) -> None:
    """Room above the tallest bar for the legend, without fixing the bottom at 0: the y axis keeps
    autoscaling, so ``ax.set_yscale("log")`` afterwards still works (bars stick to 0 on a linear axis)."""
    top = max((float(table[g].max()) for g in groups if g in table.columns), default=0.0)
    ax.autoscale(enable=True, axis="y")
    ax.set_ymargin(0)
    ax.update_datalim([(ax.get_xlim()[0], max(top, 1.0) * factor)], updatex=False)  # an invisible top
    ax.autoscale_view(scalex=False)


def _overlaid_bars(ax: Axes, edges: np.ndarray, table: pd.DataFrame, groups: list[str], by: str | None) -> None:
    """Counts per time bin, every group over the *same* bins: the first group as filled bars, each
    other one as an outline (dashed, then dotted) over the full bin. Side-by-side bars would put
    one group later in time than it happened; an outline over a filled bar of the same height shows
    two equal series as one bar with a dashed edge, which the legend names."""
    colors = _colors(groups, by)
    styles = ("--", ":", "-.")
    for i, g in enumerate(groups):
        heights = table[g].to_numpy() if g in table.columns else np.zeros(len(edges) - 1)
        if i == 0:
            ax.bar(edges[:-1], heights, np.diff(edges), align="edge", color=colors[g], alpha=0.85,
                   label=g, gid=f"bars-{g}")  # fmt: skip
        else:
            ax.bar(edges[:-1], heights, np.diff(edges), align="edge", fill=False, edgecolor=colors[g],
                   linewidth=2.2, linestyle=styles[(i - 1) % len(styles)], label=f"{g} (outline)",
                   gid=f"bars-{g}", zorder=3)  # fmt: skip
    title = None if by in (None, "transport") else by
    _headroom(ax, table, groups, 1.3 if title is None else 1.45)
    if by is not None:
        _top_legend(ax, title=title)


def _top_legend(ax: Axes, *, title: str | None = None) -> None:
    """A one-row legend in the headroom above the data (the caller leaves ~25% free at the top)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(
            handles,
            labels,
            title=title,
            loc="upper right",
            ncol=len(handles),
            fontsize="small",
            borderaxespad=0.3,
            handlelength=1.2,
            columnspacing=1.0,
        )


# -- the plots -----------------------------------------------------------------------------------------
@_share_docs
def attempts(
    data: pd.DataFrame,
    *,
    ax: Axes | None = None,
    by: str | None = "transport",
    dead_letter_keys: DeadLetterKeys = None,
) -> Axes:
    """Bar chart of deliveries per attempt number (1, 2, 3, ...), one bar group per ``by`` value.

    Attempt 1 is the first delivery; attempt n the (n-1)-th retry copy. Attempt numbers with no
    delivery get a zero-height bar, so file and pipe line up. A pipe's captured stdout holds only
    the copies the stage wrote (attempt 2 and up), never its input lines: when the pipe rows of a
    messages frame have no attempt 1, the legend and a note in the empty attempt-1 slot say so.

    Parameters
    ----------
    {data}
    {ax}
    {by}
    {dead_letter_keys}

    {returns_ax}

    See Also
    --------
    nbkit.plot.dashboard : Attempts, retry delays and dead letters on one figure.
    nbkit.plot.retry_delays : The scheduled retry delays.
    nbkit.plot.dead_letters : Dead-letter copies over time.
    nbkit.plot.timeline : One lane per message through time.

    Examples
    --------
    >>> ax = attempts(session.events)                                      # doctest: +SKIP
    >>> ax = attempts(concat_frames(read_stream("orders.ss"), read_pipe(lines=out)))  # doctest: +SKIP
    """
    counted = attempt_counts(data, by=by, dead_letter_keys=dead_letter_keys)
    ax = _axes(ax)
    ax.set_title("Deliveries per attempt")
    ax.set_xlabel("attempt number (1 = first delivery)")
    ax.set_ylabel("deliveries (count)")
    if counted.reason:
        return _no_data(ax, counted.reason)
    positions, groups = counted.table.index.to_numpy(), counted.groups
    labels = {"pipe": "pipe (stdout: copies only)"} if counted.pipe_copies_only else None
    _grouped_bars(ax, positions.astype(float), counted.table, groups, by, labels=labels)
    if counted.pipe_copies_only:  # say it where the missing bar would be
        n = len(groups)
        x = 1 + (groups.index("pipe") - (n - 1) / 2) * 0.8 / n
        ax.text(
            x,
            0,
            " attempt 1 came in\n on stdin, not here",
            rotation=90,
            ha="center",
            va="bottom",
            fontsize="small",
            color="0.3",
            gid="pipe-output-note",
        )
    ax.set_xticks(positions, [str(p) for p in positions])
    _integer_ticks(ax.yaxis)
    return ax


@_share_docs
def retry_delays(
    data: pd.DataFrame,
    *,
    ax: Axes | None = None,
    by: str | None = "transport",
    bins: int | Sequence[float] | str | None = None,
    scheduled: Sequence[float] | None = None,
) -> Axes:
    """Distribution of the scheduled retry delays in seconds, per ``by`` value.

    Delays come from the ``delay`` column of an events frame (``delayed-copy`` rows, and ``copy``
    rows as 0 s). Retry delays are usually a few fixed values, so with ``bins=None`` and at most
    12 distinct delays each delay gets its own labelled bar group ("5 s": how many copies were
    scheduled that far ahead) -- clearer than a histogram whose bins straddle them. With more
    distinct delays, or when ``bins`` is given (a number or edges, as for ``plt.hist``), it draws a
    histogram with shared bins instead. Messages frames carry no delays: the Axes says "no data".
    A lineage frame (``nbkit.lineage``) gives the **observed** delays of its retry copies: bars when
    there are at most 6 distinct values (a virtual clock's exact delays), else a histogram (delays
    measured on a real clock rarely repeat to the millisecond).

    Parameters
    ----------
    {data}
    {ax}
    {by}
    bins : int, sequence or str, optional
        Histogram bins; forces a histogram.
    scheduled : sequence of float, optional
        Delays (s) the service scheduled: a dashed line at each, labelled, so observed delays can be
        read against them (with a histogram only: bars are labelled by their delay already).

    {returns_ax}

    See Also
    --------
    nbkit.plot.dashboard : Attempts, retry delays and dead letters on one figure.
    nbkit.plot.attempts : Deliveries per attempt number.
    nbkit.plot.dead_letters : Dead-letter copies over time.
    nbkit.plot.timeline : One lane per message through time.

    Examples
    --------
    >>> ax = retry_delays(session.events)                           # doctest: +SKIP
    >>> ax = retry_delays(session.events, bins=20)                  # doctest: +SKIP
    """
    counted = retry_delay_counts(data, by=by, bins=bins)
    ax = _axes(ax)
    ax.set_title("Observed retry delays" if counted.observed else "Scheduled retry delays")
    ax.set_xlabel("observed delay since the previous attempt (s)" if counted.observed else "retry delay (s)")
    ax.set_ylabel("retry copies (count)")
    if counted.reason:
        return _no_data(ax, counted.reason)
    if counted.table is not None:
        positions = np.arange(len(counted.table), dtype=float)
        _grouped_bars(ax, positions, counted.table.set_axis(positions), counted.groups, by)
        ax.set_xticks(positions, [f"{v:g} s" for v in counted.table.index])
    else:
        _delay_histogram(ax, counted, by, scheduled)
    _integer_ticks(ax.yaxis)
    return ax


def _delay_histogram(ax: Axes, counted: RetryDelayCounts, by: str | None, scheduled: Sequence[float] | None) -> None:
    """The delays as a histogram over shared bins, a dashed line at each ``scheduled`` delay, the legend on top."""
    colors = _colors(counted.groups, by)
    ax.hist(counted.values, bins=counted.bins, label=counted.groups, color=[colors[g] for g in counted.groups])
    ax.update_datalim([(ax.get_xlim()[0], ax.get_ylim()[1] * 1.3)], updatex=False)  # room for the legend
    ax.autoscale_view(scalex=False)
    for k, value in enumerate(sorted(set(scheduled or ()))):
        ax.axvline(value, color="0.2", linestyle="--", linewidth=1, gid="scheduled",
                   label="scheduled delay" if k == 0 else None)  # fmt: skip
    if by is not None:
        _top_legend(ax, title=None if by == "transport" else by)


def _duration_text(width: pd.Timedelta) -> str:
    """A bin width as people write it: "100 ms", "5 s", "1 min", "3 h", "7 days"."""
    seconds = width.total_seconds()
    for per, unit in ((86400, "days"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= per and seconds % per == 0:
            n = int(seconds // per)
            return f"{n} {'day' if unit == 'days' and n == 1 else unit}"
    return f"{seconds * 1000:g} ms"


@_share_docs
def dead_letters(
    data: pd.DataFrame,
    *,
    ax: Axes | None = None,
    freq: str | None = None,
    by: str | None = "transport",
    dead_letter_keys: DeadLetterKeys = None,
    clock: str = "auto",
) -> Axes:
    """Dead-letter copies over time: a count per time bin, one series per ``by`` value.

    The time axis spans the whole run the frame records (from its first to its last moment, not
    only the dead letters). It counts from the start, in seconds, minutes or hours as fits (the
    start in the x label), or shows UTC clock times (``clock``); the bin width is in the y label.
    Every group is counted over the same bins, drawn over the same stretch of time: the first
    group as bars, the others as outlines over them, so equal series read as one bar with a dashed
    edge and no group looks later than it was. Events
    frames: the ``dead-letter`` rows at ``written_at`` (``time`` when the copy was not written).
    Messages frames: the rows on dead-letter keys at their ``timestamp``. Redriven dead letters
    (``nbkit.redrive``) are black triangles on dashed stems in the same bins: in events frames the
    deliveries marked ``redriven``, in messages frames the messages carrying ``x-nbkit-redriven-from``.

    Parameters
    ----------
    {data}
    {ax}
    freq : str, optional
        Bin width as a pandas frequency ("1s", "30s", "1min", "1h"); default the finest of
        100ms, 1s, 5s, 10s, 30s, 1min, 5min, ... 28D giving fewer than 20 bins over the run
        (1 s for a run without duration).
    {by}
    {dead_letter_keys}
    clock : {"auto", "elapsed", "wall"}, default "auto"
        Time since the start, or UTC clock times; "auto" uses clock times from a span of an hour
        (an outage at 11:00 then reads 11:00, not "3").

    {returns_ax}

    See Also
    --------
    nbkit.plot.dashboard : Attempts, retry delays and dead letters on one figure.
    nbkit.plot.attempts : Deliveries per attempt number.
    nbkit.plot.retry_delays : The scheduled retry delays.
    nbkit.plot.timeline : One lane per message through time.

    Examples
    --------
    >>> ax = dead_letters(session.events)                           # doctest: +SKIP
    >>> ax = dead_letters(read_stream("orders.ss"), clock="wall")   # doctest: +SKIP
    >>> ax = dead_letters(read_stream("orders.ss"), freq="1min")    # doctest: +SKIP
    """
    _wants_wall(clock, 0.0)
    binned = dead_letter_bins(data, freq=freq, by=by, dead_letter_keys=dead_letter_keys)
    ax = _axes(ax)
    ax.set_title("Dead letters over time")
    if binned.reason or binned.start is None:
        ax.set_xlabel("time")
        ax.set_ylabel("dead letters (count)")
        return _no_data(ax, binned.reason)
    per, unit = time_unit(max(binned.span_seconds, binned.width.total_seconds()))
    step = binned.width.total_seconds() / per
    centers = (np.arange(binned.n_bins) + 0.5) * step
    _overlaid_bars(ax, np.arange(binned.n_bins + 1) * step, binned.counts.set_axis(centers), binned.groups, by)
    ax.set_xlim(0, binned.n_bins * step)
    if _wants_wall(clock, binned.span_seconds):
        ax.set_xlabel(_wall_clock_axis(ax, binned.start, per, binned.n_bins * binned.width.total_seconds()))
    else:
        ax.set_xlabel(f"time ({unit}) from {binned.start.tz_convert('UTC'):%Y-%m-%d %H:%M:%S} UTC")
    ax.set_ylabel(f"dead letters per {_duration_text(binned.width)}")
    if binned.redriven is not None:
        _redriven_line(ax, binned.redriven, centers)
    _integer_ticks(ax.yaxis)
    return ax


def _redriven_line(ax: Axes, per_bin: np.ndarray, centers: np.ndarray) -> None:
    """The redriven rows per bin of :func:`dead_letters`: a dashed black stem with a triangle in each bin
    that has any (none elsewhere: they come back at a moment, not gradually), with its legend entry."""
    some = per_bin > 0
    ax.vlines(centers[some], 0, per_bin[some], colors="k", linestyles="dashed", linewidth=1.5)
    ax.plot(centers[some], per_bin[some], color="k", linestyle="none", marker="^", markersize=9,
            label="redriven", gid="redriven")  # fmt: skip
    ax.set_title("Dead letters and redrives over time")
    ax.set_ylabel(ax.get_ylabel().replace("dead letters", "dead letters, redriven"))
    ax.set_ylim(top=max(ax.get_ylim()[1], per_bin.max() * 1.3))
    _top_legend(ax)


# -- the timeline --------------------------------------------------------------------------------------
#: The step states a retry delay line ends in: drawn solid (its copy was written) or dashed (due, or lost).
_COPY_WRITTEN = [name for name, state in STEP_STATES.items() if state.copy == "written"]
_COPY_UNWRITTEN = [name for name, state in STEP_STATES.items() if state.copy == "unwritten"]
_DELIVERY_MARKERS = {"file": "o", "pipe": "D"}
#: Delivery markers (points) and the attempt digit inside them: large enough to read when projected.
_DELIVERY_SIZE = 15
_DIGIT_SIZE = 9.5
#: A delay label's font size (points) and the width of one of its characters, as a share of it.
_LABEL_POINTS = 8.5
_CHAR_WIDTH = 0.62


def _delay_text(delay: float, state: str) -> str:
    """A retry delay's label; a lost copy says it was never written."""
    return f"was due in {delay:g} s" if state == "lost" else f"{delay:g} s"


def _apart(
    rows: np.ndarray,
    y: np.ndarray,
    t: np.ndarray,
    c: np.ndarray,
    delays: np.ndarray,
    states: np.ndarray,
    *,
    ax: Axes,
) -> list[int]:
    """The delay labels to draw: left to right in each lane, one that would overlap the last one kept
    is left out (its line still shows the delay). Widths are estimated from the Axes' width in points,
    with room to spare for the layout shrinking the Axes later."""
    fig = _root_figure(ax)
    width_points = fig.get_figwidth() * 72 * ax.get_position().width * 0.8
    left, right = float(np.nanmin(t)), float(np.nanmax(np.concatenate([t, c])))
    span = max(right - left, 1e-9) * 1.15  # the x limits add margins
    per_point = span / max(width_points, 1.0)
    kept: list[int] = []
    last_end: dict[int, float] = {}
    for i in sorted(rows, key=lambda r: (y[r], (t[r] + c[r]) / 2)):
        half = len(_delay_text(delays[i], states[i])) * _LABEL_POINTS * _CHAR_WIDTH / 2 * per_point
        middle = (t[i] + c[i]) / 2
        lane = int(y[i])
        if lane in last_end and middle - half < last_end[lane]:
            continue
        kept.append(int(i))
        last_end[lane] = middle + half
    return kept


#: How a time axis is labelled: "elapsed" (seconds, minutes ... since the start), "wall" (UTC clock
#: times) or "auto" (wall-clock when the span is at least :data:`WALL_CLOCK_FROM` seconds).
CLOCKS = ("auto", "elapsed", "wall")
WALL_CLOCK_FROM = 3600.0


def _wants_wall(clock: str, span_seconds: float) -> bool:
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(map(repr, CLOCKS))}, not {clock!r}")
    return clock == "wall" or (clock == "auto" and span_seconds >= WALL_CLOCK_FROM)


def _wall_clock_axis(ax: Axes, start: pd.Timestamp, per: float, span_seconds: float) -> str:
    """Label an x axis whose values are ``per``-second units since ``start`` with UTC clock times;
    returns the axis label (it names the date when the span stays within one day)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    start = start.tz_convert("UTC")
    end = start + pd.Timedelta(seconds=span_seconds)
    one_day = start.normalize() == end.normalize()
    fmt = "%H:%M:%S" if span_seconds < 600 else "%H:%M"
    if not one_day:
        fmt = "%m-%d %H:%M"

    def label(x: float, _pos: object = None) -> str:
        return (start + pd.Timedelta(seconds=float(x) * per)).strftime(fmt)

    ax.xaxis.set_major_locator(MaxNLocator(nbins=7, min_n_ticks=3))
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    return f"time (UTC, {start:%Y-%m-%d})" if one_day else "time (UTC, month-day hour:minute)"


def timeline(events: pd.DataFrame, *, ax: Axes | None = None, max_lanes: int = 30, clock: str = "auto") -> Axes:
    """Every message as a lane through time: its deliveries, the retry delays between them, its end.

    One lane (row) per message, file messages first, each in order of appearance. Each delivery is
    a marker at the time it happened (round for file, diamond for pipe, in the transport's colour),
    labelled with its attempt number. A retry delay is a line from the delivery to the moment its
    copy was written, labelled with the delay; a dotted line follows until the copy was delivered
    again (at once in a run). The end is marked after the last delivery: handled, dropped, dead
    letter, rejected, copy lost (crash or shutdown), copy written but not yet delivered (a file's
    copy waiting in the file), copy written to stdout (a pipe's copies go to the next stage), or
    copy due and not yet written. The right-hand labels say how each lane ended. Time runs from
    the first delivery (the virtual clock's time in a Session).

    Parameters
    ----------
    events : DataFrame
        An events frame (``session.events``, ``nbkit.events_frame(app.events)``); schema in
        :mod:`nbkit.runtime.events`. A file's retry copy continues its message's lane when it is
        delivered again; each pipe input line is a lane of its own. Or a lineage frame
        (``nbkit.lineage(read_stream(path))``): one lane per message from the file alone, a marker
        per record that is not a dead-letter copy (at its timestamp), the observed delay to the
        next one, and the end the file shows (dead letter, or no further copy).
    ax : matplotlib Axes, optional
        Where to draw; default the current Axes (``plt.gca()``).
    max_lanes : int, default 30
        Draw at most this many lanes (the first messages); the title says how many were left out.
    clock : {"auto", "elapsed", "wall"}, default "auto"
        Label the time axis with the time since the first delivery, or with UTC clock times (what
        someone outside the team reads against an incident log); "auto" uses clock times from a span
        of an hour.

    Returns
    -------
    matplotlib Axes

    See Also
    --------
    nbkit.plot.dashboard : Attempts, retry delays and dead letters on one figure.
    nbkit.plot.attempts : Deliveries per attempt number.
    nbkit.plot.retry_delays : The scheduled retry delays.
    nbkit.plot.dead_letters : Dead-letter copies over time.

    Examples
    --------
    >>> import nbkit.plot as nkp
    >>> ax = nkp.timeline(session.events)                           # doctest: +SKIP
    >>> ax = nkp.timeline(session.events, clock="wall")             # doctest: +SKIP
    """
    if isinstance(max_lanes, bool) or not isinstance(max_lanes, int) or max_lanes < 1:
        raise ValueError(f"max_lanes must be a whole number >= 1, not {max_lanes!r}")
    _wants_wall(clock, 0.0)  # a wrong clock= fails before anything is drawn
    steps = steps_of(events)
    ax = _axes(ax)
    ax.set_title("Each message through time")
    if steps.empty:
        ax.set_xlabel("time since the first delivery")
        return _no_data(ax, "no message delivered yet")
    lanes = _Lanes.of(_first_lanes(ax, steps, max_lanes))
    _draw_delays(ax, lanes)
    _draw_waits(ax, lanes)
    _draw_delay_labels(ax, lanes)
    _draw_deliveries(ax, lanes)
    _draw_attempt_numbers(ax, lanes)
    _draw_ends(ax, lanes)
    _draw_lane_labels(ax, lanes)
    _draw_time_axis(ax, lanes, clock)
    _draw_legend(ax)
    return ax


def _first_lanes(ax: Axes, steps: pd.DataFrame, max_lanes: int) -> pd.DataFrame:
    """The steps of the first ``max_lanes`` lanes, the others left out of the rows and the categories;
    the title says how many were left out."""
    lanes = list(steps["message"].cat.categories)
    if len(lanes) <= max_lanes:
        return steps
    ax.set_title(f"Each message through time (first {max_lanes} of {len(lanes)} messages)")
    shown = steps[steps["message"].isin(lanes[:max_lanes])].copy()
    shown["message"] = shown["message"].cat.set_categories(lanes[:max_lanes])
    return shown


@dataclass(frozen=True)
class _Lanes:
    """The steps placed on the timeline's Axes, one array entry per step: x in time units (``unit``)
    since ``start`` (the first delivery), y the lane (0 at the top). Every draw helper reads this."""

    names: list[str]  # the lanes, top to bottom
    start: pd.Timestamp
    span: float  # seconds from the first delivery to the last delivery or copy
    per: float  # seconds per x unit
    unit: str
    t: np.ndarray  # deliveries
    c: np.ndarray  # copies or dead letters written (or due, or lost); NaN if none
    y: np.ndarray
    transport: np.ndarray
    state: np.ndarray
    delay: np.ndarray
    attempt: np.ndarray
    destination: np.ndarray
    note: np.ndarray

    @classmethod
    def of(cls, steps: pd.DataFrame) -> _Lanes:
        """Place a steps frame (not empty; lanes beyond the shown ones already left out)."""
        names = list(steps["message"].cat.categories)
        start = steps["time"].min()

        def since_start(values: pd.Series) -> np.ndarray:
            seconds = (pd.to_datetime(pd.Series(values), utc=True) - start).dt.total_seconds()
            return seconds.to_numpy(dtype=float)

        t, c = since_start(steps["time"]), since_start(steps["copy_at"])
        span = float(np.nanmax(np.concatenate([t, c]))) if len(t) else 0.0
        per, unit = time_unit(span)
        return cls(
            names=names,
            start=start,
            span=span,
            per=per,
            unit=unit,
            t=t / per,
            c=c / per,
            y=steps["message"].cat.codes.to_numpy(),
            transport=steps["transport"].to_numpy(),
            state=steps["state"].to_numpy(),
            delay=steps["delay"].to_numpy(),
            attempt=steps["attempt"].to_numpy(dtype=object),
            destination=steps["destination"].to_numpy(dtype=object),
            note=steps["note"].to_numpy(dtype=object),
        )


def _draw_delays(ax: Axes, lanes: _Lanes) -> None:
    """Each retry delay as a line from the delivery to its copy, in the transport's colour: solid when
    the copy was written, dashed when it is still due or was lost."""
    for transport in ("file", "pipe"):
        mine = (lanes.transport == transport) & ~np.isnan(lanes.c) & ~np.isnan(lanes.delay)
        written = mine & np.isin(lanes.state, _COPY_WRITTEN)
        unwritten = mine & np.isin(lanes.state, _COPY_UNWRITTEN)
        y, t, c, color = lanes.y, lanes.t, lanes.c, _TRANSPORT_COLORS[transport]
        if written.any():
            ax.hlines(y[written], t[written], c[written], colors=color, linewidth=2, gid=f"delay-{transport}")
        if unwritten.any():
            ax.hlines(y[unwritten], t[unwritten], c[unwritten], colors=color, linewidth=2, linestyles="dashed",
                      gid=f"unwritten-{transport}")  # fmt: skip


def _draw_waits(ax: Axes, lanes: _Lanes) -> None:
    """A dotted grey line from a copy written to its delivery, where that came later (at once in a run)."""
    next_time = np.full(len(lanes.t), np.nan)
    order = np.arange(len(lanes.t))
    for lane in np.unique(lanes.y):
        idx = order[lanes.y == lane]
        next_time[idx[:-1]] = lanes.t[idx[1:]]
    waiting = (lanes.state == "retried") & ~np.isnan(next_time) & (next_time > lanes.c)
    if waiting.any():
        y, c, until = lanes.y[waiting], lanes.c[waiting], next_time[waiting]
        ax.hlines(y, c, until, colors="0.6", linewidth=1, linestyles="dotted", gid="waiting")


def _draw_delay_labels(ax: Axes, lanes: _Lanes) -> None:
    """Each retry delay's length above the middle of its line (a lost copy's: right of the loss); the
    labels that would overlap are left out (:func:`_apart`)."""
    t, c, y, delays, states = lanes.t, lanes.c, lanes.y, lanes.delay, lanes.state
    labelled = np.flatnonzero(~np.isnan(delays) & ~np.isnan(c) & np.isin(states, _COPY_WRITTEN + _COPY_UNWRITTEN))
    for k in _apart(labelled, y, t, c, delays, states, ax=ax):
        lost = states[k] == "lost"  # at the loss, right of its mark: the delay it never finished
        ax.annotate(
            _delay_text(delays[k], states[k]),
            (c[k], y[k]) if lost else ((t[k] + c[k]) / 2, y[k]),
            xytext=(20, 0) if lost else (0, 6),
            textcoords="offset points",
            ha="left" if lost else "center",
            va="center" if lost else "bottom",
            fontsize="small",
            color="0.25",
            gid="delay-label",
        )


def _draw_deliveries(ax: Axes, lanes: _Lanes) -> None:
    """One marker per delivery, one artist per transport (round for file, diamond for pipe)."""
    for transport in ("file", "pipe"):
        mine = lanes.transport == transport
        if mine.any():
            ax.plot(
                lanes.t[mine],
                lanes.y[mine],
                linestyle="none",
                marker=_DELIVERY_MARKERS[transport],
                markersize=_DELIVERY_SIZE,
                color=_TRANSPORT_COLORS[transport],
                label=f"{transport} delivery (number: attempt)",
                gid=f"deliveries-{transport}",
                zorder=3,
            )


def _draw_attempt_numbers(ax: Axes, lanes: _Lanes) -> None:
    """Each delivery's attempt number: one digit in white inside its marker; deliveries at the same
    moment in a lane share one label ("1, 2"), set just below."""
    numbers: dict[tuple[int, float], list[str]] = {}
    for lane, t, attempt in zip(lanes.y, lanes.t, lanes.attempt, strict=True):
        numbers.setdefault((int(lane), float(t)), []).append(str(attempt))
    for (lane, t), label in numbers.items():
        alone = len(label) == 1 and len(label[0]) == 1
        ax.annotate(
            ", ".join(label),
            (t, lane),
            xytext=(0, 0 if alone else -7),
            textcoords="offset points",
            ha="center",
            va="center" if alone else "top",
            fontsize=_DIGIT_SIZE if alone else "small",
            fontweight="bold" if alone else "normal",
            gid="attempt-number",
            color="white" if alone else "0.2",
            zorder=5,
        )


def _draw_ends(ax: Axes, lanes: _Lanes) -> None:
    """How each lane ended, one artist per kind of end in legend order (the outcome vocabulary's
    :data:`~nbkit.runtime.vocabulary.END_STATES`), a little right of when it happened (its copy or dead
    letter; the delivery when there is none)."""
    import matplotlib.transforms as mtransforms

    end_shift = mtransforms.offset_copy(ax.transData, fig=_root_figure(ax), x=11, y=0, units="points")
    for state in END_STATES:
        mine = lanes.state == state
        if not mine.any():
            continue
        end = STEP_STATES[state]
        ax.plot(
            np.where(np.isnan(lanes.c[mine]), lanes.t[mine], lanes.c[mine]),
            lanes.y[mine],
            linestyle="none",
            marker=end.marker,
            markersize=9,
            color=end.colour,
            markerfacecolor="none" if end.hollow else end.colour,
            label=end.legend,
            gid=f"end-{state}",
            transform=end_shift,
            zorder=4,
        )


def _draw_lane_labels(ax: Axes, lanes: _Lanes) -> None:
    """The lanes' names on the left, first message at the top (room above it for its delay label), and
    on the right how each ended, in its end's colour."""
    ends: dict[int, tuple[str, str]] = {}  # lane -> (label, colour) of its end
    for state in END_STATES:
        for i in np.flatnonzero(lanes.state == state):
            ends[int(lanes.y[i])] = (_end_text(state, lanes.destination[i], lanes.note[i]), STEP_STATES[state].colour)
    shown = range(len(lanes.names))
    ax.set_yticks(shown, lanes.names)
    ax.set_ylim(len(lanes.names) - 0.5, -1.0)
    right = ax.secondary_yaxis("right")
    right.set_yticks(shown, [ends.get(lane, ("", ""))[0] for lane in shown])
    right.tick_params(length=0, labelsize="small")
    for lane, tick in enumerate(right.get_yticklabels()):
        tick.set_color(ends.get(lane, ("", "0.2"))[1])


def _draw_time_axis(ax: Axes, lanes: _Lanes, clock: str) -> None:
    """The x axis: time since the first delivery in a readable unit, or UTC clock times (``clock``);
    limits with a margin for the end markers, and a light vertical grid."""
    if _wants_wall(clock, lanes.span):
        ax.set_xlabel(_wall_clock_axis(ax, lanes.start, lanes.per, lanes.span))
    else:
        ax.set_xlabel(f"time since the first delivery ({lanes.unit})")
    width = max(lanes.span / lanes.per, 1)
    ax.set_xlim(-0.04 * width, width * 1.08)
    ax.grid(axis="x", color="0.9")
    ax.set_axisbelow(True)


def _draw_legend(ax: Axes) -> None:
    """The legend (deliveries and the kinds of end drawn) in three columns below the x axis label."""
    import matplotlib.transforms as mtransforms

    below_xlabel = mtransforms.offset_copy(ax.transAxes, fig=_root_figure(ax), y=-34, units="points")
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        bbox_transform=below_xlabel,
        ncol=3,
        fontsize="small",
        frameon=False,
    )


def _end_text(state: str, destination: str, note: str) -> str:
    """The right-hand label of a lane that ended in ``state`` (``note``, if any, in brackets)."""
    text = STEP_STATES[state].right_label(destination)
    return f"{text} ({note})" if note else text


@_share_docs
def dashboard(
    data: pd.DataFrame,
    *,
    figsize: tuple[float, float] = (13, 4),
    dead_letter_keys: DeadLetterKeys = None,
    freq: str | None = None,
    clock: str = "auto",
) -> Figure:
    """One Figure with three panels comparing file and pipe: attempts, retry delays, dead letters.

    ``data`` is an events frame or a messages frame (see :func:`attempts`); ``dead_letter_keys``
    ``freq`` and ``clock`` are passed on as in :func:`dead_letters`. The title names the transports the
    data holds; a panel with nothing to draw says why. The figure is made with pyplot, so in a
    notebook it shows once when the cell ends with ``;``.

    Parameters
    ----------
    {data}
    figsize : (float, float), default (13, 4)
        Figure size in inches.
    {dead_letter_keys}
    freq : str, optional
        The dead-letter panel's bin width, as in :func:`dead_letters`.
    clock : {"auto", "elapsed", "wall"}, default "auto"
        The dead-letter panel's time axis, as in :func:`dead_letters`.

    Returns
    -------
    matplotlib Figure

    See Also
    --------
    nbkit.plot.attempts : Deliveries per attempt number.
    nbkit.plot.retry_delays : The scheduled retry delays.
    nbkit.plot.dead_letters : Dead-letter copies over time.
    nbkit.plot.timeline : One lane per message through time.
    nbkit.Session : Where an events frame comes from.

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
    >>> from nbkit.plot import dashboard
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=3, dead_letter="orders.dead")
    ... def handle(delivery):
    ...     return HandlerOutcome.retry_after(2 ** delivery.attempt)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", '{"id": 1}')
    >>> _ = session.run()
    >>> fig = dashboard(session.events)
    >>> [ax.get_title() for ax in fig.axes]
    ['Deliveries per attempt', 'Scheduled retry delays', 'Dead letters over time']
    >>> fig.savefig("retries.png")
    """
    frame_kind(data)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize, layout="constrained")
    ax_attempts, ax_delays, ax_dead = fig.subplots(1, 3)
    attempts(data, ax=ax_attempts, dead_letter_keys=dead_letter_keys)
    retry_delays(data, ax=ax_delays)
    dead_letters(data, ax=ax_dead, freq=freq, dead_letter_keys=dead_letter_keys, clock=clock)
    present = deliveries(data, dead_letter_keys=dead_letter_keys).attrs["transports"]
    fig.suptitle(f"Retries and dead letters: {_transport_text(present)}" if present else "Retries and dead letters")
    return fig
