"""A one-pass summary of a ``.ss`` stream file: header, streams, beacons, EOS and how the data ends.

Built on :class:`~nbkit.transport.file_reader.StreamReader` only (replay). By default it reads with
``on_bad_frames="skip"``: a damaged file gets a summary of every intact part, with each damaged region
and the number of messages recovered after it; ``on_bad_frames="error"`` stops at the first damage
(``end.reason == "error"``) instead of raising.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nbkit.transport.damage import DamagedRegion, check_on_bad_frames
from nbkit.transport.file_reader import ReadEnd, StreamReader
from nbkit.wire.ssformat import FileHeader
from nbkit.wire.timestamps import iso_utc

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
    """Messages of one (stream key, shard): how many, and the first/last seq and timestamp in file order."""

    stream_key: str
    shard_id: int
    count: int
    first_seq: int
    last_seq: int
    first_timestamp_ms: int
    last_timestamp_ms: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (timestamps also as ISO UTC text)."""
        return {
            **dataclasses.asdict(self),
            "first_timestamp": iso_utc(self.first_timestamp_ms),
            "last_timestamp": iso_utc(self.last_timestamp_ms),
        }


@dataclass(frozen=True, slots=True)
class FileSummary:
    """What ``nbkit info`` shows: header, size, streams (in order of first appearance), beacons, end.

    ``beacon_count`` counts the boundaries ``k*I`` (k >= 1) that lie inside the file (``k*I < size``),
    i.e. the beacons a complete writer put there; ``end`` is the reader's verdict on how the data ends.
    ``damaged`` lists the regions a salvage read skipped and ``recovered_after[i]`` how many messages
    were read after ``damaged[i]`` (up to the next region or the end).
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
        for region, count in zip(self.damaged, self.recovered_after, strict=True):
            rows.append(
                ("damaged", f"{region.describe()}; {count} message{'s' if count != 1 else ''} recovered after it")
            )
        width = max(len(k) for k, _ in rows)
        lines = [f"{k:<{width}}  {v}" for k, v in rows]
        if self.streams:
            table = [("stream", "shard", "messages", "seq", "first timestamp", "last timestamp")]
            for st in d["streams"]:
                first, last = st["first_seq"], st["last_seq"]
                seq = str(first) if first == last else f"{first}..{last}"
                table.append(
                    (
                        st["stream_key"],
                        str(st["shard_id"]),
                        str(st["count"]),
                        seq,
                        st["first_timestamp"],
                        st["last_timestamp"],
                    )
                )
            lines += ["", *text_table(table)]
        return "\n".join(lines) + "\n"

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
            "damaged": [
                {**region.to_dict(), "recovered_after": n}
                for region, n in zip(self.damaged, self.recovered_after, strict=True)
            ],
        }


def summarize(path: str | os.PathLike, *, on_bad_frames: str = "skip") -> FileSummary:
    """Read the whole file once and summarize it; header problems raise (an NbkitError).

    Damage later in the file is skipped (``on_bad_frames="skip"``, each region listed in ``damaged``) or,
    with ``on_bad_frames="error"``, ends the summary early with ``end.reason == "error"``.
    """
    with StreamReader(path, errors="stop", on_bad_frames=check_on_bad_frames(on_bad_frames)) as reader:
        # stats per stream: [count, first_seq, last_seq, first_ts, last_ts]
        stats: dict[tuple[str, int], list[int]] = {}
        count = 0
        eos_offset = None
        recovered: list[int] = []
        for msg in reader:
            count += 1
            if reader.damaged:
                recovered.extend([0] * (len(reader.damaged) - len(recovered)))
                recovered[-1] += 1
            key = (msg.stream_key, msg.shard_id)
            st = stats.get(key)
            if st is None:
                stats[key] = [1, msg.seq, msg.seq, msg.timestamp_ms, msg.timestamp_ms]
            else:
                st[0] += 1
                st[2] = msg.seq
                st[4] = msg.timestamp_ms
            if msg.is_eos:
                eos_offset = msg.offset
        end = reader.end
        size = reader.size()
        header = reader.header
        damaged = tuple(reader.damaged)
        recovered.extend([0] * (len(damaged) - len(recovered)))
    assert end is not None  # a replay read always records why it ended
    interval = header.beacon_interval
    streams = tuple(StreamSummary(k, s, *st) for (k, s), st in stats.items())
    return FileSummary(
        path=os.fspath(path),
        header=header,
        size=size,
        streams=streams,
        message_count=count,
        beacon_count=max(0, (size - 1) // interval),
        has_eos=eos_offset is not None,
        eos_offset=eos_offset,
        end=end,
        damaged=damaged,
        recovered_after=tuple(recovered),
    )


def stream_keys(path: str | os.PathLike) -> set[str]:
    """Every stream key the file holds a message of, read with the frame scanner (no row is kept; damaged
    regions are stepped over). What an error about a key the file does not hold names instead.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file.

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

    with StreamReader(path, on_bad_frames="skip", stop_at_eos=False) as reader:
        reader.read_column_buffers(accept=note)
    return seen
