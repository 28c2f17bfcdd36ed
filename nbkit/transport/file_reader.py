"""Reading stream files: replay to the end, or follow a growing file like ``tail -f``.

The reader demultiplexes beacons at every multiple of the interval (format spec §6.3), checks each
payload's CRC, and works on whole buffers read from its source (:mod:`nbkit.transport.source`: ``os.pread``
on a local file, range requests of ``block_size`` bytes on an fsspec URL): memory stays flat for any file size.

Two paths share that work. :func:`nbkit.wire.scan.scan_frames` is the fast one (compiled when the
compiled core is active): it walks the complete frames that lie inside the current buffer and before
the next beacon boundary, appending their fields to column lists (no per-message objects).
Everything else — a beacon, a frame cut by a boundary or by the buffer's end, a key seen for the
first time, the end-of-stream mark, a damaged frame — goes one frame at a time through
:func:`nbkit.wire.ssframe.decode_frame` (pure, no I/O), the one place that handles (and reports) those
cases. The reader owns a :class:`~nbkit.transport.frame_decode.FrameDecoder` (``decoder``) that holds the
source, the buffer, the key tables and the beacon grid, and does the reads around both paths.
``poll()`` hands out messages from a scanned batch; :meth:`StreamReader.read_columns` returns the columns
themselves (what ``read_stream``, the Dask partitions and ``nbkit cat`` build on).

This module holds the read loops of both modes (replay and follow); moving a reader
(:mod:`nbkit.transport.reader_seek`) and stepping over damage (:mod:`nbkit.transport.salvage`) are functions
over the decoder, and the records it hands out (:mod:`nbkit.transport.messages`) live in a module of their own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from nbkit.errors import FormatError
from nbkit.transport import reader_seek
from nbkit.transport.damage import DamagedRegion, check_on_bad_frames
from nbkit.transport.frame_decode import FrameDecoder, NeedBytes
from nbkit.transport.messages import Message, ReadEnd, make_message
from nbkit.transport.polling import NEED_MORE, NeedMore
from nbkit.transport.positions import FilePosition
from nbkit.transport.salvage import SALVAGE_HINT, SKIPPED, Skipped, only_beacon_left, skip_damage
from nbkit.transport.source import LOCAL_CHUNK, LocalSource, RemoteSource, open_source
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.scan import ColumnBuffers, FrameColumns, new_columns
from nbkit.wire.ssformat import HEADER_SIZE, Beacon, FileHeader

CHUNK = LOCAL_CHUNK  # bytes per local pread: large enough to amortise syscalls, small enough to stay flat


class StreamReader:
    """Read messages from a ``.ss`` file, in replay (``follow=False``) or follow mode.

    Iterate it for messages; ``end`` then says why the read ended. ``poll()`` is the non-blocking
    step a runtime uses: a Message, ``NEED_MORE`` (follow mode: wait), or ``None`` (ended).
    ``keys`` limits both to the messages of those stream keys: the others (the end-of-stream mark
    too) are still read and checked, then skipped without a Message being made for them.
    ``on_bad_frames``: ``"error"`` (default) raises at the first damaged frame (or, with
    ``errors="stop"``, ends there); ``"skip"`` steps from a damaged frame to the first frame after the
    next intact beacon (spec §6.5) and records the bytes it lost in ``damaged`` (a list of
    :class:`~nbkit.transport.damage.DamagedRegion`); ``"warn"`` does the same and warns once per region.
    Frames between the damage and that beacon are not searched for: the format's checksum covers only
    the payload, so a guessed frame start could turn garbage into a message the writer never wrote.
    After a cut-out or inserted run of bytes the beacons are found again on their shifted grid (a beacon
    there, another an interval later, and a checksum-verified frame after it: docs/reliability.md).

    Parameters
    ----------
    path : str or os.PathLike
        The stream file: a local path, or an fsspec URL (read by range requests, never downloaded whole).
    follow : bool
        Keep waiting for appended messages (``tail -f``) instead of ending at the end of the data.
    start : FilePosition, optional
        Where to start (default: the beginning).
    key : str, optional
        The stream key a ``sequence`` or ``timestamp`` start refers to.
    shard_id : int
        The shard of that key.
    errors : {"raise", "stop"}
        On damaged data: raise the :class:`~nbkit.FormatError`, or stop and record it in ``end``.
    poll_min, poll_max : float
        Follow mode: the first and the longest wait (seconds) between looks at the file.
    idle_timeout : float, optional
        Follow mode: stop after this many seconds without new data.
    stop_at_eos : bool
        End at the end-of-stream mark (SeaStreamer's EOS) rather than reading past it.
    keys : str or iterable of str, optional
        Yield only the messages of these stream keys.
    on_bad_frames : {"error", "warn", "skip"}
        ``"error"`` raises at the first damaged frame; ``"skip"`` resumes at the next intact beacon and records
        the region in ``damaged``; ``"warn"`` also warns once per region (a ``DamageWarning``).
    storage_options : dict, optional
        For a URL (``s3://``, ``gs://``, ``abfs://``, ``https://``, any fsspec URL): passed to its
        filesystem, as in pandas (credentials, ``endpoint_url``, ...). ``path`` may be such a URL.
    block_size : int, optional
        For a URL: bytes per range request (default 8 MiB, :data:`nbkit.transport.source.DEFAULT_BLOCK_SIZE`).

    See Also
    --------
    nbkit.read_stream : A whole file, or a window of it, as a DataFrame.
    nbkit.StreamWriter : Append messages to a stream file.
    nbkit.FilePosition : Where a reader starts.
    nbkit.FileBroker : Run handlers on a stream file's messages.

    Examples
    --------
    >>> from nbkit import StreamReader, StreamWriter
    >>> with StreamWriter("orders.ss") as writer:
    ...     for key in ("orders", "audit", "orders"):
    ...         _ = writer.write(key, b"{}")
    >>> with StreamReader("orders.ss") as reader:
    ...     print([(m.stream_key, m.seq) for m in reader])
    [('orders', 1), ('audit', 1), ('orders', 2)]
    >>> [m.seq for m in StreamReader("orders.ss", keys=["orders"])]
    [1, 2]
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        follow: bool = False,
        start: FilePosition | None = None,
        key: str | None = None,
        shard_id: int = 0,
        errors: str = "raise",
        poll_min: float = 0.001,
        poll_max: float = 1.024,
        idle_timeout: float | None = None,
        stop_at_eos: bool = True,
        keys: Iterable[str] | str | None = None,
        on_bad_frames: str = "error",
        storage_options: dict[str, Any] | None = None,
        block_size: int | None = None,
    ) -> None:
        self.on_bad_frames = check_on_bad_frames(on_bad_frames)
        #: The regions a salvage read (``on_bad_frames`` "warn" or "skip") stepped over, in file order.
        self.damaged: list[DamagedRegion] = []
        if errors not in ("raise", "stop"):
            raise ValueError(f"errors must be 'raise' or 'stop', not {errors!r}")
        if isinstance(keys, str):
            keys = (keys,)
        self.keys: frozenset[str] | None = None if keys is None else frozenset(keys)
        if self.keys is not None and not all(isinstance(k, str) for k in self.keys):
            raise TypeError(f"keys are stream key strings, not {sorted(map(repr, self.keys))}")
        self.path = os.fspath(path)
        self.follow = follow
        self.errors = errors
        self.poll_min = poll_min
        self.poll_max = poll_max
        self.idle_timeout = idle_timeout
        self.stop_at_eos = stop_at_eos
        #: Follow mode: called before each wait for the file to grow (``nbkit cat -f`` flushes its output).
        self.on_wait: Callable[[], None] | None = None
        self.end: ReadEnd | None = None
        #: Where the bytes come from: a local file, or an fsspec URL read by range requests
        #: (:mod:`nbkit.transport.source`; a remote one counts ``bytes_fetched`` and ``requests``).
        self.source: LocalSource | RemoteSource = open_source(
            path, storage_options=storage_options, block_size=block_size, follow=follow
        )
        #: How to open this file again (another reader of it: a key check, a Dask partition): ``storage_options``
        #: and ``block_size`` as given ({} for a local path).
        self.open_options: dict[str, Any] = (
            {"storage_options": storage_options, "block_size": block_size} if self.source.remote else {}
        )
        self._ahead: Iterator[Message] = iter(())  # messages scanned ahead of poll(), before the next boundary
        self._ahead_pos = -1  # ``pos`` while the next message of ``_ahead`` is the next one to hand out
        self._ahead_end = -1  # where that scan stopped (after any skipped frames)
        try:
            #: The frames of the file: its buffer, key tables and beacon grid (reads the header).
            self.decoder = FrameDecoder(self.source, self.path, self.keys)
        except BaseException:
            self.close()
            raise
        self.header: FileHeader = self.decoder.header
        self.interval: int = self.decoder.interval
        self.pos = HEADER_SIZE
        if start is not None:
            self.seek(start, key=key, shard_id=shard_id)

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Release the file descriptor (a context manager does it on exit).

        Returns
        -------
        None
        """
        self.source.close()

    def __enter__(self) -> StreamReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    @property
    def seen_keys(self) -> frozenset[str]:
        """Every stream key the reader has met so far, kept by its filters or not (the internal key too)."""
        return frozenset(self.decoder.known_keys.values())

    @property
    def beacons_seen(self) -> int:
        """How many beacons the read has crossed so far."""
        return self.decoder.beacons_seen

    @property
    def last_beacon(self) -> Beacon | None:
        """The last beacon crossed (None before the first)."""
        return self.decoder.last_beacon

    def size(self) -> int:
        """The file's current size in bytes.

        Returns
        -------
        int
            The size of the open file (it grows while a writer appends); for a URL in replay, the size the
            server reported at open.
        """
        return self.source.size()

    # -- positions -------------------------------------------------------------------------------
    def beacon_at(self, offset: int) -> Beacon:
        """The beacon at boundary ``offset`` (a positive multiple of the interval).

        Parameters
        ----------
        offset
            A beacon boundary of this file.

        Returns
        -------
        Beacon
            Its cut-frame ``remaining`` bytes and markers; ``size`` is its length.

        Raises
        ------
        FormatError
            The beacon is incomplete (the file ends inside it) or damaged.

        Examples
        --------
        >>> with StreamReader("big.ss") as r:          # doctest: +SKIP
        ...     r.beacon_at(r.interval).size
        46
        """
        return reader_seek.beacon_at(self.decoder, offset)

    def peek_beacon(self, offset: int) -> Beacon | None:
        """The beacon at boundary ``offset`` read with a small read of its own, or None when it is
        incomplete or damaged; the reader's position and buffer are left alone (a beacon survey, such as
        :func:`nbkit.transport.windows.find_window`, reads a few KiB per beacon, not a whole buffer).

        Parameters
        ----------
        offset
            A beacon boundary of this file (a positive multiple of the interval).

        Returns
        -------
        Beacon or None
            The beacon, when it parses and ends in its CR.
        """
        return reader_seek.peek_beacon(self.decoder, offset)

    def resync(self, n: int) -> int:
        """Move to the first whole frame after the n-th beacon (format spec §6.5).

        Parameters
        ----------
        n : int
            The beacon index; past the last beacon, the last one is used.

        Returns
        -------
        int
            The beacon index reached.
        """
        self.pos, index = reader_seek.resync(self.decoder, n)
        return index

    def seek_offset(self, offset: int) -> None:
        """Move to byte ``offset``, a frame start the caller knows (an earlier ``Message.offset`` or
        ``end``, a partition's first frame, a checkpoint) or a beacon boundary; the read goes on from
        there (``end`` is cleared, messages scanned ahead are dropped). Unlike :meth:`seek`, nothing is
        looked up: a wrong offset reads as damage.

        Parameters
        ----------
        offset : int
            The file offset of a frame (or of a beacon boundary, where the next frame follows the beacon).

        Returns
        -------
        None

        Examples
        --------
        >>> from nbkit import StreamReader, StreamWriter
        >>> with StreamWriter("offsets.ss") as writer:
        ...     second = [writer.write("orders", b"%d" % n) for n in range(3)][1]
        >>> with StreamReader("offsets.ss") as reader:
        ...     reader.seek_offset(second.offset)
        ...     [m.seq for m in reader]
        [2, 3]
        """
        if offset < HEADER_SIZE:
            raise ValueError(f"offset {offset} is inside the file header (frames start at {HEADER_SIZE} or later)")
        self.pos = offset
        self.end = None
        self._ahead_pos = -1

    def seek(self, position: FilePosition, *, key: str | None = None, shard_id: int = 0) -> None:
        """Move to ``position``; sequence and timestamp positions need the stream ``key``.

        Differs from upstream on purpose: the forward scan after the beacon survey only matches
        messages of the target stream (upstream stops at any stream's message, spec §11.2).

        Parameters
        ----------
        position : FilePosition
            Where to go.
        key : str, optional
            The stream key a ``sequence`` or ``timestamp`` position refers to.
        shard_id : int
            That key's shard.

        Returns
        -------
        None

        Raises
        ------
        SeekError
            If the file holds no such sequence or no message after that instant.
        """
        self.end = None
        self.decoder.phase = 0
        kind = position.kind
        if kind == "beginning":
            self.pos = HEADER_SIZE
        elif kind == "beacon":
            self.resync(position.value or 0)
        elif kind == "end":
            self.pos = reader_seek.live_start(self.decoder)
        elif kind in ("sequence", "timestamp"):
            if key is None:
                raise ValueError(f"seeking to {position!r} needs the stream key")
            self.pos = reader_seek.seek_by(self.decoder, kind, position.value or 0, key, shard_id)
        else:
            raise ValueError(f"unknown position {position!r}")

    def poll(self) -> Message | NeedMore | None:
        """The next message, ``NEED_MORE`` (follow mode, nothing complete yet) or ``None`` (ended).

        Returns
        -------
        Message, NEED_MORE or None
            The message read; the ``NEED_MORE`` sentinel when a following reader must wait and call again;
            None once the read has ended (``end`` says why).
        """
        while self.end is None:
            if self.pos == self._ahead_pos:  # not moved since the last message: the scanned batch goes on
                ahead = next(self._ahead, None)
                if ahead is not None:
                    self.pos = self._ahead_pos = ahead.end
                    return ahead
                self.pos = self._ahead_end  # past the skipped frames after the batch's last message
                self._ahead_pos = -1
            cols = new_columns()
            ends: list[int] = []
            stop = self.decoder.scan(self.pos, self.decoder.poll_keys, cols, ends)
            if cols.offset:
                self._ahead = map(make_message, zip(*cols, ends, strict=True))
                self._ahead_pos = self.pos
                self._ahead_end = stop
                continue
            if stop != self.pos:  # only frames of keys left out
                self.pos = stop
                continue
            msg = self._poll_frame()
            if msg is SKIPPED:
                continue
            if not isinstance(msg, Message) or self.keys is None or msg.stream_key in self.keys:
                return msg
        return None

    def ready(self) -> Iterator[Message]:
        """The messages :meth:`poll` would return next without reading the file: those already scanned.

        Each message is taken as it is handed out (``pos`` moves past it), so stopping early leaves the rest
        to :meth:`poll`; the iterator ends where :meth:`poll` would have to read, wait or end, and at once
        once the reader is moved (``seek``, ``resync``) or has ended. A runtime settling one message
        after another uses it to skip :meth:`poll`'s bookkeeping per message.

        Returns
        -------
        iterator of Message
            Possibly empty (nothing is scanned ahead before a :meth:`poll`, nor after the last one).

        Examples
        --------
        >>> from nbkit import StreamReader, StreamWriter
        >>> with StreamWriter("ready.ss") as writer:
        ...     for n in range(5):
        ...         _ = writer.write("orders", b"{}")
        >>> seqs = []
        >>> with StreamReader("ready.ss") as reader:
        ...     while (msg := reader.poll()) is not None:
        ...         seqs += [msg.seq] + [m.seq for m in reader.ready()]
        >>> seqs
        [1, 2, 3, 4, 5]
        """
        while self.end is None and self.pos == self._ahead_pos:  # as poll(): not moved since the last message
            ahead = next(self._ahead, None)
            if ahead is None:
                return
            self.pos = self._ahead_pos = ahead.end
            yield ahead

    def _parse_fresh(self) -> Message:
        """The frame at ``pos``; in follow mode a FormatError is checked once more against bytes read
        again: a writer that resumes after a crash cuts a torn frame off and writes new bytes in its
        place, so what this reader cached of that tail may be stale."""
        try:
            return self.decoder.frame(self.pos)
        except FormatError:
            if not self.follow:
                raise
            self.decoder.drop_buffer()
            return self.decoder.frame(self.pos)

    def _poll_frame(self) -> Message | NeedMore | Skipped | None:
        """:meth:`poll` for the one frame at ``pos`` that the fast scan left (see the module doc)."""
        try:
            msg = self._parse_fresh()
        except NeedBytes:
            if self.on_bad_frames != "error" and not self.follow:
                # a frame claiming to run past the end while intact beacons follow it: damage, not a torn tail
                problem = "the frame's header claims more bytes than the file holds"
                if self._skip_damage(problem, tail=True):
                    return SKIPPED
            return self._at_data_end()
        except FormatError as exc:
            err = exc if exc.path else exc.located(path=self.path)
            if self.on_bad_frames != "error":
                return SKIPPED if self._skip_damage(err.detail) else NEED_MORE
            if self.errors == "stop":
                self.end = ReadEnd("error", self.pos, self.size() - self.pos, err)
                return None
            raise err.with_hint(SALVAGE_HINT) from None
        if msg.is_eos and self.stop_at_eos:
            # bytes read ahead must not decide the end: an append since then (a retry copy of this very
            # replay) cuts the trailing EOS mark and writes in its place, so read the frame again from disk
            self.decoder.drop_buffer()
            try:
                msg = self.decoder.frame(self.pos)
            except (NeedBytes, FormatError):
                return NEED_MORE  # a writer is between its cut and its write: poll again
            if msg.is_eos:
                self.end = ReadEnd("eos", msg.end)
        self.pos = msg.end
        return msg

    def _skip_damage(self, problem: str, *, tail: bool = False) -> bool:
        """Salvage: move ``pos`` from the damaged frame there to the first frame after the next intact
        beacon (:func:`nbkit.transport.salvage.skip_damage`); False when there is nothing to move to."""
        resume = skip_damage(
            self.decoder,
            self.damaged,
            self.pos,
            problem,
            follow=self.follow,
            warn=self.on_bad_frames == "warn",
            tail=tail,
        )
        if resume is None:
            return False
        self.pos = resume
        self._ahead_pos = -1
        return True

    def _at_data_end(self) -> NeedMore | None:
        if self.follow:
            if self.source.removed():
                self.end = ReadEnd("removed", self.pos)
                return None
            return NEED_MORE
        trailing = max(0, self.size() - self.pos)
        if trailing and only_beacon_left(self.decoder, self.pos, trailing):
            trailing = 0
        self.end = ReadEnd("truncated" if trailing else "end", self.pos, trailing)
        return None

    def read_columns(
        self,
        *,
        accept: Callable[[str], bool] | None = None,
        progress: Callable[[int], object] | None = None,
        until: int | None = None,
    ) -> FrameColumns:
        """Read every message from ``pos`` on into column lists: what iterating would yield, without
        a Message object per message.

        :meth:`read_column_buffers` with each value as a Python object (a list per column).

        Parameters
        ----------
        accept, progress, until
            As for :meth:`read_column_buffers`.

        Returns
        -------
        FrameColumns
            A named tuple of parallel lists: ``stream_key``, ``shard_id``, ``seq``, ``timestamp_ms``,
            ``payload``, ``offset``.
        """
        return self.read_column_buffers(accept=accept, progress=progress, until=until).to_lists()

    def read_column_buffers(
        self,
        *,
        accept: Callable[[str], bool] | None = None,
        progress: Callable[[int], object] | None = None,
        until: int | None = None,
        separator: bytes = b"",
    ) -> ColumnBuffers:
        """Read every message from ``pos`` on into column buffers: typed arrays and one payload buffer.

        What iterating would yield, without a Python object per message (the frame scanner fills the
        buffers). Replay reads to the end (``end`` then says why it ended); follow mode stops at the
        current end of the data and can be called again.

        Parameters
        ----------
        accept : callable, optional
            ``accept(key) -> bool`` keeps only the messages of accepted keys (it is asked once per key; the
            other messages are still checked), within the reader's ``keys`` if it has any.
        progress : callable, optional
            ``progress(n)`` is told how many more bytes were read, now and then.
        until : int, optional
            Stop before the first frame that starts at or after this offset (``pos`` is then that
            frame's start, or past it when a beacon is there; ``end`` stays None unless the read ended
            first). The Dask partitions read their byte range so.
        separator : bytes
            Written after each payload in the payload buffer: ``b""`` or ``b"\\n"`` (NDJSON).

        Returns
        -------
        ColumnBuffers
            The messages' columns (:class:`~nbkit.wire.scan.ColumnBuffers`).
        """
        if self.keys is not None:
            only, asked = self.keys, accept
            accept = lambda key: key in only and (asked is None or asked(key))  # noqa: E731
        cols = ColumnBuffers(separator)
        codes: dict[str, int] = {}

        def code_of(key: str) -> int:
            if accept is not None and not accept(key):
                return -1
            code = codes.get(key)
            if code is None:
                code = codes[key] = len(cols.keys)
                cols.keys.append(key)
            return code

        keymap = {raw: code_of(key) for raw, key in self.decoder.scan_keys.items()}
        self._ahead_pos = -1
        last = self.pos
        limit = -1 if until is None else until
        # reads ahead stop at ``until`` (a remote range fetches its range and the one frame crossing it); the
        # limit only shortens reads ahead, never a read below what a parse needs, so it is always safe
        self.source.limit = until
        while self.end is None and (until is None or self.pos < until):
            self.pos = self.decoder.scan_columns(self.pos, keymap, cols, limit)
            if until is not None and self.pos >= until:
                break
            before = self.pos
            msg = self._poll_frame()
            if msg is SKIPPED:
                continue
            if not isinstance(msg, Message):
                break
            if until is not None and msg.offset >= until:
                self.pos = before  # a beacon lay before it: the frame belongs to the next range
                self.end = None
                break
            key = msg.stream_key
            code = code_of(key)
            if key != INTERNAL_KEY:
                keymap[key.encode("utf-8")] = code
            if code >= 0:
                cols.key_code.append(code)
                cols.shard_id.append(msg.shard_id)
                cols.seq.append(msg.seq)
                cols.timestamp_ms.append(msg.timestamp_ms)
                cols.offset.append(msg.offset)
                cols.data += msg.payload
                cols.data_end.append(len(cols.data))
                cols.data += cols.separator
            if progress is not None:
                progress(self.pos - last)
                last = self.pos
        if progress is not None and self.pos != last:
            progress(self.pos - last)
        self.source.limit = None
        return cols

    def __iter__(self) -> Iterator[Message]:
        delay = self.poll_min
        waited = 0.0
        while True:
            item = self.poll()
            if item is None:
                return
            if item is NEED_MORE:
                if self.idle_timeout is not None and waited >= self.idle_timeout:
                    self.end = ReadEnd("idle", self.pos, max(0, self.size() - self.pos))
                    return
                if self.on_wait is not None:
                    self.on_wait()
                time.sleep(delay)
                waited += delay
                delay = min(delay * 2, self.poll_max)
                continue
            delay = self.poll_min
            waited = 0.0
            yield item


__all__ = ["CHUNK", "StreamReader"]
