"""Every example in a subcommand's ``--help`` parses, is shown, and runs as written in the setup it names.

The setup is what :data:`nbkit.cli_examples.HEADING` says: a copy of the repository's ``examples/``
folder in which ``nbkit demo --out demo-out`` and ``nbkit run service:app`` have run. Each subcommand's
examples then run in order, in a copy of that folder of their own, through ``bash -o pipefail`` with an
``nbkit`` command on the PATH that runs this checkout; one that runs ``until Ctrl-C`` must open its
stream file, still be running a while after that, and stop on SIGINT with status 130.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from checkout_env import checkout_env, write_nbkit_command
from waiting import wait_until

from nbkit.cli import build_parser
from nbkit.cli_examples import EXAMPLES, HEADING, commands

ROOT = Path(__file__).resolve().parents[1]
#: Every subcommand the real parser knows (a new one without examples fails the tests below).
NAMES = [
    name
    for action in build_parser()._actions
    if isinstance(action, argparse._SubParsersAction)
    for name in action.choices
]
#: Seconds a following command must keep running once it has opened its stream file, before SIGINT.
KEEPS_RUNNING = 1.0

pytestmark = pytest.mark.timeout(300)


def _environment(folder: Path) -> dict[str, str]:
    """PATH with a ``nbkit`` that runs this checkout's package under this interpreter."""
    shim = folder / ".bin"
    write_nbkit_command(shim)
    env = checkout_env(MPLBACKEND="Agg")
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    return env


def _until_ctrl_c(command: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Start a command that follows a file, check it is still running, then interrupt it as Ctrl-C does."""
    process = subprocess.Popen(
        ["bash", "-c", command], cwd=folder, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_until(lambda: process.poll() is not None or _follows(process.pid, folder), what=f"{command!r} to start")
        if process.poll() is None:
            time.sleep(KEEPS_RUNNING)  # the thing tested: once following, the command does not end on its own
        still_running = process.poll() is None
    finally:
        with contextlib.suppress(ProcessLookupError):  # ended on its own: said below
            os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert still_running, f"{command!r} ended on its own ({process.returncode}): {err[-2000:]}"
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def _follows(session: int, folder: Path) -> bool:
    """Whether a process of ``session`` holds a ``.ss`` file of ``folder`` open (it got past its start-up)."""
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or os.getsid(int(proc.name)) != session:
                continue
            for fd in (proc / "fd").iterdir():
                target = Path(os.readlink(fd))
                if target.suffix == ".ss" and target.parent == folder.resolve():
                    return True
        except OSError:  # the process ended meanwhile
            continue
    return False


def _run(command: str, folder: Path, env: dict[str, str], *, ctrl_c: bool = False) -> subprocess.CompletedProcess[str]:
    if ctrl_c:
        return _until_ctrl_c(command, folder, env)
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=folder, env=env, capture_output=True, text=True, timeout=180
    )


def _is_ctrl_c(name: str, command: str) -> bool:
    return any(line.startswith(command) and "until Ctrl-C" in line for line in EXAMPLES[name])


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder HEADING names: examples/ after ``nbkit demo --out demo-out`` and ``nbkit run service:app``."""
    folder = tmp_path_factory.mktemp("cli-examples") / "examples"
    shutil.copytree(ROOT / "examples", folder, ignore=shutil.ignore_patterns("__pycache__"))
    env = _environment(folder)
    demo = _run("nbkit demo --out demo-out", folder, env)
    assert demo.returncode == 0, demo.stderr
    service = _run("nbkit run service:app", folder, env, ctrl_c=True)
    assert service.returncode == 130 and (folder / "orders.ss").is_file(), service.stderr
    return folder


def test_every_subcommand_has_two_to_four_examples() -> None:
    for name in NAMES:
        assert 2 <= len(commands(name)) <= 4, f"nbkit {name}: {len(commands(name))} examples"


@pytest.mark.parametrize("name", NAMES)
def test_every_example_parses_with_the_real_parser(name: str) -> None:
    """Each ``nbkit ...`` stage of an example (split at pipes and redirections) is accepted by argparse."""
    parser = build_parser()
    stages = 0
    for command in commands(name):
        words = shlex.split(command)
        stage: list[str] = []
        for word in [*words, "|"]:
            if word in ("|", ">", "&&"):
                if stage and stage[0] == "nbkit":
                    args = parser.parse_args(stage[1:])  # a usage error exits: the test fails on it
                    assert args.command in NAMES
                    stages += 1
                stage = [] if word != ">" else ["(redirect)"]
            else:
                stage.append(word)
    assert stages >= 2, f"nbkit {name}: fewer than two nbkit commands among its examples"


@pytest.mark.parametrize("name", NAMES)
def test_help_shows_the_examples(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from nbkit.cli import main

    assert main([name, "--help"]) == 0
    shown = capsys.readouterr().out
    assert HEADING in shown
    for line in EXAMPLES[name]:
        assert f"  {line}\n" in shown, f"nbkit {name} --help does not show {line!r} on one line"


@pytest.mark.parametrize("name", NAMES)
def test_every_example_runs_as_written(name: str, prepared: Path, tmp_path: Path) -> None:
    folder = tmp_path / "examples"
    shutil.copytree(prepared, folder, ignore=shutil.ignore_patterns(".bin"))
    env = _environment(folder)
    for command in commands(name):
        ctrl_c = _is_ctrl_c(name, command)
        done = _run(command, folder, env, ctrl_c=ctrl_c)
        wanted = 130 if ctrl_c else 0
        assert done.returncode == wanted, f"{command!r} exited {done.returncode}:\n{done.stderr[-3000:]}"
        assert "Traceback" not in done.stderr, done.stderr
