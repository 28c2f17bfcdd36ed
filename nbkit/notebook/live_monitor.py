"""``LiveMonitor``: a widget that follows a stream file a running service writes, refreshing itself.

The reading and counting is :class:`~nbkit.transport.file_watch.FileWatch` (what ``nbkit watch`` shows
in a terminal); this module draws its state as HTML widgets. Refreshing runs as an asyncio task on the
kernel's own event loop (the loop ipykernel runs cells on), so the kernel stays free between
refreshes: other cells run, and no thread is started. Each refresh reads at most ``max_messages``
messages, so a large backlog is caught up over several refreshes instead of holding the kernel.

The task ends when the Stop button is clicked, ``.stop()`` or ``.close()`` is called, the widget is
closed in the front end, or the file is removed, rotated (a new file at the path), ended with an
end-of-stream mark or found damaged (the status line says which). Without a running event loop (plain
Python, a test), nothing refreshes on its own: call :meth:`LiveMonitor.refresh`.
"""

from __future__ import annotations

import asyncio
import html
import os
from collections.abc import Iterable
from typing import Any

import ipywidgets as widgets

from nbkit.notebook.snapshot import StaticSnapshot
from nbkit.transport.file_watch import FileWatch, WatchState, sparkline
from nbkit.wire.timestamps import format_log_timestamp

__all__ = ["LiveMonitor"]

#: the tables' look: left-aligned cells with room between the columns
_TABLE = '<table style="border-collapse:collapse">'
_CELL = ' style="padding:1px 12px 1px 0;text-align:left;vertical-align:top"'
_ESCAPES = {c: {9: "\\t", 10: "\\n", 13: "\\r"}.get(c, f"\\x{c:02x}") for c in (*range(0x20), *range(0x7F, 0xA0))}


def _text(value: Any, width: int = 80) -> str:
    """One HTML-escaped line of a value (payload or header): control characters escaped, cut to ``width``."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", errors="backslashreplace")
    text = str(value).translate(_ESCAPES)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return html.escape(text)


class LiveMonitor(StaticSnapshot, widgets.VBox):
    """Follow a stream file a service writes: per-key counts and rates, deliveries per attempt, dead
    letters over time and the latest messages with decoded headers, refreshed every ``every`` seconds.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (it must exist: start the service first).
    every : float
        Seconds between refreshes (default 1).
    latest : int
        How many of the newest messages to list (default 10).
    window : float
        Seconds of message time the rates cover (default 10).
    dead_letter_keys : iterable of str, optional
        The dead-letter keys; by default keys named like one
        (:func:`nbkit.wire.keys.is_dead_letter_key`: ``orders.dead``, ``jobs.dlq``, ...).
    max_messages : int
        At most this many messages are read per refresh.
    autostart : bool
        Start refreshing at once when an event loop runs (default True).

    Returns
    -------
    LiveMonitor
        An ``ipywidgets.VBox``: display it (the last expression of a cell).

    Examples
    --------
    >>> import nbkit.widgets
    >>> monitor = nbkit.widgets.LiveMonitor("orders.ss", every=1.0)   # doctest: +SKIP
    >>> monitor                      # refreshes while the cell below runs  # doctest: +SKIP
    >>> monitor.stop()                                                    # doctest: +SKIP
    """

    snapshot_name = "monitor"

    def __init__(
        self,
        path: str | os.PathLike,
        every: float = 1.0,
        *,
        latest: int = 10,
        window: float = 10.0,
        dead_letter_keys: Iterable[str] | None = None,
        max_messages: int = 50_000,
        autostart: bool = True,
    ) -> None:
        if every <= 0:
            raise ValueError(f"every must be more than 0 seconds, not {every}")
        self.path = os.fspath(path)
        self.every = every
        self.window = window
        self.max_messages = max_messages
        self.watch = FileWatch(self.path, window=window, latest=latest, dead_letter_keys=dead_letter_keys)
        self._task: asyncio.Task | None = None
        self._stopped = False
        self.status = widgets.HTML()
        self.keys_view = widgets.HTML()
        self.attempts_view = widgets.HTML()
        self.dead_view = widgets.HTML()
        self.latest_view = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", tooltip="stop refreshing and release the file")
        self.stop_button.on_click(lambda _button: self.stop())
        for view, name in (
            (self.status, "status"),
            (self.keys_view, "keys"),
            (self.attempts_view, "attempts"),
            (self.dead_view, "dead"),
            (self.latest_view, "latest"),
        ):
            view.add_class(f"nbkit-monitor-{name}")  # for styling, and for the browser test to find them
        super().__init__(
            [
                widgets.HBox([self.stop_button, self.status]),
                self.keys_view,
                self.attempts_view,
                self.dead_view,
                self.latest_view,
            ]
        )
        self.refresh()
        if autostart and not self._stopped:
            self.start()

    # -- refreshing -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the refresh task is scheduled on the event loop."""
        return self._task is not None and not self._task.done()

    @property
    def state(self) -> WatchState:
        """What the monitor knows of the file (see :class:`~nbkit.transport.file_watch.WatchState`)."""
        return self.watch.state

    def start(self) -> bool:
        """Start refreshing every ``every`` seconds on the running event loop.

        Returns
        -------
        bool
            True when the task runs (or already ran); False when no event loop runs here or the
            monitor was stopped (then call :meth:`refresh` yourself).

        Examples
        --------
        >>> monitor.start()              # doctest: +SKIP
        True
        """
        if self._stopped:
            return False
        if self.running:
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._show_status("not refreshing by itself (no running event loop here): call .refresh()")
            return False
        self._task = loop.create_task(self._refresh_loop())
        self._show_status()
        return True

    async def _refresh_loop(self) -> None:
        """The task: sleep, refresh, until stopped or the watch ends; never raises into the loop."""
        try:
            while not self._stopped:
                await asyncio.sleep(self.every)
                if self._stopped or self.comm is None:  # closed in the front end, or by close()
                    break
                if not self.refresh().following:
                    break
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a refresh that failed: say so in the widget, stop refreshing
            self._show_status(f"stopped: {type(exc).__name__}: {exc}")
        finally:
            self._finish()

    def refresh(self) -> WatchState:
        """Read what was appended since the last refresh and redraw.

        Returns
        -------
        WatchState
            The watch's state after this refresh.

        Examples
        --------
        >>> monitor.refresh().messages   # doctest: +SKIP
        120
        """
        state = self.watch.update(self.max_messages) if not self._stopped else self.watch.state
        self._draw(state)
        if not state.following:
            self._finish()
        return state

    def stop(self) -> None:
        """Stop refreshing and release the file (the last view stays on screen).

        Returns
        -------
        None

        Examples
        --------
        >>> monitor.stop()               # doctest: +SKIP
        """
        task = self._task
        if task is not None and not task.done():
            task.cancel()
        self._finish()

    def _finish(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.watch.close()
        self._task = None
        self.stop_button.disabled = True
        self._show_status()

    def close(self) -> None:
        """Stop refreshing, then close the widget (``ipywidgets.Widget.close``)."""
        if getattr(self, "stop_button", None) is not None:  # not for one whose __init__ failed early
            self.stop()
        super().close()

    # -- drawing ----------------------------------------------------------------------------------
    def _show_status(self, note: str | None = None) -> None:
        state = self.watch.state
        if note is None:
            if not state.following:
                note = state.detail
            elif self._stopped:
                note = "stopped"
            elif self.running:
                note = f"refreshing every {self.every:g} s"
            else:
                note = "not refreshing"
        self.status.value = (
            f"<b>{html.escape(os.path.basename(self.path))}</b>: {state.messages} messages, byte {state.offset}"
            f" of {state.size}, {state.updates} refreshes · <i>{html.escape(note)}</i>"
        )

    def _draw(self, state: WatchState) -> None:
        self._show_status()
        rows = [
            _row(
                (
                    "key",
                    "messages",
                    "last seq",
                    f"per s (last {self.window:g} s)",
                    "deliveries per attempt 1 / 2 / ...",
                ),
                "th",
            )
        ]
        for k in state.keys.values():
            top = max(k.attempts) if k.attempts else 1
            spread = "" if k.dead_letter else " / ".join(str(k.attempts.get(a, 0)) for a in range(1, top + 1))
            name = html.escape(k.stream_key) + (" (dead letters)" if k.dead_letter else "")
            rows.append(_row((name, str(k.count), str(k.last_seq), f"{k.rate(self.window):.1f}", spread)))
        self.keys_view.value = _TABLE + "".join(rows) + "</table>" if state.keys else "<i>no messages yet</i>"
        totals = state.attempt_totals()
        self.attempts_view.value = (
            ("deliveries per attempt: " + ", ".join(f"attempt {a}: <b>{n}</b>" for a, n in totals.items()))
            if totals
            else ""
        )
        spark = html.escape(sparkline(state.dead_letters_over_time()))
        self.dead_view.value = (
            (
                f"dead letters over time (10 s buckets, newest right): <code>{spark}</code> "
                f"({len(state.dead_letter_times)} in all)"
            )
            if state.dead_letter_times
            else ""
        )
        latest = [_row(("time", "key", "seq", "headers", "payload"), "th")]
        for m in reversed(state.latest):
            headers = "<br>".join(f"{_text(k, 40)}: {_text(v, 40)}" for k, v in m["headers"].items())
            latest.append(
                _row(
                    (
                        format_log_timestamp(m["timestamp_ms"]),
                        html.escape(m["stream_key"]),
                        str(m["seq"]),
                        headers,
                        f"<code>{_text(m['payload'])}</code>",
                    )
                )
            )
        self.latest_view.value = _TABLE + "".join(latest) + "</table>" if state.latest else ""


def _row(cells: Iterable[str], tag: str = "td") -> str:
    """One table row of already escaped HTML cells."""
    return "<tr>" + "".join(f"<{tag}{_CELL}>{c}</{tag}>" for c in cells) + "</tr>"
