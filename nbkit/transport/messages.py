"""What a stream reader hands out: a :class:`Message` per frame, and a :class:`ReadEnd` when a read ends.

Both are immutable named tuples (one ``Message`` is built per message read, and a tuple subclass is the
cheapest object with named fields to build); :class:`~nbkit.transport.file_reader.StreamReader` and the
readers built on it (``read_stream``, the Dask partitions, ``nbkit cat``) share them.
"""

from __future__ import annotations

from functools import partial
from typing import Literal, NamedTuple, get_args

from nbkit.errors import NbkitError
from nbkit.wire.ssformat import is_eos
from nbkit.wire.ssframe import Frame

__all__ = ["END_REASONS", "EndReason", "Message", "ReadEnd", "make_message"]


class Message(Frame):
    """One message frame: where it starts (``offset``) and ends (``end``) in the file, and its fields.

    A named tuple, as :class:`StreamReader <nbkit.StreamReader>` yields it: the fields of the decoded
    :class:`~nbkit.wire.ssframe.Frame`, with what a reader's caller asks of a message.

    Parameters
    ----------
    stream_key : str
        The stream key (``SEA_STREAMER_INTERNAL`` for the end-of-stream mark).
    shard_id : int
        The shard (0 unless a writer says otherwise).
    seq : int
        The sequence number within the stream key (from 1 in a file).
    timestamp_ms : int
        When it was written, in epoch milliseconds.
    payload : bytes
        The payload as stored (an ``rs1:``/``rs2:`` envelope is not decoded here).
    offset : int
        The byte offset where the frame starts.
    end : int
        The byte offset just after the frame.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b'{"id": 1}', timestamp_ms=1_700_000_000_000)
    >>> message = next(iter(StreamReader("orders.ss")))
    >>> message.stream_key, message.seq, message.payload, message.offset
    ('orders', 1, b'{"id": 1}', 128)
    """

    __slots__ = ()

    @property
    def is_eos(self) -> bool:
        """Whether this is SeaStreamer's end-of-stream mark (not a message of any stream)."""
        return is_eos(self.stream_key, self.payload)


#: Build a Message from a (key, shard, seq, ts, payload, offset, end) tuple at C speed.
make_message = partial(tuple.__new__, Message)


#: Why a read ended: the values of :attr:`ReadEnd.reason`.
EndReason = Literal["eos", "end", "truncated", "removed", "idle", "error", "window"]
END_REASONS: tuple[EndReason, ...] = get_args(EndReason)


class _ReadEndFields(NamedTuple):
    """The fields of :class:`ReadEnd` (a named tuple: immutable, and JSON-friendly inside ``frame.attrs``)."""

    reason: EndReason
    offset: int
    trailing_bytes: int = 0
    error: NbkitError | None = None


class ReadEnd(_ReadEndFields):
    """Why a read ended, and where: a small immutable record whose ``str()`` is one sentence for people.

    ``reason`` is ``eos``, ``end`` (clean end of data), ``truncated`` (a partial frame at the
    tail: ``trailing_bytes`` from ``offset``), ``removed`` (file deleted while followed), ``idle`` (a
    follow read stopped after ``idle_timeout`` seconds without new data), ``error`` (with
    ``errors="stop"``; ``error`` holds the problem) or ``window`` (``read_stream`` with ``end=`` stopped at
    the beacon after which every wanted key is past the end: the rest was not read). A reader's ``end``
    holds one once it has ended, and ``read_stream`` puts it in ``frame.attrs["read_end"]``. It is a named
    tuple, so pandas can copy it with
    the frame and ``DataFrame.to_parquet`` can store it (as a JSON list) with the other ``attrs``.

    Parameters
    ----------
    reason : {"eos", "end", "truncated", "removed", "idle", "error", "window"}
        One of the reasons above; any other value raises ValueError.
    offset : int
        The byte offset where reading stopped.
    trailing_bytes : int
        Bytes after ``offset`` that are not a complete frame.
    error : NbkitError, optional
        The problem, when ``reason`` is ``error``.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     _ = writer.write("orders", b"{}")
    >>> reader = StreamReader("orders.ss")
    >>> _ = list(reader)
    >>> reader.end
    ReadEnd(reason='end', offset=168, trailing_bytes=0, error=None)
    >>> print(reader.end)
    ended at the end of the data (offset 168)
    """

    __slots__ = ()

    def __new__(
        cls, reason: EndReason, offset: int, trailing_bytes: int = 0, error: NbkitError | None = None
    ) -> ReadEnd:
        if reason not in END_REASONS:
            raise ValueError(f"ReadEnd reason {reason!r} is not one of {', '.join(END_REASONS)}")
        return super().__new__(cls, reason, offset, trailing_bytes, error)

    def __str__(self) -> str:
        return self.describe()

    def __copy__(self) -> ReadEnd:
        return self  # immutable: a copy is the record itself

    def __deepcopy__(self, memo: dict[int, object]) -> ReadEnd:
        # pandas deep-copies ``frame.attrs`` on every operation; the record (and the error it may hold,
        # whose constructor may not accept its own args back) is immutable, so it is shared, not copied.
        return self

    def describe(self) -> str:
        """One sentence for people: why and where the read ended (what ``str(end)`` gives).

        Returns
        -------
        str
            For example ``"ended at the end-of-stream mark (offset 4096)"``.

        Examples
        --------
        >>> from nbkit import ReadEnd
        >>> ReadEnd("removed", 4096).describe()
        'ended at offset 4096: the file was removed'
        """
        if self.reason == "eos":
            return f"ended at the end-of-stream mark (offset {self.offset})"
        if self.reason == "end":
            return f"ended at the end of the data (offset {self.offset})"
        if self.reason == "truncated":
            return (
                f"ended at offset {self.offset}: {self.trailing_bytes} trailing bytes are not a complete "
                "frame (a writer may still be writing, or it stopped mid-frame)"
            )
        if self.reason == "removed":
            return f"ended at offset {self.offset}: the file was removed"
        if self.reason == "window":
            return f"stopped at offset {self.offset}: the window's end (later messages are past it)"
        if self.reason == "idle":
            tail = f"; {self.trailing_bytes} trailing bytes are not a complete frame" if self.trailing_bytes else ""
            return f"stopped following at offset {self.offset}: no new data within the idle timeout{tail}"
        return f"stopped at offset {self.offset}: {self.error}"
