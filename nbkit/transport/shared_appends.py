"""A shared stream writer's appends: take the lock, catch up with the other writers, append, let go.

Any number of nbkit writers may append to one file in the default (shared) mode of
:class:`~nbkit.transport.file_writer.StreamWriter`: each append takes the file's lock for itself only,
and a writer that finds the file grown since its own last append first reads the new frames and beacons
(:func:`~nbkit.transport.writer_resume.take_frames`), so the file is byte for byte the one a single
writer would have written. :class:`SharedAppends` is that route of the writer, apart from its
exclusive routes and from the state they all use (:mod:`nbkit.transport.writer_state`).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from typing import Any

from nbkit.errors import ClosedError, FormatError
from nbkit.transport.file_lock import take_lock
from nbkit.transport.writer_resume import take_frames
from nbkit.transport.writer_state import FOLD_BYTES, StreamBook, Written
from nbkit.wire.keys import INTERNAL_KEY
from nbkit.wire.ssformat import EOS_PAYLOAD, HEADER_SIZE, FileHeader

__all__ = ["SharedAppends"]


class SharedAppends:
    """The shared route of a writer (see the module doc); ``_held``: it holds the lock (during an
    append, or while a ``flush_every > 1`` batch waits), ``_eos_last``: its last message was the EOS mark."""

    path: str
    header: FileHeader
    lock_timeout: float
    truncated_bytes: int
    _state: Any
    _book: StreamBook
    _fold_at: int
    _held: bool
    _eos_last: bool

    #: the writer's pure-Python route: its class's ``write`` function (called with the writer first: a
    #: function kept on the instance is found and called without building a bound method per message)
    _pure_write: Callable[..., Written]
    #: the writer's setting of the next mark (``stop``)
    _restop: Callable[[], None]

    def _release(self) -> None:
        """Let go of the lock (shared mode, after an append)."""
        if self._held:
            self._held = False
            if self._state.fd >= 0:
                fcntl.flock(self._state.fd, fcntl.LOCK_UN)

    # -- shared appends ----------------------------------------------------------------------------
    def _shared_write(self, stream_key: str, payload: bytes, **fields: Any) -> Written:
        """``write`` of a shared writer (``fields``: its keywords): lock, catch up with the others'
        appends, append, unlock (the lock stays held while messages wait in the buffer of a
        ``flush_every > 1`` writer)."""
        if not self._held:
            if self._state.fd < 0:
                raise ClosedError(f"{self.path}: the writer is closed")
            take_lock(self._state.fd, self.path, self.lock_timeout, exclusive=False)  # in turn
            self._held = True
            try:
                size = os.fstat(self._state.fd).st_size
                if size != self._state.offset:
                    self._catch_up(size)
            except BaseException:
                self._release()
                raise
        state = self._state
        try:
            written = self._pure_write(self, stream_key, payload, **fields)
        finally:
            if not state.pending:
                self._release()
        # another writer overwrites a trailing EOS: then this writer's end is no frame boundary any more
        # (ssformat.is_eos, spelt out: one comparison per append, not a call)
        self._eos_last = stream_key == INTERNAL_KEY and payload == EOS_PAYLOAD
        return written

    def _catch_up(self, size: int) -> None:
        """Holding the lock: bring this writer's state up to the file's ``size`` bytes.

        Reads the frames after the offset (all of them when the file shrank, e.g. another writer
        overwrote an EOS this writer wrote), counts the markers of the beacons among them (the round
        robin of the next beacon continues from there), cuts off a torn tail or a trailing EOS, and
        writes a beacon the resume point lacks (:func:`~nbkit.transport.writer_resume.take_frames`).
        """
        if size < self._state.offset or self._eos_last:
            self._restart_state()
            self._eos_last = False
        try:
            found = take_frames(self.path, self._state.fd, self._state.offset, size, self._book)
        except FormatError:
            if self._state.offset == HEADER_SIZE:
                raise
            self._restart_state()  # our idea of where frames start no longer holds: read it all again
            found = take_frames(self.path, self._state.fd, self._state.offset, size, self._book)
        self.header = found.header
        self._state.offset = found.offset
        self.truncated_bytes += found.truncated_bytes
        self._restop()
        if self._fold_at < self._state.offset:
            self._fold_at = self._state.offset + FOLD_BYTES

    def _restart_state(self) -> None:
        """Forget every stream's state; the next catch-up reads the file from its first frame."""
        self._book.restart()
        self._state.hot.clear()
        self._state.offset = HEADER_SIZE
