"""Damaged regions of a stream file: what a salvage read (``on_bad_frames="warn"|"skip"``) lost, and where.

A salvage read skips from the frame that failed to parse to the next beacon boundary whose beacon is
intact (format spec §6.5) and records the bytes it stepped over as one :class:`DamagedRegion`. The
reader itself (:class:`~nbkit.transport.file_reader.StreamReader`) does the skipping; this module only
holds the record and the option's check, so the CLI, ``read_stream`` and ``nbkit repair`` share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BAD_FRAME_CHOICES", "DamageWarning", "DamagedRegion", "SuspectRecordWarning", "check_on_bad_frames"]

#: What a reader does with a damaged frame: raise (today's strict reading), warn and skip, or skip.
BAD_FRAME_CHOICES = ("error", "warn", "skip")


class DamageWarning(UserWarning):
    """Warned once per damaged region by a read with ``on_bad_frames="warn"``.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("bytes 3000..3072 damaged", DamageWarning)
    >>> seen[0].category.__name__
    'DamageWarning'
    """


class SuspectRecordWarning(DamageWarning):
    """Warned once per read that finds records whose header fields look damaged (a timestamp, sequence
    number or shard that breaks the pattern of its neighbours; the checksum covers only the payload). The
    message names each record's key, seq and offset; ``frame.attrs["suspect"]`` lists them.

    Examples
    --------
    >>> issubclass(SuspectRecordWarning, DamageWarning)
    True
    """


@dataclass(frozen=True, slots=True)
class DamagedRegion:
    """Bytes ``[start, end)`` of a file that a salvage read skipped, and why.

    Parameters
    ----------
    start : int
        Where the first frame that failed to parse starts (or the damaged beacon's boundary).
    end : int
        Where reading resumed: the first frame after an intact beacon, or the end of the file.
    problem : str
        What was wrong at ``start`` (the error the strict read raises there).

    Examples
    --------
    >>> r = DamagedRegion(3000, 3072, "payload checksum mismatch")
    >>> r.skipped
    72
    """

    start: int
    end: int
    problem: str

    @property
    def skipped(self) -> int:
        """How many bytes were stepped over (``end - start``)."""
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form: ``start``, ``end``, ``problem``, ``skipped``.

        Returns
        -------
        dict
            The four fields, as ``frame.attrs["damaged"]`` and ``nbkit info --json`` list them.
        """
        return {"start": self.start, "end": self.end, "problem": self.problem, "skipped": self.skipped}

    def describe(self) -> str:
        """One line: ``bytes 3000..3072 (72 skipped): <problem>``.

        Returns
        -------
        str
            The line ``nbkit info`` and the ``"warn"`` warnings print for the region.
        """
        return f"bytes {self.start}..{self.end} ({self.skipped} skipped): {self.problem}"


def check_on_bad_frames(value: str) -> str:
    """Return ``value`` if it is one of :data:`BAD_FRAME_CHOICES`, else raise ``ValueError``.

    Parameters
    ----------
    value
        The ``on_bad_frames`` option a caller passed.

    Returns
    -------
    str
        ``value`` unchanged.

    Examples
    --------
    >>> check_on_bad_frames("skip")
    'skip'
    """
    if value not in BAD_FRAME_CHOICES:
        raise ValueError(f"on_bad_frames must be one of {', '.join(map(repr, BAD_FRAME_CHOICES))}, not {value!r}")
    return value
