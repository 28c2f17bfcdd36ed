"""``.. nbkit-cli:: nbkit.cli:build_parser``: the command-line reference, from the real argparse parsers.

The directive calls the named function and renders what argparse itself knows: the program's
description and usage, then one section per subcommand (its description, the usage line argparse
prints, each argument with its help text, choices and default, then its epilog: the install lines and
the examples that ``nbkit COMMAND --help`` ends with). A new subcommand or option appears
on the site with no edit here; no ``--help`` text is copied by hand.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Iterator
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_id


def load_parser(target: str) -> argparse.ArgumentParser:
    """Call ``module:function`` and return the parser it builds."""
    module_name, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"nbkit-cli needs MODULE:FUNCTION, got {target!r}")
    return getattr(importlib.import_module(module_name), attr)()


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` for each subcommand, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _invocation(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """How ``--help`` writes the argument: ``-o OUT, --out OUT``, ``--log-level {DEBUG,INFO}``, ``FILE``."""
    return parser._get_formatter()._format_action_invocation(action)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    has_default = action.option_strings and action.nargs != 0 and action.default not in (None, argparse.SUPPRESS)
    return f"{text} (default {action.default})" if has_default and "default" not in text else text


def _arguments(parser: argparse.ArgumentParser) -> nodes.definition_list:
    listing = nodes.definition_list()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        item = nodes.definition_list_item()
        item += nodes.term("", "", nodes.literal(text=_invocation(parser, action)))
        item += nodes.definition("", _inline(_help(parser, action)))
        listing += item
    return listing


def _usage(parser: argparse.ArgumentParser) -> nodes.literal_block:
    usage = parser.format_usage().strip()
    return nodes.literal_block(usage, usage, language="text")


def _inline(text: str) -> nodes.paragraph:
    """A line of prose whose parts between backquotes are code, as ``--help`` writes them."""
    paragraph = nodes.paragraph()
    for i, part in enumerate(text.split("`")):
        if part:
            paragraph += nodes.literal(text=part) if i % 2 else nodes.Text(part)
    return paragraph


def _blocks(text: str | None) -> list[nodes.Node]:
    """A description or epilog as ``--help`` prints it: prose paragraphs, and indented lines as blocks.

    Unindented lines are prose (one paragraph until a blank or an indented line); indented lines
    (commands, ``run``'s table of exit codes) keep their lines, in a block with the indentation removed.
    """
    if not text:
        return []
    result: list[nodes.Node] = []
    prose: list[str] = []
    code: list[str] = []

    def flush() -> None:
        if prose:
            result.append(_inline(" ".join(prose)))
            prose.clear()
        if code:
            block = "\n".join(code)
            shell = block.startswith(("nbkit", "#", "pip"))
            result.append(nodes.literal_block(block, block, language="bash" if shell else "text"))
            code.clear()

    for line in text.splitlines():
        if line.startswith(" "):
            if prose:
                flush()
            code.append(line[2:] if line.startswith("  ") else line.lstrip())
        elif line.strip():
            if code:
                flush()
            prose.append(line.strip())
        else:
            flush()
    flush()
    return result


class CliDirective(SphinxDirective):
    """Render a parser and its subcommands as sections."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        """Build the nodes: description, usage, then a section per subcommand."""
        parser = load_parser(self.arguments[0])
        result: list[nodes.Node] = []
        if parser.description:
            result.append(nodes.paragraph(text=parser.description))
        result.append(_usage(parser))
        for name, sub in subcommands(parser):
            title = f"{parser.prog} {name}"
            section = nodes.section(ids=[make_id(self.env, self.state.document, "cli", title)], names=[title])
            section += nodes.title("", "", nodes.literal(text=title))
            section.extend(_blocks(sub.description))
            section += _usage(sub)
            section += _arguments(sub)
            section.extend(_blocks(sub.epilog))
            result.append(section)
        return result


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("nbkit-cli", CliDirective)
    return {"parallel_read_safe": True}
