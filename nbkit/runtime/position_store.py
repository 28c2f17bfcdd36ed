"""Saved positions: the next sequence per stream key, written atomically so a crash never damages it."""

from __future__ import annotations

import json
import os
import tempfile

from nbkit.errors import FileIOError, FormatError
from nbkit.transport.positions import FilePosition
from nbkit.wire.keys import validate_key

__all__ = [
    "PositionStore",
]


class PositionStore:
    """A JSON file mapping stream key -> next sequence to read.

    ``save`` writes a temporary file, fsyncs it and renames it over the old one, so the store
    always holds either the old or the new positions. Resume with ``start_at=store.position(key)``;
    ``checkpoint=store`` on a subscription saves after every settlement.
    A process killed mid-save leaves its temporary file (``.NAME.PID.*.tmp``) behind; opening the
    store removes those of processes that no longer run.

    Parameters
    ----------
    path : str or os.PathLike
        The JSON file (created on the first save).

    Examples
    --------
    >>> from nbkit import PositionStore
    >>> store = PositionStore("positions.json")
    >>> store.position("orders")                  # nothing saved yet
    FilePosition.beginning()
    >>> store.save("orders", 42)
    >>> PositionStore("positions.json").position("orders")
    FilePosition.sequence(42)
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._positions: dict[str, int] = self._load()
        self._remove_stale_temporaries()

    def _temp_stem(self) -> str:
        return f".{os.path.basename(self.path)}."

    def _remove_stale_temporaries(self) -> None:
        """Delete temporary files that killed savers of this store left (their pid no longer runs)."""
        directory = os.path.dirname(os.path.abspath(self.path))
        stem = self._temp_stem()
        try:
            names = os.listdir(directory)
        except OSError:
            return
        for name in names:
            parts = name[len(stem) :].split(".") if name.startswith(stem) else []
            if len(parts) != 3 or parts[2] != "tmp":  # exactly PID.RANDOM.tmp, as save names them
                continue
            pid = parts[0]
            if pid.isdigit() and not _running(int(pid)):
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass

    def _load(self) -> dict[str, int]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise FileIOError(
                f"{self.path}: cannot read the position store ({exc}); fix or delete it", errno=exc.errno
            ) from None
        except ValueError as exc:
            raise FormatError(f"cannot read the position store ({exc}); fix or delete it", path=self.path) from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and v >= 0 for k, v in data.items()
        ):
            raise FormatError("a position store maps stream keys to sequence numbers", path=self.path)
        return dict(data)

    def get(self, key: str) -> int | None:
        """The saved next sequence for ``key``, or None.

        Parameters
        ----------
        key : str
            The stream key.

        Returns
        -------
        int or None
            The sequence to resume at.
        """
        return self._positions.get(key)

    def position(self, key: str) -> FilePosition:
        """Where to resume ``key``: the saved next sequence, or the beginning when nothing is saved.

        Parameters
        ----------
        key : str
            The stream key.

        Returns
        -------
        FilePosition
            ``FilePosition.sequence(n)`` or ``FilePosition.beginning()``.
        """
        n = self._positions.get(key)
        return FilePosition.beginning() if n is None else FilePosition.sequence(n)

    def save(self, key: str, next_seq: int) -> None:
        """Record that ``key`` should resume at ``next_seq`` and write the store atomically.

        Parameters
        ----------
        key : str
            The stream key.
        next_seq : int
            The sequence to resume at (the last one handled, plus one).
        """
        validate_key(key)
        self._positions[key] = int(next_seq)
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=f"{self._temp_stem()}{os.getpid()}.", suffix=".tmp", dir=directory)
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
        """Every saved position.

        Returns
        -------
        dict of str to int
            A copy: stream key to the sequence to resume at.
        """
        return dict(self._positions)

    def __repr__(self) -> str:
        return f"PositionStore({self.path!r}, {self._positions})"


def _running(pid: int) -> bool:
    """True when a process with this pid exists (or cannot be signalled: assume it runs)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True
