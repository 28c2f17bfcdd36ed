"""Serve a local folder over HTTP on 127.0.0.1, with range requests: stream files as ``http://`` URLs.

Python's ``http.server`` answers every GET with the whole file, so a reader asking for a range would
download the file again for every block. :func:`serve_folder` answers ``Range: bytes=a-b`` with
``206 Partial Content`` and only those bytes, and ``HEAD`` with the size, which is all fsspec's HTTP
filesystem (and so every nbkit reader given an ``http://`` URL) needs. It is for lessons, tests and
trying things out on one machine: it binds the loopback address only, serves one folder read-only, and
runs in a daemon thread until :meth:`FolderServer.stop` (or the end of a ``with`` block).

Examples
--------
>>> from nbkit import StreamWriter, read_stream
>>> with StreamWriter("orders.ss") as writer:
...     _ = writer.write("orders", b'{"id": 1}')
>>> with serve_folder(".") as server:                  # doctest: +SKIP
...     read_stream(server.url("orders.ss"))["seq"].tolist()
[1]
"""

from __future__ import annotations

import os
import re
import threading
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

__all__ = ["FolderServer", "RangeRequestHandler", "serve_folder"]

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class RangeRequestHandler(SimpleHTTPRequestHandler):
    """``http.server``'s file handler, answering single byte-range requests with 206 and those bytes only.

    Each response counts into the server's ``bytes_sent`` and ``requests`` (what a test or a lesson
    measures a read's traffic with). Request lines are not logged.
    """

    server: _CountingServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a lesson's output shows no request log."""

    def send_head(self) -> Any:
        """As ``http.server`` does, and for a ``Range`` header the 206 head and a file positioned at its start."""
        header = self.headers.get("Range")
        path = self.translate_path(self.path)
        if header is None or os.path.isdir(path):
            return super().send_head()
        match = _RANGE.match(header.strip())
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed by copyfile's caller, as in http.server)
        except OSError:
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        size = os.fstat(f.fileno()).st_size
        if match is None or (not match.group(1) and not match.group(2)):
            f.close()
            self.send_error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, "one range bytes=a-b is served")
            return None
        if match.group(1):
            start = int(match.group(1))
            stop = min(size, int(match.group(2)) + 1) if match.group(2) else size
        else:  # bytes=-n: the last n bytes
            start, stop = max(0, size - int(match.group(2))), size
        if start >= size or start >= stop:
            f.close()
            self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return None
        self.send_response(HTTPStatus.PARTIAL_CONTENT)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{size}")
        self.send_header("Content-Length", str(stop - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        f.seek(start)
        self._remaining: int | None = stop - start
        return f

    def copyfile(self, source: Any, outputfile: Any) -> None:
        """Copy the body (only the range's bytes for a 206), counting what is sent."""
        remaining = getattr(self, "_remaining", None)
        sent = 0
        while remaining is None or remaining > 0:
            chunk = source.read(1 << 16 if remaining is None else min(1 << 16, remaining))
            if not chunk:
                break
            outputfile.write(chunk)
            sent += len(chunk)
            if remaining is not None:
                remaining -= len(chunk)
        self._remaining = None
        with self.server.lock:
            self.server.bytes_sent += sent
            self.server.requests += 1


class _CountingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lock = threading.Lock()
        self.bytes_sent = 0
        self.requests = 0


class FolderServer:
    """A folder served on ``http://127.0.0.1:PORT/`` from a daemon thread (see :func:`serve_folder`).

    Attributes
    ----------
    folder : str
        The folder served.
    port : int
        The port it listens on.
    """

    def __init__(self, folder: str | os.PathLike, *, port: int = 0, handler: type = RangeRequestHandler) -> None:
        self.folder = os.fspath(folder)
        if not os.path.isdir(self.folder):
            raise NotADirectoryError(f"{self.folder}: is not a folder to serve")
        self._server = _CountingServer(("127.0.0.1", port), partial(handler, directory=self.folder))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="nbkit-serve-folder", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/``."""
        return f"http://127.0.0.1:{self.port}/"

    def url(self, name: str | os.PathLike) -> str:
        """The URL of a file in the folder (a path relative to it, or inside it).

        Parameters
        ----------
        name : str or os.PathLike
            The file, relative to the folder (an absolute path inside it works too).

        Returns
        -------
        str
        """
        text = os.fspath(name)
        if os.path.isabs(text):
            text = os.path.relpath(text, self.folder)
        return self.base_url + quote(text.replace(os.sep, "/"))

    @property
    def bytes_sent(self) -> int:
        """Body bytes sent so far (all requests)."""
        return self._server.bytes_sent

    @property
    def requests(self) -> int:
        """Requests with a body answered so far."""
        return self._server.requests

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FolderServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_folder(folder: str | os.PathLike, *, port: int = 0) -> FolderServer:
    """Serve ``folder`` read-only on ``http://127.0.0.1:PORT/``, with range requests, from a daemon thread.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder whose files are served.
    port : int
        The port (0: any free one; see ``server.port``).

    Returns
    -------
    FolderServer
        ``server.url("orders.ss")`` is a file's URL; ``server.stop()`` (or ``with``) ends it.
    """
    return FolderServer(folder, port=port)
