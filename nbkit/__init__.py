"""nbkit: the ruststream runtime on SeaStreamer stream files and pipes, in Python, for Jupyter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nbkit.errors import (
    AckError,
    ChecksumError,
    ConfigurationError,
    FormatError,
    InvalidKeyError,
    LineParseError,
    NbkitError,
    RetryDestinationError,
    SeekError,
    StreamKeyError,
    TruncatedError,
    UnknownKeyError,
    WriterLockedError,
)

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from nbkit.notebook.overview import overview
    from nbkit.notebook.session import Session
    from nbkit.notebook.simulate import RetryPolicy, Workload, policy_summary, simulate
    from nbkit.runtime.app import App
    from nbkit.runtime.clock import Clock, RealClock, VirtualClock
    from nbkit.runtime.delivery import Delivery
    from nbkit.runtime.events import SettlementEvent
    from nbkit.runtime.file_broker import FileBroker
    from nbkit.runtime.outcome import HandlerOutcome
    from nbkit.runtime.position_store import PositionStore
    from nbkit.runtime.redrive import RedriveResult, redrive, redrive_lines
    from nbkit.runtime.settle import Action
    from nbkit.runtime.stdio_broker import StdioBroker
    from nbkit.scale.parquet import read_parquet, to_parquet
    from nbkit.tabular.events import events_frame
    from nbkit.tabular.frames import concat_frames, read_arrow, read_pipe, read_stream
    from nbkit.tabular.lineage import lineage, messages_table, summarize
    from nbkit.transport.damage import DamagedRegion, DamageWarning
    from nbkit.transport.file_reader import StreamReader
    from nbkit.transport.file_writer import StreamWriter
    from nbkit.transport.messages import Message, ReadEnd
    from nbkit.transport.positions import FilePosition

try:  # stream files are locked with fcntl (nbkit/transport/file_lock.py): POSIX only, said at once
    import fcntl as _fcntl  # noqa: F401
except ImportError as _exc:
    import platform as _platform

    raise ImportError(
        f"nbkit needs a POSIX system (Linux, macOS, BSD): its stream files are locked with fcntl, which "
        f"Python on {_platform.system() or _platform.platform()} does not have; on Windows, run nbkit in WSL"
    ) from _exc

#: The one place the version is written: pyproject.toml reads it (``[tool.setuptools.dynamic]``), and
#: ``nbkit --version`` prints it.
__version__ = "0.1.0"

#: Every name but the errors is imported on first use: `import nbkit` costs a few milliseconds, so the
#: ``nbkit`` command can hold stop signals before its heavy imports (:mod:`nbkit.command`), and no CLI
#: call or pipe stage pays for pandas and matplotlib unless it uses them.
_LAZY = {
    "App": "nbkit.runtime.app",
    "Clock": "nbkit.runtime.clock",
    "RealClock": "nbkit.runtime.clock",
    "VirtualClock": "nbkit.runtime.clock",
    "Delivery": "nbkit.runtime.delivery",
    "SettlementEvent": "nbkit.runtime.events",
    "FileBroker": "nbkit.runtime.file_broker",
    "HandlerOutcome": "nbkit.runtime.outcome",
    "PositionStore": "nbkit.runtime.position_store",
    "RedriveResult": "nbkit.runtime.redrive",
    "redrive": "nbkit.runtime.redrive",
    "redrive_lines": "nbkit.runtime.redrive",
    "Action": "nbkit.runtime.settle",
    "StdioBroker": "nbkit.runtime.stdio_broker",
    "DamagedRegion": "nbkit.transport.damage",
    "DamageWarning": "nbkit.transport.damage",
    "StreamReader": "nbkit.transport.file_reader",
    "StreamWriter": "nbkit.transport.file_writer",
    "Message": "nbkit.transport.messages",
    "ReadEnd": "nbkit.transport.messages",
    "FilePosition": "nbkit.transport.positions",
    "read_stream": "nbkit.tabular.frames",
    "read_arrow": "nbkit.tabular.frames",
    "read_pipe": "nbkit.tabular.frames",
    "concat_frames": "nbkit.tabular.frames",
    "events_frame": "nbkit.tabular.events",
    "lineage": "nbkit.tabular.lineage",
    "messages_table": "nbkit.tabular.lineage",
    "summarize": "nbkit.tabular.lineage",
    "overview": "nbkit.notebook.overview",
    "Session": "nbkit.notebook.session",
    "to_parquet": "nbkit.scale.parquet",
    "read_parquet": "nbkit.scale.parquet",
    "simulate": "nbkit.notebook.simulate",
    "policy_summary": "nbkit.notebook.simulate",
    "Workload": "nbkit.notebook.simulate",
    "RetryPolicy": "nbkit.notebook.simulate",
}


def __getattr__(name: str) -> Any:
    """The names of ``_LAZY``, imported on first use and then kept as module globals."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nbkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names plus the lazy ones, so tab completion offers ``read_stream`` and ``Session``."""
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """``%load_ext nbkit``: register the cell magics (see :mod:`nbkit.notebook.magics`)."""
    from nbkit.notebook.magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "AckError",
    "Action",
    "App",
    "ChecksumError",
    "Clock",
    "ConfigurationError",
    "DamageWarning",
    "DamagedRegion",
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
    "RedriveResult",
    "RetryDestinationError",
    "RetryPolicy",
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
    "Workload",
    "WriterLockedError",
    "__version__",
    "concat_frames",
    "events_frame",
    "lineage",
    "messages_table",
    "overview",
    "policy_summary",
    "read_arrow",
    "read_parquet",
    "read_pipe",
    "read_stream",
    "redrive",
    "redrive_lines",
    "simulate",
    "summarize",
    "to_parquet",
]
