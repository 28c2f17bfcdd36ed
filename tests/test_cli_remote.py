"""The CLI on s3:// and http:// URLs: cat, info, lineage, export and repair print what they print for the
local file; S3's endpoint and credentials come from the environment (AWS_ENDPOINT_URL, as botocore reads
it) or from --storage-option; a missing object, a denied request and a broken connection are one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env

pytest.importorskip("moto")
s3fs = pytest.importorskip("s3fs")

from cli_run import one_error_line, run  # noqa: E402
from object_store import S3, http_folder  # noqa: E402

import nbkit  # noqa: E402
from nbkit.wire import envelope  # noqa: E402

DATA = Path(__file__).parent / "data" / "sample-1.ss"


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture()
def aws_env(s3, monkeypatch):
    """The endpoint and credentials in the environment only, as a user's shell has them."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()
    yield
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def retried(tmp_path_factory) -> str:
    """Orders with retry copies and a dead letter (for lineage), 1 KiB beacons."""
    path = str(tmp_path_factory.mktemp("cli-remote") / "retried.ss")
    with nbkit.StreamWriter(path, beacon_interval=1024) as writer:
        for n in range(60):
            writer.write("orders", b'{"id": %d}' % n)
            if n % 7 == 0:
                for attempt in (1, 2):
                    writer.write(
                        "orders",
                        envelope.encode(
                            {"x-ruststream-retry-count": str(attempt)}, b'{"id": %d}' % n, force_text=False
                        ),
                    )
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ("cat",),
        ("cat", "--format", "ndjson"),
        ("cat", "--key", "orders", "--header-only"),
        ("info",),
        ("info", "--json"),
        ("lineage",),
    ],
)
def test_commands_on_s3_print_what_they_print_for_the_local_file(capsys, s3, aws_env, retried, argv) -> None:
    for path in (str(DATA), retried):
        url = s3.put_file(path)
        rc, out, err = run(capsys, argv[0], url, *argv[1:])
        rc_local, out_local, err_local = run(capsys, argv[0], path, *argv[1:])
        assert (rc, err) == (rc_local, err_local.replace(path, url))
        assert out == out_local.replace(path, url)


def test_storage_option_on_the_command_line_instead_of_the_environment(capsys, s3, monkeypatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    s3fs.S3FileSystem.clear_instance_cache()
    url = s3.put_file(DATA)
    options = [f"--storage-option=endpoint_url={s3.endpoint}", "--storage-option=key=testing-key"]
    options += ["--storage-option=secret=testing-secret", "--block-size", "4KiB"]
    rc, out, err = run(capsys, "cat", url, *options)
    assert (rc, err) == (0, "")
    assert out == run(capsys, "cat", str(DATA))[1]


def test_export_and_repair_read_and_write_urls(capsys, s3, aws_env, tmp_path) -> None:
    url = s3.put_file(DATA)
    out = url.replace("sample-1.ss", "sample-1.parquet")
    rc, _, err = run(capsys, "export", url, "-o", out, "--payload", "json")
    assert (rc, err) == (0, f"nbkit: wrote 27 messages to {out}\n")
    local = tmp_path / "back.parquet"
    local.write_bytes(s3.get("sample-1.parquet"))
    assert nbkit.read_parquet(local).equals(nbkit.read_stream(DATA, payload="json"))
    rc, printed, err = run(capsys, "repair", url, url.replace("sample-1", "clean"))
    assert (rc, err) == (0, "")
    assert printed.endswith(f"{url}; 0 damaged bytes left out\n") or "0 damaged bytes" in printed
    clean = tmp_path / "clean.ss"
    clean.write_bytes(s3.get("clean.ss"))
    assert nbkit.read_stream(clean)[["stream_key", "seq", "payload"]].equals(
        nbkit.read_stream(DATA)[["stream_key", "seq", "payload"]]
    )


def test_a_missing_object_is_one_line(capsys, s3, aws_env) -> None:
    url = "s3://streams/nowhere.ss"
    for command in ("cat", "info", "lineage"):
        rc, out, err = run(capsys, command, url)
        assert rc == 1
        assert one_error_line(err) == f"nbkit: {url}: no such object (the server answered 'not found'); check the URL"


def test_a_denied_request_is_one_line(capsys, s3, aws_env) -> None:
    url = s3.put_file(DATA)
    with s3.deny():
        rc, _, err = run(capsys, "cat", url)
    assert rc == 1
    assert one_error_line(err).startswith(f"nbkit: {url}: access denied (HTTP 403); check the credentials")


def test_a_server_that_stops_mid_read_is_one_line_in_a_real_process(tmp_path) -> None:
    (tmp_path / "cut").mkdir()
    path = tmp_path / "cut" / "big.ss"
    with nbkit.StreamWriter(path) as writer:
        for n in range(2000):
            writer.write("orders", b'{"id": %d, "pad": "%s"}' % (n, b"x" * 50))
    env = checkout_env()
    with http_folder(tmp_path, broken=True) as server:
        url = server.url("cut/big.ss")
        done = subprocess.run(
            [sys.executable, "-m", "nbkit", "cat", url, "--header-only"], capture_output=True, text=True, env=env
        )
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line.startswith(f"nbkit: {url}: reading bytes 128-") and "connection broke" in line


def test_http_urls_work_for_every_reading_command(capsys, tmp_path) -> None:
    shutil.copy(DATA, tmp_path / "sample-1.ss")
    with http_folder(tmp_path) as server:
        url = server.url("sample-1.ss")
        for argv in (("cat",), ("info",), ("lineage",)):
            rc, out, err = run(capsys, argv[0], url)
            assert (rc, err) == (0, "")
            assert out == run(capsys, argv[0], str(tmp_path / "sample-1.ss"))[1].replace(
                str(tmp_path / "sample-1.ss"), url
            )
        rc, _, err = run(capsys, "export", url, "-o", str(tmp_path / "s.parquet"))
        assert rc == 0
        rc, _, err = run(capsys, "repair", url, str(tmp_path / "clean.ss"))
        assert rc == 0


def test_storage_options_on_a_local_path_are_refused(capsys) -> None:
    rc, _, err = run(capsys, "cat", str(DATA), "--storage-option", "anon=true")
    assert rc == 1
    assert "are for URLs" in one_error_line(err)
