"""A stream file as a lazy polars scan: ``nbkit.polars.scan_stream`` (polars' IO-plugin interface).

polars hands the scan the columns a query uses, its filter and its row limit
(``polars.io.plugins.register_io_source``). The filter's parts that the beacons can answer become the options of
one :func:`nbkit.read_arrow` (so there is still one read loop): ``stream_key`` equal to or among literal keys
(``keys=``), ``timestamp`` above or below a literal time (``start=`` / ``end=``, a window found from the
beacons) and ``seq`` at or above a literal number (``start=FilePosition.sequence(n)``: each stream's own
numbers). The whole filter is then applied to the rows read, so a part that is not pushed down (or is pushed
down as a wider window) still gives exactly the rows the eager read filtered the same way gives. Columns the
query does not use are not turned into polars columns, and the payload is read as bytes (no text check) when
it is not asked for.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal

from nbkit.errors import InvalidArgumentError, MissingExtraError, UnknownKeyError, install_hint
from nbkit.tabular.frames import read_arrow
from nbkit.tabular.reader import FrameReader
from nbkit.tabular.selection import Selection
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.positions import FilePosition

__all__ = ["Pushdown", "polars_module", "pushdown", "scan_stream"]

#: The payload column's type: text (invalid UTF-8 replaced, as ``read_arrow(payload="text")``) or bytes.
ScanPayload = Literal["text", "bytes"]
_PAYLOADS: tuple[str, ...] = ("text", "bytes")
_ON_BAD_FRAMES = ("error", "skip", "warn")
#: The rows of a chunk read when polars asks for no batch size, and the fewest a row limit reads at once.
_CHUNK_ROWS = 100_000
_MIN_CHUNK_ROWS = 16_384


def polars_module() -> Any:
    """``polars``, or a :class:`~nbkit.MissingExtraError` naming the install that adds it."""
    try:
        import polars
    except ImportError:
        raise MissingExtraError(
            "nbkit.polars.scan_stream needs polars, which nbkit's optional extra 'arrow' installs: "
            f"{install_hint('arrow')}"
        ) from None
    return polars


@dataclass(frozen=True, slots=True)
class Pushdown:
    """What a read can be narrowed to before polars applies a filter: keys, a time window, a first sequence number.

    Each bound keeps every row the filter keeps (it may keep more). ``keys`` is None for every key; an empty
    set for none (the filter wants no key at all).

    Examples
    --------
    >>> Pushdown(keys=frozenset({"orders"})).read_options()
    {'keys': ['orders']}
    """

    keys: frozenset[str] | None = None
    after_ms: int | None = None
    end_ms: int | None = None
    start_seq: int | None = None

    def read_options(self) -> dict[str, Any]:
        """The ``keys`` / ``start`` / ``end`` options of :func:`nbkit.read_arrow` (a time start before a sequence one:
        ``start`` takes one of them).

        Returns
        -------
        dict
        """
        options: dict[str, Any] = {}
        if self.keys is not None:
            options["keys"] = sorted(self.keys)
        if self.after_ms is not None:
            options["start"] = FilePosition.timestamp(self.after_ms)
        elif self.start_seq is not None:
            options["start"] = FilePosition.sequence(self.start_seq)
        if self.end_ms is not None:
            options["end"] = self.end_ms
        return options

    def narrowed(self, other: Pushdown) -> Pushdown:
        """Both sets of bounds at once (an ``&`` of two filters)."""
        keys = self.keys if other.keys is None else other.keys if self.keys is None else self.keys & other.keys
        return Pushdown(
            keys,
            _pick(max, self.after_ms, other.after_ms),
            _pick(min, self.end_ms, other.end_ms),
            _pick(max, self.start_seq, other.start_seq),
        )


def _pick(fn: Any, a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else fn(a, b)


# comparisons as "column OP literal", and the same with the sides swapped
_FLIP = {"Eq": "Eq", "Gt": "Lt", "GtEq": "LtEq", "Lt": "Gt", "LtEq": "GtEq"}
_NS_PER_MS = 1_000_000


def _literal(node: Any) -> Any:
    """The value of an expression tree with no column in it (a literal, maybe built by functions), else None."""
    pl = polars_module()
    text = json.dumps(node)
    if '"Column"' in text or '"Columns"' in text:
        return None
    try:
        series = pl.select(pl.Expr.deserialize(io.StringIO(text), format="json")).to_series()
    except Exception:  # noqa: BLE001 - anything polars cannot evaluate is left to polars' own filter
        return None
    if isinstance(series.dtype, pl.Datetime):
        if series.dtype.time_zone is None or len(series) != 1 or series.null_count():
            return None  # a naive time is not compared with the UTC column here
        return ("ns", int(series.dt.epoch("ns").item()))
    if isinstance(series.dtype, pl.List) and len(series) == 1:
        return series.item().to_list()
    return series.item() if len(series) == 1 else None


def _compare(column: str, op: str, value: Any) -> Pushdown:
    """The bounds of ``column OP value`` (none when it is not one the beacons or the key filter can answer)."""
    if column == "stream_key" and op == "Eq" and isinstance(value, str):
        return Pushdown(keys=frozenset({value}))
    if column == "seq" and isinstance(value, int) and not isinstance(value, bool):
        first = {"Eq": value, "GtEq": value, "Gt": value + 1}.get(op)
        return Pushdown(start_seq=first) if first is not None and first > 0 else Pushdown()
    if column == "timestamp" and isinstance(value, tuple) and value[0] == "ns":
        ns = value[1]
        floor, ceil = ns // _NS_PER_MS, -(-ns // _NS_PER_MS)  # the timestamps are whole ms
        after = {"Gt": floor, "GtEq": ceil - 1, "Eq": ceil - 1}.get(op)
        end = {"Lt": ceil, "LtEq": floor + 1, "Eq": floor + 1}.get(op)
        return Pushdown(after_ms=after, end_ms=end)
    return Pushdown()


def _walk(node: Any) -> Pushdown:
    if not isinstance(node, dict):
        return Pushdown()
    binary = node.get("BinaryExpr")
    if binary is not None:
        op, left, right = binary.get("op"), binary.get("left"), binary.get("right")
        if op in ("And", "LogicalAnd"):
            return _walk(left).narrowed(_walk(right))
        if op not in _FLIP:
            return Pushdown()
        if isinstance(right, dict) and "Column" in right and isinstance(right["Column"], str):
            left, right, op = right, left, _FLIP[op]
        if isinstance(left, dict) and isinstance(left.get("Column"), str):
            value = _literal(right)
            return Pushdown() if value is None else _compare(left["Column"], op, value)
        return Pushdown()
    function = node.get("Function")
    if isinstance(function, dict):
        inputs, kind = function.get("input") or [], json.dumps(function.get("function"))
        if not inputs or not isinstance(inputs[0], dict) or not isinstance(inputs[0].get("Column"), str):
            return Pushdown()
        column = inputs[0]["Column"]
        if '"IsIn"' in kind and len(inputs) == 2 and column == "stream_key":
            values = _literal(inputs[1])
            if isinstance(values, list) and all(isinstance(v, str) for v in values):
                return Pushdown(keys=frozenset(values))
        if '"IsBetween"' in kind and len(inputs) == 3:
            closed = function["function"]["Boolean"]["IsBetween"].get("closed", "Both")
            low_op = "GtEq" if closed in ("Both", "Left") else "Gt"
            high_op = "LtEq" if closed in ("Both", "Right") else "Lt"
            low, high = _literal(inputs[1]), _literal(inputs[2])
            found = Pushdown()
            if low is not None:
                found = found.narrowed(_compare(column, low_op, low))
            if high is not None:
                found = found.narrowed(_compare(column, high_op, high))
            return found
    return Pushdown()


def pushdown(predicate: Any) -> Pushdown:
    """The bounds a polars filter expression puts on a read (its ``&``-joined comparisons of ``stream_key``,
    ``timestamp`` and ``seq`` with literals); anything else narrows nothing.

    Parameters
    ----------
    predicate : polars.Expr or None
        The filter polars hands the scan.

    Returns
    -------
    Pushdown

    Examples
    --------
    >>> import polars as pl
    >>> pushdown((pl.col("stream_key") == "orders") & (pl.col("seq") >= 10))
    Pushdown(keys=frozenset({'orders'}), after_ms=None, end_ms=None, start_seq=10)
    """
    if predicate is None:
        return Pushdown()
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # noqa: BLE001 - an expression polars cannot write as JSON is applied by polars alone
        return Pushdown()
    return _walk(tree)


def _schema(payload: ScanPayload) -> dict[str, Any]:
    """The columns ``pl.from_arrow(nbkit.read_arrow(path, payload=payload))`` gives, with their polars types."""
    pl = polars_module()
    return {
        "stream_key": pl.Categorical(),
        "shard_id": pl.Int64(),
        "seq": pl.Int64(),
        "timestamp": pl.Datetime("ms", "UTC"),
        "size": pl.Int64(),
        "payload": pl.String() if payload == "text" else pl.Binary(),
        "retry_count": pl.Int64(),
        "attempt": pl.Int64(),
        "headers": pl.Map(pl.String(), pl.String()),
        "offset": pl.Int64(),
        "transport": pl.Categorical(),
    }


def scan_stream(
    path: str | os.PathLike,
    *,
    payload: ScanPayload = "text",
    include_internal: bool = False,
    on_bad_frames: str = "error",
    storage_options: dict[str, Any] | None = None,
    block_size: int | None = None,
    progress: bool | None = None,
) -> Any:
    """A ``.ss`` stream file as a ``polars.LazyFrame``: filters on ``stream_key``, ``timestamp`` and ``seq`` read
    only the part of the file the beacons say can hold the rows, and unused columns are not built.

    The columns are those of ``pl.from_arrow(nbkit.read_arrow(path))`` (see :mod:`nbkit.tabular.arrow`), and
    a query gives the rows the eager read filtered the same way gives. Pushed down to the read (with
    literals): ``pl.col("stream_key") == k`` / ``.is_in([...])``, ``pl.col("timestamp")`` compared with a
    timezone-aware time (or ``.is_between``), ``pl.col("seq") >= n``, joined by ``&``. Any other filter is
    applied to the rows read. The file is read when the query is collected, once per collect, a chunk of
    rows at a time (polars' batch size, else 100,000 rows): ``head(n)`` stops the read once ``n`` rows
    passed the filter.

    Parameters
    ----------
    path : str or os.PathLike
        A local path or a URL (``storage_options`` as for :func:`nbkit.read_stream`).
    payload : {"text", "bytes"}
        The ``payload`` column as text (what ``read_arrow`` gives for UTF-8 payloads) or bytes. The type must
        be known before the file is read, so ``"auto"`` is not offered.
    include_internal, on_bad_frames, storage_options, block_size, progress
        As for :func:`nbkit.read_stream` (``progress``: a bar while a big file is read at collect).

    Returns
    -------
    polars.LazyFrame

    Raises
    ------
    MissingExtraError
        polars is not installed (the ``arrow`` extra).
    InvalidArgumentError
        An option that is not one of the values above.
    MissingFileError, FormatError
        The file is missing or is not a stream file (checked now, from its header).

    Examples
    --------
    >>> import datetime as dt
    >>> import nbkit
    >>> import polars as pl
    >>> from nbkit.polars import scan_stream
    >>> with nbkit.StreamWriter("orders.ss") as writer:
    ...     for n in range(6):
    ...         _ = writer.write(["orders", "audit"][n % 2], b'{"n": %d}' % n, timestamp_ms=1_700_000_000_000 + n)
    >>> lf = scan_stream("orders.ss")
    >>> lf.filter(pl.col("stream_key") == "orders").select("seq", "payload").collect().rows()
    [(1, '{"n": 0}'), (2, '{"n": 2}'), (3, '{"n": 4}')]
    >>> after = dt.datetime(2023, 11, 14, 22, 13, 20, 2000, tzinfo=dt.UTC)
    >>> lf.filter(pl.col("timestamp") > after).select("seq").collect().height
    3
    """
    pl = polars_module()
    from polars.io.plugins import register_io_source

    if payload not in _PAYLOADS:
        raise InvalidArgumentError(f"scan_stream: payload={payload!r} is not one of {', '.join(_PAYLOADS)}")
    if on_bad_frames not in _ON_BAD_FRAMES:
        raise InvalidArgumentError(
            f"scan_stream: on_bad_frames={on_bad_frames!r} is not one of {', '.join(_ON_BAD_FRAMES)}"
        )
    if not isinstance(include_internal, bool):
        raise InvalidArgumentError(f"scan_stream: include_internal takes True or False, not {include_internal!r}")
    path = os.fspath(path)
    with StreamReader(path, storage_options=storage_options, block_size=block_size):
        pass  # a missing file or one that is not a stream file says so now, not at collect
    schema = _schema(payload)
    options = {
        "include_internal": include_internal,
        "on_bad_frames": on_bad_frames,
        "storage_options": storage_options,
        "block_size": block_size,
        "progress": progress,
    }

    def source(
        with_columns: list[str] | None, predicate: Any, n_rows: int | None, batch_size: int | None
    ) -> Iterator[Any]:
        narrowed = pushdown(predicate)
        wanted = list(schema) if with_columns is None else list(with_columns)
        needed = set(wanted)
        if predicate is not None:
            needed |= set(predicate.meta.root_names())
        # bytes: no text check for a column not asked for
        mode: ScanPayload = payload if "payload" in needed else "bytes"
        kept = [c for c in schema if c in needed]
        # the file is read a chunk at a time: the read stops once the row limit is met, or once polars
        # stops asking (a limit above a filter, which polars keeps to itself)
        chunk = batch_size or _CHUNK_ROWS
        if n_rows is not None:
            chunk = max(min(chunk, n_rows), _MIN_CHUNK_ROWS)
        left = n_rows
        sent = False
        tables = [] if n_rows == 0 else _read(path, narrowed, mode, options, chunk)
        try:
            for table in tables:
                frame = pl.from_arrow(table.select(kept))
                frame = frame.cast({c: t for c, t in schema.items() if c in frame.columns and frame.schema[c] != t})
                if predicate is not None:
                    frame = frame.filter(predicate)
                frame = frame.select(wanted)
                if left is not None:
                    frame = frame.head(left)
                    left -= frame.height
                step = batch_size or max(frame.height, 1)
                for first in range(0, frame.height, step):
                    sent = True
                    yield frame.slice(first, step)
                if left == 0:
                    break
        finally:
            if isinstance(tables, FrameReader):
                tables.close()  # a read stopped early lets its file go now
        if not sent:
            yield pl.DataFrame(schema=schema).select(wanted)

    return register_io_source(
        source, schema=schema, explain_name="nbkit.scan_stream", explain_detail=f"{path} payload={payload}"
    )


def _read(
    path: str, narrowed: Pushdown, payload: ScanPayload, options: dict[str, Any], chunksize: int
) -> Iterable[Any]:
    """The tables of ``read_arrow`` with the pushed-down bounds, ``chunksize`` rows each (a
    :class:`~nbkit.tabular.reader.FrameReader`); none when no row can match. Keys the file does not hold are
    dropped, as the eager read filtered would find none of their rows."""
    if narrowed.keys is not None:
        if not narrowed.keys:
            return []
        reading = {k: options[k] for k in ("storage_options", "block_size")}
        try:
            with StreamReader(path, **reading) as reader:  # the beacons first; the whole file only for a key not met
                Selection(keys=narrowed.keys).check_keys_named(reader)
        except UnknownKeyError as err:
            kept = narrowed.keys - set(err.missing)
            if not kept:
                return []
            narrowed = replace(narrowed, keys=kept)
    return read_arrow(path, payload=payload, chunksize=chunksize, **narrowed.read_options(), **options)
