"""What the plots draw, as data: deliveries, retry delays and dead letters over time, from any accepted frame.

:mod:`nbkit.plot` draws; this module prepares, with pandas and numpy only (no matplotlib), so each plot's
numbers are tested on their own. Three kinds of frame are accepted, told apart by their columns
(:func:`frame_kind`): an **events frame** (``session.events``), a **messages frame** (``read_stream``,
``read_pipe``, a counted ``message_counts`` frame) and a **lineage frame** (``nbkit.lineage``). Every one is
first read as one small frame of deliveries (:func:`deliveries`); :func:`attempt_counts`,
:func:`retry_delay_counts` and :func:`dead_letter_bins` condense it into the value their plot draws, and
:func:`steps_of` reads an events or lineage frame as the timeline's steps. What each action means comes from
the outcome vocabulary (:mod:`nbkit.runtime.vocabulary`).

Examples
--------
>>> import pandas as pd
>>> from nbkit.tabular.plot_data import deliveries, retry_delay_counts
>>> events = pd.DataFrame({
...     "time": pd.to_datetime([0, 5000], unit="ms", utc=True), "transport": ["file", "file"],
...     "attempt": [1, 2], "action": ["delayed-copy", "dead-letter"], "delay": [5.0, None]})
>>> deliveries(events)[["attempt", "delay", "is_dead_letter"]]
   attempt  delay  is_dead_letter
0        1    5.0           False
1        2    NaN            True
>>> retry_delay_counts(events).table["file"].to_dict()  # copies per distinct delay (s)
{5.0: 1}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from nbkit.runtime.redrive import REDRIVEN_FROM_HEADER
from nbkit.runtime.vocabulary import ACTION_TERMS
from nbkit.tabular.lineage import DeadLetterKeys, dead_letter_predicate
from nbkit.tabular.timeline_steps import STEP_READERS, file_lanes_first

__all__ = [
    "MAX_DISTINCT_DELAYS",
    "MAX_DISTINCT_OBSERVED",
    "AttemptCounts",
    "DeadLetterBins",
    "RetryDelayCounts",
    "attempt_counts",
    "auto_freq",
    "dead_letter_bins",
    "deliveries",
    "frame_kind",
    "retry_delay_counts",
    "round_bins",
    "steps_of",
    "time_unit",
]

#: Up to this many distinct delays are drawn as one bar per delay; more become a histogram.
MAX_DISTINCT_DELAYS = 12
#: Observed delays (a lineage frame) get bars only up to this many distinct values: their labels are longer.
MAX_DISTINCT_OBSERVED = 6
_FREQ_LADDER = (
    "100ms", "1s", "5s", "10s", "30s", "1min", "5min", "15min", "30min",
    "1h", "3h", "6h", "12h", "1D", "7D", "28D",
)  # fmt: skip
_MAX_BINS = 20
_BIN_WIDTHS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 86400.0)
#: The actions that write a dead letter, and those whose copy is written at once (its delay reads 0 s).
_DEAD_LETTER_ACTIONS = [name for name, terms in ACTION_TERMS.items() if terms.dead_letter]
_COPY_ACTIONS = [name for name, terms in ACTION_TERMS.items() if terms.copies and not terms.copy_now]
_COPY_NOW_ACTIONS = [name for name, terms in ACTION_TERMS.items() if terms.copy_now]


def frame_kind(data: pd.DataFrame) -> str:
    """Which kind of frame ``data`` is: ``"events"``, ``"lineage"`` or ``"messages"``, told by its columns.

    Raises
    ------
    TypeError
        If ``data`` is not a DataFrame.
    ValueError
        If it has none of the columns that tell the kinds apart (the message names the columns it has).
    """
    if not isinstance(data, pd.DataFrame):
        raise TypeError(
            f"expected a DataFrame (session.events, read_stream(...) or read_pipe(...)), not {type(data).__name__}"
        )
    cols = set(data.columns)
    if "attempt" not in cols:
        raise ValueError(
            "missing column 'attempt': expected an events frame (session.events) or a read_stream/"
            f"read_pipe frame; got columns {list(data.columns)}"
        )
    if "action" in cols:
        return "events"
    if "message" in cols and "final_state" in cols:
        return "lineage"
    if "retry_count" in cols:
        return "messages"
    raise ValueError(
        "missing column 'action' (events frame, e.g. session.events) or 'retry_count' "
        f"(read_stream/read_pipe frame); got columns {list(data.columns)}"
    )


def deliveries(
    data: pd.DataFrame, *, dead_letter_keys: DeadLetterKeys = None, by: str | None = "transport"
) -> pd.DataFrame:
    """One small frame for every plot, whichever kind of frame came in.

    Parameters
    ----------
    data : DataFrame
        An events, messages or lineage frame (:func:`frame_kind`).
    dead_letter_keys : str, iterable of str or callable, optional
        Which stream keys of a messages frame are dead-letter keys (default: named like one).
    by : str or None, default "transport"
        The column whose values are the groups; None: one group, "all".

    Returns
    -------
    DataFrame
        Columns ``transport`` (str), ``group`` (str: the ``by`` column, "all" when by is None),
        ``attempt`` (Int64), ``delivered`` (bool: counts as a delivery), ``delay`` (float seconds, NaN
        unless the row scheduled a retry copy), ``is_dead_letter`` (bool), ``time`` (UTC: when the row
        happened; for a dead letter, when the copy was written), ``redriven`` (bool: a redriven dead
        letter -- the events' ``redriven`` column, or a message carrying ``x-nbkit-redriven-from``),
        ``weight`` (int: how many deliveries or messages the row stands for; 1, or a counted messages
        frame's ``count``). ``attrs``: ``kind``, ``group_order`` (the groups in a stable order),
        ``span`` (the first and last moment the frame records, or None) and ``transports`` (present,
        file first).
    """
    kind = frame_kind(data)
    if kind == "events":
        _require(data, "time", kind="events")
    else:
        _require(data, "stream_key", kind="read_stream/read_pipe")
    if by is not None and by not in data.columns:
        raise ValueError(f"missing column {by!r} (by={by!r}); got columns {list(data.columns)}")
    n = len(data)
    index = data.index
    transport = (
        data["transport"].astype(object).where(data["transport"].notna(), None)
        if "transport" in data.columns
        else pd.Series([None] * n, index=index, dtype=object)
    )
    if kind == "events":
        is_dead, delivered, delay, time = _events_rows(data)
    elif kind == "lineage":  # lineage() already told dead letters apart; delays are the observed ones
        is_dead = data["dead_letter"].to_numpy(dtype=bool)
        delivered = ~is_dead
        observed = pd.to_timedelta(data["delay"]).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
        delay = np.where(is_dead, np.nan, observed)
        time = _utc(data["timestamp"])
    else:
        is_dead_key = dead_letter_predicate(dead_letter_keys)
        keys = data["stream_key"].astype(object)
        is_dead = np.array([isinstance(k, str) and is_dead_key(k) for k in keys], dtype=bool)
        delivered = ~is_dead
        delay = np.full(n, np.nan)
        time = (
            _utc(data["timestamp"])
            if "timestamp" in data.columns
            else pd.Series(pd.NaT, index=index, dtype="datetime64[ms, UTC]")
        )
    group = pd.Series("all", index=index, dtype=object) if by is None else data[by].astype(object).map(_label)
    out = pd.DataFrame(
        {
            "transport": transport,
            "group": group,
            "attempt": pd.array(data["attempt"], dtype="Int64"),
            "delivered": delivered,
            "delay": delay,
            "is_dead_letter": is_dead,
            "time": time,
            "redriven": _redriven(data, kind),
            "weight": _weights(data, kind),
        },
        index=index,
    ).reset_index(drop=True)
    out.attrs["kind"] = kind
    out.attrs["group_order"] = _group_order(data, by)
    out.attrs["span"] = _run_span(data, kind)
    out.attrs["transports"] = _transports(transport)
    return out


def _events_rows(data: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.Series]:
    """An events frame's (is_dead, delivered, delay, time): every row a delivery; delays of the copy actions
    (0 s for a copy now); a dead letter at ``written_at`` when its copy was written."""
    n = len(data)
    action = data["action"].astype(object)
    is_dead = action.isin(_DEAD_LETTER_ACTIONS).to_numpy(dtype=bool)
    delay = np.full(n, np.nan)
    if "delay" in data.columns:
        raw = pd.to_numeric(data["delay"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        delay = np.where(action.isin(_COPY_ACTIONS).to_numpy(dtype=bool), raw, delay)
        delay = np.where(action.isin(_COPY_NOW_ACTIONS).to_numpy(dtype=bool), np.nan_to_num(raw, nan=0.0), delay)
    time = _utc(data["time"])
    if "written_at" in data.columns:
        written = _utc(data["written_at"])
        time = written.where(is_dead & written.notna(), time)
    return is_dead, np.ones(n, dtype=bool), delay, time


@dataclass(frozen=True)
class AttemptCounts:
    """Deliveries per attempt number, as the attempts plot draws them.

    ``reason``: why there is nothing to draw ("" when there is). ``groups``: the groups drawn, in order.
    ``table``: one row per attempt 1, 2, ... up to the highest (the index), one column per group.
    ``pipe_copies_only``: the pipe rows are a captured stdout, copies only (no attempt 1 is there to count).
    """

    reason: str = ""
    groups: list[str] = field(default_factory=list)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    pipe_copies_only: bool = False


def attempt_counts(
    data: pd.DataFrame, *, by: str | None = "transport", dead_letter_keys: DeadLetterKeys = None
) -> AttemptCounts:
    """Count the deliveries of a frame per attempt number and group (dead-letter copies are no delivery)."""
    d = deliveries(data, dead_letter_keys=dead_letter_keys, by=by)
    kind = d.attrs["kind"]
    d = d[d["delivered"] & d["attempt"].notna()]
    if d.empty:
        return AttemptCounts(
            "no delivery in this frame yet" if kind == "events" else "no message outside dead-letter keys"
        )
    positions = np.arange(1, int(d["attempt"].max()) + 1)
    table = d.groupby(["attempt", "group"])["weight"].sum().unstack("group", fill_value=0)
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    copies_only = kind in ("messages", "lineage") and by == "transport" and "pipe" in groups and _pipe_output_only(d)
    return AttemptCounts("", groups, table.reindex(positions, fill_value=0), copies_only)


def _pipe_output_only(d: pd.DataFrame) -> bool:
    """True when the pipe rows of :func:`deliveries` hold no first delivery: a pipe's captured stdout,
    which has only the retry copies (and dead letters) the stage wrote, never its input lines."""
    pipe = d[d["transport"] == "pipe"]
    return bool(len(pipe)) and not (pipe["attempt"] == 1).any()


@dataclass(frozen=True)
class RetryDelayCounts:
    """The retry delays a plot draws: bars per distinct delay (``table``), or a histogram (``values``).

    ``observed``: the delays are observed (a lineage frame), not scheduled. ``reason``: why there is
    nothing to draw ("" when there is). ``groups``: the groups drawn, in order. ``table`` (bars): one row
    per distinct delay (the index, seconds, ascending), one column per group, the copies at that delay;
    None for a histogram. ``values`` (histogram): each group's delays; ``bins``: the histogram's bins.
    """

    observed: bool
    reason: str = ""
    groups: list[str] = field(default_factory=list)
    table: pd.DataFrame | None = None
    values: list[np.ndarray] = field(default_factory=list)
    bins: int | Sequence[float] | str | None = None


def retry_delay_counts(
    data: pd.DataFrame, *, by: str | None = "transport", bins: int | Sequence[float] | str | None = None
) -> RetryDelayCounts:
    """The retry delays of a frame, counted as its plot draws them.

    With ``bins=None`` and at most :data:`MAX_DISTINCT_DELAYS` distinct delays (observed ones:
    :data:`MAX_DISTINCT_OBSERVED`) each delay is one bar group; else a histogram, with ``bins`` as given,
    round-width bins for observed delays (:func:`round_bins`) or ``"auto"``. Messages frames carry no
    delays (``reason`` says so).
    """
    d = deliveries(data, by=by)
    observed = d.attrs["kind"] == "lineage"
    d = d[d["delay"].notna()]
    if d.empty:
        if d.attrs.get("kind") == "messages":
            return RetryDelayCounts(
                observed, "a file or a pipe does not record delays:\nplot session.events to see them"
            )
        return RetryDelayCounts(observed, "no retry copy was scheduled")
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    distinct = np.sort(d["delay"].unique())
    if bins is None and len(distinct) <= (MAX_DISTINCT_OBSERVED if observed else MAX_DISTINCT_DELAYS):
        table = d.groupby(["delay", "group"])["weight"].sum().unstack("group", fill_value=0)
        return RetryDelayCounts(observed, groups=groups, table=table.reindex(distinct, fill_value=0))
    values = [d.loc[d["group"] == g, "delay"].to_numpy() for g in groups]
    if bins is None:
        bins = round_bins(d["delay"].to_numpy(dtype=float)).tolist() if observed else "auto"
    return RetryDelayCounts(observed, groups=groups, values=values, bins=bins)


def round_bins(seconds: np.ndarray) -> np.ndarray:
    """Histogram edges at multiples of a round width (1 ms, 5 ms, 10 ms, 50 ms, 0.1 s, ... 1 day),
    the finest giving at most 30 bins over the values, so a bar reads "0.25 to 0.30 s"."""
    lo, hi = float(np.min(seconds)), float(np.max(seconds))
    for width in _BIN_WIDTHS:
        if (hi - lo) / width <= 30:
            break
    start = np.floor(lo / width) * width
    return start + width * np.arange(int(np.ceil((hi - start) / width + 1e-9)) + 1)


@dataclass(frozen=True)
class DeadLetterBins:
    """Dead letters counted per time bin over the whole run a frame records.

    ``kind``: the frame's kind. ``reason``: why there is nothing to draw ("" when there is). ``start``, ``end``:
    the run's first and last moment; ``width``: a bin's width; ``counts``: one row per bin (0, 1, ...), one
    column per group (``groups``, in order); ``redriven``: the redriven rows per bin (None when there are none).
    """

    kind: str
    reason: str = ""
    start: pd.Timestamp | None = None
    end: pd.Timestamp | None = None
    width: pd.Timedelta = field(default_factory=lambda: pd.Timedelta(seconds=1))
    groups: list[str] = field(default_factory=list)
    counts: pd.DataFrame = field(default_factory=pd.DataFrame)
    redriven: np.ndarray | None = None

    @property
    def n_bins(self) -> int:
        """How many bins span the run."""
        return len(self.counts)

    @property
    def span_seconds(self) -> float:
        """Seconds from the run's first moment to its last (0 when it records none)."""
        return (self.end - self.start).total_seconds() if self.start is not None and self.end is not None else 0.0


def dead_letter_bins(
    data: pd.DataFrame,
    *,
    freq: str | None = None,
    by: str | None = "transport",
    dead_letter_keys: DeadLetterKeys = None,
) -> DeadLetterBins:
    """Count the dead letters of a frame per time bin, every group over the same bins.

    Events frames: the dead-letter rows at ``written_at`` (``time`` when the copy was not written). Messages
    frames: the rows on dead-letter keys at their ``timestamp``. ``freq``: the bin width as a fixed pandas
    frequency; default :func:`auto_freq` of the run's span.

    Raises
    ------
    ValueError
        If ``freq`` is not a fixed pandas frequency.
    """
    width = _fixed_width(freq) if freq is not None else None
    d = deliveries(data, dead_letter_keys=dead_letter_keys, by=by)
    span, kind = d.attrs["span"], d.attrs["kind"]
    back = d[d["redriven"] & d["time"].notna()]
    d = d[d["is_dead_letter"] & d["time"].notna()]
    if span is None:
        return DeadLetterBins(kind, "nothing recorded yet")
    if d.empty:
        if kind == "events":
            return DeadLetterBins(kind, "no dead letter: no message reached\nthe cap with a dead-letter key")
        return DeadLetterBins(
            kind, "no message on a dead-letter key\n(like orders.dead or jobs.dlq; see dead_letter_keys)"
        )
    start, end = span
    width = width if width is not None else _width(auto_freq(end - start))
    n_bins = max(1, int(np.floor((end - start) / width)) + 1)
    which = ((d["time"] - start) // width).astype(int).clip(0, n_bins - 1)
    counts = (
        pd.DataFrame({"bin": which.to_numpy(), "group": d["group"].to_numpy(), "weight": d["weight"].to_numpy()})
        .groupby(["bin", "group"])["weight"]
        .sum()
        .unstack("group", fill_value=0)
        .reindex(range(n_bins), fill_value=0)
    )
    redriven = None
    if len(back):
        back_bin = ((back["time"] - start) // width).astype(int).clip(0, n_bins - 1).to_numpy()
        redriven = np.bincount(back_bin, weights=back["weight"].to_numpy(), minlength=n_bins).astype(np.int64)
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    return DeadLetterBins(kind, "", start, end, width, groups, counts, redriven)


def _fixed_width(freq: str) -> pd.Timedelta:
    """``freq`` as a bin width, or a ValueError naming it when it is no pandas frequency or not a fixed one."""
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
    except ValueError as exc:
        raise ValueError(f"freq takes a pandas frequency such as '1s' or '1min', not {freq!r}: {exc}") from None
    try:
        width = pd.Timedelta(offset)
    except ValueError:
        width = pd.Timedelta(0)
    if not width > pd.Timedelta(0):
        raise ValueError(f"freq={freq!r} is not a fixed bin width (use ms, s, min, h or D)")
    return width


def auto_freq(span: pd.Timedelta) -> str:
    """The finest round bin width from a ladder that cuts ``span`` into fewer than 20 bins (1 s for
    a run without duration)."""
    if span <= pd.Timedelta(0):
        return "1s"
    for freq in _FREQ_LADDER:
        if span / _width(freq) < _MAX_BINS:
            return freq
    return _FREQ_LADDER[-1]


def _width(freq: str) -> pd.Timedelta:
    return pd.Timedelta(pd.tseries.frequencies.to_offset(freq))


def time_unit(span_seconds: float) -> tuple[float, str]:
    """Seconds per unit and its name ("s", "min", "h", "days") for an axis spanning ``span_seconds``."""
    if span_seconds >= 3 * 86400:
        return 86400.0, "days"
    if span_seconds >= 3 * 3600:
        return 3600.0, "h"
    if span_seconds >= 10 * 60:
        return 60.0, "min"
    return 1.0, "s"


def steps_of(data: pd.DataFrame) -> pd.DataFrame:
    """An events or lineage frame as the timeline's steps (:mod:`nbkit.tabular.timeline_steps`), file lanes first.

    Raises
    ------
    ValueError
        For a messages frame: it does not say which records are one message.
    """
    kind = frame_kind(data)
    reader = STEP_READERS.get(kind)
    if reader is None:
        raise ValueError(
            f"timeline needs an events frame (session.events or nbkit.events_frame(app.events)) or a lineage frame "
            f"(nbkit.lineage(read_stream(...))); a {kind} frame does not say which records are one message"
        )
    return file_lanes_first(reader(data))


def _require(data: pd.DataFrame, *names: str, kind: str) -> None:
    for name in names:
        if name not in data.columns:
            raise ValueError(f"missing column {name!r} in this {kind} frame; got columns {list(data.columns)}")


def _utc(values: pd.Series) -> pd.Series:
    return pd.to_datetime(values, utc=True).astype("datetime64[ms, UTC]")


def _weights(data: pd.DataFrame, kind: str) -> np.ndarray:
    """How many messages each row stands for: a counted messages frame's ``count``, else 1 each."""
    if kind != "messages" or "count" not in data.columns:
        return np.ones(len(data), dtype=np.int64)
    counts = pd.to_numeric(data["count"], errors="coerce")
    if counts.isna().any() or (counts < 0).any():
        raise ValueError("the 'count' column of a counted messages frame must hold whole numbers of 0 or more")
    return counts.to_numpy(dtype=np.int64)


def _redriven(data: pd.DataFrame, kind: str) -> np.ndarray:
    """Which rows are redriven dead letters (see :mod:`nbkit.runtime.redrive`)."""
    if kind in ("messages", "events") and "redriven" in data.columns:  # a counted frame says it per row
        return data["redriven"].fillna(False).to_numpy(dtype=bool)
    if kind == "events" or "headers" not in data.columns:
        return np.zeros(len(data), dtype=bool)
    return np.array([isinstance(h, dict) and REDRIVEN_FROM_HEADER in h for h in data["headers"]], dtype=bool)


def _run_span(data: pd.DataFrame, kind: str) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    """First and last moment the frame records (settlements and copies written, or message
    timestamps); None when it records none. Plots over time span this whole run, not only the
    moments they count."""
    names = ("time", "written_at") if kind == "events" else ("timestamp",)
    moments = [_utc(data[name]).dropna() for name in names if name in data.columns]
    moments = [m for m in moments if len(m)]
    if not moments:
        return None
    every = pd.concat(moments)
    return every.min(), every.max()


def _transports(transport: pd.Series) -> list[str]:
    """The transports present, file before pipe (then any other, sorted)."""
    present = {str(t) for t in transport if t is not None}
    rank = {"file": 0, "pipe": 1}
    return sorted(present, key=lambda t: (rank.get(t, 2), t))


def _label(value: object) -> str:
    return "(missing)" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _group_order(data: pd.DataFrame, by: str | None) -> list[str]:
    """Groups in a stable order: a categorical's category order, else sorted."""
    if by is None:
        return ["all"]
    col = data[by]
    present = {_label(v) for v in col.astype(object)}
    if isinstance(col.dtype, pd.CategoricalDtype):
        ordered = [str(c) for c in col.cat.categories if str(c) in present]
        return ordered + sorted(present - set(ordered))
    return sorted(present)
