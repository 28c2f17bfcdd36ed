"""Plots of retries and dead letters, file and pipe side by side (matplotlib, seaborn-style).

Every function takes the data first and keyword-only options, draws on ``ax`` (default: the current
Axes, ``plt.gca()``) and returns it; :func:`dashboard` returns a Figure. Nothing calls
``plt.show()``: in a notebook end the cell with ``;`` (or ``plt.show()``) so the figure shows once
and no ``<Axes ...>`` repr is printed.

Two kinds of frame are accepted, told apart by their columns:

- an **events frame** (``session.events``, ``app.events_frame()``; columns ``action``, ``attempt``,
  schema in :mod:`nbkit.runtime.events`): one row per settlement. Every row is a delivery; delays
  are the ``delay`` column of ``copy`` (0 s) and ``delayed-copy`` rows; dead letters are the
  ``dead-letter`` rows, at ``written_at`` (``time`` if the copy was not written).
- a **messages frame** (:func:`~nbkit.notebook.frames.read_stream`, ``read_pipe``, ``concat_frames``;
  columns ``retry_count``, ``attempt``): one row per message as written. Rows on a dead-letter key
  are dead letters (at their ``timestamp``) and are not counted as deliveries; every other row is a
  delivery of attempt ``attempt``. Scheduled delays are not written anywhere, so they are unknown.

A stream key is a dead-letter key when it is in ``dead_letter_keys``; by default (None) when it ends
in ``.dead`` or ``.dlq`` (``orders.dead``, ``jobs.dlq``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

__all__ = ["attempts", "dashboard", "dead_letters", "retry_delays"]

DEFAULT_DEAD_LETTER_SUFFIXES = (".dead", ".dlq")
#: Up to this many distinct delays are drawn as one bar per delay; more become a histogram.
MAX_DISTINCT_DELAYS = 12
_TRANSPORT_COLORS = {"file": "C0", "pipe": "C1"}
_FREQ_LADDER = (
    "1ms", "10ms", "100ms", "1s", "5s", "10s", "30s", "1min", "5min", "15min", "30min",
    "1h", "3h", "6h", "12h", "1D", "7D", "28D",
)  # fmt: skip
_MAX_BINS = 30

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
        keys, or a predicate ``key -> bool``. Default: keys ending in ``.dead`` or ``.dlq``.
        Ignored for events frames (their ``action`` says it).""",
    "returns_ax": """Returns
    -------
    matplotlib Axes""",
}


def _share_docs(func):
    """Fill ``{data}``, ``{ax}``, ... in a docstring with the shared parameter text (written once)."""
    doc = func.__doc__ or ""
    for name, text in _DOCS.items():
        doc = doc.replace("{" + name + "}", text)
    func.__doc__ = doc
    return func


# -- normalising ---------------------------------------------------------------------------------------
def _frame_kind(data: pd.DataFrame) -> str:
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
    if "retry_count" in cols:
        return "messages"
    raise ValueError(
        "missing column 'action' (events frame, e.g. session.events) or 'retry_count' "
        f"(read_stream/read_pipe frame); got columns {list(data.columns)}"
    )


def _dead_letter_predicate(dead_letter_keys) -> Callable[[str], bool]:
    if dead_letter_keys is None:
        return lambda key: key.endswith(DEFAULT_DEAD_LETTER_SUFFIXES)
    if callable(dead_letter_keys):
        return lambda key: bool(dead_letter_keys(key))
    if isinstance(dead_letter_keys, str):
        keys = {dead_letter_keys}
    elif isinstance(dead_letter_keys, Iterable):
        keys = set(dead_letter_keys)
    else:
        raise TypeError(f"dead_letter_keys takes a key, keys or a predicate, not {dead_letter_keys!r}")
    return keys.__contains__


def _require(data: pd.DataFrame, *names: str, kind: str) -> None:
    for name in names:
        if name not in data.columns:
            raise ValueError(f"missing column {name!r} in this {kind} frame; got columns {list(data.columns)}")


def _utc(values: pd.Series) -> pd.Series:
    out = pd.to_datetime(values, utc=True)
    return out.astype("datetime64[ms, UTC]")


def _as_deliveries(
    data: pd.DataFrame,
    *,
    dead_letter_keys=None,
    by: str | None = "transport",
) -> pd.DataFrame:
    """One small frame for every plot, whichever kind of frame came in.

    Columns: ``transport`` (str), ``group`` (str: the ``by`` column, "all" when by is None),
    ``attempt`` (Int64), ``delivered`` (bool: counts as a delivery), ``delay`` (float seconds, NaN
    unless the row scheduled a retry copy), ``is_dead_letter`` (bool), ``time`` (UTC: when the row
    happened; for a dead letter, when the copy was written).
    """
    kind = _frame_kind(data)
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
    attempt = pd.array(data["attempt"], dtype="Int64")
    if kind == "events":
        action = data["action"].astype(object)
        is_dead = (action == "dead-letter").to_numpy(dtype=bool)
        delivered = np.ones(n, dtype=bool)
        delay = np.full(n, np.nan)
        if "delay" in data.columns:
            raw = pd.to_numeric(data["delay"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
            act = action.to_numpy()
            delay = np.where(act == "delayed-copy", raw, delay)
            delay = np.where(act == "copy", np.nan_to_num(raw, nan=0.0), delay)  # a copy now: 0 s
        time = _utc(data["time"])
        if "written_at" in data.columns:
            written = _utc(data["written_at"])
            time = written.where(is_dead & written.notna(), time)
    else:
        is_dead_key = _dead_letter_predicate(dead_letter_keys)
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
            "attempt": attempt,
            "delivered": delivered,
            "delay": delay,
            "is_dead_letter": is_dead,
            "time": time,
        },
        index=index,
    ).reset_index(drop=True)
    out.attrs["kind"] = kind
    out.attrs["group_order"] = _group_order(data, by)
    return out


def _label(value) -> str:
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


def _colors(groups: list[str], by: str | None) -> dict[str, str]:
    if by == "transport":
        spare = (f"C{i}" for i in range(2, 10_000))
        return {g: _TRANSPORT_COLORS.get(g) or next(spare) for g in groups}
    return {g: f"C{i % 10}" for i, g in enumerate(groups)}


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax


def _no_data(ax, reason: str | None = None):
    text = "no data" if not reason else f"no data\n({reason})"
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.45")
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _grouped_bars(ax, positions: np.ndarray, table: pd.DataFrame, groups: list[str], by: str | None) -> None:
    """One bar per (position, group), groups side by side; ``table`` is indexed by position with one
    column per group."""
    colors = _colors(groups, by)
    n = len(groups)
    width = 0.8 / n
    for i, g in enumerate(groups):
        heights = table[g].to_numpy() if g in table.columns else np.zeros(len(positions))
        offset = (i - (n - 1) / 2) * width
        ax.bar(positions + offset, heights, width, label=g, color=colors[g])
    top = max((float(table[g].max()) for g in groups if g in table.columns), default=0.0)
    ax.set_ylim(0, max(top, 1.0) * 1.3)  # headroom for the legend
    if by is not None:
        ax.legend(title=by)


# -- the plots -----------------------------------------------------------------------------------------
@_share_docs
def attempts(data: pd.DataFrame, *, ax=None, by: str | None = "transport", dead_letter_keys=None):
    """Bar chart of deliveries per attempt number (1, 2, 3, ...), one bar group per ``by`` value.

    Attempt 1 is the first delivery; attempt n the (n-1)-th retry copy. Attempt numbers with no
    delivery get a zero-height bar, so file and pipe line up.

    Parameters
    ----------
    {data}
    {ax}
    {by}
    {dead_letter_keys}

    {returns_ax}

    Examples
    --------
    >>> ax = attempts(session.events)                                      # doctest: +SKIP
    >>> ax = attempts(concat_frames(read_stream("orders.ss"), read_pipe(out)))  # doctest: +SKIP
    """
    d = _as_deliveries(data, dead_letter_keys=dead_letter_keys, by=by)
    ax = _axes(ax)
    ax.set_title("Deliveries per attempt")
    ax.set_xlabel("attempt number (1 = first delivery)")
    ax.set_ylabel("deliveries (count)")
    d = d[d["delivered"] & d["attempt"].notna()]
    if d.empty:
        return _no_data(ax)
    top = int(d["attempt"].max())
    positions = np.arange(1, top + 1)
    table = d.groupby(["attempt", "group"]).size().unstack("group", fill_value=0).reindex(positions, fill_value=0)
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    _grouped_bars(ax, positions.astype(float), table, groups, by)
    ax.set_xticks(positions, [str(p) for p in positions])
    ax.yaxis.get_major_locator().set_params(integer=True)
    return ax


@_share_docs
def retry_delays(data: pd.DataFrame, *, ax=None, by: str | None = "transport", bins=None):
    """Distribution of the scheduled retry delays in seconds, per ``by`` value.

    Delays come from the ``delay`` column of an events frame (``delayed-copy`` rows, and ``copy``
    rows as 0 s). Retry delays are usually a few fixed values, so with ``bins=None`` and at most
    12 distinct delays each delay gets its own labelled bar group ("5 s": how many copies were
    scheduled that far ahead) -- clearer than a histogram whose bins straddle them. With more
    distinct delays, or when ``bins`` is given (a number or edges, as for ``plt.hist``), it draws a
    histogram with shared bins instead. Messages frames carry no delays: the Axes says "no data".

    Parameters
    ----------
    {data}
    {ax}
    {by}
    bins : int, sequence or str, optional
        Histogram bins; forces a histogram.

    {returns_ax}

    Examples
    --------
    >>> ax = retry_delays(session.events)                           # doctest: +SKIP
    >>> ax = retry_delays(session.events, bins=20)                  # doctest: +SKIP
    """
    d = _as_deliveries(data, by=by)
    ax = _axes(ax)
    ax.set_title("Scheduled retry delays")
    ax.set_xlabel("retry delay (s)")
    ax.set_ylabel("retry copies (count)")
    d = d[d["delay"].notna()]
    if d.empty:
        reason = "delays are only known in events frames" if d.attrs.get("kind") == "messages" else None
        return _no_data(ax, reason)
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    distinct = np.sort(d["delay"].unique())
    if bins is None and len(distinct) <= MAX_DISTINCT_DELAYS:
        positions = np.arange(len(distinct), dtype=float)
        table = d.groupby(["delay", "group"]).size().unstack("group", fill_value=0).reindex(distinct, fill_value=0)
        table.index = positions
        _grouped_bars(ax, positions, table, groups, by)
        ax.set_xticks(positions, [f"{v:g} s" for v in distinct])
    else:
        colors = _colors(groups, by)
        values = [d.loc[d["group"] == g, "delay"].to_numpy() for g in groups]
        ax.hist(
            values,
            bins="auto" if bins is None else bins,
            label=groups,
            color=[colors[g] for g in groups],
        )
        if by is not None:
            ax.legend(title=by)
    ax.yaxis.get_major_locator().set_params(integer=True)
    return ax


def _auto_freq(span: pd.Timedelta) -> str:
    """The finest frequency from a ladder of round ones that cuts ``span`` into at most 30 bins."""
    for freq in _FREQ_LADDER:
        if span / pd.Timedelta(pd.tseries.frequencies.to_offset(freq)) < _MAX_BINS:
            return freq
    return _FREQ_LADDER[-1]


@_share_docs
def dead_letters(
    data: pd.DataFrame,
    *,
    ax=None,
    freq: str | None = None,
    by: str | None = "transport",
    dead_letter_keys=None,
):
    """Dead-letter copies over time: a count per time bin, one line per ``by`` value.

    Every line covers the same bins (a bin without dead letters counts 0); points are at the start
    of each bin. Events frames: the ``dead-letter`` rows at ``written_at`` (``time`` when the copy
    was not written). Messages frames: the rows on dead-letter keys at their ``timestamp``.

    Parameters
    ----------
    {data}
    {ax}
    freq : str, optional
        Bin width as a pandas frequency ("1s", "30s", "1min", "1h"); default the finest of
        1ms, 10ms, 100ms, 1s, 5s, 10s, 30s, 1min, 5min, ... 28D giving fewer than 30 bins over
        the data's span.
    {by}
    {dead_letter_keys}

    {returns_ax}

    Examples
    --------
    >>> ax = dead_letters(session.events)                           # doctest: +SKIP
    >>> ax = dead_letters(read_stream("orders.ss"), freq="1min")    # doctest: +SKIP
    """
    if freq is not None:
        try:
            pd.tseries.frequencies.to_offset(freq)
        except ValueError as exc:
            raise ValueError(f"freq takes a pandas frequency such as '1s' or '1min', not {freq!r}: {exc}") from None
    d = _as_deliveries(data, dead_letter_keys=dead_letter_keys, by=by)
    ax = _axes(ax)
    ax.set_title("Dead letters over time")
    ax.set_xlabel("time (UTC)")
    d = d[d["is_dead_letter"] & d["time"].notna()]
    if d.empty:
        ax.set_ylabel(f"dead-letter copies per {freq}" if freq else "dead-letter copies (count)")
        return _no_data(ax)
    times = d["time"].dt.tz_convert("UTC").dt.tz_localize(None).astype("datetime64[ns]")
    if freq is None:
        freq = _auto_freq(times.max() - times.min())
    ax.set_ylabel(f"dead-letter copies per {freq}")
    try:
        binned = times.dt.floor(freq)
    except ValueError as exc:
        raise ValueError(f"freq={freq!r} is not a fixed bin width (use s, min, h or D): {exc}") from None
    edges = pd.date_range(binned.min(), binned.max(), freq=freq)
    groups = [g for g in d.attrs["group_order"] if g in set(d["group"])]
    colors = _colors(groups, by)
    table = pd.DataFrame({"bin": binned.to_numpy(), "group": d["group"].to_numpy()})
    counts = table.groupby(["bin", "group"]).size().unstack("group", fill_value=0).reindex(edges, fill_value=0)
    x = edges.to_numpy()
    for g in groups:
        ax.plot(x, counts[g].to_numpy(), marker="o", label=g, color=colors[g])
    if by is not None:
        ax.legend(title=by)
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(bottom=0)
    return ax


def dashboard(
    data: pd.DataFrame,
    *,
    figsize: tuple[float, float] = (13, 4),
    dead_letter_keys=None,
    freq: str | None = None,
):
    """One Figure with three panels comparing file and pipe: attempts, retry delays, dead letters.

    ``data`` is an events frame or a messages frame (see :func:`attempts`); ``dead_letter_keys``
    and ``freq`` are passed on as in :func:`dead_letters`. The figure is made with pyplot, so in a
    notebook it shows once when the cell ends with ``;``.

    Parameters
    ----------
    data : DataFrame
        An events frame (``session.events``) or a messages frame (``read_stream``/``read_pipe``).
    figsize : tuple of float
        The figure's width and height in inches.
    dead_letter_keys : str, iterable of str or callable, optional
        Which stream keys of a messages frame are dead-letter keys, as in :func:`dead_letters`.
    freq : str, optional
        The time bins of the dead-letter panel (a pandas frequency such as ``"5s"``; default: chosen
        from the data's time span).

    Returns
    -------
    matplotlib Figure

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
    _frame_kind(data)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize, layout="constrained")
    ax_attempts, ax_delays, ax_dead = fig.subplots(1, 3)
    attempts(data, ax=ax_attempts, dead_letter_keys=dead_letter_keys)
    retry_delays(data, ax=ax_delays)
    dead_letters(data, ax=ax_dead, freq=freq, dead_letter_keys=dead_letter_keys)
    fig.suptitle("Retries and dead letters, file vs pipe")
    return fig
