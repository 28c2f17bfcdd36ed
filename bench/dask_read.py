"""Benchmark: nbkit.dask.read_stream on a 2-worker LocalCluster against nbkit.read_stream.

Generates a stream file (default 4 GiB; ``--size``) with StreamWriter (``flush_every=10000``: beacons
depend on offsets, so the file is written message by message, not as a repeated chunk), reads it once
to warm the page cache, then times

- ``nbkit.read_stream(path)``: one process, sequential (the reference);
- ``nbkit.dask.read_stream(path).persist()`` on ``LocalCluster(n_workers=2, threads_per_worker=1,
  processes=True)``: planning (EOS scan and tail check included) and parsing into pandas partitions in
  two worker processes. This is the parallel read; **the target (>= 1.6x) applies to it**;
- ``groupby(stream_key).size()`` straight from the file on the cluster (parse included);
- ``.compute()`` of the whole frame into this process (files up to 1.5 GiB, or ``--to-client``): Dask
  concatenates the partitions on a worker and ships every Python object (payload strings, header
  dicts) to the client, which costs about as much as parsing; reported, not targeted.

``--repeat N`` alternates N timed runs of the sequential read and of the persist and reports the best
of each (and the median ratio): other processes on a shared machine slow either side at random. One
untimed run of each side comes first, so that no timed run pays for a fresh process's heap. Before
each persist the previous run's partitions are dropped and the workers are waited for until they hold
none (the sequential side frees its previous frame before its clock starts too). CPU seconds (user and
system) and minor page faults are printed per side, the workers' summed over their processes: they
depend less on the load than wall time, and show where the workers' extra time goes.

Reading the wall-clock ratio on a shared machine: with Linux's autogroup scheduling
(``/proc/sys/kernel/sched_autogroup_enabled`` = 1, printed) the CPU is shared out per session, and this
script, its scheduler and its worker processes are one session. When other sessions keep both cores
busy, the cluster gets the same share as the single process did, so the wall ratio falls to about the
CPU-time ratio (below 1x) whatever the parallelism. The estimate from CPU seconds is the figure to read
then; the wall ratio means something only while the load average stays below about 1.
The persisted partitions are checked equal to the sequential frame one by one (row for row, every
column; ``stream_key``'s categories as a set: each partition has its own) and the ratios are printed.
Other processes on the machine skew the figures: the load average is printed before and after.
Exit status 0 either way; the last line says whether the targets were met.

**Remote side** (``--remote``, the default for files up to 1 GiB, when moto and s3fs are installed): the
same file is uploaded to moto's S3 server on 127.0.0.1 (``ThreadedMotoServer``, a real HTTP endpoint
speaking the S3 API, in this process), and the same reads are timed on ``s3://bench/bench.ss`` with
``storage_options``: ``nbkit.read_stream`` in this process and ``nbkit.dask.read_stream().persist()`` on
the cluster, whose workers open the URL themselves. Printed: their times against the local reads, the
bytes the workers fetched against the file's size, and per partition the bytes fetched against the
partition's own range (each partition measured in its worker by ``nbkit.transport.source.fetch_totals``).

    python bench/dask_read.py --size 1GiB
    python bench/dask_read.py --size 64MiB --partition-size 8MiB --remote
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
import warnings
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

TARGET = 1.6


def _size(text: str) -> int:
    from dask.utils import parse_bytes

    return int(parse_bytes(text))


def generate(path: str, size: int) -> int:
    """Write messages until the file reaches ``size`` bytes; returns the message count."""
    from nbkit.transport.file_writer import StreamWriter

    t0 = time.perf_counter()
    step = max(size // 20, 1)
    mark = step
    n = 0
    with StreamWriter(path, file_name="bench.ss", created_at_ms=_common.T0_MS, flush_every=10_000) as w:
        while w.offset < size:
            for _ in range(10_000):
                key, seq, ts, data = _common.message_fields(n)
                w.write(key, data, seq=seq, timestamp_ms=ts)
                n += 1
            if w.offset >= mark:
                rate = w.offset / (time.perf_counter() - t0) / 2**20
                print(f"   generating: {w.offset / 2**30:5.2f} GiB, {n:,} messages, {rate:.0f} MiB/s", flush=True)
                mark += step
    return n


def same_part(got, want) -> bool:
    """One partition (index = offsets) equals its rows of the sequential frame."""
    import pandas as pd

    got = got.reset_index(drop=True)
    want = want.reset_index(drop=True)
    if set(got["stream_key"].cat.categories) != set(want["stream_key"].cat.categories):
        return False
    got = got.copy()
    got["stream_key"] = got["stream_key"].cat.reorder_categories(list(want["stream_key"].cat.categories))
    try:
        pd.testing.assert_frame_equal(got, want)
    except AssertionError as exc:
        print(f"   partition differs: {str(exc)[:300]}")
        return False
    return True


class Usage(NamedTuple):
    """CPU seconds (user, system) and minor page faults of a process, or their difference."""

    user: float
    system: float
    faults: int

    @property
    def cpu(self) -> float:
        return self.user + self.system

    def __sub__(self, other: tuple) -> Usage:  # type: ignore[override]  # field-wise, not tuple concatenation
        return Usage(self.user - other[0], self.system - other[1], self.faults - other[2])


def _usage() -> Usage:
    """This process's CPU time and minor page faults so far (all its threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(r.ru_utime, r.ru_stime, r.ru_minflt)


def _workers_usage(client) -> Usage:
    """The sum over the cluster's worker processes of :func:`_usage`."""
    got = client.run(_usage).values()
    return Usage(sum(u[0] for u in got), sum(u[1] for u in got), sum(u[2] for u in got))


def _autogroup() -> str:
    """Whether the kernel shares the CPU out per session (see the module docstring)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return "on (CPU shared per session)" if f.read().strip() == "1" else "off"
    except OSError:
        return "unknown"


def _held(dask_worker) -> int:
    """How many results a worker still holds (runs on the worker)."""
    return len(dask_worker.data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="4GiB", help="file size to generate (default 4GiB)")
    p.add_argument("--partition-size", default="64MiB", help="nbkit.dask partition size (default 64MiB)")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (default 2)")
    p.add_argument("--path", help="use (or create) this file instead of a temporary one")
    p.add_argument(
        "--to-client",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time compute() of the whole frame (default: for files up to 1.5 GiB)",
    )
    p.add_argument("--repeat", type=int, default=1, help="timed runs of each side, alternating; best reported")
    p.add_argument(
        "--remote",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also read the file from moto's S3 server on 127.0.0.1 (default: for files up to 1 GiB)",
    )
    p.add_argument("--block-size", default="8MiB", help="range request size of the remote side (default 8MiB)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (its path is printed)")
    args = p.parse_args(argv)

    from distributed import Client, LocalCluster, wait

    import nbkit.dask
    from nbkit.tabular.frames import read_stream

    size = _size(args.size)
    print("== nbkit.dask.read_stream vs nbkit.read_stream")
    print(f"   machine: {_common.machine()}")
    with _common.workdir(args, "dask") as tmp:
        path = args.path or os.path.join(tmp, "bench.ss")
        if not os.path.exists(path) or os.path.getsize(path) < size:
            if os.path.exists(path):
                os.unlink(path)
            t = time.perf_counter()
            n = generate(path, size)
            took = time.perf_counter() - t
            print(f"   generated {os.path.getsize(path) / 2**30:.2f} GiB, {n:,} messages in {took:.0f} s")
        actual = os.path.getsize(path)
        to_client = args.to_client if args.to_client is not None else actual <= 3 << 29  # 1.5 GiB
        with open(path, "rb") as f:  # warm the page cache: both sides then read from memory
            while f.read(64 << 20):
                pass
        print(
            f"   file: {actual / 2**30:.2f} GiB, partition size {args.partition_size}, "
            f"{args.workers} worker processes x 1 thread"
        )
        print(
            f"   load average before: {os.getloadavg()[0]:.2f} (other processes share these cores); "
            f"autogroup scheduling: {_autogroup()}"
        )

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cluster = LocalCluster(
                n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit=0
            )
        with cluster, Client(cluster) as client:
            client.run(lambda: __import__("nbkit.scale.dask_reader"))  # workers import nbkit before timing
            # what the idle workers burn (heartbeats, the event loop, distributed's sampling profiler), per second
            idle = _workers_usage(client)
            time.sleep(1.0)
            idle_rate = (_workers_usage(client) - idle).cpu
            seq_times, dask_times, plan_times, seq_use, plan_use, worker_use = [], [], [], [], [], []

            def release(persisted) -> None:
                """Drop the kept partitions and wait until the workers have freed them (before any clock starts:
                the sequential side frees its previous frame before its clock starts too)."""
                client.cancel(persisted)
                while sum(client.run(_held).values()):
                    time.sleep(0.01)
                client.run(gc.collect)

            # one untimed run of each side first: every process (this one, the workers) then starts the timed
            # runs with a heap that has been through one read, as a notebook's second read would
            want = read_stream(path, progress=False)
            persisted = nbkit.dask.read_stream(path, partition_size=args.partition_size).persist()
            wait(persisted)
            for i in range(args.repeat):  # alternate the two sides: other load hits both alike
                want = None
                gc.collect()
                t, u = time.perf_counter(), _usage()
                want = read_stream(path, progress=False)
                seq_times.append(time.perf_counter() - t)
                seq_use.append(_usage() - u)
                if persisted is not None:
                    release(persisted)  # the same task keys again: drop the kept results
                    persisted = None
                gc.collect()
                w = _workers_usage(client)
                t, u = time.perf_counter(), _usage()
                ddf = nbkit.dask.read_stream(path, partition_size=args.partition_size)
                plan_times.append(time.perf_counter() - t)
                plan_use.append(_usage() - u)
                persisted = ddf.persist()
                wait(persisted)
                dask_times.append(time.perf_counter() - t)
                worker_use.append(_workers_usage(client) - w)
                print(
                    f"   run {i + 1}: sequential {seq_times[-1]:.2f} s, dask persist {dask_times[-1]:.2f} s, "
                    f"load average {os.getloadavg()[0]:.2f}",
                    flush=True,
                )
            n = len(want)
            t_seq, t_persist = min(seq_times), min(dask_times)
            # CPU seconds depend less on what else runs: what 2 idle cores would give
            cpu_seq = statistics.median(u.cpu for u in seq_use)
            cpu_plan = statistics.median(u.cpu for u in plan_use)
            cpu_workers = statistics.median(u.cpu for u in worker_use)
            ideal = cpu_seq / (cpu_plan + cpu_workers / args.workers)
            # the workers' background runs as long as the persist does: long under load, about
            # (plan + tasks / workers) on idle cores; their tasks alone are the rest
            background = idle_rate * statistics.median(dask_times)
            tasks = max(cpu_workers - background, 0.0)
            idle_wall = cpu_plan + tasks / args.workers
            ideal_tasks = cpu_seq / (idle_wall + idle_rate * idle_wall / args.workers)
            print(
                f"   CPU seconds (medians): sequential {cpu_seq:.2f}; dask plan {cpu_plan:.2f} + workers "
                f"{cpu_workers:.2f} (sum of {args.workers}) -> on {args.workers} idle cores about {ideal:.2f}x"
            )
            print(
                f"   of the workers' {cpu_workers:.2f} s, about {background:.2f} s is distributed's background "
                f"({idle_rate:.3f} CPU s per s while idle, over the median persist): the tasks {tasks:.2f} s "
                f"-> on {args.workers} idle cores about {ideal_tasks:.2f}x"
            )
            for label, uses in (("sequential", seq_use), ("dask workers", worker_use)):
                user = statistics.median(u.user for u in uses)
                system = statistics.median(u.system for u in uses)
                faults = statistics.median(u.faults for u in uses)
                print(
                    f"   {label}: user {user:.2f} s + system {system:.2f} s, {faults / 1000:.0f}k page faults (medians)"
                )
            _common.row("nbkit.read_stream (sequential)", t_seq, n, f"best of {args.repeat}")
            print(f"   {'dask plan (EOS scan, tail check)':<44} {_common.fmt_s(min(plan_times)):>10}  best")
            _common.row(
                f"nbkit.dask read_stream().persist() [{ddf.npartitions} parts]", t_persist, n, f"best of {args.repeat}"
            )

            equal = True
            row = 0
            for part in persisted.to_delayed():
                got = part.compute()
                equal = equal and same_part(got, want.iloc[row : row + len(got)])
                row += len(got)
                del got
            equal = equal and row == n
            release(persisted)  # the next reads have the same task keys: drop the kept results
            del persisted, part

            t = time.perf_counter()
            sizes = (
                nbkit.dask.read_stream(path, partition_size=args.partition_size)
                .groupby("stream_key", observed=True)
                .size(split_out=1)
                .compute()
            )
            t_group = time.perf_counter() - t
            _common.row("nbkit.dask groupby(stream_key).size()", t_group, n)
            counts = want.groupby("stream_key", observed=True).size()
            equal_groups = sizes.sort_index().to_dict() == counts.sort_index().to_dict()

            t_client = None
            if to_client:
                gc.collect()
                t = time.perf_counter()
                whole = nbkit.dask.read_stream(path, partition_size=args.partition_size).compute()
                t_client = time.perf_counter() - t
                _common.row("nbkit.dask read_stream().compute() to here", t_client, n)
                equal = equal and len(whole) == n
                del whole
            remote = args.remote if args.remote is not None else actual <= 1 << 30
            if remote:
                remote_side(client, path, args.partition_size, _size(args.block_size), t_seq, t_persist, want)
        print(f"   load average after: {os.getloadavg()[0]:.2f}")
        print(f"   rows: {n:,}; partitions equal to the sequential frame: {equal}; group sizes equal: {equal_groups}")
        ratio = t_seq / t_persist
        median = statistics.median(seq_times) / statistics.median(dask_times)
        line = (
            f"   ratios (sequential / dask): persist {ratio:.2f}x (median {median:.2f}x), "
            f"groupby {t_seq / t_group:.2f}x"
        )
        if t_client is not None:
            line += f", compute() to the client {t_seq / t_client:.2f}x"
        print(line)
        del want
        results = [
            _common.verdict("results equal", equal and equal_groups, "nbkit.dask == nbkit.read_stream"),
            _common.verdict(
                f"parallel read >= {TARGET}x faster", ratio >= TARGET, f"persist {ratio:.2f}x on {args.workers} workers"
            ),
        ]
    return _common.finish(results)


def _fetched_by(rng, url: str, options: dict, block_size: int) -> tuple[int, int, int]:
    """(range size, bytes fetched, requests) of one partition's read (runs on a worker, one task at a time)."""
    from nbkit.scale.partitions import read_range
    from nbkit.transport.source import fetch_totals

    totals = fetch_totals()
    before, requests = totals.bytes, totals.requests
    read_range(url, rng, storage_options=options, block_size=block_size)
    return rng.end - rng.start, totals.bytes - before, totals.requests - requests


def remote_side(client, path: str, partition_size: str, block_size: int, t_seq: float, t_persist: float, want) -> None:
    """The same reads from moto's S3 server on 127.0.0.1: times, and bytes fetched against sizes."""
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        print("   remote side: moto and s3fs are not installed (pip install -e '.[dev]'): left out")
        return
    import logging

    from distributed import wait

    import nbkit.dask
    from nbkit.tabular.frames import read_stream
    from nbkit.transport.source import fetch_totals

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
        options = {"key": "bench", "secret": "bench", "endpoint_url": endpoint}
        keys = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys)
        s3.create_bucket(Bucket="bench")
        t = time.perf_counter()
        s3.upload_file(path, "bench", "bench.ss")
        size = os.path.getsize(path)
        url = "s3://bench/bench.ss"
        took = time.perf_counter() - t
        print(f"   remote: {url} on moto at {endpoint} (uploaded {size / 2**20:.0f} MiB in {took:.1f} s)")
        before = fetch_totals().bytes
        t = time.perf_counter()
        got = read_stream(url, storage_options=options, block_size=block_size, progress=False)
        t_remote = time.perf_counter() - t
        fetched_seq = fetch_totals().bytes - before
        same = len(got) == len(want)
        del got
        _common.row("nbkit.read_stream(s3://) (sequential)", t_remote, len(want))
        before_w = client.run(lambda: fetch_totals().bytes)
        t = time.perf_counter()
        before_plan = fetch_totals().bytes
        ddf = nbkit.dask.read_stream(url, partition_size=partition_size, storage_options=options, block_size=block_size)
        plan_fetched = fetch_totals().bytes - before_plan
        persisted = ddf.persist()
        wait(persisted)
        t_remote_persist = time.perf_counter() - t
        after_w = client.run(lambda: fetch_totals().bytes)
        fetched_w = sum(after_w[w] - before_w.get(w, 0) for w in after_w)
        same = same and int(persisted.map_partitions(len).sum().compute()) == len(want)
        client.cancel(persisted)
        _common.row(f"nbkit.dask(s3://).persist() [{ddf.npartitions} parts]", t_remote_persist, len(want))
        plan = nbkit.dask.plan(url, partition_size=partition_size, storage_options=options, block_size=block_size)
        per = client.gather(client.map(_fetched_by, plan.ranges, url=url, options=options, block_size=block_size))
        over = [fetched - own for own, fetched, _ in per]
        ratios = sorted(fetched / own for own, fetched, _ in per if own)
        print(
            f"   remote vs local: sequential {t_remote / t_seq:.2f}x the local time, dask persist "
            f"{t_remote_persist / t_persist:.2f}x; rows equal: {same}"
        )
        print(
            f"   bytes fetched: sequential {fetched_seq / size:.4f}x the file; the dask plan {plan_fetched:,} bytes; "
            f"the workers {fetched_w / size:.4f}x the file ({fetched_w:,} of {size:,})"
        )
        print(
            f"   per partition (block size {block_size >> 10} KiB): fetched / own range min {ratios[0]:.4f}, median "
            f"{statistics.median(ratios):.4f}, max {ratios[-1]:.4f}; bytes past the range: max {max(over):,} "
            f"(the header and the frame crossing its end); requests per partition: max {max(r for *_, r in per)}"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
