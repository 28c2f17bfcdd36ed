"""Windows that seek: every form of ``start`` and ``end`` is found from the beacons, for one key or several.

Checked two ways: the rows equal what filtering a whole read gives, and the bytes read (``rchar`` of
``/proc/self/io``: bytes the process's read calls returned) are about those of the seeking form, far
below the whole file.
"""

from __future__ import annotations

import datetime as dt
import os
import random

import pandas as pd
import pytest

from nbkit import FilePosition, StreamReader, StreamWriter, UnknownKeyError, read_arrow, read_stream
from nbkit.tabular import selection
from nbkit.transport.windows import beacon_keys, find_window

T0 = 1_700_000_000_000
KEYS = ("orders", "payments", "audit")
N = 60_000  # about 12 MiB: three times the reader's 4 MiB buffer


@pytest.fixture(scope="module")
def big_file(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("windows") / "big.ss")
    with StreamWriter(path, beacon_interval=1 << 16, created_at_ms=T0, flush_every=4096) as writer:
        for i in range(N):
            key = KEYS[i % 3] if i % 97 else "audit"
            writer.write(key, b'{"n": %d, "pad": "%s"}' % (i, b"x" * 160), timestamp_ms=T0 + i * 100)
    return path


def _read_bytes() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _measured(fn):
    before = _read_bytes()
    out = fn()
    return out, _read_bytes() - before


def _iso(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms").isoformat()  # naive ISO text: UTC


AT = T0 + (N // 4) * 100  # a quarter in
STOP = AT + 3000 * 100


def test_every_start_form_gives_the_same_rows_as_filtering(big_file):
    whole = read_stream(big_file)
    want = whole[whole["timestamp"] > pd.Timestamp(AT, unit="ms", tz="UTC")]
    forms = [
        AT,
        _iso(AT),
        _iso(AT) + "Z",
        dt.datetime.fromtimestamp(AT / 1000, dt.UTC),
        dt.datetime.fromtimestamp(AT / 1000, dt.UTC).replace(tzinfo=None),  # naive: UTC
        pd.Timestamp(AT, unit="ms"),
        pd.Timestamp(AT, unit="ms", tz="Europe/Paris"),
        FilePosition.timestamp(AT),
    ]
    for form in forms:
        got = read_stream(big_file, start=form)
        assert got["offset"].tolist() == want["offset"].tolist(), form


def test_several_keys_and_an_end(big_file):
    whole = read_stream(big_file)
    ts = whole["timestamp"]
    lo, hi = pd.Timestamp(AT, unit="ms", tz="UTC"), pd.Timestamp(STOP, unit="ms", tz="UTC")
    for keys in (["orders", "audit"], "payments", None):
        mask = (ts > lo) & (ts < hi)
        if keys is not None:
            mask &= whole["stream_key"].isin([keys] if isinstance(keys, str) else keys)
        got = read_stream(big_file, keys=keys, start=_iso(AT), end=_iso(STOP))
        assert got["offset"].tolist() == whole.loc[mask, "offset"].tolist(), keys
        assert got.attrs["read_end"].reason == "window"


def test_a_time_window_reads_about_what_the_seeking_form_reads(big_file):
    size = os.path.getsize(big_file)
    _, whole = _measured(lambda: read_stream(big_file, keys="orders"))
    _, seeking = _measured(lambda: read_stream(big_file, keys="orders", start=FilePosition.timestamp(AT)))
    _, text = _measured(lambda: read_stream(big_file, keys="orders", start=_iso(AT)))
    _, several = _measured(lambda: read_stream(big_file, keys=["orders", "audit"], start=_iso(AT)))
    _, every = _measured(lambda: read_stream(big_file, start=_iso(AT)))
    _, bounded = _measured(lambda: read_stream(big_file, start=_iso(AT), end=_iso(STOP)))
    assert whole >= size
    for got in (seeking, text, several, every):
        assert got < 0.85 * size, (got, size)
        assert abs(got - seeking) < 0.15 * size
    assert bounded < seeking  # the end stops the read too
    end_only, ended = _measured(lambda: read_stream(big_file, end=_iso(T0 + 5000 * 100)))
    assert ended < 0.5 * size and len(end_only) == 5000


def test_sequence_windows_per_key(big_file):
    whole = read_stream(big_file)
    got = read_stream(big_file, keys=["orders", "payments"], start=FilePosition.sequence(15_000))
    mask = whole["stream_key"].isin(["orders", "payments"]) & (whole["seq"] >= 15_000)
    assert got["offset"].tolist() == whole.loc[mask, "offset"].tolist()
    sel, _, _ = selection(keys=["orders"])
    with StreamReader(big_file) as reader:
        window = find_window(reader, keys=["orders"], start_seq=15_000, end_seq=15_100)
        assert reader.pos == window.start > 128
        assert window.stop is not None and window.stop - window.start < 4 * reader.interval
    assert sel.keys == frozenset({"orders"})


def test_a_window_outside_the_file_is_empty_not_an_error(big_file):
    assert len(read_stream(big_file, start=T0 + N * 100 + 1)) == 0
    assert len(read_stream(big_file, end=T0)) == 0
    before = read_stream(big_file, start=T0 - 1)
    assert len(before) == N


def test_beacon_keys_and_an_unknown_key(big_file):
    with StreamReader(big_file) as reader:
        assert beacon_keys(reader) == set(KEYS)
    with pytest.raises(UnknownKeyError, match="'payment'; the keys there: audit, orders, payments") as info:
        read_stream(big_file, keys="payment", start=_iso(AT))
    assert info.value.missing == ["payment"] and info.value.available == sorted(KEYS)
    assert isinstance(info.value, LookupError)


def test_a_key_with_no_message_in_the_window_is_not_unknown(tmp_path):
    path = tmp_path / "late.ss"
    with StreamWriter(path, beacon_interval=1024) as writer:
        for i in range(200):
            writer.write("orders", b"x" * 60, timestamp_ms=T0 + i)
        writer.write("refunds", b"r", timestamp_ms=T0 + 500)
    assert len(read_stream(path, keys="refunds", end=T0 + 10)) == 0
    assert len(read_stream(path, keys="refunds", start=T0 + 100)) == 1


def _write_sharded(path, interval: int) -> None:
    """One key on three shards that advance at different rates (shard 0 fastest, in time and in sequence)
    beside a second key: each shard's markers rise on their own, so no one shard tells where a window
    starts or stops for the key."""
    rng = random.Random(7)
    with StreamWriter(path, beacon_interval=interval) as writer:
        for n in range(4000):
            shard = rng.choice((0, 0, 0, 1, 2))
            key = rng.choice(("orders", "orders", "audit"))
            at = n if shard == 0 else n // 3
            writer.write(key, b'{"n": %d}' % n, shard_id=shard, timestamp_ms=T0 + at * 1000)


# the reader's plausibility check takes a key's records on other shards for damaged sequence numbers
@pytest.mark.filterwarnings("ignore::nbkit.transport.damage.SuspectRecordWarning")
@pytest.mark.parametrize("interval", [1024, 4096])  # one marker a beacon (round robin), and room for all
def test_a_key_on_several_shards_loses_no_row(tmp_path, interval):
    path = tmp_path / "sharded.ss"
    _write_sharded(path, interval)
    whole = read_stream(path)
    assert whole.groupby(["stream_key", "shard_id"], observed=True).size().size == 6
    orders = whole["stream_key"] == "orders"
    ms = whole["timestamp"].dt.as_unit("ms").astype("int64")
    cases = [
        (dict(start=FilePosition.sequence(400)), whole["seq"] >= 400),
        (dict(start=T0 + 1_500_000), ms > T0 + 1_500_000),
        (dict(end=T0 + 1_200_000), ms < T0 + 1_200_000),
        (dict(start=T0 + 600_000, end=T0 + 2_000_000), (ms > T0 + 600_000) & (ms < T0 + 2_000_000)),
    ]
    for options, mask in cases:
        want = whole.loc[orders & mask, "offset"].tolist()
        assert want, options
        assert read_stream(path, keys="orders", **options)["offset"].tolist() == want, options
        assert read_arrow(path, keys="orders", **options).column("offset").to_pylist() == want, options
    for bounds, mask in [
        (dict(start_seq=300, end_seq=500), (whole["seq"] >= 300) & (whole["seq"] <= 500)),
        (dict(end_seq=200), whole["seq"] <= 200),
    ]:
        with StreamReader(path) as reader:
            window = find_window(reader, keys=["orders"], **bounds)
        inside = (whole["offset"] >= window.start) & (True if window.stop is None else whole["offset"] < window.stop)
        kept = [window.keep(seq, t) for seq, t in zip(whole["seq"], ms, strict=True)]
        got = whole.loc[orders & inside & pd.Series(kept, index=whole.index), "offset"].tolist()
        assert got == whole.loc[orders & mask, "offset"].tolist(), bounds
        assert window.start > 128 or window.stop is not None, bounds  # the beacons did narrow the read
