"""The long fuzz run: damaged stream files, random stdio lines and envelopes, ``nbkit write`` input,
torn appends, and (on request) real SIGKILLs of writer processes and position saves.

    python bench/fuzz.py --seconds 600                      # hypothesis, high example counts
    python bench/fuzz.py --seconds 600 --engine random      # a seeded random loop: more inputs/s
    python bench/fuzz.py --seconds 0 --crash-runs 200 --position-kills 1000
    python bench/fuzz.py --replay files:1000000042          # re-run one failing random-engine input

The oracles are the reliability suite's (``tests/reliability/fuzzlib.py``, ``crashlib.py``): only
``NbkitError`` subclasses or a reported ``ReadEnd`` may come out, every bounded read returns, every
message before the damage is returned unchanged, the CLI returns an int and prints one-line errors,
a bad stdio line is named, every retry copy is published or reported abandoned, a writer killed at
any moment leaves a file that reads up to its last complete frame and appends cleanly, and a killed
position save leaves the old or the new value.

Prints inputs (cases generated), runs (oracle executions) and failures per target; ``--json PATH``
also writes them as JSON. The exit status is 1 when anything failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from reliability import crashlib, fuzzlib  # noqa: E402

TARGETS = ("files", "lines", "write", "append")


class Target:
    """One kind of input: how to make and check a case from a Random, and how many oracles it runs."""

    def __init__(self, name: str, run: Callable[[random.Random], dict | object], runs_per_input: int) -> None:
        self.name = name
        self.run = run
        self.runs_per_input = runs_per_input
        self.inputs = 0
        self.runs = 0
        self.failures: dict[str, dict] = {}
        self.seconds = 0.0

    def check(self, rnd: random.Random, seed: int | None) -> bool:
        """Run one case; record a failure (first occurrence of each kind) and return False on one."""
        self.inputs += 1
        started = time.perf_counter()
        try:
            result = self.run(rnd)
        except BaseException as exc:  # noqa: BLE001 - any escape is a finding
            if isinstance(exc, KeyboardInterrupt):
                raise
            key = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
            entry = self.failures.setdefault(key, {"count": 0, "seed": seed, "traceback": traceback.format_exc()})
            entry["count"] += 1
            return False
        finally:
            self.seconds += time.perf_counter() - started
        self.runs += len(result) if isinstance(result, dict) else self.runs_per_input
        return True


def make_targets(corpus: list[fuzzlib.Base], scratch: Path) -> dict[str, Target]:
    case = scratch / "case.ss"
    written = scratch / "written.ss"
    cut = scratch / "cut.ss"
    return {
        "files": Target("files", lambda rnd: fuzzlib.file_case(rnd, corpus, case), len(fuzzlib.FILE_ORACLES)),
        "lines": Target("lines", fuzzlib.lines_case, len(fuzzlib.LINE_ORACLES)),
        "write": Target("write", lambda rnd: fuzzlib.check_cli_write(rnd, corpus, written), 1),
        "append": Target("append", lambda rnd: fuzzlib.check_cut_and_append(rnd, corpus, cut), 1),
    }


def run_random(targets: dict[str, Target], names: list[str], seconds: float, seed: int) -> None:
    """Round robin over the targets; input i of a run with seed S uses Random(S * 10**9 + i)."""
    deadline = time.monotonic() + seconds
    for i in range(10**9):
        if time.monotonic() >= deadline:
            return
        name = names[i % len(names)]
        case_seed = seed * 10**9 + i
        targets[name].check(random.Random(case_seed), case_seed)


def _property(target: Target, deadline: float) -> Callable[[random.Random], None]:
    def prop(rnd: random.Random) -> None:
        if time.monotonic() >= deadline + 60:  # shrinking a failure may run past the budget a bit
            return
        result = target.run(rnd)
        target.inputs += 1  # examples hypothesis abandons (its data ran out mid-case) are not counted
        target.runs += len(result) if isinstance(result, dict) else target.runs_per_input

    return prop


def run_hypothesis(targets: dict[str, Target], names: list[str], seconds: float, seed: int, chunk: int) -> None:
    """Hypothesis drives ``st.randoms()`` for each target in rounds of ``chunk`` examples until time is
    up; a failure is shrunk by hypothesis and recorded with its falsifying example."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    deadline = time.monotonic() + seconds
    for round_no in range(10**9):
        for name in names:
            if time.monotonic() >= deadline:
                return
            target = targets[name]
            prop = _property(target, deadline)
            prop = hypothesis_seed(seed * 100_003 + round_no)(
                settings(
                    max_examples=chunk,
                    deadline=None,
                    database=None,
                    derandomize=False,
                    suppress_health_check=list(HealthCheck),
                )(given(rnd=st.randoms(use_true_random=False))(prop))
            )
            started = time.perf_counter()
            try:
                prop()
            except BaseException as exc:  # noqa: BLE001 - the shrunk failure
                if isinstance(exc, KeyboardInterrupt):
                    raise
                key = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
                entry = target.failures.setdefault(
                    key, {"count": 0, "seed": f"hypothesis round {round_no}", "traceback": traceback.format_exc()}
                )
                entry["count"] += 1
            finally:
                target.seconds += time.perf_counter() - started


def crash_runs(scratch: Path, runs: int, seed: int, flush_every: int, per_file: int = 25) -> crashlib.CrashFigures:
    """``runs`` SIGKILLs in chains of ``per_file`` on fresh files (a resume scans its whole file, so one
    ever-growing file would make each run slower than the last); the figures are summed."""
    total = crashlib.CrashFigures(flush_every=flush_every)
    for segment in range((runs + per_file - 1) // per_file):
        path = scratch / f"crash-{segment}.ss"
        fig = crashlib.crash_chain(
            path, runs=min(per_file, runs - segment * per_file), seed=seed * 1000 + segment, flush_every=flush_every
        )
        for name in (
            "runs",
            "kills",
            "kills_before_ready",
            "torn_tails",
            "torn_bytes",
            "returned_writes",
            "lost_returned_writes",
            "messages_checked",
            "file_bytes",
        ):
            setattr(total, name, getattr(total, name) + getattr(fig, name))
        total.max_lost_in_one_run = max(total.max_lost_in_one_run, fig.max_lost_in_one_run)
        total.seconds = round(total.seconds + fig.seconds, 2)
        path.unlink()
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seconds", type=float, default=60, help="time for the fuzz loop (default 60)")
    p.add_argument(
        "--engine",
        choices=("hypothesis", "random"),
        default="hypothesis",
        help="hypothesis (st.randoms, shrinks failures; default) or random (seeded, faster)",
    )
    p.add_argument("--seed", type=int, default=1, help="base seed (default 1)")
    p.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated subset of {','.join(TARGETS)}")
    p.add_argument("--chunk", type=int, default=500, help="hypothesis examples per round and target (default 500)")
    p.add_argument("--crash-runs", type=int, default=0, metavar="N", help="also SIGKILL a writer process N times")
    p.add_argument("--crash-flush-every", type=int, default=1, metavar="F", help="the killed writer's flush_every")
    p.add_argument(
        "--position-kills", type=int, default=0, metavar="N", help="also SIGKILL a process saving positions N times"
    )
    p.add_argument("--replay", metavar="TARGET:SEED", help="re-run one random-engine input and show its traceback")
    p.add_argument("--json", metavar="PATH", help="write the figures as JSON too")
    args = p.parse_args(argv)
    names = [n for n in args.targets.split(",") if n]
    unknown = set(names) - set(TARGETS)
    if unknown:
        p.error(f"unknown targets {sorted(unknown)}; choose from {TARGETS}")

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill still removes the scratch folder
    logging.disable(logging.CRITICAL)  # the runtime's per-settlement warnings are not findings
    warnings.simplefilter("ignore")
    scratch = Path(tempfile.mkdtemp(prefix="nbkit-fuzz-"))
    started_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    command = "python bench/fuzz.py " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        corpus = fuzzlib.build_corpus(scratch / "corpus")
        targets = make_targets(corpus, scratch)
        if args.replay:
            name, _, seed = args.replay.partition(":")
            ok = targets[name].check(random.Random(int(seed)), int(seed))
            for entry in targets[name].failures.values():
                print(entry["traceback"])
            print("passed" if ok else "failed")
            return 0 if ok else 1
        print(f"nbkit fuzz: {command}")
        print(
            f"  started {started_at}; Python {platform.python_version()} on {platform.system()} "
            f"{platform.release()}, {os.cpu_count()} cores; engine {args.engine}, seed {args.seed}"
        )
        print(f"  corpus: {', '.join(f'{b.name} ({len(b.data)} B, {len(b.messages)} msgs)' for b in corpus)}")
        t0 = time.monotonic()
        if args.seconds > 0:
            if args.engine == "random":
                run_random(targets, names, args.seconds, args.seed)
            else:
                run_hypothesis(targets, names, args.seconds, args.seed, args.chunk)
        report: dict = {
            "command": command,
            "started": started_at,
            "engine": args.engine,
            "seed": args.seed,
            "fuzz_seconds": round(time.monotonic() - t0, 1),
            "targets": {},
        }
        print(f"\n  {'target':<8} {'inputs':>9} {'runs':>9} {'failures':>9} {'inputs/s':>9}")
        for name in names:
            t = targets[name]
            failures = sum(e["count"] for e in t.failures.values())
            rate = t.inputs / t.seconds if t.seconds else 0.0
            print(f"  {name:<8} {t.inputs:>9} {t.runs:>9} {failures:>9} {rate:>9.0f}")
            report["targets"][name] = {
                "inputs": t.inputs,
                "runs": t.runs,
                "failures": failures,
                "kinds": {k: {"count": e["count"], "seed": e["seed"]} for k, e in t.failures.items()},
            }
        total = {k: sum(report["targets"][n][k] for n in names) for k in ("inputs", "runs", "failures")}
        report["total"] = total
        print(f"  {'total':<8} {total['inputs']:>9} {total['runs']:>9} {total['failures']:>9}")
        failed = total["failures"]
        if args.crash_runs:
            fig = crash_runs(scratch, args.crash_runs, args.seed, args.crash_flush_every)
            report["crash"] = fig.as_dict()
            print(
                f"\n  writer SIGKILL: {fig.kills} kills ({fig.kills_before_ready} during start-up or resume), "
                f"{fig.returned_writes} returned writes, {fig.lost_returned_writes} of them lost "
                f"(flush_every={fig.flush_every}, at most {fig.max_lost_in_one_run} in one kill), "
                f"{fig.torn_tails} torn tails ({fig.torn_bytes} B), {fig.messages_checked} messages checked "
                f"byte for byte, {fig.file_bytes} B written, {fig.seconds} s"
            )
        if args.position_kills:
            folder = scratch / "positions"
            folder.mkdir()
            pfig = crashlib.position_kills(folder, kills=args.position_kills, seed=args.seed)
            report["positions"] = pfig.as_dict()
            print(
                f"\n  position save SIGKILL: {pfig.kills} kills, {pfig.damaged} damaged stores, "
                f"{pfig.kills_with_a_save_in_flight} caught a save in flight, {pfig.temp_files_found} temporary "
                f"files found and {pfig.temp_files_left} left, {pfig.seconds} s"
            )
        for name in names:
            for key, entry in targets[name].failures.items():
                print(
                    f"\nFAILURE [{name}] x{entry['count']} {key}\n  seed: {entry['seed']}"
                    + (
                        f"  (replay: python bench/fuzz.py --replay {name}:{entry['seed']})"
                        if isinstance(entry["seed"], int)
                        else ""
                    )
                )
                print("  " + entry["traceback"].rstrip().replace("\n", "\n  ")[-3000:])
        print(f"\nRESULT: {failed} failures")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        return 1 if failed else 0
    except AssertionError as exc:  # a crash or position check failed
        print(f"\nRESULT: FAILED: {exc}")
        traceback.print_exc()
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted")
        return 130
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
