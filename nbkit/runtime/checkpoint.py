"""What a file subscription's ``checkpoint=`` saves after each settlement: upstream's rule, or at least once.

Upstream (and nbkit's default) saves ``seq + 1`` after every settlement. A ``retry_after`` copy is still
only in the process when that happens, so a crash in the delay window loses the message for good: the
original is behind the saved position and the copy died with the process. With ``at_least_once=True``
(nbkit's own option, beyond upstream) the saved position never passes a message whose copy has not yet
been appended: it stays at the oldest such message until its copy is written, so a restart delivers that
message again (as attempt 1, since the original carries no retry count), and the ones after it too.
"""

from __future__ import annotations

from collections import Counter

from nbkit.runtime.position_store import PositionStore

__all__ = ["Checkpointer"]


class Checkpointer:
    """Saves one subscription's positions to its :class:`~nbkit.PositionStore` as settlements happen.

    Parameters
    ----------
    store : PositionStore
        Where positions go (``checkpoint=`` of the registration).
    at_least_once : bool
        Hold the saved position at the oldest message whose delayed copy is not yet appended.

    Examples
    --------
    >>> from nbkit import PositionStore
    >>> from nbkit.runtime.checkpoint import Checkpointer
    >>> store = PositionStore("alo-positions.json")
    >>> cp = Checkpointer(store, at_least_once=True)
    >>> cp.settled("orders", 4, copy_pending=True)   # a copy of seq 4 waits in the process
    >>> cp.settled("orders", 5, copy_pending=False)
    >>> store.position("orders")                      # a crash now redelivers 4, then 5
    FilePosition.sequence(4)
    >>> cp.copy_written("orders", 4)                  # the copy is in the file: the position moves on
    >>> store.position("orders")
    FilePosition.sequence(6)
    """

    __slots__ = ("store", "at_least_once", "_held", "_next")

    def __init__(self, store: PositionStore, *, at_least_once: bool = False) -> None:
        self.store = store
        self.at_least_once = at_least_once
        #: per stream key, the sequence numbers whose copies are pending (or were lost before reaching the file)
        self._held: dict[str, Counter[int]] = {}
        #: per stream key, the position after the last settlement (upstream's ``seq + 1``)
        self._next: dict[str, int] = {}

    def settled(self, stream_key: str, seq: int, *, copy_pending: bool) -> None:
        """Record the settlement of ``seq`` (``copy_pending``: it left a delayed copy in the process) and save."""
        if not self.at_least_once:
            self.store.save(stream_key, seq + 1)
            return
        self._next[stream_key] = seq + 1
        if copy_pending:
            self._held.setdefault(stream_key, Counter())[seq] += 1
        self._save(stream_key)

    def copy_written(self, stream_key: str, seq: int) -> None:
        """The delayed copy of ``seq`` is in the file now: stop holding the position for it, and save."""
        if not self.at_least_once:
            return
        held = self._held.get(stream_key)
        if held is None or not held[seq]:
            return
        held[seq] -= 1
        if not held[seq]:
            del held[seq]
        self._save(stream_key)

    def holds(self, stream_key: str) -> bool:
        """True while the saved position of ``stream_key`` is held behind a copy not yet appended."""
        return bool(self._held.get(stream_key))

    def _save(self, stream_key: str) -> None:
        held = self._held.get(stream_key)
        self.store.save(stream_key, min(held) if held else self._next[stream_key])
