"""ipywidgets views: a control panel over a :class:`~nbkit.notebook.session.Session`, and a stream
file browser.

A widget is a thin view: the panel's buttons call the Session methods a user would call in a cell
(``step``, ``run``, ``advance``, ``reset``), then :meth:`SessionPanel.refresh` redraws everything
from the Session. With async handlers inside a running event loop (a notebook), Step and Run
schedule ``session.astep()`` / ``session.arun()`` as a task on that loop instead (no thread).
Every view is an ``HTML`` widget whose ``value`` can be read in tests, and every button works with
``.click()`` -- no browser needed. The panel's charts (attempts, and the timeline of every message)
are PNGs in ``ipywidgets.Image`` widgets (rendered off-screen with Agg, never through pyplot or an
Output widget), so the panel shows the same in a browser, in nbval and in tests. Payloads are user
data: every text is HTML-escaped, and control characters are shown as ``\\xNN``.
"""

from __future__ import annotations

import asyncio
import functools
import html
import io
import math
import os
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
import pandas as pd

from nbkit.notebook.layout import FULL_WIDTH, wrapping_row
from nbkit.notebook.snapshot import StaticSnapshot
from nbkit.runtime.intake import loop_running
from nbkit.tabular.frames import read_stream
from nbkit.wire.timestamps import isoformat_z

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from nbkit.notebook.session import Session
    from nbkit.runtime.events import SettlementEvent

__all__ = ["SessionPanel", "StreamBrowser"]

_CONTROL = {i: f"\\x{i:02x}" for i in [*range(32), 127]}
_CONTROL_KEEP_LINES = {i: v for i, v in _CONTROL.items() if i not in (9, 10)}
_CONTROL_ONE_LINE = {**_CONTROL, 9: "\\t", 10: "\\n", 13: "\\r"}


#: A block of text that wraps at its box's edge, even inside a token with no space (a JSON payload, a
#: log line's key=value pairs), instead of running past it.
_WRAP_PRE = "white-space:pre-wrap;overflow-wrap:anywhere;margin:0"


def _iso(value: object) -> str:
    """ISO 8601 with a ``Z`` (milliseconds only when there are some); '' for a missing time."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    ts = pd.Timestamp(value)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    spec = "milliseconds" if ts.microsecond else "seconds"
    return isoformat_z(ts, spec)


def _preview(payload: Any, width: int = 60) -> str:
    """One line of a payload: control characters escaped, cut at ``width`` characters."""
    if isinstance(payload, (bytes, bytearray)):
        return f"<{len(payload)} binary bytes>"
    text = str(payload).translate(_CONTROL_ONE_LINE)
    return text if len(text) <= width else text[: width - 1] + "…"


def _full(payload: Any) -> str:
    """The whole payload as text: newlines and tabs kept, other control characters escaped."""
    if isinstance(payload, (bytes, bytearray)):
        return f"<{len(payload)} binary bytes>\n{bytes(payload)!r}"
    return str(payload).translate(_CONTROL_KEEP_LINES)


def _e(value: Any) -> str:
    return html.escape(str(value))


def _heading(text: str) -> str:
    """A view's heading on a line of its own, with room below it."""
    return f"<div class='nbkit-panel-heading' style='font-weight:bold;margin:0 0 0.3em 0'>{_e(text)}</div>"


def _png(fig: Figure) -> bytes:
    """An off-screen Figure as PNG bytes (no timestamp in the metadata, so equal charts give equal bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _rows(pairs: list[tuple[str, Any]]) -> str:
    return "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{_e(k)}</th>"
        f"<td style='text-align:left;overflow-wrap:anywhere'>{_e(v)}</td></tr>"
        for k, v in pairs
    )


# -- the session panel ---------------------------------------------------------------------------------
class SessionPanel(StaticSnapshot, widgets.VBox):
    """Buttons and live views over a Session: step, run, advance the clock, reset.

    Views (``HTML`` widgets, readable in tests through ``.value``): ``status`` (clock, what the last
    button did or ``error: ...`` if the Session raised, the last delivery -- stream key, sequence,
    attempt, payload preview -- its outcome and the action the runtime took), ``pending_view``
    (delayed copies, their due times and the attempt each will be delivered as), ``counts_view``
    (settlements per action), ``log_view`` (the last ``log_lines`` lines of ``session.log``,
    wrapped). With ``plot=True`` two ``Image`` views follow: ``plot`` (the attempts chart) and
    ``timeline`` (:func:`~nbkit.notebook.plots.timeline`: every message through time); both redraw
    when the session's events change. ``buttons`` maps ``"step"``, ``"step10"``, ``"run"``,
    ``"advance"``, ``"reset"`` to the Buttons; ``seconds`` is the Advance field (default 5 s). The panel
    follows its Session: every call on the Session, from a cell, a magic or a button, redraws it
    (:meth:`nbkit.Session.watch`). Its display data also holds a still picture of the panel as it was
    when displayed, with the clock (:class:`~nbkit.notebook.snapshot.StaticSnapshot`): what a notebook
    that has not run yet, and the documentation site, show in its place.

    Async handlers: when ``session.has_async_handlers`` and an event loop is running (always in a
    notebook), Step, Step ×10 and Run schedule ``session.astep()`` / ``session.arun()`` as a task on
    that loop (the kernel's; no thread). While it runs the status says so and every button is
    disabled; when it ends (or is cancelled) the buttons come back and the views are redrawn, with
    ``error: ...`` if it raised. ``task`` is the latest such :class:`asyncio.Task` (None before the
    first one): ``await panel.task`` in a cell waits for it (and raises what it raised). Sync
    handlers are stepped directly, as in a cell.

    Parameters
    ----------
    session : Session
        The session the buttons drive and the views show.
    plot : bool, default True
        Show the attempts chart and the timeline.
    log_lines : int, default 8
        How many of the latest log lines the log view shows.
    timeline_lanes : int, default 12
        The timeline shows at most this many messages (its title says how many were left out).

    Returns
    -------
    SessionPanel
        A VBox: display it as a cell's last expression.

    Examples
    --------
    >>> from nbkit import App, FileBroker, FilePosition, HandlerOutcome, Session
    >>> from nbkit.widgets import SessionPanel
    >>> broker = FileBroker("orders.ss")
    >>> @broker.subscriber("orders", start_at=FilePosition.beginning())
    ... def handle(delivery):
    ...     return HandlerOutcome.retry_after(5)
    >>> session = Session(App(broker))
    >>> _ = broker.publish("orders", '{"id": 1}')
    >>> panel = SessionPanel(session, plot=False)
    >>> panel.buttons["step"].click()            # what a click in the notebook does
    >>> "Step: 1 delivered" in panel.status.value, len(session.pending)
    (True, 1)
    """

    def __init__(self, session: Session, *, plot: bool = True, log_lines: int = 8, timeline_lanes: int = 12) -> None:
        super().__init__()
        self.session = session
        self.log_lines = log_lines
        self.timeline_lanes = timeline_lanes
        self._note = "ready"
        self._error: str | None = None
        self._plot_key: tuple | None = None
        self._running: str | None = None  # the label of the async Step/Run in flight
        #: The latest Step/Run scheduled on the running loop for async handlers (None before one).
        self.task: asyncio.Task[str] | None = None
        self.buttons: dict[str, widgets.Button] = {
            "step": widgets.Button(description="Step", tooltip="session.step(): deliver one message"),
            "step10": widgets.Button(description="Step ×10", tooltip="session.step(10)"),
            "run": widgets.Button(
                description="Run", tooltip="session.run(): deliver until done, jumping to due copies"
            ),
            "advance": widgets.Button(
                description="Advance", tooltip="session.advance(seconds): move the clock, publish due copies"
            ),
            "reset": widgets.Button(description="Reset", tooltip="session.reset(): start over"),
        }
        self.seconds = widgets.FloatText(
            value=5.0, description="seconds", layout=widgets.Layout(width="160px"), style={"description_width": "60px"}
        )
        self.status = widgets.HTML()
        gap = "0 2em 0 0"  # views side by side keep their headings apart
        self.pending_view = widgets.HTML(layout=widgets.Layout(min_width="280px", max_width="420px", margin=gap))
        self.counts_view = widgets.HTML(layout=widgets.Layout(min_width="160px", margin=gap))
        # the log takes the panel's width less its margins (stretched: width 100% plus the margins would
        # reach 2 px past the panel's edge and make it scroll sideways)
        self.log_view = widgets.HTML()
        self.plot = widgets.Image(format="png", layout=widgets.Layout(width="320px"))
        self.plot.add_class("nbkit-panel-attempts")
        self.timeline = widgets.Image(format="png", layout=widgets.Layout(width="720px", max_width=FULL_WIDTH))
        self.timeline.add_class("nbkit-panel-timeline")
        self.show_plot = plot
        actions: dict[str, Callable[[], str]] = {
            "step": self._step,
            "step10": self._step10,
            "run": self._run,
            "advance": self._advance,
            "reset": self._reset,
        }
        async_actions: dict[str, Callable[[], Coroutine[Any, Any, str]]] = {
            "step": self._astep,
            "step10": self._astep10,
            "run": self._arun,
        }
        for name, button in self.buttons.items():
            button.on_click(self._handler(button.description, actions[name], async_actions.get(name)))
        # Rows wrap instead of widening the panel: a panel wider than the notebook's column scrolls
        # sideways inside its own box, which hid the end of every wrapped log line.
        controls = widgets.HBox([*self.buttons.values(), self.seconds], layout=wrapping_row())
        views = widgets.HBox(
            [self.counts_view, self.pending_view, *([self.plot] if plot else [])], layout=wrapping_row()
        )
        self.children = [controls, self.status, views, *([self.timeline] if plot else []), self.log_view]
        self.refresh()
        self._unwatch = session.watch(self.refresh)  # until close(); held weakly besides

    def close(self) -> None:
        """Stop following the session and close the widgets.

        Returns
        -------
        None
        """
        self._unwatch()
        super().close()

    snapshot_name = "panel"

    def snapshot_note(self) -> str:
        """Says the picture is one, at which clock, and where the buttons work.

        Returns
        -------
        str
        """
        return (
            f"A still picture of this panel at clock {_iso(self.session.now)}, as this cell left it; the "
            "buttons do nothing here. Run the notebook (JupyterLab, or Binder from the lesson page) to use them."
        )

    # -- buttons ---------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        """Plain text for consoles and notebook text comparisons (nbval): the session, not the widgets."""
        return f"SessionPanel({self.session.summary()})"

    def _handler(
        self, label: str, action: Callable[[], str], async_action: Callable[[], Coroutine[Any, Any, str]] | None
    ) -> Callable[..., None]:
        def on_click(_button: object = None) -> None:
            if self._running is not None:  # the buttons are disabled; a click from code says why
                self._note = f"{label}: not now, {self._running} is still running"
                self.refresh()
                return
            if async_action is not None and self.session.has_async_handlers and loop_running():
                self._start(label, async_action)
                return
            try:
                note = action()
            except Exception as exc:  # shown in the panel, not lost in a callback
                self._error = f"{type(exc).__name__}: {exc}"
                self._note = f"{label} failed"
            else:
                self._error = None
                self._note = note
            self.refresh()

        return on_click

    def _start(self, label: str, action: Callable[[], Coroutine[Any, Any, str]]) -> None:
        """Schedule an async Step/Run on the running loop, the buttons disabled until it ends."""
        self._running = label
        self._error = None
        self._note = f"{label}: running (async handlers)…"
        self._enable(False)
        self.refresh()
        self.task = asyncio.get_running_loop().create_task(action())
        self.task.add_done_callback(functools.partial(self._finished, label))

    def _finished(self, label: str, task: asyncio.Task[str]) -> None:
        """When the task ends (done, failed or cancelled, even before it started): show how, give the
        buttons back and redraw. A failure is shown in the panel, and ``await panel.task`` raises it."""
        self._running = None
        self._enable(True)
        if task.cancelled():
            self._note = f"{label} cancelled"
        elif (exc := task.exception()) is not None:
            self._error = f"{type(exc).__name__}: {exc}"
            self._note = f"{label} failed"
        else:
            self._note = task.result()
        self.refresh()

    def _enable(self, enabled: bool) -> None:
        """Enable or disable every button (disabled while an async Step/Run is in flight)."""
        for button in self.buttons.values():
            button.disabled = not enabled

    def _step(self) -> str:
        return _stepped(len(self.session.step()))

    async def _astep(self) -> str:
        return _stepped(len(await self.session.astep()))

    def _step10(self) -> str:
        return f"Step ×10: {len(self.session.step(10))} delivered"

    async def _astep10(self) -> str:
        return f"Step ×10: {len(await self.session.astep(10))} delivered"

    def _run(self) -> str:
        return f"Run: {len(self.session.run())} delivered"

    async def _arun(self) -> str:
        return f"Run: {len(await self.session.arun())} delivered"

    def _advance(self) -> str:
        seconds = self.seconds.value
        fired = self.session.advance(seconds)
        note = f"Advance {seconds:g} s: {len(fired)} delayed cop{'y' if len(fired) == 1 else 'ies'} written"
        arrivals = [
            f"{e.destination} #{e.copy_seq} as attempt {e.attempt + 1}" for e in fired if e.copy_seq is not None
        ]
        return f"{note} (to be delivered: {', '.join(arrivals)})" if arrivals else note

    def _reset(self) -> str:
        self.session.reset()
        return "Reset: started over"

    # -- views -----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Redraw every view from the Session.

        Returns
        -------
        None
        """
        s = self.session
        head = f"<p><b>clock</b> {_e(_iso(s.now))} &middot; {_e(self._note)}</p>"
        if self._error is not None:
            head += f"<p class='nbkit-error' style='color:#b00020'>error: {_e(self._error)}</p>"
        delivery = s.last_delivery
        event = self.session.last_event
        if delivery is None:
            body = "<p>no delivery yet</p>"
        else:
            pairs = [
                ("last delivery", f"{delivery.transport}, subscription {delivery.subscription}"),
                ("stream key", delivery.stream_key),
                ("sequence", delivery.seq),
                ("attempt", delivery.attempt),
                ("payload", delivery.preview(60)),
            ]
            if event is not None:
                pairs += [("outcome", event.outcome), ("action", event.describe())]
                if event.error:
                    pairs.append(("handler error", event.error))
            body = f"<table class='nbkit-panel-delivery'>{_rows(pairs)}</table>"
        self.status.value = f"<div class='nbkit-panel-status'>{head}{body}</div>"

        pending = s.pending
        if pending:
            items = "".join(
                f"<li>{_e(p.destination)} due {_e(_iso(p.due))}: delivered next as attempt {p.attempt} "
                f"(copy of {_e(p.copy_of)})</li>"
                for p in pending[:10]
            )
            more = f"<li>… and {len(pending) - 10} more</li>" if len(pending) > 10 else ""
            self.pending_view.value = (
                f"{_heading(f'pending copies ({len(pending)})')}<ul style='margin:0'>{items}{more}</ul>"
            )
        else:
            self.pending_view.value = f"{_heading('pending copies (0)')}<p style='margin:0'>(none)</p>"

        counts = s.counts()
        rows = _rows([(action, n) for action, n in counts.items()] + [("settled", sum(counts.values()))])
        self.counts_view.value = f"{_heading('settlements per action')}<table class='nbkit-panel-counts'>{rows}</table>"

        lines = s.log[-self.log_lines :] if self.log_lines > 0 else []
        text = _e("\n".join(lines)) if lines else "(no log lines)"
        self.log_view.value = f"{_heading('log')}<pre style='{_WRAP_PRE}'>{text}</pre>"

        if self.show_plot:
            self._draw_plots()

    def _draw_plots(self) -> None:
        """Redraw the attempts chart and the timeline when the session's events changed (a delayed
        copy being written or lost changes an event, not their number)."""
        events = getattr(self.session.app, "events", [])
        key = (id(self.session.app), tuple(events))
        if key == self._plot_key:
            return
        from matplotlib.figure import Figure

        from nbkit.notebook.plots import attempts, timeline

        frame = self.session.events
        fig = Figure(figsize=(4, 2.5), dpi=80, layout="constrained")  # off-screen: not in pyplot
        ax = fig.add_subplot()
        attempts(frame, ax=ax)
        ax.title.set_fontsize("medium")
        self.plot.value = _png(fig)

        lanes = min(self.timeline_lanes, _lanes(events))
        fig = Figure(figsize=(7.2, 1.9 + 0.3 * lanes), dpi=100, layout="constrained")  # 720 px wide, as shown
        ax = fig.add_subplot()
        timeline(frame, ax=ax, max_lanes=self.timeline_lanes)
        ax.title.set_fontsize("medium")
        self.timeline.value = _png(fig)
        self._plot_key = key


def _stepped(n: int) -> str:
    """The Step button's note for ``n`` deliveries."""
    return f"Step: {n} delivered" if n else "Step: nothing ready to deliver now"


def _lanes(events: Iterable[SettlementEvent]) -> int:
    """About how many timeline lanes the events need (first deliveries and pipe lines), for sizing."""
    return sum(1 for e in events if e.attempt == 1 or e.transport == "pipe")


# -- the stream browser --------------------------------------------------------------------------------
_TABLE_COLUMNS = ("stream_key", "seq", "timestamp", "attempt", "size", "payload")
#: A page cell: left-aligned, at the top of its row. The timestamp never breaks; the payload preview (often
#: JSON with no space) breaks anywhere, so the table fits the notebook's column instead of running past it.
_CELL = "text-align:left;vertical-align:top"


class StreamBrowser(StaticSnapshot, widgets.VBox):
    """Page through a ``.ss`` stream file: filter by stream key and sequence range, show one message.

    The file is read once with ``read_stream(path, payload="auto")`` (fine for notebook-sized files;
    EOS and internal keys are left out). Widgets: ``key`` (Dropdown, ``"(all)"`` or one key),
    ``seq_min``/``seq_max`` (IntText, inclusive), ``prev_button``/``next_button``, ``selector``
    (Dropdown of the current page's messages). Views: ``table`` (HTML of the current page: row,
    stream_key, seq, timestamp, attempt, size, payload preview) and ``detail`` (HTML: the selected
    message's fields, headers and full payload). ``filtered`` is the DataFrame the filters select
    (all pages; index = row in ``frame``), ``page`` the current page (0-based; assigning it moves
    there), ``pages`` how many there are.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file.
    page_size : int
        Messages per page.

    Examples
    --------
    >>> from nbkit import StreamWriter
    >>> from nbkit.widgets import StreamBrowser
    >>> with StreamWriter("orders.ss") as writer:
    ...     for n in range(5):
    ...         _ = writer.write("orders", b'{"id": %d}' % n)
    >>> browser = StreamBrowser("orders.ss", page_size=2)
    >>> browser.pages, len(browser.filtered)
    (3, 5)
    >>> browser.next_page()
    >>> browser.page
    1
    """

    ALL = "(all)"

    def __init__(self, path: str | os.PathLike, *, page_size: int = 20) -> None:
        super().__init__()
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a whole number >= 1, not {page_size!r}")
        self.path = os.fspath(path)
        self.page_size = page_size
        self.frame: pd.DataFrame = read_stream(self.path, payload="auto")
        seqs = self.frame["seq"]
        lo = int(seqs.min()) if len(seqs) else 0
        hi = int(seqs.max()) if len(seqs) else 0
        keys = sorted(str(k) for k in self.frame["stream_key"].astype(object).unique())
        self._page = 0
        self._busy = False
        self.filtered: pd.DataFrame = self.frame
        self.key = widgets.Dropdown(options=[self.ALL, *keys], value=self.ALL, description="stream key")
        self.seq_min = widgets.IntText(value=lo, description="seq from", layout=widgets.Layout(width="180px"))
        self.seq_max = widgets.IntText(value=hi, description="to", layout=widgets.Layout(width="180px"))
        self.prev_button = widgets.Button(description="Previous", icon="arrow-left")
        self.next_button = widgets.Button(description="Next", icon="arrow-right")
        self.page_label = widgets.HTML()
        self.table = widgets.HTML()
        self.selector = widgets.Dropdown(
            description="message", layout=widgets.Layout(width="420px", max_width=FULL_WIDTH)
        )
        self.detail = widgets.HTML()
        for w in (self.key, self.seq_min, self.seq_max):
            w.observe(self._filters_changed, names="value")
        self.selector.observe(self._selection_changed, names="value")
        self.prev_button.on_click(lambda _b: self.previous_page())
        self.next_button.on_click(lambda _b: self.next_page())
        self.children = [
            widgets.HBox([self.key, self.seq_min, self.seq_max], layout=wrapping_row()),
            widgets.HBox([self.prev_button, self.next_button, self.page_label], layout=wrapping_row()),
            self.table,
            self.selector,
            self.detail,
        ]
        self._apply_filters()

    # -- state -----------------------------------------------------------------------------------------
    @property
    def pages(self) -> int:
        """How many pages the filtered messages fill (at least 1)."""
        return max(1, math.ceil(len(self.filtered) / self.page_size))

    @property
    def page(self) -> int:
        """The current page, 0-based; assigning clamps it to the pages there are and redraws."""
        return self._page

    @page.setter
    def page(self, value: int) -> None:
        self._page = min(max(int(value), 0), self.pages - 1)
        self._render()

    @property
    def current(self) -> pd.DataFrame:
        """The rows on the current page."""
        start = self._page * self.page_size
        return self.filtered.iloc[start : start + self.page_size]

    snapshot_name = "browser"

    def __repr__(self) -> str:
        return (
            f"StreamBrowser({os.path.basename(os.fspath(self.path))}: {len(self.filtered)} messages shown, "
            f"page {self.page + 1} of {self.pages})"
        )

    def next_page(self) -> None:
        """Go to the next page (the last page stays where it is).

        Returns
        -------
        None
        """
        self.page = self._page + 1

    def previous_page(self) -> None:
        """Go to the previous page (the first page stays where it is).

        Returns
        -------
        None
        """
        self.page = self._page - 1

    def show(self, row: int) -> None:
        """Show the message at ``row`` (an index label of ``frame``) in ``detail``.

        Parameters
        ----------
        row : int
            The row of ``frame`` (the ``row`` column of the table).

        Returns
        -------
        None

        Raises
        ------
        KeyError
            If there is no such row.
        """
        if row not in self.frame.index:
            raise KeyError(f"no message at row {row!r}; rows are 0..{len(self.frame) - 1}")
        msg = self.frame.loc[row]
        headers = msg["headers"] or {}
        pairs = [
            ("row", row),
            ("stream key", msg["stream_key"]),
            ("shard", msg["shard_id"]),
            ("sequence", msg["seq"]),
            ("timestamp", _iso(msg["timestamp"])),
            ("attempt", f"{msg['attempt']} (retry count {msg['retry_count']})"),
            ("size", f"{msg['size']} bytes"),
            ("offset", msg["offset"]),
        ]
        head_rows = _rows([(f"header {k}", v) for k, v in headers.items()]) or _rows([("headers", "(none)")])
        self.detail.value = (
            f"<div class='nbkit-message'><table>{_rows(pairs)}{head_rows}</table>"
            f"<b>payload</b><pre style='{_WRAP_PRE}'>{_e(_full(msg['payload']))}</pre></div>"
        )

    # -- drawing ---------------------------------------------------------------------------------------
    def _filters_changed(self, _change: object = None) -> None:
        self._apply_filters()

    def _apply_filters(self) -> None:
        f = self.frame
        mask = pd.Series(True, index=f.index)
        if self.key.value != self.ALL:
            mask &= f["stream_key"].astype(object) == self.key.value
        seq = f["seq"].astype("Int64")
        mask &= (seq >= self.seq_min.value) & (seq <= self.seq_max.value)
        self.filtered = f[mask.fillna(False).astype(bool)]
        self._page = 0
        self._render()

    def _render(self) -> None:
        rows = self.current
        n = len(self.filtered)
        first = self._page * self.page_size + 1 if n else 0
        last = self._page * self.page_size + len(rows)
        self.page_label.value = (
            f"page {self._page + 1} of {self.pages} &middot; messages {first}-{last} of {n} (file: {len(self.frame)})"
        )
        self.prev_button.disabled = self._page == 0
        self.next_button.disabled = self._page >= self.pages - 1
        if rows.empty:
            self.table.value = "<p>(no messages match)</p>"
        else:
            head = "".join(f"<th style='{_CELL}'>{c}</th>" for c in ("row", *_TABLE_COLUMNS))
            body = "".join(
                "<tr>"
                + f"<td style='{_CELL}'>{_e(label)}</td>"
                + f"<td style='{_CELL}'>{_e(r['stream_key'])}</td>"
                + f"<td style='{_CELL}'>{_e(r['seq'])}</td>"
                + f"<td style='{_CELL};white-space:nowrap'>{_e(_iso(r['timestamp']))}</td>"
                + f"<td style='{_CELL}'>{_e(r['attempt'])}</td>"
                + f"<td style='{_CELL}'>{_e(r['size'])}</td>"
                + f"<td style='{_CELL};overflow-wrap:anywhere'>{_e(_preview(r['payload']))}</td>"
                + "</tr>"
                for label, r in rows.iterrows()
            )
            self.table.value = f"<table class='nbkit-stream-page'><tr>{head}</tr>{body}</table>"
        options = [(f"{label}: {r['stream_key']} #{r['seq']}", label) for label, r in rows.iterrows()]
        self._busy = True
        try:
            self.selector.options = options
            self.selector.value = options[0][1] if options else None
        finally:
            self._busy = False
        self._selection_changed()

    def _selection_changed(self, _change: object = None) -> None:
        if self._busy:
            return
        row = self.selector.value
        if row is None:
            self.detail.value = "<p>(no message selected)</p>"
        else:
            self.show(row)
