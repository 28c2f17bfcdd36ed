"""Stream files and captured pipe output as pandas DataFrames, one row per message.

Columns (file and pipe alike; ``transport`` tells them apart):

===========  =======================  ===========================================================
column       dtype                    meaning
===========  =======================  ===========================================================
stream_key   category                 the message's stream key
shard_id     Int64                    its shard (0 on pipes unless the line names one)
seq          Int64                    its sequence number (signed: ``diff()`` and ``seq - retry_count`` work)
timestamp    datetime64[ms, UTC]      its timestamp (NaT for a pipe line without one)
size         Int64                    payload size in bytes, after the envelope is removed
payload      str, object or binary    ``"json"``: the JSON text (str, Arrow-backed); ``"auto"``/``"text"``/
                                      ``"objects"``: object (str, bytes or parsed JSON); ``"bytes"``:
                                      large_binary[pyarrow] (each value reads as bytes)
retry_count  Int64                    ``x-ruststream-retry-count`` from the envelope, 0 when absent
attempt      Int64                    retry_count + 1 (first delivery = attempt 1)
headers      object                   the envelope's headers, a read-only dict ({} when none)
offset       Int64                    byte offset of the frame (file) or line number (pipe)
transport    category                 ``file`` or ``pipe``
===========  =======================  ===========================================================

``payload="json"`` and ``payload="objects"`` add a ``payload.<field>`` column per top-level field of
JSON-object payloads (int64, float64, bool, str, or object when mixed). ``"json"`` keeps ``payload`` as
the JSON text (Arrow-backed str when every payload is UTF-8) and builds the field columns without a
Python object per row (pyarrow.json over one buffer of the payloads; the row-by-row path where that could
differ: nulls, nesting, integers beyond int64). ``"objects"`` also parses every payload into a Python
object (dict, list, ...) in ``payload``, exactly as ``json.loads`` would: on request only, since building
one object per row costs more than the whole parse (``"columns"``, the old name of ``"json"``, raises).
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import pandas as pd

from nbkit.errors import FormatError, Utf8Error
from nbkit.tabular import (
    FrameBuilder,
    PayloadMode,
)
from nbkit.transport.damage import DamagedRegion, DamageWarning, SuspectRecordWarning
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.plausibility import KeyLoss, describe_losses, losses, suspects
from nbkit.transport.positions import FilePosition
from nbkit.wire.stdio_line import LineDecoder, parse_line

if TYPE_CHECKING:
    from nbkit.tabular.reader import Output

__all__ = ["DTYPE_BACKENDS", "DtypeBackend", "concat_frames", "read_arrow", "read_pipe", "read_stream"]

_PROGRESS_MIN_BYTES = 64 << 20


def read_stream(
    path: str | os.PathLike | IO[bytes] | Sequence[str | os.PathLike | IO[bytes]],
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
    dtype_backend: DtypeBackend | None = None,
    nrows: int | None = None,
    columns: Sequence[str] | None = None,
    chunksize: int | None = None,
    include_path_column: bool | str = False,
) -> Any:
    """Load a ``.ss`` stream file into a DataFrame, one row per message.

    ``start`` is a FilePosition or a time (messages strictly after it); ``end`` a time (messages
    before it). EOS and the internal priming key are left out unless ``include_internal``. How the read
    ended is in ``frame.attrs["read_end"]`` (a :class:`~nbkit.ReadEnd`: ``.reason``, ``.offset``, and a
    sentence for people as ``str()``); a partial frame at the tail warns.

    Parameters
    ----------
    path : str, os.PathLike, binary file object, or list of these
        The stream file: a local path, or an fsspec URL (``s3://bucket/orders.ss``, ``gs://``, ``abfs://``,
        ``https://``, ...), read by range requests, never downloaded whole. A glob (``"logs/*.ss"``, also in
        a URL) or a list reads several files in order, their rows concatenated (a fresh index,
        ``stream_key`` categories the union). An open binary file object (``open(path, "rb")``,
        ``io.BytesIO``) is read from where it stands and left open; a non-seekable one (a pipe, a socket)
        is read front to back, in a few blocks of memory, and refuses ``start``/``end``.
    keys : str or iterable of str, optional
        Keep only these stream keys (the others are skipped cheaply).
    payload : {"auto", "bytes", "text", "json", "objects"}
        ``"auto"``: text where UTF-8, else bytes; ``"json"``: a JSON object's fields as columns
        ``payload.<field>``, ``payload`` left as the JSON text (no Python object per row: the fast way to
        load JSON records); ``"objects"``: the same field columns, and ``payload`` parsed into a Python
        object per row (dict, list, ...; slower, on request); ``"bytes"``: the payloads
        as stored, in an Arrow binary column (dtype ``large_binary[pyarrow]``, object when pyarrow is not
        installed) over one buffer, no Python object per row; each value reads as ``bytes``.
    start : FilePosition, datetime, Timestamp, int or str, optional
        Where to start. A time (epoch ms, ``datetime``, ``pandas.Timestamp``, ISO text such as
        ``"2024-01-01T10:00"``, or ``FilePosition.timestamp``): messages strictly later than it; a
        ``FilePosition.sequence(n)``: each kept key's messages from its sequence number ``n`` on. Every one
        of these seeks by the beacons, for one key, several or all (``nbkit.transport.windows``): it reads a
        few small beacons, then only the file from the last beacon before the window. ``FilePosition.beacon(n)``
        resynchronises at beacon ``n``; ``beginning()`` reads everything. A time without a timezone is UTC
        (everywhere nbkit takes a time).
    end : datetime, Timestamp, int or str, optional
        Keep the messages earlier than this time; the read stops at the first beacon past which every kept
        key is later than it (``frame.attrs["read_end"].reason == "window"``), so the rest of the file is
        not read.
    progress : bool, optional
        Show a progress bar (None: only for files over 64 MiB).
    include_internal : bool
        Keep SeaStreamer's internal messages (the EOS mark, the priming message).
    on_bad_frames : {"error", "warn", "skip"}
        What a damaged frame does (as pandas' ``read_csv(on_bad_lines=...)``): ``"error"`` raises;
        ``"skip"`` resumes at the next intact beacon and ``"warn"`` also warns once per damaged region.
        Either way ``frame.attrs["damaged"]`` lists the regions skipped (dicts: ``start``, ``end``,
        ``problem``, ``skipped`` bytes, and ``lost``: per stream key the sequence numbers lost there, how
        many and between which times; empty for an intact file). Records whose header fields look damaged
        (a timestamp, sequence number or shard one flipped bit from fitting its stream; the checksum
        covers only the payload) are listed in ``frame.attrs["suspect"]`` and warned once
        (:class:`~nbkit.transport.damage.SuspectRecordWarning`), whatever ``on_bad_frames`` says.
    storage_options : dict, optional
        For a URL: passed to its filesystem, as in ``pandas.read_csv`` (credentials, ``endpoint_url``,
        ``anon``, ...); without them the filesystem's own environment and config apply.
    block_size : int, optional
        For a URL: bytes per range request (default 8 MiB).
    dtype_backend : {"numpy_nullable", "pyarrow"}, optional
        As in pandas' readers: ``"pyarrow"`` gives every column an ``ArrowDtype`` (the table of
        :func:`read_arrow`, as pandas columns; not with ``payload="objects"``); ``"numpy_nullable"`` or None
        the dtypes below.
    nrows : int, optional
        Only the first ``nrows`` rows (after ``keys``, ``start`` and ``end``, across all files); the read
        stops there (no ``attrs["read_end"]`` then: the file did not end).
    columns : list of str, optional
        Keep these columns, in this order: message columns and payload fields (``"payload.order_id"``;
        ``payload="auto"`` becomes ``"json"`` for them). An unknown column, or a field no message has,
        raises :class:`~nbkit.errors.InvalidArgumentError` naming it.
    chunksize : int, optional
        Return a :class:`~nbkit.tabular.reader.FrameReader` instead of a frame: iterating it yields frames of
        ``chunksize`` rows, read a slice of the file at a time (memory holds a few chunks); a context
        manager; ``read()`` gives the rest as one frame.
    include_path_column : bool or str
        Add a categorical column naming each row's file (``True``: ``"path"``; a str: that name, such as
        ``"source"``), as ``dask.dataframe.read_csv`` does.

    Returns
    -------
    pandas.DataFrame or FrameReader
        One row per message (a :class:`~nbkit.tabular.reader.FrameReader` of such frames with
        ``chunksize``), with the columns ``stream_key`` (category), ``shard_id``, ``seq`` (Int64),
        ``timestamp`` (datetime64[ms, UTC]), ``size`` (payload bytes), ``payload``, ``retry_count``,
        ``attempt`` (retry_count + 1), ``headers`` (a read-only dict), ``offset`` (the frame's byte offset) and
        ``transport`` (``"file"``), then any ``payload.<field>`` columns (int64, float64, bool, str or object;
        ``Int64``/``boolean`` for an integer/boolean field some payloads lack).

    See Also
    --------
    nbkit.read_arrow : The same read as a pyarrow Table, for Arrow tools (DuckDB, Polars).
    nbkit.read_pipe : A pipe capture (stdio lines) as a frame of the same shape.
    nbkit.StreamReader : Message by message, or following a file as it grows.
    nbkit.dask.read_stream : A file larger than memory, as a Dask DataFrame.
    nbkit.lineage : One history per message, from the frame this returns.

    Examples
    --------
    >>> from nbkit import StreamWriter, read_stream
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1, "item": "book"}')
    ...     _ = writer.write("audit", b"checked")
    ...     _ = writer.write("orders", b'{"id": 2, "item": "lamp"}')
    >>> df = read_stream("orders.ss", keys="orders", payload="json")
    >>> df[["seq", "attempt", "payload.item"]]
       seq  attempt payload.item
    0    1        1         book
    1    2        1         lamp

    The first rows, some columns, in chunks (the reading guide has every option):

    >>> read_stream("orders.ss", columns=["seq", "payload.item"], nrows=1)
       seq payload.item
    0    1         book
    >>> with read_stream("orders.ss", chunksize=2) as chunks:
    ...     print([len(chunk) for chunk in chunks])
    [2, 1]
    """
    options = dict(locals())  # the parameters as given (first, before any other name is bound)
    del options["dtype_backend"]
    if dtype_backend not in (None, *DTYPE_BACKENDS):
        raise ValueError(f"dtype_backend must be one of {', '.join(DTYPE_BACKENDS)}, not {dtype_backend!r}")
    return _read("pandas-arrow" if dtype_backend == "pyarrow" else "pandas", options)


def read_arrow(
    path: str | os.PathLike | IO[bytes] | Sequence[str | os.PathLike | IO[bytes]],
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
) -> Any:
    """Load a ``.ss`` stream file into a ``pyarrow.Table``, one row per message: for polars, DuckDB, Arrow.

    The columns and options of :func:`read_stream`, built from the same arrays the read makes (the
    frame scanner's column buffers, the payload buffer as one Arrow text or binary array), with no pandas
    DataFrame between; the Arrow types are listed in :mod:`nbkit.tabular.arrow`. How the read ended and
    the damaged regions are in ``table.schema.metadata`` (``b"nbkit.read_end"``, ``b"nbkit.damaged"``, JSON).

    Parameters
    ----------
    path, keys, start, end, progress, include_internal, on_bad_frames, storage_options, block_size
        As for :func:`read_stream`.
    nrows, columns, chunksize, include_path_column
        As for :func:`read_stream` (with ``chunksize``, the chunks are tables).
    payload : {"auto", "bytes", "text", "json"}
        As for :func:`read_stream` (``"objects"``, a Python object per row, has no Arrow type). ``"auto"``
        gives a text column when every payload is UTF-8, else a binary one.

    Returns
    -------
    pyarrow.Table or FrameReader
        The table (a :class:`~nbkit.tabular.reader.FrameReader` of tables with ``chunksize``).

    See Also
    --------
    nbkit.read_stream : The same read as a pandas DataFrame.
    nbkit.to_parquet : A stream file written to Parquet.
    nbkit.StreamReader : Message by message, or following a file as it grows.

    Examples
    --------
    >>> import nbkit
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     for n, item in enumerate(["book", "lamp", "book"]):
    ...         _ = writer.write("orders", b'{"id": %d, "item": "%s"}' % (n, item.encode()))
    >>> table = nbkit.read_arrow("orders.ss", payload="json")
    >>> table.num_rows, table.schema.field("payload.item").type
    (3, DataType(large_string))

    polars takes the table as it is, and DuckDB queries it by its Python name:

    >>> import polars as pl
    >>> pl.from_arrow(table).group_by("payload.item").len().sort("payload.item").rows()
    [('book', 2), ('lamp', 1)]
    >>> import duckdb
    >>> duckdb.sql('SELECT "payload.item", count(*) AS n FROM "table" GROUP BY 1 ORDER BY 1').fetchall()
    [('book', 2), ('lamp', 1)]
    """
    return _read("arrow", dict(locals()))


def _read(output: Output, options: dict[str, Any]) -> Any:
    """The read behind :func:`read_stream` and :func:`read_arrow` (``options``: their parameters but
    ``dtype_backend``): ``FrameReader(...).read()``, or the reader itself with ``chunksize``."""
    from nbkit.tabular.reader import FrameReader

    reader = FrameReader(options.pop("path"), output=output, **options)
    if options["chunksize"] is not None:
        return reader
    reader._depth = 2  # warnings name the caller of read_stream or read_arrow
    return reader.read()


#: ``read_stream``'s ``dtype_backend=`` values (pandas' own names).
DtypeBackend = Literal["numpy_nullable", "pyarrow"]
DTYPE_BACKENDS: tuple[DtypeBackend, ...] = get_args(DtypeBackend)


def _report_damage(
    frame: pd.DataFrame,
    damaged: list[DamagedRegion],
    created_at_ms: int,
    *,
    path: str,
    warn: bool,
    stacklevel: int = 4,
) -> None:
    """Say what damage cost: ``attrs["suspect"]`` (records whose header fields look damaged, warned once)
    and ``attrs["damaged"]`` (each region with what each key lost there, warned per region with ``warn``).
    ``stacklevel``: the warnings' (the frame of the user's call)."""
    keys = [str(k) for k in frame["stream_key"].cat.categories]
    codes = frame["stream_key"].cat.codes.to_numpy()
    seq = frame["seq"].to_numpy(dtype=np.uint64 if frame["seq"].dtype == "UInt64" else np.int64)
    shard = frame["shard_id"].to_numpy(dtype=np.uint64 if frame["shard_id"].dtype == "UInt64" else np.int64)
    ts = frame["timestamp"].to_numpy(dtype="datetime64[ms]").astype(np.int64)
    offset = frame["offset"].to_numpy(dtype=np.int64)
    odd = suspects(keys, codes, shard, seq, ts, offset, created_at_ms=created_at_ms)
    frame.attrs["suspect"] = [s.to_dict() for s in odd]
    if odd:
        shown = "; ".join(s.describe() for s in odd[:5]) + ("; ..." if len(odd) > 5 else "")
        warnings.warn(
            f"{path}: {len(odd)} record{'s' if len(odd) != 1 else ''} look{'s' if len(odd) == 1 else ''} damaged "
            f"(header fields the checksum does not cover; frame.attrs['suspect'] lists them): {shown}",
            SuspectRecordWarning,
            stacklevel=stacklevel,
        )
    lost: list[list[KeyLoss]] = []
    if damaged:
        keep = ~np.isin(offset, [s.offset for s in odd])
        lost = losses(damaged, keys, codes[keep], seq[keep], ts[keep], offset[keep])
    frame.attrs["damaged"] = [
        {**region.to_dict(), "lost": [loss.to_dict() for loss in cost]}
        for region, cost in zip(damaged, lost, strict=True)
    ]
    if warn:
        for region, cost in zip(damaged, lost, strict=True):
            warnings.warn(f"{path}: damaged {describe_losses(region, cost)}", DamageWarning, stacklevel=stacklevel)


def _error_text(ended: Any) -> str | None:
    return None if ended.error is None else str(ended.error)


def _progress_bar(reader: StreamReader, progress: bool | None, stop: int | None = None) -> Any:
    if progress is False:
        return None
    size = reader.size() if stop is None else stop
    if progress is None and size - reader.pos < _PROGRESS_MIN_BYTES:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=size - reader.pos, unit="B", unit_scale=True, desc=os.path.basename(reader.path))


def read_pipe(
    path_or_file: str | os.PathLike[str] | IO[str] | None = None,
    *,
    lines: Iterable[str] | None = None,
    keys: Iterable[str] | str | None = None,
    payload: PayloadMode = "auto",
) -> pd.DataFrame:
    """Load captured stdio lines (a stage's saved stdout) into the same frame shape as read_stream.

    Pass what to read in one of two ways, never both: a path or an open text file
    (``read_pipe("stdout.txt")``, ``read_pipe(io.StringIO(text))``), or the lines themselves
    (``read_pipe(lines=captured)``). A str is always a path, never content: text with a line break
    raises ValueError saying what to pass instead.

    Fields a line leaves out are filled as the upstream consumer does (key ``broadcast``, shard 0,
    counted seq); a missing timestamp stays NaT. ``offset`` holds the line number.

    Parameters
    ----------
    path_or_file : str, os.PathLike or text file object, optional
        A file of captured lines (UTF-8, one line per ``\\n``), or an object with ``read()`` returning
        str, such as an open text file or ``io.StringIO``.
    lines : iterable of str, optional
        The lines themselves (a trailing ``\\n`` on each is removed), for example the ``stdout`` list
        a :class:`~nbkit.StdioBroker` wrote to.
    keys : str or iterable of str, optional
        Keep only these stream keys.
    payload : {"auto", "bytes", "text", "json", "objects"}
        How to present payloads, as in :func:`read_stream`.

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`read_stream`, with ``transport`` ``"pipe"``.

    Raises
    ------
    TypeError
        Both or neither of ``path_or_file`` and ``lines``, bytes instead of text, or one str as ``lines``.
    ValueError
        A str with a line break as ``path_or_file`` (content, not a path).
    LineParseError
        A line whose ``[...]`` header breaks the grammar (its line number, and the file when there is one).

    See Also
    --------
    nbkit.read_stream : A stream file as a frame of the same shape.
    nbkit.concat_frames : A file's and a pipe's frames as one.

    Examples
    --------
    >>> from nbkit import read_pipe
    >>> lines = ["[2024-01-01T00:00:00 | jobs | 0] hello", "[2024-01-01T00:00:01 | jobs | 1] world"]
    >>> read_pipe(lines=lines)[["stream_key", "seq", "payload", "offset"]]
      stream_key  seq payload  offset
    0       jobs    0   hello       1
    1       jobs    1   world       2

    A saved capture is read by its path; text in memory through ``io.StringIO``:

    >>> _ = open("stdout.txt", "w").write("\\n".join(lines) + "\\n")
    >>> read_pipe("stdout.txt")["payload"].tolist()
    ['hello', 'world']
    >>> import io
    >>> read_pipe(io.StringIO("[2024-01-01T00:00:02 | jobs | 2] again\\n"))["seq"].tolist()
    [2]
    """
    wanted = {keys} if isinstance(keys, str) else (set(keys) if keys is not None else None)
    cols = FrameBuilder(payload)
    decoder = LineDecoder()
    name = os.fspath(path_or_file) if isinstance(path_or_file, (str, os.PathLike)) else None
    source, what = _lines(path_or_file, lines)
    for lineno, line in enumerate(source, start=1):
        if not isinstance(line, str):
            hint = "; open the file in text mode (encoding='utf-8')" if isinstance(line, bytes) else ""
            raise TypeError(f"read_pipe reads text lines; {what} gave {type(line).__name__}{hint}")
        if line.endswith("\n"):
            line = line[:-1]
        if not line:
            continue
        try:
            parsed = parse_line(line, lineno=lineno)
        except FormatError as exc:
            raise (exc if name is None else exc.located(path=name)) from None
        resolved = decoder.resolve(parsed, now_ms=0)
        if wanted is not None and resolved.stream_key not in wanted:
            continue
        cols.add(
            resolved.stream_key,
            resolved.shard_id,
            resolved.seq,
            parsed.timestamp_ms,
            resolved.payload.encode("utf-8"),
            lineno,
        )
    return cols.frame("pipe", release=True)


def _lines(
    path_or_file: str | os.PathLike[str] | IO[str] | None, lines: Iterable[str] | None
) -> tuple[Iterable[object], str]:
    """``read_pipe``'s input as an iterable of lines, and what to call it in an error: a path's lines, a
    text file (iterated), or the given lines; a wrong or ambiguous input raises, naming what to pass instead."""
    if path_or_file is not None and lines is not None:
        raise TypeError("read_pipe takes a path or file, or lines=..., not both")
    if lines is not None:
        if isinstance(lines, (str, bytes, bytearray)):
            raise TypeError(
                f"read_pipe(lines=...) takes an iterable of lines, not one {type(lines).__name__}: "
                "pass lines=text.splitlines() (or read_pipe(io.StringIO(text)))"
            )
        return lines, "lines"
    if path_or_file is None:
        raise TypeError(
            "read_pipe needs what to read: read_pipe('stdout.txt'), read_pipe(file) or read_pipe(lines=[...])"
        )
    if isinstance(path_or_file, str) and ("\n" in path_or_file or "\r" in path_or_file):
        raise ValueError(
            "read_pipe reads a str as a path, and this one holds line breaks, so it is content: pass "
            "read_pipe(lines=text.splitlines()) or read_pipe(io.StringIO(text))"
        )
    if isinstance(path_or_file, (bytes, bytearray)):
        raise TypeError("read_pipe takes text: a path as str, a text file, or lines=[...] of str; decode bytes first")
    if isinstance(path_or_file, (str, os.PathLike)):
        return _read_capture(os.fspath(path_or_file)), "the file"
    if not callable(getattr(path_or_file, "read", None)):
        raise TypeError(
            f"read_pipe takes a path or a text file, not {type(path_or_file).__name__}; "
            "pass lines in memory as read_pipe(lines=...)"
        )
    return path_or_file, "the file"


def _read_capture(path: str) -> list[str]:
    """A saved capture's lines: the file decoded as UTF-8 and split at ``\\n`` only, as on the pipe (a
    ``\\r`` stays in its line). A missing file's error says how to pass lines that are in memory; bytes
    that are not UTF-8 raise Utf8Error naming the line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as exc:
        exc.add_note("read_pipe reads a str as a path; for lines in memory pass read_pipe(lines=[...])")
        raise
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise Utf8Error(
            f"not UTF-8 text (byte {exc.start - line_start} of the line), so not a stdio line: a pipe line is "
            "UTF-8 and binary payloads travel in rs1: envelopes",
            path=path,
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from None


def concat_frames(*frames: pd.DataFrame) -> pd.DataFrame:
    """Stack frames from read_stream/read_pipe (e.g. a file and a pipe) keeping the categorical dtypes.

    Parameters
    ----------
    *frames : pandas.DataFrame
        Frames made by :func:`read_stream` or :func:`read_pipe`.

    Returns
    -------
    pandas.DataFrame
        Their rows in order, with a fresh index and ``stream_key``/``transport`` still categorical.

    Examples
    --------
    >>> from nbkit import StreamWriter, concat_frames, read_pipe, read_stream
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"paid")
    >>> both = concat_frames(read_stream("orders.ss"), read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hello"]))
    >>> both[["transport", "stream_key", "payload"]]
      transport stream_key payload
    0      file     orders    paid
    1      pipe       jobs   hello
    """
    if not frames:
        raise ValueError("concat_frames needs at least one frame")
    keys = sorted({k for f in frames for k in f["stream_key"].astype(str)})
    parts = []
    for f in frames:
        f = f.copy()
        f["stream_key"] = pd.Categorical(f["stream_key"].astype(str), categories=keys)
        parts.append(f)
    return pd.concat(parts, ignore_index=True)
