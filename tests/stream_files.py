"""Shorthands the tests read stream files with: a file's header, every message of it, and a file's bytes as
a pipe hands them out.

The first two are one :class:`~nbkit.transport.file_reader.StreamReader` opened and closed around the read.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any

from nbkit.transport.file_reader import StreamReader
from nbkit.transport.messages import Message
from nbkit.wire.ssformat import FileHeader


def read_header(path: str | os.PathLike) -> FileHeader:
    """The header of the stream file at ``path``."""
    with StreamReader(path) as r:
        return r.header


def iter_messages(path: str | os.PathLike, **options: Any) -> Iterator[Message]:
    """Every message of the stream file at ``path`` (a replay); ``options`` as for :class:`StreamReader`."""
    with StreamReader(path, **options) as r:
        yield from r


class Pipe(io.RawIOBase):
    """Non-seekable bytes handed out at most ``most`` a read (as a pipe or socket may)."""

    def __init__(self, data: bytes, most: int = 999) -> None:
        self._data = io.BytesIO(data)
        self._most = most

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        chunk = self._data.read(min(len(b), self._most))
        b[: len(chunk)] = chunk
        return len(chunk)
