"""Dead-letter redrive: publish dead letters again under the key a (fixed) service reads.

Nothing in a stream file can be moved or deleted, so a redrive is an append: each selected dead
letter is written again under the target key with its payload and headers unchanged, except that its
retry count is reset (unless ``keep_count``) and two headers say where it came from and when:

- ``x-nbkit-redriven-from``: the dead letter's key and sequence, ``orders.dead#12``
  (``orders.dead#12@3`` on shard 3);
- ``x-nbkit-redriven-at``: when it was redriven (UTC, ``2024-01-01T00:01:00.000Z``).

The file itself records what was redriven: before appending, :func:`redrive` reads the target key's
``x-nbkit-redriven-from`` headers and skips those dead letters. It holds the file's writer lock while
it reads and appends, so two redrives cannot both append one dead letter, and every message is
flushed as it is written: after a crash, a rerun appends exactly the dead letters still missing.

For pipes, :func:`redrive_lines` does the same from a capture of stdio lines (a stage's stdout) and
returns the lines for the next stage's stdin; lines of the target key already carrying
``x-nbkit-redriven-from`` in the capture are skipped the same way.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from nbkit.errors import ConfigurationError, InvalidKeyError, MissingFileError
from nbkit.runtime.clock import Clock, RealClock
from nbkit.transport.positions import parse_time
from nbkit.wire import envelope
from nbkit.wire.envelope import retry_count
from nbkit.wire.keys import validate_key
from nbkit.wire.stdio_line import LineDecoder, LineFormatter
from nbkit.wire.timestamps import isoformat_z

__all__ = [
    "REDRIVEN_AT_HEADER",
    "REDRIVEN_FROM_HEADER",
    "DeadLetter",
    "RedriveResult",
    "parse_where",
    "redrive",
    "redrive_lines",
]

#: Header naming the dead letter a redriven message copies: ``key#seq`` (``key#seq@shard`` off shard 0).
REDRIVEN_FROM_HEADER = "x-nbkit-redriven-from"
#: Header saying when the message was redriven (UTC, millisecond ISO 8601 with ``Z``).
REDRIVEN_AT_HEADER = "x-nbkit-redriven-at"


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter as written: where it is, when, and its headers and payload (envelope decoded).

    Parameters
    ----------
    stream_key : str
        The dead-letter key it is under.
    shard_id, seq : int
        Its shard and sequence number there.
    timestamp_ms : int
        When it was written (epoch milliseconds).
    headers : dict
        Its headers (``x-ruststream-retry-count`` among them), without the transport's ``stream-sequence``.
    payload : bytes
        The payload, unchanged.

    Examples
    --------
    >>> DeadLetter("orders.dead", 0, 12, 0, {"x-ruststream-retry-count": "3"}, b'{"id": 7}').ref
    'orders.dead#12'
    """

    stream_key: str
    shard_id: int
    seq: int
    timestamp_ms: int
    headers: dict
    payload: bytes = field(repr=False)

    @property
    def ref(self) -> str:
        """``key#seq`` (``key#seq@shard`` off shard 0): what ``x-nbkit-redriven-from`` says."""
        return f"{self.stream_key}#{self.seq}" + (f"@{self.shard_id}" if self.shard_id else "")

    @property
    def retry_count(self) -> int:
        return retry_count(self.headers)

    def preview(self, width: int = 60) -> str:
        """The payload on one line, cut at ``width`` characters.

        Parameters
        ----------
        width : int, default 60
            The most characters shown.

        Returns
        -------
        str
        """
        try:
            text = self.payload.decode("utf-8").replace("\n", "\\n")
        except UnicodeDecodeError:
            return f"<{len(self.payload)} binary bytes>"
        return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class RedriveResult:
    """What a redrive did (or, with ``dry_run``, would do).

    Parameters
    ----------
    source, target : str
        The dead-letter key read and the key appended to.
    redriven : tuple of DeadLetter
        The dead letters appended (or, on a dry run, to append), in order.
    skipped : tuple of DeadLetter
        Selected dead letters that were redriven before (the file records them), left alone.
    seqs : tuple of int
        The sequence numbers the appended messages got under ``target`` (empty on a dry run or for a
        capture).
    lines : tuple of str
        The stdio lines of a capture redrive (:func:`redrive_lines`), each ending in a newline.
    dry_run : bool
        Nothing was written.

    Examples
    --------
    >>> RedriveResult("orders.dead", "orders", (), (), dry_run=True)
    RedriveResult(would redrive 0 dead letters from 'orders.dead' to 'orders')
    """

    source: str
    target: str
    redriven: tuple[DeadLetter, ...]
    skipped: tuple[DeadLetter, ...]
    seqs: tuple[int, ...] = ()
    lines: tuple[str, ...] = ()
    dry_run: bool = False

    def describe(self) -> str:
        """One sentence for people: how many were (or would be) redriven and skipped.

        Returns
        -------
        str
        """
        verb = "would redrive" if self.dry_run else "redrove"
        n = len(self.redriven)
        text = f"{verb} {n} dead letter{'' if n == 1 else 's'} from {self.source!r} to {self.target!r}"
        if self.skipped:
            text += f"; {len(self.skipped)} selected were redriven before (skipped)"
        return text

    def __repr__(self) -> str:
        return f"RedriveResult({self.describe()})"


# -- selecting -------------------------------------------------------------------------------------------
_CLAUSE = re.compile(r"^\s*(seq|time|payload|header\.([A-Za-z0-9_.\-]+))\s*(>=|<=|=|>|<|~)?\s*(.*?)\s*$", re.S)
_RANGE = re.compile(r"^(.*?)\.\.(.*)$")

WHERE_HELP = (
    "clauses joined by 'and': seq=N, seq=A..B (inclusive, either end may be left out), seq>=N, seq<N, ...; "
    "time>=T, time<T, time=T1..T2 (T: 2024-01-01T00:00:05[.f][Z] UTC, or epoch milliseconds); "
    "payload~TEXT (contains), payload=TEXT (equals); header.NAME=VALUE, header.NAME~TEXT, header.NAME (present)"
)


def _time_ms(text: str, expr: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise ConfigurationError(f"--where {expr!r}: {exc}") from None


def _seq(text: str, expr: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ConfigurationError(f"--where {expr!r}: {text!r} is not a sequence number (a whole number)")
    return int(text)


def _compare(op: str, value: int, bound: int) -> bool:
    return {"=": value == bound, ">=": value >= bound, "<=": value <= bound, ">": value > bound, "<": value < bound}[op]


def _numeric_clause(field_: str, op: str, arg: str, expr: str) -> Callable[[DeadLetter], bool]:
    parse = _seq if field_ == "seq" else _time_ms
    get: Callable[[DeadLetter], int] = (lambda d: d.seq) if field_ == "seq" else (lambda d: d.timestamp_ms)
    span = _RANGE.match(arg)
    if op == "=" and span:
        low = parse(span.group(1), expr) if span.group(1).strip() else None
        high = parse(span.group(2), expr) if span.group(2).strip() else None
        return lambda d: (low is None or get(d) >= low) and (high is None or get(d) <= high)
    if op not in ("=", ">=", "<=", ">", "<"):
        raise ConfigurationError(f"--where {expr!r}: {field_} takes =, >=, <=, > or < (and A..B ranges)")
    bound = parse(arg, expr)
    return lambda d: _compare(op, get(d), bound)


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _clause(text: str, expr: str) -> Callable[[DeadLetter], bool]:
    m = _CLAUSE.match(text)
    if not m or (m.group(3) is None and not m.group(2)):
        raise ConfigurationError(f"--where {expr!r}: cannot read {text.strip()!r}; {WHERE_HELP}")
    name, header, op, arg = m.group(1), m.group(2), m.group(3), m.group(4)
    if name in ("seq", "time"):
        return _numeric_clause(name, op, arg, expr)
    if op not in (None, "=", "~"):
        raise ConfigurationError(f"--where {expr!r}: {name} takes = (equals) or ~ (contains), not {op}")
    if name == "payload":
        if op == "=":
            return lambda d: d.payload.decode("utf-8", errors="replace") == arg
        return lambda d: arg in d.payload.decode("utf-8", errors="replace")
    header = header.lower()
    if op is None:
        if arg:
            raise ConfigurationError(f"--where {expr!r}: write header.{header}=VALUE or header.{header}~TEXT")
        return lambda d: header in d.headers
    if op == "=":
        return lambda d: header in d.headers and _text(d.headers[header]) == arg
    return lambda d: header in d.headers and arg in _text(d.headers[header])


def parse_where(expr: str) -> Callable[[DeadLetter], bool]:
    """Turn a ``--where`` expression into a test of one :class:`DeadLetter`.

    Parameters
    ----------
    expr : str
        Clauses joined by ``and``: ``seq=N``, ``seq=A..B`` (inclusive; an end may be left out),
        ``seq>=N``, ``seq<N`` ...; ``time>=T``, ``time=T1..T2`` (``T``: an ISO time in UTC such as
        ``2024-01-01T00:00:05``, or epoch milliseconds); ``payload~TEXT`` (contains), ``payload=TEXT``
        (equals); ``header.NAME=VALUE``, ``header.NAME~TEXT``, ``header.NAME`` (present).

    Returns
    -------
    callable
        ``DeadLetter -> bool``.

    Raises
    ------
    ConfigurationError
        When a clause cannot be read (the message says which and lists the forms).

    Examples
    --------
    >>> test = parse_where("seq=2..3 and payload~lamp")
    >>> dl = DeadLetter("orders.dead", 0, 3, 0, {}, b'{"item": "lamp"}')
    >>> test(dl), test(DeadLetter("orders.dead", 0, 4, 0, {}, b'{"item": "lamp"}'))
    (True, False)
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ConfigurationError(f"--where needs an expression: {WHERE_HELP}")
    tests = [_clause(part, expr) for part in re.split(r"\s+and\s+", expr.strip())]
    return lambda d: all(t(d) for t in tests)


def _selector(where: str | Callable[[DeadLetter], bool] | None) -> Callable[[DeadLetter], bool]:
    if where is None:
        return lambda d: True
    if isinstance(where, str):
        return parse_where(where)
    if callable(where):
        return where
    raise ConfigurationError(f"where takes an expression (str) or a function DeadLetter -> bool, not {where!r}")


def _check_keys(source: str, target: str) -> None:
    try:
        validate_key(source, what="source (dead-letter) key")
        validate_key(target, what="target key")
    except InvalidKeyError as exc:
        raise ConfigurationError(str(exc)) from None
    if source == target:
        raise ConfigurationError(
            f"the source and the target key are both {source!r}: redrive copies dead letters to the key a service reads"
        )


def _redriven_headers(dead: DeadLetter, keep_count: bool, now_ms: int) -> dict:
    headers = dict(dead.headers)
    if not keep_count:
        headers.pop(envelope.RETRY_COUNT_HEADER, None)
    headers[REDRIVEN_FROM_HEADER] = dead.ref
    at = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC)
    headers[REDRIVEN_AT_HEADER] = isoformat_z(at, "milliseconds")
    return headers


def _redriven_from(headers: dict) -> str | None:
    value = headers.get(REDRIVEN_FROM_HEADER)
    return None if value is None else _text(value)


# -- a stream file ---------------------------------------------------------------------------------------
def _scan(path: str, source: str, target: str) -> tuple[list[DeadLetter], set[str]]:
    """The dead letters under ``source`` and the refs already redriven under ``target``, in one read."""
    from nbkit.transport.file_reader import StreamReader  # (the file transport, where a file is redriven)

    dead: list[DeadLetter] = []
    done: set[str] = set()
    with StreamReader(path, keys=[source, target]) as reader:
        for m in reader:
            headers, payload = envelope.decode(m.payload)
            if m.stream_key == source:
                dead.append(DeadLetter(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, headers, payload))
            else:
                ref = _redriven_from(headers)
                if ref is not None:
                    done.add(ref)
    return dead, done


def redrive(
    path: str | os.PathLike,
    *,
    source: str,
    target: str,
    where: str | Callable[[DeadLetter], bool] | None = None,
    keep_count: bool = False,
    dry_run: bool = False,
    clock: Clock | None = None,
    lock_timeout: float = 10.0,
) -> RedriveResult:
    """Append the dead letters of ``source`` again under ``target`` in the stream file ``path``.

    Each selected dead letter not redriven before is appended with its payload and headers unchanged,
    except: the retry count header is removed (unless ``keep_count``), and ``x-nbkit-redriven-from``
    (``key#seq``) and ``x-nbkit-redriven-at`` are added. Nothing already in the file changes. The
    redrive holds the file's lock from reading what was redriven to its last append (an exclusive
    writer), so two redrives cannot both append a dead letter; other nbkit writers (a running
    service's retry copies, ``nbkit publish``) wait for it meanwhile, as for any append.

    Parameters
    ----------
    path : str or PathLike
        An existing stream file.
    source : str
        The dead-letter key to read (``orders.dead``).
    target : str
        The key to append to (the one the fixed service reads, ``orders``).
    where : str or callable, optional
        Which dead letters: a :func:`parse_where` expression or a function ``DeadLetter -> bool``;
        default all of them.
    keep_count : bool, default False
        Keep ``x-ruststream-retry-count`` as it was (the message then has no attempts left if the
        service's ``max_attempts`` is the same).
    dry_run : bool, default False
        Select and report, append nothing (and take no lock).
    clock : Clock, optional
        The time written into the messages and ``x-nbkit-redriven-at``; default the real clock.
    lock_timeout : float, default 10.0
        Seconds to wait for the file's lock when another writer holds it (then ``WriterLockedError``).

    Returns
    -------
    RedriveResult

    See Also
    --------
    nbkit.redrive_lines : The same for a pipe capture.
    nbkit.lineage : Which messages ended as dead letters, after how many attempts.
    nbkit.read_stream : Read the dead-letter key to choose what to redrive.

    Examples
    --------
    >>> import tempfile, os
    >>> from nbkit import StreamWriter, VirtualClock
    >>> from nbkit.wire.envelope import encode
    >>> path = os.path.join(tempfile.mkdtemp(), "orders.ss")
    >>> with StreamWriter(path) as w:       # a dead letter, as the runtime writes it
    ...     _ = w.write("orders.dead", encode({"x-ruststream-retry-count": "3"}, b'{"id": 7}', force_text=False))
    >>> redrive(path, source="orders.dead", target="orders", clock=VirtualClock())
    RedriveResult(redrove 1 dead letter from 'orders.dead' to 'orders')
    >>> redrive(path, source="orders.dead", target="orders")
    RedriveResult(redrove 0 dead letters from 'orders.dead' to 'orders'; 1 selected were redriven before (skipped))
    """
    _check_keys(source, target)
    select = _selector(where)
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MissingFileError(f"{path}: no such stream file (redrive appends to an existing file)")
    clock = clock or RealClock()
    if dry_run:
        dead, done = _scan(path, source, target)
        chosen = [d for d in dead if select(d)]
        return RedriveResult(
            source,
            target,
            tuple(d for d in chosen if d.ref not in done),
            tuple(d for d in chosen if d.ref in done),
            dry_run=True,
        )
    from nbkit.transport.file_writer import StreamWriter  # (the file transport, where a file is redriven)

    with StreamWriter(
        path, existing_only=True, exclusive=True, lock_timeout=lock_timeout, clock_ms=lambda: round(clock.now() * 1000)
    ) as writer:
        dead, done = _scan(path, source, target)  # under the lock: nobody else appends meanwhile
        chosen = [d for d in dead if select(d)]
        todo = [d for d in chosen if d.ref not in done]
        seqs = []
        for d in todo:
            now_ms = round(clock.now() * 1000)
            data = envelope.encode(_redriven_headers(d, keep_count, now_ms), d.payload, force_text=False)
            seqs.append(writer.write(target, data, timestamp_ms=now_ms).seq)
    return RedriveResult(source, target, tuple(todo), tuple(d for d in chosen if d.ref in done), seqs=tuple(seqs))


# -- a pipe capture --------------------------------------------------------------------------------------
def redrive_lines(
    lines: Iterable[str],
    *,
    source: str,
    target: str,
    where: str | Callable[[DeadLetter], bool] | None = None,
    keep_count: bool = False,
    clock: Clock | None = None,
) -> RedriveResult:
    """The pipe form of :func:`redrive`: stdio lines for the next stage, from a capture's dead letters.

    Parameters
    ----------
    lines : iterable of str
        A capture of stdio lines (a stage's stdout, ``nbkit cat --format stdio``), with or without
        trailing newlines. Lines of ``target`` already carrying ``x-nbkit-redriven-from`` (an earlier
        redrive's output, if included) mark their dead letters as redriven.
    source, target, where, keep_count, clock
        As for :func:`redrive`.

    Returns
    -------
    RedriveResult
        Its ``lines`` are the stdio lines to feed the next stage (with a trailing newline each),
        numbered from 0 under ``target``.

    Raises
    ------
    LineParseError
        For a line that is not a stdio line (the message names the line number).

    See Also
    --------
    nbkit.redrive : The same for a stream file.
    nbkit.read_pipe : A capture as a DataFrame, to choose what to redrive.

    Examples
    --------
    >>> capture = ["[2024-01-01T00:00:09 | jobs.dead | 0] rs1:AAAAHHgtcnVzdHN0cmVhbS1yZXRyeS1jb3VudDogMgpqb2IgMQ=="]
    >>> from nbkit import VirtualClock
    >>> result = redrive_lines(capture, source="jobs.dead", target="jobs", clock=VirtualClock())
    >>> result.redriven[0].headers, result.redriven[0].payload
    ({'x-ruststream-retry-count': '2'}, b'job 1')
    >>> from nbkit.wire.envelope import decode
    >>> decode(result.lines[0].split("] ", 1)[1].strip().encode())
    ({'x-nbkit-redriven-from': 'jobs.dead#0', 'x-nbkit-redriven-at': '2024-01-01T00:00:00.000Z'}, b'job 1')
    """
    _check_keys(source, target)
    select = _selector(where)
    clock = clock or RealClock()
    decoder = LineDecoder()
    now_ms = round(clock.now() * 1000)
    dead: list[DeadLetter] = []
    done: set[str] = set()
    for lineno, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith("\n") else raw
        if not line.strip():
            continue
        resolved = decoder.decode(line, lineno=lineno, now_ms=now_ms)
        if resolved.stream_key not in (source, target):
            continue
        headers, payload = envelope.decode(resolved.payload.encode("utf-8"))
        if resolved.stream_key == source:
            dead.append(DeadLetter(source, resolved.shard_id, resolved.seq, resolved.timestamp_ms, headers, payload))
        elif (ref := _redriven_from(headers)) is not None:
            done.add(ref)
    chosen = [d for d in dead if select(d)]
    todo = [d for d in chosen if d.ref not in done]
    formatter = LineFormatter()
    out: list[str] = []
    for d in todo:
        text = envelope.encode(_redriven_headers(d, keep_count, now_ms), d.payload, force_text=True).decode("utf-8")
        formatted = formatter.format(target, text, now_ms)  # never None: the redrive headers make the text non-empty
        if formatted is not None:
            out.append(formatted)
    return RedriveResult(source, target, tuple(todo), tuple(d for d in chosen if d.ref in done), lines=tuple(out))
