"""What every benchmark shares: arguments, test data, timing (warm-up + median), machine line, verdict.

Not a benchmark itself (the leading underscore). Standard library + nbkit only.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

KEYS = ("orders", "payments", "shipments", "refunds")
#: First message timestamp: 2024-01-01T00:00:00Z, one message per millisecond after it.
T0_MS = 1_704_067_200_000


def parser(description: str, *, messages: int = 1_000_000, repeat: int = 3) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--messages", type=int, default=messages, metavar="N", help=f"how many messages (default {messages:,})"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=repeat,
        metavar="R",
        help=f"timed runs per side after one warm-up run; the median is reported (default {repeat})",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    return p


def machine() -> str:
    """One line: CPU model, cores, Python and the key libraries' versions."""
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import pandas

    return (
        f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"pandas {pandas.__version__}, {platform.system()} {platform.release()}"
    )


def banner(title: str, args: argparse.Namespace) -> None:
    print(f"== {title}")
    print(f"   machine: {machine()}")
    print(f"   messages: {args.messages:,}, repeat: {args.repeat} (after 1 warm-up); medians of wall-clock time")
    print("   (per message) and of CPU time (user + system, this process and its children)")
    print(f"   load average: {load()} (other processes on the machine skew the figures)")


@contextmanager
def workdir(args: argparse.Namespace, name: str) -> Iterator[str]:
    path = tempfile.mkdtemp(prefix=f"nbkit-bench-{name}-")
    try:
        yield path
    finally:
        if args.keep:
            print(f"   kept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


#: The payload shapes a benchmark can write (``--shape``): the default order record of about 200 bytes, a
#: string- and boolean-heavy record of about 50 bytes, and one of about 1 KB (long notes, several flags).
SHAPES = ("orders", "small", "large")

_NOTE = "deliver between 9 and 17, ring twice; leave at the door if nobody answers"
_LONG = (
    "The customer asked for the parcel to be left with the neighbour at number 12 if nobody is at home; "
    "the building has a code at the gate (ask the concierge), the lift is out of order on Mondays, and the "
    "dog is friendly. Fragile: glassware inside, keep upright. Invoice to the company address, not this one. "
)


def payload(i: int, shape: str = "orders") -> dict:
    """A JSON object deterministic in ``i``: ``"orders"`` about 200 bytes (ints, floats, strings, a bool),
    ``"small"`` about 50 bytes of strings and booleans, ``"large"`` about 1 KB of strings and booleans."""
    if shape == "small":
        return {"customer": f"c-{(i * 7919) % 100_000:05d}", "express": i % 3 == 0, "note": _NOTE[: 8 + i % 9]}
    if shape == "large":
        return {
            "customer": f"customer-{(i * 7919) % 100_000:05d}",
            "express": i % 3 == 0,
            "gift": i % 7 == 0,
            "signed": i % 2 == 0,
            "note": _NOTE[: 40 + i % 30],
            "address": f"{1 + i % 200} Long Street, flat {i % 40}, {('Lyon', 'Leeds', 'Porto', 'Graz')[i % 4]}",
            "instructions": (_LONG * 3)[: 700 + i % 150],
            "status": ("new", "paid", "packed", "shipped")[i % 4],
        }
    if shape != "orders":
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    return {
        "order_id": i,
        "customer": f"customer-{(i * 7919) % 100_000:05d}",
        "sku": f"SKU-{(i * 104_729) % 1_000_000:06d}",
        "quantity": 1 + i % 9,
        "unit_price": round(1 + ((i * 37) % 99_900) / 100, 2),
        "currency": ("EUR", "USD", "GBP", "JPY")[i % 4],
        "express": i % 3 == 0,
        "warehouse": f"wh-{i % 17:02d}",
        "note": _NOTE[: 40 + i % 30],
    }


def message_fields(i: int, shape: str = "orders") -> tuple[str, int, int, bytes]:
    """(key, seq, timestamp_ms, payload bytes) of message ``i`` (0-based): seqs count per key from 1."""
    key = KEYS[i % len(KEYS)]
    seq = i // len(KEYS) + 1
    return key, seq, T0_MS + i, json.dumps(payload(i, shape), separators=(",", ":")).encode()


def write_stream(path: str, n: int, shape: str = "orders") -> int:
    """Write ``n`` messages of ``shape`` over 4 keys with nbkit's StreamWriter (default beacon interval);
    returns the file's size in bytes."""
    from nbkit.transport.file_writer import StreamWriter

    with StreamWriter(path, file_name="bench.ss", created_at_ms=T0_MS, flush_every=4096) as w:
        for i in range(n):
            key, seq, ts, data = message_fields(i, shape)
            w.write(key, data, seq=seq, timestamp_ms=ts)
    return os.path.getsize(path)


class Timing(NamedTuple):
    """Median wall-clock and CPU seconds (this process and its children) of the timed runs."""

    wall: float
    cpu: float
    walls: list[float]
    result: object


def _cpu() -> float:
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


def time_it(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> Timing:
    """One warm-up call, then ``repeat`` timed calls (``setup`` runs untimed before each)."""
    if setup is not None:
        setup()
    result = fn()
    del result
    walls, cpus = [], []
    result = None
    for _ in range(max(1, repeat)):
        result = None
        if setup is not None:
            setup()
        gc.collect()
        c0 = _cpu()
        t = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(_cpu() - c0)
    return Timing(statistics.median(walls), statistics.median(cpus), walls, result)


def ratio(a: Timing, b: Timing) -> str:
    """``a``'s time over ``b``'s: wall clock (what the targets use) and CPU time."""
    return f"{a.wall / b.wall:.2f}x wall clock ({a.cpu / b.cpu:.2f}x CPU time)"


def remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def fmt_s(seconds: float) -> str:
    if seconds < 0.1:
        return f"{seconds * 1000:,.1f} ms"
    return f"{seconds * 1000:,.0f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def per_msg(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:.2f} µs/msg"


def row(label: str, t: Timing | float, n: int, extra: str = "") -> None:
    """One figure: wall clock, per message, and CPU time when ``t`` is a Timing (seconds alone also do)."""
    if isinstance(t, Timing):
        wall, cpu = t.wall, f"   cpu {fmt_s(t.cpu):>10}"
    else:
        wall, cpu = t, ""
    print(f"   {label:<50} {fmt_s(wall):>10}  {per_msg(wall, n):>14}{cpu}  {extra}".rstrip())


def verdict(label: str, ok: bool, detail: str) -> bool:
    print(f"   {'PASS' if ok else 'FAIL'}  {label}: {detail}")
    return ok


def within(label: str, t: Timing, base: Timing, target: float) -> bool:
    """The verdict that ``t`` takes at most ``target`` times ``base`` (wall clock), with their :func:`ratio`."""
    return verdict(label, t.wall / base.wall <= target, ratio(t, base))


def bar_chart(path: str, title: str, seconds: dict[str, float], group: Callable[[str], str], note: str) -> None:
    """Write a PNG of one horizontal bar per entry of ``seconds`` (fastest at the top), labelled with its time
    and coloured by ``group(name)`` (one legend entry per group, in the order groups first appear in
    ``seconds``). ``note`` goes under the axis: the command, the machine and the load the figures were
    measured at, so the picture never travels without them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    palette = ["#1f4e79", "#6f9bc6", "#e0a458", "#9a9a9a", "#7a4e8f"]
    groups = list(dict.fromkeys(group(name) for name in seconds))
    color = {g: palette[i % len(palette)] for i, g in enumerate(groups)}
    items = sorted(seconds.items(), key=lambda kv: kv[1], reverse=True)  # barh draws the first at the bottom
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(items) + 2.0), dpi=110)
    ax.barh([name for name, _ in items], [v for _, v in items], color=[color[group(name)] for name, _ in items])
    for y, (_, value) in enumerate(items):
        ax.text(value, y, f" {fmt_s(value)}", va="center", fontsize=9)
    ax.set_xlabel("seconds, wall clock (median); shorter is faster")
    ax.set_xlim(0, max(seconds.values()) * 1.15)
    ax.set_title(title, fontsize=11, loc="left")
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(axis="y", labelsize=9)
    ax.legend(handles=[Patch(color=color[g], label=g) for g in groups], loc="upper right", fontsize=9, frameon=False)
    fig.text(0.01, 0.01, note, fontsize=7.5, color="#444444", wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    print(f"   wrote {path}")


def load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def finish(results: list[bool]) -> int:
    """Exit status 0 either way (a benchmark reports; it is not a test), but say it on the last line."""
    print(f"   load average at the end: {load()}")
    passed = sum(results)
    print(f"== {passed}/{len(results)} targets met")
    sys.stdout.flush()
    return 0
