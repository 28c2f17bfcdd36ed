"""Saved positions: the next sequence per stream key, written atomically so a crash never damages it."""

from __future__ import annotations

import json
import os
import tempfile

from nbkit.errors import NbkitError
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import validate_key


class PositionStore:
    """A JSON file mapping stream key -> next sequence to read.

    ``save`` writes a temporary file, fsyncs it and renames it over the old one, so the store
    always holds either the old or the new positions. Resume with ``start_at=store.position(key)``.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._positions: dict[str, int] = self._load()

    def _load(self) -> dict[str, int]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise NbkitError(
                f"{self.path}: cannot read the position store ({exc}); fix or delete it"
            ) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in data.items()
        ):
            raise NbkitError(f"{self.path}: a position store maps stream keys to sequence numbers")
        return dict(data)

    def get(self, key: str) -> int | None:
        """The saved next sequence for ``key``, or None."""
        return self._positions.get(key)

    def position(self, key: str) -> FilePosition:
        """Where to resume ``key``: the saved next sequence, or the beginning when nothing is saved."""
        n = self._positions.get(key)
        return FilePosition.beginning() if n is None else FilePosition.sequence(n)

    def save(self, key: str, next_seq: int) -> None:
        """Record that ``key`` should resume at ``next_seq`` and write the store atomically."""
        validate_key(key)
        self._positions[key] = int(next_seq)
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".positions-", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self._positions, f, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        try:
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass

    def as_dict(self) -> dict[str, int]:
        return dict(self._positions)

    def __repr__(self) -> str:
        return f"PositionStore({self.path!r}, {self._positions})"
