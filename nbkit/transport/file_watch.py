"""Following a stream file that a service writes, as a running summary (``nbkit watch``, ``LiveMonitor``).

:class:`FileWatch` keeps one follow-mode reader open and reads, at each :meth:`FileWatch.update`, what
was appended since the last one (at most ``max_messages``, so one update never takes long). The
summary per stream key: messages, last sequence number, a rate (messages in the last ``window``
seconds of message time, per second), deliveries per attempt (a copy with ``x-ruststream-retry-count:
n`` is delivered as attempt n + 1), and for dead-letter keys, when their messages arrived. The latest
messages are kept with their envelope headers decoded. Reading never takes the write lock, so any
writer (an nbkit service, a Rust service) may append meanwhile.

The watch stops, saying why, when the file is removed, replaced by a new file at the same path
(rotation), ends with an end-of-stream mark, or turns out damaged.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from nbkit.transport.file_info import text_table
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import Message
from nbkit.transport.polling import NEED_MORE
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEYS, is_dead_letter_key
from nbkit.wire.ssdecode import escape_controls

__all__ = ["FileWatch", "KeyActivity", "LatestMessage", "WatchState", "render_text", "sparkline"]

#: Statuses of a watch: only ``following`` reads on.
FOLLOWING = "following"


@dataclass(slots=True)
class KeyActivity:
    """The running summary of one stream key (all shards).

    ``attempts`` maps attempt number to deliveries (messages) with it; ``recent`` holds the timestamps
    (ms) of the messages inside the rate window.
    """

    stream_key: str
    dead_letter: bool
    count: int = 0
    last_seq: int = 0
    last_timestamp_ms: int = 0
    attempts: collections.Counter = field(default_factory=collections.Counter)
    recent: collections.deque = field(default_factory=collections.deque)

    def rate(self, window: float) -> float:
        """Messages per second over the last ``window`` seconds of message time."""
        return len(self.recent) / window if window > 0 else 0.0


class LatestMessage(dict):
    """One of the latest messages: ``stream_key``, ``seq``, ``shard_id``, ``timestamp_ms``, ``offset``,
    ``headers`` (decoded from the envelope) and ``payload`` (bytes, without the envelope)."""


@dataclass(slots=True)
class WatchState:
    """Everything a watch knows: status (``following``, ``removed``, ``rotated``, ``eos``, ``error``)
    and why, bytes read and file size, messages, per-key activity, dead-letter arrival times, latest
    messages (newest last), and the number of updates made."""

    path: str
    status: str = FOLLOWING
    detail: str = ""
    offset: int = 0
    size: int = 0
    messages: int = 0
    keys: dict[str, KeyActivity] = field(default_factory=dict)
    dead_letter_times: list[int] = field(default_factory=list)
    latest: collections.deque = field(default_factory=lambda: collections.deque(maxlen=10))
    updates: int = 0

    @property
    def following(self) -> bool:
        """True while the watch reads on (False once the file was removed, rotated, ended or damaged)."""
        return self.status == FOLLOWING

    def attempt_totals(self) -> dict[int, int]:
        """Deliveries per attempt over every key that is not a dead-letter key, by attempt number."""
        total: collections.Counter = collections.Counter()
        for key in self.keys.values():
            if not key.dead_letter:
                total.update(key.attempts)
        return dict(sorted(total.items()))

    def dead_letters_over_time(self, bucket: float = 10.0, buckets: int = 30) -> list[int]:
        """Dead letters per ``bucket`` seconds of message time, the last ``buckets`` buckets up to the
        newest message (oldest first)."""
        if not self.keys:
            return [0] * buckets
        newest = max(k.last_timestamp_ms for k in self.keys.values())
        width = int(bucket * 1000)
        counts = [0] * buckets
        for ts in self.dead_letter_times:
            back = (newest - ts) // width
            if 0 <= back < buckets:
                counts[buckets - 1 - back] += 1
        return counts


class FileWatch:
    """Follow ``path`` and keep a :class:`WatchState` of it up to date (see the module doc).

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (it must exist and have its header).
    window : float
        Seconds of message time the per-key rates cover (default 10).
    latest : int
        How many of the newest messages to keep (default 10).
    dead_letter_keys : iterable of str, optional
        The dead-letter keys; by default keys named like one
        (:func:`nbkit.wire.keys.is_dead_letter_key`: ``orders.dead``, ``jobs.dlq``, ...).

    Returns
    -------
    FileWatch
        Call :meth:`update` as often as you like; ``close()`` (or ``with``) releases the file.

    Examples
    --------
    >>> with FileWatch("orders.ss") as watch:        # doctest: +SKIP
    ...     state = watch.update()
    ...     state.keys["orders"].count
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        window: float = 10.0,
        latest: int = 10,
        dead_letter_keys: Iterable[str] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.window = window
        self._dead = set(dead_letter_keys) if dead_letter_keys is not None else None
        self.reader = StreamReader(self.path, follow=True, errors="stop", poll_max=0.05)
        self.state = WatchState(self.path, latest=collections.deque(maxlen=latest))

    def update(self, max_messages: int = 50_000) -> WatchState:
        """Read what was appended since the last update (at most ``max_messages``) into the state.

        Parameters
        ----------
        max_messages : int
            A bound on the messages one call reads, so a caller on an event loop is never held long
            (the rest comes with the next update).

        Returns
        -------
        WatchState
            The state (the same object every time), ``following`` False once the watch has stopped.

        Examples
        --------
        >>> FileWatch("orders.ss").update().messages   # doctest: +SKIP
        42
        """
        state = self.state
        if not state.following:
            return state
        reader = self.reader
        for _ in range(max_messages):
            item = reader.poll()
            if item is NEED_MORE:
                break
            if item is None:
                self._ended()
                break
            self._add(item)
        state.offset = reader.pos
        try:
            state.size = reader.size()  # of the file the reader has open, even once it is removed
        except OSError:
            pass
        state.updates += 1
        return state

    def _add(self, msg: Message) -> None:
        state = self.state
        if msg.stream_key in INTERNAL_KEYS:
            return
        key = state.keys.get(msg.stream_key)
        if key is None:
            dead = msg.stream_key in self._dead if self._dead is not None else is_dead_letter_key(msg.stream_key)
            key = state.keys[msg.stream_key] = KeyActivity(msg.stream_key, dead)
        headers, payload = envelope.decode(msg.payload)
        try:
            retries = int(headers.get(envelope.RETRY_COUNT_HEADER, 0) or 0)
        except (TypeError, ValueError):
            retries = 0
        key.count += 1
        key.last_seq = max(key.last_seq, msg.seq)
        ts = msg.timestamp_ms
        key.last_timestamp_ms = max(key.last_timestamp_ms, ts)
        key.attempts[retries + 1] += 1
        recent = key.recent
        recent.append(ts)
        horizon = key.last_timestamp_ms - self.window * 1000
        while recent and recent[0] <= horizon:
            recent.popleft()
        if key.dead_letter:
            state.dead_letter_times.append(ts)
        state.messages += 1
        state.latest.append(
            LatestMessage(
                stream_key=msg.stream_key,
                seq=msg.seq,
                shard_id=msg.shard_id,
                timestamp_ms=ts,
                offset=msg.offset,
                headers=headers,
                payload=payload,
            )
        )

    def _ended(self) -> None:
        """The reader stopped: say why in the state."""
        state = self.state
        end = self.reader.end
        reason = end.reason if end is not None else "end"
        at = end.offset if end is not None else self.reader.pos
        if reason == "removed":
            if os.path.exists(self.path):
                state.status = "rotated"
                state.detail = (
                    f"{self.path} was replaced by a new file (rotated); stopped at byte {at} of the old "
                    "one. Watch again to follow the new file."
                )
            else:
                state.status = "removed"
                state.detail = f"{self.path} was removed; stopped at byte {at}."
        elif reason == "eos":
            state.status = "eos"
            state.detail = f"{self.path} ends with an end-of-stream mark (byte {at}); the writer has finished."
        else:
            state.status = "error"
            state.detail = f"stopped: {end.describe() if end is not None else 'the read ended'}"

    def close(self) -> None:
        """Release the file."""
        self.reader.close()

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def render_text(state: WatchState, *, window: float = 10.0, latest: int = 5, width: int = 100) -> str:
    """The summary of a watch as terminal text (what ``nbkit watch`` prints at each refresh).

    Parameters
    ----------
    state : WatchState
        What :meth:`FileWatch.update` returned.
    window : float
        The rate window the watch used, for the column title.
    latest : int
        How many of the newest messages to show.
    width : int
        Payload previews are cut to fit this many columns.

    Returns
    -------
    str
        Lines ending with a newline; control characters in payloads and headers are escaped.

    Examples
    --------
    >>> print(render_text(WatchState("orders.ss")).splitlines()[0])
    orders.ss: following, 0 messages, byte 0 of 0
    """
    lines = [f"{state.path}: {state.status}, {state.messages} messages, byte {state.offset} of {state.size}"]
    if state.detail:
        lines.append(state.detail)
    if state.keys:
        table = [("key", "messages", "last seq", f"per s ({window:g} s)", "attempts 1/2/3/...")]
        for k in state.keys.values():
            top = max(k.attempts) if k.attempts else 1
            # a dead letter is not delivered again: its attempts column stays empty
            spread = "-" if k.dead_letter else "/".join(str(k.attempts.get(a, 0)) for a in range(1, top + 1))
            table.append(
                (
                    k.stream_key + (" (dead letters)" if k.dead_letter else ""),
                    str(k.count),
                    str(k.last_seq),
                    f"{k.rate(window):.1f}",
                    spread,
                )
            )
        lines += ["", *text_table(table)]
    totals = state.attempt_totals()
    if totals:
        lines.append("")
        lines.append("deliveries per attempt: " + ", ".join(f"attempt {a}: {n}" for a, n in totals.items()))
    if state.dead_letter_times:
        lines.append(f"dead letters over time (10 s buckets): {sparkline(state.dead_letters_over_time())}")
    shown = list(state.latest)[-latest:]
    if shown:
        lines.append("")
        lines.append("latest messages:")
        for m in shown:
            head = f"  {m['stream_key']} seq {m['seq']}"
            headers = " ".join(f"{k}={escape_controls(v)}" for k, v in m["headers"].items())
            text = head + (f" {{{headers}}}" if headers else "") + " " + escape_controls(m["payload"])
            lines.append(text if len(text) <= width else text[: width - 1] + "…")
    return "\n".join(lines) + "\n"


_BARS = " ▁▂▃▄▅▆▇█"


def sparkline(counts: list[int]) -> str:
    """Counts as a row of block characters, the highest one full (``" "`` for zero).

    Parameters
    ----------
    counts : list of int
        Non-negative counts, oldest first.

    Returns
    -------
    str
        One character per count.

    Examples
    --------
    >>> sparkline([0, 1, 2, 4])
    ' ▂▄█'
    """
    top = max(counts, default=0)
    if top <= 0:
        return " " * len(counts)
    return "".join(_BARS[0 if c <= 0 else max(1, round(c / top * (len(_BARS) - 1)))] for c in counts)
