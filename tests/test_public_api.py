"""The public namespace is a contract: pin it, so a rename or a removal is a deliberate change."""

from __future__ import annotations

import subprocess
import sys

import nbkit

PUBLIC = {
    "AckError",
    "Action",
    "App",
    "ChecksumError",
    "Clock",
    "ConfigurationError",
    "DamagedRegion",
    "DamageWarning",
    "Delivery",
    "FileBroker",
    "FilePosition",
    "FormatError",
    "HandlerOutcome",
    "InvalidKeyError",
    "LineParseError",
    "Message",
    "NbkitError",
    "PositionStore",
    "ReadEnd",
    "RealClock",
    "RetryDestinationError",
    "SeekError",
    "Session",
    "SettlementEvent",
    "StdioBroker",
    "StreamKeyError",
    "StreamReader",
    "StreamWriter",
    "TruncatedError",
    "UnknownKeyError",
    "VirtualClock",
    "WriterLockedError",
    "__version__",
    "concat_frames",
    "events_frame",
    "lineage",
    "read_arrow",
    "messages_table",
    "overview",
    "summarize",
    "read_parquet",
    "read_pipe",
    "read_stream",
    "to_parquet",
    # retry policies and redrive (issue 17)
    "RedriveResult",
    "RetryPolicy",
    "Workload",
    "policy_summary",
    "redrive",
    "redrive_lines",
    "simulate",
}


def test_all_is_pinned():
    assert set(nbkit.__all__) == PUBLIC


def test_every_public_name_resolves():
    for name in nbkit.__all__:
        assert getattr(nbkit, name) is not None


def test_errors_share_one_root():
    for name in (
        "AckError",
        "ChecksumError",
        "ConfigurationError",
        "FormatError",
        "InvalidKeyError",
        "LineParseError",
        "RetryDestinationError",
        "SeekError",
        "StreamKeyError",
        "TruncatedError",
        "UnknownKeyError",
        "WriterLockedError",
    ):
        assert issubclass(getattr(nbkit, name), nbkit.NbkitError)


def test_import_does_not_load_pandas():
    code = "import sys, nbkit; print('pandas' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        nbkit.nope  # noqa: B018


def test_dir_lists_the_lazy_names_for_tab_completion():
    names = dir(nbkit)
    for name in ("read_stream", "read_pipe", "Session", "to_parquet"):
        assert name in names


def test_read_pipe_takes_a_path_or_file_or_lines_never_a_guess():
    import inspect

    params = inspect.signature(nbkit.read_pipe).parameters
    assert list(params) == ["path_or_file", "lines", "keys", "payload"]
    assert params["path_or_file"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in ("lines", "keys", "payload"))


def test_the_version_is_written_once():
    import importlib.metadata
    import pathlib
    import tomllib

    project = tomllib.loads((pathlib.Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # the build reads nbkit.__version__
    from nbkit.errors import DISTRIBUTION

    assert project["name"] == DISTRIBUTION  # published as nbkit-ruststream; the import name stays nbkit
    assert importlib.metadata.version(DISTRIBUTION) == nbkit.__version__
