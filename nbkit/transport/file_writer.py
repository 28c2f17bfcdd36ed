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

On the compiled core an exclusive writer's ``write`` runs a compiled short route
(:mod:`nbkit.transport._writer`, built next to ``nbkit.wire._speedups``): the common message (a known
key on shard 0, the default sequence number, a bytes payload, a frame reaching no beacon boundary)
is accounted, encoded and handed to ``write(2)`` in C; every other write, and every error, goes to
the pure-Python ``StreamWriter.write`` below, its reference twin (same files, results and errors:
tests/transport/test_file_writer_twins.py). ``NBKIT_PURE_PYTHON=1`` or a missing build gives the pure
route everywhere; shared writers always take it.

Both routes read and update one state object (:class:`~nbkit.transport.writer_state.WriterState`, or its
compiled twin); the shared route's lock and catch-up are :mod:`nbkit.transport.shared_appends`, resuming an
existing file :mod:`nbkit.transport.writer_resume`, and opening and locking it :mod:`nbkit.transport.file_lock`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NoReturn

from nbkit.errors import ClosedError, FileIOError, FileLimitError, FormatError, NbkitError
from nbkit.transport.file_lock import mark_exclusive, open_for_append, take_lock
from nbkit.transport.shared_appends import SharedAppends
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
from nbkit.wire.keys import INTERNAL_KEY, validate_key
from nbkit.wire.ssformat import (
    DEFAULT_BEACON_INTERVAL,
    EOS_PAYLOAD,
    HEADER_SIZE,
    FileHeader,
    check_write_interval,
    encode_beacon,
    encode_frame,
    encode_header,
)

__all__ = ["DEFAULT_SIZE_LIMIT", "StreamWriter"]

#: Upstream's default file size limit (16 GiB).
DEFAULT_SIZE_LIMIT = 16 << 30


#: The compiled short route's module (None: exclusive writers run on the pure route too); a module global
#: that the twin tests and the write benchmark set to None to compare the routes.
_COMPILED = COMPILED
_tuple_new = tuple.__new__  # builds a Written without its __new__'s argument handling (one per message)


def _as_payload(payload: object) -> bytes:
    """A bytes-like payload as bytes (a memoryview's bytes, not its items); anything else is refused."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
    return bytes(payload)


class StreamWriter(SharedAppends):
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
        #: what ``write`` reads on every message; the compiled short route, if any, works on it too
        self._state: Any = WriterState(clock_ms) if compiled is None else compiled.WriterState(clock_ms)
        short = None if compiled is None else compiled.ShortRoute(self._state, now_ms, Written)
        self._state.flush_every = flush_every
        self._size_limit = size_limit
        #: every stream's state, and the beacons' marker count
        self._book = StreamBook(StreamState if compiled is None else compiled.StreamState)
        self._prefixes: dict[str, bytes] = {}  # key -> its frame prefix (length byte + key), once validated
        # the state's ``hot``: key -> (its ASCII bytes, its stream's state on shard 0) for a key this writer
        # has written on shard 0: what ``write`` need not look up or check again; emptied when it closes
        self._state.direct = flush_every == 1 and not self.fsync  # each frame straight to the OS (nothing pending)
        self._fold_at = 0
        self.appended = False
        self.truncated_bytes = 0
        self.exclusive = exclusive
        self.lock_timeout = lock_timeout
        self.strict_seq = strict_seq
        self._held = False  # shared mode: this writer holds the lock (during an append or a batch)
        self._eos_last = False  # shared mode: the last message this writer wrote is the EOS mark
        fd = self._state.fd = open_for_append(self.path, existing_only)
        try:
            take_lock(fd, self.path, lock_timeout, exclusive=exclusive)
            if exclusive:
                mark_exclusive(fd)  # so a writer that waits in vain can say the lock is held for good
            self._held = True
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
            elif exclusive:
                found = resume_exclusive(self.path, fd, size, self._book)
                self.header, self._state.offset, self.truncated_bytes = found
                self.appended = True
            else:
                self._state.offset = HEADER_SIZE
                self._catch_up(size)
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
        if not exclusive:
            self._release()
            self._pure_write = StreamWriter.write  # the shared route's append (the function, see SharedAppends)
            # every append goes through _shared_write (lock, catch up, write, unlock); an instance
            # attribute, so the exclusive writer's ``write`` is the method itself, with no check of the mode
            self.write = self._shared_write  # type: ignore[method-assign]
        elif short is not None:
            # the compiled short route; it hands every other write (and every error) to StreamWriter.write
            short.attach(self, StreamWriter.write.__get__(self))
            self.write = short.write  # type: ignore[method-assign]

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

    # -- writing ---------------------------------------------------------------------------------
    def _key_prefix(self, stream_key: str) -> bytes:
        """The first bytes of a frame of ``stream_key`` (its length and ASCII bytes); the key is
        validated the first time this writer sees it."""
        if stream_key != INTERNAL_KEY:
            validate_key(stream_key)
        raw = stream_key.encode("ascii")
        prefix = self._prefixes[stream_key] = bytes((len(raw),)) + raw
        return prefix

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
        *,
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
        # One path for every message; the first message of a stream (on shard 0, with the default seq)
        # puts its key in the state's hot, and the next ones skip what that proved: the key is valid, the stream
        # has its state, no strict_seq check applies. The frame encoder checks every field, and a
        # frame ending before the state's stop reaches no beacon boundary, checksum fold or size limit.
        ws = self._state
        try:
            hot = ws.hot.get(stream_key) if seq is None and shard_id == 0 else None
        except TypeError:  # not a key (unhashable): _stream_of says what is wrong
            hot = None
        if hot is None:
            raw_key, state, seq = self._stream_of(stream_key, shard_id, seq)
        else:
            raw_key, state = hot
            seq = state.seq + 1
        if payload.__class__ is not bytes:
            payload = _as_payload(payload)
        if timestamp_ms is None:
            clock = ws.clock
            timestamp_ms = time.time_ns() // 1_000_000 if clock is now_ms else clock()
        try:  # the wire encoder (compiled when the compiled core is active); it says which field is wrong
            frame, crc = encode_frame(raw_key, shard_id, seq, timestamp_ms, payload)
        except FormatError as exc:
            raise exc.located(path=self.path) from None
        start = ws.offset
        end = start + len(frame)
        if state is None or end >= ws.stop:
            return self._write_at_mark(frame, crc, stream_key, shard_id, seq, timestamp_ms, raw_key, state)
        if seq > state.seq:  # an explicit seq may be lower (without strict_seq)
            state.seq = seq
        if timestamp_ms > state.ts:
            state.ts = timestamp_ms
        state.crcs.append(crc)  # folded every FOLD_BYTES (stop) into the running checksum
        ws.offset = end
        if ws.direct:  # the default: straight to the OS
            try:
                n = os.write(ws.fd, frame)
            except OSError as exc:
                self._failed(exc, 1, start)
            except BaseException:  # a signal handler's exception (os.write retries EINTR otherwise):
                self._send_rest(frame, 0, 1, start)  # the frame goes out whole first, then it propagates
                raise
            if n != end - start:
                self._send_rest(frame, n, 1, start)
        else:
            ws.pending.append(frame)
            ws.pending_count += 1
            if ws.pending_count >= ws.flush_every:
                self.flush()
        return _tuple_new(Written, (stream_key, shard_id, seq, timestamp_ms, start, end))

    def _stream_of(self, stream_key: str, shard_id: int, seq: int | None) -> tuple[bytes, StreamState | None, int]:
        """For ``write`` of a key not in the hot keys: refuse a closed writer, an invalid key and (``strict_seq``)
        a seq that does not increase; return the key's bytes, the stream's state (None for a new
        stream) and the sequence number."""
        if self._state.fd < 0:
            raise ClosedError(f"{self.path}: the writer is closed")
        prefix = self._prefixes.get(stream_key) if type(stream_key) is str else None
        if prefix is None:
            prefix = self._key_prefix(stream_key)
        state = self._book.streams.get((stream_key, shard_id))
        if seq is None:
            if state is None:
                seq = 1
            else:
                seq = state.seq + 1
                if shard_id == 0:  # a stream read from the file (resumed, caught up): hot from now on
                    self._state.hot[stream_key] = (prefix[1:], state)
        elif self.strict_seq and stream_key != INTERNAL_KEY:
            self._check_increasing(stream_key, shard_id, seq)
        return prefix[1:], state, seq

    def _write_at_mark(
        self,
        frame: bytes,
        crc: int,
        stream_key: str,
        shard_id: int,
        seq: int,
        ts: int,
        raw_key: bytes,
        state: StreamState | None,
    ) -> Written:
        """``write`` of an encoded frame that starts a stream or reaches ``stop``: check the size limit,
        account the message, cut the frame at each beacon boundary it reaches (§6), fold the running
        checksums once ``FOLD_BYTES`` went by, and give a stream on shard 0 its hot entry."""
        start = self._state.offset
        total = len(frame)
        if start + total + 7 > self._size_limit:
            raise FileLimitError(
                f"writing {total} more bytes would pass the size limit of {self._size_limit} bytes; start a new file",
                path=self.path,
                offset=start,
            )
        if state is None:
            state = self._book.account(stream_key, shard_id, seq, ts, b"", crc)
        else:
            state.note(seq, ts, crc)
        end, self._state.offset = self._book.cut(frame, start, self.header.beacon_interval, self._state.pending)
        if self._state.offset >= self._fold_at:
            self._book.fold()
            self._fold_at = self._state.offset + FOLD_BYTES
        self._restop()
        if shard_id == 0 and type(stream_key) is str and stream_key not in self._state.hot:
            self._state.hot[stream_key] = (raw_key, state)
        self._state.pending_count += 1
        if self._state.pending_count >= self._state.flush_every:
            self.flush()
        return _tuple_new(Written, (stream_key, shard_id, seq, ts, start, end))

    def _check_increasing(self, stream_key: str, shard_id: int, seq: object) -> None:
        """``strict_seq``: refuse an explicit sequence number that does not pass the stream's last."""
        known = self._book.streams.get((stream_key, shard_id))
        if known is not None and isinstance(seq, int) and seq <= known.seq:
            shard = f" shard {shard_id}" if shard_id else ""
            raise FormatError(
                f"sequence {seq} of stream {stream_key!r}{shard} does not increase: the file's last is "
                f"{known.seq}; leave the sequence out to get {known.seq + 1}",
                path=self.path,
            )

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
        if not self.exclusive:
            self._release()  # a shared writer held the lock while the batch waited

    def _send(self, data: bytes, count: int) -> None:
        """Write ``data`` (the bytes of ``count`` messages, up to ``self._state.offset``) to the file."""
        try:
            n = os.write(self._state.fd, data)
        except OSError as exc:
            self._failed(exc, count, self._state.offset - len(data))
        if n != len(data):
            self._send_rest(data, n, count, self._state.offset - len(data))

    def _send_rest(self, data: bytes, n: int, count: int, start: int) -> None:
        """After a short write (rare) of ``data``, which starts at offset ``start``: hand over the rest."""
        view = memoryview(data)[n:]
        try:
            while view:
                n = os.write(self._state.fd, view)
                view = view[n:]
        except OSError as exc:
            self._failed(exc, count, start)

    def _failed(self, exc: OSError, count: int, synced: int) -> NoReturn:
        """A write failed part-way (a full disk, an I/O error): cut the file back to its last complete
        frame (``synced``, where the failed bytes start) and close, so no later write lands after a
        partial frame; then raise."""
        self._state.hot.clear()
        self._held = False  # closing the descriptor releases the lock
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
            self._held = False

    @property
    def closed(self) -> bool:
        """Whether the writer is closed (its lock released; writes are refused)."""
        return self._state.fd < 0

    def __enter__(self) -> StreamWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
