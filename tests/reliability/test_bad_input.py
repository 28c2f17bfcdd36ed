"""Bad input at the edges: every mistake gets one clear line (what, where, how to fix) and a non-zero
exit from the CLI, never a traceback.

A handful run as real subprocesses (real exit codes, the whole stderr); the rest run ``cli.main`` in
process through :func:`fuzzlib.run_cli`, which also fails on any escaping exception or traceback.
``tests/test_cli.py`` covers ``cat``/``info`` on missing, directory, non-.ss, empty, short and
version-2 files; here the same files go through ``write``, ``run`` and the Python API too.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit import App, FileBroker, StdioBroker, StreamReader, StreamWriter, cli
from nbkit.errors import ConfigurationError, InvalidKeyError, NbkitError, PayloadTooLargeError
from nbkit.runtime.position_store import PositionStore
from nbkit.tabular.frames import read_stream
from nbkit.transport.file_info import summarize
from nbkit.wire import ssformat

from .fuzzlib import run_cli

pytestmark = pytest.mark.timeout(60)

GOOD_LINE = '{"header":{"stream_key":"%s","shard_id":0,"sequence":1,"timestamp":"2024-01-01T00:00:00.0"},"payload":%s}'
_modules = itertools.count()


@pytest.fixture
def bad_files(tmp_path: Path, corpus) -> dict[str, Path]:
    text = tmp_path / "notes.txt"
    text.write_text("just some text, not a stream file\n" * 5)
    empty = tmp_path / "empty.ss"
    empty.write_bytes(b"")
    short = tmp_path / "short.ss"
    short.write_bytes(corpus[0].data[:50])
    v2 = tmp_path / "v2.ss"
    v2.write_bytes(b"Ss\x02" + corpus[0].data[3:400])
    folder = tmp_path / "folder.ss"
    folder.mkdir()
    return {
        "missing": tmp_path / "missing.ss",
        "directory": folder,
        "not .ss": text,
        "empty": empty,
        "short": short,
        "version 2": v2,
    }


READ_WORDS = {
    "missing": "no such file",
    "directory": "is a directory",
    "not .ss": "not a stream file",
    "empty": "0 bytes long",
    "short": "50 bytes long",
    "version 2": "version 2",
}


@pytest.mark.parametrize("case", sorted(READ_WORDS))
def test_bad_files_through_the_python_api(bad_files, case: str) -> None:
    path = bad_files[case]
    for read in (
        lambda: StreamReader(path),
        lambda: read_stream(path),
        lambda: summarize(path),
        lambda: StreamReader(path, follow=True, idle_timeout=0.01),
    ):
        with pytest.raises(NbkitError) as info:
            read()
        assert str(path) in str(info.value) and READ_WORDS[case] in str(info.value)


WRITE_WORDS = {
    "missing": None,
    "directory": "is a directory",
    "not .ss": "not a stream file",
    "empty": None,
    "short": "50 bytes long",
    "version 2": "version 2",
}


@pytest.mark.parametrize("case", sorted(WRITE_WORDS))
def test_bad_files_through_nbkit_write(bad_files, case: str) -> None:
    path = bad_files[case]
    rc, out, err = run_cli(["write", str(path)], stdin=(GOOD_LINE % ("k", '"v"')).encode())
    words = WRITE_WORDS[case]
    if words is None:  # a missing or empty file is simply started
        assert rc == 0 and err == ""
        with StreamReader(path) as r:
            assert [m.payload for m in r] == [b"v"]
        return
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert str(path) in err and words in err, err
    if case in ("not .ss", "short", "version 2"):
        assert any(w in err for w in ("cannot append", "stream file", "header", "version")), err


SERVICE = """
from nbkit import App, FileBroker, FilePosition
broker = FileBroker({path!r}, existing_only={existing_only})
broker.subscriber("jobs", start_at=FilePosition.beginning())(lambda d: None)
app = App(broker)
"""


@pytest.mark.parametrize("case", sorted(set(READ_WORDS) - {"empty"}))
def test_bad_files_through_nbkit_run(bad_files, tmp_path, monkeypatch, case: str) -> None:
    """(An empty file is not an error for a service: it is started as a fresh file, as upstream does.)"""
    path = bad_files[case]
    name = f"svcbad{next(_modules)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SERVICE.format(path=str(path), existing_only=True)))
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(["run", f"{name}:app"])
    assert rc == 1 and out == "" and err.count("\n") == 1, err
    assert str(path) in err, err
    words = {"missing": "no such file", "directory": "is a directory"}
    assert words.get(case, READ_WORDS[case]) in err, err


# -- keys and sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "words"),
    [("a b", "' '"), ("", "non-empty"), ("k" * 250, "limit is 249"), ("é", "'é'"), ("x/y", "'/'")],
    ids=["space", "empty", "oversized", "non-ascii", "slash"],
)
def test_invalid_or_oversized_keys(tmp_path: Path, key: str, words: str) -> None:
    path = tmp_path / "k.ss"
    line = (GOOD_LINE % ("ok", '"1"')) + "\n" + GOOD_LINE % (key, '"2"')
    rc, out, err = run_cli(["write", str(path)], stdin=line.encode())
    assert rc == 1 and err.startswith("nbkit: stdin, line 2: ") and words in err and err.count("\n") == 1, err
    with StreamReader(path) as r:
        assert [m.stream_key for m in r] == ["ok"]  # everything before the bad line is kept
    rc, _, err = run_cli(["cat", "--key", key or "''", str(path)])
    if key:
        assert rc == 1 and "--key" in err and err.count("\n") == 1, err
    with pytest.raises(InvalidKeyError, match="stream key"):
        FileBroker(tmp_path / "k2.ss").publish(key, b"x")
    with pytest.raises(InvalidKeyError):
        StdioBroker(stdout=[]).publish(key, b"x")


def test_an_oversized_payload_is_refused() -> None:
    """The u32 size field caps a payload at 4 GiB - 1. No test allocates 4 GiB, so the check is made on a
    stand-in whose length is 4 GiB (the writer's own fast path falls back to this check when the size
    does not fit the field); a file holding such a payload is never started."""

    class FourGiB(bytes):
        def __len__(self) -> int:
            return 1 << 32

    with pytest.raises(PayloadTooLargeError, match="payload of 4294967296 bytes exceeds the format's limit"):
        ssformat.encode_frame(b"k", 0, 1, 0, FourGiB())


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('"-1"', None),
        ("-1", "sequence must be an unsigned 64-bit integer"),
        ('"2024-13-01T00:00:00.0"', "not a valid date"),
        ("253402300800000", "after"),
    ],
    ids=["string-seq-ok", "negative-seq", "bad-date", "year-10000"],
)
def test_bad_fields_in_nbkit_write(tmp_path: Path, value: str, words: str | None) -> None:
    if words is None:  # a JSON string payload "-1" is fine
        line = GOOD_LINE % ("k", value)
    elif "sequence" in words:
        line = GOOD_LINE.replace('"sequence":1', f'"sequence":{value}') % ("k", '"p"')
    else:
        line = GOOD_LINE.replace('"2024-01-01T00:00:00.0"', value) % ("k", '"p"')
    rc, out, err = run_cli(["write", str(tmp_path / "f.ss")], stdin=line.encode())
    if words is None:
        assert rc == 0, err
        return
    assert rc == 1 and err.startswith("nbkit: stdin, line 1: ") and err.count("\n") == 1, err
    assert words in err or "timestamp" in err, err


# -- services that cannot start ------------------------------------------------------------------


REGISTRATIONS = {
    "bad-out-retry": ("StdioBroker()", 'out_retry="jobs retry"', "out_retry key 'jobs retry'"),
    "long-out-retry": ("StdioBroker()", 'out_retry="r" * 250', "out_retry key"),
    "bad-dead-letter": ("StdioBroker()", 'out_retry="jobs.retry", dead_letter="dead/letters"', "dead_letter key"),
    "bad-key": ("StdioBroker()", 'out_retry="jobs.retry", name="x"', None),
    "no-out-retry": ("StdioBroker()", "", "NamedCopies"),
    "file-out-retry": ('FileBroker("f.ss")', 'out_retry="elsewhere"', "out_retry is a pipe option"),
    "zero-attempts": ("StdioBroker()", 'out_retry="jobs.retry", max_attempts=0', "max_attempts"),
}

REGISTRATION_MODULE = """
from nbkit import App, FileBroker, StdioBroker
broker = {broker}
broker.subscriber({key!r}, {options})(lambda d: None)
app = App(broker)
"""


@pytest.mark.parametrize("case", sorted(REGISTRATIONS))
def test_registrations_that_cannot_work_exit_2_with_one_line(tmp_path, monkeypatch, case: str) -> None:
    broker, options, words = REGISTRATIONS[case]
    key = "bad key!" if case == "bad-key" else "jobs"
    words = words or "subscription stream key 'bad key!'"
    name = f"svcreg{next(_modules)}"
    (tmp_path / f"{name}.py").write_text(REGISTRATION_MODULE.format(broker=broker, key=key, options=options))
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(["run", f"{name}:app"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and words in err, err


BROKEN_MODULES = {
    "raises": ('raise RuntimeError("boom")\n', "RuntimeError: boom", ":1)"),
    "syntax": ("def f(:\n", "SyntaxError: invalid syntax", ":1)"),
    "missing-dependency": (
        "import no_such_dependency_here\n",
        "No module named 'no_such_dependency_here'",
        "install what it imports",
    ),
    "factory-raises": ('def app():\n    raise ValueError("factory failed")\n', "ValueError: factory failed", ":2)"),
    "not-an-app": ("app = 42\n", "is a int, not an nbkit.App", None),
    "no-attribute": ("x = 1\n", "has no attribute 'app'", None),
}


@pytest.mark.parametrize("case", sorted(BROKEN_MODULES))
def test_a_broken_service_module_exits_2_with_one_line(tmp_path, monkeypatch, case: str) -> None:
    """Before the fix, an exception raised by the module (or its factory) escaped as a traceback."""
    source, words, where = BROKEN_MODULES[case]
    name = f"svcbroken{next(_modules)}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    rc, out, err = run_cli(["run", f"{name}:app"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and words in err, err
    if where:
        assert where in err, err
    assert f"{name}.py" in err or case in ("not-an-app", "no-attribute")


def test_a_bad_beacon_interval_and_shutdown_timeout_are_configuration_errors(tmp_path) -> None:
    with pytest.raises(ConfigurationError, match="multiple of 1024"):
        FileBroker(tmp_path / "f.ss", beacon_interval=1000)
    with pytest.raises(ConfigurationError, match="shutdown_timeout"):
        App(StdioBroker(), shutdown_timeout=-1)
    with pytest.raises(NbkitError, match="multiple of 1024"):
        StreamWriter(tmp_path / "g.ss", beacon_interval=100)


def test_a_damaged_position_store_is_named(tmp_path: Path) -> None:
    path = tmp_path / "positions.json"
    for text in ('{"jobs": ', '["jobs"]', '{"jobs": -1}', '{"jobs": "7"}'):
        path.write_text(text)
        with pytest.raises(NbkitError) as info:
            PositionStore(path)
        assert str(path) in str(info.value) and ("position store" in str(info.value))


# -- real processes: exit codes and the whole stderr ----------------------------------------------


def _nbkit(argv: list[str], env, *, stdin: bytes = b"", cwd=None) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "nbkit", *argv], input=stdin, capture_output=True, env=env, timeout=30, cwd=cwd
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_subprocess_bad_paths_and_keys(bad_files, tmp_path, child_env) -> None:
    rc, out, err = _nbkit(["info", str(bad_files["directory"])], child_env)
    assert (rc, out, err) == (1, "", f"nbkit: {bad_files['directory']}: is a directory, not a stream file\n")
    rc, out, err = _nbkit(["write", str(bad_files["not .ss"])], child_env, stdin=(GOOD_LINE % ("k", "1")).encode())
    assert rc == 1 and out == "" and err.count("\n") == 1 and "not a stream file" in err, err
    rc, out, err = _nbkit(["write", str(tmp_path / "n.ss")], child_env, stdin=(GOOD_LINE % ("k" * 250, "1")).encode())
    assert rc == 1 and err.startswith("nbkit: stdin, line 1: stream key") and err.count("\n") == 1, err
    rc, out, err = _nbkit(["cat", "--key", "no spaces", str(tmp_path / "n.ss")], child_env)
    assert rc == 1 and err.count("\n") == 1 and "--key 'no spaces'" in err, err


def test_subprocess_run_refuses_a_bad_out_retry_key(tmp_path, child_env) -> None:
    (tmp_path / "svc.py").write_text(
        REGISTRATION_MODULE.format(broker="StdioBroker()", key="jobs", options='out_retry="jobs retry"')
    )
    rc, out, err = _nbkit(["run", "svc:app"], child_env, stdin=b"[jobs] x\n", cwd=tmp_path)
    assert rc == 2 and out == "" and err.count("\n") == 1 and "out_retry key 'jobs retry'" in err, err


UTF8_SERVICE = """
from nbkit import App, StdioBroker
broker = StdioBroker()
broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: broker.publish("jobs.done", d.payload) and None)
app = App(broker)
"""


def test_subprocess_run_names_the_stdin_line_that_is_not_utf8(tmp_path, child_env) -> None:
    (tmp_path / "svc.py").write_text(UTF8_SERVICE)
    rc, out, err = _nbkit(
        ["run", "--log-level", "ERROR", "svc:app"],
        child_env,
        cwd=tmp_path,
        stdin=b"[jobs] fine\n[jobs] caf\xe9\n[jobs] never\n",
    )
    assert rc == 1
    assert [ln.split("] ", 1)[1] for ln in out.splitlines()] == ["fine"]  # the line before was handled
    assert "Traceback" not in err
    ours = [ln for ln in err.splitlines() if ln.startswith("nbkit: ")]
    assert ours == [
        "nbkit: line 2: stdin line 2 is not valid UTF-8 (byte 10); the line format is text only: "
        "envelope binary payloads (rs1:) or fix the producer",
        # the summary counts the line after it, never read (--on-bad-lines error, the default)
        "nbkit: run summary: stopped by Utf8Error; 1 delivery (ack 1); 0 copies published; "
        "stdout: 1 line written; 2 lines read (1 left unread)",
    ], err
    # and only that line: nbkit run leaves out the runtime's log record of the same stream error
    assert err.splitlines() == ours


@pytest.fixture
def world_readable_dir():
    """A folder 'nobody' can enter (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="nbkit-perm-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# the standard library lives under /root (pyenv), which "nobody" cannot read: what nbkit imports lazily
# on these paths (gettext's locale, for argparse) is imported before the drop. So is the checkout's own
# file and wire layers: a clone inside a private folder (``mktemp -d``, mode 0700) is not readable by
# "nobody" either, and the commands load some of their modules lazily (nbkit cat: transport.bounded).
DROP = (
    # the parser is built once first: its help texts import modules nbkit loads lazily, which the
    # unprivileged user may not be able to read where root's Python is installed
    "import os, sys, locale, importlib, pkgutil; from nbkit import cli, transport, wire; cli.build_parser(); "
    "[importlib.import_module(m.name) for p in (transport, wire) "
    "for m in pkgutil.iter_modules(p.__path__, p.__name__ + '.')]; "
    "os.setgid(65534); os.setuid(65534); sys.exit(cli.main(sys.argv[1:]))"
)


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="needs root to drop to the 'nobody' user (run as a normal user, "
    "test_cli.py::test_no_permission covers it directly)",
)
def test_subprocess_no_permission_as_a_real_unprivileged_user(world_readable_dir, corpus, child_env) -> None:
    """As root every file is readable, so the child drops to uid 65534 after importing nbkit."""
    secret = world_readable_dir / "secret.ss"
    secret.write_bytes(corpus[0].data)
    secret.chmod(0)
    cases = [
        (["cat", str(secret)], f"nbkit: {secret}: permission denied; the file must be readable\n"),
        (["info", str(secret)], f"nbkit: {secret}: permission denied; the file must be readable\n"),
        (["write", str(secret)], f"nbkit: {secret}: permission denied; the file must be writable\n"),
        (
            ["write", str(world_readable_dir / "new.ss")],
            f"nbkit: {world_readable_dir / 'new.ss'}: permission denied: cannot create a file in {world_readable_dir}; "
            "the directory must be writable\n",
        ),
    ]
    for argv, expected in cases:
        done = subprocess.run(
            [sys.executable, "-c", DROP, *argv],
            capture_output=True,
            text=True,
            env=child_env,
            cwd="/tmp",
            input="",
            timeout=30,
        )
        assert (done.returncode, done.stdout, done.stderr) == (1, "", expected), argv


# -- the CLI never raises, whatever the arguments ---------------------------------------------------


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_any_argument_list_returns_an_exit_status(bad_files, corpus, tmp_path, data) -> None:
    good = tmp_path / "good.ss"
    if not good.exists():
        good.write_bytes(corpus[0].data)
    words = st.sampled_from(
        [
            "cat",
            "info",
            "write",
            "run",
            "--format",
            "ndjson",
            "stdio",
            "log",
            "xml",
            "--key",
            "a",
            "bad key",
            "--follow",
            "--header-only",
            "--json",
            "--eos",
            "--beacon-interval",
            "1000",
            "2048",
            "-1",
            "--help",
            str(good),
            *map(str, bad_files.values()),
            "",
            "-",
            "nomodule:app",
            ":",
            "--log-level",
            "LOUD",
        ]
    )
    argv = data.draw(st.lists(words, max_size=6))
    if "run" in argv or "--follow" in argv or "write" in argv:
        argv = [a for a in argv if a not in ("run", "--follow", "write")]  # these wait on stdin or a file
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    assert isinstance(rc, int) and rc in (0, 1, 2), (argv, rc)
    assert "Traceback" not in err.getvalue()
    if rc == 2 and not err.getvalue().startswith("nbkit: "):
        assert "usage: nbkit" in err.getvalue()  # argparse's own message for a usage error


def test_subprocess_run_names_the_stdin_line_over_the_line_bound(tmp_path, child_env) -> None:
    (tmp_path / "svc.py").write_text(UTF8_SERVICE)
    stdin = b"[jobs] fine\n[jobs] " + b"x" * 5000 + b"\n[jobs] after\n"
    rc, out, err = _nbkit(["run", "--log-level", "ERROR", "svc:app"], child_env, cwd=tmp_path, stdin=stdin)
    assert rc == 0 and len(out.splitlines()) == 3, err  # the default bound (16 MiB) takes it
    rc, out, err = _nbkit(
        ["run", "--log-level", "ERROR", "--max-line-bytes", "4KiB", "svc:app"], child_env, cwd=tmp_path, stdin=stdin
    )
    assert rc == 1 and [ln.split("] ", 1)[1] for ln in out.splitlines()] == ["fine"]
    assert "Traceback" not in err
    assert "nbkit: line 2: stdin line 2 is longer than the line bound of 4,096 bytes" in err, err
    rc, out, err = _nbkit(
        ["run", "--max-line-bytes", "4KiB", "--on-bad-lines", "skip", "svc:app"], child_env, cwd=tmp_path, stdin=stdin
    )
    assert rc == 0 and [ln.split("] ", 1)[1] for ln in out.splitlines()] == ["fine", "after"], err
    rc, _, err = _nbkit(["run", "--max-line-bytes", "lots", "svc:app"], child_env, cwd=tmp_path)
    assert rc == 2 and "--max-line-bytes" in err
