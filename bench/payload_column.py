"""The payload column's floor: what fresh memory costs here, and whether a zero-copy column is usable yet.

``read_stream(payload="bytes")`` copies every payload into one Arrow ``large_binary`` buffer: the file
holds a frame header between payloads, and ``large_binary`` needs them back to back. That copy lands in
fresh memory, and on a virtual machine the first touch of each 4 KiB page is costly. A column that pointed
into the read buffer instead (Arrow's ``binary_view``: 16 bytes per value, no copy) would not pay it. This
script prints the two figures that decide between them:

1. the cost of fresh memory: a copy of the size of the payloads into new pages, beside the same copy into
   pages already touched, and what one page costs (the kernel's page faults, counted);
2. which pandas operations a ``binary_view[pyarrow]`` column supports with the pandas and pyarrow installed
   (``==``, ``take``, filtering, sorting, ``value_counts``, ``astype(object)``, ``str.len``, ...). A frame
   whose payload column cannot be taken, filtered or sorted is not one nbkit can return.

Run: ``python bench/payload_column.py [--mib 32]``.
"""

from __future__ import annotations

import argparse
import mmap
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

import _common as c
import numpy as np
import pandas as pd
import pyarrow as pa

PAGE = mmap.PAGESIZE


def faults() -> int:
    """Minor page faults of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def fresh_copy(source: np.ndarray) -> tuple[float, int]:
    """Copy ``source`` into new anonymous pages (a new mapping each time): seconds and page faults."""
    with mmap.mmap(-1, len(source)) as area:
        target = np.frombuffer(area, dtype=np.uint8)
        before, start = faults(), time.perf_counter()
        target[:] = source
        took = time.perf_counter() - start
        del target
        return took, faults() - before


def reused_copy(source: np.ndarray, target: np.ndarray) -> tuple[float, int]:
    """The same copy into pages touched before: seconds and page faults."""
    before, start = faults(), time.perf_counter()
    target[:] = source
    return time.perf_counter() - start, faults() - before


def probe_binary_view() -> list[tuple[str, str]]:
    """Each pandas operation on a ``binary_view[pyarrow]`` Series: ("works" or why not, name)."""
    arr = pa.array([b"a payload longer than twelve bytes", b"hi", None, b"rs1x"], type=pa.binary_view())
    s = pd.Series(pd.arrays.ArrowExtensionArray(arr))
    frame = pd.DataFrame({"payload": s, "n": range(4)})
    checks: list[tuple[str, Callable[[], Any]]] = [
        ("s.iloc[0]", lambda: s.iloc[0]),
        ("s.tolist()", lambda: s.tolist()),
        ("s.isna()", lambda: s.isna()),
        ("s == b'hi'", lambda: s == b"hi"),
        ("s.take([1, 0]) (iloc with a list, head of a sort)", lambda: s.take([1, 0])),
        ("frame[frame.n > 1] (filtering rows)", lambda: frame[frame.n > 1]),
        ("s.sort_values()", lambda: s.sort_values()),
        ("s.value_counts()", lambda: s.value_counts()),
        ("s.astype(object)", lambda: s.astype(object)),
        ("s.str.len()", lambda: s.str.len()),
        ("pd.concat([s, s])", lambda: pd.concat([s, s])),
    ]
    out = []
    for name, check in checks:
        try:
            check()
            out.append(("works", name))
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            out.append((f"{type(exc).__name__}: {str(exc).splitlines()[0][:70]}", name))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=32, help="MiB copied (default 32: the small shape's payloads)")
    p.add_argument("--repeat", type=int, default=7, help="rounds (default 7); medians are printed")
    args = p.parse_args(argv)
    print("== payload column: fresh memory, and zero-copy payloads in pandas")
    print(f"   machine: {c.machine()}")
    print(f"   pandas {pd.__version__}, pyarrow {pa.__version__}, numpy {np.__version__}")
    print(f"   load average: {c.load()} (other processes on the machine skew the figures)")
    size = args.mib << 20
    source = np.frombuffer(np.random.default_rng(0).bytes(size), dtype=np.uint8)
    target = np.empty(size, dtype=np.uint8)
    target[:] = 0  # touched: its pages are there
    fresh: list[float] = []
    reused: list[float] = []
    counted: list[int] = []
    for _ in range(args.repeat):
        took, faulted = fresh_copy(source)
        fresh.append(took)
        counted.append(faulted)
        reused.append(reused_copy(source, target)[0])
    f, r, pages = statistics.median(fresh), statistics.median(reused), statistics.median(counted)
    print(f"   copying {args.mib} MiB into fresh pages      {f * 1e3:8.2f} ms ({pages:,.0f} page faults)")
    print(f"   the same copy into pages touched before  {r * 1e3:8.2f} ms")
    per_page = (f - r) / max(1.0, size / PAGE)
    print(f"   fresh memory costs about {per_page * 1e6:.2f} µs per {PAGE // 1024} KiB page here")
    print(f"   binary_view[pyarrow] in pandas {pd.__version__} (a payload column that would not copy):")
    results = probe_binary_view()
    for verdict, name in results:
        print(f"     {name:52s} {verdict}")
    broken = [name for verdict, name in results if verdict != "works"]
    verdict = "FAIL" if broken else "PASS"
    print(
        f"   {verdict}  a zero-copy payload column (binary_view) supports what a frame needs in pandas "
        f"{pd.__version__}: {len(results) - len(broken)} of {len(results)} operations work"
    )
    print(f"== {0 if broken else 1}/1 targets met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
