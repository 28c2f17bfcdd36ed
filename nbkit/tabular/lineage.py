"""What happened to each message, from the file alone: link every retry copy to the record it copies.

A service on a stream file or a pipe leaves no record of its decisions, only the messages it wrote:
originals, retry copies (same payload, headers + ``x-ruststream-retry-count``) and dead-letter copies.
:func:`lineage` reads those back into histories: which records are one message, the delay the file
shows between its attempts, and how far the file can follow it. :func:`summarize` condenses a lineage
into the figures ``nbkit lineage FILE`` prints.

The linking rule
----------------
A record with retry count ``c > 0`` is a copy. Its predecessor is a record written before it, with
retry count ``c - 1`` (an original has none: count 0), the same payload and the same headers apart
from two the runtime rewrites: the count itself and ``stream-sequence``, the transport's header, which
a copy carries with its predecessor's sequence number (nbkit and ruststream both put it there).

1. A copy that names its predecessor's sequence (``stream-sequence``) links only to a matching record
   with that ``seq``. On a file this is exact even when payloads repeat.
2. A copy without that header links to any matching record.
3. A matching record on the copy's own stream key is preferred (a file's retry copies stay on their
   key; dead-letter copies and a pipe's ``out_retry`` copies change key and take the others).
4. When several matching records are unlinked, the **earliest** (first in the frame's row order) wins,
   and each record has at most one copy. Rows are taken in the frame's order: a file's write order; for
   :func:`~nbkit.tabular.frames.concat_frames` put the upstream capture (a stage's stdin) first.

Copies under a pipe stage's ``out_retry`` key link the same way: a stage's stdout alone holds its
copies (their originals were on stdin); ``concat_frames(read_pipe(lines=stdin), read_pipe(lines=stdout))`` links
the first copies too. Records link only within one ``transport``.

Limits: identical payloads with identical headers and no ``stream-sequence`` header are told apart
only by order, so two such messages retried with different delays may swap histories (counted in
``attrs["ambiguous_links"]``). A copy whose predecessor was written before the file (or capture)
begins links to nothing: it starts a message of its own at attempt ``c + 1`` with no delay (counted in
``attrs["unlinked_copies"]``). With ``payload="objects"`` parsed values are compared, so payloads
that differ only in spacing look the same; ``payload="json"`` (the JSON text) and the default
``payload="auto"`` compare the exact text. A pipe line's timestamp has whole seconds (producers drop
the fraction), so delays observed on a pipe are whole seconds, within a second of the scheduled ones; a
stream file keeps milliseconds.

What the file cannot tell: a record with no further copy was handled, dropped, rejected at the cap
or lost with a crashed process (its delayed copy never written); all look the same here, so its state
is ``"no further copy"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from nbkit.wire.envelope import RETRY_COUNT_HEADER
from nbkit.wire.keys import is_dead_letter_key
from nbkit.wire.limits import SEQUENCE_HEADER
from nbkit.wire.ssformat import MAX_U64

__all__ = [
    "LINEAGE_COLUMNS",
    "STATES",
    "LineageSummary",
    "dead_letter_predicate",
    "lineage",
    "messages_table",
    "summarize",
]

#: Column order of a lineage frame.
LINEAGE_COLUMNS = (
    "message",
    "attempt",
    "stream_key",
    "seq",
    "timestamp",
    "delay",
    "dead_letter",
    "state",
    "final_state",
    "transport",
    "offset",
    "payload",
    "cut_by_damage",
)
#: What the file shows after a record: a copy of it follows; it is a dead-letter copy; nothing follows.
STATES = ("copied-again", "dead-lettered", "no further copy")
#: How callers name the dead-letter keys: one key, a collection of keys, or a predicate (None: the naming
#: rule :func:`nbkit.wire.keys.is_dead_letter_key`).
DeadLetterKeys = str | Iterable[str] | Callable[[str], object] | None
_REWRITTEN = (RETRY_COUNT_HEADER, SEQUENCE_HEADER)
_NEEDED = ("stream_key", "seq", "timestamp", "payload", "retry_count", "headers")


def lineage(
    frame: pd.DataFrame, *, dead_letter_keys: DeadLetterKeys = None, keep: Iterable[str] | str = ()
) -> pd.DataFrame:
    """Link each retry copy in a messages frame to the record it copies: one history per message.

    The linking rule, its limits and what the file cannot tell are in the module docstring
    (:mod:`nbkit.tabular.lineage`). Linking is vectorised (sorts and group-wise cumulative sums, no
    Python loop over messages): a million records link in a few seconds.

    Parameters
    ----------
    frame : DataFrame
        A messages frame: :func:`~nbkit.read_stream`, :func:`~nbkit.read_pipe` or
        :func:`~nbkit.concat_frames` (columns ``stream_key``, ``seq``, ``timestamp``, ``payload``,
        ``retry_count``, ``headers``; ``transport`` and ``offset`` when present).
    dead_letter_keys : str, iterable of str or callable, optional
        Which stream keys are dead-letter keys: one key, a collection, or a predicate
        ``key -> bool``. Default: keys named like one (:func:`nbkit.wire.keys.is_dead_letter_key`:
        ``orders.dead``, ``jobs.dlq``, ``orders-dead``, ...); pass the registration's ``dead_letter=`` key
        when you know it.
    keep : str or iterable of str
        More of the frame's columns to carry along, after the lineage's own: ``"headers"``, any
        ``"payload.<field>"``, or ``"payload.*"`` for every field column (so a question about a history's
        fields needs no join back on ``offset``).

    Returns
    -------
    DataFrame
        One row per record, sorted by message and then by write order, columns:

        - ``message`` (int64): the message id, shared by an original and all its copies, numbered
          0, 1, 2, ... in the order of each message's first record;
        - ``attempt`` (Int64): the record's retry count + 1, as in ``read_stream`` (a dead-letter
          copy's is one more than the last delivery's);
        - ``stream_key``, ``seq``, ``timestamp``, ``transport``, ``offset``, ``payload``: as read;
        - ``delay`` (timedelta64[ms]): time since the previous record of the same message, NaT for
          a message's first record (and where a timestamp is missing);
        - ``dead_letter`` (bool): the record is on a dead-letter key;
        - ``state`` (category): what the file shows after this record: ``copied-again`` (a later
          record copies it), ``dead-lettered`` (it is a dead-letter copy and nothing copies it), or
          ``no further copy`` (handled, dropped, rejected or lost: the file cannot tell which);
        - ``final_state`` (category): the state of the message's last record;
        - ``cut_by_damage`` (bool): the history touches damage, on every record of it: a record is suspect
          (``frame.attrs["suspect"]``), or a damaged region (``frame.attrs["damaged"]``) lies where its
          next copy would be (its last record is within the longest observed delay before the region's
          time span, and it is not dead-lettered), or where its first record's predecessor would be (a
          copy whose predecessor is missing). Its ``final_state`` then says what is left in the file, not
          what the service did;
        - then the ``keep`` columns.

        ``attrs["unlinked_copies"]``: copies whose predecessor is not in the frame (written before
        the file begins, or on another capture); each starts its own message with ``delay`` NaT.
        ``attrs["ambiguous_links"]``: copies linked by the earliest-wins rule among several equal
        candidates. The input's ``attrs`` (such as ``read_end``) are kept.

    See Also
    --------
    nbkit.summarize : Attempts needed, final states and observed delays of a lineage frame.
    nbkit.messages_table : One row per message of a lineage frame.
    nbkit.read_stream : The messages the histories are built from.
    nbkit.redrive : Publish dead letters again once the service is fixed.

    Examples
    --------
    >>> from nbkit import read_pipe
    >>> from nbkit.tabular.lineage import lineage
    >>> from nbkit.wire.stdio_line import format_line
    >>> from nbkit.wire.envelope import encode
    >>> copy = encode({"x-ruststream-retry-count": "1"}, b"pay 7", force_text=True).decode()
    >>> lines = [format_line(0, "jobs", 0, "pay 7"), format_line(3000, "jobs.retry", 0, copy)]
    >>> lin = lineage(read_pipe(lines=lines))
    >>> lin[["message", "attempt", "stream_key", "delay", "state"]]
       message  attempt  stream_key           delay            state
    0        0        1        jobs             NaT     copied-again
    1        0        2  jobs.retry 0 days 00:00:03  no further copy
    """
    _check(frame)
    counts = pd.array(frame["retry_count"], dtype="Int64").to_numpy(dtype=np.int64, na_value=0)
    header_codes, named_seq, names_seq = _header_parts(frame["headers"])
    payloads = frame["payload"].to_numpy(dtype=object)
    fixed = _Fixed(
        counts=counts,
        seqs=_u64_as_i64(frame["seq"]),
        named_seq=named_seq,
        names_seq=names_seq,
        stream_keys=_codes(frame["stream_key"]),
    )
    payload_codes, exact = _payload_codes(payloads, exact=False)
    pred, ambiguous = _link(_group_codes(frame, header_codes, payload_codes), fixed)
    if not exact:  # codes from 64-bit hashes: make sure every link joins equal payloads
        linked = np.flatnonzero(pred >= 0)
        if not bool(np.all(payloads[linked] == payloads[pred[linked]])):  # a hash collision: redo exactly
            payload_codes, _ = _payload_codes(payloads, exact=True)
            pred, ambiguous = _link(_group_codes(frame, header_codes, payload_codes), fixed)
    out = _histories(frame, pred, counts, ambiguous, dead_letter_keys)
    out["cut_by_damage"] = _cut_by_damage(out, frame.attrs)
    return _kept(out, frame, keep)


def _kept(out: pd.DataFrame, frame: pd.DataFrame, keep: Iterable[str] | str) -> pd.DataFrame:
    """``out`` with the ``keep`` columns of ``frame`` joined on the frame's rows (``_row`` order)."""
    names = [keep] if isinstance(keep, str) else list(keep)
    wanted: list[str] = []
    for name in names:
        if name == "payload.*":
            wanted += [c for c in frame.columns if str(c).startswith("payload.") and c not in wanted]
        elif name not in frame.columns:
            raise ValueError(f"lineage(keep=...): the frame has no column {name!r}; its columns: {list(frame.columns)}")
        elif name not in wanted:
            wanted.append(name)
    rows = out.pop("_row").to_numpy()
    for name in wanted:
        out[name] = frame[name].iloc[rows].reset_index(drop=True)
    return out


def _cut_by_damage(lin: pd.DataFrame, attrs: dict[str, Any]) -> np.ndarray:
    """Per record: whether its history touches a damaged region or a suspect record (see :func:`lineage`)."""
    n = len(lin)
    damaged = attrs.get("damaged") or []
    suspect = attrs.get("suspect") or []
    if not n or not (damaged or suspect):
        return np.zeros(n, dtype=bool)
    message = lin["message"].to_numpy()
    offsets = lin["offset"].to_numpy(dtype=np.int64, na_value=-1)
    touched = np.zeros(int(message.max()) + 1, dtype=bool)
    if suspect:
        touched[message[np.isin(offsets, [int(s["offset"]) for s in suspect])]] = True
    if damaged:
        ms = lin["timestamp"].to_numpy(dtype="datetime64[ms]").astype(np.int64)
        delay = lin["delay"].dropna()
        reach = int(delay.max() / pd.Timedelta(milliseconds=1)) if len(delay) else 0
        last = ~pd.Series(message).duplicated(keep="last").to_numpy()
        first = ~pd.Series(message).duplicated(keep="first").to_numpy()
        open_end = last & ~lin["dead_letter"].to_numpy()
        orphan = first & (lin["attempt"].to_numpy(dtype=np.int64, na_value=1) > 1)
        for lo, hi in _time_spans(damaged, offsets, ms):
            touched[message[open_end & (ms >= lo - reach) & (ms <= hi)]] = True
            touched[message[orphan & (ms >= lo) & (ms <= hi + reach)]] = True
    return touched[message]


def _time_spans(damaged: list[dict[str, Any]], offsets: np.ndarray, ms: np.ndarray) -> list[tuple[int, int]]:
    """Each damaged region's time span: between the records read just before and just after its bytes."""
    order = np.argsort(offsets)
    sorted_offsets, sorted_ms = offsets[order], ms[order]
    spans = []
    for region in damaged:
        at = int(np.searchsorted(sorted_offsets, int(region["start"])))
        resume = int(np.searchsorted(sorted_offsets, int(region["end"])))
        lo = int(sorted_ms[at - 1]) if at > 0 else int(sorted_ms[0]) if len(sorted_ms) else 0
        hi = int(sorted_ms[resume]) if resume < len(sorted_ms) else int(np.iinfo(np.int64).max // 2)
        spans.append((lo, hi))
    return spans


# -- linking -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Fixed:
    """Per-record arrays the linking passes share: retry counts, sequences (int64 bits), the sequence
    a copy's ``stream-sequence`` names and whether it names one, stream key codes."""

    counts: np.ndarray
    seqs: np.ndarray
    named_seq: np.ndarray
    names_seq: np.ndarray
    stream_keys: np.ndarray


def _link(group: np.ndarray, f: _Fixed) -> tuple[np.ndarray, int]:
    """Each record's predecessor row (-1: none) and how many links were chosen among several
    candidates. Passes, each on the copies still unlinked: copies naming a sequence, first on their
    own key, then on any key; then copies naming none, the same two ways."""
    n = len(group)
    rows = np.arange(n, dtype=np.int64)
    is_copy = f.counts > 0
    pred = np.full(n, -1, dtype=np.int64)
    ambiguous = 0
    free = np.ones(n, dtype=bool)  # not yet copied by a linked copy
    for strict, same_key in ((True, True), (True, False), (False, True), (False, False)):
        copies = rows[is_copy & (f.names_seq == strict) & (pred < 0)]
        if not len(copies):
            continue
        cands = rows[free]
        cand_keys = [group[cands], f.counts[cands]]
        copy_keys = [group[copies], f.counts[copies] - 1]
        if strict:
            cand_keys.append(f.seqs[cands])
            copy_keys.append(f.named_seq[copies])
        if same_key:
            cand_keys.append(f.stream_keys[cands])
            copy_keys.append(f.stream_keys[copies])
        linked_copies, linked_cands, unsure = _fifo_links(tuple(cand_keys), cands, tuple(copy_keys), copies)
        pred[linked_copies] = linked_cands
        free[linked_cands] = False
        ambiguous += unsure
    return pred, ambiguous


def _check(frame: Any) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"lineage takes a DataFrame from read_stream/read_pipe, not {type(frame).__name__}")
    missing = [c for c in _NEEDED if c not in frame.columns]
    if missing:
        hint = " (this looks like an events frame: lineage reads what a file holds)" if "action" in frame else ""
        raise ValueError(f"lineage needs a read_stream/read_pipe frame; missing column(s) {', '.join(missing)}{hint}")


def _header_parts(headers: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per record: a code for its headers apart from the two the runtime rewrites (0: none), the
    sequence its ``stream-sequence`` header names (as int64 bits) and whether it names a valid one.
    Column-wise: only records with other headers than those two are looked at one by one."""
    values = headers.to_numpy(dtype=object)
    n = len(values)
    codes = np.zeros(n, dtype=np.int64)
    with_headers = np.flatnonzero(np.fromiter(map(len, values), dtype=np.int64, count=n))
    found = values[with_headers]
    m = len(found)
    rewritten = sum(
        np.fromiter(map(methodcaller("__contains__", name), found), dtype=np.int64, count=m) for name in _REWRITTEN
    )
    sizes = np.fromiter(map(len, found), dtype=np.int64, count=m)
    known: dict[tuple, int] = {(): 0}
    for i in with_headers[sizes > rewritten]:  # headers of its own (a transform's, a producer's)
        rest = tuple(sorted(item for item in values[i].items() if item[0] not in _REWRITTEN))
        codes[i] = known.setdefault(rest, len(known))
    named = np.zeros(n, dtype=np.uint64)
    valid = np.zeros(n, dtype=bool)
    named[with_headers], valid[with_headers] = _sequences(list(map(methodcaller("get", SEQUENCE_HEADER, ""), found)))
    return codes, named.view(np.int64), valid


def _sequences(texts: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The u64s that ``stream-sequence`` values name, and which ones name one ("" for none)."""
    if texts and set(map(type, texts)) == {str}:
        text = np.array(texts, dtype=str)
        ok = np.char.isdigit(text) & (np.char.str_len(text) <= 19)  # up to 19 digits: below 2**64
        text[~ok] = "0"
        try:
            return text.astype(np.uint64), ok
        except (ValueError, OverflowError):  # non-ASCII digits: the one-by-one rule decides
            pass
    parsed = [_sequence(t) for t in texts]
    ok = np.array([p is not None for p in parsed], dtype=bool)
    return np.array([p or 0 for p in parsed], dtype=np.uint64), ok


def _sequence(value: Any) -> int | None:
    """The u64 a ``stream-sequence`` header value names, None when it names none."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str) or not value.isascii() or not value.isdigit():
        return None
    number = int(value)
    return number if number <= MAX_U64 else None


def _group_codes(frame: pd.DataFrame, header_codes: np.ndarray, payload_codes: np.ndarray) -> np.ndarray:
    """One code per (transport, payload, headers apart from the rewritten ones)."""
    if "transport" in frame.columns:
        transport_codes = _codes(frame["transport"]) + 1  # -1 (missing) becomes 0
    else:
        transport_codes = np.zeros(len(frame), dtype=np.int64)
    width = int(header_codes.max(initial=0)) + 1
    kinds = int(transport_codes.max(initial=0)) + 1
    combined = (payload_codes.astype(np.int64) * width + header_codes) * kinds + transport_codes
    codes, _ = pd.factorize(combined)
    return codes.astype(np.int64)


def _codes(column: pd.Series) -> np.ndarray:
    """Integer codes of a column's values (a categorical's own codes; -1 for missing)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy().astype(np.int64)
    return pd.factorize(column.astype(object))[0].astype(np.int64)


def _payload_codes(values: np.ndarray, *, exact: bool) -> tuple[np.ndarray, bool]:
    """Codes under which equal payloads are equal, and whether equal codes mean equal payloads.
    Text and bytes are coded by a 64-bit hash unless ``exact`` (the caller checks its links and asks
    again, exactly, on a collision); anything else exactly. Parsed JSON objects and arrays
    (``payload="objects"``) are compared by their JSON encoding."""
    if not exact:
        try:
            hashes = pd.util.hash_array(values, categorize=False)
            return pd.factorize(hashes)[0], False
        except (TypeError, ValueError, UnicodeError):  # not all text or bytes: code them exactly
            pass
    try:
        codes, _ = pd.factorize(values, use_na_sentinel=False)
    except TypeError:  # unhashable parsed JSON (dict, list)
        keyed = np.empty(len(values), dtype=object)
        keyed[:] = [v if isinstance(v, (str, bytes)) else ("json", msgspec.json.encode(v)) for v in values]
        codes, _ = pd.factorize(keyed, use_na_sentinel=False)
    return codes, True


def _u64_as_i64(seq: pd.Series) -> np.ndarray:
    if pd.api.types.is_unsigned_integer_dtype(seq.dtype):  # above 2**63 - 1: the bits, as a sort key
        return pd.array(seq, dtype="UInt64").to_numpy(dtype=np.uint64, na_value=0).view(np.int64)
    return pd.array(seq, dtype="Int64").to_numpy(dtype=np.int64, na_value=0)


def _fifo_links(
    cand_keys: tuple[np.ndarray, ...],
    cand_rows: np.ndarray,
    copy_keys: tuple[np.ndarray, ...],
    copy_rows: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Match copies to candidates with equal keys: in row order, each copy takes the earliest earlier
    candidate not taken yet (a first-in first-out queue per key). Returns the linked copy rows, their
    candidates' rows and how many copies had more than one candidate waiting.

    Vectorised: within each key, ``S`` = candidates minus copies so far; a copy finds the queue empty
    exactly when ``S`` reaches a new minimum below zero; the j-th copy that finds it non-empty takes
    the j-th candidate.
    """
    keys = [np.concatenate([a, b]) for a, b in zip(cand_keys, copy_keys, strict=True)]
    rows = np.concatenate([cand_rows, copy_rows])
    step = np.concatenate([np.ones(len(cand_rows), np.int64), np.full(len(copy_rows), -1, np.int64)])
    order = np.lexsort((rows, *reversed(keys)))
    keys = [k[order] for k in keys]
    rows, step = rows[order], step[order]
    m = len(rows)
    starts = np.ones(m, dtype=bool)
    if m:
        starts[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    group = np.cumsum(starts) - 1
    running = np.cumsum(step)
    balance = running - (running - step)[starts][group]  # S: candidates - copies so far, per key
    lowest = pd.Series(np.minimum(balance, 0)).groupby(group).cummin().to_numpy()
    before = np.empty(m, dtype=np.int64)
    if m:
        before[0] = 0
        before[1:] = lowest[:-1]
    before[starts] = 0
    is_copy = step < 0
    linked = is_copy & (lowest >= before)  # the queue was not empty
    unsure = int(np.count_nonzero(linked & (balance - lowest >= 1)))
    is_cand = ~is_copy
    rank = _rank_in_group(linked, starts, group)[linked]
    cands_before_group: np.ndarray = (np.cumsum(is_cand) - is_cand)[starts][group[linked]]
    cand_at = np.flatnonzero(is_cand)[cands_before_group + rank]
    return rows[linked], rows[cand_at], unsure


def _rank_in_group(mask: np.ndarray, starts: np.ndarray, group: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... for the True entries of ``mask`` within each group (undefined elsewhere)."""
    total = np.cumsum(mask)
    return total - (total - mask)[starts][group] - 1


# -- histories -----------------------------------------------------------------------------------------
def _histories(
    frame: pd.DataFrame, pred: np.ndarray, counts: np.ndarray, ambiguous: int, dead_letter_keys: DeadLetterKeys
) -> pd.DataFrame:
    """The lineage frame from the predecessor links (``counts``: each record's retry count)."""
    n = len(frame)
    is_copy = counts > 0
    rows = np.arange(n, dtype=np.int64)
    root = np.where(pred >= 0, pred, rows)
    while True:  # pointer jumping: as many rounds as the log of the longest history
        jumped = root[root]
        if np.array_equal(jumped, root):
            break
        root = jumped
    _, message = np.unique(root, return_inverse=True)
    has_copy = np.zeros(n, dtype=bool)
    has_copy[pred[pred >= 0]] = True

    keys = frame["stream_key"].reset_index(drop=True)
    if not isinstance(keys.dtype, pd.CategoricalDtype):
        keys = keys.astype(object).astype("category")
    dead_key = dead_letter_predicate(dead_letter_keys)
    dead_categories = np.array([dead_key(str(k)) for k in keys.cat.categories], dtype=bool)
    key_codes = keys.cat.codes.to_numpy()
    dead = np.zeros(n, dtype=bool) if not len(dead_categories) else dead_categories[key_codes] & (key_codes >= 0)

    state = np.where(has_copy, 0, np.where(dead, 1, 2)).astype(np.int8)
    last_state = np.empty(n, dtype=np.int8)
    last_state[root[~has_copy]] = state[~has_copy]  # one last record per message
    final = last_state[root]

    times = pd.Series(pd.to_datetime(frame["timestamp"], utc=True)).astype("datetime64[ms, UTC]")
    ms = times.to_numpy(dtype="datetime64[ms]").astype(np.int64)
    missing = times.isna().to_numpy()
    linked = pred >= 0
    delay_ms = np.zeros(n, dtype=np.int64)
    delay_ms[linked] = ms[linked] - ms[pred[linked]]
    no_delay = ~linked | missing | missing[np.where(linked, pred, rows)]
    delay = delay_ms.astype("timedelta64[ms]")
    delay[no_delay] = np.timedelta64("NaT")

    order = np.lexsort((rows, message))
    columns: dict[str, Any] = {
        "message": message.astype(np.int64)[order],
        "attempt": pd.array(counts[order] + 1, dtype="Int64"),
        "stream_key": keys.iloc[order].reset_index(drop=True).cat.remove_unused_categories(),
        "seq": pd.array(frame["seq"], dtype=frame["seq"].dtype if len(frame) else "Int64")[order],
        "timestamp": times.iloc[order].reset_index(drop=True),
        "delay": delay[order],
        "dead_letter": dead[order],
        "state": pd.Categorical.from_codes(state[order], categories=list(STATES)),
        "final_state": pd.Categorical.from_codes(final[order], categories=list(STATES)),
        "transport": (
            frame["transport"].iloc[order].reset_index(drop=True)
            if "transport" in frame.columns
            else pd.Categorical([None] * n, categories=["file", "pipe"])
        ),
        "offset": (
            pd.array(frame["offset"], dtype="Int64")[order]
            if "offset" in frame.columns
            else pd.array([None] * n, dtype="Int64")
        ),
        "payload": frame["payload"].iloc[order].reset_index(drop=True),
    }
    out = pd.DataFrame(columns, columns=list(LINEAGE_COLUMNS))
    out["_row"] = rows[order]  # the frame row of each lineage row (for ``keep``; removed by lineage)
    out.attrs.update(frame.attrs)
    out.attrs["unlinked_copies"] = int(np.count_nonzero(is_copy & ~linked))
    out.attrs["ambiguous_links"] = int(ambiguous)
    return out


def messages_table(lin: pd.DataFrame) -> pd.DataFrame:
    """One row per message of a lineage: where it came from, how many attempts, when, how it ended.

    Parameters
    ----------
    lin : DataFrame
        A frame from :func:`lineage`.

    Returns
    -------
    DataFrame
        Indexed by ``message``: ``stream_key`` (its first record's key, the origin), ``seq`` (that record's),
        ``attempts`` (deliveries the file shows: the dead-letter copy is not one), ``records``,
        ``first_time`` and ``last_time``, ``dead_lettered`` (bool), ``final_state`` and ``cut_by_damage``.

    See Also
    --------
    nbkit.lineage : The frame this condenses.
    nbkit.summarize : The same histories as counts and delays.

    Examples
    --------
    >>> from nbkit import read_pipe
    >>> from nbkit.wire.envelope import encode
    >>> copy = encode({"x-ruststream-retry-count": "1"}, b"pay 7", force_text=True).decode()
    >>> lines = ["[2024-01-01T00:00:00 | jobs | 0] pay 7", f"[2024-01-01T00:00:03 | jobs | 1] {copy}"]
    >>> lin = lineage(read_pipe(lines=lines))
    >>> messages_table(lin)[["stream_key", "attempts", "records", "final_state"]]  # doctest: +NORMALIZE_WHITESPACE
            stream_key  attempts  records      final_state
    message
    0             jobs         2        2  no further copy
    """
    if "message" not in lin.columns or "final_state" not in lin.columns:
        raise ValueError("messages_table takes a lineage frame: nbkit.lineage(read_stream(...))")
    first = ~lin["message"].duplicated().to_numpy()
    deliveries = lin["attempt"].astype("Int64").to_numpy(dtype=np.int64, na_value=1) - lin["dead_letter"].to_numpy(
        dtype=np.int64
    )
    grouped = pd.DataFrame(
        {"message": lin["message"].to_numpy(), "deliveries": deliveries, "timestamp": lin["timestamp"].to_numpy()}
    ).groupby("message", sort=True)
    heads = lin.loc[first].set_index("message")
    out = pd.DataFrame(
        {
            "stream_key": heads["stream_key"],
            "seq": heads["seq"],
            "attempts": grouped["deliveries"].max().astype("Int64"),
            "records": grouped.size().astype("int64"),
            "first_time": grouped["timestamp"].min(),
            "last_time": grouped["timestamp"].max(),
            "dead_lettered": heads["final_state"] == "dead-lettered",
            "final_state": heads["final_state"],
            "cut_by_damage": heads.get("cut_by_damage", False),
        }
    )
    out.index.name = "message"
    return out


def dead_letter_predicate(dead_letter_keys: DeadLetterKeys = None) -> Callable[[str], bool]:
    """``dead_letter_keys`` as a predicate over stream keys (the one rule lineage and the plots share).

    Parameters
    ----------
    dead_letter_keys : str, iterable of str or callable, optional
        One dead-letter key, a collection of them, or a predicate ``key -> bool``; default (None): the
        naming rule :func:`nbkit.wire.keys.is_dead_letter_key` (a file does not record which key a
        registration declared).

    Returns
    -------
    callable
        ``key -> bool``: whether ``key`` is a dead-letter key.

    Examples
    --------
    >>> from nbkit.tabular.lineage import dead_letter_predicate
    >>> is_dead = dead_letter_predicate()
    >>> is_dead("orders.dead"), is_dead("jobs-dlq"), is_dead("orders.retry")
    (True, True, False)
    >>> dead_letter_predicate(["parked"])("parked")
    True
    """
    if dead_letter_keys is None:
        return is_dead_letter_key
    if callable(dead_letter_keys):
        predicate = dead_letter_keys
        return lambda key: bool(predicate(key))
    if isinstance(dead_letter_keys, str):
        return {dead_letter_keys}.__contains__
    if isinstance(dead_letter_keys, Iterable):
        return set(dead_letter_keys).__contains__
    raise TypeError(f"dead_letter_keys takes a key, keys or a predicate, not {dead_letter_keys!r}")


# -- summary -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LineageSummary:
    """The figures ``nbkit lineage FILE`` prints, made by :func:`summarize`.

    Parameters
    ----------
    messages : int
        How many messages (histories) the lineage holds.
    records : int
        How many records (rows) it holds.
    attempts : Series
        Messages per number of delivery attempts the file shows (index 1, 2, 3, ...).
    final_states : Series
        Messages per final state (``dead-lettered``, ``no further copy``).
    dead_letters : int
        Dead-letter copies.
    delays : DataFrame
        Per attempt 2, 3, ... (index ``attempt``): ``copies`` and the ``median`` and ``p95``
        (95th percentile) of their observed delay in seconds; dead-letter copies left out.
    unlinked_copies, ambiguous_links : int
        The lineage's ``attrs`` of the same names.
    transports : tuple of str
        The transports the records came from.
    by_key : DataFrame
        The same per origin key (the key of each message's first record; keys differ in their retry
        policy, so their delays are not pooled): index (``stream_key``, ``attempt``), columns ``copies``,
        ``median``, ``p95``, plus ``messages`` and ``dead_lettered`` per key on the attempt-1 row.
    cut_by_damage : int
        Messages whose history touches damage (:func:`lineage`'s ``cut_by_damage``).

    Examples
    --------
    >>> from nbkit import read_pipe
    >>> from nbkit.tabular.lineage import lineage, summarize
    >>> summary = summarize(lineage(read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hello"])))
    >>> summary.messages, summary.attempts.to_dict(), summary.dead_letters
    (1, {1: 1}, 0)
    """

    messages: int
    records: int
    attempts: pd.Series
    final_states: pd.Series
    dead_letters: int
    delays: pd.DataFrame
    unlinked_copies: int
    ambiguous_links: int
    transports: tuple[str, ...] = field(default=())
    by_key: pd.DataFrame = field(default_factory=pd.DataFrame)
    cut_by_damage: int = 0

    def to_text(self) -> str:
        """The summary as the lines ``nbkit lineage`` prints.

        Returns
        -------
        str
            Messages and records, attempts needed, final states, dead letters, the observed-delay
            table, unlinked and ambiguous copies; one line each (the table one per attempt).

        Examples
        --------
        >>> from nbkit import read_pipe
        >>> from nbkit.tabular.lineage import lineage, summarize
        >>> print(summarize(lineage(read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hi"]))).to_text())
        1 messages in 1 records (pipe)
        attempts needed:  1: 1  (attempts: messages)
        final state:      no further copy 1
        dead letters:     0
        observed delays:  none (no linked retry copies)
        unlinked copies:  0 (their predecessor is not in the data); ambiguous links: 0
        """
        where = f" ({', '.join(self.transports)})" if self.transports else ""
        lines = [f"{self.messages} messages in {self.records} records{where}"]
        needed = "  ".join(f"{int(k)}: {int(v)}" for k, v in self.attempts.items())
        lines.append(f"attempts needed:  {needed or '-'}  (attempts: messages)")
        states = ", ".join(f"{k} {int(v)}" for k, v in self.final_states.items() if v)
        lines.append(f"final state:      {states or '-'}")
        lines.append(f"dead letters:     {self.dead_letters}")
        if self.cut_by_damage:
            lines.append(
                f"cut by damage:    {self.cut_by_damage} messages (their history touches a damaged region or "
                "a suspect record: their final state is what the file kept)"
            )
        keys = list(dict.fromkeys(self.by_key.index.get_level_values(0))) if len(self.by_key) else []
        if len(keys) > 1 and len(self.delays):
            lines.append("per origin key (observed delay since the previous attempt's record):")
            lines.append(f"  {'key':<16}  {'attempt':>7}  {'copies':>7}  {'median':>10}  {'p95':>10}")
            for (key, attempt), r in self.by_key.iterrows():
                if int(attempt) == 1:
                    lines.append(
                        f"  {str(key):<16}  {'':>7}  {int(r['messages']):>7} messages, "
                        f"{int(r['dead_lettered'])} dead-lettered"
                    )
                    continue
                lines.append(
                    f"  {str(key):<16}  {int(attempt):>7}  {int(r['copies']):>7}  {_seconds(r['median']):>10}  "
                    f"{_seconds(r['p95']):>10}"
                )
        elif len(self.delays):
            lines.append("observed delay before each retry (since the previous attempt's record):")
            lines.append(f"  {'attempt':>7}  {'copies':>7}  {'median':>10}  {'p95':>10}")
            for attempt, r in self.delays.iterrows():
                lines.append(
                    f"  {int(attempt):>7}  {int(r['copies']):>7}  {_seconds(r['median']):>10}  {_seconds(r['p95']):>10}"
                )
        else:
            lines.append("observed delays:  none (no linked retry copies)")
        lines.append(
            f"unlinked copies:  {self.unlinked_copies} (their predecessor is not in the data); "
            f"ambiguous links: {self.ambiguous_links}"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The summary as plain JSON-ready values (what ``nbkit lineage --json`` prints).

        Returns
        -------
        dict
            The fields above; ``attempts``, ``final_states`` and ``delays`` keyed by str, delays in
            seconds (``median_s``, ``p95_s``; None where unknown).

        Examples
        --------
        >>> from nbkit import read_pipe
        >>> from nbkit.tabular.lineage import lineage, summarize
        >>> summarize(lineage(read_pipe(lines=["[2024-01-01T00:00:00 | jobs | 0] hi"]))).to_dict()["attempts"]
        {'1': 1}
        """
        return {
            "messages": self.messages,
            "records": self.records,
            "transports": list(self.transports),
            "attempts": {str(int(k)): int(v) for k, v in self.attempts.items()},
            "final_states": {str(k): int(v) for k, v in self.final_states.items()},
            "dead_letters": self.dead_letters,
            "delays": {
                str(int(a)): {"copies": int(r["copies"]), "median_s": _finite(r["median"]), "p95_s": _finite(r["p95"])}
                for a, r in self.delays.iterrows()
            },
            "unlinked_copies": self.unlinked_copies,
            "ambiguous_links": self.ambiguous_links,
            "cut_by_damage": self.cut_by_damage,
            "by_key": {
                str(key): {
                    str(int(a)): {k: (None if pd.isna(v) else float(v)) for k, v in r.items()}
                    for (k2, a), r in self.by_key.iterrows()
                    if k2 == key
                }
                for key in dict.fromkeys(self.by_key.index.get_level_values(0))
            }
            if len(self.by_key)
            else {},
        }


def _seconds(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.3f} s"


def _finite(value: float) -> float | None:
    return None if pd.isna(value) else float(value)


def summarize(lin: pd.DataFrame) -> LineageSummary:
    """Condense a lineage frame: attempts needed, final states, observed delays per attempt.

    Parameters
    ----------
    lin : DataFrame
        A frame from :func:`lineage`.

    Returns
    -------
    LineageSummary
        Messages, records, messages per number of attempts, per final state, dead letters, the
        median and 95th-percentile observed delay (seconds) of the retry copies of each attempt
        (dead-letter copies left out), and the ``attrs`` counts of unlinked and ambiguous copies.
        ``to_text()`` gives the lines ``nbkit lineage`` prints, ``to_dict()`` its ``--json``.

    See Also
    --------
    nbkit.lineage : The frame this condenses.
    nbkit.messages_table : One row per message instead.
    nbkit.overview : Per stream key counts, without linking copies.

    Examples
    --------
    >>> from nbkit import read_stream
    >>> from nbkit.tabular.lineage import lineage, summarize
    >>> print(summarize(lineage(read_stream("tests/data/sample-1.ss"))).to_text())  # doctest: +SKIP
    """
    if "message" not in lin.columns or "dead_letter" not in lin.columns:
        raise ValueError("summarize takes a lineage frame: nbkit.lineage(read_stream(...))")
    deliveries = lin["attempt"].astype("Int64").to_numpy(dtype=np.int64, na_value=1) - lin["dead_letter"].to_numpy(
        dtype=np.int64
    )
    per_message = pd.Series(deliveries).groupby(lin["message"].to_numpy()).max()
    attempts = per_message.value_counts().sort_index()
    attempts.index = attempts.index.astype(np.int64)
    first = ~lin["message"].duplicated().to_numpy()
    finals = lin.loc[first, "final_state"].value_counts().reindex(list(STATES[1:]), fill_value=0)
    retries = lin[~lin["dead_letter"] & lin["delay"].notna()]
    seconds = retries["delay"].dt.total_seconds()
    grouped = seconds.groupby(retries["attempt"].astype(np.int64))
    delays = pd.DataFrame({"copies": grouped.size(), "median": grouped.median(), "p95": grouped.quantile(0.95)})
    delays.index.name = "attempt"
    transports = tuple(str(t) for t in pd.unique(lin["transport"].dropna().astype(str)))
    origin = lin.loc[first, ["message", "stream_key"]].set_index("message")["stream_key"].astype(str)
    record_origin = origin.reindex(lin["message"].to_numpy()).to_numpy()
    per_key = pd.DataFrame(
        {"stream_key": record_origin[retries.index], "attempt": retries["attempt"].astype(np.int64), "s": seconds}
    ).groupby(["stream_key", "attempt"])["s"]
    by_key = pd.DataFrame({"copies": per_key.size(), "median": per_key.median(), "p95": per_key.quantile(0.95)})
    heads = lin.loc[first]
    counts = pd.DataFrame(
        {
            "messages": heads.groupby(origin.to_numpy()).size(),
            "dead_lettered": (heads["final_state"] == "dead-lettered").groupby(origin.to_numpy()).sum(),
        }
    )
    counts.index = pd.MultiIndex.from_arrays([counts.index, np.ones(len(counts), dtype=np.int64)])
    by_key = pd.concat([counts, by_key]).sort_index()
    by_key.index.names = ["stream_key", "attempt"]
    cut = int(lin.loc[first, "cut_by_damage"].sum()) if "cut_by_damage" in lin.columns else 0
    return LineageSummary(
        messages=int(first.sum()),
        records=len(lin),
        attempts=attempts,
        final_states=finals,
        dead_letters=int(lin["dead_letter"].sum()),
        delays=delays,
        unlinked_copies=int(lin.attrs.get("unlinked_copies", 0)),
        ambiguous_links=int(lin.attrs.get("ambiguous_links", 0)),
        by_key=by_key,
        cut_by_damage=cut,
        transports=transports,
    )
