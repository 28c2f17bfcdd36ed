"""nbkit.dask.read_stream, to_parquet and the range reads on s3:// (moto's server on 127.0.0.1).

Each partition fetches its own beacon-aligned range plus at most the frame crossing its end; a
``distributed`` cluster whose worker processes run in another folder, with no copy of the file, reads
the URL and gives the rows of the local read.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
from checkout_env import checkout_env

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
pytest.importorskip("moto")
pytest.importorskip("s3fs")

import nbkit  # noqa: E402
import nbkit.dask  # noqa: E402
from nbkit.scale.partitions import plan_ranges, read_range  # noqa: E402
from nbkit.tabular.frames import read_stream  # noqa: E402
from nbkit.transport.source import fetch_totals  # noqa: E402
from nbkit.wire.ssformat import HEADER_SIZE  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from object_store import S3  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """About 1.2 MB, 4 KiB beacons, JSON payloads of 60-160 bytes over three keys."""
    path = str(tmp_path_factory.mktemp("remote-scale") / "orders.ss")
    with nbkit.StreamWriter(path, beacon_interval=4096) as writer:
        for n in range(12_000):
            note = b"n" * (n % 100)
            writer.write(("orders", "audit", "billing")[n % 3], b'{"id": %d, "note": "%s"}' % (n, note))
    return path


def test_each_partition_fetches_about_its_own_range(s3, big):
    url = s3.put_file(big)
    plan = plan_ranges(url, partition_size=64 << 10, storage_options=s3.options, block_size=16 << 10)
    assert len(plan.ranges) > 10
    largest_frame = 32 + 7 + 160  # header, key, payload, checksum of this file's biggest frame
    for rng in plan.ranges:
        before = fetch_totals().bytes
        part = read_range(url, rng, storage_options=s3.options, block_size=16 << 10)
        fetched = fetch_totals().bytes - before
        own = rng.end - rng.start
        # the header, the range, and at most the one frame crossing its end (cut by a beacon: + the beacon)
        assert own <= fetched + HEADER_SIZE
        assert fetched <= HEADER_SIZE + own + largest_frame + 4096 // 2, (rng, fetched)
        assert len(part) > 0


def test_planning_a_url_fetches_a_few_small_ranges_not_the_file(s3, big):
    url = s3.put_file(big)
    before = fetch_totals().bytes
    plan = nbkit.dask.plan(url, blocksize="64KiB", storage_options=s3.options, block_size="16KiB")
    assert fetch_totals().bytes - before < 5 * (16 << 10)
    assert plan.size == os.path.getsize(big)


def test_dask_read_of_s3_equals_the_local_read(s3, big, same_rows):
    url = s3.put_file(big)
    ddf = nbkit.dask.read_stream(url, blocksize="64KiB", payload="json", storage_options=s3.options)
    same_rows(ddf.compute(scheduler="sync"), read_stream(big, payload="json"))


def test_dask_stops_at_the_end_of_stream_mark_on_s3(s3, tmp_path, same_rows):
    path = str(tmp_path / "eos.ss")
    with nbkit.StreamWriter(path, beacon_interval=1024) as writer:
        for n in range(500):
            writer.write("orders", b'{"id": %d}' % n)
        writer.write_eos()
    url = s3.put_file(path)
    plan = nbkit.dask.plan(url, blocksize="2KiB", storage_options=s3.options)
    assert plan.eos == nbkit.dask.plan(path, blocksize="2KiB").eos is not None
    got = nbkit.dask.read_stream(url, blocksize="2KiB", storage_options=s3.options).compute(scheduler="sync")
    same_rows(got, read_stream(path))


def test_to_parquet_from_s3_to_s3(s3, big):
    url = s3.put_file(big)
    out = url.replace("orders.ss", "orders.parquet")
    rows = nbkit.to_parquet(url, out, payload="json", storage_options=s3.options)
    assert rows == 12_000
    local = os.path.join(os.path.dirname(big), "back.parquet")
    with open(local, "wb") as f:
        f.write(s3.get("orders.parquet"))
    pd.testing.assert_frame_equal(nbkit.read_parquet(local), read_stream(big, payload="json"))


def test_a_cluster_of_worker_processes_in_another_folder_reads_the_url(s3, big, tmp_path, same_rows):
    """Workers started as their own processes, in a folder without the file: they have only the URL."""
    url = s3.put_file(big)
    elsewhere = tmp_path / "workers"
    elsewhere.mkdir()
    env = checkout_env()
    with distributed.LocalCluster(n_workers=0, scheduler_port=0, dashboard_address=None, host="127.0.0.1") as cluster:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nworkers", "2"]
            + ["--nthreads", "1", "--memory-limit", "512MiB", "--no-dashboard", "--host", "127.0.0.1"],
            cwd=elsewhere,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with distributed.Client(cluster) as client:
                client.wait_for_workers(2, timeout=120)
                cwd = client.run(os.getcwd)
                assert set(cwd.values()) == {str(elsewhere)}
                assert client.run(os.path.exists, big) == dict.fromkeys(cwd, True)  # same machine: hide it below
                ddf = nbkit.dask.read_stream(url, blocksize="128KiB", payload="json", storage_options=s3.options)
                before = client.run(lambda: fetch_totals().bytes)
                got = ddf.compute()
                after = client.run(lambda: fetch_totals().bytes)
        finally:
            worker.terminate()
            worker.wait(30)
    same_rows(got, read_stream(big, payload="json"))
    fetched = sum(after[w] - before.get(w, 0) for w in after)
    size = os.path.getsize(big)
    assert size <= fetched + HEADER_SIZE * ddf.npartitions < size * 1.1  # the workers fetched the file once
    assert len([w for w in after if after[w] > before.get(w, 0)]) == 2  # both workers read partitions
