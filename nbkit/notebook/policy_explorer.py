"""An instrument for choosing a retry policy: sliders for the workload and the policy, live figures.

Every change of a control re-runs :func:`~nbkit.notebook.simulate.simulate` (a real App on a virtual
clock, on a file and on a pipe) and redraws three views: the summary table
(:func:`~nbkit.notebook.simulate.policy_summary`), the dashboard (attempts, retry delays, dead
letters) and the timeline of the first messages.

In a Jupyter kernel the work runs on one background thread, so the kernel stays free while it
runs; changes that arrive meanwhile (a slider being dragged) are coalesced: at most one run is in
flight and at most one more is queued, always with the latest values, after a short ``debounce``.
Outside a kernel (tests, scripts) each change runs at once, in the caller's thread. Figures are
PNGs rendered off-screen (``matplotlib.figure.Figure`` with Agg, never pyplot), so the thread never
touches pyplot's global state, and they show the same in a browser, in nbval and in tests.
"""

from __future__ import annotations

import html
import io
import threading
import time
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import pandas as pd

from nbkit.notebook.layout import FULL_WIDTH, wrapping_row
from nbkit.notebook.simulate import BACKOFFS, RetryPolicy, Workload, policy_summary, simulate
from nbkit.notebook.snapshot import StaticSnapshot

__all__ = ["ExplorerResult", "PolicyExplorer", "explore", "summary_html"]

#: How many messages the timeline shows (one lane each), the first ones of the workload.
TIMELINE_MESSAGES = 15


@dataclass(frozen=True)
class ExplorerResult:
    """One run of the explorer: the inputs, the events, the summary, the two PNGs and how long it took.

    Parameters
    ----------
    workload : Workload
    policy : RetryPolicy
        What was run.
    events : DataFrame
        What :func:`~nbkit.notebook.simulate.simulate` returned.
    summary : DataFrame
        Its :func:`~nbkit.notebook.simulate.policy_summary`.
    dashboard_png, timeline_png : bytes
        The figures.
    seconds : float
        Wall-clock time of the whole run.

    Examples
    --------
    >>> result = explore(Workload(messages=5), RetryPolicy())          # doctest: +SKIP
    >>> result.summary.loc["file", "delivered"]                         # doctest: +SKIP
    5
    """

    workload: Workload
    policy: RetryPolicy
    events: pd.DataFrame
    summary: pd.DataFrame
    dashboard_png: bytes
    timeline_png: bytes
    seconds: float


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _dashboard_png(events: pd.DataFrame, dpi: int) -> bytes:
    """The three dashboard panels (attempts, retry delays, dead letters), off-screen."""
    from matplotlib.figure import Figure

    from nbkit.notebook.plots import attempts, dead_letters, retry_delays

    fig = Figure(figsize=(12, 3.4), dpi=dpi)  # fixed margins: a layout engine would double the drawing time
    fig.subplots_adjust(left=0.05, right=0.99, bottom=0.17, top=0.84, wspace=0.25)
    ax_attempts, ax_delays, ax_dead = fig.subplots(1, 3)
    attempts(events, ax=ax_attempts)
    retry_delays(events, ax=ax_delays)
    dead_letters(events, ax=ax_dead)
    return _png(fig)


def _timeline_png(events: pd.DataFrame, messages: int, total: int, dpi: int) -> bytes:
    """The file run's timeline of the first ``messages`` messages (one lane each), off-screen.

    The file run only: its copies come back to the same lane, and the pipe run's failures and delays
    are the same (drawn from the seed per message and attempt)."""
    from matplotlib.figure import Figure

    from nbkit.notebook.plots import timeline

    shown = events[(events["message"] <= messages) & (events["transport"] == "file")]
    height = 1.2 + 0.24 * min(messages, total)
    fig = Figure(figsize=(12, height), dpi=dpi)  # fixed margins, as for the dashboard
    fig.subplots_adjust(left=0.115, right=0.845, bottom=0.85 / height, top=1 - 0.4 / height)
    ax = fig.add_subplot()
    timeline(shown, ax=ax, max_lanes=max(messages, 1))
    ax.set_title(f"The first {min(messages, total):,} of {total:,} messages through time (file; the pipe's are alike)")
    return _png(fig)


def explore(
    workload: Workload,
    policy: RetryPolicy,
    *,
    seed: int = 0,
    transport: str = "both",
    timeline_messages: int = TIMELINE_MESSAGES,
    dpi: int = 72,
) -> ExplorerResult:
    """One run of the explorer, without widgets: simulate, summarise, draw both figures.

    Parameters
    ----------
    workload : Workload
        The messages and how the handler fails.
    policy : RetryPolicy
        The retry policy to try.
    seed : int, default 0
        Fixes the failures and the jitter.
    transport : {"both", "file", "pipe"}, default "both"
        Which transports to run.
    timeline_messages : int, default 15
        How many of the first messages the timeline shows.
    dpi : int, default 72
        Resolution of the PNGs.

    Returns
    -------
    ExplorerResult

    Examples
    --------
    >>> result = explore(Workload(messages=20, failure_rate=0.5), RetryPolicy())   # doctest: +SKIP
    >>> result.summary                                                           # doctest: +SKIP
    """
    started = time.perf_counter()
    events = simulate(workload, policy, seed=seed, transport=transport)
    summary = policy_summary(events)
    dashboard = _dashboard_png(events, dpi)
    timeline = _timeline_png(events, timeline_messages, workload.messages, dpi)
    return ExplorerResult(workload, policy, events, summary, dashboard, timeline, time.perf_counter() - started)


#: The summary's look: a smaller type, narrow cells and headings wrapped onto several lines, so that all
#: nine columns (``longest wait (s)`` last) fit a notebook's column and the documentation site's.
_SUMMARY_TABLE = "border-collapse:collapse;font-size:85%;line-height:1.3;margin:2px 0"
_SUMMARY_HEAD = "padding:1px 4px;vertical-align:bottom;white-space:normal;border-bottom:1px solid #999"
_SUMMARY_CELL = "padding:1px 4px;white-space:nowrap"


def _summary_value(value: Any) -> str:
    """One cell of the summary: a count as it is, seconds to at most 3 decimals, ``–`` when unknown."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, float):
        return str(round(value, 3))
    return html.escape(str(value))


def summary_html(summary: pd.DataFrame) -> str:
    """The explorer's summary table as HTML that fits a narrow column.

    Every cell is styled inline, so the live widget and the site's still picture look the same; the
    rows are named by transport (``file``, ``pipe``) under an empty corner; the table sits in a box that
    scrolls sideways should a column still not fit.

    Parameters
    ----------
    summary : DataFrame
        What :func:`~nbkit.notebook.simulate.policy_summary` returned.

    Returns
    -------
    str
        ``<div ...><table class="nbkit-explorer-summary" ...>...</table></div>``.

    Examples
    --------
    >>> from nbkit import RetryPolicy, Workload, policy_summary, simulate
    >>> table = summary_html(policy_summary(simulate(Workload(messages=5), RetryPolicy())))
    >>> "longest wait (s)</th>" in table, "white-space:normal" in table
    (True, True)
    """
    # cells on lines of their own, as pandas writes them: the table's text reads "file 60 0 60 ..."
    head = f"<th style='{_SUMMARY_HEAD}'></th>\n" + "\n".join(
        f"<th style='{_SUMMARY_HEAD};text-align:right'>{html.escape(str(column))}</th>" for column in summary.columns
    )
    rows = "\n".join(
        f"<tr><th style='{_SUMMARY_CELL};text-align:left'>{html.escape(str(label))}</th>\n"
        + "\n".join(f"<td style='{_SUMMARY_CELL};text-align:right'>{_summary_value(v)}</td>" for v in row)
        + "</tr>"
        for label, row in zip(summary.index, summary.itertuples(index=False), strict=True)
    )
    return (
        "<div style='max-width:100%;overflow-x:auto'>"
        f"<table class='nbkit-explorer-summary' style='{_SUMMARY_TABLE}'>"
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _decimals(number: float) -> int:
    """How many decimals ``number`` needs to be written exactly (at most 6): 0.005 -> 3, 0.5 -> 1, 60 -> 0."""
    text = f"{number:.6f}".rstrip("0")
    return len(text) - text.index(".") - 1


def _slider(kind: type, value: float, low: float, high: float, step: float, description: str, tip: str) -> Any:
    """A slider whose readout shows its value exactly: as many decimals as the step or the value needs."""
    options: dict[str, Any] = {}
    if kind is widgets.FloatSlider:
        options["readout_format"] = f".{max(_decimals(step), _decimals(value))}f"
    return kind(
        value=value, min=low, max=high, step=step, description=description, tooltip=tip,
        continuous_update=True, style={"description_width": "110px"}, layout=widgets.Layout(width="330px"),
        **options,
    )  # fmt: skip


class PolicyExplorer(StaticSnapshot, widgets.VBox):
    """Sliders and toggles for a :class:`Workload` and a :class:`RetryPolicy`; every change re-runs
    the simulation and redraws the summary, the dashboard and the timeline.

    Parameters
    ----------
    workload : Workload, optional
        Where the workload controls start (default ``Workload()``: 1,000 messages over 60 s).
    policy : RetryPolicy, optional
        Where the policy controls start (default ``RetryPolicy()``).
    seed : int, default 0
        The simulation's seed.
    background : bool, optional
        Run on a background thread and coalesce changes (the default in a Jupyter kernel), or run
        each change at once in the caller's thread (the default elsewhere: tests and scripts).
    debounce : float, default 0.1
        Seconds the background thread waits after a change for more changes before it runs.
    timeline_messages : int, default 15
        How many of the first messages the timeline shows.

    Attributes
    ----------
    controls : dict of str to widget
        ``messages``, ``span``, ``failure_rate``, ``heals``, ``heal_after``, ``poison`` (the
        workload) and ``max_attempts``, ``delay``, ``backoff``, ``capped``, ``max_delay``,
        ``jitter``, ``dead_letter`` (the policy). Change their ``.value`` as a learner would.
    summary_view, status : ipywidgets.HTML
        The summary table; what the last run did (or ``error: ...``).
    dashboard, timeline : ipywidgets.Image
        The figures, PNG.
    result : ExplorerResult
        The latest run (its ``events`` and ``summary`` are DataFrames).
    runs : int
        How many runs were made (a dragged slider makes few, not one per value).

    Examples
    --------
    >>> explorer = PolicyExplorer(Workload(messages=200), RetryPolicy(max_attempts=4))  # doctest: +SKIP
    >>> explorer.controls["delay"].value = 5                                            # doctest: +SKIP
    >>> explorer.result.summary                                                          # doctest: +SKIP
    """

    def __init__(
        self,
        workload: Workload | None = None,
        policy: RetryPolicy | None = None,
        *,
        seed: int = 0,
        background: bool | None = None,
        debounce: float = 0.1,
        timeline_messages: int = TIMELINE_MESSAGES,
    ) -> None:
        super().__init__()
        workload = workload or Workload()
        policy = policy or RetryPolicy()
        if not isinstance(workload, Workload):
            raise ValueError(f"workload must be an nbkit.Workload(...), not {workload!r}")
        if not isinstance(policy, RetryPolicy):
            raise ValueError(f"policy must be an nbkit.RetryPolicy(...), not {policy!r}")
        self.seed = seed
        self.background = _in_kernel() if background is None else bool(background)
        self.debounce = debounce
        self.timeline_messages = timeline_messages
        self.dpi = 72
        self.runs = 0
        self.result: ExplorerResult | None = None
        c = self.controls = {
            "messages": _slider(widgets.IntSlider, workload.messages, 10, max(5000, workload.messages), 10,
                                "messages", "how many messages arrive, evenly over the span"),
            "span": _slider(widgets.FloatSlider, workload.span, 1, max(600.0, workload.span), 1,
                            "span (s)", "seconds the arrivals spread over"),
            "failure_rate": _slider(widgets.FloatSlider, workload.failure_rate, 0, 1, 0.01,
                                    "failure rate", "probability that one attempt fails"),
            "heals": widgets.Checkbox(value=workload.heal_after is not None, description="failures stop",
                                      indent=False, layout=widgets.Layout(width="130px")),
            "heal_after": _slider(widgets.FloatSlider, workload.heal_after if workload.heal_after is not None else 30,
                                  0, max(600.0, workload.heal_after or 0), 1, "after (s)",
                                  "seconds after which attempts stop failing"),
            "poison": _slider(widgets.FloatSlider, workload.poison, 0, 0.2, 0.005,
                              "poison share", "share of messages that fail on every attempt"),
            "max_attempts": _slider(widgets.IntSlider, policy.max_attempts, 1, max(10, policy.max_attempts), 1,
                                    "max_attempts", "attempts per message, the first delivery included"),
            "delay": _slider(widgets.FloatSlider, policy.delay, 0, max(60.0, policy.delay), 0.5,
                             "delay (s)", "seconds before the first retry"),
            "backoff": widgets.ToggleButtons(options=list(BACKOFFS), value=policy.backoff, description="backoff",
                                             style={"description_width": "110px", "button_width": "104px"}),
            "capped": widgets.Checkbox(value=policy.max_delay is not None, description="cap delays",
                                       indent=False, layout=widgets.Layout(width="130px")),
            "max_delay": _slider(widgets.FloatSlider, policy.max_delay if policy.max_delay is not None else 30,
                                 0, max(300.0, policy.max_delay or 0), 1, "max_delay (s)", "no delay is longer"),
            "jitter": _slider(widgets.FloatSlider, policy.jitter, 0, 1, 0.05,
                              "jitter", "each delay moves by up to this share, up or down"),
            "dead_letter": widgets.Checkbox(value=policy.dead_letter, description="dead-letter key (orders.dead)",
                                            indent=False),
        }  # fmt: skip
        self.status = widgets.HTML()
        self.summary_view = widgets.HTML()
        self.dashboard = widgets.Image(format="png", layout=widgets.Layout(width=FULL_WIDTH, max_width="1000px"))
        self.timeline = widgets.Image(format="png", layout=widgets.Layout(width=FULL_WIDTH, max_width="1000px"))
        workload_box = widgets.VBox(
            [widgets.HTML("<b>Workload</b>"), c["messages"], c["span"], c["failure_rate"],
             widgets.HBox([c["heals"], c["heal_after"]]), c["poison"]]
        )  # fmt: skip
        policy_box = widgets.VBox(
            [widgets.HTML("<b>Retry policy</b>"), c["max_attempts"], c["delay"], c["backoff"],
             widgets.HBox([c["capped"], c["max_delay"]]), c["jitter"], c["dead_letter"]]
        )  # fmt: skip
        self.children = [
            # the two groups of controls side by side, or one under the other in a narrow column
            widgets.HBox([workload_box, policy_box], layout=wrapping_row()),
            self.status,
            self.summary_view,
            self.dashboard,
            self.timeline,
        ]
        self._sync_enabled()
        self._lock = threading.Lock()
        self._running = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._stop = False
        self._worker: threading.Thread | None = None
        for control in c.values():
            control.observe(self._changed, names="value")
        self.refresh()

    # -- what the controls say -------------------------------------------------------------------------
    @property
    def workload(self) -> Workload:
        """The workload the controls describe now."""
        c = self.controls
        return Workload(
            messages=int(c["messages"].value),
            span=_clean(c["span"].value),
            failure_rate=_clean(c["failure_rate"].value),
            heal_after=_clean(c["heal_after"].value) if c["heals"].value else None,
            poison=_clean(c["poison"].value),
        )

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy the controls describe now."""
        c = self.controls
        return RetryPolicy(
            max_attempts=int(c["max_attempts"].value),
            delay=_clean(c["delay"].value),
            backoff=str(c["backoff"].value),
            max_delay=_clean(c["max_delay"].value) if c["capped"].value else None,
            jitter=_clean(c["jitter"].value),
            dead_letter=bool(c["dead_letter"].value),
        )

    def _sync_enabled(self) -> None:
        self.controls["heal_after"].disabled = not self.controls["heals"].value
        self.controls["max_delay"].disabled = not self.controls["capped"].value

    # -- running ---------------------------------------------------------------------------------------
    def _changed(self, change: Any = None) -> None:
        if change is not None and _same_number(change["old"], change["new"]):
            return  # a browser's slider echoes 20.0 back as 19.999999999999996: nothing changed
        self._sync_enabled()
        if not self.background:
            self.refresh()
            return
        with self._lock:
            self._idle.clear()
            self._wake.set()
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="nbkit-policy-explorer", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        """The background thread: wait for a change, let a drag settle, run with the latest values."""
        while not self._stop:
            self._wake.wait()
            if self._stop:
                return
            time.sleep(self.debounce)
            with self._lock:
                self._wake.clear()  # changes from here on wake the next run
            self.refresh()
            with self._lock:
                if not self._wake.is_set():
                    self._idle.set()

    def refresh(self) -> ExplorerResult | None:
        """Run the simulation with the controls' values now and redraw every view (in this thread).

        Returns
        -------
        ExplorerResult or None
            The run, or None when it failed (``status`` says why).
        """
        with self._running:  # a refresh from a cell and one from the background thread take turns
            return self._refresh()

    def _refresh(self) -> ExplorerResult | None:
        self.status.value = "<span class='nbkit-explorer-status'>running…</span>"
        started = time.perf_counter()
        try:
            workload, policy = self.workload, self.policy
            events = simulate(workload, policy, seed=self.seed)
            summary = policy_summary(events)
            # the table first: it is ready in a fraction of the time the figures take
            self.summary_view.value = summary_html(summary)
            dashboard = _dashboard_png(events, self.dpi)
            self.dashboard.value = dashboard
            timeline = _timeline_png(events, self.timeline_messages, workload.messages, self.dpi)
            self.timeline.value = timeline
        except Exception as exc:  # shown, not raised: a slider callback has nowhere to raise to
            self.status.value = (
                f"<span class='nbkit-explorer-status'>error: {html.escape(f'{type(exc).__name__}: {exc}')}</span>"
            )
            return None
        self.runs += 1
        result = ExplorerResult(workload, policy, events, summary, dashboard, timeline, time.perf_counter() - started)
        self.result = result
        self.status.value = (
            f"<span class='nbkit-explorer-status'>{workload.messages:,} messages on a file and a pipe; "
            f"{_describe(policy)}; run {self.runs}</span>"
        )
        return result

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no run is in flight or queued (background mode); True if idle in time.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (None: as long as it takes).

        Returns
        -------
        bool
        """
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Stop the background thread and close the widgets."""
        self._stop = True
        self._wake.set()
        for control in self.controls.values():
            control.close()
        super().close()

    def __repr__(self) -> str:
        return f"PolicyExplorer({self.workload!r}, {self.policy!r})"

    snapshot_name = "explorer"

    def snapshot_note(self) -> str:
        """Says the picture is one, of which run, and where the sliders work.

        Returns
        -------
        str
        """
        return (
            f"A still picture of this explorer after run {self.runs}, as this cell left it; the sliders do "
            "nothing here. Run the notebook (JupyterLab, or Binder from the lesson page) to drag them."
        )


def _clean(value: float) -> float:
    """A slider's float without the browser's rounding noise (19.999999999999996 -> 20.0)."""
    return round(float(value), 9)


def _same_number(old: Any, new: Any) -> bool:
    """Two floats equal but for rounding noise (a slider's step arithmetic in the browser)."""
    return isinstance(old, float) and isinstance(new, float) and abs(old - new) <= 1e-9 * max(1.0, abs(old))


def _describe(policy: RetryPolicy) -> str:
    delays = ", ".join(f"{d:g}" for d in policy.delays()) or "none"
    end = "then orders.dead" if policy.dead_letter else "then rejected"
    return f"up to {policy.max_attempts} attempts, retry delays {delays} s ({policy.backoff}), {end}"
