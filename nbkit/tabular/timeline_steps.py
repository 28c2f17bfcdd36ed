"""The steps frame: what ``nbkit.plot.timeline`` draws, as data (one row per delivery, grouped into lanes).

The timeline plot accepts an events frame or a lineage frame; both are first turned into one **steps
frame**, so the drawing code reads a single shape and a new kind of input needs only a new reader.
This module holds that shape (:data:`STEP_COLUMNS`; its states are the outcome vocabulary's
:data:`~nbkit.runtime.vocabulary.STEP_STATES`), its two readers, of an events frame
(:func:`steps_from_events`) and of a lineage frame (:func:`steps_from_lineage`), found by the frame's kind
in :data:`STEP_READERS`, and the lane order the plot uses (:func:`file_lanes_first`). Nothing here draws:
no matplotlib.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from nbkit.runtime.vocabulary import ACTION_TERMS, COPY_ACTIONS, OUTCOME_ENDS

__all__ = [
    "STEP_COLUMNS",
    "STEP_READERS",
    "file_lanes_first",
    "steps_from_events",
    "steps_from_lineage",
]

#: Columns of a steps frame, in order (see :func:`steps_from_events` for what each holds).
STEP_COLUMNS = (
    "message", "transport", "attempt", "time", "delay", "copy_at", "state", "destination", "note",
)  # fmt: skip
#: The events columns read as Python objects, one list each (absent ones read as None).
_OBJECT_COLUMNS = (
    "transport", "subscription", "stream_key", "seq", "attempt", "outcome", "action", "destination", "copy_seq",
    "abandoned", "error", "redriven",
)  # fmt: skip
#: The events columns read as UTC times (absent ones read as NaT).
_TIME_COLUMNS = ("time", "lost_at", "written_at", "due")


def steps_from_events(events: pd.DataFrame) -> pd.DataFrame:
    """An events frame as a steps frame: each settlement is one delivery, copies continue their lane.

    A copy's next delivery -- a later row whose stream key, seq and attempt are the copy's
    ``destination``, ``copy_seq`` and attempt + 1 -- continues its lane: on a file, by the same
    subscription; on a pipe, by any subscription (a ``loopback`` stage reads its own copies back,
    perhaps under a retry key with its own subscription). Otherwise a lane ends with its copy waiting
    in the file, or, on a pipe, written to stdout for the next stage.

    Parameters
    ----------
    events : DataFrame
        An events frame (``session.events``, ``nbkit.events_frame(app.events)``; schema in
        :mod:`nbkit.runtime.events`). It needs the columns ``time``, ``transport``, ``stream_key``,
        ``seq``, ``action`` and ``outcome``; the others are read where present.

    Returns
    -------
    DataFrame
        One row per delivery (:data:`STEP_COLUMNS`), lanes in order of first appearance:

        - ``message`` (categorical; categories = lanes in order): the lane's label,
          "transport key #seq" of its first delivery, "(redriven)" added for a redriven one;
        - ``transport`` ("file", "pipe"), ``attempt`` (Int64), ``time`` (UTC: the delivery);
        - ``delay`` (float s; NaN unless the delivery wrote or scheduled a retry copy; 0 for a
          copy now);
        - ``copy_at`` (UTC: when its copy or dead letter was written, is or was due, or was lost;
          NaT if none);
        - ``state``: one of :data:`~nbkit.runtime.vocabulary.STEP_STATES` -- "retried" (its copy is the
          lane's next delivery) or how the lane ends (:data:`~nbkit.runtime.vocabulary.END_STATES`; only a
          lane's last row has an end);
        - ``destination`` (the copy's stream key, or "");
        - ``note`` (a word for the end's label: "exception" when a handler raised; or "").

    Raises
    ------
    ValueError
        If a column it needs is missing.

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning(), max_attempts=2, dead_letter="orders.dead")
    ... def handle(delivery):
    ...     return HandlerOutcome.retry_after(5)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", "x")
    >>> _ = session.run()
    >>> steps = steps_from_events(session.events)
    >>> steps[["message", "attempt", "delay", "state", "destination"]]
              message  attempt  delay        state  destination
    0  file orders #1        1    5.0      retried       orders
    1  file orders #1        2    NaN  dead-letter  orders.dead
    """
    _require(events, "time", "transport", "stream_key", "seq", "action", "outcome")
    rows = events.reset_index(drop=True)
    col = {name: _objects(rows, name) for name in _OBJECT_COLUMNS}
    times = {name: _times(rows, name) for name in _TIME_COLUMNS}
    delay = (
        pd.to_numeric(rows["delay"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if "delay" in rows.columns
        else np.full(len(rows), np.nan)
    )
    lanes, lane_ids, continues = _lanes(col)
    ends = [_step_end(i, col, times, float(delay[i]), continued=continues[i]) for i in range(len(rows))]
    return pd.DataFrame(
        {
            "message": pd.Categorical.from_codes(lane_ids, categories=lanes) if lanes else pd.Categorical([]),
            "transport": [str(t) if _present(t) else "" for t in col["transport"]],
            "attempt": pd.array(col["attempt"], dtype="Int64"),
            "time": times["time"].to_numpy(),
            "delay": np.array([end[2] for end in ends], dtype=float),
            "copy_at": pd.to_datetime(pd.Series([end[1] for end in ends], dtype=object), utc=True).to_numpy(),
            "state": [end[0] for end in ends],
            "destination": [str(x) if _present(x) else "" for x in col["destination"]],
            "note": [end[3] for end in ends],
        },
        columns=list(STEP_COLUMNS),
    )


def file_lanes_first(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps with their lanes reordered: file messages first, then pipe, each in order of appearance.

    Parameters
    ----------
    steps : DataFrame
        A steps frame (:func:`steps_from_events`, or a lineage frame's steps).

    Returns
    -------
    DataFrame
        The same rows; only the order of ``message``'s categories (the lanes) changes.

    Examples
    --------
    >>> steps = pd.DataFrame({"message": pd.Categorical(["pipe k #0", "file k #1"]), "transport": ["pipe", "file"]})
    >>> list(file_lanes_first(steps)["message"].cat.categories)
    ['file k #1', 'pipe k #0']
    """
    if steps.empty:
        return steps
    first = steps.groupby("message", observed=True, sort=False)["transport"].first()
    rank = {"file": 0, "pipe": 1}
    order = sorted(range(len(first)), key=lambda i: (rank.get(first.iat[i], 2), i))
    out = steps.copy()
    out["message"] = out["message"].cat.reorder_categories([first.index[i] for i in order])
    return out


def _require(events: pd.DataFrame, *names: str) -> None:
    """Fail, naming the column, when the events frame lacks one the steps need."""
    for name in names:
        if name not in events.columns:
            raise ValueError(f"missing column {name!r} in this events frame; got columns {list(events.columns)}")


def _objects(rows: pd.DataFrame, name: str) -> list[Any]:
    """Column ``name`` as a list of Python objects (Nones if the frame has no such column)."""
    return rows[name].astype(object).tolist() if name in rows.columns else [None] * len(rows)


def _times(rows: pd.DataFrame, name: str) -> pd.Series:
    """Column ``name`` as UTC millisecond times (NaT if the frame has no such column)."""
    if name not in rows.columns:
        return pd.Series(pd.NaT, index=rows.index)
    return pd.to_datetime(rows[name], utc=True).astype("datetime64[ms, UTC]")


def _present(value: object) -> bool:
    """False for None and for missing values (NaN, NaT, pd.NA); strings are always present."""
    return value is not None and not (not isinstance(value, str) and pd.isna(value))


def _lanes(col: dict[str, list[Any]]) -> tuple[list[str], list[int], list[bool]]:
    """Link the rows into lanes: (lane labels in order, each row's lane, whether each row's copy is
    delivered again in its lane). A copy is awaited under (transport, subscription on a file / any
    on a pipe, its destination, its ``copy_seq``, attempt + 1); the first row that matches takes the lane."""
    lane_of: dict[tuple[Any, ...], int] = {}  # an awaited copy -> its lane
    lanes: list[str] = []
    lane_ids: list[int] = []
    continues = [False] * len(col["action"])
    last_row_of_lane: dict[int, int] = {}
    for i, transport in enumerate(col["transport"]):
        reader = col["subscription"][i] if transport == "file" else None
        lane = lane_of.pop((transport, reader, col["stream_key"][i], col["seq"][i], col["attempt"][i]), None)
        if lane is None:
            lane = len(lanes)
            redriven = " (redriven)" if col["redriven"][i] is True else ""
            lanes.append(f"{transport} {col['stream_key'][i]} #{col['seq'][i]}{redriven}")
        else:
            continues[last_row_of_lane[lane]] = True
        lane_ids.append(lane)
        last_row_of_lane[lane] = i
        copied = col["action"][i] in COPY_ACTIONS and _present(col["copy_seq"][i])
        if copied and _present(col["attempt"][i]):
            awaited = (transport, reader, col["destination"][i], col["copy_seq"][i], int(col["attempt"][i]) + 1)
            lane_of[awaited] = lane
    return lanes, lane_ids, continues


def _step_end(
    i: int, col: dict[str, list[Any]], times: dict[str, pd.Series], delay: float, *, continued: bool
) -> tuple[str, Any, float, str]:
    """Row ``i``'s (state, copy_at, delay, note): what became of the delivery, and when its copy or dead
    letter was written (or is due, or was lost). ``continued``: its copy is the lane's next delivery."""
    action, outcome = col["action"][i], col["outcome"][i]
    error = str(col["error"][i]) if _present(col["error"][i]) else ""
    time, due, written, lost_at = (times[name][i] for name in ("time", "due", "written_at", "lost_at"))
    if action in COPY_ACTIONS:
        d = 0.0 if np.isnan(delay) else delay
        due_at = due if _present(due) else time + pd.Timedelta(seconds=d)
        if col["abandoned"][i] is True or error.startswith("copy lost"):
            # lost when the process gave it up (crash, shutdown timeout), not when it would have been due
            return "lost", lost_at if _present(lost_at) else due_at, d, ""
        if _present(written):
            ended = "copy-out" if col["transport"][i] == "pipe" else "waiting"
            return ("retried" if continued else ended), written, d, ""
        return "pending", due_at, d, ""
    terms = ACTION_TERMS.get(action)
    if terms is not None and terms.dead_letter:
        state = "lost" if error.startswith("copy lost") else "dead-letter"
        return state, written if _present(written) else time, np.nan, ""
    if terms is not None and terms.end is not None:
        return terms.end, pd.NaT, np.nan, ""
    # the action ends nothing itself (unsupported: acknowledging is not supported upstream): the outcome says how
    # the lane ends; a handler that raised counts as a drop
    if error:
        return OUTCOME_ENDS["drop"], pd.NaT, np.nan, "exception"
    return OUTCOME_ENDS.get(outcome, OUTCOME_ENDS["drop"]), pd.NaT, np.nan, ""


def steps_from_lineage(lin: pd.DataFrame) -> pd.DataFrame:
    """A lineage frame as a steps frame: one lane per message, from the file alone.

    Every record that is not a dead-letter copy is a step (a delivery the file shows) at its
    timestamp. A step whose message goes on is ``retried`` (its copy written ``delay`` seconds later,
    the observed delay) or ``dead-letter`` (its dead-letter copy follows, under ``destination``); a
    message's last step is ``no further copy`` unless a dead-letter copy ends it.

    Parameters
    ----------
    lin : DataFrame
        A frame from :func:`~nbkit.tabular.lineage.lineage`.

    Returns
    -------
    DataFrame
        Columns ``message`` (categorical lane labels "transport key #seq" of each message's first
        record, in order), ``transport``, ``attempt``, ``time``, ``delay`` (s, NaN when no retry copy
        follows), ``copy_at`` (when the next record was written, NaT when none), ``state``
        (``retried``, ``dead-letter`` or ``no further copy``), ``destination`` (the next record's
        key, or "") and ``note`` ("").

    Examples
    --------
    >>> from nbkit import read_stream
    >>> from nbkit.tabular.lineage import lineage
    >>> from nbkit.tabular.timeline_steps import steps_from_lineage
    >>> steps = steps_from_lineage(lineage(read_stream("tests/data/sample-1.ss")))   # doctest: +SKIP
    """
    if "message" not in lin.columns or "dead_letter" not in lin.columns:
        raise ValueError("steps_from_lineage takes a lineage frame: nbkit.lineage(read_stream(...))")
    rows = lin.reset_index(drop=True)
    message = rows["message"].to_numpy()
    nxt = np.arange(1, len(rows) + 1)
    same = np.zeros(len(rows), dtype=bool)
    if len(rows):
        same[:-1] = message[1:] == message[:-1]
    nxt = np.where(same, nxt, 0)  # index of the message's next record (valid where ``same``)
    dead = rows["dead_letter"].to_numpy(dtype=bool)
    times = rows["timestamp"].reset_index(drop=True)
    keys = rows["stream_key"].astype(object).to_numpy()
    transport = rows["transport"].astype(object).to_numpy()
    seq = rows["seq"].astype(object).to_numpy()
    firsts = ~np.concatenate([[False], same[:-1]]) if len(rows) else np.zeros(0, dtype=bool)
    label_of = {
        int(m): f"{transport[i] or ''} {keys[i]} #{seq[i]}".strip()
        for i, m in zip(np.flatnonzero(firsts), message[firsts], strict=True)
    }
    step = ~dead
    next_dead = same & dead[nxt]
    state = np.where(same & ~next_dead, "retried", np.where(next_dead, "dead-letter", "no further copy"))
    delay_s = rows["delay"].dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
    follow_delay = np.where(same & ~next_dead, delay_s[nxt], np.nan)
    copy_at = times.iloc[nxt].reset_index(drop=True).where(pd.Series(same))
    destination = np.where(same, keys[nxt], "")
    lanes = [label_of[int(m)] for m in pd.unique(message[step])]
    lane_codes = {label: i for i, label in enumerate(lanes)}
    return pd.DataFrame(
        {
            "message": pd.Categorical.from_codes(
                [lane_codes[label_of[int(m)]] for m in message[step]], categories=lanes
            ),
            "transport": [str(t) if isinstance(t, str) else "" for t in transport[step]],
            "attempt": pd.array(rows["attempt"], dtype="Int64")[step],
            "time": times[step].reset_index(drop=True),
            "delay": follow_delay[step],
            "copy_at": copy_at[step].reset_index(drop=True),
            "state": state[step],
            "destination": [str(d) for d in destination[step]],
            "note": [""] * int(step.sum()),
        }
    )


#: The reader of each kind of input frame the timeline takes ("events", "lineage"), each returning a steps frame.
STEP_READERS: dict[str, Callable[[pd.DataFrame], pd.DataFrame]] = {
    "events": steps_from_events,
    "lineage": steps_from_lineage,
}
