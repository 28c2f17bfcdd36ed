"""The examples at the end of each subcommand's ``--help`` (and so on the site's command-line page).

Every example runs as written in one setup, the one :data:`HEADING` names: a copy of the repository's
``examples/`` folder in which ``nbkit demo --out demo-out`` and ``nbkit run service:app`` have run (so
``demo-out/orders.ss``, ``demo-out/pipe-stdout.txt`` and ``orders.ss`` are there). A comment (a line of
its own starting with ``#``, or ``  # `` after a command) says what an example shows; a command whose
comment says ``until Ctrl-C`` keeps running until interrupted.
tests/test_cli_examples.py runs every line in that setup, so an example that stops working fails a test.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["EXAMPLES", "HEADING", "add_examples", "commands"]

HEADING = (
    "examples, in the repository's examples/ folder (demo-out/ is what `nbkit demo --out demo-out`\n"
    "writes, orders.ss what `nbkit run service:app` writes):"
)

#: Subcommand -> its example lines: the command, then ``  # `` and what it shows.
EXAMPLES: dict[str, tuple[str, ...]] = {
    "cat": (
        "nbkit cat demo-out/orders.ss --key orders.dead --first 3  # the first three dead letters",
        "nbkit cat demo-out/orders.ss --key orders --format ndjson --decode-payload --last 2  # copies' headers opened",
        "nbkit cat demo-out/orders.ss --where 'payload~book' --since 2024-01-01T00:01:00 --header-only",
        "nbkit cat --from stdio demo-out/pipe-stdout.txt --key orders.dead  # a pipe capture, envelopes decoded",
    ),
    "info": (
        "nbkit info demo-out/orders.ss  # header, streams, time range, end of stream, damage",
        "nbkit info demo-out/orders.ss --json  # the same as one JSON document",
        "nbkit info --from stdio demo-out/pipe-stdout.txt  # a pipe stage's captured stdout",
    ),
    "write": (
        "# a new file of the dead letters only, closed with an end-of-stream mark",
        "nbkit cat demo-out/orders.ss --format ndjson --key orders.dead | nbkit write dead.ss --eos",
        "nbkit cat demo-out/orders.ss --format ndjson --key orders --last 5 | nbkit write copy.ss  # or appends to it",
    ),
    "publish": (
        """nbkit publish orders.ss orders '{"id": 1}'  # prints: published orders seq N""",
        """nbkit publish -H trace-id:abc123 orders.ss orders '{"id": 2}'  # with a header (rs1 envelope)""",
        """printf '{"id": 3}\\n{"id": 4}\\n' | nbkit publish -q orders.ss orders  # one message per stdin line""",
    ),
    "watch": (
        "nbkit watch demo-out/orders.ss --once  # what the file holds now, then exit",
        "nbkit watch orders.ss --every 2 --dead-letter-key orders.dead  # the service's file, until Ctrl-C",
    ),
    "run": (
        "nbkit run service:app --log-level INFO  # follows orders.ss until Ctrl-C",
        """nbkit publish orders.ss orders '{"id": 7}'  # meanwhile, in a second terminal: the service logs it""",
        "# a two-stage pipe (first.py, second.py): the job is not ready twice and ends under jobs.dead",
        """echo '[2024-01-01T00:00:00 | jobs | 1] {"ready": false}' | nbkit run first:app | nbkit run second:app""",
    ),
    "demo": (
        "nbkit demo --out demo-out  # the files every other example reads, and dashboard.png",
        "nbkit demo --out big-demo --orders 2000 --seed 1 --no-png  # a larger workload, no picture",
    ),
    "export": (
        "nbkit export demo-out/orders.ss -o orders.parquet",
        "nbkit export demo-out/orders.ss -o dead.parquet --key orders.dead --payload json  # JSON payloads",
    ),
    "redrive": (
        "nbkit redrive demo-out/orders.ss --from orders.dead --to orders --dry-run  # what would be appended",
        "nbkit redrive demo-out/orders.ss --from orders.dead --to orders --where 'time>=2024-01-01T00:01:00'",
        "# a pipe capture: the redriven lines, for the next run of the stage",
        "nbkit redrive --capture demo-out/pipe-stdout.txt --from orders.dead --to orders > redriven.txt",
    ),
    "lineage": (
        "nbkit lineage demo-out/orders.ss  # attempts needed, final states, observed delays",
        "nbkit lineage demo-out/orders.ss --json",
        "nbkit lineage --from stdio demo-out/pipe-stdout.txt  # a pipe stage's captured stdout",
    ),
    "doctor": (
        "nbkit doctor  # before a workshop: each item ok, or what to do about it",
        "nbkit doctor --folder demo-out  # free disk measured where the lessons will write",
    ),
    "repair": (
        "head -c 20000 demo-out/orders.ss > cut.ss  # a copy cut off mid-frame",
        "nbkit repair cut.ss repaired.ss  # says what it left out",
        "nbkit repair cut.ss repaired.ss --force  # again, replacing the first copy",
    ),
    "completion": (
        "nbkit completion bash > nbkit.bash  # then `source nbkit.bash`: nbkit TAB offers the commands",
        "nbkit completion fish > nbkit.fish  # for ~/.config/fish/completions/",
    ),
}

_COMMENT = re.compile(r"\s+# .*$")


def add_examples(parser: argparse.ArgumentParser, name: str) -> None:
    """Put the subcommand's examples after whatever its ``epilog`` already says (kept line by line)."""
    lines = EXAMPLES.get(name)
    if not lines:
        return
    block = HEADING + "\n" + "\n".join(f"  {line}" for line in lines)
    parser.epilog = f"{parser.epilog}\n\n{block}" if parser.epilog else block


def commands(name: str) -> list[str]:
    """The subcommand's example command lines, their comments left out (what a test runs)."""
    return [_COMMENT.sub("", line) for line in EXAMPLES.get(name, ()) if not line.startswith("#")]
