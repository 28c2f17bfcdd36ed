"""Salvage reads: stepping over a damaged frame to the next intact beacon (format spec §6.5).

With ``on_bad_frames`` "skip" or "warn", a :class:`~nbkit.transport.file_reader.StreamReader` that meets a
damaged frame moves to the first frame after the next intact beacon and records the bytes it lost (a
:class:`~nbkit.transport.damage.DamagedRegion`); after a cut-out or inserted run of bytes it finds the
beacons again on their shifted grid (docs/reliability.md). These functions hold that logic, over the
frame decoder the reader composes (:class:`~nbkit.transport.frame_decode.FrameDecoder`).
"""

from __future__ import annotations

import enum
import warnings

from nbkit.errors import FormatError
from nbkit.transport.damage import DamagedRegion, DamageWarning
from nbkit.transport.frame_decode import FrameDecoder, NeedBytes
from nbkit.transport.source import LOCAL_CHUNK

__all__ = [
    "HUNT_INTERVALS",
    "HUNT_MIN_BYTES",
    "SALVAGE_HINT",
    "SKIPPED",
    "Skipped",
    "grid_resume",
    "hunt_grid",
    "only_beacon_left",
    "skip_damage",
]

#: How far past the start of the damaged frame a salvage read looks for a shifted beacon grid: 4
#: intervals, and at least 64 KiB (a damaged frame may be several intervals long).
HUNT_INTERVALS = 4
HUNT_MIN_BYTES = 1 << 16


class Skipped(enum.Enum):
    """A salvage read stepped over damage; carry on from the new ``pos``."""

    SKIPPED = "skipped"


SKIPPED = Skipped.SKIPPED

#: What a strict read's damage error adds: how to read past the damage.
SALVAGE_HINT = (
    "; to read past the damage pass on_bad_frames='skip' (or 'warn' to hear of each damaged region; "
    "--on-bad-frames on the command line), or write a clean copy with `nbkit repair`"
)


def skip_damage(
    decoder: FrameDecoder,
    damaged: list[DamagedRegion],
    start: int,
    problem: str,
    *,
    follow: bool,
    warn: bool,
    tail: bool = False,
) -> int | None:
    """Where a salvage read resumes after the damaged frame at ``start``: the first frame after the next
    intact beacon. The region is recorded in ``damaged`` (joined to the previous one when that ended right
    here; with ``warn``, a new one also warns), and the decoder's ``phase`` follows a shifted grid.

    None when there is nothing to move to: a follower waits for more bytes; with ``tail`` the caller
    reports a torn tail instead (no intact beacon after it).
    """
    interval = decoder.interval
    size = decoder.size()
    phase = decoder.phase
    boundary = start - (start - phase) % interval + interval
    resume = None
    while boundary < size:
        resume = grid_resume(decoder, boundary, phase, size)
        if resume is not None:
            break
        boundary += interval
    # a frame running past the end may be a torn tail, or a cut moved the last beacon off the grid:
    # hunt for a shifted grid unless the original one holds an intact beacon and frame after the damage
    suspect = not tail or resume is None or grid_resume(decoder, boundary, phase, size, strict=True) is None
    if not follow and suspect:
        window = start + max(HUNT_INTERVALS * interval, HUNT_MIN_BYTES)
        shifted = hunt_grid(decoder, start, min(boundary, size, window), size)
        if shifted is not None:
            decoder.phase, resume = shifted
    if resume is None or (tail and resume >= size):
        if follow or tail:
            return None
        resume = size
    last = damaged[-1] if damaged else None
    if last is not None and last.end == start:
        damaged[-1] = DamagedRegion(last.start, resume, last.problem)
    else:
        region = DamagedRegion(start, resume, problem)
        damaged.append(region)
        if warn:
            warnings.warn(f"{decoder.path}: damaged {region.describe()}", DamageWarning, stacklevel=2)
    return resume


def grid_resume(decoder: FrameDecoder, boundary: int, phase: int, size: int, *, strict: bool = False) -> int | None:
    """Where reading resumes after the beacon at ``boundary`` on the grid ``phase + k * interval``:
    the first frame after it (or the end of the data), or None when that beacon is not intact (it
    does not parse, or lacks its CRs) or the frame after it does not parse. A frame after the file's
    last beacon running past its end is a torn tail, for the reader to report, unless ``strict``
    (a shifted grid's candidate), which also needs a frame after the beacon: bytes that merely parse
    as a beacon whose run reaches past the end prove nothing."""
    interval = decoder.interval
    pread = decoder.pread
    saved = decoder.phase
    decoder.phase = phase
    pos = boundary
    try:
        while (pos - phase) % interval == 0:
            beacon = decoder.beacon(pos)
            if pread(1, pos + beacon.size - 1) != b"\r" or pread(1, pos) != b"\r":
                return None
            pos += beacon.size + min(beacon.remaining, interval - beacon.size)
        if strict and pos >= size:
            return None  # a shifted grid is accepted only on a frame after its beacon that verifies
        if pos < size:
            msg = decoder.frame(pos)
            if pread(1, msg.end - 1) != b"\r":
                return None
    except NeedBytes:  # a torn tail only after the file's last beacon: elsewhere it is garbage
        if strict:
            return None
        return pos if pos >= size or boundary + interval >= size else None
    except FormatError:
        return None
    finally:
        decoder.phase = saved
    return pos


def hunt_grid(decoder: FrameDecoder, start: int, stop: int, size: int) -> tuple[int, int] | None:
    """After damage at ``start``: look for beacons off the current grid before ``stop`` (a cut-out or
    inserted run of bytes moves every later beacon). A candidate is a CR where a beacon parses and
    ends in CR, the one an interval later does too (when the file reaches it), and the frame after
    it parses, checksum verified, ending in CR. Returns (the new phase, where to resume) or None."""
    interval = decoder.interval
    pos = start + 1
    while pos < stop:
        try:
            decoder.fill(pos, min(stop - pos, LOCAL_CHUNK))
        except NeedBytes:
            return None
        base = decoder.base
        end = min(stop, base + len(decoder.buffer))
        at = decoder.buffer.find(b"\r", pos - base, end - base)
        if at < 0:
            pos = end
            continue
        c = base + at
        pos = c + 1
        phase = c % interval
        if phase == decoder.phase:
            continue  # the current grid: already tried
        if c + interval < size and grid_resume(decoder, c + interval, phase, size) is None:
            continue
        resume = grid_resume(decoder, c, phase, size, strict=True)
        if resume is not None:
            return phase, resume
    return None


def only_beacon_left(decoder: FrameDecoder, pos: int, trailing: int) -> bool:
    """True when the ``trailing`` bytes after ``pos`` are exactly one complete beacon (a clean end)."""
    if not decoder.on_grid(pos):
        return False
    try:
        beacon = decoder.beacon(pos)
    except (NeedBytes, FormatError):
        return False
    return beacon.size == trailing
