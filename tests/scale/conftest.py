"""Helpers for the scale-out tests: stream files with tiny beacon intervals, and frame comparison.

A partition's ``stream_key`` categories are its own keys; Dask concatenates them in order of first
appearance. ``assert_same_rows`` checks that the category *sets* match and then compares everything
else strictly (values, dtypes, column order) with ``pandas.testing.assert_frame_equal``.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from nbkit.wire import envelope

T0 = 1_700_000_000_000


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """``got`` (index = offsets, categories in any order) holds exactly ``want``'s rows."""
    got = got.reset_index(drop=True)
    want = want.reset_index(drop=True)
    assert set(got["stream_key"].cat.categories) == set(want["stream_key"].cat.categories)
    got = got.copy()
    got["stream_key"] = got["stream_key"].cat.reorder_categories(list(want["stream_key"].cat.categories))
    pd.testing.assert_frame_equal(got, want)


def concat_parts(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Stack partition frames as Dask does (categories unioned in order of appearance)."""
    keys: list[str] = []
    for p in parts:
        for k in p["stream_key"].cat.categories:
            if k not in keys:
                keys.append(k)
    fixed = []
    for p in parts:
        p = p.copy()
        p["stream_key"] = p["stream_key"].cat.set_categories(keys)
        fixed.append(p)
    out = pd.concat(fixed)
    out["stream_key"] = out["stream_key"].cat.remove_unused_categories()
    return out


def workload(
    n: int, *, seed: int = 1, keys=("alpha", "beta", "c.long-key_name"), big: int = 5000, headers: bool = True
) -> list[tuple[str, int, int, int, bytes]]:
    """Messages (key, shard, seq, ts, payload): text, JSON, binary and large payloads, some enveloped."""
    rnd = random.Random(seed)
    seqs: dict[tuple[str, int], int] = {}
    out = []
    for i in range(n):
        key = rnd.choice(keys)
        shard = rnd.choice((0, 0, 1))
        seq = seqs[(key, shard)] = seqs.get((key, shard), 0) + 1
        kind = rnd.random()
        if kind < 0.3:
            payload = f'{{"id":{i},"v":{rnd.randint(0, 99)},"k":"{key}"}}'.encode()
        elif kind < 0.5:
            payload = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 60)))
        elif kind < 0.7:
            payload = ("x" * rnd.randint(big // 2, big)).encode()  # several intervals long
        else:
            payload = f"text {i} é".encode()
        if headers and rnd.random() < 0.15:
            hdr: dict[str, str | bytes] = {"x-ruststream-retry-count": str(rnd.randint(1, 3)), "trace": f"t{i}"}
            if rnd.random() < 0.3:
                hdr["raw"] = b"\xff\xfe"
            payload = envelope.encode(hdr, payload, force_text=False)
        out.append((key, shard, seq, T0 + i // 3, payload))
    return out


@pytest.fixture(scope="session")
def scale_file(tmp_path_factory, write_ss):
    """A 1024-interval file: 3 streams x 2 shards, payloads up to 5 KB (frames cut by several beacons)."""
    path = tmp_path_factory.mktemp("scale") / "tiny-interval.ss"
    write_ss(path, workload(400), interval=1024)
    return path


@pytest.fixture(scope="session")
def same_rows():
    """:func:`assert_same_rows` as a fixture."""
    return assert_same_rows


@pytest.fixture(scope="session")
def stack():
    """:func:`concat_parts` as a fixture."""
    return concat_parts


@pytest.fixture(scope="session")
def make_workload():
    """:func:`workload` as a fixture."""
    return workload
