"""Real servers on loopback for the remote-read tests: moto's S3 server and an HTTP folder server.

``S3`` is moto's ``ThreadedMotoServer`` (a real HTTP endpoint speaking the S3 API) on 127.0.0.1 with a
bucket; ``put`` uploads bytes and returns the ``s3://`` URL; ``options`` are the ``storage_options``
that reach it; ``deny()`` makes it refuse every request (moto's authentication switched on, so the
test credentials are unknown to it). ``http_folder`` serves a folder with
:func:`nbkit.transport.http_serve.serve_folder`; ``BrokenHandler`` is that server's handler, but it
answers ``/denied/...`` with 403, stops sending ``/cut/...`` bodies after their first bytes and never
sends ``/stall/...`` bodies (their size is told). ``SilentServer`` accepts connections and never answers;
``refused_port()`` is a port where nothing listens.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

from nbkit.transport.http_serve import FolderServer, RangeRequestHandler

BUCKET = "streams"
KEY_ID, SECRET = "testing-key", "testing-secret"


class S3:
    """A moto S3 server on 127.0.0.1 holding one bucket."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.client = self._client()
        self.client.create_bucket(Bucket=BUCKET)

    def _client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            region_name="us-east-1",
        )

    @property
    def options(self) -> dict[str, Any]:
        """``storage_options`` for s3fs: the endpoint, test credentials, and no retries (errors are quick)."""
        return {
            "key": KEY_ID,
            "secret": SECRET,
            "endpoint_url": self.endpoint,
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2, "read_timeout": 5},
        }

    def env(self) -> dict[str, str]:
        """The environment botocore reads: credentials and ``AWS_ENDPOINT_URL`` (what the CLI tests set)."""
        return {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_MAX_ATTEMPTS": "1",
        }

    def put(self, name: str, data: bytes) -> str:
        """Upload ``data`` as ``name``; its ``s3://`` URL."""
        self.client.put_object(Bucket=BUCKET, Key=name, Body=data)
        return f"s3://{BUCKET}/{name}"

    def put_file(self, path: str | os.PathLike, name: str | None = None) -> str:
        """Upload a local file; its ``s3://`` URL."""
        with open(path, "rb") as f:
            return self.put(name or os.path.basename(path), f.read())

    def get(self, name: str) -> bytes:
        """An object's bytes."""
        return self.client.get_object(Bucket=BUCKET, Key=name)["Body"].read()

    @contextlib.contextmanager
    def deny(self) -> Iterator[None]:
        """Inside: moto checks credentials, and knows none, so every request is refused (403)."""
        self._auth("0")
        try:
            yield
        finally:
            self._auth("inf")

    def _auth(self, count: str) -> None:
        req = urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth",
            data=count.encode(),
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310 (loopback)
            r.read()

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


class BrokenHandler(RangeRequestHandler):
    """The folder server's handler, with two failures: ``/denied/...`` is 403 and ``/cut/...`` bodies stop
    after :attr:`CUT_AFTER` bytes (the connection is closed mid-body, as a server that dies mid-read)."""

    CUT_AFTER = 4096
    #: Set when the test is over: a stalled request then ends.
    released = threading.Event()

    def send_head(self) -> Any:
        if self.path.startswith("/denied/"):
            self.send_error(403, "Forbidden")
            return None
        if self.path.startswith("/stall/") and self.command == "GET":
            self.released.wait(60)  # a hung server: the client's read timeout ends the wait, not this
            return None
        if self.path.startswith("/cut/") and self.headers.get("Range"):
            self._cut = True
        return super().send_head()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        remaining = getattr(self, "_remaining", None)
        if getattr(self, "_cut", False) and remaining is not None and remaining > self.CUT_AFTER:
            self._cut = False
            outputfile.write(source.read(self.CUT_AFTER))
            outputfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        super().copyfile(source, outputfile)


@contextlib.contextmanager
def http_folder(folder: str | os.PathLike, *, broken: bool = False) -> Iterator[FolderServer]:
    """Serve ``folder`` on 127.0.0.1 (``broken``: with :class:`BrokenHandler`); stopped on exit."""
    server = FolderServer(folder, handler=BrokenHandler if broken else RangeRequestHandler)
    BrokenHandler.released.clear()
    try:
        yield server
    finally:
        BrokenHandler.released.set()
        server.stop()


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte (a hung server)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections: list[socket.socket] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(conn)

    def url(self, name: str) -> str:
        """``http://127.0.0.1:PORT/name``."""
        return f"http://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Stop accepting; close every connection."""
        self._done.set()
        self._thread.join(10)
        self.sock.close()
        for conn in self.connections:
            conn.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def refused_port() -> int:
    """A port on 127.0.0.1 where nothing listens (just bound and closed): a connection there is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# moto's server logs every request through werkzeug; the tests' output shows none of it
import logging  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.ERROR)
