"""The source stamp of the JupyterLab viewer's build: a hash of what the build is made from.

``python tools/labextension_stamp.py`` (the last step of ``npm run build`` in ``labextension/``) writes
the hash of ``labextension/``'s sources (``src/``, ``style/``, ``package.json``, ``package-lock.json``,
``tsconfig.json``) to ``nbkit/lab/labextension/sources.sha256``, beside the build. ``--check`` exits 1
when the build there is older than its sources; ``tests/lab/test_labextension_build.py`` does the same
check, so a shipped build that was not rebuilt after a change of its sources fails the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "labextension"
BUILD = ROOT / "nbkit" / "lab" / "labextension"
STAMP = BUILD / "sources.sha256"


def source_files(root: Path = SOURCES) -> list[Path]:
    """The files the build is made from, in a fixed order."""
    files = [root / "package.json", root / "package-lock.json", root / "tsconfig.json"]
    for folder in ("src", "style"):
        files += sorted(p for p in (root / folder).rglob("*") if p.is_file())
    return files


def source_hash(root: Path = SOURCES) -> str:
    """SHA-256 over each source file's path (relative to ``root``) and bytes."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the build is older than its sources")
    args = p.parse_args(argv)
    now = source_hash()
    if args.check:
        recorded = STAMP.read_text().strip() if STAMP.is_file() else "(no build)"
        if recorded != now:
            print(
                f"{STAMP.relative_to(ROOT)} says {recorded[:12]}, the sources hash to {now[:12]}: "
                "rebuild with `cd labextension && npm ci && npm run build`",
                file=sys.stderr,
            )
            return 1
        return 0
    if not (BUILD / "package.json").is_file():
        print(f"no build in {BUILD.relative_to(ROOT)}: run `jupyter labextension build .` first", file=sys.stderr)
        return 1
    STAMP.write_text(now + "\n")
    print(f"{STAMP.relative_to(ROOT)}: {now[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
