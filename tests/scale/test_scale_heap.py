"""nbkit.scale.heap: a worker process's glibc mmap threshold, raised once when its environment froze it.

Each case runs in a fresh interpreter (the setting is once per process and would leak into this one).
glibc reports no threshold, so the effect is checked where it shows: whether a 4 MiB block (the reader's
``pread`` size) comes from the heap or is a mapping of its own (glibc's IS_MMAPPED bit, bit 1 of the chunk's
size word just before the block).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")

PROBE = """
import ctypes
from nbkit.scale.heap import prepare_worker_heap
first = prepare_worker_heap()
again = prepare_worker_heap()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
block = libc.malloc(4 << 20)
mapped = bool(ctypes.c_size_t.from_address(block - ctypes.sizeof(ctypes.c_size_t)).value & 2)
libc.free(block)
print(first, again, mapped)
"""


def run_probe(**env: str) -> str:
    """The probe's output in a fresh interpreter whose environment is this one's without MALLOC_*/NBKIT_KEEP_MALLOC,
    plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "NBKIT_KEEP_MALLOC"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_a_worker_environment_gets_heap_reuse_back():
    # distributed's nanny sets this: glibc's dynamic mmap threshold is off, so 4 MiB blocks would be mmap'd
    assert run_probe(MALLOC_TRIM_THRESHOLD_="65536") == "True True False"


def test_a_frozen_threshold_without_the_setup_maps_every_block_afresh():
    # the behaviour prepare_worker_heap repairs, shown with the setup switched off
    assert run_probe(MALLOC_TRIM_THRESHOLD_="65536", NBKIT_KEEP_MALLOC="1") == "False False True"


@pytest.mark.parametrize(
    "env",
    [{}, {"MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_MMAP_THRESHOLD_": "131072"}],
    ids=["plain process", "threshold chosen by the environment"],
)
def test_nothing_changes_where_the_environment_did_not_freeze_it_or_chose_itself(env):
    first, again, mapped = run_probe(**env).split()
    assert (first, again) == ("False", "False")
    assert mapped == "True"  # 4 MiB is above glibc's starting threshold (128 KiB) in both
