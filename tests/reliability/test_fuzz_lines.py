"""Random and damaged stdio lines and envelopes: the parser, read_pipe, a pipe service, ``nbkit write``.

The wire tests already check the grammar line by line and that ``envelope.decode`` never raises.
Here whole inputs go through the runtime: a pipe service delivers every line before the first bad
one, names the bad line (``LineParseError`` for a header, ``Utf8Error`` for bytes that are not
UTF-8), and accounts for every retry copy (published, or reported abandoned). ``nbkit write`` fed
damaged ndjson exits with one line and leaves an intact stream file.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit import App, HandlerOutcome, StdioBroker, VirtualClock
from nbkit.errors import LineParseError, NbkitError, Utf8Error
from nbkit.tabular.frames import read_pipe
from nbkit.transport.file_reader import StreamReader

from . import fuzzlib

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_names = itertools.count()


@FUZZ
@given(rnd=st.randoms(use_true_random=False))
def test_random_lines_through_parser_read_pipe_and_a_pipe_service(rnd) -> None:
    fuzzlib.lines_case(rnd)


@settings(FUZZ, max_examples=150)
@given(
    lines=st.lists(st.text(max_size=60).map(lambda t: t.replace("\n", " ")), min_size=1, max_size=6),
    seed=st.integers(0, 2**32),
)
def test_arbitrary_unicode_lines(lines, seed) -> None:
    """Hypothesis's own text (surrogates, controls, odd whitespace), not just the fuzz alphabet."""
    fuzzlib.check_parse_lines(lines)
    fuzzlib.check_read_pipe(lines)
    fuzzlib.check_stdio_app(random.Random(seed), lines)


@settings(FUZZ, max_examples=80)
@given(rnd=st.randoms(use_true_random=False))
def test_nbkit_write_on_damaged_ndjson(corpus, tmp_path_factory, rnd) -> None:
    fuzzlib.check_cli_write(rnd, corpus, tmp_path_factory.getbasetemp() / f"w-{next(_names)}.ss")


# -- deterministic cases ---------------------------------------------------------------------------


def _service(stdin, out: list[str]) -> tuple[App, list[tuple[int, bytes]]]:
    broker = StdioBroker(stdin=stdin, stdout=out)
    app = App(broker, clock=VirtualClock())
    seen: list[tuple[int, bytes]] = []

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def work(d):
        seen.append((d.line, d.payload))
        return HandlerOutcome.retry_after(1)

    return app, seen


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("[jobs | seven] x", "second stream key 'seven'"),
        ("[jobs | -1] x", "invalid sequence '-1'"),
        ("[2024-02-30T00:00:00 | jobs] x", "day 30 does not exist"),
        ("[ | jobs] x", "empty header field"),
        ("[jobs | 1 | 2 | 3] x", "unexpected extra field '3'"),
        ("[" + "k" * 250 + "] x", "exceeds 249"),
        ("[jobs | 18446744073709551616] x", "exceeds u64"),
    ],
)
def test_a_malformed_line_stops_the_service_naming_the_line(bad: str, fragment: str) -> None:
    out: list[str] = []
    app, seen = _service(["[jobs] one", "two", bad, "[jobs] never"], out)
    with pytest.raises(LineParseError) as info:
        app.run()
    assert info.value.line == 3 and str(info.value).startswith("line 3: ") and fragment in str(info.value)
    assert seen == [(1, b"one"), (2, b"two")]
    # the copies of the two deliveries were still published when the app shut down
    assert [ln.split("] ")[0].split(" | ")[1] for ln in out] == ["jobs.retry", "jobs.retry"]
    assert all(e.written_at is not None for e in app.events)


def test_invalid_utf8_on_stdin_names_the_line() -> None:
    out: list[str] = []
    app, seen = _service(b"[jobs] ok\n[jobs] caf\xe9\n[jobs] later\n", out)
    with pytest.raises(Utf8Error) as info:
        app.run()
    assert info.value.line == 2 and "line 2" in str(info.value) and "not valid UTF-8" in str(info.value)
    assert seen == [(1, b"ok")] and len(out) == 1


def test_read_pipe_names_the_bad_line_of_a_saved_output(tmp_path: Path) -> None:
    saved = tmp_path / "stage.out"
    saved.write_text("[2024-01-01T00:00:00 | jobs | 0] a\n[jobs | x] b\n")
    with pytest.raises(LineParseError, match="line 2"):
        read_pipe(saved)
    saved.write_bytes(b"[jobs] a\n\xff\xfe\n")
    with pytest.raises(NbkitError, match="not UTF-8"):
        read_pipe(saved)


def test_nbkit_write_stops_at_the_bad_line_and_keeps_a_readable_file(tmp_path: Path) -> None:
    path = tmp_path / "w.ss"
    good = '{"header":{"stream_key":"a","shard_id":0,"sequence":%d,"timestamp":"2024-01-01T00:00:00.0"},"payload":"p"}'
    stdin = "\n".join([good % 1, good % 2, '{"header": {', good % 4]).encode()
    rc, out, err = fuzzlib.run_cli(["write", str(path)], stdin=stdin)
    assert rc == 1 and out == ""
    assert err.startswith("nbkit: stdin, line 3: invalid message line") and err.count("\n") == 1
    with StreamReader(path) as r:
        assert [m.seq for m in r] == [1, 2]
    assert r.end.reason == "end"
    rc, _, err = fuzzlib.run_cli(["write", str(path)], stdin=b'{"header":{}}\n\xff\n')
    assert rc == 1 and "line 1" in err
    rc, _, err = fuzzlib.run_cli(["write", str(path)], stdin=(good % 5).encode() + b"\n\xff\xfe\n")
    assert rc == 1 and err == "nbkit: stdin, line 2: the line is not UTF-8 (invalid start byte at byte 0)\n"
    with StreamReader(path) as r:
        assert [m.seq for m in r] == [1, 2, 5] and r.end.reason == "end"
