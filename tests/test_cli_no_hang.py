"""No read by the CLI waits for ever: each case is a real ``python -m nbkit`` process that must end.

A FIFO (and a directory, a socket, a device) is refused by ``info``, ``cat``, ``repair`` and ``lineage``
with an error naming what the path is, before anything opens it (opening a FIFO to read waits for a
writer). A URL whose server accepts and never answers ends at the read timeout (``--timeout``), one
where nothing listens at once, each with its own one-line error; a missing object still says "not
found". A server that ignores ``Range`` (Python's ``http.server``) is read whole, with one warning line.
``subprocess.run(timeout=...)`` is only the net that turns a hang into a failure, not a measured time.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest
from checkout_env import checkout_env
from cli_run import one_error_line
from object_store import SilentServer, http_folder, refused_port

from nbkit.transport.http_serve import FolderServer

unix_only = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and Unix sockets")

DATA = Path(__file__).parent / "data" / "sample-1.ss"
#: Seconds after which a command that has not ended is a hang (the net, not a measured time).
HANG = 120


def nbkit(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m nbkit ARGV`` with this checkout first on PYTHONPATH; a hang fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "nbkit", *argv],
        capture_output=True,
        text=True,
        env=checkout_env(),
        cwd=cwd,
        timeout=HANG,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture()
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "f.ss"
    os.mkfifo(path)
    return path


FIFO_ERROR = (
    "is a named pipe (FIFO), not a stream file; nbkit reads regular files only (a pipe or device would block "
    "the read or cannot be read by offset): copy the bytes to a file first"
)


@unix_only
@pytest.mark.parametrize(
    "argv",
    [
        ["info", "{f}"],
        ["cat", "{f}"],
        ["cat", "--format", "ndjson", "{f}"],
        ["repair", "{f}", "{out}"],
        ["lineage", "{f}"],
    ],
    ids=lambda argv: " ".join(argv[:3]),
)
def test_a_fifo_is_refused_by_name_before_it_is_opened(fifo: Path, tmp_path: Path, argv: list[str]) -> None:
    out = tmp_path / "clean.ss"
    done = nbkit(*(a.format(f=fifo, out=out) for a in argv))
    assert (done.returncode, done.stdout) == (1, "")
    assert one_error_line(done.stderr) == f"nbkit: {fifo}: {FIFO_ERROR}"
    assert not out.exists()


@unix_only
def test_lineage_names_a_directory_a_socket_and_a_device(tmp_path: Path) -> None:
    folder = tmp_path / "runs.ss"
    folder.mkdir()
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
    for path, what in [
        (folder, "is a directory, not a stream file"),
        (sock_path, "is a socket, not a stream file"),
        (Path(os.devnull), "is a character device, not a stream file"),
    ]:
        done = nbkit("lineage", str(path))
        assert done.returncode == 1
        assert one_error_line(done.stderr).startswith(f"nbkit: {path}: {what}")
    done = nbkit("lineage", "--from", "stdio", str(folder))
    assert one_error_line(done.stderr) == f"nbkit: {folder}: is a directory, not a capture of stdio lines"
    done = nbkit("lineage", str(tmp_path / "nowhere.ss"))
    assert one_error_line(done.stderr) == f"nbkit: {tmp_path / 'nowhere.ss'}: no such file; check the path"


@pytest.mark.parametrize("command", ["info", "cat", "lineage"])
def test_a_silent_server_ends_at_the_read_timeout(command: str) -> None:
    with SilentServer() as server:
        url = server.url("orders.ss")
        done = nbkit(command, url, "--timeout", "0.5")
    assert (done.returncode, done.stdout) == (1, "")
    assert one_error_line(done.stderr) == (
        f"nbkit: {url}: timed out looking it up: the server accepted the connection but sent nothing for 0.5 s "
        "(read timeout); check that the server is up, or allow longer with the timeout storage option "
        "(--timeout on the command line)"
    )


def test_a_stalled_body_ends_at_the_read_timeout(tmp_path: Path) -> None:
    (tmp_path / "stall").mkdir()
    shutil.copy(DATA, tmp_path / "stall" / "sample-1.ss")
    with http_folder(tmp_path, broken=True) as server:
        url = server.url("stall/sample-1.ss")
        done = nbkit("repair", url, str(tmp_path / "clean.ss"), "--timeout", "5,0.5")
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line.startswith(f"nbkit: {url}: timed out reading bytes 0-") and "nothing for 0.5 s (read timeout)" in line
    assert not (tmp_path / "clean.ss").exists()


def test_a_refused_port_and_a_missing_object_say_which(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{refused_port()}/orders.ss"
    for command in ("info", "cat"):
        done = nbkit(command, url)
        assert (done.returncode, done.stdout) == (1, "")
        assert one_error_line(done.stderr) == (
            f"nbkit: {url}: connection refused (looking it up): nothing listens at that host and port; "
            "check the URL and that the server runs"
        )
    with http_folder(tmp_path) as server:
        url = server.url("nowhere.ss")
        done = nbkit("info", url)
    assert done.returncode == 1
    assert one_error_line(done.stderr) == (
        f"nbkit: {url}: no such object (the server answered 'not found'); check the URL"
    )


def test_timeout_is_checked_and_is_for_urls(tmp_path: Path) -> None:
    shutil.copy(DATA, tmp_path / "sample-1.ss")
    done = nbkit("info", str(tmp_path / "sample-1.ss"), "--timeout", "5")
    assert done.returncode == 1
    assert "--timeout and --block-size are for URLs" in one_error_line(done.stderr)
    done = nbkit("info", "http://127.0.0.1:1/x.ss", "--timeout", "never")
    assert done.returncode == 2 and "give seconds, more than 0" in done.stderr


class _NoRanges(SimpleHTTPRequestHandler):
    """Python's ``http.server`` handler, as ``python -m http.server`` serves: ``Range`` is ignored."""

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_ignores_ranges_is_read_with_one_warning_line(tmp_path: Path) -> None:
    shutil.copy(DATA, tmp_path / "sample-1.ss")
    local = nbkit("cat", str(tmp_path / "sample-1.ss"))
    local_info = nbkit("info", str(tmp_path / "sample-1.ss"))
    server = FolderServer(tmp_path, handler=_NoRanges)
    try:
        url = server.url("sample-1.ss")
        done = nbkit("cat", url, "--block-size", "1KiB")
        info = nbkit("info", url)
    finally:
        server.stop()
    assert done.returncode == 0 and done.stdout == local.stdout
    line = one_error_line(done.stderr)
    assert line.startswith(f"nbkit: warning: {url}: the server ignores range requests (it sent ")
    assert "keeps the whole object in memory" in line
    assert info.returncode == 0 and info.stdout.splitlines()[1:] == local_info.stdout.splitlines()[1:]
