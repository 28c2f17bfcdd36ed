"""Stream files and captured pipe output as pandas DataFrames, one row per message.

Columns (file and pipe alike; ``transport`` tells them apart):

===========  =======================  ===========================================================
column       dtype                    meaning
===========  =======================  ===========================================================
stream_key   category                 the message's stream key
shard_id     UInt64                   its shard (0 on pipes unless the line names one)
seq          UInt64                   its sequence number
timestamp    datetime64[ms, UTC]      its timestamp (NaT for a pipe line without one)
size         Int64                    payload size in bytes, after the envelope is removed
payload      object                   bytes, str or parsed JSON (see ``payload=``)
retry_count  Int64                    ``x-ruststream-retry-count`` from the envelope, 0 when absent
attempt      Int64                    retry_count + 1 (first delivery = attempt 1)
headers      object                   dict of the envelope's headers ({} when none)
offset       Int64                    byte offset of the frame (file) or line number (pipe)
transport    category                 ``file`` or ``pipe``
===========  =======================  ===========================================================
"""

from __future__ import annotations

import datetime as dt
import json
import os
import warnings
from collections.abc import Iterable
from typing import Any

import pandas as pd

from nbkit.errors import NbkitError
from nbkit.runtime.delivery import retry_count
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.positions import FilePosition, to_epoch_ms
from nbkit.wire import envelope
from nbkit.wire.keys import INTERNAL_KEYS
from nbkit.wire.stdio_line import LineDecoder, parse_line

FRAME_COLUMNS = (
    "stream_key",
    "shard_id",
    "seq",
    "timestamp",
    "size",
    "payload",
    "retry_count",
    "attempt",
    "headers",
    "offset",
    "transport",
)
PAYLOAD_MODES = ("auto", "bytes", "text", "json")
_PROGRESS_MIN_BYTES = 64 << 20


class _Columns:
    """Column lists filled once per message, turned into a typed DataFrame at the end."""

    def __init__(self, payload_mode: str) -> None:
        if payload_mode not in PAYLOAD_MODES:
            raise ValueError(f"payload must be one of {', '.join(PAYLOAD_MODES)}, not {payload_mode!r}")
        self.mode = payload_mode
        self.keys: list[str] = []
        self.shards: list[int] = []
        self.seqs: list[int] = []
        self.times: list[int | None] = []
        self.sizes: list[int] = []
        self.payloads: list[Any] = []
        self.counts: list[int] = []
        self.headers: list[dict] = []
        self.offsets: list[int] = []

    def add(self, key: str, shard: int, seq: int, ts_ms: int | None, data: bytes, offset: int) -> None:
        if data[:2] == b"rs":
            headers, body = envelope.decode(data)
        else:
            headers, body = {}, data
        self.keys.append(key)
        self.shards.append(shard)
        self.seqs.append(seq)
        self.times.append(ts_ms)
        self.sizes.append(len(body))
        self.payloads.append(self._payload(body))
        self.counts.append(retry_count(headers) if headers else 0)
        self.headers.append(headers)
        self.offsets.append(offset)

    def _payload(self, body: bytes) -> Any:
        mode = self.mode
        if mode == "bytes":
            return body
        if mode == "text":
            return body.decode("utf-8", errors="replace")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return body
        if mode == "json":
            try:
                return json.loads(text)
            except ValueError:
                return text
        return text

    def frame(self, transport: str) -> pd.DataFrame:
        n = len(self.keys)
        counts = pd.array(self.counts, dtype="Int64")
        frame = pd.DataFrame(
            {
                "stream_key": pd.Series(self.keys, dtype="category"),
                "shard_id": pd.array(self.shards, dtype="UInt64"),
                "seq": pd.array(self.seqs, dtype="UInt64"),
                "timestamp": pd.to_datetime(pd.array(self.times, dtype="Int64"), unit="ms", utc=True).astype(
                    "datetime64[ms, UTC]"
                ),
                "size": pd.array(self.sizes, dtype="Int64"),
                "payload": pd.Series(self.payloads, dtype=object),
                "retry_count": counts,
                "attempt": counts + 1,
                "headers": pd.Series(self.headers, dtype=object),
                "offset": pd.array(self.offsets, dtype="Int64"),
                "transport": pd.Categorical([transport] * n, categories=["file", "pipe"]),
            },
            columns=list(FRAME_COLUMNS),
        )
        if self.mode == "json":
            frame = _expand_json(frame)
        return frame


def _expand_json(frame: pd.DataFrame) -> pd.DataFrame:
    """Add a ``payload.<field>`` column for each top-level field of JSON-object payloads."""
    objects = [p if isinstance(p, dict) else None for p in frame["payload"]]
    fields: dict[str, None] = {}
    for obj in objects:
        if obj:
            for name in obj:
                fields.setdefault(name, None)
    extra = {
        f"payload.{name}": pd.Series(
            [o.get(name) if o else None for o in objects], dtype=object
        ).infer_objects()
        for name in fields
    }
    if not extra:
        return frame
    return pd.concat([frame, pd.DataFrame(extra, index=frame.index)], axis=1)


def _as_ms(value: Any, what: str) -> int:
    if isinstance(value, str):
        parsed = pd.Timestamp(value)
        if parsed.tzinfo is None:
            parsed = parsed.tz_localize("UTC")
        return int(parsed.value // 1_000_000)
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    try:
        return to_epoch_ms(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} takes epoch ms, an aware datetime or an ISO string: {exc}") from None


def read_stream(
    path: str | os.PathLike,
    *,
    keys: Iterable[str] | str | None = None,
    payload: str = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    progress: bool | None = None,
    include_internal: bool = False,
) -> pd.DataFrame:
    """Load a ``.ss`` stream file into a DataFrame, one row per message (schema in the module doc).

    ``keys`` keeps only those stream keys. ``payload``: ``"auto"`` (text where UTF-8, else bytes),
    ``"bytes"``, ``"text"`` or ``"json"`` (parsed, object fields also as ``payload.<field>``).
    ``start`` is a FilePosition or a time (messages strictly after it); ``end`` a time (messages
    before it). EOS and the internal priming key are left out unless ``include_internal``.
    ``progress=None`` shows a bar for files over 64 MiB. How the read ended is in
    ``frame.attrs["read_end"]``; a partial frame at the tail warns.

    >>> df = read_stream("../shared/testdata/ss/sample-1.ss")      # doctest: +SKIP
    >>> df.groupby("stream_key", observed=True).size()              # doctest: +SKIP
    """
    wanted = {keys} if isinstance(keys, str) else (set(keys) if keys is not None else None)
    cols = _Columns(payload)
    end_ms = None if end is None else _as_ms(end, "end")
    position = None
    after_ms = None
    if isinstance(start, FilePosition):
        position = start
    elif start is not None:
        after_ms = _as_ms(start, "start")
    seek_key = None
    if position is not None and position.kind in ("sequence", "timestamp"):
        if not wanted or len(wanted) != 1:
            raise ValueError(f"start={position!r} needs exactly one stream key: pass keys='name'")
        seek_key = next(iter(wanted))
    with StreamReader(path, start=position, key=seek_key) as reader:
        bar = _progress_bar(reader, progress)
        last = reader.pos
        for msg in reader:
            if bar is not None:
                bar.update(msg.end - last)
                last = msg.end
            key = msg.stream_key
            if wanted is not None and key not in wanted:
                continue
            if not include_internal and key in INTERNAL_KEYS:
                continue
            ts = msg.timestamp_ms
            if after_ms is not None and ts <= after_ms:
                continue
            if end_ms is not None and ts >= end_ms:
                continue
            cols.add(key, msg.shard_id, msg.seq, ts, msg.payload, msg.offset)
        if bar is not None:
            bar.close()
        ended = reader.end
    frame = cols.frame("file")
    if ended is not None:
        frame.attrs["read_end"] = ended.describe()
        if ended.reason == "truncated":
            warnings.warn(f"{os.fspath(path)}: {ended.describe()}", stacklevel=2)
    return frame


def _progress_bar(reader: StreamReader, progress: bool | None):
    if progress is False:
        return None
    size = reader.size()
    if progress is None and size < _PROGRESS_MIN_BYTES:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=size - reader.pos, unit="B", unit_scale=True, desc=os.path.basename(reader.path))


def read_pipe(
    source: str | os.PathLike | Iterable[str],
    *,
    keys: Iterable[str] | str | None = None,
    payload: str = "auto",
) -> pd.DataFrame:
    """Load captured stdio lines (a stage's saved stdout) into the same frame shape as read_stream.

    ``source`` is a path (``pathlib.Path``, or a str naming an existing file), a string of lines,
    or an iterable of lines. Fields a line leaves out are filled as the upstream consumer does
    (key ``broadcast``, shard 0, counted seq); a missing timestamp stays NaT. ``offset`` holds the
    line number.

    >>> read_pipe(["[2024-01-01T00:00:00 | jobs | 0] hello"]).loc[0, "payload"]
    'hello'
    """
    wanted = {keys} if isinstance(keys, str) else (set(keys) if keys is not None else None)
    cols = _Columns(payload)
    decoder = LineDecoder()
    for lineno, line in enumerate(_lines(source), start=1):
        if line.endswith("\n"):
            line = line[:-1]
        if not line:
            continue
        parsed = parse_line(line, lineno=lineno)
        resolved = decoder.resolve(parsed, now_ms=0)
        if wanted is not None and resolved.stream_key not in wanted:
            continue
        ts = parsed.timestamp_ms
        cols.add(
            resolved.stream_key,
            resolved.shard_id,
            resolved.seq,
            ts,
            resolved.payload.encode("utf-8"),
            lineno,
        )
    return cols.frame("pipe")


def _lines(source: Any) -> Iterable[str]:
    if isinstance(source, os.PathLike) or (
        isinstance(source, str) and "\n" not in source and os.path.isfile(source)
    ):
        try:
            with open(source, encoding="utf-8") as f:
                return f.read().split("\n")
        except UnicodeDecodeError as exc:
            raise NbkitError(
                f"{os.fspath(source)}: not UTF-8 text (byte {exc.start}); not stdio lines"
            ) from None
    if isinstance(source, str):
        return source.split("\n")
    if isinstance(source, bytes):
        raise TypeError("read_pipe takes text lines; decode bytes first")
    return source


def concat_frames(*frames: pd.DataFrame) -> pd.DataFrame:
    """Stack frames from read_stream/read_pipe (e.g. a file and a pipe) keeping the categorical dtypes."""
    if not frames:
        raise ValueError("concat_frames needs at least one frame")
    keys = sorted({k for f in frames for k in f["stream_key"].astype(str)})
    parts = []
    for f in frames:
        f = f.copy()
        f["stream_key"] = pd.Categorical(f["stream_key"].astype(str), categories=keys)
        parts.append(f)
    return pd.concat(parts, ignore_index=True)
