"""The open indexes of the server, one per file state: reused while a file only grows, rebuilt otherwise.

A request names a file; :meth:`IndexCache.get` returns the :class:`~nbkit.lab.index.StreamIndex` of its
current state. A file that did not change keeps its index, and so does one that only grew (a service
appending: the background pass extends the index from where it stopped); both are checked by the file's
inode, size and modification time and by its header and the bytes just before the indexed end
(:meth:`StreamIndex.still_valid <nbkit.lab.index.StreamIndex.still_valid>`). Any other change (replaced,
truncated, touched, rewritten in place even to a larger size or with its old modification time) gets a
new index. At most :data:`MAX_OPEN` indexes stay open (least
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
                if index.still_valid(now):
                    index.stamp = now
                else:
                    del self._open[path]
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
