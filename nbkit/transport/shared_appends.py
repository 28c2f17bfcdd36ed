"""A shared stream writer's route: take the lock, catch up with the other writers, append, let go.

Any number of nbkit writers may append to one file in the default (shared) mode of
:class:`~nbkit.transport.file_writer.StreamWriter`: each append takes the file's lock for itself only,
and a writer that finds the file grown since its own last append first reads the new frames and beacons
(:func:`~nbkit.transport.writer_resume.take_frames`), so the file is byte for byte the one a single
writer would have written. :class:`SharedRoute` is that write route (:mod:`nbkit.transport.write_routes`):
the lock and the catch-up around the pure route's append.
"""

from __future__ import annotations

import fcntl
import os
from typing import TYPE_CHECKING

from nbkit.errors import ClosedError, FormatError
from nbkit.transport.file_lock import take_lock
from nbkit.transport.write_routes import PureRoute
from nbkit.transport.writer_resume import take_frames
from nbkit.transport.writer_state import FOLD_BYTES, WriterState, Written
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.ssformat import EOS_PAYLOAD, HEADER_SIZE

if TYPE_CHECKING:
    from nbkit.transport.file_writer import StreamWriter

__all__ = ["SharedRoute"]


class SharedRoute:
    """The shared route of ``writer`` (see the module doc), appending through ``pure``.

    ``held``: the writer holds the lock (during an append, or while a ``flush_every > 1`` batch waits);
    ``eos_last``: the last message it wrote was the EOS mark.
    """

    name = "shared"
    __slots__ = ("eos_last", "held", "pure", "state", "writer")

    def __init__(self, writer: StreamWriter, pure: PureRoute) -> None:
        self.writer = writer
        self.pure = pure
        self.state: WriterState = writer._state
        self.held = False
        self.eos_last = False

    def write(
        self, stream_key: str, payload: bytes, seq: int | None, shard_id: int, timestamp_ms: int | None, /
    ) -> Written:
        """``StreamWriter.write`` of a shared writer: lock, catch up with the others' appends, append,
        unlock (the lock stays held while messages wait in the buffer of a ``flush_every > 1`` writer)."""
        state = self.state
        if not self.held:
            if state.fd < 0:
                raise ClosedError(f"{self.writer.path}: the writer is closed")
            take_lock(state.fd, self.writer.path, self.writer.lock_timeout, exclusive=False)  # in turn
            self.held = True
            try:
                size = os.fstat(state.fd).st_size
                if size != state.offset:
                    self.catch_up(size)
            except BaseException:
                self.release()
                raise
        try:
            written = self.pure.write(stream_key, payload, seq, shard_id, timestamp_ms)
        finally:
            if not state.pending:
                self.release()
        # another writer overwrites a trailing EOS: then this writer's end is no frame boundary any more
        # (ssformat.is_eos, spelt out: one comparison per append, not a call)
        self.eos_last = stream_key == INTERNAL_KEY and payload == EOS_PAYLOAD
        return written

    def release(self) -> None:
        """Let go of the lock (after an append, or a batch's flush)."""
        if self.held:
            self.held = False
            if self.state.fd >= 0:
                fcntl.flock(self.state.fd, fcntl.LOCK_UN)

    def catch_up(self, size: int) -> None:
        """Holding the lock: bring the writer's state up to the file's ``size`` bytes.

        Reads the frames after the offset (all of them when the file shrank, e.g. another writer
        overwrote an EOS this writer wrote), counts the markers of the beacons among them (the round
        robin of the next beacon continues from there), cuts off a torn tail or a trailing EOS, and
        writes a beacon the resume point lacks (:func:`~nbkit.transport.writer_resume.take_frames`).
        """
        writer, state = self.writer, self.state
        if size < state.offset or self.eos_last:
            self._restart()
            self.eos_last = False
        try:
            found = take_frames(writer.path, state.fd, state.offset, size, writer._book)
        except FormatError:
            if state.offset == HEADER_SIZE:
                raise
            self._restart()  # our idea of where frames start no longer holds: read it all again
            found = take_frames(writer.path, state.fd, state.offset, size, writer._book)
        writer.header = found.header
        state.offset = found.offset
        writer.truncated_bytes += found.truncated_bytes
        writer._restop()
        if writer._fold_at < state.offset:
            writer._fold_at = state.offset + FOLD_BYTES

    def _restart(self) -> None:
        """Forget every stream's state; the next catch-up reads the file from its first frame."""
        self.writer._book.restart()
        self.state.hot.clear()
        self.state.offset = HEADER_SIZE
