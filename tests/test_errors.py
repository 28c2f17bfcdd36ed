"""Every error class is raised by a real public call, and is also the stdlib exception it is.

One row per class of :mod:`nbkit.errors`: the call that raises it, the stdlib base a caller who knows
nothing of nbkit catches it by, and a word of its message. A last test checks that the table covers
every class the module defines, so a new class comes with its row (or is not added).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_run import one_error_line

import nbkit.errors as errors
from nbkit import App, FileBroker, FilePosition, PositionStore, StdioBroker, StreamReader, StreamWriter
from nbkit.cli import main
from nbkit.runtime.delivery import Delivery
from nbkit.scale import require
from nbkit.tabular.frames import read_stream
from nbkit.transport.pipe_io import LineSink
from nbkit.transport.repair import repair
from nbkit.wire.stdio_line import parse_line


def _written(path: Path, *messages: tuple[str, bytes]) -> Path:
    with StreamWriter(path) as writer:
        for key, payload in messages:
            writer.write(key, payload)
    return path


def _damaged(path: Path, old: bytes, new: bytes) -> Path:
    data = _written(path, ("orders", b"paid")).read_bytes()
    path.write_bytes(data.replace(old, new, 1))
    return path


def _read(path: Path) -> None:
    list(StreamReader(path))


def _cut_header(tmp: Path) -> None:
    path = tmp / "s.ss"
    path.write_bytes(b"Ss\x01")  # 3 of the header's 128 bytes
    _read(path)


def _bad_checksum(tmp: Path) -> None:
    path = _written(tmp / "c.ss", ("orders", b"paid"))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # the payload's last byte
    path.write_bytes(data)
    _read(path)


def _locked(tmp: Path) -> None:
    with StreamWriter(tmp / "l.ss", exclusive=True):
        StreamWriter(tmp / "l.ss", lock_timeout=0.05)


def _closed_writer(tmp: Path) -> None:
    writer = StreamWriter(tmp / "w.ss")
    writer.close()
    writer.write("orders", b"x")


def _shut_broker(tmp: Path) -> None:
    broker = FileBroker(tmp / "b.ss")
    broker.shutdown()
    broker.publish("orders", b"x")


def _no_retry_destination(tmp: Path) -> None:
    broker = StdioBroker(stdin=[], stdout=[])
    broker.subscriber("jobs")(lambda delivery: None)
    App(broker).start()


def _repair_onto_itself(tmp: Path) -> None:
    path = _written(tmp / "r.ss")
    repair(path, path)


def _repair_onto_existing(tmp: Path) -> None:
    repair(_written(tmp / "r.ss"), _written(tmp / "out.ss"))


def _bad_position_store(tmp: Path) -> None:
    (tmp / "positions.json").write_text("{not json")
    PositionStore(tmp / "positions.json")


def _unreadable_position_store(tmp: Path) -> None:
    (tmp / "positions.json").mkdir()
    PositionStore(tmp / "positions.json")


def _seek_past_end(tmp: Path) -> None:
    StreamReader(_written(tmp / "s.ss", ("orders", b"x"))).seek(FilePosition.sequence(9), key="orders")


def _closed_pipe(tmp: Path) -> None:
    """A pipe stage's output whose reader has gone: the flush meets a broken pipe."""
    r, w = os.pipe()
    os.close(r)
    try:
        sink = LineSink(os.fdopen(w, "wb", buffering=0, closefd=False))
        sink.write("[x | 0] lost\n")
        sink.flush()
    finally:
        os.close(w)


def _ack() -> None:
    Delivery(b"x", {}, "orders", 0, 1, 0, "file", "work").ack()


def _unwritable(tmp: Path) -> None:
    path = _written(tmp / "ro.ss")
    path.chmod(0o444)
    StreamWriter(path).write("orders", b"x")


#: class -> (the call, given a fresh folder; the stdlib base; a word of the message)
CASES: dict[type[errors.NbkitError], tuple[Callable[[Path], object], type[BaseException], str]] = {
    errors.FormatError: (_bad_position_store, ValueError, "position store"),
    errors.ByteMarkError: (lambda t: _read(_damaged(t / "m.ss", b"Ss", b"Zz")), ValueError, "Ss"),
    errors.VersionError: (lambda t: _read(_damaged(t / "v.ss", b"Ss\x01", b"Ss\x02")), ValueError, "version"),
    errors.ChecksumError: (_bad_checksum, ValueError, "checksum"),
    errors.StreamKeyError: (lambda t: _read(_damaged(t / "k.ss", b"orders", b"ord rs")), ValueError, "ord rs"),
    errors.Utf8Error: (lambda t: _read(_damaged(t / "u.ss", b"orders", b"\xffrders")), ValueError, "UTF-8"),
    errors.TimestampRangeError: (
        lambda t: StreamWriter(t / "t.ss").write("orders", b"x", timestamp_ms=-1),
        ValueError,
        "timestamp",
    ),
    errors.TruncatedError: (_cut_header, ValueError, "128"),
    errors.BeaconIntervalError: (lambda t: StreamWriter(t / "b.ss", beacon_interval=1000), ValueError, "1000"),
    errors.LineParseError: (lambda t: parse_line("[2024-01-01T00:00:00 | k | x] {}", lineno=3), ValueError, "line 3"),
    errors.PayloadTooLargeError: (lambda t: StreamWriter(t / "p.ss", file_name="n" * 200), ValueError, "111"),
    errors.InvalidArgumentError: (_repair_onto_itself, ValueError, "being repaired"),
    errors.InvalidKeyError: (lambda t: StreamWriter(t / "k.ss").write("bad key!", b"x"), ValueError, "' !'"),
    errors.ConfigurationError: (lambda t: App(FileBroker(t / "a.ss"), shutdown_timeout=-1), ValueError, "-1"),
    errors.RetryDestinationError: (_no_retry_destination, ValueError, "out_retry"),
    errors.ClosedError: (_closed_writer, ValueError, "closed"),
    errors.NotConnectedError: (_shut_broker, ValueError, "not connected"),
    errors.SeekError: (_seek_past_end, LookupError, "no sequence 9"),
    errors.UnknownKeyError: (
        lambda t: read_stream(_written(t / "u.ss", ("orders", b"x")), keys="order"),
        LookupError,
        "the keys there: orders",
    ),
    errors.MissingFileError: (lambda t: StreamReader(t / "nowhere.ss"), FileNotFoundError, "no such file"),
    errors.PathIsDirectoryError: (lambda t: StreamReader(t), IsADirectoryError, "is a directory"),
    errors.FilePermissionError: (_unwritable, PermissionError, "permission denied"),
    errors.OutputExistsError: (_repair_onto_existing, FileExistsError, "already exists"),
    errors.FileIOError: (_unreadable_position_store, OSError, "cannot read the position store"),
    errors.FileLimitError: (
        lambda t: StreamWriter(t / "f.ss", size_limit=200).write("orders", b"x" * 100),
        OSError,
        "size limit",
    ),
    errors.WriterLockedError: (_locked, TimeoutError, "is writing this stream file"),
    errors.StdoutClosedError: (_closed_pipe, BrokenPipeError, "broken pipe"),
    errors.MissingExtraError: (
        lambda t: require("nbkit_not_installed", feature="this"),
        ImportError,
        "nbkit-ruststream[scale]",
    ),
    errors.AckError: (lambda t: _ack(), errors.NbkitError, "not supported"),
}


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_each_error_is_raised_by_a_public_call_as_its_stdlib_base(cls, tmp_path: Path) -> None:
    call, base, word = CASES[cls]
    if cls is errors.FilePermissionError and os.geteuid() == 0:
        pytest.skip("running as root: a read-only file is still writable")
    with pytest.raises(base) as info:  # caught by the stdlib base alone
        call(tmp_path)
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"
    assert isinstance(info.value, errors.NbkitError) and issubclass(cls, base)
    assert word in str(info.value)


def test_the_os_errors_carry_their_errno(tmp_path: Path) -> None:
    import errno

    with pytest.raises(FileNotFoundError) as info:
        StreamReader(tmp_path / "nowhere.ss")
    assert info.value.errno == errno.ENOENT and info.value.filename is None
    assert str(info.value) == f"{tmp_path / 'nowhere.ss'}: no such file; check the path"  # the message alone


def test_a_broken_extra_is_still_one_cli_line(tmp_path: Path, monkeypatch, capsys) -> None:
    # the module the CLI imports from (sys.modules): a test that re-imported nbkit.scale leaves the package's
    # attribute naming an older copy
    parquet = importlib.import_module("nbkit.scale.parquet")

    def without_pyarrow(*args: object, **kwargs: object) -> int:
        raise ImportError("to_parquet needs pyarrow: pip install -e '.[scale]'")

    monkeypatch.setattr(parquet, "to_parquet", without_pyarrow)
    path = _written(tmp_path / "e.ss", ("orders", b"x"))
    assert main(["export", str(path), "-o", str(tmp_path / "e.parquet")]) == 1
    assert capsys.readouterr().err == "nbkit: to_parquet needs pyarrow: pip install -e '.[scale]'\n"


def test_every_error_class_has_a_row() -> None:
    defined = {
        obj
        for name, obj in vars(errors).items()
        if inspect.isclass(obj) and issubclass(obj, errors.NbkitError) and not name.startswith("_")
    }
    assert defined - set(CASES) == {errors.NbkitError}  # the root


@pytest.mark.parametrize(
    ("argv", "status", "word"),
    [
        (["cat", "nowhere.ss"], 1, "no such file"),  # MissingFileError
        (["publish", "p.ss", "bad key"], 1, "stream key 'bad key'"),  # InvalidKeyError
        (["watch", "--every", "0", "p.ss"], 1, "--every 0"),  # InvalidArgumentError
        (["run", "nomodule"], 2, "MODULE:ATTR"),  # ConfigurationError
    ],
)
def test_the_cli_prints_one_line_and_exits_with_the_class_status(argv, status, word, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.startswith("nbkit: ") and err.count("\n") == 1 and word in err, err


def _troubleshooting_anchors() -> set[str]:
    """The anchors of docs/troubleshooting.md's entries, as the site makes them from the headings (MyST's
    slug: lower case, punctuation dropped, spaces to hyphens)."""
    page = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"
    titles = [
        line[3:].replace("`", "") for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("## ")
    ]
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-") for title in titles}


def test_each_troubleshooting_pointer_names_an_entry_of_the_page() -> None:
    pointing = {cls: cls.troubleshooting for cls in CASES if cls.troubleshooting}
    assert set(pointing) == {errors.ChecksumError, errors.RetryDestinationError}
    assert set(pointing.values()) <= _troubleshooting_anchors(), pointing
    assert errors.TROUBLESHOOTING_URL.endswith("/troubleshooting.html")


def test_a_cli_error_the_page_explains_ends_with_its_address(tmp_path: Path, capsys) -> None:
    damaged = _damaged(tmp_path / "bad.ss", b"paid", b"pa1d")
    assert main(["cat", str(damaged)]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "payload checksum mismatch" in line
    assert line.endswith(f"(see {errors.TROUBLESHOOTING_URL}#a-damaged-file)")
    # an error without an entry keeps its line as it was
    assert main(["cat", str(tmp_path / "nowhere.ss")]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert "no such file" in line and "see http" not in line


def test_a_pipe_stage_without_out_retry_points_to_its_entry(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "stage_no_retry.py").write_text(
        "from nbkit import App, StdioBroker\n"
        "broker = StdioBroker()\n"
        "@broker.subscriber('jobs')\n"
        "def work(delivery):\n"
        "    return None\n"
        "app = App(broker)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "stage_no_retry:app"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "out_retry" in line
    assert line.endswith(f"(see {errors.TROUBLESHOOTING_URL}#retrydestinationerror-when-a-pipe-stage-starts)")
