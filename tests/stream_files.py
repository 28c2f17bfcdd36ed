"""Shorthands the tests read stream files with: a file's header, and every message of it.

Both are one :class:`~nbkit.transport.file_reader.StreamReader` opened and closed around the read.
"""

from __future__ import annotations

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
