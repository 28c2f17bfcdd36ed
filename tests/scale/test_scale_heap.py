"""nbkit.scale.heap: a worker process's glibc mmap threshold, raised once when its environment froze it.

Each case runs in a fresh interpreter (the setting is once per process and would leak into this one).
glibc reports no thresholds, so the effects are checked where they show: whether a 4 MiB block (the
reader's ``pread`` size) comes from the heap or is a mapping of its own (glibc's IS_MMAPPED bit, bit 1 of the
chunk's size word just before the block), and whether about 6 MB freed at the top of the heap stay there
(``mallinfo2().keepcost``) or go back to the OS.
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
small = [libc.malloc(100_000) for _ in range(60)]  # below any mmap threshold: always from the heap
for b in reversed(small):
    libc.free(b)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
kept = libc.mallinfo2().keepcost >= 4_000_000  # some of the 6 MB may reuse free memory below the top
print(first, again, mapped, kept)
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
    assert run_probe(MALLOC_TRIM_THRESHOLD_="65536") == "True True False True"


def test_a_frozen_threshold_without_the_setup_maps_every_block_afresh():
    # the behaviour prepare_worker_heap repairs, shown with the setup switched off
    assert run_probe(MALLOC_TRIM_THRESHOLD_="65536", NBKIT_KEEP_MALLOC="1") == "False False True False"


def test_a_threshold_the_environment_chose_is_kept():
    # its own mmap threshold stays (4 MiB blocks mapped); the trim threshold is still raised
    assert run_probe(MALLOC_TRIM_THRESHOLD_="65536", MALLOC_MMAP_THRESHOLD_="131072") == "True True True True"
    # a trim threshold at or above two read buffers is left alone, and then nothing changes
    both = {"MALLOC_TRIM_THRESHOLD_": str(64 << 20), "MALLOC_MMAP_THRESHOLD_": "131072"}
    assert run_probe(**both) == "False False True True"


def test_a_plain_process_is_left_alone():
    # glibc's own dynamic thresholds: the first 4 MiB block is mapped (128 KiB to start with); freeing it raises
    # the mmap threshold to 4 MiB and the trim threshold to 8 MiB, so the 6 MB freed after stay: what
    # prepare_worker_heap gives a worker whose environment switched that adaptation off
    assert run_probe() == "False False True True"
