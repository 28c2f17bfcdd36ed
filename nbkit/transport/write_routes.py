"""A stream writer's write routes: the typed :class:`WriteRoute` and its pure-Python implementation.

:class:`~nbkit.transport.file_writer.StreamWriter` chooses one route when it opens the file and its
``write`` hands every message to that route's ``write``:

- ``pure`` (:class:`PureRoute`, here): an exclusive writer's route in Python, the reference twin of the others;
- ``compiled`` (``CompiledRoute`` of :mod:`nbkit.transport._writer`): an exclusive writer's route on the
  compiled core, which takes the common message in C and hands every other one, and every error, to a
  :class:`PureRoute`;
- ``shared`` (:class:`~nbkit.transport.shared_appends.SharedRoute`): a shared writer's, which takes the
  file's lock, catches up with the other writers' appends and appends through a :class:`PureRoute`.

Every route reads and updates the writer's one state object (:mod:`nbkit.transport.writer_state`) and leaves
the handing of bytes to the OS (``flush``, a failed write's cut-back) to the writer.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Protocol

from nbkit.errors import ClosedError, FileLimitError, FormatError
from nbkit.transport.writer_state import FOLD_BYTES, StreamState, WriterState, Written, now_ms
from nbkit.wire.keys import INTERNAL_KEY, validate_key
from nbkit.wire.ssformat import encode_frame

if TYPE_CHECKING:
    from nbkit.transport.file_writer import StreamWriter

__all__ = ["PureRoute", "WriteRoute"]

_tuple_new = tuple.__new__  # builds a Written without its __new__'s argument handling (one per message)


class WriteRoute(Protocol):
    """How a writer's ``write`` puts one message in the file (chosen once, when the writer opens it).

    ``name`` says which route it is (``"pure"``, ``"compiled"`` or ``"shared"``); ``write`` takes
    ``StreamWriter.write``'s arguments, all of them and in its order, and gives its result and errors.
    """

    @property
    def name(self) -> str:
        """Which route this is: ``"pure"``, ``"compiled"`` or ``"shared"``."""
        ...

    def write(
        self, stream_key: str, payload: bytes, seq: int | None, shard_id: int, timestamp_ms: int | None, /
    ) -> Written:
        """Append one message (``StreamWriter.write``)."""
        ...


def _as_payload(payload: object) -> bytes:
    """A bytes-like payload as bytes (a memoryview's bytes, not its items); anything else is refused."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):
        raise TypeError(f"payload must be bytes, not {type(payload).__name__}")
    return bytes(payload)


class PureRoute:
    """The pure-Python route of ``writer`` (see the module doc), on its state (``state``)."""

    name = "pure"
    __slots__ = ("_prefixes", "state", "writer")

    def __init__(self, writer: StreamWriter) -> None:
        self.writer = writer
        self.state: WriterState = writer._state
        self._prefixes: dict[str, bytes] = {}  # key -> its frame prefix (length byte + key), once validated

    def write(
        self, stream_key: str, payload: bytes, seq: int | None, shard_id: int, timestamp_ms: int | None, /
    ) -> Written:
        """``StreamWriter.write``, in Python."""
        # One path for every message; the first message of a stream (on shard 0, with the default seq)
        # puts its key in the state's hot, and the next ones skip what that proved: the key is valid, the stream
        # has its state, no strict_seq check applies. The frame encoder checks every field, and a
        # frame ending before the state's stop reaches no beacon boundary, checksum fold or size limit.
        ws = self.state
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
            raise exc.located(path=self.writer.path) from None
        start = ws.offset
        end = start + len(frame)
        if state is None or end >= ws.stop:
            return self.write_at_mark(frame, crc, stream_key, shard_id, seq, timestamp_ms, raw_key, state)
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
                self.writer._failed(exc, 1, start)
            except BaseException:  # a signal handler's exception (os.write retries EINTR otherwise): the
                # frame goes out whole first, from where the file says it stopped, then it propagates
                self.writer._send_rest(frame, self.writer._reached(start, len(frame)), 1, start)
                raise
            if n != end - start:
                self.writer._send_rest(frame, n, 1, start)
        else:
            ws.pending.append(frame)
            ws.pending_count += 1
            if ws.pending_count >= ws.flush_every:
                self.writer.flush()
        return _tuple_new(Written, (stream_key, shard_id, seq, timestamp_ms, start, end))

    def _stream_of(self, stream_key: str, shard_id: int, seq: int | None) -> tuple[bytes, StreamState | None, int]:
        """For ``write`` of a key not in the hot keys: refuse a closed writer, an invalid key and (``strict_seq``)
        a seq that does not increase; return the key's bytes, the stream's state (None for a new
        stream) and the sequence number."""
        writer = self.writer
        if self.state.fd < 0:
            raise ClosedError(f"{writer.path}: the writer is closed")
        prefix = self._prefixes.get(stream_key) if type(stream_key) is str else None
        if prefix is None:
            prefix = self._key_prefix(stream_key)
        state = writer._book.streams.get((stream_key, shard_id))
        if seq is None:
            if state is None:
                seq = 1
            else:
                seq = state.seq + 1
                if shard_id == 0:  # a stream read from the file (resumed, caught up): hot from now on
                    self.state.hot[stream_key] = (prefix[1:], state)
        elif writer.strict_seq and stream_key != INTERNAL_KEY:
            self._check_increasing(stream_key, shard_id, seq)
        return prefix[1:], state, seq

    def _key_prefix(self, stream_key: str) -> bytes:
        """The first bytes of a frame of ``stream_key`` (its length and ASCII bytes); the key is
        validated the first time this writer sees it."""
        if stream_key != INTERNAL_KEY:
            validate_key(stream_key)
        raw = stream_key.encode("ascii")
        prefix = self._prefixes[stream_key] = bytes((len(raw),)) + raw
        return prefix

    def _check_increasing(self, stream_key: str, shard_id: int, seq: object) -> None:
        """``strict_seq``: refuse an explicit sequence number that does not pass the stream's last."""
        known = self.writer._book.streams.get((stream_key, shard_id))
        if known is not None and isinstance(seq, int) and seq <= known.seq:
            shard = f" shard {shard_id}" if shard_id else ""
            raise FormatError(
                f"sequence {seq} of stream {stream_key!r}{shard} does not increase: the file's last is "
                f"{known.seq}; leave the sequence out to get {known.seq + 1}",
                path=self.writer.path,
            )

    def write_at_mark(
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
        """``write`` of an encoded frame that starts a stream or reaches ``stop`` (also the compiled route's):
        check the size limit, account the message, cut the frame at each beacon boundary it reaches (§6),
        fold the running checksums once ``FOLD_BYTES`` went by, and give a stream on shard 0 its hot entry."""
        writer, ws = self.writer, self.state
        start = ws.offset
        total = len(frame)
        if start + total + 7 > writer.size_limit:
            raise FileLimitError(
                f"writing {total} more bytes would pass the size limit of {writer.size_limit} bytes; start a new file",
                path=writer.path,
                offset=start,
            )
        book = writer._book
        if state is None:
            state = book.account(stream_key, shard_id, seq, ts, b"", crc)
        else:
            state.note(seq, ts, crc)
        end, ws.offset = book.cut(frame, start, writer.header.beacon_interval, ws.pending)
        if ws.offset >= writer._fold_at:
            book.fold()
            writer._fold_at = ws.offset + FOLD_BYTES
        writer._restop()
        if shard_id == 0 and type(stream_key) is str and stream_key not in ws.hot:
            ws.hot[stream_key] = (raw_key, state)
        ws.pending_count += 1
        if ws.pending_count >= ws.flush_every:
            writer.flush()
        return _tuple_new(Written, (stream_key, shard_id, seq, ts, start, end))
