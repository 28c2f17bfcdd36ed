"""Reading stream files from URLs: moto's S3 server and an HTTP folder server, both on 127.0.0.1.

Every reader gives the frames of the local read (a Rust-written file, a multi-beacon file, a damaged
and a truncated one); a remote read fetches ranges, not the file; a missing object, a denied request
and a server that stops mid-read are one-line errors naming the URL; a local read never touches fsspec.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pandas as pd
import pytest

import nbkit
from nbkit import StreamReader, StreamWriter, read_stream
from nbkit.errors import FileIOError, FilePermissionError, InvalidArgumentError, MissingExtraError, MissingFileError
from nbkit.transport.file_info import summarize
from nbkit.transport.repair import repair
from nbkit.transport.source import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_TIMEOUTS,
    RangeIgnoredWarning,
    RemoteSource,
    check_local_file,
    fetch_totals,
    is_url,
    open_source,
    parse_size,
    parse_storage_options,
    parse_timeout,
)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from object_store import S3, http_folder  # noqa: E402

RUST_FILE = os.path.join(os.path.dirname(__file__), "..", "data", "sample-1.ss")


@pytest.fixture(scope="module")
def s3() -> S3:
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A Rust-written file, a multi-beacon one (3 keys, 1 KiB beacons), a damaged and a truncated copy."""
    folder = tmp_path_factory.mktemp("remote")
    paths = {"rust": str(folder / "sample-1.ss"), "multi": str(folder / "multi.ss")}
    shutil.copy(RUST_FILE, paths["rust"])
    with StreamWriter(paths["multi"], beacon_interval=1024) as writer:
        for n in range(2000):
            writer.write(("orders", "audit", "billing")[n % 3], b'{"id": %d, "note": "%s"}' % (n, b"x" * (n % 40)))
    data = bytearray(Path(paths["multi"]).read_bytes())
    damaged = bytearray(data)
    damaged[20_000] ^= 0xFF  # a byte in the middle of the file
    paths["damaged"] = str(folder / "damaged.ss")
    Path(paths["damaged"]).write_bytes(damaged)
    paths["truncated"] = str(folder / "truncated.ss")
    Path(paths["truncated"]).write_bytes(data[: len(data) - 17])
    return paths


def _urls(s3: S3, files: dict[str, str]) -> dict[str, str]:
    return {name: s3.put_file(path) for name, path in files.items()}


@pytest.mark.parametrize("name", ["rust", "multi"])
def test_s3_and_http_reads_equal_the_local_read(s3: S3, files: dict[str, str], name: str) -> None:
    url = _urls(s3, files)[name]
    local = read_stream(files[name], payload="json")
    pd.testing.assert_frame_equal(read_stream(url, payload="json", storage_options=s3.options), local)
    folder = os.path.dirname(files[name])
    with http_folder(folder) as server:
        got = read_stream(server.url(os.path.basename(files[name])), payload="json", block_size=4096)
        assert server.bytes_sent < os.path.getsize(files[name]) + 4096 * 2  # ranges, not repeated downloads
    pd.testing.assert_frame_equal(got, local)


def test_stream_reader_messages_and_seek_on_s3(s3: S3, files: dict[str, str]) -> None:
    url = _urls(s3, files)["multi"]
    local = [tuple(m) for m in StreamReader(files["multi"], keys="audit")]
    with StreamReader(url, keys="audit", storage_options=s3.options, block_size=8192) as reader:
        assert [tuple(m) for m in reader] == local
        assert reader.end.reason == "end"
    want = next(m for m in StreamReader(files["multi"]) if m.stream_key == "billing" and m.seq == 500)
    with StreamReader(
        url, start=nbkit.FilePosition.sequence(500), key="billing", storage_options=s3.options, block_size=8192
    ) as reader:
        got = next(m for m in reader if m.stream_key == "billing")
        fetched = reader.source.bytes_fetched
    assert tuple(got) == tuple(want)
    # the seek probes beacons and reads from the one it lands on: not the ~100 KB before it
    assert fetched < want.offset / 2


def test_damaged_and_truncated_remote_files_read_as_local_ones(s3: S3, files: dict[str, str]) -> None:
    urls = _urls(s3, files)
    with pytest.raises(nbkit.FormatError) as local_err:
        read_stream(files["damaged"])
    with pytest.raises(nbkit.FormatError) as remote_err:
        read_stream(urls["damaged"], storage_options=s3.options)
    assert str(remote_err.value) == str(local_err.value).replace(files["damaged"], urls["damaged"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = read_stream(files["damaged"], on_bad_frames="skip")
        remote = read_stream(urls["damaged"], on_bad_frames="skip", storage_options=s3.options)
    pd.testing.assert_frame_equal(remote, local)
    assert remote.attrs["damaged"] == local.attrs["damaged"] != []
    with pytest.warns(UserWarning, match="trailing bytes"):
        truncated = read_stream(urls["truncated"], storage_options=s3.options)
    assert truncated.attrs["read_end"].reason == "truncated"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pd.testing.assert_frame_equal(truncated, read_stream(files["truncated"]))
    info = summarize(urls["damaged"], storage_options=s3.options)
    assert info.damaged == summarize(files["damaged"]).damaged
    assert info.message_count == summarize(files["damaged"]).message_count


def test_repair_reads_a_url_and_writes_a_local_copy_or_a_url(s3: S3, files: dict[str, str], tmp_path) -> None:
    url = _urls(s3, files)["damaged"]
    local_copy = str(tmp_path / "clean.ss")
    report = repair(url, local_copy, storage_options=s3.options)
    want = repair(files["damaged"], str(tmp_path / "clean-local.ss"))
    assert (report.kept, report.damaged) == (want.kept, want.damaged)
    assert Path(local_copy).read_bytes() == (tmp_path / "clean-local.ss").read_bytes()
    out = url.replace("damaged.ss", "repaired.ss")
    repair(url, out, storage_options=s3.options)
    assert s3.get("repaired.ss") == Path(local_copy).read_bytes()
    with pytest.raises(nbkit.NbkitError, match="already exists"):
        repair(url, out, storage_options=s3.options)


def test_a_missing_object_is_one_error_naming_the_url(s3: S3, files: dict[str, str]) -> None:
    url = f"s3://{'streams'}/nowhere.ss"
    with pytest.raises(MissingFileError) as err:
        read_stream(url, storage_options=s3.options)
    assert str(err.value) == f"{url}: no such object (the server answered 'not found'); check the URL"
    missing = pytest.raises(MissingFileError, match=r"^http://127\.0\.0\.1:\d+/nowhere\.ss: no such object")
    with http_folder(os.path.dirname(files["multi"])) as server, missing:
        read_stream(server.url("nowhere.ss"))


def test_a_denied_request_is_one_error_naming_the_url(s3: S3, files: dict[str, str], tmp_path) -> None:
    url = _urls(s3, files)["multi"]
    with s3.deny(), pytest.raises(FilePermissionError) as err:
        read_stream(url, storage_options=s3.options)
    assert str(err.value).startswith(f"{url}: access denied")
    assert "\n" not in str(err.value)
    (tmp_path / "denied").mkdir()
    shutil.copy(files["multi"], tmp_path / "denied" / "multi.ss")
    with (
        http_folder(tmp_path, broken=True) as server,
        pytest.raises(
            FilePermissionError, match=r"^http://127\.0\.0\.1:\d+/denied/multi\.ss: access denied \(HTTP 403\)"
        ),
    ):
        read_stream(server.url("denied/multi.ss"))


def test_a_server_that_stops_mid_read_is_one_error_naming_the_url(s3: S3, files: dict[str, str], tmp_path) -> None:
    (tmp_path / "cut").mkdir()
    shutil.copy(files["multi"], tmp_path / "cut" / "multi.ss")
    with http_folder(tmp_path, broken=True) as server:
        url = server.url("cut/multi.ss")
        with pytest.raises(FileIOError) as err:
            read_stream(url)
    assert str(err.value).startswith(f"{url}: reading bytes 128-")
    assert "the server stopped answering or the connection broke" in str(err.value)
    # an S3 server that goes away between two range requests
    other = S3()
    url = other.put_file(files["multi"])
    reader = StreamReader(url, storage_options=other.options, block_size=4096)
    messages = iter(reader)
    next(messages)
    other.stop()
    with pytest.raises(FileIOError, match=rf"^{url}: connection refused \(reading bytes \d+-\d+\): nothing listens"):
        list(messages)


class _NoRanges(SimpleHTTPRequestHandler):
    """Python's own ``http.server`` handler: every GET is answered with the whole file (``Range`` ignored)."""

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("block_size", [None, 4096])
def test_a_server_that_ignores_ranges_is_read_whole_once_with_a_warning(
    files: dict[str, str], block_size: int | None
) -> None:
    from nbkit.transport.http_serve import FolderServer

    server = FolderServer(os.path.dirname(files["multi"]), handler=_NoRanges)
    try:
        url = server.url("multi.ss")
        with pytest.warns(RangeIgnoredWarning, match=r"the server ignores range requests .*whole object in memory"):
            got = read_stream(url, payload="json", block_size=block_size)
        pd.testing.assert_frame_equal(got, read_stream(files["multi"], payload="json"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RangeIgnoredWarning)
            with StreamReader(url, keys="audit", block_size=block_size) as reader:
                assert [tuple(m) for m in reader] == [tuple(m) for m in StreamReader(files["multi"], keys="audit")]
                source = reader.source
        assert isinstance(source, RemoteSource) and not source.ranges
        # one download of the whole object, then every read from memory (not one download per block)
        assert source.requests == 1 and source.bytes_fetched == os.path.getsize(files["multi"])
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("url", "package", "extra"), [("gs://bucket/orders.ss", "gcsfs", "gcs"), ("abfs://c/o.ss", "adlfs", "azure")]
)
def test_a_missing_backend_names_the_package_and_the_extra(url: str, package: str, extra: str) -> None:
    import importlib.util

    if importlib.util.find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    protocol = url.split("://")[0]
    with pytest.raises(MissingExtraError) as err:
        read_stream(url)
    assert str(err.value) == (
        f"{url}: reading {protocol}:// URLs needs the {package} package, which nbkit's optional extra {extra!r} "
        f"installs: pip install -e '.[{extra}]' (in a clone of the repository) or pip install "
        f"'nbkit-ruststream[{extra}]' (or pip install {package})"
    )


def test_block_size_sets_the_range_requests(s3: S3, files: dict[str, str]) -> None:
    url = _urls(s3, files)["multi"]
    size = os.path.getsize(files["multi"])
    for block in (4096, 65536):
        with StreamReader(url, storage_options=s3.options, block_size=block) as reader:
            for _ in reader:
                pass
            source = reader.source
        assert isinstance(source, RemoteSource)
        # the header, then one request per block (a block re-fetches the frame cut at the previous one's end)
        assert source.requests <= 2 + size // (block - 200) + 1
        assert size <= source.bytes_fetched < size * 1.1
    assert DEFAULT_BLOCK_SIZE == 8 << 20
    with pytest.raises(ValueError, match="block_size must be a positive number of bytes"):
        StreamReader(url, storage_options=s3.options, block_size=0)


def test_fetch_totals_count_what_remote_reads_fetched(s3: S3, files: dict[str, str]) -> None:
    url = _urls(s3, files)["rust"]
    before = fetch_totals().bytes
    read_stream(url, storage_options=s3.options)
    assert fetch_totals().bytes - before == os.path.getsize(files["rust"])
    before = fetch_totals().bytes
    read_stream(files["rust"])
    assert fetch_totals().bytes == before  # local reads are not remote fetches


def test_a_local_read_never_imports_fsspec(files: dict[str, str]) -> None:
    code = (
        "import sys, nbkit\n"
        f"nbkit.read_stream({files['multi']!r}); list(nbkit.StreamReader({files['multi']!r}))\n"
        "from nbkit.transport.file_info import summarize; summarize(" + repr(files["multi"]) + ")\n"
        "print('fsspec' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_urls_and_local_paths_are_told_apart() -> None:
    assert is_url("s3://bucket/key.ss") and is_url("https://host/a.ss") and is_url("simplecache::s3://b/k")
    assert not is_url("orders.ss") and not is_url("/tmp/orders.ss") and not is_url("file:///tmp/orders.ss")
    assert not is_url("C:\\data\\orders.ss")
    with pytest.raises(ValueError, match="storage_options are for URLs"):
        open_source("orders.ss", storage_options={"anon": True})


def test_file_urls_are_local_paths(files: dict[str, str]) -> None:
    pd.testing.assert_frame_equal(read_stream("file://" + files["multi"]), read_stream(files["multi"]))


def test_storage_options_from_the_command_line() -> None:
    assert parse_storage_options(["anon=true", "client_kwargs.region_name=eu-west-1", "key=abc"]) == {
        "anon": True,
        "client_kwargs": {"region_name": "eu-west-1"},
        "key": "abc",
    }
    with pytest.raises(InvalidArgumentError, match="KEY=VALUE"):
        parse_storage_options(["anon"])
    assert parse_size("4MiB") == 4 << 20
    with pytest.raises(ValueError, match="not a positive byte count"):
        parse_size("lots")


def test_the_s3_endpoint_is_taken_from_the_environment(
    s3: S3, files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _urls(s3, files)["rust"]
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    pd.testing.assert_frame_equal(read_stream(url), read_stream(files["rust"]))


# -- no read waits for ever: special local files, and URLs that do not answer --------------------------


def _special_files(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """path -> (what the error calls it, error class name) for each kind of non-regular file."""
    import socket

    fifo = tmp_path / "orders.fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.ss"
    folder.mkdir()
    sock_path = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.close()  # the socket file stays
    return {
        str(fifo): ("is a named pipe (FIFO), not a stream file", "FileIOError"),
        str(folder): ("is a directory, not a stream file", "PathIsDirectoryError"),
        str(sock_path): ("is a socket, not a stream file", "FileIOError"),
        os.devnull: ("is a character device, not a stream file", "FileIOError"),
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and Unix sockets")
def test_special_local_files_are_refused_before_any_open(tmp_path: Path) -> None:
    for path, (what, kind) in _special_files(tmp_path).items():
        for call in (read_stream, StreamReader, summarize, lambda p: repair(p, str(tmp_path / "out.ss"))):
            with pytest.raises(nbkit.NbkitError) as err:
                call(path)
            assert type(err.value).__name__ == kind
            assert str(err.value).startswith(f"{path}: {what}")
    assert not (tmp_path / "out.ss").exists()
    with pytest.raises(MissingFileError, match="no such file"):
        check_local_file(str(tmp_path / "nowhere.ss"))
    check_local_file(str(tmp_path / "orders.fifo"), "a capture", pipes=True)  # a pipe capture is read as stdin


def test_timeouts_parse_from_numbers_pairs_and_text() -> None:
    assert DEFAULT_TIMEOUTS == (10.0, 30.0)
    assert parse_timeout(5) == parse_timeout("5") == (5.0, 5.0)
    assert parse_timeout((2, 30)) == parse_timeout("2, 30") == parse_timeout([2, 30]) == (2.0, 30.0)
    assert parse_timeout({"connect": 2}) == (2.0, 30.0)
    for bad in (0, -1, "soon", "1,2,3", (1,), {"total": 5}, True, float("inf"), None):
        with pytest.raises(InvalidArgumentError, match="give seconds, more than 0"):
            parse_timeout(bad)
    with pytest.raises(InvalidArgumentError, match=r"the timeout option applies to http\(s\):// and s3:// URLs"):
        read_stream("memory://orders.ss", storage_options={"timeout": 5})


def test_a_silent_server_times_out_with_the_timeout_given(files: dict[str, str], tmp_path: Path) -> None:
    import errno

    from object_store import SilentServer

    with SilentServer() as server:
        url = server.url("orders.ss")
        with pytest.raises(FileIOError) as err:
            read_stream(url, storage_options={"timeout": "2,0.5"})
    assert err.value.errno == errno.ETIMEDOUT
    assert str(err.value) == (
        f"{url}: timed out looking it up: the server accepted the connection but sent nothing for 0.5 s "
        "(read timeout); check that the server is up, or allow longer with the timeout storage option "
        "(--timeout on the command line)"
    )
    # a server that tells the size, then never sends the bytes: the read of the first block times out
    (tmp_path / "stall").mkdir()
    shutil.copy(files["multi"], tmp_path / "stall" / "multi.ss")
    with http_folder(tmp_path, broken=True) as folder:
        url = folder.url("stall/multi.ss")
        with pytest.raises(FileIOError, match=rf"^{url}: timed out reading bytes 0-\d+: .*nothing for 0\.5 s"):
            read_stream(url, storage_options={"timeout": 0.5})


def test_a_refused_connection_and_a_missing_object_say_which(files: dict[str, str]) -> None:
    import errno

    from object_store import refused_port

    url = f"http://127.0.0.1:{refused_port()}/orders.ss"
    with pytest.raises(FileIOError) as err:
        read_stream(url)
    assert err.value.errno == errno.ECONNREFUSED
    assert str(err.value) == (
        f"{url}: connection refused (looking it up): nothing listens at that host and port; check the URL "
        "and that the server runs"
    )
    with http_folder(os.path.dirname(files["multi"])) as server, pytest.raises(MissingFileError) as missing:
        read_stream(server.url("nowhere.ss"), storage_options={"timeout": 1})
    assert "the server answered 'not found'" in str(missing.value)


def test_a_connection_nobody_accepts_is_a_connect_timeout() -> None:
    """A listening socket whose backlog is full drops new connections (Linux): the connect timeout ends it."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        while True:  # fill the backlog until a connection attempt gets no answer
            probe = socket.socket()
            probe.settimeout(0.3)
            fillers.append(probe)
            try:
                probe.connect(("127.0.0.1", port))
            except TimeoutError:
                break
            if len(fillers) > 16:
                pytest.skip("this system answers connections past a full backlog")
        url = f"http://127.0.0.1:{port}/orders.ss"
        with pytest.raises(
            FileIOError, match=rf"^{url}: timed out looking it up: no answer to the connection in 0\.5 s"
        ):
            read_stream(url, storage_options={"timeout": "0.5,30"})
    finally:
        for probe in fillers:
            probe.close()
        listener.close()


def test_a_timeout_given_in_the_backends_own_terms_is_kept(s3: S3, files: dict[str, str]) -> None:
    url = _urls(s3, files)["rust"]
    assert s3.options["config_kwargs"]["read_timeout"] == 5  # the test options' own, not the default
    with StreamReader(url, storage_options=s3.options) as reader:
        assert isinstance(reader.source, RemoteSource) and reader.source.timeouts is None
    with StreamReader(url, storage_options={**s3.options, "config_kwargs": {}, "timeout": 7}) as reader:
        assert isinstance(reader.source, RemoteSource) and reader.source.timeouts == (7.0, 7.0)
        assert reader.source.fs.config_kwargs["read_timeout"] == 7.0
