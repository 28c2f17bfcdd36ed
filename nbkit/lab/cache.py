"""The open indexes of the server, one per file state: reused while a file only grows, rebuilt otherwise.

A request names a file; :meth:`IndexCache.get` returns the :class:`~nbkit.lab.index.StreamIndex` of its
current state. The key is the file's (inode, size, modification time): a file that only grew (a service
appending) keeps its index, which the background pass extends from where it stopped; a file replaced,
truncated or rewritten in place gets a new one. At most :data:`MAX_OPEN` indexes stay open (least
recently used first out), so a browser opening many files cannot exhaust the server.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from nbkit.lab.index import StreamIndex, stamp_of

__all__ = ["MAX_OPEN", "IndexCache"]

#: The most indexes kept open at once.
MAX_OPEN = 8


class IndexCache:
    """Path -> index of its current state (thread-safe); see the module docstring."""

    def __init__(self, max_open: int = MAX_OPEN) -> None:
        self.max_open = max_open
        self._lock = threading.Lock()
        self._open: OrderedDict[str, StreamIndex] = OrderedDict()

    def get(self, path: str, display_path: str) -> StreamIndex:
        """The index of ``path`` as it is now, its background pass started (see the module docstring)."""
        now = stamp_of(path)
        with self._lock:
            index = self._open.get(path)
            if index is not None:
                was = index.stamp
                kept = now.inode == was.inode and (now.size > was.size or now == was)
                if kept:
                    index.stamp = now
                else:
                    index.close()
                    index = None
            if index is None:
                index = StreamIndex(path, display_path)
                self._open[path] = index
                while len(self._open) > self.max_open:
                    _, old = self._open.popitem(last=False)
                    old.close()
            else:
                self._open.move_to_end(path)
        index.refresh()
        return index

    def close(self) -> None:
        """Close every index (the server is stopping)."""
        with self._lock:
            for index in self._open.values():
                index.close()
            self._open.clear()
