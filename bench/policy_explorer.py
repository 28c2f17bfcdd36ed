"""Policy explorer: how long one change takes to show, and what a dragged slider costs.

One refresh is what every change of a ``PolicyExplorer`` control does: ``simulate`` (a real App on
a virtual clock, N messages on a file and on a pipe), ``policy_summary``, and the two PNGs
(dashboard and timeline), timed as a whole and by part. Workload: N messages over 60 s, 20 %
failures, 1 % poison; policy: 4 attempts, exponential backoff from 1 s, a dead-letter key.

The drag: an explorer in background mode (as in a Jupyter kernel) gets 20 new ``delay`` values 50 ms
apart, as a dragged slider sends them; reported are the runs it made (coalesced: never one per
value) and the time from the last value until the figures show it.

    python bench/policy_explorer.py                       # 1,000 messages, 5 timed runs
    python bench/policy_explorer.py --messages 200 --repeat 1
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's nbkit

import _common as c  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")

from nbkit import RetryPolicy, Workload, policy_summary, simulate  # noqa: E402
from nbkit.notebook import policy_explorer as pe  # noqa: E402

TARGET = 0.5  # seconds from a change to its figures, for 1,000 messages ("about half a second")
DRAG_VALUES = 20
DRAG_GAP = 0.05


def parts(workload: Workload, policy: RetryPolicy) -> dict[str, float]:
    """The seconds of each part of one refresh."""
    out = {}
    t = time.perf_counter()
    events = simulate(workload, policy)
    out["simulate (file + pipe)"] = time.perf_counter() - t
    t = time.perf_counter()
    policy_summary(events)
    out["policy_summary"] = time.perf_counter() - t
    t = time.perf_counter()
    pe._dashboard_png(events, 72)
    out["dashboard PNG"] = time.perf_counter() - t
    t = time.perf_counter()
    pe._timeline_png(events, pe.TIMELINE_MESSAGES, workload.messages, 72)
    out["timeline PNG"] = time.perf_counter() - t
    return out


def drag(workload: Workload, policy: RetryPolicy) -> tuple[int, float]:
    """(runs made for DRAG_VALUES changes, seconds from the last change until idle)."""
    explorer = pe.PolicyExplorer(workload, policy, background=True)
    try:
        first = explorer.runs
        slider = explorer.controls["delay"]
        for i in range(DRAG_VALUES):
            slider.value = 1.0 + i * 0.5
            time.sleep(DRAG_GAP)
        last = time.perf_counter()
        explorer.wait(timeout=120)
        latency = time.perf_counter() - last
        assert explorer.result.policy.delay == slider.value, "the last run did not use the final value"
        return explorer.runs - first, latency
    finally:
        explorer.close()


def main() -> int:
    args = c.parser(__doc__.splitlines()[0], messages=1000, repeat=5).parse_args()
    c.banner("policy explorer: one change -> simulation, summary and figures", args)
    workload = Workload(messages=args.messages, span=60.0, failure_rate=0.2, poison=0.01)
    policy = RetryPolicy(max_attempts=4, delay=1.0, backoff="exponential")
    whole = c.time_it(lambda: pe.explore(workload, policy), args.repeat)
    c.row("one refresh (explore)", whole, args.messages)
    by_part: dict[str, list[float]] = {}
    for _ in range(max(1, args.repeat)):  # interleaved with nothing else: each part once per round
        for name, seconds in parts(workload, policy).items():
            by_part.setdefault(name, []).append(seconds)
    for name, values in by_part.items():
        c.row(f"  {name}", statistics.median(values), args.messages)
    runs, latency = drag(workload, policy)
    print(
        f"   drag: {DRAG_VALUES} values {DRAG_GAP * 1000:.0f} ms apart -> {runs} runs; "
        f"last value shown {c.fmt_s(latency)} after it was set"
    )
    results = [
        c.verdict(
            "a change shows within about half a second",
            whole.wall <= TARGET,
            f"median {c.fmt_s(whole.wall)} for {args.messages:,} messages (target <= {TARGET:g} s)",
        ),
        c.verdict(
            "a drag does not stack runs",
            runs < DRAG_VALUES / 2,
            f"{runs} runs for {DRAG_VALUES} values (one run in flight, one queued)",
        ),
    ]
    return c.finish(results)


if __name__ == "__main__":
    sys.exit(main())
