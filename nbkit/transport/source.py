"""Where a stream file's bytes come from: a local path (``os.pread`` on a descriptor) or an fsspec URL.

Every reader of ``.ss`` files (:class:`~nbkit.transport.file_reader.StreamReader`, and through it
``read_stream``, ``info``, salvage and repair, lineage, the Dask partitions, Parquet export and the CLI)
opens its file with :func:`open_source`, the one opener of the transport layer. It returns a
:class:`LocalSource` for a path (no fsspec import, no fsspec call: local reads keep their speed) and a
:class:`RemoteSource` for a URL such as ``s3://bucket/orders.ss``, ``gs://...``, ``abfs://...``,
``http(s)://...`` or any other fsspec protocol (``file://`` URLs are local paths).

A remote source reads by **range requests**, not by downloading the file: the header, then the bytes
the reader asks for, in blocks of ``block_size`` bytes (:data:`DEFAULT_BLOCK_SIZE`, 8 MiB; set with
``block_size=`` on every reader). A reader that knows where its read stops (a Dask partition's byte range)
sets :attr:`RemoteSource.limit`, and blocks are then cut at that offset: the bytes past it that are
fetched are only those of the one frame that crosses it. Each source counts the bytes and requests it
fetched (:attr:`RemoteSource.bytes_fetched`, :attr:`RemoteSource.requests`), and the process keeps the
totals (:func:`fetch_totals`), which is how the tests and ``bench/dask_read.py`` measure a partition's
traffic against its size. A server that ignores ``Range`` (Python's ``http.server``, many static servers)
sends the whole object instead: it is kept and read from memory, with one :class:`RangeIgnoredWarning`.

No read waits for ever. A local path that is not a regular file (a FIFO, a socket, a device, a directory)
is refused after an ``os.stat``, before anything is opened (:func:`check_local_file`). A URL's requests
have a connect timeout and a read timeout (:data:`DEFAULT_TIMEOUTS`, 10 s and 30 s; the ``timeout``
storage option sets others, see :func:`parse_timeout`), and the error says which happened: the
connection was refused, it timed out, or the server answered "not found".

``storage_options`` go to the filesystem as they do in pandas and Dask (``key``, ``secret``,
``endpoint_url``, ``anon``, ``client_kwargs``, ...). Without them each filesystem uses its own
environment and configuration (for S3 what botocore reads: ``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``AWS_ENDPOINT_URL``, ``~/.aws/config``). A missing backend (s3fs, gcsfs, adlfs, aiohttp for HTTP) is a
:class:`~nbkit.MissingExtraError` naming the package and the nbkit extra that installs it; a missing object,
a denied request and a connection that breaks mid-read are one-line errors naming the URL.
"""

from __future__ import annotations

import errno
import math
import os
import re
import stat
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from nbkit.errors import (
    FileIOError,
    FilePermissionError,
    InvalidArgumentError,
    MissingExtraError,
    MissingFileError,
    PathIsDirectoryError,
    install_hint,
)

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_TIMEOUTS",
    "LOCAL_CHUNK",
    "FetchTotals",
    "LocalSource",
    "RangeIgnoredWarning",
    "RemoteSource",
    "check_local_file",
    "fetch_totals",
    "is_url",
    "open_output",
    "open_source",
    "parse_size",
    "parse_storage_options",
    "parse_timeout",
    "upload",
    "url_exists",
]

#: Bytes per read of a local file: large enough to amortise syscalls, small enough to keep memory flat.
LOCAL_CHUNK = 1 << 22
#: Bytes per range request of a remote file (``block_size=`` on every reader sets another).
DEFAULT_BLOCK_SIZE = 8 << 20
#: Bytes a remote probe asks for where only a beacon is needed (a seek's binary search over beacons).
_REMOTE_PROBE = 64 << 10
#: Seconds a URL's request waits (connect, read): to open the connection, then for each part of an answer.
DEFAULT_TIMEOUTS = (10.0, 30.0)

# a protocol prefix ("s3://", "https://", "simplecache::s3://"); a Windows drive ("C:\\") has no "//"
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(://|::)")

# protocol -> (the package that implements it, the nbkit extra that installs it)
_BACKENDS: dict[str, tuple[str, str]] = {
    "s3": ("s3fs", "s3"),
    "s3a": ("s3fs", "s3"),
    "gs": ("gcsfs", "gcs"),
    "gcs": ("gcsfs", "gcs"),
    "abfs": ("adlfs", "azure"),
    "abfss": ("adlfs", "azure"),
    "az": ("adlfs", "azure"),
    "adl": ("adlfs", "azure"),
    "http": ("aiohttp", "http"),
    "https": ("aiohttp", "http"),
}


def is_url(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a URL to read through fsspec (``file://`` URLs count as local paths).

    Parameters
    ----------
    path : str or os.PathLike
        A path or a URL.

    Returns
    -------
    bool
        True for ``s3://...``, ``https://...``, ``memory://...`` and the like.

    Examples
    --------
    >>> is_url("s3://bucket/orders.ss"), is_url("orders.ss"), is_url("file:///tmp/orders.ss")
    (True, False, False)
    """
    text = os.fspath(path)
    return isinstance(text, str) and bool(_URL.match(text)) and not text.startswith("file://")


def _local(path: str | os.PathLike) -> str:
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    return text[len("file://") :] if text.startswith("file://") else text


@dataclass
class FetchTotals:
    """Bytes and range requests fetched from remote files by this process (see :func:`fetch_totals`)."""

    bytes: int = 0
    requests: int = 0


_TOTALS = FetchTotals()


def fetch_totals() -> FetchTotals:
    """The bytes and requests this process has fetched from remote files so far (a live record).

    Take it before and after a read to measure what that read fetched; on a Dask cluster each worker
    process keeps its own (``client.run(fetch_totals)``).

    Returns
    -------
    FetchTotals
        The process's running totals (the same object every call).

    Examples
    --------
    >>> before = fetch_totals().bytes
    >>> fetch_totals().bytes - before
    0
    """
    return _TOTALS


class RangeIgnoredWarning(UserWarning):
    """A server answered a range request with the whole object: nbkit keeps it and reads from memory.

    Warned once per read of such a URL (Python's ``http.server`` and many static servers ignore
    ``Range``). The read gives the same result; it costs one download of the whole object and as much
    memory, where range reads fetch only the blocks a read needs.
    """


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``a named pipe (FIFO)``, ``a socket``, ...)."""
    for test, words in _SPECIAL_KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _refuse_special(path: str, mode: int, what: str) -> None:
    """Raise the error for ``path`` being a directory or another special file where ``what`` is needed."""
    if stat.S_ISDIR(mode):
        raise PathIsDirectoryError(f"{path}: is a directory, not {what}")
    raise FileIOError(
        f"{path}: is {_kind(mode)}, not {what}; nbkit reads regular files only (a pipe or device would block "
        "the read or cannot be read by offset): copy the bytes to a file first",
        errno=errno.EINVAL,
    )


def check_local_file(path: str, what: str = "a stream file", *, pipes: bool = False) -> None:
    """Refuse a local path that is missing or not a regular file, with ``os.stat`` only (nothing is opened).

    Opening a FIFO for reading waits for a writer, for ever if none comes; a directory, socket or device
    is no stream file either. Every local read checks its path here first (:class:`LocalSource`, the CLI's
    capture and lineage inputs), so each says what the path is instead of blocking or reading nonsense.

    Parameters
    ----------
    path : str
        The local path.
    what : str
        What the path should be, for the message (``"a stream file"``).
    pipes : bool
        Accept a FIFO or character device too (a capture of stdio lines may be read from a pipe, as ``-``
        reads stdin).

    Raises
    ------
    MissingFileError, PathIsDirectoryError, FilePermissionError, FileIOError
        Missing, a directory, not searchable, or another kind of special file; the message names the path
        and what it is.

    Examples
    --------
    >>> import os
    >>> os.mkfifo("orders.fifo")
    >>> check_local_file("orders.fifo")
    Traceback (most recent call last):
    ...
    nbkit.errors.FileIOError: orders.fifo: is a named pipe (FIFO), not a stream file; nbkit reads regular files ...
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _read_error(path, exc) from None
    if stat.S_ISREG(mode) or (pipes and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode))):
        return
    _refuse_special(path, mode, what)


def _read_error(path: str | os.PathLike, exc: OSError) -> OSError:
    """The nbkit error, naming ``path``, for what stat-ing or opening a local file to read raised: missing,
    a directory, not readable; another OSError is left as it is."""
    if isinstance(exc, FileNotFoundError):
        return MissingFileError(f"{path}: no such file; check the path")
    if isinstance(exc, NotADirectoryError):
        return MissingFileError(f"{path}: no such file (a part of the path is not a directory)")
    if isinstance(exc, IsADirectoryError):
        return PathIsDirectoryError(f"{path}: is a directory, not a stream file")
    if isinstance(exc, PermissionError):
        return FilePermissionError(f"{path}: permission denied; the file must be readable")
    return exc


class LocalSource:
    """A local file, read with ``os.pread`` on one descriptor (what every reader did before URLs).

    Parameters
    ----------
    path : str
        The file.
    """

    remote = False
    block_size = LOCAL_CHUNK
    probe_size = LOCAL_CHUNK

    def __init__(self, path: str) -> None:
        self.name = path
        self.limit: int | None = None
        check_local_file(path)
        try:
            # O_NONBLOCK: were the path swapped for a FIFO since the check, opening it still returns at once
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError as exc:
            raise _read_error(path, exc) from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            _refuse_special(path, st.st_mode, "a stream file")
        self.fd = fd
        self._ino = st.st_ino
        #: ``pread(n, offset)``: up to ``n`` bytes from ``offset`` (fewer at the end of the file); bound to
        #: ``os.pread`` on the descriptor, so a local read pays no extra call per read.
        self.pread: Callable[[int, int], bytes] = partial(os.pread, fd)

    def size(self) -> int:
        """The file's current size (it grows while a writer appends)."""
        return os.fstat(self.fd).st_size

    def stamp(self) -> tuple[Any, ...]:
        """What identifies this version of the file: (size, modification time in ns, inode)."""
        st = os.fstat(self.fd)
        return (st.st_size, st.st_mtime_ns, st.st_ino)

    def removed(self) -> bool:
        """Whether the path no longer names the file that was opened (deleted or replaced)."""
        try:
            return os.stat(self.name).st_ino != self._ino
        except FileNotFoundError:
            return True

    def close(self) -> None:
        """Release the descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class RemoteSource:
    """A file behind an fsspec URL, read by range requests of ``block_size`` bytes.

    The last block fetched is kept, so the small reads a parse makes inside it cost nothing. A server that
    answers a range request with the whole object (it ignores ``Range``) is not refused: the object is
    kept and read from memory, with a :class:`RangeIgnoredWarning` saying why the read is slower. In replay
    the size is the one the filesystem reported at open (as the Rust replay reader fixes it); with
    ``follow`` a read past it asks the filesystem again, which is how a followed object is seen to grow
    (where the filesystem can tell: HTTP servers report ``Content-Length``, object stores the object's
    current size).

    Parameters
    ----------
    url : str
        The URL (``s3://bucket/key``, ``https://host/path``, ...).
    storage_options : dict, optional
        Passed to the filesystem (credentials, ``endpoint_url``, ...).
    block_size : int, optional
        Bytes per range request (default :data:`DEFAULT_BLOCK_SIZE`).
    follow : bool
        Ask the filesystem for the size again when a read reaches past the known end.

    Raises
    ------
    MissingFileError, FilePermissionError, PathIsDirectoryError, FileIOError
        Not found, denied, a prefix, or not reached: the connection was refused or timed out
        (:data:`DEFAULT_TIMEOUTS`; the ``timeout`` storage option sets others).
    """

    remote = True
    probe_size = _REMOTE_PROBE

    def __init__(
        self,
        url: str,
        *,
        storage_options: dict[str, Any] | None = None,
        block_size: int | None = None,
        follow: bool = False,
    ) -> None:
        self.name = url
        self.limit: int | None = None
        self.block_size = DEFAULT_BLOCK_SIZE if block_size is None else int(block_size)
        if self.block_size < 1:
            raise ValueError(f"block_size must be a positive number of bytes, not {block_size}")
        self.follow = follow
        #: Bytes and range requests this source fetched.
        self.bytes_fetched = 0
        self.requests = 0
        self._block_start = 0
        self._block = b""
        #: False once the server is known to ignore ``Range`` (it sent a whole object for a range).
        self.ranges = True
        self.fs, self._path, self.timeouts = _filesystem(url, storage_options or {})
        self._info: dict[str, Any] = {}
        self._size = self._stat()

    def _stat(self) -> int:
        try:
            info = self.fs.info(self._path)
        except Exception as exc:
            raise _remote_error(self.name, exc, "looking it up", self.timeouts) from None
        self._info = info
        if info.get("type") == "directory":
            raise PathIsDirectoryError(f"{self.name}: is a directory (a prefix), not a stream file")
        size = info.get("size")
        if size is None:
            raise FileIOError(f"{self.name}: the server does not report the object's size; nbkit needs it to read")
        return int(size)

    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes from ``offset``: from the kept block when it holds them, else one range request
        (or, from a server that ignores ``Range``, the whole object, kept)."""
        if n <= 0:
            return b""
        end = offset + n
        if self.follow and end > self._size:
            self.refresh()
        end = min(end, self._size)
        if offset >= end:
            return b""
        start = self._block_start
        if offset >= start and end <= start + len(self._block):
            return self._block[offset - start : end - start]
        if not self.ranges:
            return self._keep(0, self._fetch(None, None))[offset:end]
        data = self._fetch(offset, end)
        if len(data) > end - offset:  # a 200 with the whole object, not a 206 with the range
            self.ranges = False
            warnings.warn(
                RangeIgnoredWarning(
                    f"{self.name}: the server ignores range requests (it sent {len(data)} bytes for bytes "
                    f"{offset}-{end}), so nbkit keeps the whole object in memory and reads from it: slower than "
                    "range reads for a large file (each read downloads all of it, and holds it). Serve the file "
                    "from a server that supports the Range header (object stores do; for a local folder, "
                    "nbkit.transport.http_serve.serve_folder)"
                ),
                stacklevel=2,
            )
            return self._keep(0, data)[offset:end]
        return self._keep(offset, data)

    def _fetch(self, start: int | None, end: int | None) -> bytes:
        """One request: bytes ``start``-``end`` (both None: the whole object), counted."""
        try:
            data = self.fs.cat_file(self._path, start=start, end=end)
        except Exception as exc:
            doing = "reading the object" if start is None else f"reading bytes {start}-{end}"
            raise _remote_error(self.name, exc, doing, self.timeouts) from None
        data = bytes(data)
        self.bytes_fetched += len(data)
        self.requests += 1
        _TOTALS.bytes += len(data)
        _TOTALS.requests += 1
        return data

    def _keep(self, start: int, data: bytes) -> bytes:
        """Keep ``data`` (the object's bytes from ``start``) as the block later reads are served from."""
        self._block_start, self._block = start, data
        return data

    def refresh(self) -> int:
        """Ask the filesystem for the object's size again (following); the new size."""
        invalidate = getattr(self.fs, "invalidate_cache", None)
        if invalidate is not None:
            invalidate(self._path)
        self._size = self._stat()
        return self._size

    def size(self) -> int:
        """The object's size: as reported at open, or at the last refresh when following."""
        if self.follow:
            try:
                return self.refresh()
            except MissingFileError:
                return self._size
        return self._size

    def stamp(self) -> tuple[Any, ...]:
        """What identifies this version of the object: its URL, size, and ETag or modification time."""
        info = self._info
        version = info.get("ETag") or info.get("etag") or info.get("LastModified") or info.get("mtime") or ""
        return (self.name, self._size, str(version))

    def removed(self) -> bool:
        """Whether the object is gone (following): the filesystem no longer finds it."""
        try:
            self.refresh()
        except MissingFileError:
            return True
        return False

    def close(self) -> None:
        """Drop the kept block (the filesystem's connections stay with fsspec's instance cache)."""
        self._block = b""


def open_source(
    path: str | os.PathLike,
    *,
    storage_options: dict[str, Any] | None = None,
    block_size: int | None = None,
    follow: bool = False,
) -> LocalSource | RemoteSource:
    """Open ``path`` for reading: a :class:`LocalSource` for a path, a :class:`RemoteSource` for a URL.

    Parameters
    ----------
    path : str or os.PathLike
        A local path (or ``file://`` URL), or any fsspec URL.
    storage_options : dict, optional
        For a URL: passed to its filesystem, but for ``timeout``, nbkit's own (http(s):// and s3://): the
        connect and read timeouts in seconds, one number or a (connect, read) pair (default
        :data:`DEFAULT_TIMEOUTS`; :func:`parse_timeout`). Refused for a local path, where it would mean
        nothing.
    block_size : int, optional
        For a URL: bytes per range request (default :data:`DEFAULT_BLOCK_SIZE`).
    follow : bool
        For a URL: the reader follows the file, so its size is asked for again as it reads on.

    Returns
    -------
    LocalSource or RemoteSource

    Raises
    ------
    MissingFileError, FilePermissionError, PathIsDirectoryError, FileIOError, MissingExtraError
        The file or object is missing, may not be read, is a directory or another special file (a FIFO,
        a socket, a device: refused before it is opened), cannot be reached (refused, timed out), or
        needs a backend that is not installed; each message names the path or URL and what happened.
    """
    if callable(getattr(path, "pread", None)):  # an open source (a FileObjectSource): read as it is
        return path  # type: ignore[return-value]
    if not is_url(path):
        if storage_options:
            raise ValueError(
                f"storage_options are for URLs (s3://, https://, ...); {os.fspath(path)!r} is a local path"
            )
        return LocalSource(_local(path))
    return RemoteSource(os.fspath(path), storage_options=storage_options, block_size=block_size, follow=follow)


_SIZE = re.compile(r"^\s*(\d+)\s*(|b|kb|kib|mb|mib|gb|gib)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1 << 10, "mb": 1000**2, "mib": 1 << 20, "gb": 1000**3, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """A positive byte count from text: ``4194304``, ``4MiB``, ``512KiB``, ``2MB`` (``--block-size``).

    Parameters
    ----------
    text : str
        Digits, then optionally a unit (B, kB, KiB, MB, MiB, GB, GiB; any case).

    Returns
    -------
    int

    Raises
    ------
    ValueError
        Not such a count, or zero.

    Examples
    --------
    >>> parse_size("4MiB"), parse_size("512kib"), parse_size("1000")
    (4194304, 524288, 1000)
    """
    match = _SIZE.match(text)
    value = int(match.group(1)) * _UNITS[match.group(2).lower()] if match else 0
    if value < 1:
        raise ValueError(f"{text!r} is not a positive byte count (such as 4194304, 4MiB or 512KiB)")
    return value


def parse_storage_options(items: list[str] | None) -> dict[str, Any]:
    """``--storage-option KEY=VALUE`` arguments as a ``storage_options`` dict.

    A value that reads as JSON (``true``, ``3``, ``{"region_name": "eu-west-1"}``) is that value; any other
    is the text. A dotted key goes one level down (``client_kwargs.region_name=eu-west-1``).

    Parameters
    ----------
    items : list of str, optional
        The ``KEY=VALUE`` texts.

    Returns
    -------
    dict

    Raises
    ------
    InvalidArgumentError
        An item without ``=`` (a ``ValueError``).

    Examples
    --------
    >>> parse_storage_options(["anon=true", "endpoint_url=http://127.0.0.1:9000", "client_kwargs.region_name=eu"])
    {'anon': True, 'endpoint_url': 'http://127.0.0.1:9000', 'client_kwargs': {'region_name': 'eu'}}
    """
    import json

    options: dict[str, Any] = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"--storage-option takes KEY=VALUE, not {item!r}")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        head, dot, rest = key.partition(".")
        if dot:
            options.setdefault(head, {})[rest] = value
        else:
            options[key] = value
    return options


def parse_timeout(value: Any) -> tuple[float, float]:
    """(connect, read) seconds from the ``timeout`` storage option or ``--timeout``.

    A URL's requests wait at most the connect timeout for the connection, then at most the read timeout
    for each part of an answer (a slow but steady download is not cut off). One number sets both.

    Parameters
    ----------
    value : float, str, pair or dict
        ``5`` or ``"5"`` (both 5 s), ``(2, 30)`` or ``"2,30"`` (connect 2 s, read 30 s), or
        ``{"connect": 2, "read": 30}`` (a key left out keeps its default, :data:`DEFAULT_TIMEOUTS`).

    Returns
    -------
    tuple of float
        (connect, read), each more than 0 seconds.

    Raises
    ------
    InvalidArgumentError
        Not such a value (a ``ValueError``).

    Examples
    --------
    >>> parse_timeout(5), parse_timeout("2,30"), parse_timeout({"read": 60})
    ((5.0, 5.0), (2.0, 30.0), (10.0, 60.0))
    """
    if isinstance(value, dict):
        unknown = set(value) - {"connect", "read"}
        pair: Any = (value.get("connect", DEFAULT_TIMEOUTS[0]), value.get("read", DEFAULT_TIMEOUTS[1]))
        if unknown:
            pair = None
    elif isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        pair = (parts[0], parts[0]) if len(parts) == 1 else tuple(parts) if len(parts) == 2 else None
    elif isinstance(value, (list, tuple)):
        pair = tuple(value) if len(value) == 2 else None
    else:
        pair = (value, value)
    try:
        if pair is None or any(isinstance(v, bool) for v in pair):
            raise ValueError
        connect, read = float(pair[0]), float(pair[1])
    except (TypeError, ValueError):
        connect = read = math.nan
    if not (0 < connect < math.inf and 0 < read < math.inf):
        raise InvalidArgumentError(
            f"timeout {value!r}: give seconds, more than 0: one number for both the connect and the read "
            'timeout (5), or connect,read (2,30), or {"connect": 2, "read": 30}'
        )
    return connect, read


def _with_timeouts(
    url: str, protocol: str, options: dict[str, Any]
) -> tuple[dict[str, Any], tuple[float, float] | None]:
    """``options`` with the connect and read timeouts set in the backend's own terms, and those timeouts.

    HTTP(S) (aiohttp): ``client_kwargs.timeout``; S3 (botocore): ``config_kwargs.connect_timeout`` and
    ``read_timeout``. A value the caller gave in those terms stays (the timeouts are then not known here:
    None). Other protocols keep their filesystem's own defaults; asking them for ``timeout`` is an error.
    """
    options = dict(options)
    given = options.pop("timeout", None)
    timeouts = DEFAULT_TIMEOUTS if given is None else parse_timeout(given)
    connect, read = timeouts
    if "::" in url or protocol not in ("http", "https", "s3", "s3a"):
        if given is not None:
            raise InvalidArgumentError(
                f"{url}: the timeout option applies to http(s):// and s3:// URLs; set a {protocol}:// "
                "filesystem's timeouts with its own storage options"
            )
        return options, None
    if protocol in ("http", "https"):
        try:
            import aiohttp
        except ImportError:
            return options, None  # url_to_fs names the package to install
        client = dict(options.get("client_kwargs") or {})
        if "timeout" in client:
            return options, None
        client["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
        options["client_kwargs"] = client
        return options, timeouts
    config = dict(options.get("config_kwargs") or {})
    if "connect_timeout" in config or "read_timeout" in config:
        return options, None
    config.update(connect_timeout=connect, read_timeout=read)
    options["config_kwargs"] = config
    return options, timeouts


def _filesystem(url: str, storage_options: dict[str, Any]) -> tuple[Any, str, tuple[float, float] | None]:
    """(fsspec filesystem, path inside it, its (connect, read) timeouts when known) for ``url``; a missing
    backend names the package to install."""
    protocol = url.split("://", 1)[0].split("::")[-1].lower() if "://" in url else url.split("::", 1)[0]
    options, timeouts = _with_timeouts(url, protocol, storage_options)
    try:
        import fsspec.core
    except ImportError:
        raise MissingExtraError(f"{url}: reading URLs needs fsspec (an nbkit dependency): pip install fsspec") from None
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        backend = _BACKENDS.get(protocol)
        if backend is None:
            raise MissingExtraError(f"{url}: reading {protocol}:// URLs needs a package fsspec names: {exc}") from None
        package, extra = backend
        raise MissingExtraError(
            f"{url}: reading {protocol}:// URLs needs the {package} package, which nbkit's optional extra "
            f"{extra!r} installs: {install_hint(extra)} (or pip install {package})"
        ) from None
    except ValueError as exc:
        if "protocol" in str(exc).lower():
            raise MissingExtraError(f"{url}: fsspec knows no filesystem for {protocol}:// ({exc})") from None
        raise InvalidArgumentError(f"{url}: not a URL its filesystem can open ({exc})") from None
    except Exception as exc:
        raise _remote_error(url, exc, "opening its filesystem", timeouts) from None
    return fs, path, timeouts


def _chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and the exceptions it wraps (its cause or context, and aiohttp's ``os_error``), at most 8."""
    out: list[BaseException] = []
    while exc is not None and len(out) < 8 and exc not in out:
        out.append(exc)
        wrapped = getattr(exc, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(wrapped, BaseException) and wrapped not in out:
            out.append(wrapped)
        exc = exc.__cause__ or exc.__context__
    return out


def _status(exc: BaseException | None) -> int | None:
    """The HTTP status an fsspec backend's exception carries, if any (also on the exception it wraps:
    fsspec's HTTP filesystem reports any failed lookup as FileNotFoundError, the response as its cause)."""
    for item in _chain(exc):
        for attr in ("status", "status_code", "code"):
            value = getattr(item, attr, None)
            if isinstance(value, int) and 100 <= value < 600:
                return value
        response = getattr(item, "response", None)
        if isinstance(response, dict):
            code = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
    return None


#: Exception class names (aiohttp's, botocore's, urllib3's) that say which timeout expired.
_CONNECT_TIMEOUTS = {"ConnectionTimeoutError", "ConnectTimeoutError", "ConnectTimeout"}
_READ_TIMEOUTS = {"SocketTimeoutError", "ReadTimeoutError", "ReadTimeout"}


def _network_failure(exc: BaseException) -> str | None:
    """What kept a request from an answer: ``refused``, ``unresolved``, ``connect-timeout``,
    ``read-timeout``, ``timeout`` (which one is not said), or None (something else, or there was an answer)."""
    found = None
    for item in _chain(exc):
        names = {cls.__name__ for cls in type(item).__mro__}
        if names & _CONNECT_TIMEOUTS:
            return "connect-timeout"
        if names & _READ_TIMEOUTS:
            return "read-timeout"
        if isinstance(item, ConnectionRefusedError):
            return "refused"
        if "gaierror" in names or "ClientConnectorDNSError" in names:
            return "unresolved"
        if isinstance(item, TimeoutError) and found is None:
            found = "timeout"
    return found


def _network_error(url: str, failure: str, doing: str, timeouts: tuple[float, float] | None) -> FileIOError:
    """The error for a request that got no answer (:func:`_network_failure`'s ``failure``)."""
    if failure == "refused":
        return FileIOError(
            f"{url}: connection refused ({doing}): nothing listens at that host and port; check the URL "
            "and that the server runs",
            errno=errno.ECONNREFUSED,
        )
    if failure == "unresolved":
        return FileIOError(f"{url}: the host name does not resolve ({doing}); check the URL", errno=errno.ENOENT)
    longer = (
        "check that the server is up, or allow longer with the timeout storage option (--timeout on the command line)"
    )
    if failure == "connect-timeout":
        after = f" in {timeouts[0]:g} s" if timeouts else ""
        why = f": no answer to the connection{after} (connect timeout)"
    elif failure == "read-timeout":
        after = f" for {timeouts[1]:g} s" if timeouts else ""
        why = f": the server accepted the connection but sent nothing{after} (read timeout)"
    else:
        why = ""
    return FileIOError(f"{url}: timed out {doing}{why}; {longer}", errno=errno.ETIMEDOUT)


def _remote_error(url: str, exc: BaseException, doing: str, timeouts: tuple[float, float] | None = None) -> Exception:
    """One nbkit error, naming the URL, for what a filesystem raised while ``doing`` something: not found,
    denied, refused, timed out (``timeouts``: the (connect, read) seconds, when known), or broke off."""
    if isinstance(exc, (MissingFileError, FilePermissionError, PathIsDirectoryError, FileIOError)):
        return exc
    if isinstance(exc, TypeError):  # the filesystem's constructor or call refused an option
        return InvalidArgumentError(f"{url}: the filesystem refused the storage options ({exc}); check storage_options")
    status = _status(exc)
    failure = _network_failure(exc) if status is None else None
    if failure is not None:
        return _network_error(url, failure, doing, timeouts)
    if status == 404 or (isinstance(exc, FileNotFoundError) and status in (None, 404)):
        return MissingFileError(f"{url}: no such object (the server answered 'not found'); check the URL")
    if isinstance(exc, PermissionError) or status in (401, 403):
        return FilePermissionError(
            f"{url}: access denied{f' (HTTP {status})' if status else ''}; check the credentials "
            "(storage_options=..., --storage-option, or the filesystem's own environment and config)"
        )
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    what = type(exc).__name__ + (f": {detail}" if detail else "")
    return FileIOError(
        f"{url}: {doing} failed ({what}); the server stopped answering or the connection broke, try again"
    )


def url_exists(url: str, storage_options: dict[str, Any] | None = None) -> bool:
    """Whether an object is at ``url`` (a repair or export checks before it replaces one).

    Parameters
    ----------
    url : str
        An fsspec URL.
    storage_options : dict, optional
        For its filesystem.

    Returns
    -------
    bool
    """
    fs, path, timeouts = _filesystem(url, storage_options or {})
    try:
        return bool(fs.exists(path))
    except Exception as exc:
        raise _remote_error(url, exc, "looking it up", timeouts) from None


def upload(local: str, url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Copy the local file ``local`` to ``url`` (what ``nbkit repair`` does with a copy written locally).

    Parameters
    ----------
    local : str
        The file to send.
    url : str
        Where it goes.
    storage_options : dict, optional
        For the URL's filesystem.
    """
    fs, path, timeouts = _filesystem(url, storage_options or {})
    try:
        fs.put_file(local, path)
    except Exception as exc:
        raise _remote_error(url, exc, "writing the object", timeouts) from None


def open_output(url: str, storage_options: dict[str, Any] | None = None) -> Any:
    """A binary file object writing to ``url`` (closed by the caller; the object appears on close).

    Parameters
    ----------
    url : str
        Where the bytes go.
    storage_options : dict, optional
        For the URL's filesystem.

    Returns
    -------
    file object
    """
    fs, path, timeouts = _filesystem(url, storage_options or {})
    try:
        return fs.open(path, "wb")
    except Exception as exc:
        raise _remote_error(url, exc, "opening it for writing", timeouts) from None
