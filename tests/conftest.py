"""Shared fixtures: the upstream sample file, and a tiny independent reference layout of ``.ss`` files.

``layout_ss`` is written from the spec (§3-§6) without nbkit's writer, so comparing it with
:class:`StreamWriter` output checks the writer, and it can lay out intervals the writer refuses
(128, 300, ...) to exercise the reader.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # nbkit is not pip-installed (pyproject needs a README to build)
    sys.path.insert(0, str(ROOT))

# A checkout without the compiled core (no `build_ext --inplace`, no compiler) runs the tests on the
# pure-Python twin, as if asked to: without NBKIT_PURE_PYTHON every command would print its one-line
# notice that it runs on the twin, which no test is about (and which broke exact comparisons of stderr).
# Set before nbkit.wire.core is imported (it reads the variable once); child processes inherit it.
if "NBKIT_PURE_PYTHON" not in os.environ:
    import importlib.util

    if importlib.util.find_spec("nbkit.wire._speedups") is None:
        os.environ["NBKIT_PURE_PYTHON"] = "1"

# A test run started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and
# so would every stage a test starts: the tests that stop a stage with Ctrl-C would then wait for ever. A
# Python handler here is reset to the default in the children, as a terminal would start them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from ss_layout import layout_ss  # noqa: E402

from nbkit.transport.file_writer import StreamWriter  # noqa: E402
from nbkit.wire.keys import INTERNAL_KEY  # noqa: E402

SAMPLE_SHA256 = "ef3d45be9e85df73efaaa795e85b751f324d5e569382098ac2f7094d5e7d7df6"

#: (stream_key, shard_id, seq, timestamp_ms, payload)
Msg = tuple[str, int, int, int, bytes]


def _sample_path() -> Path:
    shared = ROOT.parent / "shared" / "testdata" / "ss" / "sample-1.ss"
    return shared if shared.is_file() else ROOT / "tests" / "data" / "sample-1.ss"


@pytest.fixture(scope="session")
def sample_path() -> Path:
    """The upstream ``sample-1.ss`` (spec §15): ../shared/testdata, else the copy in tests/data."""
    return _sample_path()


@pytest.fixture(scope="session")
def sample_bytes(sample_path: Path) -> bytes:
    return sample_path.read_bytes()


@pytest.fixture(scope="session")
def layout() -> Callable[..., bytes]:
    """The reference layout function (see :func:`layout_ss`)."""
    return layout_ss


def write_with_nbkit(
    path: str | os.PathLike,
    messages: Iterable[Msg],
    *,
    interval: int = 1024,
    file_name: str = "t.ss",
    created_at_ms: int = 1_700_000_000_000,
    eos: bool = False,
    **options,
) -> None:
    """Write ``messages`` with nbkit's StreamWriter (explicit seq/shard/ts), optionally ending with EOS."""
    with StreamWriter(path, beacon_interval=interval, file_name=file_name, created_at_ms=created_at_ms, **options) as w:
        for key, shard, seq, ts, payload in messages:
            w.write(key, payload, seq=seq, shard_id=shard, timestamp_ms=ts)
        if eos:
            w.write(INTERNAL_KEY, b"EOS", seq=0, shard_id=0, timestamp_ms=created_at_ms)


@pytest.fixture(scope="session")
def write_ss() -> Callable[..., None]:
    """nbkit's writer as a function: ``write_ss(path, messages, interval=1024, eos=False)``."""
    return write_with_nbkit


def multi_stream_messages(n: int = 300, *, seed: int = 7) -> list[Msg]:
    """A deterministic multi-stream workload: keys a/b/c (and shard 1 of b), payloads 0..400 bytes,
    per-stream increasing seq from 1 and non-decreasing timestamps with ties (two messages per ms)."""
    import random

    rnd = random.Random(seed)
    seqs: dict[tuple[str, int], int] = {}
    out = []
    for i in range(n):
        key, shard = rnd.choice([("a", 0), ("b", 0), ("b", 1), ("c.long-key_name", 0)])
        seq = seqs[(key, shard)] = seqs.get((key, shard), 0) + 1
        size = rnd.choice([0, 3, 20, 90, 400])
        payload = bytes(rnd.getrandbits(8) for _ in range(size))
        out.append((key, shard, seq, 1_700_000_000_000 + i // 2, payload))
    return out


@pytest.fixture(scope="session")
def make_messages() -> Callable[..., list[Msg]]:
    """The deterministic multi-stream workload generator (see :func:`multi_stream_messages`)."""
    return multi_stream_messages


@pytest.fixture(scope="session")
def multi_messages() -> list[Msg]:
    return multi_stream_messages()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The project root (for ``PYTHONPATH`` of subprocesses: nbkit is not pip-installed)."""
    return ROOT


@pytest.fixture(scope="session")
def multi_file(tmp_path_factory, multi_messages) -> Path:
    """A 300-message, 4-stream file with I = 1024 (many beacons, frames cut anywhere), no EOS."""
    path = tmp_path_factory.mktemp("multi") / "multi.ss"
    write_with_nbkit(path, multi_messages, interval=1024)
    return path
