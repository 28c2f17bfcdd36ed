"""One exception hierarchy for nbkit: every error says what went wrong, where, and how to fix it."""

from __future__ import annotations


class NbkitError(Exception):
    """Root of every error nbkit raises on purpose; the CLI turns it into one line and an exit code."""

    exit_code = 1


class FormatError(NbkitError):
    """Bytes on disk or a line on a pipe do not follow the SeaStreamer formats.

    ``path`` and ``offset`` (a byte offset) or ``line`` (a 1-based line number) say where.
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
        """Return a copy of this error that also names the file and absolute offset."""
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
    """A payload's CRC-16/CDMA2000 does not match the checksum stored after it."""

    def __init__(self, message: str, *, received: int = 0, computed: int = 0, **where) -> None:
        self.received = received
        self.computed = computed
        super().__init__(message, **where)


class StreamKeyError(FormatError):
    """A stream key is empty where one is required, too long, or has characters outside [A-Za-z0-9._-]."""


class Utf8Error(FormatError):
    """Text that must be UTF-8 (a key, a file name, a stdio line) is not."""


class TimestampRangeError(FormatError):
    """A timestamp lies outside 1970-01-01 .. 9999-12-31T23:59:59.999Z."""


class TruncatedError(FormatError):
    """The data ends in the middle of a header, frame or beacon."""


class BeaconIntervalError(FormatError):
    """A beacon interval that the format or the writer cannot use."""


class LineParseError(FormatError):
    """A stdio line's ``[...]`` header does not follow the grammar (upstream panics; nbkit reports)."""


class PayloadTooLargeError(FormatError):
    """A payload longer than the u32 size field (4 GiB - 1) or a name over its limit."""


class FileLimitError(FormatError):
    """A write would grow the stream file past its size limit."""


class WriterLockedError(NbkitError):
    """Another process holds the write lock of a stream file; two writers would corrupt it."""


class FileRemovedError(NbkitError):
    """The stream file was removed while it was being followed."""


class SeekError(NbkitError):
    """A seek asked for a position the file does not hold (a sequence or instant past its end)."""


class AckError(NbkitError):
    """Acknowledgement failed; on file and pipe transports its kind is always ``"unsupported"``."""

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
    """A broker, subscriber or app was configured in a way that cannot work."""

    exit_code = 2


class RetryDestinationError(ConfigurationError):
    """A pipe registration names no ``out_retry`` destination, so its retry copies would go nowhere."""


class NotConnectedError(NbkitError):
    """A broker was used after shutdown: ``stream transport is not connected``."""

    def __init__(self, message: str = "stream transport is not connected") -> None:
        super().__init__(message)
