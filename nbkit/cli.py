"""The ``nbkit`` command line: thin wrappers that parse arguments, call the layers below, and print.

Exit codes: 0 success; 1 an :class:`~nbkit.errors.NbkitError` (or its own ``exit_code``), printed as
ONE line ``nbkit: <message>`` on stderr; 2 bad arguments (argparse); 130 Ctrl-C; 141 when the reader
of stdout goes away (``nbkit cat f.ss | head``): 128 + SIGPIPE, the status a shell reports for
``cat`` in the same spot, so ``set -o pipefail`` scripts notice the cut-off output; nothing is printed.
``nbkit run`` adds 3 (copies abandoned or lost, or lines read and not delivered), 129 (SIGHUP) and 143
(SIGTERM), and prints one summary line at exit (:data:`RUN_DESCRIPTION`, docs/guide/pipes.md).

Text formats (``cat``): every timestamp, in ``log``, ``ndjson`` and ``stdio`` alike, is ss-decode's
``YYYY-MM-DDTHH:MM:SS.f``: UTC, no zone suffix, the shortest millisecond fraction (``.437``, ``.91``,
``.0``). ``write`` reads that back, and also accepts a trailing ``Z``, up to 9 fraction digits (cut to
ms) or integer epoch milliseconds. In ``stdio``, an empty payload is printed as the bare header
``[ts | key | seq | shard]`` (with ``"] "`` the payload would read back as one space).
``info`` exits 0 for a damaged or truncated file: the summary says where and why the data ends.

Adding a subcommand: write ``_add_NAME(parser)`` and ``_cmd_NAME(args) -> int`` (its docstring's first
line is the help text) and register ``("NAME", _add_NAME, _cmd_NAME)`` in :data:`_COMMANDS`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import select
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import nbkit
from nbkit.cli_examples import add_examples
from nbkit.completion import SHELLS, completion_script
from nbkit.errors import (
    TROUBLESHOOTING_URL,
    InvalidArgumentError,
    MissingExtraError,
    MissingFileError,
    NbkitError,
    PathIsDirectoryError,
    Utf8Error,
)
from nbkit.runtime import held_signals
from nbkit.scale import DISTRIBUTION, EXTRA
from nbkit.transport.damage import BAD_FRAME_CHOICES
from nbkit.transport.pipe_io import MAX_LINE_BYTES
from nbkit.transport.positions import parse_time
from nbkit.transport.source import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_TIMEOUTS,
    RangeIgnoredWarning,
    check_local_file,
    is_url,
    parse_size,
    parse_storage_options,
    parse_timeout,
)
from nbkit.wire import core, envelope
from nbkit.wire.keys import INTERNAL_KEY, INTERNAL_KEYS, validate_key
from nbkit.wire.ssdecode import (
    TextFormat,
    dumps,
    escape_controls,
    format_beacon,
    format_captured,
    format_header,
    format_message,
    json_payload,
    message_header_json,
)
from nbkit.wire.ssformat import DEFAULT_BEACON_INTERVAL, MAX_U64

# The stream-file commands import the file transport where they run: ``nbkit run`` of a pipe stage never loads it
if TYPE_CHECKING:
    from nbkit.runtime.app import App
    from nbkit.transport.bounded import Bounds
    from nbkit.transport.damage import DamagedRegion
    from nbkit.transport.messages import Message, ReadEnd

__all__ = ["build_parser", "load_app", "main"]

PROG = "nbkit"
#: Exit status when stdout's reader has gone away (128 + SIGPIPE), as a shell shows for ``cat``.
EXIT_BROKEN_PIPE = 141
EXIT_INTERRUPTED = 130

Handler = Callable[[argparse.Namespace], int]
AddArguments = Callable[[argparse.ArgumentParser], None]


# -- shared helpers ------------------------------------------------------------------------------


def _note(message: str) -> None:
    """One informational line on stderr (never on stdout, which carries data)."""
    print(f"{PROG}: {message}", file=sys.stderr)


def _check_keys(keys: Sequence[str] | None) -> frozenset[str] | None:
    if not keys:
        return None
    for key in keys:
        if key != INTERNAL_KEY:
            validate_key(key, what="--key")
    return frozenset(keys)


# -- cat ---------------------------------------------------------------------------------------------


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--from",
        dest="source",
        choices=("ss", "stdio"),
        default="ss",
        help="ss: FILE is a stream file (default); stdio: FILE is a pipe capture, one stdio line per "
        "message (`-` reads stdin); envelopes are decoded and a malformed line is reported by number",
    )


def _add_cat(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file (or, with --from stdio, a capture or -)")
    _add_source(p)
    p.add_argument(
        "--format",
        choices=("log", "ndjson", "stdio"),
        default="log",
        help="log: ss-decode's default text, the file header and beacons as # lines (default); ndjson: one "
        "JSON object per message and nothing else (what `nbkit write` reads; the file header is `nbkit "
        "info`'s); stdio: `[ts | key | seq | shard] payload` lines a stdio consumer accepts (payloads that "
        "do not fit a line are enveloped)",
    )
    p.add_argument("--header-only", action="store_true", help="leave the payloads out")
    p.add_argument(
        "--comments",
        action="store_true",
        help="with --format ndjson: also the file header and beacons as /* */ lines, as ss-decode prints "
        "them (not JSON; `nbkit write` takes the header from them, so a copy is byte for byte the same)",
    )
    p.add_argument(
        "--decode-payload",
        action="store_true",
        help="open the rs1:/rs2: envelopes of retry copies and dead letters: show their headers and their "
        'payload as text or JSON, not base64 (ndjson: a "headers" object on every line; log: {name=value} '
        "before the payload); a capture (--from stdio) is always shown so",
    )
    p.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep reading as the file grows, like tail -f; ends at the end-of-stream mark, when the "
        "file is removed, or on Ctrl-C",
    )
    _add_key_filter(p)
    _add_bounds(p)
    _add_on_bad_frames(p)
    _add_storage(p)


def _add_times(p: argparse.ArgumentParser) -> None:
    """``--since`` and ``--until``: a time window, found from the beacons (cheap on a large file)."""
    p.add_argument(
        "--since",
        metavar="TIME",
        type=_time_arg,
        help="only messages at or after TIME (2024-01-01T10:00[:05[.250]], UTC unless it ends in Z or +HH:MM, "
        "or epoch ms); the read starts at the beacon before it, not at the beginning of the file",
    )
    p.add_argument(
        "--until",
        metavar="TIME",
        type=_time_arg,
        help="only messages before TIME; the read stops at the beacon past it",
    )


def _add_bounds(p: argparse.ArgumentParser) -> None:
    """``cat``'s bounded reads: a window by time or sequence number, the first or last N, a ``--where`` filter."""
    from nbkit.runtime.redrive import WHERE_HELP

    _add_times(p)
    p.add_argument(
        "--start-seq", type=int, metavar="N", help="only messages with sequence number N or later (each key's own)"
    )
    p.add_argument("--end-seq", type=int, metavar="N", help="only messages with sequence number N or earlier")
    count = p.add_mutually_exclusive_group()
    count.add_argument(
        "--first", type=int, metavar="N", help="only the first N messages (within the other bounds), as kcat -c"
    )
    count.add_argument(
        "--last",
        type=int,
        metavar="N",
        help="only the last N messages (within the other bounds), as tail -n: read backwards by beacon "
        "intervals, not from the start; with -f, then what is appended",
    )
    p.add_argument(
        "--where", metavar="EXPR", help=f"only the messages that match, as nbkit redrive --where: {WHERE_HELP}"
    )


def _time_arg(text: str) -> int:
    """A CLI time (``--since``, ``--until``) as epoch ms."""
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _after(since_ms: int | None) -> int | None:
    """``--since`` (at or after) as ``read_stream``'s ``start`` (strictly after)."""
    return None if since_ms is None else since_ms - 1


def _bounds(args: argparse.Namespace) -> Bounds:
    """``cat``'s :class:`~nbkit.transport.bounded.Bounds` from its options."""
    from nbkit.transport.bounded import Bounds

    for name in ("first", "last"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise InvalidArgumentError(f"--{name} takes a number of messages (0 or more), not {value}")
    return Bounds(args.since, args.until, args.start_seq, args.end_seq, args.first, args.last)


def _where_test(expr: str | None) -> Callable[[Message], bool] | None:
    """``--where EXPR`` as a test of one message: ``nbkit redrive``'s parser, given each message's key, shard,
    seq, time, envelope headers and payload as it tests a dead letter."""
    if expr is None:
        return None
    from nbkit.runtime.redrive import DeadLetter, parse_where

    test = parse_where(expr)

    def matches(m: Message) -> bool:
        headers, body = envelope.decode(m.payload) if m.payload[:2] == b"rs" else ({}, m.payload)
        return test(DeadLetter(m.stream_key, m.shard_id, m.seq, m.timestamp_ms, headers, body))

    return matches


def _add_key_filter(p: argparse.ArgumentParser) -> None:
    """``--key KEY`` (repeatable): only the messages of these stream keys."""
    p.add_argument(
        "--key", action="append", metavar="KEY", dest="keys", help="only messages of this stream key (repeatable)"
    )


def _add_on_bad_frames(p: argparse.ArgumentParser) -> None:
    """``--on-bad-frames error|warn|skip``: what a read does at a damaged frame (see ``read_stream``)."""
    p.add_argument(
        "--on-bad-frames",
        choices=BAD_FRAME_CHOICES,
        default="error",
        dest="on_bad_frames",
        help="at a damaged frame: error (stop with an error, the default), warn (say which bytes were "
        "skipped, carry on after the next intact beacon) or skip (carry on silently)",
    )


def _add_storage(p: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable) and ``--block-size``: how a URL FILE is read."""
    p.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        dest="storage_options",
        help="for a URL (s3://, gs://, abfs://, https://, ...): an option for its filesystem, as "
        "storage_options= in Python (repeatable; JSON values such as true or 3 are typed; a.b=c sets a "
        "nested one); without them the filesystem's own environment and config apply (for S3 what "
        "botocore reads: AWS_PROFILE, AWS_ENDPOINT_URL, ...)",
    )
    p.add_argument(
        "--block-size",
        type=_byte_count,
        default=None,
        metavar="BYTES",
        help=f"for a URL: bytes per range request (default {DEFAULT_BLOCK_SIZE >> 20} MiB; 4MiB, 512KiB, ... work)",
    )
    p.add_argument(
        "--timeout",
        type=_timeout_arg,
        default=None,
        metavar="SECONDS",
        help=f"for an http(s):// or s3:// URL: how long a request waits for the connection and then for data "
        f"(default {DEFAULT_TIMEOUTS[0]:g} s to connect, {DEFAULT_TIMEOUTS[1]:g} s for data); one number for "
        "both, or CONNECT,READ such as 2,30",
    )


def _byte_count(text: str) -> int:
    """``--block-size``'s value: a byte count such as ``4194304``, ``4MiB`` or ``512KiB``."""
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _timeout_arg(text: str) -> tuple[float, float]:
    """``--timeout``'s value: seconds (both timeouts) or ``CONNECT,READ``."""
    try:
        return parse_timeout(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _storage_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--storage-option`` items as a dict, with ``--timeout`` as its ``timeout`` entry."""
    options = parse_storage_options(getattr(args, "storage_options", None))
    timeout = getattr(args, "timeout", None)
    if timeout is not None:
        options["timeout"] = timeout
    return options


def _reading(args: argparse.Namespace, path: str) -> dict[str, Any]:
    """``storage_options=``/``block_size=`` for a reader of ``path`` from ``--storage-option``,
    ``--timeout`` and ``--block-size``."""
    options = _storage_options(args)
    block = getattr(args, "block_size", None)
    if not is_url(path):
        if options or block is not None:
            raise InvalidArgumentError(
                f"{path}: --storage-option, --timeout and --block-size are for URLs, not local paths"
            )
        return {}
    return {"storage_options": options or None, "block_size": block}


@contextlib.contextmanager
def _range_notes() -> Iterator[None]:
    """Inside: a :class:`~nbkit.transport.source.RangeIgnoredWarning` is one ``nbkit: warning:`` line on
    stderr (when it happens, as the other warnings of a read), not Python's two-line warning."""
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            if issubclass(category, RangeIgnoredWarning):
                _note(f"warning: {message}")
            else:
                shown(message, category, *args, **kwargs)

        warnings.showwarning = show
        yield


def _note_new_damage(path: str, damaged: list[DamagedRegion], told: int) -> int:
    """Print one ``warning: ... damaged`` line per region of ``damaged`` after the first ``told``; the new count."""
    for region in damaged[told:]:
        _note(f"warning: {path}: damaged {region.describe()}")
    return len(damaged)


class _CatPrinter:
    """Prints the lines of one ``cat`` format (:mod:`nbkit.wire.ssdecode` renders them), leaving out in
    ``stdio`` what a stdio line cannot carry; with ``decode``, envelopes are opened (log and ndjson)."""

    def __init__(self, fmt: TextFormat, header_only: bool, out: TextIO, *, decode: bool = False) -> None:
        self.fmt = fmt
        self.header_only = header_only
        self.decode = decode
        self.write = out.write
        self.empty_key_warned = False

    def message(self, m: Message) -> None:
        if self.fmt == "stdio":
            if m.stream_key in INTERNAL_KEYS:
                return
            if not m.stream_key:  # the reader accepts an empty key; a stdio header cannot carry one
                if not self.empty_key_warned:
                    _note("warning: skipping messages with an empty stream key (a stdio line cannot carry it)")
                    self.empty_key_warned = True
                return
        if self.decode:
            self.write(_decoded_line(self.fmt, m, self.header_only))
            return
        self.write(
            format_message(
                self.fmt, m.stream_key, m.shard_id, m.seq, m.timestamp_ms, m.payload, header_only=self.header_only
            )
        )


def _decoded_line(fmt: TextFormat, m: Message, header_only: bool) -> str:
    """``cat --decode-payload``: one message with its envelope opened, as ``cat --from stdio`` shows a
    capture's: ndjson ``{"header":{...},"headers":{...},"payload":P}`` (``headers`` ``{}`` for a message
    without), log ``[ts | key | seq | shard] {name=value ...} payload``."""
    headers, body = envelope.decode(m.payload)
    if fmt == "ndjson":
        shown = {k: escape_controls(v) if isinstance(v, bytes) else v for k, v in headers.items()}
        head = message_header_json(m.stream_key, m.shard_id, m.seq, m.timestamp_ms)
        return dumps({"header": head, "headers": shown, "payload": None if header_only else json_payload(body)}) + "\n"
    return format_captured(
        fmt, 0, m.stream_key, m.shard_id, m.seq, m.timestamp_ms, headers, body, header_only=header_only
    )


def _cmd_cat(args: argparse.Namespace) -> int:
    """Print the messages of a stream file as text (log, ndjson or stdio lines)."""
    keys = _check_keys(args.keys)
    if args.source == "stdio":
        return _cat_capture(args, keys)
    if args.decode_payload and args.format == "stdio":
        raise InvalidArgumentError(
            "--decode-payload is for --format log or ndjson; a stdio line keeps a copy's headers in its envelope"
        )
    printer = _CatPrinter(args.format, args.header_only, sys.stdout, decode=args.decode_payload)
    if args.comments and args.format != "ndjson":
        raise InvalidArgumentError("--comments is for --format ndjson (log always shows the header and beacons)")
    comments = args.format == "log" or args.comments  # ndjson is JSON objects only unless asked
    with _range_notes():
        return _cat_file(args, keys, printer, comments)


def _cat_file(args: argparse.Namespace, keys: frozenset[str] | None, printer: _CatPrinter, comments: bool) -> int:
    """``cat`` of a stream file: each message through ``printer``; the header and beacons as ``# ...``
    lines when ``comments``; damage, a truncated tail and absent keys said on stderr."""
    from nbkit.transport.bounded import Bounds, bounded_messages
    from nbkit.transport.file_info import summarize
    from nbkit.transport.file_reader import StreamReader

    out = sys.stdout
    shown = 0
    # the key filter runs in the frame scanner: frames of other keys are checked, never made into Messages
    salvage = "error" if args.on_bad_frames == "error" else "skip"  # the CLI prints its own warnings
    warn = args.on_bad_frames == "warn"
    told = 0

    def tell() -> None:
        """Flush what is printed; say which regions were found damaged since the last time."""
        nonlocal told
        out.flush()
        if warn and len(reader.damaged) > told:
            told = _note_new_damage(args.file, reader.damaged, told)

    reading = _reading(args, args.file)
    bounds = _bounds(args)
    where = _where_test(args.where)
    opened = StreamReader(args.file, follow=args.follow, poll_max=0.25, keys=keys, on_bad_frames=salvage, **reading)
    with opened as reader:
        if comments:
            out.write(format_header(args.format, reader.header))
        reader.on_wait = tell  # follow mode: show what we have before waiting for the file to grow
        beacon_offset = None
        for msg in bounded_messages(reader, bounds, keys=keys, where=where):
            if warn and len(reader.damaged) > told:
                tell()
            printer.message(msg)
            shown += 1
            last = reader.last_beacon if args.last is None else None  # --last: read before it is printed
            if comments and last is not None and last.offset != beacon_offset:
                beacon_offset = last.offset
                out.write(format_beacon(args.format, last.markers))
        tell()
        _report_end(args.file, reader.end)
    if keys is not None and not shown:  # only now pay for a second pass, to name the keys the file has
        seen = {s.stream_key for s in summarize(args.file, **reading).streams}
        if (bounds != Bounds() or where is not None) and keys <= seen:
            return 0  # the keys are there; none of their messages is inside the bounds
        return _no_such_key(args.file, keys, shown, seen)
    return 0


def _no_such_key(path: str, keys: frozenset[str] | None, shown: int, seen: set[str]) -> int:
    """After ``cat --key``: when no message had any of the keys, say which keys there are; exit 1."""
    if keys is None or shown:
        return 0
    there = ", ".join(sorted(k for k in seen if k not in INTERNAL_KEYS)) or "none"
    wanted = ", ".join(sorted(keys))
    _note(f"{path}: no message has the key {wanted}; the keys there: {there}")
    return 1


def _report_end(path: str, end: ReadEnd | None) -> None:
    if end is None:
        return
    if end.reason == "truncated":
        _note(
            f"warning: {path}: the file might be truncated: {end.trailing_bytes} trailing bytes at offset "
            f"{end.offset} are not a complete frame"
        )
    elif end.reason == "removed":
        _note(f"{path}: the file was removed; stopped following at offset {end.offset}")


# -- info --------------------------------------------------------------------------------------------


def _add_info(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file (or, with --from stdio, a capture or -)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON document")
    _add_source(p)
    _add_dead_letter_keys(p)
    _add_storage(p)


def _cmd_info(args: argparse.Namespace) -> int:
    """Summarize a stream file: header, size, streams, beacons, end of stream, damage."""
    from nbkit.transport.file_info import summarize

    if args.source == "stdio":
        return _info_capture(args)
    with _range_notes():
        summary = summarize(args.file, dead_letter_keys=args.dead_letter_keys, **_reading(args, args.file))
    if args.json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(summary.to_text())
    return 0


# -- pipe captures (cat / info --from stdio) -------------------------------------------------------


def _capture_lines(path: str) -> tuple[str, Iterator[bytes]]:
    """(name for errors, binary lines) of a capture file, or of stdin for ``-``."""
    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            return "stdin", (line.encode("utf-8") for line in sys.stdin)
        return "stdin", iter(stream)
    check_local_file(path, "a capture of stdio lines", pipes=True)  # a pipe is read as stdin is, to its end
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed when the generator ends)
    except FileNotFoundError:
        raise MissingFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise PathIsDirectoryError(f"{path}: is a directory, not a capture of stdio lines") from None

    def lines() -> Iterator[bytes]:
        with f:
            yield from f

    return path, lines()


def _cat_capture(args: argparse.Namespace, keys: frozenset[str] | None) -> int:
    """``cat --from stdio``: the capture's messages with their envelopes opened; a malformed line is
    one ``nbkit:`` line on stderr (with its number) and the rest is still printed; exit 1 if any was."""
    from nbkit.transport.stdio_capture import LineProblem, read_capture

    if args.follow:
        raise InvalidArgumentError(
            "--follow reads growing stream files; for a pipe, read the stage's output as it comes "
            "(... | nbkit cat --from stdio -)"
        )
    name, lines = _capture_lines(args.file)
    out = sys.stdout
    problems = shown = 0
    seen: set[str] = set()
    for item in read_capture(lines, source=name):
        if isinstance(item, LineProblem):
            out.flush()
            _note(" ".join(str(item.error).split()))
            problems += 1
            continue
        if keys is not None and item.stream_key not in keys:
            seen.add(item.stream_key)
            continue
        shown += 1
        out.write(
            format_captured(
                args.format,
                item.line,
                item.stream_key,
                item.shard_id,
                item.seq,
                item.timestamp_ms,
                item.headers,
                item.payload,
                header_only=args.header_only,
            )
        )
    out.flush()
    status = _no_such_key(name, keys, shown, seen)
    return 1 if problems else status


def _info_capture(args: argparse.Namespace) -> int:
    """``info --from stdio``: lines, messages, copies and dead letters per key, malformed lines."""
    from nbkit.transport.stdio_capture import read_capture, summarize_capture

    name, lines = _capture_lines(args.file)
    summary = summarize_capture(read_capture(lines, source=name), source=name, dead_letter_keys=args.dead_letter_keys)
    if args.json:
        sys.stdout.write(json.dumps(summary.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(summary.to_text())
    return 0


# -- write -------------------------------------------------------------------------------------------


def _add_write(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file to create or append to")
    p.add_argument(
        "--beacon-interval",
        type=int,
        metavar="N",
        default=None,
        help=f"beacon interval of a new file without a header line, a multiple of 1024 "
        f"(default {DEFAULT_BEACON_INTERVAL})",
    )
    p.add_argument("--eos", action="store_true", help="end with an end-of-stream mark if the input had none")
    _add_lock_timeout(p)


def _add_lock_timeout(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lock-timeout",
        type=float,
        metavar="SECONDS",
        default=10.0,
        help="how long to wait for a writer that holds the file exclusively (default 10); other nbkit "
        "writers (a running service, nbkit publish) only hold the lock while they append",
    )


def _stdin_lines() -> Iterator[tuple[int, str]]:
    """(line number, text) of stdin, decoding each line as UTF-8 and naming the line when it is not."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:  # a text-only stdin (embedding, tests)
        for n, line in enumerate(sys.stdin, 1):
            yield n, line
        return
    for n, raw in enumerate(stream, 1):
        try:
            yield n, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Utf8Error(f"the line is not UTF-8 ({exc.reason} at byte {exc.start})", path="stdin", line=n) from None


def _stdin_idle() -> Callable[[], bool] | None:
    """A check that stdin has nothing readable right now (``select``), or None for an in-memory stdin
    (tests, embedding), which never waits."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return lambda: not select.select([fd], [], [], 0)[0]


def _cmd_write(args: argparse.Namespace) -> int:
    """Append messages given as ndjson on stdin (what `cat --format ndjson` prints) to a stream file."""
    from nbkit.transport.ndjson import write_ndjson

    write_ndjson(
        args.file,
        _stdin_lines(),
        beacon_interval=args.beacon_interval,
        eos=args.eos,
        lock_timeout=args.lock_timeout,
        idle=_stdin_idle(),
        note=_note,
    )
    return 0


# -- run -------------------------------------------------------------------------------------------


#: ``nbkit run --help``'s text after the summary line: what stdout is, and the exit codes.
RUN_DESCRIPTION = """\
A pipe stage (a StdioBroker) reads stdin and writes only data to stdout: its published messages and
retry copies, one line each. Anything a handler prints goes to stderr, as do warnings and log lines.

SIGINT, SIGTERM and SIGHUP stop it gracefully. A stage whose stdin is a pipe reads on until the stage
before closes it (the whole pipeline got the signal: that stage's delayed copies still come through);
one reading a terminal or a file stops reading and delivers the lines it has read. Then it waits for its
delayed copies (App(shutdown_timeout=...)). A second signal stops at once: each pending copy is
abandoned and named. At exit one line sums the run up: deliveries per outcome, copies written, dead
letters, rejects, losses, lines read and left unread.

exit codes:
  0    the input ended and nothing was lost
  1    an error (a bad stdin line with --on-bad-lines error, ...), printed as one line nbkit: ...
  2    bad arguments, or a service that cannot be loaded or is misconfigured
  3    copies were abandoned or lost, or lines read were not delivered (whatever stopped the run)
  129  stopped by SIGHUP, 130 by SIGINT (Ctrl-C), 143 by SIGTERM, nothing lost
  141  stdout's reader went away (broken pipe); the summary says what was lost
"""


def _add_run(p: argparse.ArgumentParser) -> None:
    p.description = f"{p.description}\n\n{RUN_DESCRIPTION}"  # in lines: _HelpFormatter keeps them
    p.add_argument(
        "target",
        metavar="MODULE:ATTR",
        help="where the app is: a module importable from the current directory and the name of an "
        "nbkit.App (or of one broker, or of a function returning either) in it, e.g. service:app",
    )
    p.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level on stderr (default WARNING); ERROR still shows every loss, and the summary line",
    )
    p.add_argument(
        "--ack-log-rate",
        type=_positive_number,
        metavar="N",
        help="at most N 'ack / nack failed' WARNING lines per second; one line counts those left out "
        "(default: every line)",
    )
    p.add_argument(
        "--max-pending",
        type=_pending_cap,
        metavar="N",
        help=f"at most N delayed copies held in memory; at the cap no input is taken until copies are due "
        f"(backpressure, not loss). Default: the app's max_pending ({_default_max_pending():,}; a copy takes "
        "about 800 bytes plus its payload); 0: no cap",
    )
    p.add_argument(
        "--skip-blank-lines",
        action="store_true",
        help="pipe: skip empty and whitespace-only stdin lines (by default each is a message with that payload "
        "for every subscription, as upstream reads it)",
    )
    p.add_argument(
        "--strip-cr",
        action="store_true",
        help="pipe: drop the \\r ending a line (CRLF input; by default it stays in the payload, as upstream)",
    )
    p.add_argument(
        "--on-bad-lines",
        choices=("error", "warn", "skip"),
        help="pipe: a malformed or non-UTF-8 stdin line stops the stage (error, the default, as upstream; the "
        "summary counts the lines left unread), is logged and skipped (warn), or skipped (skip)",
    )
    p.add_argument(
        "--max-line-bytes",
        type=_line_bound,
        metavar="N",
        help=f"pipe: the longest stdin line taken, in bytes (default {MAX_LINE_BYTES:,}, 16 MiB; 0: no bound; "
        "units as 64MiB or 100MB); a longer line is a bad line naming its number (see --on-bad-lines), and no more "
        "than N bytes of it are held in memory",
    )


def _line_bound(text: str) -> int:
    """``--max-line-bytes``: a byte count as ``--block-size`` takes it (``64MiB``), or 0 (no bound)."""
    return 0 if text.strip() == "0" else _byte_count(text)


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of lines per second, not {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def _pending_cap(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of copies, not {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: no cap), not {text}")
    return value


def _default_max_pending() -> int:
    from nbkit.runtime.app import MAX_PENDING

    return MAX_PENDING


def load_app(target: str) -> App:
    """Import ``MODULE:ATTR`` (from the current directory first) and return an :class:`nbkit.App`."""
    from nbkit.errors import ConfigurationError
    from nbkit.runtime.app import App
    from nbkit.runtime.broker import Broker

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"expected MODULE:ATTR (for example service:app), not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name != module_name and not module_name.startswith(exc.name + "."):
            raise ConfigurationError(
                f"cannot import {module_name!r}: {exc} ({_where(exc)}); install what it imports"
            ) from None
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}; run from the folder that holds it") from None
    except NbkitError:
        raise  # e.g. a registration the module makes is refused: already one line that says why
    except Exception as exc:  # the service module itself is broken: say where, in one line
        detail = exc.msg if isinstance(exc, SyntaxError) else exc
        raise ConfigurationError(
            f"cannot import {module_name!r}: {type(exc).__name__}: {detail} ({_where(exc)}); "
            f"run python -c 'import {module_name}' to see the traceback"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(f"module {module_name!r} has no attribute {attr!r}") from None
    if callable(obj) and not isinstance(obj, (App, Broker)):
        try:
            obj = obj()
        except NbkitError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"{target}() raised {type(exc).__name__}: {exc} ({_where(exc)})") from None
    if isinstance(obj, Broker):
        obj = App(obj)
    if not isinstance(obj, App):
        raise ConfigurationError(f"{target} is a {type(obj).__name__}, not an nbkit.App or a broker")
    return obj


def _where(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised (for a SyntaxError: the line that does not parse)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}"
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown place"


def _cmd_run(args: argparse.Namespace) -> int:
    """Run a service (an nbkit.App) until its subscriptions end; SIGINT/SIGTERM/SIGHUP shut it down gracefully."""
    import logging

    from nbkit.errors import StdoutClosedError
    from nbkit.runtime.logs import STREAM_ERROR
    from nbkit.runtime.run_log import LogOrderedStream, RunLogHandler, flush_run_logs
    from nbkit.runtime.stdio_broker import StdioBroker

    root = logging.getLogger()
    streams = sys.stdout, sys.stderr
    handler: RunLogHandler | None = None
    if not root.handlers:  # as logging.basicConfig: an embedding that set up logging keeps its own
        # one buffered line per record on stderr, ending with its delivery: stream_key=orders seq=17 attempt=2;
        # "subscriber stream error" is left out: the error it reports ends the run and is printed as the one
        # ``nbkit: ...`` line (not twice)
        handler = RunLogHandler(sys.stderr, skip_texts=(STREAM_ERROR,), ack_rate=args.ack_log_rate)
        root.addHandler(handler)
        root.setLevel(getattr(logging, args.log_level))
        # what the service prints comes after the log lines of the deliveries settled before it
        sys.stdout, sys.stderr = LogOrderedStream(sys.stdout), LogOrderedStream(sys.stderr)
    app: App | None = None
    status = 0
    try:
        app = load_app(args.target)
        if args.max_pending is not None:
            app.max_pending = args.max_pending or None
        pipes = [b for b in app.brokers if isinstance(b, StdioBroker)]
        for b in pipes:
            b.configure_input(
                skip_blank_lines=args.skip_blank_lines or None,
                strip_cr=args.strip_cr or None,
                on_bad_lines=args.on_bad_lines,
                max_line_bytes=args.max_line_bytes,
            )
        if pipes:  # stdout is the pipe's: what a handler prints goes to stderr (the sink keeps stdout itself)
            sys.stdout = sys.stderr
        app.run()
    except StdoutClosedError:  # the reader left during the final flush: the summary says so
        assert app is not None
        app.stop_reason = "broken pipe"
    except NbkitError as err:
        if app is None or not app.started:
            raise  # a service that cannot start: one ``nbkit: ...`` line, no summary
        flush_run_logs()
        _note(_error_line(err))
        status = err.exit_code
    finally:
        flush_run_logs()  # the gathered log lines go out before any ``nbkit: ...`` line about the end
        if handler is not None:
            root.removeHandler(handler)
            handler.close()
        sys.stdout, sys.stderr = streams
    summary = app.summary()
    if summary.stop == "broken pipe":
        _silence_stdout()
    _note(summary.to_text())
    return status or summary.exit_status


# -- demo ------------------------------------------------------------------------------------------


def _add_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="nbkit-demo", metavar="DIR", help="folder for the files (default nbkit-demo)")
    p.add_argument("--orders", type=int, default=120, help="how many orders (default 120)")
    p.add_argument("--seed", type=int, default=7, help="seed of the generated workload (default 7)")
    p.add_argument("--no-png", action="store_true", help="skip the dashboard picture")


def _cmd_demo(args: argparse.Namespace) -> int:
    """Run an order service with transient failures on a stream file and on a pipe; summarize both."""
    from nbkit.notebook.demo import run_demo

    if args.orders < 1:
        raise InvalidArgumentError(f"--orders must be at least 1, not {args.orders}")
    result = run_demo(args.out, orders=args.orders, seed=args.seed, png=not args.no_png)
    print(
        f"nbkit demo: {args.orders} orders, up to 4 attempts each, retry_after(2**attempt s), "
        "dead-letter key orders.dead\n"
    )
    print(result.summary.to_string())
    print()
    print(f"stream file:       {result.stream_file}  (try: nbkit info {result.stream_file})")
    print(f"pipe stage output: {result.pipe_output}")
    if result.dashboard:
        print(f"dashboard:         {result.dashboard}")
    return 0


# -- repair ----------------------------------------------------------------------------------------


def _add_repair(p: argparse.ArgumentParser) -> None:
    p.add_argument("damaged", metavar="DAMAGED", help="the damaged .ss file (only read, never changed)")
    p.add_argument("output", metavar="OUT", help="where the clean copy goes")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    _add_storage(p)


def _cmd_repair(args: argparse.Namespace) -> int:
    """Write a clean copy of a damaged stream file with every recoverable message; print what was dropped."""
    from nbkit.transport.repair import repair

    options = _storage_options(args)
    if not is_url(args.damaged) and not is_url(args.output) and (options or args.block_size is not None):
        raise InvalidArgumentError(
            "--storage-option, --timeout and --block-size are for URLs; DAMAGED and OUT are local paths"
        )
    with _range_notes():
        report = repair(
            args.damaged, args.output, force=args.force, storage_options=options or None, block_size=args.block_size
        )
    sys.stdout.write("".join(line + "\n" for line in report.lines()))
    return 0


# -- export ----------------------------------------------------------------------------------------


def _add_export(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="the Parquet file to write")
    _add_key_filter(p)
    p.add_argument(
        "--payload",
        choices=("auto", "bytes", "text", "json", "objects"),
        default="auto",
        help="payload column as nbkit.read_stream's payload= (default auto: text where UTF-8, else bytes)",
    )
    p.add_argument("--include-internal", action="store_true", help="keep EOS and the priming message")
    _add_times(p)
    _add_on_bad_frames(p)
    _add_storage(p)
    # In lines, so kept verbatim (rewrapped, argparse would break the distribution's name at its hyphen).
    p.epilog = (
        f"install the extra {EXTRA!r} with one of:\n"
        f"  pip install -e '.[{EXTRA}]'                # in a clone of the repository\n"
        f"  pip install '{DISTRIBUTION}[{EXTRA}]'    # the published package (not 'nbkit')"
    )


def _cmd_export(args: argparse.Namespace) -> int:
    """Export a stream file to Parquet (needs nbkit's optional extra 'scale': Dask, distributed, pyarrow)."""
    import warnings

    from nbkit.scale.parquet import to_parquet

    keys = _check_keys(args.keys)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rows = to_parquet(
                args.file,
                args.output,
                keys=keys,
                payload=args.payload,
                include_internal=args.include_internal,
                start=_after(args.since),
                end=args.until,
                on_bad_frames=args.on_bad_frames,
                storage_options=_storage_options(args) or None,
                block_size=args.block_size,
            )
        except MissingExtraError:
            raise
        except ImportError as exc:  # pyarrow there but broken: still one line
            raise MissingExtraError(str(exc)) from None
    for w in caught:  # e.g. a partial frame at the tail: one line, as the other commands say it
        _note(str(w.message))
    _note(f"wrote {rows} messages to {args.output}")
    return 0


# -- redrive ---------------------------------------------------------------------------------------


def _add_redrive(p: argparse.ArgumentParser) -> None:
    from nbkit.runtime.redrive import WHERE_HELP

    p.add_argument("file", metavar="FILE", help="the .ss stream file (with --capture: a pipe capture, - for stdin)")
    p.add_argument("--from", dest="source", required=True, metavar="KEY", help="the dead-letter key, e.g. orders.dead")
    p.add_argument("--to", dest="target", required=True, metavar="KEY", help="the key to publish to, e.g. orders")
    p.add_argument("--where", metavar="EXPR", help=f"which dead letters (default all): {WHERE_HELP}")
    p.add_argument(
        "--keep-count",
        action="store_true",
        help="keep x-ruststream-retry-count as it was (default: reset it, so the message gets all its attempts)",
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be appended; change nothing")
    p.add_argument(
        "--capture",
        action="store_true",
        help="FILE is a capture of stdio lines (a stage's stdout); print the redriven lines for the next stage's stdin",
    )


def _redrive_line(dead: Any, target: str) -> str:
    """One line of ``--dry-run``: which dead letter, where to, its payload and headers as they are now."""
    headers = ", ".join(
        f"{k}: {v.decode('utf-8', errors='replace') if isinstance(v, bytes) else v}" for k, v in dead.headers.items()
    )
    return f"{dead.ref} -> {target}: {dead.preview(60)}  [headers: {headers or '(none)'}]"


def _cmd_redrive(args: argparse.Namespace) -> int:
    """Publish dead letters again under the key a fixed service reads (append only; a rerun skips those done)."""
    from nbkit.runtime.redrive import redrive, redrive_lines

    options = {"source": args.source, "target": args.target, "where": args.where, "keep_count": args.keep_count}
    if args.capture:
        if args.file == "-":
            result = redrive_lines(sys.stdin, **options)
        else:
            try:
                with open(args.file, encoding="utf-8") as f:
                    result = redrive_lines(f, **options)
            except UnicodeDecodeError as exc:
                raise Utf8Error(
                    f"not UTF-8 text (byte {exc.start}): a capture holds stdio lines", path=args.file
                ) from None
        if args.dry_run:
            result = dataclasses.replace(result, dry_run=True)
            for dead in result.redriven:
                print(_redrive_line(dead, args.target))
        else:
            sys.stdout.writelines(result.lines)
        _note(result.describe())
        return 0
    result = redrive(args.file, dry_run=args.dry_run, **options)
    if args.dry_run:
        for dead in result.redriven:
            print(_redrive_line(dead, args.target))
    _note(result.describe() + (f" (sequences {result.seqs[0]}..{result.seqs[-1]})" if result.seqs else ""))
    return 0


# -- publish ---------------------------------------------------------------------------------------


def _add_publish(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file to append to (created if missing)")
    p.add_argument("key", metavar="KEY", help="the stream key, e.g. orders")
    p.add_argument(
        "payload",
        metavar="PAYLOAD",
        nargs="?",
        default=None,
        help="the message (UTF-8 text); without it, each line of stdin is one message "
        "(its line ending removed, empty lines skipped)",
    )
    p.add_argument(
        "-H",
        "--header",
        dest="headers",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="a header for every message, in the rs1/rs2 envelope (repeatable)",
    )
    p.add_argument("--shard", type=int, default=0, metavar="N", help="the shard id (default 0)")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing (by default one line `published KEY seq N` per message, once it is in the file)",
    )
    _add_lock_timeout(p)


def _parse_headers(specs: list[str]) -> dict[str, str]:
    """``-H NAME:VALUE`` options as a dict (the value's surrounding spaces removed)."""
    headers: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition(":")
        if not sep or not name.strip():
            raise InvalidArgumentError(f"-H {spec!r}: expected NAME:VALUE, e.g. -H x-tenant:acme")
        headers[name.strip()] = value.strip()
    return headers


def _cmd_publish(args: argparse.Namespace) -> int:
    """Append messages to a stream file that a running service may be reading and writing."""
    from nbkit.transport.file_writer import StreamWriter

    validate_key(args.key)
    if not 0 <= args.shard <= MAX_U64:
        raise InvalidArgumentError(f"--shard {args.shard}: a shard id is an unsigned 64-bit integer")
    headers = _parse_headers(args.headers)
    if args.payload is not None:
        payloads: Iterator[bytes] = iter([args.payload.encode("utf-8")])
    else:
        payloads = (line.rstrip("\r\n").encode("utf-8") for _, line in _stdin_lines() if line.rstrip("\r\n"))
    with StreamWriter(args.file, lock_timeout=args.lock_timeout) as writer:
        for payload in payloads:
            written = writer.write(args.key, envelope.encode(headers, payload, force_text=False), shard_id=args.shard)
            if not args.quiet:
                print(f"published {written.stream_key} seq {written.seq}", flush=True)
    return 0


# -- watch -----------------------------------------------------------------------------------------


def _add_watch(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the .ss stream file a service writes")
    p.add_argument("--every", type=float, default=1.0, metavar="S", help="seconds between refreshes (default 1)")
    p.add_argument("--latest", type=int, default=5, metavar="N", help="how many of the newest messages to show")
    p.add_argument("--once", action="store_true", help="print the summary of what is there now and exit")
    _add_dead_letter_keys(p)


def _add_dead_letter_keys(p: argparse.ArgumentParser, *, when: str = "") -> None:
    """``--dead-letter-key KEY`` (repeatable), the same option for info, watch and lineage: which keys are the
    dead-letter keys, since a file or capture does not record what a registration declared."""
    p.add_argument(
        "--dead-letter-key",
        action="append",
        dest="dead_letter_keys",
        metavar="KEY",
        help=f"{when}a dead-letter key (repeatable; default: keys whose last part is dead, dlq or dead-letter)",
    )


def _cmd_watch(args: argparse.Namespace) -> int:
    """Show a summary of a stream file that a service writes, refreshing until Ctrl-C (or rotation/removal)."""
    from nbkit.transport.file_watch import FileWatch, render_text

    if args.every <= 0:
        raise InvalidArgumentError(f"--every {args.every:g}: the refresh interval must be more than 0 seconds")
    if not os.path.exists(args.file):
        raise MissingFileError(f"{args.file}: no such file; start the service first (or give the stream file's path)")
    out = sys.stdout
    tty = out.isatty()
    with FileWatch(args.file, latest=max(args.latest, 0) or 1, dead_letter_keys=args.dead_letter_keys) as watch:
        while True:
            state = watch.update()
            if args.once:
                while state.following and watch.reader.size() > state.offset:  # all that is there now
                    before = state.offset
                    state = watch.update()
                    if state.offset == before:
                        break
            text = render_text(state, latest=args.latest)
            out.write(("\x1b[H\x1b[2J" + text) if tty else text + "\n")
            out.flush()
            if args.once or not state.following:
                return 0
            time.sleep(args.every)


# -- lineage ---------------------------------------------------------------------------------------


def _add_lineage(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a .ss stream file, or with --from stdio a capture of pipe lines; several are read in order "
        "(for a pipe stage: its stdin capture first, then its stdout)",
    )
    p.add_argument(
        "--from",
        dest="source",
        choices=("file", "stdio"),
        default="file",
        help="what FILE holds: a stream file (default) or stdio lines as a pipe stage writes them",
    )
    _add_dead_letter_keys(p)
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    _add_times(p)
    _add_storage(p)


def _cmd_lineage(args: argparse.Namespace) -> int:
    """What happened to each message: attempts, observed retry delays and dead letters, from the file alone."""
    import pathlib

    if args.source == "stdio" and (args.since is not None or args.until is not None):
        raise InvalidArgumentError(
            "--since and --until bound a stream file's read; a capture of stdio lines is read whole"
        )
    for path in args.files:  # every local input checked before the first is read (and pandas imported)
        if args.source == "stdio":
            check_local_file(path, "a capture of stdio lines", pipes=True)
        elif not is_url(path):
            check_local_file(path)

    from nbkit.tabular.frames import concat_frames, read_pipe, read_stream
    from nbkit.tabular.lineage import lineage, summarize

    frames = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for path in args.files:
            window = {"start": _after(args.since), "end": args.until}
            if args.source == "file":
                frames.append(read_stream(path, progress=False, **window, **_reading(args, path)))
            else:
                frames.append(read_pipe(pathlib.Path(path)))
    for w in caught:  # a partial frame at the tail: said once, as the other commands say it
        _note(str(w.message))
    frame = frames[0] if len(frames) == 1 else concat_frames(*frames)
    summary = summarize(lineage(frame, dead_letter_keys=args.dead_letter_keys))
    if args.json:
        print(dumps({"files": list(args.files), **summary.to_dict()}))
    else:
        print(", ".join(args.files))
        print(summary.to_text())
    return 0


def _add_doctor(p: argparse.ArgumentParser) -> None:
    p.add_argument("--folder", default=".", metavar="DIR",
                   help="where the lessons will run (free disk is measured there; default: here)")  # fmt: skip


def _cmd_doctor(args: argparse.Namespace) -> int:
    """Check that this machine is ready for the lessons (Python, install, core, JupyterLab, viewer, disk)."""
    from nbkit.lab.setup_check import main

    return main(args.folder)


# -- completion ----------------------------------------------------------------------------------------


def _add_completion(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=SHELLS, help="the shell to write the script for")
    p.epilog = (
        "bash: source <(nbkit completion bash)  (in ~/.bashrc)\n"
        "zsh:  source <(nbkit completion zsh)   (in ~/.zshrc, after compinit)\n"
        "fish: nbkit completion fish > ~/.config/fish/completions/nbkit.fish"
    )


def _cmd_completion(args: argparse.Namespace) -> int:
    """Print a shell completion script for nbkit (bash, zsh or fish): subcommands, options, files."""
    sys.stdout.write(completion_script(build_parser(), args.shell))
    return 0


# -- registry and entry point ------------------------------------------------------------------------

#: (name, add_arguments, handler); the handler's docstring's first line is the command's help.
_COMMANDS: list[tuple[str, AddArguments, Handler]] = [
    ("cat", _add_cat, _cmd_cat),
    ("info", _add_info, _cmd_info),
    ("write", _add_write, _cmd_write),
    ("publish", _add_publish, _cmd_publish),
    ("watch", _add_watch, _cmd_watch),
    ("run", _add_run, _cmd_run),
    ("demo", _add_demo, _cmd_demo),
    ("export", _add_export, _cmd_export),
    ("redrive", _add_redrive, _cmd_redrive),
    ("lineage", _add_lineage, _cmd_lineage),
    ("repair", _add_repair, _cmd_repair),
    ("doctor", _add_doctor, _cmd_doctor),
    ("completion", _add_completion, _cmd_completion),
]


def _summary(handler: Handler) -> str:
    lines = (handler.__doc__ or "").strip().splitlines()
    return lines[0] if lines else ""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subparser per entry of :data:`_COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run ruststream-style services on SeaStreamer stream files and pipes; read, write and "
        "inspect .ss files.",
        epilog="Each command's --help ends with examples, e.g. nbkit cat --help.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print nbkit's version and which core (compiled or pure-Python) is active",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add_arguments, handler in _COMMANDS:
        summary = _summary(handler)
        p = sub.add_parser(name, help=summary, description=summary, formatter_class=_HelpFormatter)
        add_arguments(p)
        add_examples(p, name)
        p.set_defaults(handler=handler)
    return parser


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a description or epilog written in lines keeps them.

    One-paragraph texts are wrapped to the terminal as usual; a text with line breaks (``run``'s exit
    codes, the install lines, the examples) is printed as written, so no command is broken mid-way.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


class _VersionAction(argparse.Action):
    """``--version``: print :func:`_version_line` as one unwrapped line and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        sys.stdout.write(_version_line() + "\n")
        parser.exit(0)


def _version_line() -> str:
    """What ``nbkit --version`` prints: ``nbkit 0.1.0 (compiled core ...; compiled writer route; compiled JSON
    field parser; Python 3.11.7)``."""
    return f"{PROG} {nbkit.__version__} ({core.twins_description()}; Python {platform.python_version()})"


def _core_notice() -> None:
    """The one-line notice when nbkit runs on its pure-Python twin without being asked to."""
    if core.CORE != "compiled" and not core.FORCED_PURE:
        _note(
            f"note: running on the pure-Python core ({core.UNAVAILABLE}: no C compiler at install?); "
            "reinstall with one for speed, or set NBKIT_PURE_PYTHON=1 to silence this note"
        )


def _error_line(err: NbkitError) -> str:
    """The error as one line; one the troubleshooting page explains ends with that entry's address."""
    line = " ".join(str(err).split())
    return f"{line} (see {TROUBLESHOOTING_URL}#{err.troubleshooting})" if err.troubleshooting else line


def _silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush cannot complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # stdout is not a real file (tests, embedding): nothing will be flushed to a pipe


def _utf8_stdout() -> None:
    """Payloads are UTF-8 (or shown as such): print UTF-8 whatever the locale says."""
    enc = (getattr(sys.stdout, "encoding", None) or "utf-8").lower().replace("_", "-")
    if enc not in ("utf-8", "utf8") and hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(encoding="utf-8")
        except (ValueError, OSError):
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (``python -m nbkit`` passes it to sys.exit)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.handler is not _cmd_run:  # a run takes them as it starts; any other command acts on them now
            held_signals.deliver()
        _core_notice()
        _utf8_stdout()
        status = args.handler(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except NbkitError as err:
        _note(_error_line(err))
        return err.exit_code
    except OSError as err:  # I/O trouble outside nbkit's own checks (a full disk, a closed stdin)
        where = f"{err.filename}: " if err.filename else ""
        _note(f"{where}{err.strerror or err}")
        return 1
