"""Acceptance: a real three-process shell pipeline.

    nbkit cat --format stdio in.ss | nbkit run first:app | nbkit run second:app

The first stage's retry copies leave on stdout under its ``out_retry`` key and reach the second
stage, which records what it receives. Needs the ``cat`` and ``run`` commands of
``nbkit/cli.py`` (skipped without them).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkout_env import checkout_env

from nbkit import FileBroker

ROOT = Path(__file__).resolve().parents[2]
_MAIN = "import sys; from nbkit.cli import main; sys.exit(main())"


@functools.cache
def _cli_commands() -> frozenset[str]:
    """The CLI commands this test needs that exist (``cat``, ``run``)."""
    if importlib.util.find_spec("nbkit.cli") is None:
        return frozenset()
    found = set()
    for command in ("cat", "run"):
        try:
            done = subprocess.run(
                [sys.executable, "-c", _MAIN, command, "--help"], capture_output=True, timeout=30, cwd=ROOT
            )
        except subprocess.TimeoutExpired:
            continue
        if done.returncode == 0:
            found.add(command)
    return frozenset(found)


needs_cli = pytest.mark.skipif(
    not {"cat", "run"} <= _cli_commands(), reason="nbkit/cli.py has no 'cat' and 'run' commands yet"
)
needs_run = pytest.mark.skipif("run" not in _cli_commands(), reason="nbkit/cli.py has no 'run' command yet")


FIRST = """
    from nbkit import App, HandlerOutcome, StdioBroker

    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=3)
    def first(d):
        job = d.json()
        if job["flaky"]:
            return HandlerOutcome.retry_after(0.2)  # the copy leaves on stdout, 0.2 s later
        broker.publish("jobs.done", d.payload)
        return None

    app = App(broker)
"""

SECOND = """
    import json
    from nbkit import App, StdioBroker

    broker = StdioBroker()
    received = open("received.jsonl", "a", encoding="utf-8")

    def record(d):
        received.write(json.dumps({
            "key": d.stream_key,
            "seq": d.seq,
            "payload": d.text,
            "retry": d.headers.get("x-ruststream-retry-count"),
            "tenant": d.headers.get("tenant"),
            "attempt": d.attempt,
        }) + "\\n")
        received.flush()

    broker.subscriber("jobs.retry", out_retry="jobs.retry.again")(record)
    broker.subscriber("jobs.done", out_retry="jobs.done.retry")(record)
    app = App(broker)
"""


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Run the three-process pipeline once; returns (completed process, what the second stage got)."""
    tmp_path = tmp_path_factory.mktemp("pipeline")
    (tmp_path / "first.py").write_text(textwrap.dedent(FIRST))
    (tmp_path / "second.py").write_text(textwrap.dedent(SECOND))
    broker = FileBroker(tmp_path / "in.ss")
    broker.publish("jobs", '{"id": 1, "flaky": false}')
    broker.publish("audit", "not for the first stage")
    broker.publish("jobs", '{"id": 2, "flaky": true}')
    broker.publish("jobs", '{"id": 3, "flaky": false}')
    broker.publish("jobs", '{"id": 4, "flaky": true}', {"tenant": "acme"})  # a header in the file
    broker.shutdown()
    done = subprocess.run(
        [
            "bash",
            "-c",
            "set -o pipefail; nbkit cat --format stdio in.ss | nbkit run first:app | nbkit run second:app",
        ],
        cwd=tmp_path,
        env=checkout_env(scripts=True),
        capture_output=True,
        timeout=20,
    )
    received = tmp_path / "received.jsonl"
    got = [json.loads(line) for line in received.read_text().splitlines()] if received.exists() else []
    return done, got


@needs_cli
def test_three_process_pipeline(pipeline):
    done, got = pipeline
    assert done.returncode == 0, done.stderr.decode()
    done_jobs = [g for g in got if g["key"] == "jobs.done"]
    assert [(g["payload"], g["seq"], g["retry"], g["attempt"]) for g in done_jobs] == [
        ('{"id": 1, "flaky": false}', 0, None, 1),
        ('{"id": 3, "flaky": false}', 1, None, 1),
    ]
    # the first stage's retry copy reaches the second stage under its out_retry key, counter incremented
    retried = [g for g in got if g["key"] == "jobs.retry" and g["payload"] == '{"id": 2, "flaky": true}']
    assert retried == [
        {
            "key": "jobs.retry",
            "seq": 0,
            "payload": '{"id": 2, "flaky": true}',
            "retry": "1",
            "tenant": None,
            "attempt": 2,
        }
    ]
    assert {g["key"] for g in got} == {"jobs.done", "jobs.retry"}


@needs_cli
def test_file_headers_cross_cat_and_stay_on_the_copy(pipeline):
    """A message stored with headers reaches the first stage with them (not double-enveloped), and its
    retry copy carries them on to the second stage."""
    done, got = pipeline
    assert done.returncode == 0, done.stderr.decode()
    retried = [g for g in got if g["key"] == "jobs.retry" and '"id": 4' in g["payload"]]
    assert [(g["payload"], g["retry"], g["tenant"], g["seq"]) for g in retried] == [
        ('{"id": 4, "flaky": true}', "1", "acme", 1)
    ]


SOLO = """
    import sys
    from nbkit import HandlerOutcome, StdioBroker

    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2)
    def solo(d):
        return HandlerOutcome.retry()
"""

REFUSED = """
    from nbkit import App, StdioBroker

    broker = StdioBroker()
    broker.subscriber("jobs")(lambda d: None)
    app = App(broker)
"""


def _run_stage(tmp_path: Path, source: str, target: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """``nbkit run TARGET`` in ``tmp_path`` on ``stdin``, ``source`` saved as the module TARGET names."""
    (tmp_path / f"{target.partition(':')[0]}.py").write_text(textwrap.dedent(source))
    return subprocess.run(
        ["nbkit", "run", target],
        input=stdin,
        cwd=tmp_path,
        env=checkout_env(scripts=True),
        capture_output=True,
        timeout=20,
    )


@needs_run
def test_run_takes_a_broker_too(tmp_path):
    done = _run_stage(tmp_path, SOLO, "solo:broker", b"[jobs | 5] hi\n")
    assert done.returncode == 0, done.stderr.decode()
    [line] = done.stdout.decode().splitlines()
    assert line.startswith("[") and " | jobs.retry | 0] rs1:" in line


@needs_run
def test_run_refuses_a_pipe_registration_without_out_retry(tmp_path):
    done = _run_stage(tmp_path, REFUSED, "refused:app", b"[jobs] hi\n")
    assert done.returncode != 0
    err = done.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert "NamedCopies" in err[0] and "`jobs`" in err[0]
    assert done.stdout == b""


SERVICE = """
    import sys
    from nbkit import App, HandlerOutcome, StdioBroker

    broker = StdioBroker()

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def work(d):
        print("handled", file=sys.stderr, flush=True)
        return HandlerOutcome.retry_after(0.5)

    app = App(broker, shutdown_timeout={timeout})
"""


@needs_run
@pytest.mark.parametrize("timeout", ["None", "0"])
def test_run_shuts_down_gracefully_on_sigterm(tmp_path, timeout):
    import select
    import signal

    (tmp_path / "svc.py").write_text(textwrap.dedent(SERVICE.format(timeout=timeout)))
    proc = subprocess.Popen(
        ["nbkit", "run", "--log-level", "INFO", "svc:app"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=checkout_env(scripts=True),
    )
    try:
        proc.stdin.write(b"[jobs | 9] hello\n")
        proc.stdin.flush()
        assert select.select([proc.stderr], [], [], 10)[0], "the service did not start"
        assert b"handled" in proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # 143: stopped by SIGTERM, nothing lost; 3: a copy was abandoned (docs/cli.rst, nbkit run --help)
    assert proc.returncode == (143 if timeout == "None" else 3), err.decode()
    abandoned = "shutdown timeout reached; the delayed retry copy is abandoned and lost"
    if timeout == "None":
        [line] = out.decode().splitlines()
        assert " | jobs.retry | 0] rs1:" in line
        assert abandoned not in err.decode()
    else:
        assert out == b""
        assert err.decode().count(abandoned) == 1
