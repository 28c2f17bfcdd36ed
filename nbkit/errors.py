"""One exception hierarchy for nbkit: every error says what went wrong, where, and how to fix it.

Every class derives from :class:`NbkitError` (``except NbkitError`` catches whatever nbkit raises on
purpose) and also from the standard exception it is, so code that knows nothing of nbkit can catch it by
its stdlib base (``except FileNotFoundError``, ``except ValueError``)::

    NbkitError(Exception)                    the CLI prints it as one line ``nbkit: ...``; exit_code 1
    ├── FormatError(ValueError)              bytes on disk or a line on a pipe break the formats
    │   ├── ByteMarkError                    no ``Ss`` magic: not a stream file
    │   ├── VersionError                     format version other than 1
    │   ├── ChecksumError                    a payload's CRC-16 does not match
    │   ├── StreamKeyError                   a key read from a file or a line breaks the key rules
    │   ├── Utf8Error                        text that must be UTF-8 is not
    │   ├── TimestampRangeError              a timestamp outside the representable years
    │   ├── TruncatedError                   data ends inside a header, frame or beacon
    │   ├── BeaconIntervalError              a beacon interval the format cannot use
    │   ├── LineParseError                   a stdio line's ``[...]`` header breaks the grammar
    │   └── PayloadTooLargeError             a payload or name over its size field
    ├── InvalidArgumentError(ValueError)     a value passed to a call or a command-line option
    │   └── InvalidKeyError                  a stream key argument breaks the key rules
    ├── ConfigurationError(ValueError)       a broker, subscriber or app that cannot work; exit_code 2
    │   └── RetryDestinationError            a pipe registration without ``out_retry``
    ├── ClosedError(ValueError)              a writer used after close (as a closed Python file)
    │   └── NotConnectedError                a broker used after shutdown
    ├── SeekError(LookupError)               a seek to a position the file does not hold
    ├── UnknownKeyError(LookupError)         a stream key asked for that the file does not hold
    ├── MissingFileError(FileNotFoundError)  a file to read (or append to) does not exist
    ├── PathIsDirectoryError(IsADirectoryError)  a path names a directory, not a file
    ├── FilePermissionError(PermissionError) the file cannot be read or written with these rights
    ├── OutputExistsError(FileExistsError)   an output file exists and may not be replaced
    ├── FileIOError(OSError)                 reading or writing failed at the OS (full disk, I/O error)
    ├── FileLimitError(OSError)              a write would grow the file past its size limit (EFBIG)
    ├── WriterLockedError(TimeoutError)      a stream file's write lock was not free in time
    ├── StdoutClosedError(BrokenPipeError)   the next stage of a pipe closed it; nothing more can be written
    ├── MissingExtraError(ImportError)       an optional dependency (an extra) is not installed
    └── AckError                             acknowledgement failed (unsupported on files and pipes)

The ``OSError`` ones carry ``errno`` (``errno.ENOENT``, ``errno.ENOSPC``, ...) but no ``filename``: the
message already names the file, so ``str(err)`` is that message alone. ``AckError`` has no stdlib base:
none means "the broker cannot acknowledge". Upstream's ``FileRemoved`` (stream-file-format.md §12) is
no error in nbkit: a followed file that is removed ends the read with ``ReadEnd("removed", ...)``.
"""

from __future__ import annotations

import errno as _errno
from typing import Any

__all__ = [
    "DISTRIBUTION",
    "TROUBLESHOOTING_URL",
    "AckError",
    "BeaconIntervalError",
    "ByteMarkError",
    "ChecksumError",
    "ClosedError",
    "ConfigurationError",
    "FileIOError",
    "FileLimitError",
    "FilePermissionError",
    "FormatError",
    "InvalidArgumentError",
    "InvalidKeyError",
    "LineParseError",
    "MissingExtraError",
    "MissingFileError",
    "NbkitError",
    "NotConnectedError",
    "OutputExistsError",
    "PathIsDirectoryError",
    "PayloadTooLargeError",
    "RetryDestinationError",
    "SeekError",
    "StdoutClosedError",
    "StreamKeyError",
    "TimestampRangeError",
    "TruncatedError",
    "UnknownKeyError",
    "Utf8Error",
    "VersionError",
    "WriterLockedError",
    "install_hint",
]


class NbkitError(Exception):
    """Root of every error nbkit raises on purpose; the CLI turns it into one line and an exit code.

    Catch it to handle any nbkit failure at once; its message says what went wrong, where (file and byte
    offset, or line number) and how to fix it. ``exit_code`` is the status ``nbkit`` exits with.

    Examples
    --------
    >>> from nbkit import NbkitError, StreamWriter
    >>> try:
    ...     StreamWriter("orders.ss").write("no spaces allowed", b"{}")
    ... except NbkitError as err:
    ...     print(type(err).__name__, err.exit_code, isinstance(err, ValueError))
    InvalidKeyError 1 True
    """

    exit_code = 1
    #: The anchor of this error's entry on the troubleshooting page (:data:`TROUBLESHOOTING_URL`), or None;
    #: the CLI's one error line ends with that address.
    troubleshooting: str | None = None


#: The troubleshooting page (docs/troubleshooting.md) on the documentation site; tests/test_errors.py checks
#: that every error class's ``troubleshooting`` anchor is a heading there.
TROUBLESHOOTING_URL = "https://nbkit.readthedocs.io/en/latest/troubleshooting.html"


def _where(detail: str, path: str | None, offset: int | None, line: int | None) -> str:
    """``detail`` behind the place it concerns: ``path, byte offset N, line L: detail``."""
    where = []
    if path is not None:
        where.append(str(path))
    if offset is not None:
        where.append(f"byte offset {offset}")
    if line is not None:
        where.append(f"line {line}")
    return f"{', '.join(where)}: {detail}" if where else detail


class FormatError(NbkitError, ValueError):
    """Bytes on disk or a line on a pipe do not follow the SeaStreamer formats (also a ``ValueError``).

    ``path`` and ``offset`` (a byte offset) or ``line`` (a 1-based line number) say where; the message
    starts with them.

    Parameters
    ----------
    message : str
        What is wrong, and how to fix it.
    path : str, optional
        The file the bytes come from.
    offset : int, optional
        The byte offset in that file.
    line : int, optional
        The 1-based line number (pipe input).

    Examples
    --------
    >>> from nbkit import FormatError, StreamReader
    >>> _ = open("notes.txt", "w").write("hello")
    >>> try:
    ...     list(StreamReader("notes.txt"))
    ... except FormatError as err:
    ...     print(err.path, err.offset)
    notes.txt 0
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        line: int | None = None,
    ) -> None:
        self.detail = message
        self.path = path
        self.offset = offset
        self.line = line
        super().__init__(self._render())

    def _render(self) -> str:
        return _where(self.detail, self.path, self.offset, self.line)

    def located(self, *, path: str | None = None, offset: int | None = None) -> FormatError:
        """Return a copy of this error that also names the file and absolute offset.

        Parameters
        ----------
        path : str, optional
            The file to name (kept as it is when None).
        offset : int, optional
            The absolute byte offset to name (kept as it is when None).

        Returns
        -------
        FormatError
            A new error of the same class; this one is unchanged.
        """
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        if path is not None:
            err.path = path
        if offset is not None:
            err.offset = offset
        Exception.__init__(err, err._render())
        return err

    def with_hint(self, hint: str) -> FormatError:
        """Return a copy of this error whose message ends with ``hint`` (for example, how to salvage).

        Parameters
        ----------
        hint : str
            Text appended to the detail, as written (start it with ``"; "`` or a space).

        Returns
        -------
        FormatError
            A new error of the same class, at the same place; this one is unchanged.

        Examples
        --------
        >>> from nbkit.errors import FormatError
        >>> str(FormatError("bad frame", path="a.ss", offset=7).with_hint("; try on_bad_frames='skip'"))
        "a.ss, byte offset 7: bad frame; try on_bad_frames='skip'"
        """
        err = self.located()
        err.detail = self.detail + hint
        Exception.__init__(err, err._render())
        return err


class ByteMarkError(FormatError):
    """The file does not start with the ``Ss`` magic bytes: it is not a stream file."""


class VersionError(FormatError):
    """The stream file's format version is not 1."""


class ChecksumError(FormatError):
    """A payload's CRC-16/CDMA2000 does not match the checksum stored after it.

    ``received`` is the checksum stored in the file, ``computed`` the one of the bytes read.

    Parameters
    ----------
    message : str
        What is wrong.
    received : int
        The checksum stored after the payload.
    computed : int
        The checksum of the payload as read.
    **where
        ``path``, ``offset`` or ``line``, as for :class:`FormatError`.

    Examples
    --------
    >>> from nbkit import ChecksumError, StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"paid")
    >>> data = bytearray(open("orders.ss", "rb").read())
    >>> data[-3] ^= 0xFF                      # flip bits in the payload's last byte
    >>> _ = open("orders.ss", "wb").write(data)
    >>> try:
    ...     list(StreamReader("orders.ss"))
    ... except ChecksumError as err:
    ...     print(err.offset, err.received != err.computed)
    128 True
    """

    troubleshooting = "a-damaged-file"

    def __init__(self, message: str, *, received: int = 0, computed: int = 0, **where: Any) -> None:
        self.received = received
        self.computed = computed
        super().__init__(message, **where)


class StreamKeyError(FormatError):
    """A stream key read from a file or a stdio line is too long or has characters outside [A-Za-z0-9._-].

    The data is damaged (or was not written by SeaStreamer); ``offset`` or ``line`` says where. A key
    passed as an argument that breaks the same rules raises :class:`InvalidKeyError` instead.

    Examples
    --------
    >>> from nbkit import StreamKeyError, StreamReader, StreamWriter
    >>> with StreamWriter("keys.ss") as writer:
    ...     _ = writer.write("orders", b"{}")
    >>> data = open("keys.ss", "rb").read().replace(b"orders", b"ord rs")   # damage the key in the file
    >>> _ = open("keys.ss", "wb").write(data)
    >>> try:
    ...     list(StreamReader("keys.ss"))
    ... except StreamKeyError as err:
    ...     print(err.offset is not None, isinstance(err, ValueError))
    True True
    """


class Utf8Error(FormatError):
    """Text that must be UTF-8 (a key, a file name, a stdio line) is not."""


class TimestampRangeError(FormatError):
    """A timestamp lies outside 1970-01-01 .. 9999-12-31T23:59:59.999Z."""


class TruncatedError(FormatError):
    """The data ends in the middle of a header, frame or beacon.

    Reading a file whose tail is incomplete (a writer is mid-frame, or was killed) is not an error by
    itself: the reader stops there and says so in :attr:`StreamReader.end <nbkit.StreamReader>`. This
    error is raised where whole data is required, such as a file shorter than its 128-byte header.

    Examples
    --------
    >>> from nbkit import StreamReader, TruncatedError
    >>> _ = open("short.ss", "wb").write(b"Ss" + bytes([1, 0, 0]))     # 5 bytes: the magic, the version
    >>> try:
    ...     list(StreamReader("short.ss"))
    ... except TruncatedError as err:
    ...     print(err)
    short.ss, byte offset 0: the file is 5 bytes long, shorter than the 128-byte stream-file header
    """


class BeaconIntervalError(FormatError):
    """A beacon interval that the format or the writer cannot use."""


class LineParseError(FormatError):
    """A stdio line's ``[...]`` header does not follow the grammar (upstream panics; nbkit reports).

    Examples
    --------
    >>> from nbkit import LineParseError, read_pipe
    >>> try:
    ...     read_pipe(lines=["[2024-01-01T00:00:00 | orders | x] {}"])
    ... except LineParseError as err:
    ...     print("line", err.line)
    line 1
    """


class PayloadTooLargeError(FormatError):
    """A payload longer than the u32 size field (4 GiB - 1) or a name over its limit."""


class InvalidArgumentError(NbkitError, ValueError):
    """A value passed to an nbkit call or a command-line option cannot be used (also a ``ValueError``).

    Examples
    --------
    >>> from nbkit.errors import InvalidArgumentError
    >>> from nbkit.transport.repair import repair
    >>> from nbkit import StreamWriter
    >>> StreamWriter("orders.ss").close()
    >>> try:
    ...     repair("orders.ss", "orders.ss")
    ... except ValueError as err:
    ...     print(type(err).__name__, err)
    InvalidArgumentError orders.ss: is the file being repaired; write the copy to another path
    """


class InvalidKeyError(InvalidArgumentError):
    """A stream key given as an argument is not a str, is empty, too long, or has characters outside
    [A-Za-z0-9._-]. (A damaged key read from a file raises :class:`StreamKeyError`.)

    Examples
    --------
    >>> from nbkit import InvalidKeyError, StreamWriter
    >>> try:
    ...     StreamWriter("orders.ss").write("bad key!", b"{}")
    ... except InvalidKeyError as err:
    ...     print(err)
    stream key 'bad key!' has characters ' !' outside [A-Za-z0-9._-]; use letters, digits, '.', '_' or '-'
    """


class _OSError(NbkitError, OSError):
    """An nbkit error that is also an ``OSError``: the message names the file; ``errno`` says which error.

    Parameters
    ----------
    message : str
        What went wrong, where, and how to fix it (``str(err)`` is this text alone).
    errno : int, optional
        The OS error number (``errno.ENOENT``, ...); the class's own when left out.
    """

    ERRNO: int | None = None

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = self.ERRNO if errno is None else errno


class MissingFileError(_OSError, FileNotFoundError):
    """A file nbkit was asked to read or append to does not exist (also a ``FileNotFoundError``).

    Examples
    --------
    >>> from nbkit import StreamReader
    >>> try:
    ...     StreamReader("nowhere.ss")
    ... except FileNotFoundError as err:
    ...     print(type(err).__name__, err)
    MissingFileError nowhere.ss: no such file; check the path
    """

    ERRNO = _errno.ENOENT


class PathIsDirectoryError(_OSError, IsADirectoryError):
    """A path names a directory where a file is needed (also an ``IsADirectoryError``).

    Examples
    --------
    >>> import os
    >>> from nbkit import StreamReader
    >>> os.mkdir("folder.ss")
    >>> try:
    ...     StreamReader("folder.ss")
    ... except IsADirectoryError as err:
    ...     print(type(err).__name__, err)
    PathIsDirectoryError folder.ss: is a directory, not a stream file
    """

    ERRNO = _errno.EISDIR


class FilePermissionError(_OSError, PermissionError):
    """The file cannot be read or written with the process's rights (also a ``PermissionError``)."""

    ERRNO = _errno.EACCES


class OutputExistsError(_OSError, FileExistsError):
    """An output file already exists and the call may not replace it (also a ``FileExistsError``).

    Examples
    --------
    >>> from nbkit import StreamWriter
    >>> from nbkit.transport.repair import repair
    >>> StreamWriter("orders.ss").close()
    >>> StreamWriter("copy.ss").close()
    >>> try:
    ...     repair("orders.ss", "copy.ss")
    ... except FileExistsError as err:
    ...     print(type(err).__name__)
    OutputExistsError
    """

    ERRNO = _errno.EEXIST


class FileIOError(_OSError):
    """Reading or writing a file failed in the operating system (a full disk, an I/O error); ``errno``
    is the OS error's. Nothing already in the file is lost."""


class FileLimitError(_OSError):
    """A write would grow the stream file past its size limit (also an ``OSError``, ``errno`` EFBIG).

    ``path`` and ``offset`` say where the refused frame would have started.

    Parameters
    ----------
    message : str
        What is wrong, and how to fix it.
    path : str, optional
        The stream file.
    offset : int, optional
        The byte offset the frame would have started at.
    """

    ERRNO = _errno.EFBIG

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None) -> None:
        self.detail = message
        self.path = path
        self.offset = offset
        super().__init__(_where(message, path, offset, None))


class WriterLockedError(NbkitError, TimeoutError):
    """A stream file's write lock was not free in time: an exclusive writer holds it, or an append waited
    longer than ``lock_timeout`` for another writer's (also a ``TimeoutError``).

    Examples
    --------
    >>> from nbkit import StreamWriter, WriterLockedError
    >>> first = StreamWriter("orders.ss", exclusive=True)
    >>> try:
    ...     StreamWriter("orders.ss", lock_timeout=0.1).write("orders", b"{}")
    ... except WriterLockedError:
    ...     print("locked: publish through the first writer")
    locked: publish through the first writer
    >>> first.close()
    """


class StdoutClosedError(NbkitError, BrokenPipeError):
    """The process downstream closed the pipe (broken pipe); nothing more can be written (also a
    ``BrokenPipeError``: a pipe stage's output, :class:`~nbkit.transport.pipe_io.LineSink`, raises it)."""


class MissingExtraError(NbkitError, ImportError):
    """A feature needs an optional dependency that is not installed (also an ``ImportError``); the
    message names the ``pip install`` that adds it."""


#: The distribution's name (``[project] name``: what ``pip install`` takes for a release). The import name
#: is ``nbkit``, but the PyPI name ``nbkit`` belongs to an unrelated package: no install line names it.
DISTRIBUTION = "nbkit-ruststream"


def install_hint(extra: str) -> str:
    """The install lines that add ``extra`` to *this* project, from a clone and from PyPI (what every
    :class:`MissingExtraError` says).

    >>> print(install_hint("scale"))
    pip install -e '.[scale]' (in a clone of the repository) or pip install 'nbkit-ruststream[scale]'
    """
    return f"pip install -e '.[{extra}]' (in a clone of the repository) or pip install '{DISTRIBUTION}[{extra}]'"


class SeekError(NbkitError, LookupError):
    """A seek asked for a position the file does not hold (a sequence or instant past its end); also a
    ``LookupError``.

    Examples
    --------
    >>> from nbkit import FilePosition, SeekError, StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"{}")
    >>> try:
    ...     StreamReader("orders.ss").seek(FilePosition.sequence(9), key="orders")
    ... except SeekError as err:
    ...     print(str(err).split(";")[0])
    orders.ss: stream 'orders' (shard 0) has no sequence 9
    """


class UnknownKeyError(NbkitError, LookupError):
    """A read asked for a stream key the file holds no message of (a typo, most often); also a
    ``LookupError``. The message names the keys the file does hold; ``missing`` and ``available`` list them.

    Every reader that takes ``keys=`` raises it (``read_stream``, the Dask reader, ``to_parquet``, lineage
    by key), and the CLI's ``--key`` says the same in one line.

    Examples
    --------
    >>> from nbkit import StreamWriter, UnknownKeyError, read_stream
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("payments", b"{}")
    >>> try:
    ...     read_stream("orders.ss", keys="payment")
    ... except UnknownKeyError as err:
    ...     print(err)
    orders.ss: the file holds no message of the key 'payment'; the keys there: payments
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        missing: list[str] | None = None,
        available: list[str] | None = None,
    ) -> None:
        super().__init__(_where(message, path, None, None))
        self.missing = list(missing or [])
        self.available = list(available or [])


class AckError(NbkitError):
    """Acknowledgement failed; on file and pipe transports its kind is always ``"unsupported"``.

    The runtime catches it and logs ``ack / nack failed``; a handler only sees it if it calls
    ``delivery.ack()`` itself.

    Parameters
    ----------
    kind : {"unsupported", "rejected", "timeout"}
        Why the acknowledgement failed.

    Examples
    --------
    >>> from nbkit import AckError
    >>> err = AckError()
    >>> err.kind, str(err)
    ('unsupported', 'acknowledgement is not supported by this broker')
    """

    TEXTS = {
        "unsupported": "acknowledgement is not supported by this broker",
        "rejected": "broker rejected the acknowledgement",
        "timeout": "acknowledgement timed out",
    }

    def __init__(self, kind: str = "unsupported") -> None:
        if kind not in self.TEXTS:
            raise ValueError(f"unknown AckError kind {kind!r}; expected one of {sorted(self.TEXTS)}")
        self.kind = kind
        super().__init__(self.TEXTS[kind])


class ConfigurationError(NbkitError, ValueError):
    """A broker, subscriber or app was configured in a way that cannot work (also a ``ValueError``).

    Raised when the object is built or the app starts, never in the middle of a run. ``nbkit run`` exits
    with status 2.

    Examples
    --------
    >>> from nbkit import App, ConfigurationError, FileBroker
    >>> try:
    ...     App(FileBroker("orders.ss"), shutdown_timeout=-1)
    ... except ConfigurationError as err:
    ...     print(err)
    shutdown_timeout must be >= 0 seconds or None, not -1
    """

    exit_code = 2


class RetryDestinationError(ConfigurationError):
    """A pipe registration names no ``out_retry`` destination, so its retry copies would go nowhere.

    Examples
    --------
    >>> from nbkit import App, RetryDestinationError, StdioBroker
    >>> broker = StdioBroker(stdin=[], stdout=[])
    >>> @broker.subscriber("jobs")            # no out_retry=...
    ... def work(delivery):
    ...     return None
    >>> try:
    ...     App(broker).start()
    ... except RetryDestinationError:
    ...     print("name one: out_retry='jobs.retry'")
    name one: out_retry='jobs.retry'
    """

    troubleshooting = "retrydestinationerror-when-a-pipe-stage-starts"


class ClosedError(NbkitError, ValueError):
    """A writer was used after it was closed (also a ``ValueError``, as a closed Python file raises).

    Examples
    --------
    >>> from nbkit import StreamWriter
    >>> from nbkit.errors import ClosedError
    >>> writer = StreamWriter("orders.ss")
    >>> writer.close()
    >>> try:
    ...     writer.write("orders", b"{}")
    ... except ClosedError as err:
    ...     print(err)
    orders.ss: the writer is closed
    """


class NotConnectedError(ClosedError):
    """A broker was used after shutdown: ``stream transport is not connected``."""

    def __init__(self, message: str = "stream transport is not connected") -> None:
        super().__init__(message)
