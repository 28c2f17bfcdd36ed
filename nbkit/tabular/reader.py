"""One reader of stream files as frames: the read loop every tabular reader shares, and the reader object.

:func:`read_rows` is **the** read loop: a :class:`~nbkit.transport.file_reader.StreamReader`'s column
buffers, read to a stop offset (in slices when asked), filtered by a
:class:`~nbkit.tabular.selection.Selection`. ``read_stream``, ``read_arrow``, :class:`FrameReader`'s chunks and
the Dask partitions (:func:`nbkit.scale.partitions.read_range`, which the Parquet export reads through) all
read through it.

:class:`FrameReader` has the shape of pandas' ``JsonReader`` (``read_json(..., chunksize=)``): ``read()``
returns the frame (or what is left of it), iterating yields frames of ``chunksize`` rows, and it is a
context manager (``close()``). It takes what pandas and polars readers take:

- **inputs**: a path (``str``, ``pathlib.Path``), an fsspec URL, a glob (``"logs/*.ss"``,
  ``"s3://bucket/2024-*.ss"``), a list of any of these, or an open binary file object (seekable or not:
  :mod:`nbkit.transport.file_object_source`). Several files are read in order, one after another, and their
  frames concatenated; ``include_path_column=`` names each row's file (Dask's option);
- ``nrows=``: the first rows only (the read stops there, the rest of the file is not read);
- ``columns=``: the message columns and payload fields (``"payload.order_id"``) to keep;
- ``chunksize=``: an iterator of frames of that many rows; memory holds a few chunks at most.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import warnings
from array import array
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from nbkit.errors import InvalidArgumentError, MissingFileError
from nbkit.tabular.builder import FRAME_COLUMNS, FrameBuilder, PayloadMode, payload_separator
from nbkit.tabular.selection import Selection, selection
from nbkit.transport.damage import DamagedRegion
from nbkit.transport.file_object_source import FileObjectSource, is_file_object
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import ReadEnd
from nbkit.transport.positions import FilePosition
from nbkit.transport.source import is_url
from nbkit.wire.scan import ColumnBuffers, FrameColumns
from nbkit.wire.ssformat import HEADER_SIZE

__all__ = ["FrameReader", "Input", "Rows", "expand_inputs", "path_column_name", "read_rows"]

#: What :func:`read_rows` yields: column buffers, or column lists where a time window dropped rows.
Rows = ColumnBuffers | FrameColumns
Output = Literal["pandas", "pandas-arrow", "arrow"]

_SLICE_BYTES = 24 << 20  # file bytes per slice of payload="json" (its fields parse while the next is read)
_MIN_STEP = 64 << 10  # the smallest slice a row-bounded read asks for
_GUESS_ROW_BYTES = 256  # bytes per row assumed before the first slice tells
_FIRST_STEP = 1 << 20  # the largest first slice of a row-bounded read (the rows' size is not known yet)


def read_rows(
    reader: StreamReader,
    sel: Selection,
    *,
    stop: int | None = None,
    step: int | Callable[[], int | None] | None = None,
    progress: Callable[[int], object] | None = None,
) -> Iterator[Rows]:
    """The messages from ``reader``'s position to ``stop`` (None: the end), as column pieces, in file order.

    The one read loop of the tabular readers: each piece is what
    :meth:`~nbkit.transport.file_reader.StreamReader.read_column_buffers` returns for one slice of the file,
    the selection's keys and window applied (:meth:`Selection.rows`).

    Parameters
    ----------
    reader : StreamReader
        An open reader, at the first frame to read (a window or byte range already sought).
    sel : Selection
        The keys, window and payload mode.
    stop : int, optional
        Read the frames that start before this offset (a window's stop, a Dask range's end).
    step : int or callable, optional
        File bytes per slice (a callable is asked before each slice); None: one slice to ``stop``.
    progress : callable, optional
        ``progress(n)``: n more bytes were read.

    Yields
    ------
    ColumnBuffers or FrameColumns
        What :meth:`FrameBuilder.extend <nbkit.tabular.builder.FrameBuilder.extend>` takes.

    Examples
    --------
    >>> import nbkit
    >>> from nbkit.tabular import Selection
    >>> with nbkit.StreamWriter("rows.ss") as writer:
    ...     for n in range(3):
    ...         _ = writer.write("orders", b"{}")
    >>> with nbkit.StreamReader("rows.ss") as reader:
    ...     print(sum(len(piece) for piece in read_rows(reader, Selection())))
    3
    """
    accept = sel.key_filter()
    separator = payload_separator(sel.payload)
    while True:
        size = step() if callable(step) else step
        until = None if size is None else reader.pos + size
        if stop is not None:
            until = stop if until is None else min(until, stop)
        got = reader.read_column_buffers(accept=accept, progress=progress, separator=separator, until=until)
        rows = sel.rows(got)
        del got
        yield rows
        if until is None or reader.end is not None or reader.pos < until or until == stop:
            return


# -- inputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    """One file of a read: what to open (a path, URL or file source) and what to call it."""

    name: str
    target: Any


def expand_inputs(source: Any, storage_options: dict[str, Any] | None = None) -> list[Input]:
    """The files a reader's first argument names, in order: a path, URL, glob, file object, or a list of them.

    Parameters
    ----------
    source : str, os.PathLike, file object, or list of these
        What to read. A ``str`` with ``*``, ``?`` or ``[`` that is not itself an existing path is a glob
        (local, or fsspec for a URL), its matches sorted.
    storage_options : dict, optional
        For URLs: their filesystem's options (a URL glob lists the bucket with them).

    Returns
    -------
    list of Input
        ``name`` (the path, URL or the object's name) and ``target`` (what a reader opens).

    Raises
    ------
    MissingFileError
        A glob that matches nothing (naming the pattern).
    TypeError
        Anything else (naming what was passed and what is taken).

    Examples
    --------
    >>> [i.name for i in expand_inputs(["a.ss", "b.ss"])]
    ['a.ss', 'b.ss']
    """
    if isinstance(source, (list, tuple)):
        if not source:
            raise InvalidArgumentError("an empty list of files: pass at least one path, URL or file object")
        return [one for item in source for one in expand_inputs(item, storage_options)]
    if is_file_object(source):
        src = FileObjectSource(source)
        return [Input(src.name, src)]
    if isinstance(source, (bytes, bytearray, memoryview)):
        raise TypeError(
            "read_stream reads a path, URL, glob or file object, not the bytes themselves: pass io.BytesIO(data)"
        )
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"read_stream reads a path, URL, glob, list of files or binary file object, not {type(source).__name__}"
        )
    text = os.fspath(source)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if not glob.has_magic(text) or (not is_url(text) and os.path.exists(text)):
        return [Input(text, source)]
    matches = _glob_url(text, storage_options) if is_url(text) else sorted(glob.glob(text))
    if not matches:
        raise MissingFileError(f"{text}: no file matches this pattern; check the path and its wildcards")
    return [Input(m, m) for m in matches]


def _glob_url(pattern: str, storage_options: dict[str, Any] | None) -> list[str]:
    """A URL glob's matches, as URLs, sorted (listed by its fsspec filesystem)."""
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(pattern, **(storage_options or {}))
    return sorted(fs.unstrip_protocol(p) for p in fs.glob(path))


# -- the reader --------------------------------------------------------------------------------------


@dataclass
class _Segment:
    """The rows of one file inside one result (the whole read, or one chunk), and what the read met there."""

    index: int
    name: str
    builder: FrameBuilder
    damaged: list[DamagedRegion] = field(default_factory=list)
    created_at_ms: int = 0
    ended: ReadEnd | None = None


class FrameReader:
    """A read of one or more stream files as frames: ``read()`` the whole, or iterate chunks of ``chunksize`` rows.

    What ``nbkit.read_stream(..., chunksize=n)`` returns (pandas' ``read_json(..., chunksize=n)`` has the same
    shape); ``read_stream`` and ``read_arrow`` without ``chunksize`` are ``FrameReader(...).read()``. Use it
    as a context manager, or call :meth:`close`, to release the file a partial read holds open.

    Parameters
    ----------
    source : str, os.PathLike, binary file object, or list of these
        A path, an fsspec URL, a glob (``"logs/*.ss"``), a list of any of these (read in order, the frames
        concatenated), or an open binary file object (``open(path, "rb")``, ``io.BytesIO``; a non-seekable
        one is read front to back: ``start``/``end`` are refused there).
    keys, payload, start, end, progress, include_internal, on_bad_frames, storage_options, block_size
        As for :func:`nbkit.read_stream`.
    nrows : int, optional
        Read only the first ``nrows`` rows (across all files); the read stops there.
    columns : sequence of str, optional
        Keep these columns, in this order: message columns (``"seq"``, ``"timestamp"``, ...) and payload
        fields (``"payload.order_id"``; these need ``payload="json"`` or ``"objects"``, and ``"auto"`` becomes
        ``"json"`` for them). A field no row has raises (a chunk without it gets a column of missing values).
    chunksize : int, optional
        Iterating yields frames of this many rows (the last may be shorter), reading the file a slice at a
        time, so memory holds a few chunks at most.
    include_path_column : bool or str
        Add a categorical column naming each row's file: ``True`` names it ``"path"``, a str names it so
        (``"source"``). As in ``dask.dataframe.read_csv``.
    output : {"pandas", "pandas-arrow", "arrow"}
        What each result is: a DataFrame, a DataFrame of ``ArrowDtype`` columns, or a ``pyarrow.Table``.

    Raises
    ------
    ValueError
        A bad ``nrows``, ``chunksize`` or ``columns`` (the message names the value and what is taken).

    Examples
    --------
    >>> import nbkit
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     for n in range(5):
    ...         _ = writer.write("orders", b'{"id": %d}' % n)
    >>> with nbkit.read_stream("orders.ss", payload="json", chunksize=2) as chunks:
    ...     for chunk in chunks:
    ...         print(chunk["payload.id"].tolist())
    [0, 1]
    [2, 3]
    [4]
    """

    def __init__(
        self,
        source: Any,
        *,
        keys: Iterable[str] | str | None = None,
        payload: PayloadMode = "auto",
        start: FilePosition | dt.datetime | int | str | None = None,
        end: dt.datetime | int | str | None = None,
        progress: bool | None = None,
        include_internal: bool = False,
        on_bad_frames: str = "error",
        storage_options: dict[str, Any] | None = None,
        block_size: int | None = None,
        nrows: int | None = None,
        columns: Sequence[str] | None = None,
        chunksize: int | None = None,
        include_path_column: bool | str = False,
        output: Output = "pandas",
    ) -> None:
        self.nrows = _count(nrows, "nrows", allow_zero=True)
        self.chunksize = _count(chunksize, "chunksize")
        self.path_column = path_column_name(include_path_column)
        if self.path_column is not None and self.path_column in FRAME_COLUMNS:
            raise InvalidArgumentError(
                f"include_path_column={include_path_column!r} would replace the message column "
                f"{self.path_column!r}; name the path column otherwise (include_path_column='source')"
            )
        self.columns = _check_columns(columns, self.path_column)
        fields = [c for c in self.columns or () if c.startswith("payload.")]
        if fields and payload == "auto":
            payload = "json"
        elif fields and payload not in ("json", "objects"):
            raise InvalidArgumentError(
                f"columns names payload fields ({', '.join(fields)}), which payload='json' or 'objects' makes; "
                f"payload={payload!r} has none"
            )
        elif self.columns is not None and not fields and "payload" not in self.columns and payload != "objects":
            payload = "bytes"  # the payload column is not kept: build its cheapest form
        if output == "arrow" and payload == "objects":
            raise InvalidArgumentError('Arrow output takes payload="json" (text and field columns), not "objects"')
        self.output: Output = output
        self.sel, self.position, _ = selection(
            keys=keys, payload=payload, start=start, end=end, include_internal=include_internal
        )
        self.on_bad_frames = on_bad_frames
        self.progress = progress
        self.storage_options = storage_options
        self.block_size = block_size
        self.inputs = expand_inputs(source, storage_options)
        for item in self.inputs:
            if isinstance(item.target, FileObjectSource) and not item.target.seekable:
                if start is not None:
                    item.target.require_seekable("start=")
                if end is not None:
                    item.target.require_seekable("end=")
        self.rows_read = 0
        self._seen: set[str] = set()
        self._whole = True
        self._reader: StreamReader | None = None
        self._pieces = self._generate()
        self._closed = False

    # -- the public face --------------------------------------------------------------------------------
    def read(self) -> Any:
        """Everything not yet read, as one result (a frame, or a table with ``output="arrow"``).

        Returns
        -------
        pandas.DataFrame or pyarrow.Table
            The rows of every file in order (after any chunks already taken).
        """
        self._outer = 1 + self._depth
        self._via_read = True
        try:
            if self.chunksize is None:
                segments = self._take_rows(None)
                return self._assemble(segments or [self._empty()], strict=True)
            parts = list(self)
            if not parts:
                return self._assemble([self._empty()], strict=True)
            return parts[0] if len(parts) == 1 else self._concat(parts)
        finally:
            self.close()

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        """The next chunk of ``chunksize`` rows (the whole read, once, when there is no ``chunksize``)."""
        if self._closed:
            raise StopIteration
        if self.chunksize is None:
            return self.read()
        self._outer = 2 + self._depth if self._via_read else 1
        segments = self._take_rows(self.chunksize)
        if not segments:
            self.close()
            raise StopIteration
        return self._assemble(segments, strict=False)

    def close(self) -> None:
        """Release the file being read; the reader yields nothing more after.

        Returns
        -------
        None
        """
        self._closed = True
        self._pieces.close()
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------------------
    _leftover: tuple[int, Rows | None] | None = None
    # warnings name the user's call: ``_depth`` nbkit frames above the public method (read_stream: 1), and
    # ``_outer`` frames from that method to the user (set by read() and __next__)
    _depth = 0
    _outer = 1
    _via_read = False
    _damaged_seen = 0
    _ended: ReadEnd | None = None

    def _take_rows(self, limit: int | None) -> list[_Segment]:
        """The next ``limit`` rows (None: all that are left) into builders, one segment per file met."""
        segments: list[_Segment] = []
        need = limit
        while need is None or need > 0:
            item = self._leftover if self._leftover is not None else next(self._pieces, None)
            self._leftover = None
            if item is None:
                break
            index, rows = item
            if rows is None:  # the file ended: how, and the damage met last, go to its segment
                if segments and segments[-1].index == index:
                    self._note(segments[-1])
                continue
            n = _length(rows)
            if need is not None and n > need:
                self._leftover = (index, _take(rows, need, n))
                rows, n = _take(rows, 0, need), need
            if not segments or segments[-1].index != index:
                segments.append(self._segment(index))
            segments[-1].builder.extend(rows)
            self._note(segments[-1])
            if need is not None:
                need -= n
        return segments

    def _empty(self) -> _Segment:
        return _Segment(len(self.inputs) - 1, self.inputs[-1].name, FrameBuilder(self.sel.payload))

    def _segment(self, index: int) -> _Segment:
        reader = self._reader
        return _Segment(
            index,
            self.inputs[index].name,
            FrameBuilder(self.sel.payload),
            created_at_ms=0 if reader is None else reader.header.created_at_ms,
        )

    def _note(self, segment: _Segment) -> None:
        """Move what the reader met since the last piece (damaged regions, how it ended) to ``segment``."""
        reader = self._reader
        if reader is not None:
            segment.damaged.extend(reader.damaged[self._damaged_seen :])
            self._damaged_seen = len(reader.damaged)
        if self._ended is not None:
            segment.ended, self._ended = self._ended, None

    def _generate(self) -> Generator[tuple[int, Rows | None], None, None]:
        """(input index, rows) for every piece of every file, the last cut at ``nrows``; ``(index, None)``
        after each file, when how it ended is in ``_ended``."""
        for index, item in enumerate(self.inputs):
            if self.nrows is not None and self.rows_read >= self.nrows:
                break
            self._damaged_seen = 0
            for rows in self._read_file(item):
                n = _length(rows)
                if self.nrows is not None and self.rows_read + n > self.nrows:
                    rows = _take(rows, 0, self.nrows - self.rows_read)
                    n = _length(rows)
                self.rows_read += n
                yield index, rows
                if self.nrows is not None and self.rows_read >= self.nrows:
                    self._whole = False
                    break
            yield index, None
        if self.sel.keys is not None and self._whole and len(self.inputs) > 1:
            self.sel.check_keys(self._seen, path=", ".join(i.name for i in self.inputs), whole=True)

    def _read_file(self, item: Input) -> Iterator[Rows]:
        """One file's pieces (the read loop), then its end: the key check and a warning for a cut tail."""
        sel, salvage = self.sel, ("skip" if self.on_bad_frames == "warn" else self.on_bad_frames)
        file_object = isinstance(item.target, FileObjectSource)
        reader = StreamReader(
            item.target,
            start=self.position,
            on_bad_frames=salvage,
            storage_options=None if file_object else self.storage_options,
            block_size=self.block_size,
        )
        self._reader = reader
        try:
            window = sel.open_window(reader)
            first = reader.pos
            progress = self.progress
            if file_object and not item.target.seekable:
                progress = False  # its size is unknown until its end
            bar = _progress_bar(reader, progress, window.stop)
            step: Callable[[], int | None] | None = None
            if self.nrows is not None or self.chunksize is not None:
                step = lambda: self._step(reader.pos - first)  # noqa: E731
            elif sel.payload == "json":
                step = lambda: _SLICE_BYTES  # noqa: E731
            yield from read_rows(reader, sel, stop=window.stop, step=step, progress=None if bar is None else bar.update)
            if bar is not None:
                bar.close()
            ended = reader.end
            if ended is None and window.stop is not None:
                ended = ReadEnd("window", reader.pos)
            self._ended = ended
            self._seen |= reader.seen_keys
            whole = self.position is None and window.start == HEADER_SIZE and window.stop is None
            if len(self.inputs) == 1:
                cut = self.nrows is not None and self.rows_read >= self.nrows and reader.end is None
                sel.check_keys(
                    reader.seen_keys,
                    path=item.name,
                    whole=(whole and not cut) or file_object,
                    reading=reader.open_options,
                )
            elif not whole:
                self._whole = False
            if ended is not None and ended.reason == "truncated":
                warnings.warn(f"{item.name}: {ended.describe()}", stacklevel=4 + self._outer)
        finally:
            reader.close()
            if self._reader is reader:
                self._reader = None

    def _step(self, bytes_read: int) -> int:
        """File bytes for the next slice of a row-bounded read: enough for the rows wanted, by the bytes per
        row read so far (at least 64 KiB, at most 24 MiB; the first slice at most 1 MiB, as the rows' size
        is a guess until then)."""
        want = self.chunksize or 0
        if self.nrows is not None:
            left = self.nrows - self.rows_read
            want = min(want, left) if want else left
        if not (self.rows_read and bytes_read):  # no row read yet: a first slice small enough to learn from
            return int(min(_FIRST_STEP, max(_MIN_STEP, want * _GUESS_ROW_BYTES * 1.1)))
        return int(min(_SLICE_BYTES, max(_MIN_STEP, want * bytes_read / self.rows_read * 1.1)))

    # -- results ---------------------------------------------------------------------------------------
    def _assemble(self, segments: list[_Segment], *, strict: bool) -> Any:
        """One result from the segments' builders: each built and checked for damage, then concatenated."""
        warn = self.on_bad_frames == "warn"
        many = len(self.inputs) > 1
        if self.output == "pandas":
            frames = []
            for seg in segments:
                frame = seg.builder.frame("file", release=True)
                _report_damage(
                    frame, seg.damaged, seg.created_at_ms, path=seg.name, warn=warn, stacklevel=3 + self._outer
                )
                if seg.ended is not None:
                    frame.attrs["read_end"] = seg.ended
                if many:
                    for item in (*frame.attrs["damaged"], *frame.attrs["suspect"]):
                        item["path"] = seg.name
                if self.path_column is not None:
                    categories = [i.name for i in self.inputs]
                    frame[self.path_column] = pd.Categorical.from_codes(
                        np.full(len(frame), categories.index(seg.name), dtype=np.int32), categories=categories
                    )
                frames.append(frame)
            out = frames[0] if len(frames) == 1 else _concat_frames(frames, many)
            if self.path_column is not None and len(frames) > 1:
                out = out[[c for c in out.columns if c != self.path_column] + [self.path_column]]
            return self._select(out, strict)
        tables = []
        for seg in segments:
            table = seg.builder.table("file", release=True)
            report = table.select(["stream_key", "shard_id", "seq", "timestamp", "offset"]).to_pandas()
            _report_damage(report, seg.damaged, seg.created_at_ms, path=seg.name, warn=warn, stacklevel=3 + self._outer)
            meta = {
                b"nbkit.damaged": json.dumps(report.attrs["damaged"], default=str).encode(),
                b"nbkit.suspect": json.dumps(report.attrs["suspect"], default=str).encode(),
            }
            if seg.ended is not None:
                meta[b"nbkit.read_end"] = json.dumps(seg.ended._asdict() | {"error": _error_text(seg.ended)}).encode()
            if self.path_column is not None:
                pa = arrow_module()
                categories = [i.name for i in self.inputs]
                codes = pa.array(np.full(table.num_rows, categories.index(seg.name), dtype=np.int32))
                table = table.append_column(
                    self.path_column, pa.DictionaryArray.from_arrays(codes, pa.array(categories, pa.string()))
                )
            tables.append((table.replace_schema_metadata(meta), report.attrs))
        if len(tables) == 1:
            table, attrs = tables[0]
        else:
            pa = arrow_module()
            table = pa.concat_tables([t for t, _ in tables], promote_options="permissive")
            attrs = {
                key: [d | {"path": seg.name} for (_, a), seg in zip(tables, segments, strict=True) for d in a[key]]
                for key in ("damaged", "suspect")
            }
            meta = {
                b"nbkit.damaged": json.dumps(attrs["damaged"], default=str).encode(),
                b"nbkit.suspect": json.dumps(attrs["suspect"], default=str).encode(),
            }
            last = tables[-1][0].schema.metadata or {}
            if b"nbkit.read_end" in last:
                meta[b"nbkit.read_end"] = last[b"nbkit.read_end"]
            table = table.replace_schema_metadata(meta)
            if self.path_column is not None:
                table = table.select([c for c in table.column_names if c != self.path_column] + [self.path_column])
        table = self._select_table(table, strict)
        if self.output == "arrow":
            return table
        frame = table.to_pandas(types_mapper=pd.ArrowDtype)
        frame.attrs.update(attrs)
        if segments[-1].ended is not None:
            frame.attrs["read_end"] = segments[-1].ended
        return frame

    def _concat(self, parts: list[Any]) -> Any:
        """Chunks already built, as one result (``read()`` after or without iterating)."""
        if self.output == "arrow":
            return arrow_module().concat_tables(parts, promote_options="permissive")
        out = pd.concat(parts, ignore_index=True) if self.output == "pandas-arrow" else _concat_frames(parts, True)
        return out

    def _select(self, frame: pd.DataFrame, strict: bool) -> pd.DataFrame:
        """``columns=`` applied to a frame: the named columns in order (a field no row has: see the class)."""
        if self.columns is None:
            return frame
        missing = [c for c in self.columns if c not in frame.columns]
        if missing and strict:
            raise _missing_fields(missing, frame.columns)
        for c in missing:
            frame[c] = pd.Series(pd.NA, index=frame.index, dtype=object)
        out = frame[list(self.columns)]
        out.attrs = dict(frame.attrs)
        return out

    def _select_table(self, table: Any, strict: bool) -> Any:
        if self.columns is None:
            return table
        missing = [c for c in self.columns if c not in table.column_names]
        if missing and strict:
            raise _missing_fields(missing, table.column_names)
        pa = arrow_module()
        for c in missing:
            table = table.append_column(c, pa.nulls(table.num_rows))
        return table.select(list(self.columns))


# -- helpers -----------------------------------------------------------------------------------------


def _count(value: int | None, what: str, *, allow_zero: bool = False) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (0 if allow_zero else 1):
        least = "0 or more" if allow_zero else "1 or more"
        raise InvalidArgumentError(f"{what} is a number of rows (an int, {least}), not {value!r}")
    return int(value)


def _check_columns(columns: Sequence[str] | None, path_column: str | None) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str):
        raise InvalidArgumentError(f"columns takes a list of column names, not one str: pass columns=[{columns!r}]")
    names = list(columns)
    odd = [c for c in names if not isinstance(c, str)]
    if odd:
        raise InvalidArgumentError(f"columns are column names (str), not {odd!r}")
    known = (*FRAME_COLUMNS, path_column) if path_column else FRAME_COLUMNS
    unknown = [c for c in names if c not in known and not (c.startswith("payload.") and len(c) > 8)]
    if unknown:
        raise InvalidArgumentError(
            f"columns names no such column: {', '.join(map(repr, unknown))}; the message columns are "
            f"{', '.join(known)}, and payload fields are named 'payload.<field>'"
        )
    dup = sorted({c for c in names if names.count(c) > 1})
    if dup:
        raise InvalidArgumentError(f"columns names {', '.join(map(repr, dup))} more than once")
    return names


def _missing_fields(missing: list[str], have: Iterable[str]) -> InvalidArgumentError:
    fields = [c for c in have if str(c).startswith("payload.")]
    return InvalidArgumentError(
        f"columns names payload field(s) no message has: {', '.join(map(repr, missing))}; "
        f"the fields read: {', '.join(fields) if fields else 'none'}"
    )


def path_column_name(value: bool | str) -> str | None:
    """The column ``include_path_column=`` asks for: ``True`` -> ``"path"``, a str -> itself, False -> None.

    Parameters
    ----------
    value : bool or str
        What was passed.

    Returns
    -------
    str or None

    Raises
    ------
    InvalidArgumentError
        Anything else.

    Examples
    --------
    >>> path_column_name(True), path_column_name("source"), path_column_name(False)
    ('path', 'source', None)
    """
    if value is True:
        return "path"
    if value is False or value is None:
        return None
    if isinstance(value, str) and value:
        return value
    raise InvalidArgumentError(f"include_path_column is True, False or a column name, not {value!r}")


def _length(rows: Rows) -> int:
    return len(rows) if isinstance(rows, ColumnBuffers) else len(rows.offset)


def _take(rows: Rows, lo: int, hi: int) -> Rows:
    """Rows ``lo:hi`` of a piece, as a new piece (column buffers stay buffers: slices, no object per row)."""
    if not isinstance(rows, ColumnBuffers):
        return FrameColumns._make(column[lo:hi] for column in rows)
    out = ColumnBuffers(rows.separator)
    out.keys = list(rows.keys)
    for name in ("key_code", "shard_id", "seq", "timestamp_ms", "offset"):
        setattr(out, name, getattr(rows, name)[lo:hi])
    sep = len(rows.separator)
    ends = np.frombuffer(rows.data_end, dtype=np.int64)
    begin = 0 if lo == 0 else int(ends[lo - 1]) + sep
    finish = begin if hi <= lo else int(ends[hi - 1]) + sep
    out.data = bytearray(memoryview(rows.data)[begin:finish])
    out.data_end = array("q", (ends[lo:hi] - begin).tobytes())
    return out


def _concat_frames(frames: list[pd.DataFrame], keep_attrs: bool) -> pd.DataFrame:
    """Frames of several files (or chunks) as one: categorical columns get the union of categories (sorted
    for ``stream_key``, as one read gives), a fresh index; ``attrs`` merged (damage lists per path)."""
    frames = [f for f in frames if len(f.columns)]
    for name in frames[0].columns:
        if isinstance(frames[0][name].dtype, pd.CategoricalDtype):
            union: list[Any] = []
            seen: set[Any] = set()
            for f in frames:
                for c in f[name].cat.categories:
                    if c not in seen:
                        seen.add(c)
                        union.append(c)
            if name == "stream_key":
                union.sort()
            frames = [f.assign(**{name: f[name].cat.set_categories(union)}) for f in frames]
    out = pd.concat(frames, ignore_index=True)
    if keep_attrs:
        out.attrs = {}
        for key in ("damaged", "suspect"):
            if any(key in f.attrs for f in frames):
                out.attrs[key] = [item for f in frames for item in f.attrs.get(key, [])]
        last = frames[-1].attrs.get("read_end")
        if last is not None:
            out.attrs["read_end"] = last
    return out


# frames.py holds the damage report and the progress bar; it imports this module inside its readers
from nbkit.tabular.arrow import arrow_module  # noqa: E402
from nbkit.tabular.frames import _error_text, _progress_bar, _report_damage  # noqa: E402
