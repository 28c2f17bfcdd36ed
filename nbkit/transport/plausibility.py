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
  suspect only when **one flipped bit** in one of those fields would make it fit its own (key, shard)
  stream, whose neighbours around it agree with each other (damage from bit rot), not merely when it is
  far from them (legitimate gaps are: an end-of-stream mark days after the last message, a file
  appended days later, a clock step):

  * ``seq``: outside its stream neighbours' seqs, which are at most three apart, and one bit from a
    number between them;
  * ``timestamp``: the record's seq is its neighbours' plus and minus one (one writer's run) and its
    time lies more than :data:`TIME_TOLERANCE_MS` outside theirs (which are in order), one bit from
    between them; a stream's first record is bounded below by the file's ``created_at``;
  * ``shard_id``: the only record of its (key, shard), one bit from a shard of the key on which its seq
    fits next to the records around its place, which leave a gap.

  The internal keys (end-of-stream and priming marks) are left out (``ignore_keys``), and so is a stream
  whose sequence goes back more than rarely (merged producers interleaving their own numbering: no one
  run to hold a record to). Cost: one linear pass (a counting sort of the small (key, shard) codes, a
  difference of seq and time) finds the steps that break a stream's run; the checks look only there.
  What it cannot see: a timestamp moved by less than the tolerance (bits below 2**22 ms), a flip in a
  stream's last record (or its first, but for a timestamp before ``created_at``), flips in merged
  producers' streams, a key that stays a valid key name.

Both are pure (no I/O): numbers in, small records out.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from nbkit.transport.damage import DamagedRegion
from nbkit.wire.keys import INTERNAL_KEYS
from nbkit.wire.timestamps import iso_utc

__all__ = ["TIME_TOLERANCE_MS", "KeyLoss", "Records", "Suspect", "describe_losses", "losses", "suspects"]

#: How far (ms) a record's timestamp may stray outside its stream neighbours' before it is looked at: one
#: hour. Legitimate records stray by seconds or minutes (a writer that waited for the file's lock after
#: taking its timestamp, a producer's own event times); a flipped bit below 2**22 ms is not seen.
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
            "timestamp": _when(self.timestamp_ms),
            "field": self.field,
            "problem": self.problem,
        }


def _span(ms: int) -> str:
    days, rest = divmod(abs(ms), 86_400_000)
    hours = rest / 3_600_000
    return f"{days} days" if days >= 2 else f"{hours + 24 * days:.1f} hours"


def _when(ms: int) -> str:
    """ISO UTC text of a timestamp, or its milliseconds when no calendar date can show it (a damaged one)."""
    try:
        return iso_utc(ms)
    except (OverflowError, ValueError):
        return f"{ms} ms since the epoch"


def _int64(values: np.ndarray) -> np.ndarray:
    """64-bit integers as int64, without a copy where they are 64-bit already (uint64 wraps: bits are kept)."""
    a = np.asarray(values)
    return a.view(np.int64) if a.dtype.kind in "iu" and a.dtype.itemsize == 8 else a.astype(np.int64)


def _one_bit(x: np.ndarray) -> np.ndarray:
    """Where ``x`` (int64 bits) has exactly one bit set."""
    u = x.view(np.uint64)
    return (u != 0) & ((u & (u - np.uint64(1))) == 0)


_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def _fitting_bit(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per entry, the lowest bit whose flip brings ``t`` into ``lo..hi``; -1 where no single bit does."""
    flipped = (t.view(np.uint64)[:, None] ^ _BITS[None, :]).view(np.int64)
    fits = (flipped >= lo[:, None]) & (flipped <= hi[:, None])
    return np.where(fits.any(axis=1), fits.argmax(axis=1), -1)


class _Streams(NamedTuple):
    """A read's records grouped by (key, shard) stream, file order kept within each stream."""

    order: np.ndarray  # the rows (file order indices) stream after stream
    start: np.ndarray  # where each stream's rows begin in ``order``; one more entry: the end
    key: np.ndarray  # each stream's key code
    shard: np.ndarray  # each stream's shard (uint64)


def _streams(keys: Sequence[str], key_code: np.ndarray, shard: np.ndarray, ignore: Collection[str]) -> _Streams:
    """Group the records by (key, shard), leaving out the keys in ``ignore``: a counting sort on small codes
    (numpy's stable sort of 16-bit integers is a radix sort, linear time), not a comparison sort."""
    kept = np.array([i for i, k in enumerate(keys) if k not in ignore], dtype=np.int64)
    sh = _int64(shard).view(np.uint64)
    lo, hi = int(sh.min()), int(sh.max())
    values: np.ndarray
    where: np.ndarray | None
    if lo == hi:  # one shard (the usual file): the key code is the stream
        values, where = np.array([lo], dtype=np.uint64), None
    elif hi < 256:  # a few small shard ids: they index themselves
        values, where = np.arange(hi + 1, dtype=np.uint64), sh
    else:  # large shard ids (or a damaged one): number the distinct ones
        values, inverse = np.unique(sh, return_inverse=True)
        where = inverse.ravel()
    n_shards, n_kept = len(values), len(kept)
    n_groups = (n_kept + 1) * n_shards  # the last n_shards groups: the ignored keys
    small = np.int16 if n_groups < 2**15 else np.int64
    codes = np.asarray(key_code)
    if n_kept == len(keys) and codes.dtype.itemsize <= np.dtype(small).itemsize:
        group = codes  # no key left out: the codes are the groups (a read's int8 or int16 category codes)
    else:
        remap = np.full(max(len(keys), 1), n_kept, dtype=small)
        remap[kept] = np.arange(n_kept, dtype=small)
        group = remap[codes]
    if where is not None:
        group = group.astype(small) * n_shards + where.astype(small)
    counts = np.bincount(group, minlength=n_groups)[: n_kept * n_shards]
    start = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=start[1:])
    order = np.argsort(group, kind="stable")[: int(start[-1])]
    ids = np.arange(len(counts))
    return _Streams(order, start, kept[ids // n_shards], values[ids % n_shards])


def suspects(
    keys: Sequence[str],
    key_code: np.ndarray,
    shard: np.ndarray,
    seq: np.ndarray,
    ts: np.ndarray,
    offset: np.ndarray,
    *,
    created_at_ms: int | None = None,
    ignore_keys: Collection[str] = INTERNAL_KEYS,
) -> list[Suspect]:
    """The records whose shard, sequence number or timestamp is one flipped bit from fitting its stream.

    Parameters
    ----------
    keys
        The stream keys ``key_code`` indexes.
    key_code, shard, seq, ts, offset
        One entry per record, in file order (int arrays; ``seq`` and ``shard`` may be uint64).
    created_at_ms
        The file header's creation time: the lower bound of a stream's first timestamp.
    ignore_keys
        Keys left out (default: the internal keys, whose end-of-stream and priming marks are written
        whenever a stream ends or a file is made, apart from any run).

    Returns
    -------
    list of Suspect
        In file order, at most one per record (the first field found: seq, timestamp, shard).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.array([0, 4, 8, 12, 16]) + 1_700_000_000_000
    >>> t[2] ^= 2**30  # one flipped bit: 12 days off
    >>> z = np.zeros(5, dtype=np.int64)
    >>> [s.field for s in suspects(["k"], z, z, np.arange(1, 6), t, np.arange(5) * 100)]
    ['timestamp']
    """
    if len(ts) < 3:
        return []
    streams = _streams(keys, key_code, shard, ignore_keys)
    order, start = streams.order, streams.start
    m = len(order)
    s = _int64(seq)[order]
    t = _int64(ts)[order]
    size = np.diff(start)
    # head[j]: position j begins a stream (j == m too), so j - 1 .. j is no step of one stream
    head = np.zeros(m + 1, dtype=bool)
    head[start] = True
    # the cheap signal: steps inside a stream where the sequence is not one more or time goes back; an
    # undamaged single-writer file has none, and the checks below look only around them
    step = s[1:] - s[:-1]
    at = np.flatnonzero(((step != 1) | (t[1:] < t[:-1])) & ~head[1:m])
    # a stream whose sequence goes back often is several writers' (merged producers): not one run to check
    back = at[step[at] <= 0] + 1
    orderly = np.bincount(np.searchsorted(start, back, side="right") - 1, minlength=len(size))
    orderly = orderly <= np.maximum(3, size // 100)
    found: dict[int, tuple[str, str]] = {}
    tol = TIME_TOLERANCE_MS
    if len(at):
        pos = np.unique(np.concatenate((at, at + 1)))
        pos = pos[(pos >= 1) & (pos + 1 < m)]
        pos = pos[~head[pos] & ~head[pos + 1]]
        pos = pos[orderly[np.searchsorted(start, pos, side="right") - 1]]
        p, sv, q = s[pos - 1], s[pos], s[pos + 1]
        a, tv, b = t[pos - 1], t[pos], t[pos + 1]
        near = (tv >= a - tol) & (tv <= b + tol)
        # seq: outside its neighbours' while they are at most three apart (one record between them, or two
        # when the other was moved off the stream by a flipped shard), and one bit from fitting between them
        odd = (p < q) & (q - p <= 3) & ((sv <= p) | (sv >= q)) & near
        odd[odd] = _fitting_bit(sv[odd], p[odd] + 1, q[odd] - 1) >= 0
        su = s.view(np.uint64)
        for j in pos[odd].tolist():
            found[int(order[j])] = ("seq", f"seq {su[j]} breaks its stream's run {su[j - 1]}, ?, {su[j + 1]}")
        far = (sv == p + 1) & (q == p + 2) & (a <= b) & ~near
        bit = _fitting_bit(tv[far], a[far], b[far])
        for j, k in zip(pos[far][bit >= 0].tolist(), bit[bit >= 0].tolist(), strict=True):
            found[int(order[j])] = ("timestamp", _time_problem(int(t[j]), int(t[j - 1]), int(t[j + 1]), k))
    if created_at_ms is not None:  # a stream's first record: the file's creation time bounds it from below
        first = start[:-1][(size >= 2) & orderly]
        first = first[
            (s[first + 1] == s[first] + 1) & (t[first] < created_at_ms - tol) & (t[first + 1] >= created_at_ms)
        ]
        if len(first):
            lo = np.full(len(first), created_at_ms, dtype=np.int64)
            bit = _fitting_bit(t[first], lo, t[first + 1])
            for j, k in zip(first[bit >= 0].tolist(), bit[bit >= 0].tolist(), strict=True):
                found[int(order[j])] = ("timestamp", _time_problem(int(t[j]), created_at_ms, int(t[j + 1]), k))
    for row, problem in _shard_flips(streams, s, t, size, orderly):
        found.setdefault(row, ("shard_id", problem))
    return [
        Suspect(int(offset[i]), keys[int(key_code[i])], int(seq[i]), int(ts[i]), what, why)
        for i, (what, why) in sorted(found.items(), key=lambda item: int(offset[item[0]]))
    ]


def _time_problem(t: int, lo: int, hi: int, bit: int) -> str:
    gap = t - lo if t < lo else t - hi
    side = "before" if gap < 0 else "after"
    return f"timestamp {_when(t)} is {_span(gap)} {side} its neighbours', one flipped bit (2**{bit} ms) from fitting"


#: A key on more shards than this is not checked for flipped shard ids (one odd shard among many is no sign).
_MAX_SHARDS = 64


def _shard_flips(
    streams: _Streams, s: np.ndarray, t: np.ndarray, size: np.ndarray, orderly: np.ndarray
) -> list[tuple[int, str]]:
    """The records alone on their (key, shard) whose shard, one bit flipped, is another stream of the key in
    which their seq and time fit exactly between two records that leave a gap of one."""
    alone = np.flatnonzero(size == 1)
    if not len(alone):
        return []
    runs: dict[int, list[int]] = {}
    for g in np.flatnonzero((size >= 2) & orderly).tolist():
        runs.setdefault(int(streams.key[g]), []).append(g)
    out = []
    for g in alone.tolist():
        others = runs.get(int(streams.key[g]), [])
        if not others or len(others) > _MAX_SHARDS:
            continue
        j = int(streams.start[g])
        row, shard = int(streams.order[j]), int(streams.shard[g])
        for g2 in others:
            there = int(streams.shard[g2])
            if (shard ^ there).bit_count() != 1:
                continue
            lo, hi = int(streams.start[g2]), int(streams.start[g2 + 1])
            k = lo + int(np.searchsorted(streams.order[lo:hi], row))
            # it fits next to one of the two records around its place, which leave a gap (one of them may
            # itself be damaged: a flipped seq beside it)
            if not lo < k < hi:
                continue
            before, after, mine = int(s[k - 1]), int(s[k]), int(s[j])  # Python ints: no overflow
            fits = after - before != 1 and mine in (before + 1, after - 1)
            if fits and int(t[k - 1]) - TIME_TOLERANCE_MS <= int(t[j]) <= int(t[k]) + TIME_TOLERANCE_MS:
                out.append((row, f"shard {shard} where its stream's records around it are on {there}"))
                break
    return out


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
