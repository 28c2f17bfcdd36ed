"""``nbkit.polars.scan_stream``: every filter and column choice gives what the eager read filtered the same way
gives, the filters the beacons answer narrow the read, and bad input says what is wrong."""

from __future__ import annotations

import datetime as dt
import random

import pytest

pl = pytest.importorskip("polars")
pytest.importorskip("pyarrow")

import nbkit  # noqa: E402
from nbkit.errors import InvalidArgumentError, MissingFileError  # noqa: E402
from nbkit.polars import scan_stream  # noqa: E402
from nbkit.tabular.polars_scan import Pushdown, pushdown  # noqa: E402

T0 = 1_700_000_000_000
N = 6000

# a key on several shards beside single-shard keys: the plausibility check reads other shards' runs as damage
pytestmark = pytest.mark.filterwarnings("ignore::nbkit.transport.damage.SuspectRecordWarning")


def _at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("scan") / "orders.ss")
    rng = random.Random(3)
    with nbkit.StreamWriter(path, beacon_interval=4096) as writer:
        for n in range(N):
            key = rng.choice(("orders", "orders", "payments", "audit"))
            shard = rng.choice((0, 0, 1)) if key == "orders" else 0
            writer.write(key, b'{"n": %d, "pad": "%s"}' % (n, b"x" * 40), shard_id=shard, timestamp_ms=T0 + n * 100)
    return path


@pytest.fixture(scope="module")
def eager(stream_file):
    return pl.from_arrow(nbkit.read_arrow(stream_file))


FILTERS = {
    "one key": pl.col("stream_key") == "orders",
    "keys": pl.col("stream_key").is_in(["payments", "audit"]),
    "seq": pl.col("seq") >= 700,
    "seq above": pl.col("seq") > 700,
    "after a time": pl.col("timestamp") > _at(T0 + 400_000),
    "from a time": pl.col("timestamp") >= _at(T0 + 400_000),
    "before a time": pl.col("timestamp") < _at(T0 + 50_000),
    "to a time, sub-ms": pl.col("timestamp") <= _at(T0 + 50_000) + dt.timedelta(microseconds=300),
    "a time the other way": pl.lit(_at(T0 + 500_000)) < pl.col("timestamp"),
    "between": pl.col("timestamp").is_between(_at(T0 + 100_000), _at(T0 + 200_000)),
    "key and window": (pl.col("stream_key") == "orders")
    & (pl.col("timestamp") > _at(T0 + 100_000))
    & (pl.col("timestamp") < _at(T0 + 300_000)),
    "key and seq": (pl.col("stream_key") == "orders") & (pl.col("seq") >= 1500),
    "a filter not pushed down": pl.col("payload").str.contains('"n": 12'),
    "an or": (pl.col("stream_key") == "audit") | (pl.col("seq") == 3),
    "a key not there": pl.col("stream_key") == "refunds",
    "keys, one not there": pl.col("stream_key").is_in(["audit", "refunds"]),
    "two keys at once": (pl.col("stream_key") == "audit") & (pl.col("stream_key") == "orders"),
}


@pytest.mark.parametrize("name", FILTERS)
def test_a_filter_gives_the_eager_read_filtered(stream_file, eager, name):
    want = eager.filter(FILTERS[name])
    got = scan_stream(stream_file).filter(FILTERS[name]).collect()
    assert got.schema == eager.schema
    assert got.equals(want), name
    if name not in ("a key not there", "two keys at once"):
        assert want.height > 0, name  # the case tests something


def test_a_column_selection_gives_the_eager_columns(stream_file, eager):
    lf = scan_stream(stream_file)
    for columns in (["seq"], ["stream_key", "timestamp", "offset"], ["headers", "payload"]):
        assert lf.select(columns).collect().equals(eager.select(columns)), columns
    got = lf.filter(pl.col("payload").str.contains('"n": 7')).select("offset").collect()
    assert got.equals(eager.filter(pl.col("payload").str.contains('"n": 7')).select("offset"))


def test_n_rows(stream_file, eager):
    lf = scan_stream(stream_file)
    assert lf.head(5).collect().equals(eager.head(5))
    orders = pl.col("stream_key") == "orders"
    assert lf.filter(orders).head(7).collect().equals(eager.filter(orders).head(7))
    assert lf.select("seq").head(0).collect().height == 0
    assert lf.select(pl.len()).collect().item() == N  # no column asked for: still every row counted
    assert lf.filter(orders).select(pl.len()).collect().item() == eager.filter(orders).height


def test_a_row_limit_stops_the_read_before_the_damage_further_on(tmp_path):
    # the file is damaged far past the first rows: the eager read fails there, a limited scan never reaches it
    path = tmp_path / "long.ss"
    with nbkit.StreamWriter(path) as writer:
        for n in range(400_000):
            writer.write("orders" if n % 3 else "audit", b'{"n": %d}' % n, timestamp_ms=T0 + n)
    data = bytearray(path.read_bytes())
    data[data.index(b'{"n": 380000}') + 7] ^= 0xFF  # a payload byte: that frame's checksum fails
    path.write_bytes(bytes(data))
    with pytest.raises(nbkit.NbkitError):
        nbkit.read_arrow(path)
    lf = scan_stream(path)
    assert lf.head(3).select("seq", "payload").collect().rows() == [(1, '{"n": 0}'), (1, '{"n": 1}'), (2, '{"n": 2}')]
    got = lf.select("seq", "stream_key").head(150_000).collect()  # past the first chunk read
    assert got.height == 150_000 and got["seq"].max() == 100_000


def test_bytes_payloads(stream_file):
    got = scan_stream(stream_file, payload="bytes").filter(pl.col("seq") == 5).collect()
    want = pl.from_arrow(nbkit.read_arrow(stream_file, payload="bytes")).filter(pl.col("seq") == 5)
    assert got.equals(want) and got.schema["payload"] == pl.Binary


def test_the_filters_become_read_options():
    at = _at(T0 + 1)
    found = pushdown((pl.col("stream_key") == "orders") & (pl.col("timestamp") > at) & (pl.col("seq") >= 3))
    assert found == Pushdown(keys=frozenset({"orders"}), after_ms=T0 + 1, start_seq=3)
    assert found.read_options() == {"keys": ["orders"], "start": nbkit.FilePosition.timestamp(T0 + 1)}
    assert pushdown((pl.col("stream_key") == "a") | (pl.col("seq") > 3)) == Pushdown()
    assert pushdown(pl.col("timestamp") > dt.datetime(2024, 1, 1)) == Pushdown()  # naive: left to polars
    assert pushdown(pl.col("seq") >= 0) == Pushdown()
    assert pushdown(None) == Pushdown()


def test_a_time_window_reads_less_than_the_file(stream_file):
    """The pushed-down window is found from the beacons: the read starts past the first beacons."""
    late = scan_stream(stream_file).filter(pl.col("timestamp") > _at(T0 + (N - 50) * 100)).select("offset").collect()
    assert late.height == 49
    with nbkit.StreamReader(stream_file) as reader:
        interval = reader.interval
    assert late["offset"].min() > 10 * interval


def test_bad_input_says_what_is_wrong(tmp_path, stream_file):
    with pytest.raises(MissingFileError, match="nope.ss"):
        scan_stream(tmp_path / "nope.ss")
    text = tmp_path / "notes.txt"
    text.write_text("not a stream file\n" * 20)
    with pytest.raises(nbkit.NbkitError, match="notes.txt"):
        scan_stream(text)
    with pytest.raises(InvalidArgumentError, match="payload='json' is not one of text, bytes"):
        scan_stream(stream_file, payload="json")
    with pytest.raises(InvalidArgumentError, match="on_bad_frames='ignore'"):
        scan_stream(stream_file, on_bad_frames="ignore")
    with pytest.raises(InvalidArgumentError, match="include_internal"):
        scan_stream(stream_file, include_internal="yes")
