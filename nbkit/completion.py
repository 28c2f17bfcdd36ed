"""Shell completion for ``nbkit``: a bash, zsh or fish script written from the command line's own parser.

``nbkit completion bash`` (or ``zsh``, ``fish``) prints the script; sourcing it makes ``nbkit <TAB>``
offer the subcommands, ``nbkit cat --<TAB>`` that command's options, an option with fixed choices its
choices, and anything else file names. The scripts are generated from the argparse parser, so a new
subcommand or option completes without a change here.
"""

from __future__ import annotations

import argparse
import shlex
import textwrap
from dataclasses import dataclass

__all__ = ["SHELLS", "completion_script"]

#: The shells a script can be written for.
SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class _Option:
    """One option of a command: its spellings, its help, its choices, whether it takes a value, and whether
    that value is a path."""

    names: tuple[str, ...]
    help: str
    choices: tuple[str, ...]
    takes_value: bool
    path: bool


@dataclass(frozen=True)
class _Command:
    """A subcommand (``name`` empty: the top level) and its options."""

    name: str
    help: str
    options: tuple[_Option, ...]


def _short_help(text: str | None) -> str:
    """The help text on one line, shortened at a word to fit a completion menu."""
    line = " ".join((text or "").split())
    return "" if line == argparse.SUPPRESS else textwrap.shorten(line, 80, placeholder="...")


def _names_a_path(action: argparse.Action) -> bool:
    """Whether an option's value is a file or folder (its name or metavar says so): those complete file names."""
    words = f"{action.dest} {action.metavar or ''}".lower()
    return any(word in words for word in ("file", "path", "out", "dir", "capture"))


def _options(parser: argparse.ArgumentParser) -> tuple[_Option, ...]:
    found = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        choices = tuple(str(c) for c in action.choices) if action.choices else ()
        takes_value = action.nargs != 0
        found.append(
            _Option(tuple(action.option_strings), _short_help(action.help), choices, takes_value, _names_a_path(action))
        )
    return tuple(found)


def _commands(parser: argparse.ArgumentParser) -> list[_Command]:
    """The top level first, then each subcommand in the parser's order."""
    commands = [_Command("", "", _options(parser))]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                commands.append(_Command(name, _short_help(helps.get(name)), _options(sub)))
    return commands


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`) of the command ``parser.prog``."""
    writers = {"bash": _bash, "zsh": _zsh, "fish": _fish}
    if shell not in writers:
        raise ValueError(f"no completion for shell {shell!r}; choose one of {', '.join(SHELLS)}")
    return writers[shell](parser.prog, _commands(parser))


def _words(options: tuple[_Option, ...]) -> str:
    return " ".join(name for option in options for name in option.names if name.startswith("--"))


def _bash(prog: str, commands: list[_Command]) -> str:
    top, subs = commands[0], commands[1:]
    func = "_" + prog.replace("-", "_")
    words = [f'        "") words="{" ".join(c.name for c in subs)} {_words(top.options)}" ;;']
    words += [f'        {c.name}) words="{_words(c.options)}" ;;' for c in subs]
    choice_cases = [
        f'        "{c.name} {name}") COMPREPLY=($(compgen -W "{" ".join(o.choices)}" -- "$cur")); return ;;'
        for c in subs
        for o in c.options
        if o.choices and o.takes_value
        for name in o.names
    ]
    return "\n".join(
        [
            f"# {prog} completion for bash: `source <({prog} completion bash)` in ~/.bashrc, or save the output",
            f"# as ~/.local/share/bash-completion/completions/{prog}",
            f"{func}() {{",
            '    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd="" words i',
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            "        case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac",
            "    done",
            '    case "$cmd $prev" in',
            *choice_cases,
            "    esac",
            '    case "$cmd" in',
            *words,
            "        *) return ;;",
            "    esac",
            "    if [[ -z $cmd || $cur == -* ]]; then",
            '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            "    fi",
            "}",
            f"complete -o default -o bashdefault -F {func} {prog}",
            "",
        ]
    )


def _zsh_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace(":", "\\:").replace("[", "\\[").replace("]", "\\]").replace("'", "'\\''")


def _zsh_spec(option: _Option) -> str:
    names = option.names
    label = f"[{_zsh_quote(option.help)}]"
    value = ""
    if option.takes_value:
        action = f"({' '.join(option.choices)})" if option.choices else "_files" if option.path else " "
        value = f":value:{action}"
    if len(names) == 1:
        return f"'{names[0]}{label}{value}'"
    return f"'({' '.join(names)})'{{{','.join(names)}}}'{label}{value}'"


def _zsh(prog: str, commands: list[_Command]) -> str:
    top, subs = commands[0], commands[1:]
    func = "_" + prog.replace("-", "_")
    described = " ".join(f"'{c.name}:{_zsh_quote(c.help)}'" for c in subs)
    cases = []
    for c in subs:
        specs = " ".join(_zsh_spec(o) for o in c.options)
        cases.append(f"        {c.name}) _arguments -s {specs} '*:file:_files' ;;")
    top_specs = " ".join(_zsh_spec(o) for o in top.options)
    return "\n".join(
        [
            f"#compdef {prog}",
            f"# {prog} completion for zsh: `source <({prog} completion zsh)` in ~/.zshrc (after compinit), or save",
            f"# the output as _{prog} in a folder of your $fpath",
            f"{func}() {{",
            "    local -a commands",
            f"    commands=({described})",
            "    if (( CURRENT == 2 )); then",
            f"        _describe -t commands '{prog} command' commands",
            f"        _arguments {top_specs}",
            "        return",
            "    fi",
            "    words=(${words[2,-1]}); (( CURRENT-- ))",
            "    case ${words[1]} in",
            *cases,
            "    esac",
            "}",
            f'if [[ $zsh_eval_context[-1] == loadautofunc ]]; then {func} "$@"; else compdef {func} {prog}; fi',
            "",
        ]
    )


def _fish(prog: str, commands: list[_Command]) -> str:
    subs = commands[1:]
    names = " ".join(c.name for c in subs)
    lines = [
        f"# {prog} completion for fish: `{prog} completion fish | source`, or save the output as",
        f"# ~/.config/fish/completions/{prog}.fish",
        f"complete -c {prog} -f",
    ]
    for c in subs:
        lines.append(
            f"complete -c {prog} -n 'not __fish_seen_subcommand_from {names}' -a {c.name} -d {shlex.quote(c.help)}"
        )
    for c in commands:
        condition = f"__fish_seen_subcommand_from {c.name}" if c.name else f"not __fish_seen_subcommand_from {names}"
        for o in c.options:
            flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in o.names)
            value = ""
            if o.takes_value:
                value = f" -x -a {shlex.quote(' '.join(o.choices))}" if o.choices else " -r -F" if o.path else " -x"
            lines.append(f"complete -c {prog} -n '{condition}' {flags} -d {shlex.quote(o.help)}{value}")
        if c.name:
            lines.append(f"complete -c {prog} -n '{condition}' -F")
    return "\n".join(lines) + "\n"
