"""A one-pass summary of a ``.ss`` stream file: header, streams, beacons, EOS and how the data ends.

Built on :class:`~nbkit.transport.file_reader.StreamReader` only (replay). By default it reads with
``on_bad_frames="skip"``: a damaged file gets a summary of every intact part, with each damaged region
and the number of messages recovered after it; ``on_bad_frames="error"`` stops at the first damage
(``end.reason == "error"``) instead of raising.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.transport.damage import DamagedRegion, check_on_bad_frames
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import ReadEnd
from nbkit.wire import envelope
from nbkit.wire.keys import is_dead_letter_key
from nbkit.wire.ssformat import FileHeader
from nbkit.wire.timestamps import iso_utc

if TYPE_CHECKING:  # numpy is imported by the summary itself, not by every command that imports this module
    from nbkit.transport.plausibility import KeyLoss, Suspect

__all__ = ["FileSummary", "StreamSummary", "stream_keys", "summarize", "text_table"]


def text_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of text as aligned columns, two spaces apart, trailing spaces removed (the first row is the
    title row of ``nbkit info``, ``nbkit info --from stdio`` and ``nbkit watch``).

    Parameters
    ----------
    rows : sequence of sequence of str
        The cells, every row as long as the first.

    Returns
    -------
    list of str
        One line per row, without newlines.

    Examples
    --------
    >>> text_table([("key", "messages"), ("orders", "12")])
    ['key     messages', 'orders  12']
    """
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """Messages of one (stream key, shard): how many, of which kind, and their sequence and time range.

    ``first_timestamp_ms``/``last_timestamp_ms`` are the earliest and latest timestamps by value (not in
    file order), leaving out records whose header fields look damaged (``suspect`` counts them).
    ``originals`` are records without a retry count, ``retry_copies`` records with one
    (``x-ruststream-retry-count``), and on a dead-letter key (``dead_letter``) every record is a dead letter.
    """

    stream_key: str
    shard_id: int
    count: int
    first_seq: int
    last_seq: int
    first_timestamp_ms: int
    last_timestamp_ms: int
    originals: int = 0
    retry_copies: int = 0
    dead_letter: bool = False
    suspect: int = 0

    @property
    def dead_letters(self) -> int:
        """Records on this key that are dead letters (all of them on a dead-letter key, else 0)."""
        return self.count if self.dead_letter else 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (timestamps also as ISO UTC text)."""
        return {
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
            "dead_letters": self.dead_letters,
            "first_timestamp": iso_utc(self.first_timestamp_ms),
            "last_timestamp": iso_utc(self.last_timestamp_ms),
        }


@dataclass(frozen=True, slots=True)
class FileSummary:
    """What ``nbkit info`` shows: header, size, streams (in order of first appearance), beacons, end.

    ``beacon_count`` counts the boundaries ``k*I`` (k >= 1) that lie inside the file (``k*I < size``),
    i.e. the beacons a complete writer put there; ``end`` is the reader's verdict on how the data ends.
    ``damaged`` lists the regions a salvage read skipped, ``recovered_after[i]`` how many messages
    were read after ``damaged[i]`` (up to the next region or the end) and ``lost[i]`` what each key lost
    there (:class:`~nbkit.transport.plausibility.KeyLoss`). ``suspects`` are records whose header fields
    look damaged (:func:`~nbkit.transport.plausibility.suspects`); ``time_range`` leaves them out.
    """

    path: str
    header: FileHeader
    size: int
    streams: tuple[StreamSummary, ...]
    message_count: int
    beacon_count: int
    has_eos: bool
    eos_offset: int | None
    end: ReadEnd
    damaged: tuple[DamagedRegion, ...] = ()
    recovered_after: tuple[int, ...] = ()
    lost: tuple[tuple[KeyLoss, ...], ...] = ()
    suspects: tuple[Suspect, ...] = ()

    @property
    def time_range(self) -> tuple[int, int] | None:
        """The earliest and latest message timestamps (ms) by value, suspect records left out (None: none)."""
        streams = [st for st in self.streams if st.count > st.suspect]
        if not streams:
            return None
        return min(st.first_timestamp_ms for st in streams), max(st.last_timestamp_ms for st in streams)

    def stream(self, stream_key: str, shard_id: int = 0) -> StreamSummary | None:
        """The summary of one stream, or None when the file holds none of its messages."""
        for s in self.streams:
            if s.stream_key == stream_key and s.shard_id == shard_id:
                return s
        return None

    def _end_description(self) -> str:
        """How the data ends, in words; the end-of-stream mark is named by its own offset (where its frame
        starts, as ``eos_offset`` and the text of ``nbkit info`` give it), not by where reading stopped."""
        if self.end.reason == "eos" and self.eos_offset is not None:
            return f"ended at the end-of-stream mark (offset {self.eos_offset})"
        return self.end.describe()

    def to_text(self) -> str:
        """What ``nbkit info`` prints: one ``name  value`` row per fact, then the table of streams.

        Returns
        -------
        str
            Lines ending with a newline.
        """
        d = self.to_dict()
        h = d["header"]
        n = len(self.streams)
        rows = [
            ("file", self.path),
            ("file name", h["file_name"]),
            ("created at", f"{h['created_at']} ({h['created_at_ms']} ms)"),
            ("beacon interval", f"{h['beacon_interval']} bytes"),
            ("size", f"{self.size} bytes"),
            ("messages", f"{self.message_count} in {n} stream{'s' if n != 1 else ''}"),
            ("time range", self._time_text()),
            ("beacons", str(self.beacon_count)),
            ("end of stream", f"yes (at offset {self.eos_offset})" if self.has_eos else "no"),
        ]
        end = self.end
        if end.reason == "truncated":
            rows.append(
                (
                    "trailing data",
                    f"{end.trailing_bytes} bytes at offset {end.offset} are not a "
                    "complete frame (a writer may be mid-write, or stopped mid-frame)",
                )
            )
        elif end.reason == "error":
            rows.append(("damaged", f"reading stopped at offset {end.offset}: {end.error}"))
        from nbkit.transport.plausibility import describe_losses

        lost = self.lost or tuple(() for _ in self.damaged)
        for region, count, cost in zip(self.damaged, self.recovered_after, lost, strict=True):
            recovered = f"{count} message{'s' if count != 1 else ''} recovered after it"
            rows.append(("damaged", f"{describe_losses(region, cost)}; {recovered}"))
        for suspect in self.suspects:
            rows.append(("suspect", f"{suspect.describe()} (left out of the time range)"))
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        if self.streams:
            table = [
                (
                    "stream",
                    "shard",
                    "messages",
                    "originals",
                    "retry copies",
                    "dead letters",
                    "seq",
                    "earliest",
                    "latest",
                )
            ]
            for st in self.streams:
                first, last = st.first_seq, st.last_seq
                seq = str(first) if first == last else f"{first}..{last}"
                table.append(
                    (
                        st.stream_key,
                        str(st.shard_id),
                        str(st.count),
                        str(st.originals),
                        str(st.retry_copies),
                        str(st.dead_letters),
                        seq,
                        iso_utc(st.first_timestamp_ms),
                        iso_utc(st.last_timestamp_ms),
                    )
                )
            lines += ["", *text_table(table)]
        return "\n".join(lines) + "\n"

    def _time_text(self) -> str:
        span = self.time_range
        if span is None:
            return "none (no message)"
        left_out = f" ({len(self.suspects)} suspect record{'s' if len(self.suspects) != 1 else ''} left out)"
        return f"{iso_utc(span[0])} .. {iso_utc(span[1])}{left_out if self.suspects else ''}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form, used by ``nbkit info --json``."""
        end = self.end
        return {
            "path": self.path,
            "header": {
                "file_name": self.header.file_name,
                "created_at_ms": self.header.created_at_ms,
                "created_at": iso_utc(self.header.created_at_ms),
                "beacon_interval": self.header.beacon_interval,
            },
            "size": self.size,
            "message_count": self.message_count,
            "streams": [s.to_dict() for s in self.streams],
            "beacon_count": self.beacon_count,
            "has_eos": self.has_eos,
            "eos_offset": self.eos_offset,
            "end": {
                "reason": end.reason,
                "offset": end.offset,
                "trailing_bytes": end.trailing_bytes,
                "error": None if end.error is None else str(end.error),
                "description": self._end_description(),
            },
            "time_range": None
            if self.time_range is None
            else {"first": iso_utc(self.time_range[0]), "last": iso_utc(self.time_range[1])},
            "damaged": [
                {**region.to_dict(), "recovered_after": n, "lost": [loss.to_dict() for loss in cost]}
                for region, n, cost in zip(
                    self.damaged, self.recovered_after, self.lost or tuple(() for _ in self.damaged), strict=True
                )
            ],
            "suspect": [suspect.to_dict() for suspect in self.suspects],
        }


def summarize(
    path: str | os.PathLike,
    *,
    on_bad_frames: str = "skip",
    dead_letter_keys: Iterable[str] | None = None,
    storage_options: dict[str, Any] | None = None,
    block_size: int | None = None,
) -> FileSummary:
    """Read the whole file once and summarize it; header problems raise (an NbkitError).

    Damage later in the file is skipped (``on_bad_frames="skip"``, each region listed in ``damaged`` with
    what each key lost there) or, with ``on_bad_frames="error"``, ends the summary early with
    ``end.reason == "error"``. Per stream: originals, retry copies and dead letters (``dead_letter_keys``:
    the declared dead-letter keys; default, keys named like one), and the time range by value. ``path`` may
    be an fsspec URL (``storage_options``, ``block_size`` as for :class:`StreamReader`): the header is read,
    then the file is streamed in blocks, never held whole.
    """
    dead = frozenset(dead_letter_keys) if dead_letter_keys is not None else None
    # opened first, so that a missing or unreadable file is reported before numpy is imported
    opened = StreamReader(
        path,
        errors="stop",
        on_bad_frames=check_on_bad_frames(on_bad_frames),
        storage_options=storage_options,
        block_size=block_size,
    )
    import numpy as np

    from nbkit.transport.plausibility import Records

    with opened as reader:
        # stats per stream: [count, first_seq, last_seq, min_ts, max_ts, copies]
        stats: dict[tuple[str, int], list[int]] = {}
        records = Records()
        count = 0
        eos_offset = None
        recovered: list[int] = []
        for msg in reader:
            count += 1
            if reader.damaged:
                recovered.extend([0] * (len(reader.damaged) - len(recovered)))
                recovered[-1] += 1
            key = (msg.stream_key, msg.shard_id)
            copy = 1 if msg.payload[:2] == b"rs" and envelope.retry_count(envelope.decode(msg.payload)[0]) else 0
            st = stats.get(key)
            ts = msg.timestamp_ms
            if st is None:
                stats[key] = [1, msg.seq, msg.seq, ts, ts, copy]
            else:
                st[0] += 1
                st[2] = msg.seq
                st[5] += copy
            if msg.is_eos:
                eos_offset = msg.offset
            records.add(msg.stream_key, msg.shard_id, msg.seq, ts, msg.offset)
        end = reader.end
        size = reader.size()
        header = reader.header
        damaged = tuple(reader.damaged)
        recovered.extend([0] * (len(damaged) - len(recovered)))
    assert end is not None  # a replay read always records why it ended
    odd, lost = records.report(damaged, created_at_ms=header.created_at_ms)
    code, shard, _, stamp, offset = records.arrays()
    odd_rows = np.isin(offset, [x.offset for x in odd])
    good = ~odd_rows
    codes = records.keys
    streams = []
    for (k, s), st in stats.items():
        rows = (code == codes[k]) & (shard.astype(np.uint64) == np.uint64(s))
        trusted = stamp[rows & good]
        first_ts, last_ts = (int(trusted.min()), int(trusted.max())) if len(trusted) else (st[3], st[4])
        is_dead = is_dead_letter_key(k) if dead is None else k in dead
        n, copies = st[0], st[5]
        streams.append(
            StreamSummary(
                k,
                s,
                n,
                st[1],
                st[2],
                first_ts,
                last_ts,
                originals=0 if is_dead else n - copies,
                retry_copies=0 if is_dead else copies,
                dead_letter=is_dead,
                suspect=int(np.count_nonzero(rows & odd_rows)),
            )
        )
    interval = header.beacon_interval
    return FileSummary(
        path=os.fspath(path),
        header=header,
        size=size,
        streams=tuple(streams),
        message_count=count,
        beacon_count=max(0, (size - 1) // interval),
        has_eos=eos_offset is not None,
        eos_offset=eos_offset,
        end=end,
        damaged=damaged,
        recovered_after=tuple(recovered),
        lost=tuple(tuple(cost) for cost in lost),
        suspects=tuple(odd),
    )


def stream_keys(
    path: str | os.PathLike, *, storage_options: dict[str, Any] | None = None, block_size: int | None = None
) -> set[str]:
    """Every stream key the file holds a message of, read with the frame scanner (no row is kept; damaged
    regions are stepped over). What an error about a key the file does not hold names instead.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (a path or a URL).
    storage_options, block_size
        For a URL, as for :class:`~nbkit.StreamReader`.

    Returns
    -------
    set of str
        The keys, the internal key included when the file has an end-of-stream mark.

    Examples
    --------
    >>> from nbkit import StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"{}")
    >>> stream_keys("orders.ss")
    {'orders'}
    """
    seen: set[str] = set()

    def note(key: str) -> bool:
        seen.add(key)
        return False

    opened = StreamReader(
        path, on_bad_frames="skip", stop_at_eos=False, storage_options=storage_options, block_size=block_size
    )
    with opened as reader:
        reader.read_column_buffers(accept=note)
    return seen
