"""A Dask worker's heap, set up once per process so that reading partitions does not fault in fresh memory.

Why: ``distributed``'s nanny starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536`` (its
``distributed.nanny.pre-spawn-environ`` setting), so that freed memory goes back to the OS at once. With
glibc that has two costs for a partition read, which allocates the same large blocks over and over (the
reader's 4 MiB ``pread`` buffers, one per chunk of the file; the column arrays; pandas' temporaries):

- setting any of the trim threshold, top pad, mmap threshold or mmap max switches off glibc's *dynamic* mmap
  threshold (mallopt(3)): every block above 128 KiB is then a mapping of its own, whose pages fault in afresh;
- a 64 KiB trim threshold gives back the top of the heap as soon as a block there is freed, so the next
  read buffer, allocated right after, faults its pages in again.

Measured with ``bench/dask_read.py`` (1.06M messages, 256 MiB, ``payload="auto"``, glibc 2.36, load average
3.4-5.3, the two workers summed): 288k minor page faults and 1.28 CPU s as they came; 213-219k faults and
1.07-1.15 s in the tasks with the mmap threshold raised; 188-207k and 1.03-1.07 s with the trim threshold too
(the single process: 172-186k faults, 0.99 s).

What :func:`prepare_worker_heap` does, once per process, when the environment set ``MALLOC_TRIM_THRESHOLD_``:

- the mmap threshold becomes :data:`MMAP_THRESHOLD` (32 MiB: the ceiling glibc's dynamic threshold reaches on
  its own on 64-bit), unless ``MALLOC_MMAP_THRESHOLD_`` chose one;
- the trim threshold becomes :data:`TRIM_THRESHOLD` (two read buffers, 8 MiB) when it was lower: at most that
  much free memory stays at the top of the heap, the rest still goes back to the OS.

The price: freed blocks stay in the worker for the next partition instead of going back at once
(``distributed`` counts them as unmanaged memory). Anywhere else (not Linux, not glibc, no such environment,
``NBKIT_KEEP_MALLOC=1``) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

from nbkit.transport.file_reader import CHUNK

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "prepare_worker_heap"]

#: glibc's ceiling for its dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): 32 MiB.
MMAP_THRESHOLD = 32 << 20
#: Free memory kept at the top of a worker's heap: two of the reader's ``pread`` buffers.
TRIM_THRESHOLD = 2 * CHUNK
_M_TRIM_THRESHOLD = -1  # mallopt(3) parameter numbers in <malloc.h>
_M_MMAP_THRESHOLD = -3
_done: bool | None = None  # None: not tried yet in this process; else whether the heap was set up


def prepare_worker_heap() -> bool:
    """Set up this process's heap once when its environment froze glibc's thresholds (a Dask worker).

    Cheap after the first call (a module-level flag), so a partition function can call it every time.

    Returns
    -------
    bool
        True when this process's thresholds were changed (by this call or an earlier one), False when
        nothing was changed (see the module docstring for when).

    Examples
    --------
    >>> prepare_worker_heap() in (True, False)
    True
    """
    global _done
    if _done is None:
        _done = _set_thresholds()
    return _done


def _set_thresholds() -> bool:
    """The mallopt(3) calls of the module docstring, where the environment asks for them."""
    env = os.environ
    trim = env.get("MALLOC_TRIM_THRESHOLD_")
    if not sys.platform.startswith("linux") or trim is None or env.get("NBKIT_KEEP_MALLOC"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    changed = False
    if "MALLOC_MMAP_THRESHOLD_" not in env:
        changed |= bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    if not trim.isdigit() or int(trim) < TRIM_THRESHOLD:
        changed |= bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return changed
