"""What the CLI tests share: run ``nbkit ARGV`` in process and check that an error is one line."""

from __future__ import annotations

import io
import sys

import pytest

from nbkit import cli


def run(
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    stdin: bytes | str | None = None,
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> tuple[int, str, str]:
    """Run ``nbkit ARGV`` in process (``stdin``: what it reads there; needs ``monkeypatch``); returns
    (exit status, stdout, stderr)."""
    if stdin is not None:
        assert monkeypatch is not None, "pass monkeypatch with stdin"
        text = io.StringIO(stdin) if isinstance(stdin, str) else io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        monkeypatch.setattr(sys, "stdin", text)
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def one_error_line(err: str) -> str:
    """The CLI's error: exactly one line starting ``nbkit: `` and no traceback; returns it."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nbkit: ") and "Traceback" not in err, err
    return lines[0]
