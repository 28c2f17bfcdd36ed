"""``nbkit repair``: a clean copy of a damaged stream file holding every message a salvage read recovers.

The source is read with ``on_bad_frames="skip"`` (:class:`~nbkit.transport.file_reader.StreamReader`)
and each recovered message is written again by a fresh
:class:`~nbkit.transport.file_writer.StreamWriter` with the source's header (file name, creation time,
beacon interval) and the message's own key, shard, seq and timestamp: the copy has new beacons and
valid checksums, and decodes cleanly. The source is only read. The copy is written under a temporary
name beside the output and renamed into place at the end, so an existing output is replaced whole or
not at all (and only with ``force``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbkit.errors import FormatError, InvalidArgumentError, OutputExistsError
from nbkit.transport.damage import DamagedRegion
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter
from nbkit.transport.messages import ReadEnd
from nbkit.transport.source import is_url, upload, url_exists

if TYPE_CHECKING:
    from nbkit.transport.plausibility import KeyLoss

__all__ = ["RepairReport", "repair"]


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :func:`repair` kept and what it dropped.

    Attributes
    ----------
    source, output
        The damaged file (unchanged) and the clean copy.
    kept
        Messages written to the copy (the end-of-stream mark included when the source has one).
    damaged
        The regions of the source the salvage read skipped.
    rejected
        ``(offset, reason)`` of frames that read back but cannot be written again (an invalid key).
    end
        How the salvage read of the source ended (``truncated``: a torn tail was left out).
    lost
        Per damaged region, what each stream key lost there (:class:`~nbkit.transport.plausibility.KeyLoss`).

    Examples
    --------
    >>> RepairReport("a.ss", "b.ss", 3, (), (), ReadEnd("end", 100)).dropped_bytes
    0
    """

    source: str
    output: str
    kept: int
    damaged: tuple[DamagedRegion, ...]
    rejected: tuple[tuple[int, str], ...]
    end: ReadEnd
    lost: tuple[tuple[KeyLoss, ...], ...] = ()

    @property
    def dropped_bytes(self) -> int:
        """Bytes of the source left out: the damaged regions plus a torn tail."""
        tail = self.end.trailing_bytes if self.end.reason == "truncated" else 0
        return sum(r.skipped for r in self.damaged) + tail

    def lines(self) -> list[str]:
        """What ``nbkit repair`` prints: one line per thing dropped, then the totals."""
        from nbkit.transport.plausibility import describe_losses

        lost = self.lost or tuple(() for _ in self.damaged)
        out = [f"dropped {describe_losses(r, cost)}" for r, cost in zip(self.damaged, lost, strict=True)]
        out += [f"dropped the frame at byte offset {off}: {why}" for off, why in self.rejected]
        if self.end.reason == "truncated":
            out.append(
                f"dropped {self.end.trailing_bytes} trailing bytes at offset {self.end.offset}: not a complete frame"
            )
        out.append(
            f"wrote {self.kept} message{'s' if self.kept != 1 else ''} to {self.output}; "
            f"{self.dropped_bytes} damaged bytes of {self.source} left out"
        )
        return out


def repair(
    source: str | os.PathLike,
    output: str | os.PathLike,
    *,
    force: bool = False,
    storage_options: dict[str, Any] | None = None,
    block_size: int | None = None,
) -> RepairReport:
    """Write a clean copy of ``source`` to ``output`` holding every message a salvage read recovers.

    Parameters
    ----------
    source
        The (possibly damaged) ``.ss`` file, a path or an fsspec URL; it is never modified.
    output
        Where the clean copy goes: a path, or a URL (the copy is written to a local temporary file, then
        uploaded whole).
    force
        Replace ``output`` if it exists (otherwise that is an error).
    storage_options : dict, optional
        For URLs (the source's and the output's filesystem), as for :class:`StreamReader`.
    block_size : int, optional
        For a source URL: bytes per range request.

    Returns
    -------
    RepairReport
        What was kept and what was dropped.

    Raises
    ------
    NbkitError
        ``output`` exists (without ``force``) or is the source itself; the source's header is damaged.

    Examples
    --------
    >>> report = repair("damaged.ss", "clean.ss")       # doctest: +SKIP
    >>> print("\\n".join(report.lines()))                # doctest: +SKIP
    """
    src, dst = os.fspath(source), os.fspath(output)
    remote_out = is_url(dst)
    if src == dst:
        raise InvalidArgumentError(f"{dst}: is the file being repaired; write the copy to another path")
    if remote_out:
        if not force and url_exists(dst, storage_options):
            raise OutputExistsError(f"{dst}: already exists; choose another output URL or pass --force to replace it")
    elif os.path.exists(dst):
        if not is_url(src) and os.path.exists(src) and os.path.samefile(src, dst):
            raise InvalidArgumentError(f"{dst}: is the file being repaired; write the copy to another path")
        if not force:
            raise OutputExistsError(f"{dst}: already exists; choose another output path or pass --force to replace it")
    from nbkit.transport.plausibility import Records

    records = Records()
    scratch = tempfile.mkdtemp(prefix="nbkit-repair-") if remote_out else None
    partial = os.path.join(scratch, "copy.ss") if scratch else f"{dst}.{os.getpid()}.repairing"
    reading: dict[str, Any] = {"storage_options": storage_options, "block_size": block_size} if is_url(src) else {}
    rejected: list[tuple[int, str]] = []
    kept = 0
    try:
        with StreamReader(src, on_bad_frames="skip", **reading) as reader:
            h = reader.header
            with StreamWriter(
                partial,
                beacon_interval=h.beacon_interval,
                file_name=h.file_name,
                created_at_ms=h.created_at_ms,
                flush_every=256,
            ) as writer:
                for msg in reader:
                    records.add(msg.stream_key, msg.shard_id, msg.seq, msg.timestamp_ms, msg.offset)
                    try:
                        writer.write(
                            msg.stream_key,
                            msg.payload,
                            seq=msg.seq,
                            shard_id=msg.shard_id,
                            timestamp_ms=msg.timestamp_ms,
                        )
                    except FormatError as err:
                        rejected.append((msg.offset, err.detail))
                        continue
                    kept += 1
            damaged = tuple(reader.damaged)
            end = reader.end
            created_at_ms = h.created_at_ms
        if remote_out:
            upload(partial, dst, storage_options)
        else:
            os.replace(partial, dst)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
        if scratch:
            os.rmdir(scratch)
    assert end is not None  # a replay read always records why it ended
    _, lost = records.report(damaged, created_at_ms=created_at_ms)
    return RepairReport(src, dst, kept, damaged, tuple(rejected), end, tuple(tuple(cost) for cost in lost))
