"""A stream file's bytes from an open binary file object (``io.BytesIO``, ``open(path, "rb")``, a socket's file).

A :class:`FileObjectSource` has what a reader needs of a :class:`~nbkit.transport.source.LocalSource`, so a
:class:`~nbkit.transport.file_reader.StreamReader` (and through it ``read_stream``, ``read_arrow`` and
:class:`~nbkit.tabular.reader.FrameReader`) reads a file object as it reads a path:

- **seekable** objects (``seekable()`` true) are read with ``seek`` and ``read``; byte 0 of the stream is
  where the object stood when it was opened (as pandas reads from a handle's current position), and the
  object is left open (the caller owns it);
- a **non-seekable** object (a pipe, a socket, a decompressor) is read front to back once. Only a bounded
  window of its bytes is kept (what the reader still needs: the block being parsed and the one before),
  so memory stays flat for any length. Reads that would go back before that window, a time or sequence
  seek, a ``start=`` or ``end=``, raise :class:`NotSeekableError` saying why and what to pass instead.

A source is given to a reader in place of a path (:func:`open_source` hands it on as it is); its
``__fspath__`` returns its :attr:`name` (the file's name, or ``<BytesIO>``), so the reader's messages
and errors name it.
"""

from __future__ import annotations

import io
import os
from typing import IO, Any

from nbkit.errors import InvalidArgumentError, NbkitError
from nbkit.transport.source import LOCAL_CHUNK

__all__ = ["FileObjectSource", "NotSeekableError", "is_file_object"]


class NotSeekableError(NbkitError, io.UnsupportedOperation):
    """A read asked a non-seekable file object for bytes it has passed (a seek, a window, a look back).

    Examples
    --------
    >>> import io
    >>> class Pipe(io.RawIOBase):
    ...     def readable(self): return True
    ...     def readinto(self, b): return 0
    >>> source = FileObjectSource(Pipe())
    >>> try:
    ...     source.require_seekable("start=")
    ... except NotSeekableError as err:
    ...     print(str(err).split(";")[0])
    <Pipe>: start= needs a seekable file object, and this one is read front to back once
    """


def is_file_object(value: object) -> bool:
    """Whether ``value`` is an open file object to read bytes from (it has a ``read`` method; not a path).

    Parameters
    ----------
    value : object
        What a reader was given.

    Returns
    -------
    bool

    Examples
    --------
    >>> import io
    >>> is_file_object(io.BytesIO(b"")), is_file_object("orders.ss")
    (True, False)
    """
    return callable(getattr(value, "read", None)) and not isinstance(value, (str, bytes, os.PathLike))


class FileObjectSource:
    """The bytes of an open binary file object, as a reader's source (see the module doc).

    Parameters
    ----------
    fileobj : binary file object
        Anything with ``read(n) -> bytes``; ``seekable()``/``seek``/``tell`` when it can seek.
    name : str, optional
        What messages call it (default: its ``name`` attribute, else ``<TypeName>``).
    block_size : int, optional
        Bytes per read (default 4 MiB).

    Raises
    ------
    TypeError
        The object reads text (``str``), not bytes; the message says to open it in binary mode.

    Examples
    --------
    >>> import io
    >>> source = FileObjectSource(io.BytesIO(b"0123456789"))
    >>> source.pread(4, 3), source.size(), source.name
    (b'3456', 10, '<BytesIO>')
    """

    remote = False

    def __init__(self, fileobj: IO[bytes] | Any, *, name: str | None = None, block_size: int | None = None) -> None:
        if not is_file_object(fileobj):
            raise TypeError(f"a file object has a read() method; {type(fileobj).__name__} has none")
        if isinstance(fileobj, io.TextIOBase):
            raise TypeError(
                "a stream file is binary: open it with open(path, 'rb') (or pass io.BytesIO), not in text mode"
            )
        given = getattr(fileobj, "name", None)
        self.name: str = name or (given if isinstance(given, str) else f"<{type(fileobj).__name__}>")
        self.block_size = LOCAL_CHUNK if block_size is None else int(block_size)
        if self.block_size < 1:
            raise InvalidArgumentError(f"block_size must be a positive number of bytes, not {block_size}")
        self.probe_size = self.block_size
        self.limit: int | None = None
        self._f = fileobj
        self.seekable = _seekable(fileobj)
        self._origin = fileobj.tell() if self.seekable else 0
        # non-seekable: the kept window of bytes, starting at stream offset ``_base``; ``_eof``: read to the end
        self._buf = bytearray()
        self._base = 0
        self._eof = False

    def __fspath__(self) -> str:
        return self.name

    def require_seekable(self, what: str) -> None:
        """Raise :class:`NotSeekableError` unless the object can seek (``what``: the option that needs it).

        Parameters
        ----------
        what : str
            The option or operation, for the message (``"start="``).
        """
        if not self.seekable:
            raise NotSeekableError(
                f"{self.name}: {what} needs a seekable file object, and this one is read front to back once; "
                "read it whole and filter the frame, or save it to a file (or io.BytesIO) first"
            )

    def pread(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes from stream offset ``offset`` (fewer at the end).

        Parameters
        ----------
        n : int
            How many bytes.
        offset : int
            From where (byte 0: where the object stood when the source was made).

        Returns
        -------
        bytes
        """
        if n <= 0:
            return b""
        if self.seekable:
            self._f.seek(self._origin + offset)
            return _read_exactly(self._f, n)
        if offset < self._base:
            raise NotSeekableError(
                f"{self.name}: the read went back to byte {offset}, before the bytes a non-seekable file object "
                f"still holds (from byte {self._base}); read it from a seekable object (a file, io.BytesIO)"
            )
        end = offset + n
        while not self._eof and self._base + len(self._buf) < end:
            data = _read_exactly(self._f, max(self.block_size, end - self._base - len(self._buf)))
            if not data:
                self._eof = True
                break
            self._buf += data
        start = offset - self._base
        out = bytes(self._buf[start : start + n])
        # keep one block before the read: a parse that looks back at the frame it began stays served
        drop = offset - self.block_size - self._base
        if drop > 0:
            del self._buf[:drop]
            self._base += drop
        return out

    def size(self) -> int:
        """The stream's size; for a non-seekable object, the bytes seen so far (the size once at its end).

        Returns
        -------
        int
        """
        if self.seekable:
            here = self._f.tell()
            end = self._f.seek(0, os.SEEK_END)
            self._f.seek(here)
            return int(end) - self._origin
        return self._base + len(self._buf)

    def stamp(self) -> tuple[Any, ...]:
        """What identifies this object: its name, identity and (seekable) size.

        Returns
        -------
        tuple
        """
        return (self.name, id(self._f), self.size() if self.seekable else None)

    def removed(self) -> bool:
        """Always False: an open object cannot be removed from under its reader.

        Returns
        -------
        bool
        """
        return False

    def close(self) -> None:
        """Drop the kept bytes; the file object itself stays open (the caller owns it)."""
        self._base += len(self._buf)
        self._buf = bytearray()


def _seekable(f: Any) -> bool:
    try:
        return bool(f.seekable()) and callable(getattr(f, "tell", None))
    except (AttributeError, ValueError, OSError):
        return False


def _read_exactly(f: Any, n: int) -> bytes:
    """``n`` bytes from ``f`` (fewer only at its end): a raw object or a socket may return short reads."""
    data = f.read(n)
    if data is None:
        data = b""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(
            f"the file object returned {type(data).__name__} from read(); a stream file is binary: "
            "open it with open(path, 'rb') (or pass io.BytesIO)"
        )
    if len(data) >= n or not data:
        return bytes(data)
    parts = [bytes(data)]
    got = len(data)
    while got < n:
        more = f.read(n - got)
        if not more:
            break
        parts.append(bytes(more))
        got += len(more)
    return b"".join(parts)
