"""``nbkit completion SHELL``: the scripts it prints complete the subcommands, their options and choices.

The bash script is sourced in a real bash and its function called as bash calls it on <TAB>; zsh and fish
are not on every machine, so their scripts are checked for what they offer, and run when the shell is there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env

from nbkit.cli import build_parser, main
from nbkit.completion import SHELLS, completion_script

SUBCOMMANDS = ["cat", "info", "write", "publish", "watch", "run", "demo", "export", "redrive", "lineage", "repair"]


def _bash_complete(script: Path, *words: str) -> list[str]:
    """What bash offers for ``words`` (the last one being completed), through the script's function."""
    line = " ".join(f"'{word}'" for word in words)
    call = (
        f'source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _nbkit; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    done = subprocess.run(["bash", "--norc", "-c", call], capture_output=True, text=True, check=True, timeout=60)
    return [word for word in done.stdout.splitlines() if word]


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The script as the installed command prints it (a real ``python -m nbkit completion bash``)."""
    out = subprocess.run(
        [sys.executable, "-m", "nbkit", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
        env=checkout_env(),
        timeout=120,
    ).stdout
    path = tmp_path_factory.mktemp("completion") / "nbkit.bash"
    path.write_text(out)
    return path


def test_tab_after_nbkit_offers_every_subcommand(bash_script: Path) -> None:
    offered = _bash_complete(bash_script, "nbkit", "")
    assert set(SUBCOMMANDS) | {"completion", "--help", "--version"} <= set(offered), offered
    assert _bash_complete(bash_script, "nbkit", "ca") == ["cat"]
    assert _bash_complete(bash_script, "nbkit", "re") == ["redrive", "repair"]


def test_a_subcommand_offers_its_own_options_and_their_choices(bash_script: Path) -> None:
    assert _bash_complete(bash_script, "nbkit", "cat", "--fi") == ["--first"]
    assert "--dry-run" in _bash_complete(bash_script, "nbkit", "redrive", "--")
    assert "--dry-run" not in _bash_complete(bash_script, "nbkit", "cat", "--")
    assert _bash_complete(bash_script, "nbkit", "cat", "--on-bad-frames", "") == ["error", "warn", "skip"]
    # the same option name with other choices in another command
    assert _bash_complete(bash_script, "nbkit", "lineage", "--from", "") == ["file", "stdio"]
    assert _bash_complete(bash_script, "nbkit", "cat", "--from", "s") == ["ss", "stdio"]
    # a file argument: nothing from the script, so bash completes file names (complete -o default)
    assert _bash_complete(bash_script, "nbkit", "cat", "orders") == []
    assert "complete -o default -o bashdefault -F _nbkit nbkit" in bash_script.read_text()


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_the_subcommands_and_options(shell: str) -> None:
    script = completion_script(build_parser(), shell)
    for name in SUBCOMMANDS:
        assert f"{name}:" in script if shell == "zsh" else f"-a {name} -d" in script
    assert "--on-bad-frames" in script or "-l on-bad-frames" in script
    assert "(error warn skip)" in script or "-a 'error warn skip'" in script
    if shutil.which(shell):  # the shell parses it
        check = ["zsh", "-n", "-c", script] if shell == "zsh" else ["fish", "--no-execute", "-c", script]
        assert subprocess.run(check, capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_the_subcommands_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "nbkit.fish"
    script.write_text(completion_script(build_parser(), "fish"))

    def offered(line: str) -> list[str]:
        call = f"source {script}; complete -C '{line}'"
        done = subprocess.run(["fish", "-N", "-c", call], capture_output=True, text=True, check=True, timeout=60)
        return [row.split("\t")[0] for row in done.stdout.splitlines()]

    assert offered("nbkit ca") == ["cat"]
    assert sorted(offered("nbkit cat --on-bad-frames ")) == ["error", "skip", "warn"]
    assert "--dry-run" in offered("nbkit redrive --")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_offers_the_subcommands_then_the_commands_options(tmp_path: Path) -> None:
    # zsh's completion system needs a terminal; its two entry points are stubbed to print what they are given
    script = tmp_path / "_nbkit"
    script.write_text(completion_script(build_parser(), "zsh"))
    stubs = '_describe() { print -rl -- "${(@P)${@[-1]}}" }; _arguments() { print -rl -- "$@" }; compdef() { : }'

    def given(*words: str) -> list[str]:
        call = f"{stubs}; source {script}; words=({' '.join(repr(w) for w in words)}); CURRENT={len(words)}; _nbkit"
        done = subprocess.run(["zsh", "-f", "-c", call], capture_output=True, text=True, check=True, timeout=60)
        return done.stdout.splitlines()

    top = given("nbkit", "")
    assert {line.split(":")[0] for line in top} >= set(SUBCOMMANDS)
    cat = given("nbkit", "cat", "--on")
    assert any(line.startswith("--on-bad-frames[") and line.endswith(":value:(error warn skip)") for line in cat), cat
    assert "*:file:_files" in cat


def test_the_command_prints_the_script_and_refuses_another_shell(capsys: pytest.CaptureFixture[str]) -> None:
    for shell in SHELLS:
        assert main(["completion", shell]) == 0
        assert capsys.readouterr().out == completion_script(build_parser(), shell)
    assert main(["completion", "powershell"]) == 2
    assert "invalid choice: 'powershell'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="choose one of bash, zsh, fish"):
        completion_script(build_parser(), "tcsh")
