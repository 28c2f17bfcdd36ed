"""Pipe I/O for stdio stages: lines in from stdin (never blocking), lines out to stdout (buffered).

A pipe stage (``producer | nbkit run service:app | consumer``) reads one message per line. ``LineSource``
hands out the lines of stdin, a file descriptor, a string or any iterable without ever waiting:
``select`` with a zero timeout, then one large ``os.read``. ``LineSink`` collects the lines the stage
writes and pushes them to the real stdout in one ``os.write`` per 64 KiB (or into a list or a file
object, for notebooks and tests). A line longer than :data:`MAX_LINE_BYTES` (``max_line_bytes``) is
refused with a :class:`~nbkit.errors.LineParseError` naming it, without holding more than the bound of it
in memory. The line *format* is ``nbkit.wire.stdio_line``'s; this module only moves text.
"""

from __future__ import annotations

import io
import os
import select
import stat
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from nbkit.errors import ConfigurationError, LineParseError, StdoutClosedError, Utf8Error
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.wire.core import pick

__all__ = [
    "CHUNK_SIZE",
    "MAX_LINE_BYTES",
    "UNREAD_WAIT",
    "LineInput",
    "LineOutput",
    "LineSink",
    "LineSource",
    "text_lines",
]

#: What :class:`LineSource` reads: None (the process's stdin), text, bytes, lines, or a file.
LineInput = str | bytes | Iterable[str] | Iterable[bytes] | IO[str] | IO[bytes] | None
#: Where :class:`LineSink` writes: None (the process's stdout), a list collecting lines, or a writable file.
LineOutput = list[str] | IO[str] | IO[bytes] | None

#: Bytes per ``os.read`` of stdin, and the size of stdout's buffer before it is written out.
CHUNK_SIZE = 1 << 16
#: How long a stage stopped by a signal before its input ends waits for the pipe's writer to close it, so
#: that the lines it never read are counted exactly (:meth:`LineSource.count_unread`)
UNREAD_WAIT = 2.0
#: The longest stdin line a stage takes by default (bytes, without its ``\n``): 16 MiB. A longer line is a
#: LineParseError naming it (``nbkit run --max-line-bytes``, ``StdioBroker(max_line_bytes=...)`` raise it).
MAX_LINE_BYTES = 16 << 20


class _Overlong:
    """Where a line over the bound was (its bytes already dropped): ``poll`` raises when it gets there."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size  # how many of its bytes were seen (at least)


#: The complete lines of one read: text, bytes (decoded when handed out), or the mark of a line over the bound.
_Lines = list[str] | list[bytes] | list[str | bytes | _Overlong]


class LineSource:
    """Lines from stdin, a file descriptor, a string or any iterable, without ever blocking.

    ``poll()`` returns the next line (without its ``\\n``), ``NEED_MORE`` when a pipe has nothing yet,
    or ``None`` at the end; ``lineno`` is the number of the line it returned last (from 1). Lines
    handed back with :meth:`feed` (a stage reading its own output: loopback) come before anything
    else. From a file descriptor every complete line of a read is decoded at once; a last line without
    ``\\n`` is a line at EOF; text that is not UTF-8 raises :class:`~nbkit.errors.Utf8Error` naming the
    line, after the lines before it were handed out.

    A line longer than ``max_line_bytes`` (UTF-8 bytes, without its ``\\n``) raises
    :class:`~nbkit.errors.LineParseError` naming the line, after the lines before it were handed out; from
    a descriptor or a file no more than the bound (and one read) of it is ever held, and the rest of it is
    dropped as it arrives, so a caller that reads on (``on_bad_lines="skip"``) gets the line after it.

    Parameters
    ----------
    source : None, str, bytes, iterable of str or bytes, or file
        None reads the process's stdin; a file with a real descriptor is read with ``os.read``; str
        and bytes are split at ``\\n``; other files are read with ``readline``; any other iterable
        gives one line per item (a trailing ``\\n`` is dropped).
    max_line_bytes : int, optional
        The longest line taken (default :data:`MAX_LINE_BYTES`, 16 MiB); 0 or None: no bound.

    Examples
    --------
    >>> import os
    >>> from nbkit.transport.pipe_io import LineSource
    >>> r, w = os.pipe()
    >>> source = LineSource(os.fdopen(r, "rb"))
    >>> source.poll()                                # nothing written yet: never blocks
    NEED_MORE
    >>> _ = os.write(w, b"first\\nsec")
    >>> source.poll(), source.lineno
    ('first', 1)
    >>> source.poll()                                # "sec" is not a line until its newline or EOF
    NEED_MORE
    >>> os.close(w)
    >>> source.poll(), source.poll()
    ('sec', None)
    """

    def __init__(self, source: LineInput, *, max_line_bytes: int | None = MAX_LINE_BYTES) -> None:
        if max_line_bytes is not None and (not isinstance(max_line_bytes, int) or max_line_bytes < 0):
            raise ConfigurationError(f"max_line_bytes must be a whole number of bytes >= 0, not {max_line_bytes!r}")
        #: the longest line taken, in bytes (0: no bound)
        self.max_line_bytes = max_line_bytes or 0
        self._limit = max_line_bytes or (1 << 62)
        self._partial_size = 0  # bytes in _partial
        self._dropping = False  # the rest of a line over the bound is being read and dropped
        self._fd: int | None = None
        self._stream: object = None
        self._iter: Iterator[Any] | None = None
        self._partial: list[bytes] = []  # the reads since the last "\n" (a line not complete yet)
        self._lines: _Lines = []  # complete lines of the last read, handed out from _next on
        self._next = 0
        self._eof = False
        self._queue: deque[str] = deque()
        self._fd_stopped = False  # stop_reading() left the descriptor with data maybe unread
        self._rest: Iterator[Any] | None = None  # what stop_reading() left of an iterable source
        self.lineno = 0
        if source is None:
            source = sys.stdin
        if isinstance(source, str):
            self._iter = iter(_split_text(source))
        elif isinstance(source, (bytes, bytearray)):
            data = bytes(source)
            self._iter = iter(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"))
        elif (fd := _real_fileno(source)) is not None:
            self._fd = fd
            self._stream = source  # held, so that collecting the file object does not close the descriptor
        elif isinstance(source, io.IOBase) or hasattr(source, "readline"):
            readline = source.readline
            if isinstance(source, io.IOBase):
                self._iter = _bounded_readlines(readline, self._limit)
            else:  # a file-like object whose readline may take no size: each line is checked whole
                self._iter = iter(readline, "")
        else:
            self._iter = iter(source)

    @property
    def buffered(self) -> int:
        """Lines already read from the source (in memory) and not handed out yet, including fed ones."""
        return len(self._queue) + len(self._lines) - self._next

    @property
    def is_pipe(self) -> bool:
        """Whether the source is a pipe or a socket: another process writes it and will close it.

        A stage told to stop keeps reading such a source until that process closes it (the whole
        pipeline got the signal, and the process before may still write its delayed copies); a
        terminal, a regular file or an in-memory source is not a pipe.
        """
        if self._fd is None or self._eof:
            return False
        try:
            mode = os.fstat(self._fd).st_mode
        except OSError:
            return False
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    def stop_reading(self) -> None:
        """Read nothing more from the source: the lines already read are still handed out, then ``poll``
        returns None (the end). A last line without its ``\\n`` that is partly read counts as unread."""
        self._rest, self._iter = self._iter, None
        if self._fd is not None and not self._eof:
            self._fd_stopped = True
        self._eof = True

    def drop_buffered(self) -> int:
        """Forget the lines read and not handed out yet (the stage stops without delivering them); returns
        how many."""
        n = self.buffered
        self._queue.clear()
        self._lines = []
        self._next = 0
        return n

    def count_unread(self, wait: float = 0.0) -> tuple[int, bool]:
        """How many lines the source holds that were never read: (count, exact).

        For a regular file the rest of it is counted (exact); for a pipe, what arrives until its writer
        closes it, waiting up to ``wait`` seconds for that (exact when it did: after a signal the stage
        before, stopped by the same signal, usually closes at once; else "at least" that many); other
        sources give what is left of them. The lines already read and not handed out are not included
        (see :attr:`buffered`).

        Returns
        -------
        tuple of (int, bool)
            The count, and whether it is exact.
        """
        partial = 1 if any(self._partial) else 0
        rest, self._rest = self._rest or self._iter, None
        if rest is not None:
            return sum(1 for _ in rest), True
        fd = self._fd
        if fd is None or not self._fd_stopped:
            return partial, True
        count = -1 if self._dropping else 0  # the first "\n" ends the line over the bound, already reported
        tail = bool(partial)
        deadline = time.monotonic() + wait
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
            while regular or select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                data = os.read(fd, CHUNK_SIZE)
                if not data:
                    return max(0, count + tail), True
                count += data.count(b"\n")
                tail = not data.endswith(b"\n")
        except OSError:
            return max(0, count + tail), False
        return max(0, count + tail), False

    def fileno(self) -> int | None:
        """The descriptor to wait on with ``select`` (None for other sources, and after EOF).

        Returns
        -------
        int or None
            The file descriptor being read.
        """
        return None if self._eof else self._fd

    @property
    def queued(self) -> int:
        """Lines fed back (loopback) and not read yet."""
        return len(self._queue)

    def feed(self, line: str) -> None:
        """Queue a line to be read next, before anything from the source (loopback).

        Parameters
        ----------
        line : str
            One line, without its ``\\n``.
        """
        self._queue.append(line)

    def ready(self) -> Iterator[str]:
        """The lines :meth:`poll` would return next without reading the source: those fed back, then those of the
        last read. Each is taken as it is handed out (``lineno`` counts it), so stopping early leaves the rest to
        :meth:`poll`; the iterator ends where :meth:`poll` would have to read, or would raise (a line that is not
        UTF-8 or is over the bound: :meth:`poll` says so).

        Returns
        -------
        iterator of str
            The lines, without their ``\\n``; possibly none.

        Examples
        --------
        >>> source = LineSource(b"a\\nb\\n")
        >>> source.poll(), list(source.ready())  # an iterable source: nothing is read ahead
        ('a', [])
        """
        queue = self._queue
        while True:
            if queue:
                self.lineno += 1
                yield queue.popleft()
                continue
            i = self._next
            lines = self._lines
            if i >= len(lines):
                return
            line = lines[i]
            if type(line) is not str:
                return
            self._next = i + 1
            self.lineno += 1
            yield line

    def poll(self) -> str | NeedMore | None:
        """The next line, ``NEED_MORE`` (a pipe has nothing now) or ``None`` (the source has ended).

        Returns
        -------
        str, NEED_MORE or None
            The line without its ``\\n``; its number is then in ``lineno``.

        Raises
        ------
        Utf8Error
            If the line read from a descriptor or as bytes is not valid UTF-8.
        """
        for line in self.ready():  # fed back, or read already and decoded
            return line
        i = self._next
        if i < len(self._lines):  # read already, to decode here (or over the bound): ready() stops before it
            self._next = i + 1
            self.lineno += 1
            raw = self._lines[i]
            if isinstance(raw, _Overlong):
                raise self._too_long(raw.size)
            return raw if isinstance(raw, str) else self._decoded(raw)
        if self._iter is not None:
            try:
                item = next(self._iter)
            except StopIteration:
                self._iter = None
                self._eof = True
                return None
            return self._item(item)
        if self._fd is None:
            return None
        return self._read()

    def _read(self) -> str | NeedMore | None:
        """Read what the descriptor has (never waiting) until a complete line or EOF is there."""
        fd = self._fd
        assert fd is not None
        while True:
            if self._eof:
                if self._partial and not self._fd_stopped:  # a last line without "\n"
                    tail = b"".join(self._partial)
                    self._partial = []
                    self.lineno += 1
                    return self._decoded(tail)
                return None
            ready, _, _ = select.select([fd], [], [], 0)
            if not ready:
                return NEED_MORE
            data = os.read(fd, CHUNK_SIZE)
            if not data:
                self._eof = True
                self._dropping = False
                continue
            if self._dropping:  # the rest of a line over the bound: dropped up to its "\n"
                cut = data.find(b"\n")
                if cut < 0:
                    continue
                self._dropping = False
                data = data[cut + 1 :]
                if not data:
                    continue
            end = data.rfind(b"\n")
            if end < 0:
                self._partial.append(data)
                self._partial_size += len(data)
                if self._partial_size > self._limit:  # over the bound, and no end in sight: drop it
                    size = self._partial_size
                    self._partial = []
                    self._partial_size = 0
                    self._dropping = True
                    self.lineno += 1
                    raise self._too_long(size)
                continue
            # every complete line of the reads, decoded at once; the text after the last "\n" waits
            complete = b"".join([*self._partial, data[:end]]) if self._partial else data[:end]
            self._partial = [data[end + 1 :]] if end + 1 < len(data) else []
            self._partial_size = len(data) - end - 1
            if len(complete) > self._limit:
                self._lines = _bounded(complete.split(b"\n"), self._limit)
            else:
                lines = text_lines(complete)
                # not UTF-8: decoded line by line instead, so the error names its line
                self._lines = complete.split(b"\n") if lines is None else lines
            self._next = 0
            if self._partial_size > self._limit:  # the text after the last "\n" is over the bound already
                self._lines = [*self._lines, _Overlong(self._partial_size)]
                self._partial = []
                self._partial_size = 0
                self._dropping = True
            return self.poll()

    def _decoded(self, line: bytes) -> str:
        """``line`` as text; the error names the line (``lineno`` is already its number)."""
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Utf8Error(
                f"stdin line {self.lineno} is not valid UTF-8 (byte {exc.start}); the line format is "
                "text only: envelope binary payloads (rs1:) or fix the producer",
                line=self.lineno,
            ) from None

    def _too_long(self, size: int) -> LineParseError:
        """The error for line ``lineno``, over the bound (``size``: how much of it was seen, at least)."""
        return LineParseError(
            f"stdin line {self.lineno} is longer than the line bound of {self.max_line_bytes:,} bytes "
            f"(at least {size:,} bytes); raise the bound (nbkit run --max-line-bytes, "
            "StdioBroker(max_line_bytes=...)) or split the payload",
            line=self.lineno,
        )

    def _item(self, item: object) -> str:
        """One item of an iterable or ``readline``: str or bytes, its trailing ``\\n`` dropped."""
        self.lineno += 1
        if isinstance(item, (bytes, bytearray)):
            if len(item) > self._limit and len(item.rstrip(b"\n")) > self._limit:
                raise self._too_long(len(item))
            text = self._decoded(bytes(item))
        elif isinstance(item, str):
            text = item
            # a character is 1-4 UTF-8 bytes: the exact count is only needed near the bound
            if len(text) * 4 > self._limit and len(text.rstrip("\n").encode("utf-8", "surrogatepass")) > self._limit:
                raise self._too_long(len(text.encode("utf-8", "surrogatepass")))
        elif isinstance(item, _Overlong):
            raise self._too_long(item.size)
        else:
            raise TypeError(f"stdin lines are str or bytes, not {type(item).__name__}")
        return text[:-1] if text.endswith("\n") else text


def text_lines(data: bytes) -> list[str] | None:
    """``data.decode("utf-8").split("\\n")``: the lines of a chunk of stdin read whole (None: it is not UTF-8).

    The compiled core's twin finds each ``\\n`` with ``memchr`` and decodes each line on its own (a ``\\n``
    byte is never inside a multi-byte UTF-8 sequence, so the lines are the same).

    Examples
    --------
    >>> text_lines(b"[jobs] a\\n[jobs] b"), text_lines(b""), text_lines(b"\\xff\\n")
    (['[jobs] a', '[jobs] b'], [''], None)
    """
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None


#: The pure-Python twin, kept under its own name for the twin tests.
text_lines_pure = text_lines
text_lines = pick("text_lines", text_lines_pure)  # noqa: F811 (the twin this process runs)


def _bounded(lines: list[bytes], limit: int) -> list[str | bytes | _Overlong]:
    """``lines`` with each one over ``limit`` bytes replaced by its :class:`_Overlong` marker."""
    return [_Overlong(len(line)) if len(line) > limit else line for line in lines]


def _bounded_readlines(readline: Callable[..., Any], limit: int) -> Iterator[Any]:
    """The lines of a file read with ``readline(limit + 1)``: never more than the bound of a line in
    memory; a line over it is read on to its end in pieces that are dropped, and given as :class:`_Overlong`."""
    size = limit + 1 if limit < (1 << 62) else -1
    while True:
        line = readline(size)
        if not line:
            return
        newline = b"\n" if isinstance(line, (bytes, bytearray)) else "\n"
        if size < 0 or len(line) < size or line.endswith(newline):
            yield line
            continue
        seen = len(line)
        while line and not line.endswith(newline):
            line = readline(size)
            seen += len(line)
        yield _Overlong(seen)


def _split_text(text: str) -> list[str]:
    """The lines of ``text``: split at ``\\n``, without the empty one after a final ``\\n``."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _real_fileno(stream: object) -> int | None:
    """The OS descriptor behind ``stream``, or None (no ``fileno``, or a file without one)."""
    try:
        return stream.fileno()  # type: ignore[attr-defined]  # duck-typed: any file object with a descriptor
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None


class LineSink:
    """Where stdout lines go: the real stdout (its descriptor, buffered until flush), a file object or a list.

    On the real stdout lines are kept as text and written out, encoded in one piece, when 64 KiB have
    gathered and on every :meth:`flush`; a closed pipe downstream raises :class:`StdoutClosedError`.

    Parameters
    ----------
    target : None, list or file
        None writes to the process's stdout; a list gets one item per line (without ``\\n``); a file
        object gets the text (or its UTF-8 bytes, if it takes only bytes).

    Examples
    --------
    >>> from nbkit.transport.pipe_io import LineSink
    >>> lines = []
    >>> sink = LineSink(lines)
    >>> sink.write("[2024-01-01T00:00:00 | jobs | 0] hello\\n")
    >>> lines
    ['[2024-01-01T00:00:00 | jobs | 0] hello']
    """

    def __init__(self, target: LineOutput) -> None:
        self.lines: list[str] | None = None
        self._fd: int | None = None
        self._file: IO[Any] | None = None
        self._buffer: list[str] = []
        self._size = 0
        #: Lines that reached the target (on the real stdout: were written out by ``os.write``).
        self.written = 0
        #: Lines lost because the reader downstream had gone: those buffered when a write failed, and
        #: every line written after that.
        self.lost = 0
        #: True once a write found the pipe closed downstream: nothing more can be written.
        self.closed = False
        #: Called once, with the error, when a write first finds the pipe closed downstream (the broker
        #: tells its app to stop there).
        self.on_closed: Callable[[StdoutClosedError], None] | None = None
        #: Called before buffered lines are written out: what must reach its destination first (the
        #: ``nbkit run`` log lines about the deliveries these lines settle).
        self.before_flush: Callable[[], None] | None = None
        stream = sys.stdout if target is None else target
        real = stream is sys.stdout or stream is sys.__stdout__  # a file given explicitly is written through it
        fd = _real_fileno(stream) if real else None
        if isinstance(stream, list):
            self.lines = stream
        elif fd is not None:
            stream.flush()  # what print() left in the file object's buffer goes out before the stage's lines
            self._fd = fd
        elif hasattr(stream, "write"):
            self._file = stream
        else:
            raise ConfigurationError(f"stdout must be None, a list or a writable file, not {stream!r}")

    def write(self, line: str) -> None:
        """Write one line (ending in ``\\n``).

        Parameters
        ----------
        line : str
            The line, with its ``\\n``.
        """
        if self._fd is not None:
            if self.closed:
                self.lost += 1
                raise _closed_error()
            self._buffer.append(line)
            self._size += len(line)
            if self._size >= CHUNK_SIZE:
                self.flush()
        elif self.lines is not None:
            self.lines.append(line[:-1] if line.endswith("\n") else line)
            self.written += 1
        else:
            assert self._file is not None
            if self.closed:
                self.lost += 1
                raise _closed_error()
            try:
                try:
                    self._file.write(line)
                except TypeError:
                    self._file.write(line.encode("utf-8"))
            except BrokenPipeError:
                self._broken(1)
            self.written += 1

    def flush(self) -> None:
        """Write out what is buffered (and flush a file object).

        Raises
        ------
        StdoutClosedError
            If the reader downstream has closed the pipe.
        """
        if self.closed:
            return  # nothing was buffered since: every write after the break raised
        if self.before_flush is not None:
            self.before_flush()
        try:
            if self._fd is not None and self._buffer:
                n = len(self._buffer)
                view = memoryview("".join(self._buffer).encode("utf-8"))
                self._buffer.clear()
                self._size = 0
                while view:
                    view = view[os.write(self._fd, view) :]
                self.written += n
            elif self._file is not None and hasattr(self._file, "flush"):
                self._file.flush()
        except BrokenPipeError:
            self._broken(n if self._fd is not None else 0)

    def _broken(self, lost: int) -> None:
        """The reader downstream has gone: ``lost`` lines were not written; raise after telling ``on_closed``.

        (A buffer cut short by the break counts whole: the reader that left read none of it for sure.)"""
        self._buffer.clear()
        self._size = 0
        self.lost += lost
        self.closed = True
        error = _closed_error()
        if self.on_closed is not None:
            self.on_closed(error)
        raise error from None


def _closed_error() -> StdoutClosedError:
    return StdoutClosedError("stdout closed by the next stage (broken pipe)")
