"""The repository's ``examples/`` services run as the guide shows them (docs/guide/services.md).

The file service is started with ``nbkit run service:app`` in a copy of the folder and fed with
``nbkit publish`` while it runs (its handler logs what it paid, on stderr, and writes nothing to stdout);
the two pipe stages are chained in a shell pipeline, and the output the guide prints for that pipeline is
compared with what it really writes (timestamps aside).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from checkout_env import checkout_env
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GUIDE = ROOT / "docs" / "guide" / "services.md"
TIMESTAMP = re.compile(r"^\[[^|]*\|")

pytestmark = pytest.mark.timeout(180)  # minutes of margin: the machine may be loaded


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("__pycache__", "*.ss", "*.json"))
    return folder


def test_the_file_service_is_fed_while_it_runs(tmp_path: Path) -> None:
    folder, env = _folder(tmp_path), checkout_env(scripts=True, PYTHONUNBUFFERED="1")
    service = subprocess.Popen(
        [sys.executable, "-m", "nbkit", "run", "service:app", "--log-level", "INFO"],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    err: list[str] = []
    stderr = service.stderr
    assert stderr is not None
    drain = threading.Thread(target=lambda: err.extend(stderr), daemon=True)
    drain.start()

    def paid() -> list[str]:
        return [line.removeprefix("INFO shop: ") for line in list(err) if line.startswith("INFO shop: ")]

    try:
        ss = folder / "orders.ss"

        def primed() -> bool:
            assert service.poll() is None, "".join(err)
            return ss.exists() and ss.stat().st_size > 128

        # created and primed by the service; it reads from the beginning (no saved position), so what is
        # published from now on is delivered whenever it gets there
        wait_until(primed, what=lambda: f"the service to create orders.ss: {err}")
        feed = re.search(r"Feed it from a second terminal.*?```bash\n(.*?)```", GUIDE.read_text(), re.S)
        assert feed, "docs/guide/services.md: no feeding block after 'Feed it from a second terminal'"
        for line in filter(str.strip, feed.group(1).splitlines()):
            done = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True, timeout=30)
            assert done.returncode == 0 and done.stdout.startswith("published orders seq "), (line, done.stderr)
        wait_until(lambda: len(paid()) >= 4, what=lambda: f"4 orders paid: {err}")
    finally:
        service.send_signal(signal.SIGINT)
        out = service.stdout.read()  # stderr is the drain thread's
        service.wait(timeout=30)
        drain.join(timeout=10)
    assert service.returncode == 130, "".join(err)  # stopped by SIGINT (Ctrl-C), nothing lost
    lines = paid()
    assert sorted(lines) == ["paid 1 attempt 1\n", "paid 2 attempt 3\n", "paid 3 attempt 1\n", "paid 4 attempt 1\n"]
    assert lines.index("paid 2 attempt 3\n") > lines.index("paid 1 attempt 1\n")  # after its two copies
    assert any("ack / nack failed" in line for line in err)  # the runtime's lines, beside the service's
    assert out == ""  # a service reports through logging: its stdout stays free for messages
    assert (folder / "orders.positions.json").exists()


def test_the_two_pipe_stages_print_what_the_guide_shows(tmp_path: Path) -> None:
    block = re.search(r"```console\n(.*?)```", GUIDE.read_text(), re.S)
    assert block, "docs/guide/services.md: no console block for the pipe"
    folder, env = _folder(tmp_path), checkout_env(scripts=True, PYTHONUNBUFFERED="1")
    shown, printed = [], []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            done = subprocess.run(
                ["bash", "-c", line[2:]], cwd=folder, env=env, capture_output=True, text=True, timeout=30
            )
            assert done.returncode == 0, (line, done.stderr)
            printed.extend(done.stdout.splitlines())
        else:
            shown.append(line)
    assert len(shown) == 4 and "jobs.dead" in shown[-1]
    assert [TIMESTAMP.sub("[|", line) for line in printed] == [TIMESTAMP.sub("[|", line) for line in shown], (
        "the guide's pipe output is not what the stages print now"
    )
