"""What damage cost, said as messages, and records whose header fields look damaged.

Two checks over a read's records in file order (numpy arrays: stream key codes, shard, seq, timestamp,
offset), shared by ``read_stream``, ``nbkit info`` and ``nbkit repair``:

- :func:`losses`: for every damaged region a salvage read skipped, what each stream key lost there: the
  sequence numbers between the key's last record before the region and its first record after it (a
  producer numbers each key 1, 2, 3, ..., spec §9), how many, and the time span between those two records.
  When nothing at all was read after the region (damage up to the end of the data), each key lost an
  unknown number (its range is open: ``last_seq`` None); otherwise a key with no record after the region
  is taken to have ended before it.
- :func:`suspects`: the frame checksum covers only the payload (spec §5), so a flipped bit in a frame's
  header changes its shard, sequence number or timestamp and still reads as a message. A record is
  suspect when one of those fields breaks the pattern of its neighbours, which agree with each other:

  * ``timestamp``: more than :data:`TIME_TOLERANCE_MS` from both the record before and the record after it
    (any key) while those two are within it of each other; or before the file's ``created_at`` while
    both neighbours are not;
  * ``seq``: not one more than the key's previous record while the key's next record is two more;
  * ``shard_id``: a shard the key has no other record on, between two records of the key on one shard.

  What no check can see: a flipped bit that moves a timestamp by less than the tolerance (bits below
  2**22 ms), a sequence number of a key's first or last record, or a key that stays a valid key name.

Both are pure (no I/O): numbers in, small records out.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nbkit.transport.damage import DamagedRegion
from nbkit.wire.timestamps import iso_utc

__all__ = ["TIME_TOLERANCE_MS", "KeyLoss", "Records", "Suspect", "describe_losses", "losses", "suspects"]

#: How far (ms) a record's timestamp may stray from its neighbours before it is suspect: one hour.
TIME_TOLERANCE_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class KeyLoss:
    """What one stream key lost in one damaged region.

    Parameters
    ----------
    stream_key : str
        The key.
    first_seq : int
        The first sequence number lost (one after the key's last record before the region).
    last_seq : int or None
        The last one lost (one before its first record after the region); None when the key has no record
        after the region (how many it lost is unknown).
    after_ms, before_ms : int or None
        The timestamps of the key's records around the region: the messages lost were written between them.

    Examples
    --------
    >>> KeyLoss("orders", 101, 140, 1_700_000_000_000, 1_700_000_004_000).count
    40
    """

    stream_key: str
    first_seq: int
    last_seq: int | None
    after_ms: int | None
    before_ms: int | None

    @property
    def count(self) -> int | None:
        """How many messages were lost (None: unknown, no record after the region)."""
        return None if self.last_seq is None else self.last_seq - self.first_seq + 1

    def describe(self) -> str:
        """One phrase: ``'orders' seq 101..140 (40 messages, 10:00:00.000 .. 10:00:04.000)``."""
        when = ""
        if self.after_ms is not None or self.before_ms is not None:
            lo = "?" if self.after_ms is None else iso_utc(self.after_ms)
            hi = "?" if self.before_ms is None else iso_utc(self.before_ms)
            when = f", written between {lo} and {hi}"
        if self.last_seq is None:
            return f"{self.stream_key!r} seq {self.first_seq} and after (how many is unknown: no later record){when}"
        n = self.count
        seqs = str(self.first_seq) if n == 1 else f"{self.first_seq}..{self.last_seq}"
        return f"{self.stream_key!r} seq {seqs} ({n} message{'s' if n != 1 else ''}{when})"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (timestamps also as ISO UTC text)."""
        return {
            "stream_key": self.stream_key,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "count": self.count,
            "after": None if self.after_ms is None else iso_utc(self.after_ms),
            "before": None if self.before_ms is None else iso_utc(self.before_ms),
        }


@dataclass(frozen=True, slots=True)
class Suspect:
    """A record whose header field looks damaged (see the module doc).

    Parameters
    ----------
    offset : int
        Where its frame starts.
    stream_key : str
        Its key.
    seq : int
        Its sequence number as read.
    timestamp_ms : int
        Its timestamp as read.
    field : {"timestamp", "seq", "shard_id"}
        The field that breaks the pattern.
    problem : str
        Why, in words.
    """

    offset: int
    stream_key: str
    seq: int
    timestamp_ms: int
    field: str
    problem: str

    def describe(self) -> str:
        """One line: key, seq, offset and the problem."""
        return f"{self.stream_key!r} seq {self.seq} at byte offset {self.offset}: {self.problem}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form."""
        return {
            "offset": self.offset,
            "stream_key": self.stream_key,
            "seq": self.seq,
            "timestamp": iso_utc(self.timestamp_ms),
            "field": self.field,
            "problem": self.problem,
        }


def _span(ms: int) -> str:
    days, rest = divmod(abs(ms), 86_400_000)
    hours = rest / 3_600_000
    return f"{days} days" if days >= 2 else f"{hours + 24 * days:.1f} hours"


def suspects(
    keys: Sequence[str],
    key_code: np.ndarray,
    shard: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    offset: np.ndarray,
    *,
    created_at_ms: int | None = None,
) -> list[Suspect]:
    """The records whose shard, sequence number or timestamp breaks the pattern of their neighbours.

    Parameters
    ----------
    keys
        The stream keys ``key_code`` indexes.
    key_code, shard, seq, ts, offset
        One entry per record, in file order (int arrays; ``seq`` and ``shard`` may be uint64).
    created_at_ms
        The file header's creation time.

    Returns
    -------
    list of Suspect
        In file order, at most one per record (the first field found).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.array([0, 1000, 10**10, 3000, 4000]) + 1_700_000_000_000
    >>> z = np.zeros(5, dtype=np.int64)
    >>> [s.field for s in suspects(["k"], z, z, np.arange(1, 6), t, np.arange(5) * 100)]
    ['timestamp']
    """
    n = len(ts)
    found: dict[int, tuple[str, str]] = {}
    if n >= 3:
        t = ts.astype(np.int64)
        # neighbours: the records before and after; at either end, the two records on the inner side
        prev = np.concatenate(([t[2]], t[:-1]))
        nxt = np.concatenate((t[1:], [t[-3]]))
        tol = TIME_TOLERANCE_MS
        odd = (np.abs(t - prev) > tol) & (np.abs(t - nxt) > tol) & (np.abs(nxt - prev) <= tol)
        if created_at_ms is not None:
            odd |= (t < created_at_ms) & (prev >= created_at_ms) & (nxt >= created_at_ms)
        for row in np.flatnonzero(odd).tolist():
            gap = int(t[row]) - int(prev[row])
            side = "before" if gap < 0 else "after"
            found[row] = ("timestamp", f"timestamp {iso_utc(int(t[row]))} is {_span(gap)} {side} its neighbours'")
    codes = key_code.astype(np.int64)
    order = np.argsort(codes, kind="stable")  # each key's records together, in file order
    sk = codes[order]
    s = seq.astype(np.uint64).view(np.int64)[order]
    sh = shard.astype(np.uint64).view(np.int64)[order]
    inner = np.zeros(len(order), dtype=bool)
    if len(order) >= 3:
        inner[1:-1] = (sk[:-2] == sk[1:-1]) & (sk[2:] == sk[1:-1])
        mid = np.flatnonzero(inner)
        bad_seq = (s[mid] != s[mid - 1] + 1) & (s[mid + 1] == s[mid - 1] + 2)
        for j in mid[bad_seq].tolist():
            i = int(order[j])
            if i not in found:
                found[i] = ("seq", f"seq {int(seq[i])} breaks the key's run {int(s[j - 1])}, ?, {int(s[j + 1])}")
        # a shard seen once for the key, between two records on another shard: a key written on several
        # shards (interleaved) has more than one record on each
        _, pair, pairs = np.unique(np.stack((sk, sh)), axis=1, return_inverse=True, return_counts=True)
        once = pairs[pair.ravel()] == 1
        bad_shard = (sh[mid] != sh[mid - 1]) & (sh[mid + 1] == sh[mid - 1]) & once[mid]
        for j in mid[bad_shard].tolist():
            i = int(order[j])
            if i not in found:
                around = int(sh[j - 1])
                found[i] = ("shard_id", f"shard {int(shard[i])} where the key's records around it are on {around}")
    return [
        Suspect(int(offset[i]), keys[int(key_code[i])], int(seq[i]), int(ts[i]), what, why)
        for i, (what, why) in sorted(found.items(), key=lambda item: int(offset[item[0]]))
    ]


def losses(
    regions: Sequence[DamagedRegion],
    keys: Sequence[str],
    key_code: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    offset: np.ndarray,
) -> list[list[KeyLoss]]:
    """What each stream key lost in each damaged region, from its records on either side.

    Parameters
    ----------
    regions
        The damaged regions of the read, in file order.
    keys, key_code, seq, ts, offset
        The records read, in file order (leave suspect records out: their fields are not to be trusted).

    Returns
    -------
    list of list of KeyLoss
        One list per region, by key name; a key that lost nothing there (its sequence continues across the
        region) is left out.

    Examples
    --------
    >>> import numpy as np
    >>> from nbkit.transport.damage import DamagedRegion
    >>> code = np.zeros(4, dtype=np.int64)
    >>> lost = losses([DamagedRegion(300, 700, "checksum")], ["k"], code, np.array([1, 2, 9, 10]),
    ...               np.array([10, 20, 90, 100]), np.array([100, 200, 800, 900]))
    >>> lost[0][0].first_seq, lost[0][0].last_seq, lost[0][0].count
    (3, 8, 6)
    """
    out: list[list[KeyLoss]] = []
    codes = key_code.astype(np.int64)
    offs = offset.astype(np.int64)
    s = seq.astype(np.uint64).view(np.int64)
    t = ts.astype(np.int64)
    per_key = {c: np.flatnonzero(codes == c) for c in range(len(keys))}
    for region in regions:
        found = []
        tail = not len(offs) or int(offs.max()) < region.end  # nothing at all was read after the region
        for c, rows in per_key.items():
            if not len(rows):
                continue
            at = int(np.searchsorted(offs[rows], region.start))
            resume = int(np.searchsorted(offs[rows], region.end))
            if at == 0:
                continue  # no record of the key before the region: where its sequence stood is unknown
            before = rows[at - 1]
            first = int(s[before]) + 1
            if resume < len(rows):
                after = rows[resume]
                last = int(s[after]) - 1
                if last < first:
                    continue  # the key's sequence goes on across the region: it lost nothing there
                found.append(KeyLoss(keys[c], first, last, int(t[before]), int(t[after])))
            elif tail:  # the damage reaches the end of the data: whether the key went on is unknown
                found.append(KeyLoss(keys[c], first, None, int(t[before]), None))
        out.append(sorted(found, key=lambda loss: loss.stream_key))
    return out


def describe_losses(region: DamagedRegion, lost: Sequence[KeyLoss]) -> str:
    """One line for a damaged region and what it cost: the bytes, then the messages per key.

    Parameters
    ----------
    region
        The region.
    lost
        Its :class:`KeyLoss` records (from :func:`losses`).

    Returns
    -------
    str
        ``bytes 3000..9000 (6000 skipped): <problem>; lost 'orders' seq 101..140 (40 messages, ...)``.
    """
    if not lost:
        return f"{region.describe()}; no message lost that the sequence numbers around it show"
    return f"{region.describe()}; lost " + "; ".join(loss.describe() for loss in lost)


class Records:
    """The fields of a read's records, collected one message at a time (what ``nbkit info`` and
    ``nbkit repair`` iterate), for :func:`suspects` and :func:`losses`.

    Examples
    --------
    >>> records = Records()
    >>> for seq in (1, 2, 9):
    ...     records.add("k", 0, seq, 1_700_000_000_000 + seq, seq * 100)
    >>> from nbkit.transport.damage import DamagedRegion
    >>> odd, lost = records.report([DamagedRegion(250, 850, "checksum")], created_at_ms=0)
    >>> odd, lost[0][0].count
    ([], 6)
    """

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}
        self._columns = (array("q"), array("Q"), array("Q"), array("q"), array("q"))

    def add(self, stream_key: str, shard_id: int, seq: int, timestamp_ms: int, offset: int) -> None:
        """Add one record (in file order)."""
        code, shard, sq, ts, off = self._columns
        code.append(self.keys.setdefault(stream_key, len(self.keys)))
        shard.append(shard_id)
        sq.append(seq)
        ts.append(timestamp_ms)
        off.append(offset)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(key_code, shard, seq, timestamp_ms, offset)`` as numpy views of the collected values."""
        return tuple(np.frombuffer(c, dtype=c.typecode) for c in self._columns)

    def report(
        self, regions: Sequence[DamagedRegion], *, created_at_ms: int | None
    ) -> tuple[list[Suspect], list[list[KeyLoss]]]:
        """The suspect records, and what each region cost per key (suspect records left out of it).

        Parameters
        ----------
        regions
            The damaged regions of the read.
        created_at_ms
            The file's creation time.

        Returns
        -------
        tuple
            ``(suspects, losses)`` as :func:`suspects` and :func:`losses` give them.
        """
        keys = list(self.keys)
        code, shard, seq, ts, offset = self.arrays()
        odd = suspects(keys, code, shard, seq, ts, offset, created_at_ms=created_at_ms)
        if not regions:
            return odd, []
        good = ~np.isin(offset, [x.offset for x in odd])
        return odd, losses(regions, keys, code[good], seq[good], ts[good], offset[good])
