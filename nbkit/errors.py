"""One exception hierarchy for nbkit: every error says what went wrong, where, and how to fix it."""

from __future__ import annotations


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
    ...     print(type(err).__name__, err.exit_code)
    StreamKeyError 1
    """

    exit_code = 1


class FormatError(NbkitError):
    """Bytes on disk or a line on a pipe do not follow the SeaStreamer formats.

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
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        if self.line is not None:
            where.append(f"line {self.line}")
        return f"{', '.join(where)}: {self.detail}" if where else self.detail

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

    def __init__(self, message: str, *, received: int = 0, computed: int = 0, **where) -> None:
        self.received = received
        self.computed = computed
        super().__init__(message, **where)


class StreamKeyError(FormatError):
    """A stream key is empty where one is required, too long, or has characters outside [A-Za-z0-9._-].

    Examples
    --------
    >>> from nbkit import StreamKeyError, StreamWriter
    >>> try:
    ...     StreamWriter("orders.ss").write("bad key!", b"{}")
    ... except StreamKeyError as err:
    ...     print(err)
    stream key 'bad key!' has characters ' !' outside [A-Za-z0-9._-]; use letters, digits, '.', '_' or '-'
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


class FileLimitError(FormatError):
    """A write would grow the stream file past its size limit."""


class WriterLockedError(NbkitError):
    """A stream file's write lock was not free in time: an exclusive writer holds it, or an append waited
    longer than ``lock_timeout`` for another writer's.

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


class FileRemovedError(NbkitError):
    """The stream file was removed while it was being followed."""


class SeekError(NbkitError):
    """A seek asked for a position the file does not hold (a sequence or instant past its end).

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


class ConfigurationError(NbkitError):
    """A broker, subscriber or app was configured in a way that cannot work.

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


class NotConnectedError(NbkitError):
    """A broker was used after shutdown: ``stream transport is not connected``."""

    def __init__(self, message: str = "stream transport is not connected") -> None:
        super().__init__(message)
