"""A stream file as a Dask DataFrame: one partition per beacon-aligned byte range.

Public name: ``nbkit.dask.read_stream`` (this module needs the ``scale`` extra).

Design (details in :mod:`nbkit.scale.partitions`):

- **Partitions** are byte ranges of about ``blocksize`` bytes (``partition_size``, its deprecated older name, is
  still taken) whose boundaries are beacon offsets.
  A partition resynchronises at its first beacon (format spec §6.5; frames cut by several beacons are
  skipped whole) and reads every frame that *starts* in its range, the last one whole even when it
  runs past the range. So the partitions together hold exactly the rows of ``nbkit.read_stream``, in
  order, each once. A file smaller than one beacon interval is one partition.
- **EOS**: the plan stops at the first end-of-stream mark, found when ``read_stream`` is called by a
  byte search over the file (cheap next to parsing it; see :func:`~nbkit.scale.partitions.find_eos`).
- **Index and divisions**: the index is each frame's byte offset (int64, the same values as the
  ``offset`` column; unnamed, so that ``"offset"`` stays an unambiguous column name). Offsets grow
  through the file, so the divisions are known for free: each range's first byte, then the last
  possible offset. ``ddf.loc[a:b]`` reads only the partitions that can hold offsets ``a..b``;
  ``compute().reset_index(drop=True)`` is ``nbkit.read_stream``'s frame.
- **Columns and dtypes** are ``nbkit.read_stream``'s. ``stream_key`` is categorical with *unknown*
  categories (Dask's convention, as ``read_csv(dtype="category")``): each partition knows only its own
  keys, and knowing them all needs a pass over the file. ``compute()`` gives the same set of categories
  as ``nbkit.read_stream`` (its dtype compares equal), in order of first appearance instead of sorted;
  ``ddf.categorize(columns=["stream_key"])`` makes them known. Object columns (``payload``,
  ``headers``) stay object: Dask's ``dataframe.convert-string`` would turn bytes payloads into text, so
  it is switched off for this collection.
- **payload="json"**: the ``payload.<field>`` columns must be the same in every partition. They are
  fixed when ``read_stream`` is called, from ``json_fields`` (``{field: dtype}``) when given, else from
  a sample: the rows of the first ``sample`` bytes (4 MiB). Every partition then has exactly those
  columns and dtypes; a field the sample did not show, or a value its dtype cannot hold, raises an
  :class:`~nbkit.errors.NbkitError` at compute time naming the field and the fix, as Dask's
  ``read_csv`` does for dtypes its sample got wrong.
- **Snapshot**: ranges are planned on the file as it is when ``read_stream`` is called; bytes a writer
  appends later are not read. A partial frame at the tail warns then, as ``nbkit.read_stream`` does.
- Works with any Dask scheduler: the default threads (the parsing holds the GIL: use processes or
  ``dask.distributed`` for speed), ``scheduler="processes"``, or a ``distributed.Client``.
- **Worker heap**: the first partition a ``distributed`` worker process reads sets up its heap once
  (:func:`~nbkit.scale.heap.prepare_worker_heap`): the nanny's ``MALLOC_TRIM_THRESHOLD_`` freezes glibc's
  mmap threshold and trims the heap's top at once, which made every read buffer fresh memory to fault in
  (half again as many page faults, and a quarter more CPU time, as the same read in one process).
- **Where the speed is**: parsing runs in parallel on the workers, so ``persist()`` and reductions
  (``groupby``, ``value_counts``, filters, sums) scale with the workers (``bench/dask_read.py``).
  ``compute()`` of the *whole* frame instead moves every Python object (payload strings, header
  dicts) from the workers to the notebook (Dask concatenates on a worker first); that costs about as
  much as parsing, so for a whole frame in one process ``nbkit.read_stream`` is as fast or faster.
"""

from __future__ import annotations

import datetime as dt
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from dask.dataframe import DataFrame as DaskDataFrame

from nbkit.scale import require

dask = require("dask", feature="nbkit.dask")
dd = require("dask.dataframe", feature="nbkit.dask")

from dask.dataframe.utils import clear_known_categories  # noqa: E402
from dask.utils import parse_bytes  # noqa: E402

from nbkit.errors import InvalidArgumentError  # noqa: E402
from nbkit.scale.heap import prepare_worker_heap  # noqa: E402
from nbkit.scale.partitions import (  # noqa: E402
    DEFAULT_PARTITION_SIZE,
    FIELD_MODES,
    ByteRange,
    Plan,
    empty_frame,
    json_fields_of,
    plan_ranges,
    read_range,
)
from nbkit.tabular import PayloadMode, Selection, selection  # noqa: E402
from nbkit.tabular.reader import expand_inputs, path_column_name  # noqa: E402
from nbkit.transport.damage import check_on_bad_frames  # noqa: E402
from nbkit.transport.file_object_source import FileObjectSource  # noqa: E402
from nbkit.transport.positions import FilePosition  # noqa: E402

__all__ = ["plan", "read_stream"]

DEFAULT_SAMPLE = 4 << 20


def _nbytes(value: int | str, what: str) -> int:
    n = parse_bytes(value) if isinstance(value, str) else value
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be a positive number of bytes or a size like '64MiB', not {value!r}")
    return n


def plan(
    path: str | os.PathLike,
    *,
    blocksize: int | str | None = None,
    keys: Iterable[str] | str | None = None,
    start: FilePosition | dt.datetime | int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    block_size: int | str | None = None,
    partition_size: int | str | None = None,
) -> Plan:
    """The byte ranges ``read_stream`` would read (one per partition), for inspection.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file.
    blocksize : int or str, optional
        Bytes of file per partition (an int or a size like ``"64MiB"``; default 64 MiB), Dask's name.
    keys : str or iterable of str, optional
        The stream keys a ``start`` position refers to.
    start : FilePosition, datetime, int or str, optional
        Where the read starts, as for :func:`nbkit.read_stream`.
    storage_options, block_size
        As for :func:`read_stream`.
    partition_size : int or str, optional
        Deprecated: the older name of ``blocksize`` (warns; not with ``blocksize``).

    Returns
    -------
    Plan
        ``ranges`` (one byte range per partition), the file's ``size`` at planning time, ``eos`` and
        ``tail`` (how a sequential read would end).

    Examples
    --------
    >>> import nbkit, nbkit.dask
    >>> with nbkit.StreamWriter("big.ss", beacon_interval=1024) as writer:
    ...     for n in range(100):
    ...         _ = writer.write("orders", b'{"id": %d}' % n)
    >>> len(nbkit.dask.plan("big.ss", blocksize=1024).ranges)
    5
    """
    sel, position, seek_key = selection(keys=keys, start=start)
    size = _partition_bytes(blocksize, partition_size)
    return _plan(path, sel, position, seek_key, size, storage_options, block_size)


def _partition_bytes(blocksize: int | str | None, partition_size: int | str | None) -> int | str:
    """The bytes per partition from ``blocksize`` (Dask's name) or ``partition_size`` (its deprecated older
    name, which warns at the caller's line)."""
    if blocksize is not None and partition_size is not None:
        raise InvalidArgumentError(
            "blocksize and partition_size are one option (bytes of file per partition; partition_size is its "
            "older name): pass blocksize only"
        )
    if partition_size is not None:
        warnings.warn(
            f"partition_size= is deprecated: pass blocksize={partition_size!r} (Dask's name for bytes of file "
            "per partition, as in dask.dataframe.read_csv); partition_size will be removed in nbkit 2.0",
            DeprecationWarning,
            stacklevel=3,
        )
        _nbytes(partition_size, "partition_size")
        return partition_size
    if blocksize is not None:
        _nbytes(blocksize, "blocksize")
        return blocksize
    return DEFAULT_PARTITION_SIZE


def _plan(
    path: str | os.PathLike,
    sel: Selection,
    position: FilePosition | None,
    seek_key: str | None,
    partition_size: int | str,
    storage_options: Mapping[str, Any] | None,
    block_size: int | str | None,
) -> Plan:
    """:func:`plan_ranges` for a selection, the sizes as the caller gave them (an int or ``"64MiB"``):
    what :func:`plan` shows is what :func:`read_stream` reads."""
    return plan_ranges(
        path,
        partition_size=_nbytes(partition_size, "partition_size"),
        start=position,
        key=seek_key,
        sel=sel,
        storage_options=storage_options,
        block_size=None if block_size is None else _nbytes(block_size, "block_size"),
    )


def read_stream(
    path: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    blocksize: int | str | None = None,
    keys: Iterable[str] | str | None = None,
    payload: PayloadMode = "auto",
    start: FilePosition | dt.datetime | int | str | None = None,
    end: dt.datetime | int | str | None = None,
    include_internal: bool = False,
    json_fields: Mapping[str, Any] | Sequence[str] | None = None,
    sample: int | str = DEFAULT_SAMPLE,
    on_bad_frames: str = "error",
    storage_options: Mapping[str, Any] | None = None,
    block_size: int | str | None = None,
    include_path_column: bool | str = False,
    partition_size: int | str | None = None,
) -> DaskDataFrame:
    """Load a ``.ss`` stream file lazily as a Dask DataFrame, one row per message.

    Same rows, columns and dtypes as :func:`nbkit.read_stream`, split into partitions of about
    ``blocksize`` bytes of file, indexed by byte offset with known divisions (one file). Each partition
    resynchronises at its first beacon and reads the frames that start in its range.

    Parameters
    ----------
    path : str, os.PathLike or list of these
        The stream file: a local path (every worker must see it at that path), or an fsspec URL
        (``s3://``, ``gs://``, ``abfs://``, ``https://``, ...), which every worker opens itself: on a
        cluster whose workers share no disk with the client, pass a URL. A glob (``"logs/*.ss"``,
        ``"s3://bucket/2024-*.ss"``) or a list reads several files, their partitions in order (the
        divisions are then unknown: offsets restart in each file). A file object cannot travel to the
        workers: read it with :func:`nbkit.read_stream`.
    blocksize : int or str, optional
        Bytes of file per partition (an int or a size like ``"64MiB"``; default 64 MiB), as in
        ``dask.dataframe.read_csv``. (``block_size``, below, is the size of one range request of a URL.)
    keys, payload, start, end, include_internal
        As for :func:`nbkit.read_stream`.
    json_fields : dict or sequence of str, optional
        ``payload="json"``: the ``payload.<field>`` columns (``{field: dtype}``, or names for dtype
        object); by default the rows of the first ``sample`` bytes decide.
    sample : int or str
        Bytes read up front to find the ``payload.<field>`` columns.
    on_bad_frames : {"error", "warn", "skip"}
        As for :func:`nbkit.read_stream` (``"warn"`` warns in the worker that meets the damage; the
        damaged regions are not collected: ``nbkit info`` lists them).
    storage_options : dict, optional
        For a URL: passed to its filesystem on the client and on every worker (credentials,
        ``endpoint_url``, ...), as in ``dask.dataframe.read_csv``.
    block_size : int or str, optional
        For a URL: bytes per range request (default 8 MiB). A partition fetches its own range, cut into
        such blocks, plus only the frame that crosses its end.
    include_path_column : bool or str
        Add a categorical column naming each row's file (``True``: ``"path"``; a str: that name), as in
        ``dask.dataframe.read_csv``.
    partition_size : int or str, optional
        Deprecated: the older name of ``blocksize`` (still taken, with a ``DeprecationWarning``; not with
        ``blocksize``).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy; ``compute()`` gives the frame of :func:`nbkit.read_stream` (indexed by byte offset).

    Examples
    --------
    >>> import nbkit, nbkit.dask
    >>> with nbkit.StreamWriter("big.ss", beacon_interval=1024) as writer:
    ...     for n in range(100):
    ...         _ = writer.write("orders" if n % 2 else "audit", b'{"id": %d}' % n)
    >>> ddf = nbkit.dask.read_stream("big.ss", blocksize=1024)
    >>> ddf.npartitions
    5
    >>> ddf.groupby("stream_key", observed=True).size().compute(scheduler="sync").to_dict()
    {'audit': 50, 'orders': 50}
    """
    sel, position, seek_key = selection(
        keys=keys, payload=payload, start=start, end=end, include_internal=include_internal
    )
    check_on_bad_frames(on_bad_frames)
    size = _partition_bytes(blocksize, partition_size)
    path_column = path_column_name(include_path_column)
    inputs = expand_inputs(path, dict(storage_options) if storage_options else None)
    if any(isinstance(i.target, FileObjectSource) for i in inputs):
        raise TypeError(
            "nbkit.dask reads paths or URLs that every worker opens itself; a file object cannot travel to "
            "the workers: pass its path, or read it with nbkit.read_stream"
        )
    plans = [_plan(i.target, sel, position, seek_key, size, storage_options, block_size) for i in inputs]
    for the_plan in plans:
        if the_plan.tail is not None and the_plan.tail.reason == "truncated":
            warnings.warn(f"{the_plan.path}: {the_plan.tail.describe()}", stacklevel=2)
    fields: dict[str, Any] | None = None
    if sel.payload in FIELD_MODES:
        if json_fields is None:
            fields = _sample_fields(plans[0], sel, _nbytes(sample, "sample"), on_bad_frames)
        elif isinstance(json_fields, Mapping):
            fields = dict(json_fields)
        else:
            fields = {name: object for name in json_fields}
    meta = clear_known_categories(empty_frame(sel.payload, fields), cols=["stream_key"], index=False)
    names = [i.name for i in inputs]
    if path_column is not None:
        meta[path_column] = pd.Categorical([], categories=names)
    # each part: (range, path, the file's stamp: a changed file gets new task keys, its name in the path column)
    parts = [(rng, p.path, p.stamp, name) for p, name in zip(plans, names, strict=True) for rng in p.ranges]
    divisions = plans[0].divisions if len(plans) == 1 else None
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_map(
            _read_partition,
            parts,
            args=(sel, fields, on_bad_frames, dict(plans[0].options), path_column, tuple(names)),
            meta=meta,
            divisions=divisions,
            label="nbkit-read-stream",
            enforce_metadata=False,
        )


def _read_partition(
    part: tuple[ByteRange, str, tuple, str],
    sel: Selection,
    fields: dict[str, Any] | None,
    on_bad_frames: str,
    options: dict[str, Any],
    path_column: str | None,
    names: tuple[str, ...],
) -> Any:
    """One partition (runs on a worker; the first call in a worker process also sets up its heap)."""
    prepare_worker_heap()
    rng, path, _stamp, name = part
    frame = read_range(path, rng, sel, json_fields=fields, on_bad_frames=on_bad_frames, **options)
    if path_column is not None:
        codes = np.full(len(frame), names.index(name), dtype=np.int32)
        frame[path_column] = pd.Categorical.from_codes(codes, categories=list(names))
    return frame


def _sample_fields(the_plan: Plan, sel: Selection, sample: int, on_bad_frames: str) -> dict[str, Any]:
    stop = the_plan.ranges[-1].end
    rng = ByteRange(the_plan.first, min(stop, the_plan.first + sample), 0)
    return json_fields_of(read_range(the_plan.path, rng, sel, on_bad_frames=on_bad_frames, **the_plan.options))
