"""A Dask worker's heap, set up once per process so that reading partitions does not fault in fresh memory.

Why: ``distributed``'s nanny starts every worker process with ``MALLOC_TRIM_THRESHOLD_=65536`` (its
``distributed.nanny.pre-spawn-environ`` setting), so that freed memory goes back to the OS. With glibc,
setting any of the trim threshold, top pad, mmap threshold or mmap max also switches off glibc's *dynamic*
mmap threshold (mallopt(3)): every allocation above 128 KiB is then its own ``mmap`` for the life of the
process, and each of its pages faults in again when touched. A partition read allocates many such blocks
over and over: the reader's 4 MiB ``pread`` buffers (one per chunk of the file), the column arrays and
pandas' temporaries. Measured with ``bench/dask_read.py`` (1.06M messages, 256 MiB, ``payload="auto"``,
glibc 2.36, medians of 5): the single process 172-186k minor page faults and 0.41 CPU s in the kernel; the two
workers together 288k faults and 0.67 s as they came, 218k and 0.44 s with this setup (1.28 -> 1.13 CPU s in
all, for the single process's 0.99 s).

What :func:`prepare_worker_heap` does, once per process: when the environment froze the thresholds
(``MALLOC_TRIM_THRESHOLD_`` set) and did not choose an mmap threshold itself (``MALLOC_MMAP_THRESHOLD_``
unset), it sets glibc's mmap threshold to 32 MiB, the ceiling the dynamic threshold would have reached on
its own (``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit). Blocks up to that size are then reused from the heap;
the trim threshold stays as ``distributed`` set it, so freed memory at the top of the heap still goes back to
the OS. The price: freed blocks below the top of the heap stay in the worker for the next partition instead of
going back at once (``distributed`` counts them as unmanaged memory). Anywhere else (not glibc, not Linux, no such
environment, ``NBKIT_KEEP_MALLOC=1``) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["MMAP_THRESHOLD", "prepare_worker_heap"]

#: glibc's ceiling for its dynamic mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): 32 MiB.
MMAP_THRESHOLD = 32 << 20
_M_MMAP_THRESHOLD = -3  # mallopt(3) parameter number in <malloc.h>
_done: bool | None = None  # None: not tried yet in this process; else whether the threshold was set


def prepare_worker_heap() -> bool:
    """Raise glibc's mmap threshold once per process when the environment froze it (a Dask worker).

    Cheap after the first call (a module-level flag), so a partition function can call it every time.

    Returns
    -------
    bool
        True when this process's mmap threshold is now :data:`MMAP_THRESHOLD` (set by this call or an
        earlier one), False when nothing was changed (see the module docstring for when).

    Examples
    --------
    >>> prepare_worker_heap() in (True, False)
    True
    """
    global _done
    if _done is None:
        _done = _set_mmap_threshold()
    return _done


def _set_mmap_threshold() -> bool:
    """mallopt(M_MMAP_THRESHOLD, 32 MiB) when the environment asks for it (see the module docstring)."""
    env = os.environ
    if (
        not sys.platform.startswith("linux")
        or "MALLOC_TRIM_THRESHOLD_" not in env
        or "MALLOC_MMAP_THRESHOLD_" in env
        or env.get("NBKIT_KEEP_MALLOC")
    ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
