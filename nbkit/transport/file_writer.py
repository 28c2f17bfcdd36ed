"""Writing stream files: create or append, beacons as upstream writes them, shared or exclusive.

Every message reaches the OS with one ``os.write`` (a flush per message by default), so a follower
in another process sees it at once. Writers coordinate with an advisory lock (``flock``):

- shared (the default): any number of nbkit writers append to one file. Each append takes the lock
  for itself only; a writer that finds the file grown since its own last append first reads the new
  frames and beacons (last frame end, per-stream sequence numbers, running checksums, how many
  markers the beacons hold), so the file is byte for byte the one a single writer would have written
  (spec §6.2), and sequence numbers continue the file's.
- exclusive (``exclusive=True``): the writer holds the lock from opening to closing; nobody else
  appends meanwhile.

A program that appends without taking the lock (the Rust writer) is outside both guarantees.

The writer chooses one write route when it opens the file, and ``write`` hands every message to it
(:mod:`nbkit.transport.write_routes`): a shared writer's appends take the ``shared`` route
(:class:`~nbkit.transport.shared_appends.SharedRoute`: the lock and the catch-up around the pure append);
an exclusive writer takes the ``compiled`` route on the compiled core (``CompiledRoute`` of
:mod:`nbkit.transport._writer`, built next to ``nbkit.wire._speedups``: the common message in C, every
other write and every error handed to the pure route), else the ``pure`` one
(:class:`~nbkit.transport.write_routes.PureRoute`, the reference twin: same files, results and errors,
tests/transport/test_file_writer_twins.py). ``NBKIT_PURE_PYTHON=1`` or a missing build gives the pure
route to exclusive writers.

Every route reads and updates one state object (:class:`~nbkit.transport.writer_state.WriterState`, or its
compiled twin); the writer hands their bytes to the OS (``flush``, the cut-back of a failed write), resumes an
existing file with :mod:`nbkit.transport.writer_resume` and opens and locks it with
:mod:`nbkit.transport.file_lock`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NoReturn

from nbkit.errors import FileIOError, NbkitError
from nbkit.transport.file_lock import mark_exclusive, open_for_append, take_lock
from nbkit.transport.shared_appends import SharedRoute
from nbkit.transport.write_routes import PureRoute, WriteRoute
from nbkit.transport.writer_resume import resume_exclusive
from nbkit.transport.writer_state import (
    COMPILED,
    FOLD_BYTES,
    StreamBook,
    StreamState,
    WriterState,
    Written,
    now_ms,
)
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.ssformat import (
    DEFAULT_BEACON_INTERVAL,
    EOS_PAYLOAD,
    HEADER_SIZE,
    FileHeader,
    check_write_interval,
    encode_beacon,
    encode_header,
)

__all__ = ["DEFAULT_SIZE_LIMIT", "StreamWriter"]

#: Upstream's default file size limit (16 GiB).
DEFAULT_SIZE_LIMIT = 16 << 30


#: The compiled route's module (None: exclusive writers take the pure route too); a module global
#: that the twin tests and the write benchmark set to None to compare the routes.
_COMPILED = COMPILED


class StreamWriter:
    """Append messages to a ``.ss`` file, creating it (with its header) when it does not exist.

    When the file exists, the writer keeps its beacon interval, resumes after the last complete
    non-EOS frame (a trailing EOS is overwritten, an incomplete tail is cut off) and continues each
    stream's sequence. ``flush_every=N`` batches N messages per write (1 = flush every message).
    ``fsync=False`` (default) leaves the bytes to the operating system's buffering: safe against a
    killed process, not against power loss; ``fsync=True`` calls ``os.fsync`` after every flush, so a
    message is on the disk before ``write`` (or ``flush``) returns (docs/reliability.md has the cost).

    By default the writer is **shared**: other nbkit writers (other processes, ``nbkit publish``, a
    service's broker) may append to the same file at the same time. Each append (each flush, with
    ``flush_every > 1``: the lock is held from the first buffered message until the flush) takes the
    file's lock, first reads what the others appended since (their frames, the beacons' markers),
    cuts off a torn tail a killed writer left, and continues from there, so sequence numbers keep
    increasing by one per stream and the file is exactly what one writer would have written.
    ``next_seq``/``last_seq`` answer from what this writer knows, which another writer may have passed
    since. A writer waits up to ``lock_timeout`` seconds for the lock, then raises
    ``WriterLockedError``. ``exclusive=True`` takes the lock for the writer's whole life instead (no
    one else appends until it closes; the beacon marker round robin restarts at 0, as upstream's
    writer does on reopening). A program that appends without the lock (the Rust writer) can
    interleave with either mode and corrupt the file.

    Parameters
    ----------
    path : str or os.PathLike
        The stream file (created if missing).
    beacon_interval : int
        Bytes between beacons in a new file (an existing file keeps its own).
    file_name : str, optional
        The name stored in a new file's header (default: the path's base name).
    created_at_ms : int, optional
        A new file's creation time in epoch milliseconds (default: now).
    clock_ms : callable
        Returns the timestamp (epoch ms) of a message written without ``timestamp_ms``.
    flush_every : int
        Messages per ``os.write``.
    size_limit : int
        The file size (bytes) a write may not pass.
    existing_only : bool
        Refuse to create the file.
    exclusive : bool
        Hold the file's lock from opening until closing (no other writer meanwhile).
    lock_timeout : float
        Seconds an append waits for another writer's lock.
    strict_seq : bool
        Refuse an explicit ``seq`` that does not exceed the stream's last one.
    fsync : bool
        ``os.fsync`` after every flush: durable against power loss, not only against a killed process.

    See Also
    --------
    nbkit.StreamReader : Read the messages back, or follow them as they are written.
    nbkit.read_stream : A whole file as a DataFrame.

    Examples
    --------
    >>> from nbkit import StreamWriter
    >>> with StreamWriter("orders.ss", clock_ms=lambda: 1_700_000_000_000) as writer:
    ...     first = writer.write("orders", b'{"id": 1}')
    ...     second = writer.write("orders", b'{"id": 2}')
    >>> first.seq, second.seq, second.offset == first.end
    (1, 2, True)
    >>> one, two = StreamWriter("orders.ss"), StreamWriter("orders.ss")    # shared: both may append
    >>> one.write("orders", b'{"id": 3}').seq, two.write("orders", b'{"id": 4}').seq
    (3, 4)
    >>> one.close(); two.close()
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        beacon_interval: int = DEFAULT_BEACON_INTERVAL,
        file_name: str | None = None,
        created_at_ms: int | None = None,
        clock_ms: Callable[[], int] = now_ms,
        flush_every: int = 1,
        size_limit: int = DEFAULT_SIZE_LIMIT,
        existing_only: bool = False,
        exclusive: bool = False,
        lock_timeout: float = 10.0,
        strict_seq: bool = False,
        fsync: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.fsync = bool(fsync)
        check_write_interval(beacon_interval)
        if lock_timeout < 0:
            raise ValueError(f"lock_timeout must be 0 or more seconds, not {lock_timeout}")
        if flush_every < 1:
            raise ValueError(f"flush_every must be at least 1, not {flush_every}")
        compiled = _COMPILED if exclusive else None  # a shared writer's appends take the pure route
        #: what ``write`` reads on every message (the pure class, or its compiled twin with the same attributes)
        self._state: WriterState = WriterState(clock_ms) if compiled is None else compiled.WriterState(clock_ms)
        self._state.flush_every = flush_every
        self._size_limit = size_limit
        #: every stream's state, and the beacons' marker count
        self._book = StreamBook(StreamState if compiled is None else compiled.StreamState)
        # the state's ``hot``: key -> (its ASCII bytes, its stream's state on shard 0) for a key this writer
        # has written on shard 0: what ``write`` need not look up or check again; emptied when it closes
        self._state.direct = flush_every == 1 and not self.fsync  # each frame straight to the OS (nothing pending)
        self._fold_at = 0
        self.appended = False
        self.truncated_bytes = 0
        self.exclusive = exclusive
        self.lock_timeout = lock_timeout
        self.strict_seq = strict_seq
        # the write route, chosen once (write_routes); a shared writer's is also kept as _shared (its lock)
        pure = PureRoute(self)
        self._shared = None if exclusive else SharedRoute(self, pure)
        self._route: WriteRoute = pure
        if self._shared is not None:
            self._route = self._shared
        elif compiled is not None:
            self._route = compiled.CompiledRoute(self._state, self, pure, now_ms, Written)
        fd = self._state.fd = open_for_append(self.path, existing_only)
        try:
            take_lock(fd, self.path, lock_timeout, exclusive=exclusive)
            if self._shared is not None:
                self._shared.held = True
            else:
                mark_exclusive(fd)  # so a writer that waits in vain can say the lock is held for good
            size = os.fstat(fd).st_size
            if size == 0:
                name = file_name if file_name is not None else os.path.basename(self.path)
                created = created_at_ms if created_at_ms is not None else clock_ms()
                self.header = FileHeader(name, created, beacon_interval)
                head = encode_header(self.header)
                os.write(fd, head)
                self._state.offset = len(head)
                if self._state.offset % beacon_interval == 0:
                    os.write(fd, encode_beacon(0, ()))
                    self._state.offset += 7
            elif self._shared is None:
                found = resume_exclusive(self.path, fd, size, self._book)
                self.header, self._state.offset, self.truncated_bytes = found
                self.appended = True
            else:
                self._state.offset = HEADER_SIZE
                self._shared.catch_up(size)
                self.appended = True
        except NbkitError:  # e.g. WriterLockedError, itself an OSError: as it is
            self.close()
            raise
        except OSError as exc:  # e.g. a full disk or a read-only file system while writing the header
            self.close()
            raise FileIOError(
                f"{self.path}: cannot write the stream file ({exc.strerror or exc})", errno=exc.errno
            ) from exc
        except BaseException:
            self.close()
            raise
        self._fold_at = self._state.offset + FOLD_BYTES
        self._restop()
        if self._shared is not None:
            self._shared.release()

    @property
    def offset(self) -> int:
        """The file offset the next frame starts at (after everything written or buffered)."""
        return self._state.offset

    @property
    def clock_ms(self) -> Callable[[], int]:
        """Returns the timestamp (epoch ms) of a message written without ``timestamp_ms``."""
        return self._state.clock

    @clock_ms.setter
    def clock_ms(self, value: Callable[[], int]) -> None:
        self._state.clock = value

    @property
    def flush_every(self) -> int:
        """Messages per ``os.write`` (1: each message reaches the OS before ``write`` returns)."""
        return self._state.flush_every

    @flush_every.setter
    def flush_every(self, value: int) -> None:
        self._state.flush_every = value
        self._state.direct = value == 1 and not self._state.pending and not self.fsync

    @property
    def size_limit(self) -> int:
        """The file size (bytes) a write may not pass."""
        return self._size_limit

    @size_limit.setter
    def size_limit(self, value: int) -> None:
        self._size_limit = value
        self._restop()

    def _restop(self) -> None:
        """Set the state's ``stop``: ``write`` cuts nothing and checks no size limit for a frame ending before it,
        where no beacon boundary, fold of the running checksums or size limit is reached."""
        offset = self._state.offset
        interval = self.header.beacon_interval
        self._state.stop = min(offset - offset % interval + interval, self._fold_at, self._size_limit - 6)

    def next_seq(self, stream_key: str, shard_id: int = 0) -> int:
        """The sequence number the next message of this stream gets by default (1 in a fresh file).

        Parameters
        ----------
        stream_key : str
            The stream key.
        shard_id : int
            Its shard.

        Returns
        -------
        int
            The last sequence written for that stream, plus one.
        """
        state = self._book.streams.get((stream_key, shard_id))
        return 1 if state is None else state.seq + 1

    def last_seq(self, stream_key: str, shard_id: int = 0) -> int | None:
        """The last sequence number written for this stream, if any.

        Parameters
        ----------
        stream_key : str
            The stream key.
        shard_id : int
            Its shard.

        Returns
        -------
        int or None
            None when the file has no message of that stream.
        """
        state = self._book.streams.get((stream_key, shard_id))
        return None if state is None else state.seq

    def write(
        self,
        stream_key: str,
        payload: bytes,
        seq: int | None = None,
        shard_id: int = 0,
        timestamp_ms: int | None = None,
    ) -> Written:
        """Append one message; returns where it landed. The key must be a valid stream key.

        Parameters
        ----------
        stream_key : str
            The stream key (letters, digits, ``.``, ``_``, ``-``).
        payload : bytes
            The payload, stored as given.
        seq : int, optional
            The sequence number (default: :meth:`next_seq`).
        shard_id : int
            The shard.
        timestamp_ms : int, optional
            Epoch milliseconds (default: ``clock_ms()``).

        Returns
        -------
        Written
            A named tuple: ``stream_key``, ``shard_id``, ``seq``, ``timestamp_ms``, ``offset``, ``end``.

        Raises
        ------
        InvalidKeyError
            If the key is not a valid stream key.
        FileLimitError
            If the frame would take the file past ``size_limit`` (nothing is written).
        """
        # the route chosen at open; seq, shard_id and timestamp_ms are not keyword-only (though best given by
        # keyword) because CPython 3.11 calls a function with keyword-only parameters on a slower path:
        # that costs this extra call about 450 more instructions per message
        return self._route.write(stream_key, payload, seq, shard_id, timestamp_ms)

    @property
    def route(self) -> str:
        """The name of the write route ``write`` hands every message to (chosen when the writer opened the file):
        ``"shared"``, or for an exclusive writer ``"compiled"`` (on the compiled core) or ``"pure"``."""
        return self._route.name

    def flush(self) -> None:
        """Hand every buffered byte to the OS (readers in other processes then see it).

        Returns
        -------
        None
        """
        if not self._state.pending:
            return
        data = b"".join(self._state.pending) if len(self._state.pending) > 1 else self._state.pending[0]
        count = self._state.pending_count
        self._state.pending.clear()
        self._state.pending_count = 0
        self._state.direct = self._state.flush_every == 1 and not self.fsync
        self._send(data, count)
        if self.fsync:
            os.fsync(self._state.fd)
        if self._shared is not None:
            self._shared.release()  # a shared writer held the lock while the batch waited

    def _send(self, data: bytes, count: int) -> None:
        """Write ``data`` (the bytes of ``count`` messages, up to ``self._state.offset``) to the file."""
        start = self._state.offset - len(data)
        try:
            n = os.write(self._state.fd, data)
        except OSError as exc:
            self._failed(exc, count, start)
        except BaseException:  # a signal handler's exception: the batch goes out whole first, then it propagates
            self._send_rest(data, self._reached(start, len(data)), count, start)
            raise
        if n != len(data):
            self._send_rest(data, n, count, start)

    def _send_rest(self, data: bytes, n: int, count: int, start: int) -> None:
        """After a short write (rare) of ``data``, which starts at offset ``start``: hand over the rest.

        A signal handler's exception on the way is held until the rest is written (from where the file says
        the bytes stopped, so none is written twice), then raised."""
        view = memoryview(data)[n:]
        interrupted: BaseException | None = None
        while view:
            try:
                n = os.write(self._state.fd, view)
            except OSError as exc:
                self._failed(exc, count, start)
            except BaseException as exc:
                interrupted = interrupted or exc
                view = memoryview(data)[self._reached(start, len(data)) :]
                continue
            view = view[n:]
        if interrupted is not None:
            raise interrupted

    def _reached(self, start: int, size: int) -> int:
        """How many of the ``size`` bytes written from offset ``start`` are in the file (a write cut short by a
        signal handler's exception does not say): the descriptor's position tells on a regular file; where it
        cannot (a pipe), none is assumed."""
        try:
            return min(size, max(0, os.lseek(self._state.fd, 0, os.SEEK_CUR) - start))
        except OSError:
            return 0

    def _failed(self, exc: OSError, count: int, synced: int) -> NoReturn:
        """A write failed part-way (a full disk, an I/O error): cut the file back to its last complete
        frame (``synced``, where the failed bytes start) and close, so no later write lands after a
        partial frame; then raise."""
        self._state.hot.clear()
        if self._shared is not None:
            self._shared.held = False  # closing the descriptor releases the lock
        try:
            os.ftruncate(self._state.fd, synced)
        except OSError:
            pass  # the next writer cuts the partial frame off when it resumes
        fd, self._state.fd = self._state.fd, -1
        os.close(fd)
        raise FileIOError(
            f"{self.path}: writing at byte offset {synced} failed ({exc.strerror or exc}); the last "
            f"{count} message(s) are not in the file, which ends at its last complete frame. The writer is "
            "closed: fix the cause (free disk space) and open a new writer to continue",
            errno=exc.errno,
        ) from exc

    def write_eos(self) -> Written:
        """Append SeaStreamer's end-of-stream mark (key SEA_STREAMER_INTERNAL, seq 0, payload EOS).

        Returns
        -------
        Written
            Where the mark landed.
        """
        return self.write(INTERNAL_KEY, EOS_PAYLOAD, seq=0, shard_id=0)

    def close(self, *, eos: bool = False) -> None:
        """Flush, optionally write EOS, and release the lock.

        Parameters
        ----------
        eos : bool
            Write the end-of-stream mark first.

        Returns
        -------
        None
        """
        if self._state.fd < 0:
            return
        try:
            if eos:
                self.write_eos()
            self.flush()
        finally:
            self._state.hot.clear()  # a closed writer's writes go to _write, which refuses them
            if self._state.fd >= 0:  # a failed flush has closed it already
                os.close(self._state.fd)
                self._state.fd = -1
            if self._shared is not None:
                self._shared.held = False

    @property
    def closed(self) -> bool:
        """Whether the writer is closed (its lock released; writes are refused)."""
        return self._state.fd < 0

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
