"""Every install line installs *this* project: the PyPI name ``nbkit`` belongs to an unrelated package.

The distribution is ``nbkit-ruststream`` (``nbkit.scale.DISTRIBUTION``, ``[project] name`` in
pyproject.toml); the import name and the command stay ``nbkit``. A ``pip install`` in the package, the
docs, the lessons, the README, Binder's files, the bench scripts or CI that names the bare ``nbkit``
distribution would install a stranger's package, so these tests find every ``pip install`` there and
check its requirement arguments.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from nbkit.scale import DISTRIBUTION, EXTRA, install_hint, require

ROOT = Path(__file__).resolve().parents[1]

#: Where install lines are written for users: the package, docs, lessons, README, Binder, benches, CI, tools.
SCANNED = ["README.md", "nbkit", "docs", "notebooks", "binder", "bench", ".ci", "tools"]
SUFFIXES = {".py", ".pyx", ".md", ".rst", ".txt", ".ipynb", ".sh", ".toml", ".cfg", ""}
SKIPPED_DIRS = {"_build", "jupyter_execute", "__pycache__", "data", "node_modules", ".ipynb_checkpoints"}

#: One ``pip install`` and its arguments, up to the end of that shell command (``&&``, ``;``, ``|``, a comment,
#: a closing backtick or quote of the surrounding Markdown or Python string, or the end of the line).
_PIP_INSTALL = re.compile(r"pip3?\s+install\b([^\n&;|#`\"]*)")
#: A requirement's project name at the start of an argument (what comes before ``[extra]``, a version or a marker).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: Options whose next argument is a file or URL, not a requirement.
_OPTIONS_WITH_VALUE = {
    "-r",
    "--requirement",
    "-c",
    "--constraint",
    "-e",
    "--editable",
    "-t",
    "--target",
    "-i",
    "--index-url",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--root",
    "--prefix",
}


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def bare_nbkit_installs(text: str) -> list[str]:
    """The ``pip install`` commands in ``text`` that name the distribution ``nbkit`` (in any spelling PyPI
    treats as that name: ``nbkit``, ``NBKit``, ``'nbkit[scale]'``, ``nbkit==0.1``)."""
    found = []
    for match in _PIP_INSTALL.finditer(text):
        args = match.group(1).split()
        skip_next = False
        for arg in args:
            if skip_next:
                skip_next = False
                continue
            if arg in _OPTIONS_WITH_VALUE:
                skip_next = True
                continue
            arg = arg.strip("'\\")
            if arg.startswith("-"):
                continue
            name = _NAME.match(arg)
            if name is None or arg[name.end() : name.end() + 1] in ("/", ":"):
                continue  # a path, a URL or '.[extra]'
            if _normalized(name.group().rstrip("._-")) == "nbkit":  # a trailing dot ends a sentence
                found.append(match.group(0).strip())
    return found


def _scanned_files() -> list[Path]:
    files = []
    for entry in SCANNED:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in candidates:
            if file.is_file() and file.suffix in SUFFIXES and not SKIPPED_DIRS & set(file.relative_to(ROOT).parts):
                files.append(file)
    return files


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pip install 'nbkit[scale]'", 1),
        ("run `pip install nbkit` first", 1),
        ('"pip install NBKit==0.0.10"', 1),
        ("pip install -q nbkit-lab nbkitten", 0),  # other names
        ("pip install -U pandas nbkit.", 1),  # a sentence that ends after the name
        ("pip install -e . && nbkit demo --out demo-out", 0),  # the command after && is not an argument
        ("pip install -e '.[scale]' (in a clone) or pip install 'nbkit-ruststream[scale]'", 0),
        ("pip install -r binder/requirements.txt -c nbkit", 0),  # a constraints file's path
        ("pip install ./nbkit/ ruststream-nbkit", 0),
    ],
)
def test_the_finder_tells_the_bare_name_from_this_project(text: str, expected: int) -> None:
    assert len(bare_nbkit_installs(text)) == expected, bare_nbkit_installs(text)


def test_no_install_line_names_the_bare_nbkit_distribution() -> None:
    files = _scanned_files()
    assert len(files) > 50, "the scan found too few files: is SCANNED still the layout?"
    offenders = [
        f"{file.relative_to(ROOT)}: {command}"
        for file in files
        for command in bare_nbkit_installs(file.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not offenders, "these install a stranger's package (PyPI's 'nbkit'):\n" + "\n".join(offenders)


def test_the_distribution_name_is_the_one_the_hints_give() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION != "nbkit"
    assert EXTRA in project["optional-dependencies"]
    assert project["scripts"] == {"nbkit": "nbkit.command:main"}  # the command keeps its name


def test_a_missing_extra_names_both_install_lines() -> None:
    with pytest.raises(ImportError) as info:
        require("nbkit_not_installed_anywhere", feature="this feature")
    message = str(info.value)
    assert install_hint(EXTRA) in message
    assert "pip install -e '.[scale]'" in message and f"pip install '{DISTRIBUTION}[scale]'" in message
    assert not bare_nbkit_installs(message)


def test_export_help_says_how_to_install_the_extra() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nbkit", "export", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert "pip install -e '.[scale]'" in out
    assert f"pip install '{DISTRIBUTION}[scale]'" in out  # on one line: not broken at the hyphen
    assert not bare_nbkit_installs(out)
