"""The pipe transport under the app: stdin lines in, stdout lines out, retry copies under
``out_retry``, the startup refusal (§5.3), envelopes (§5.2, §5.4) and loopback."""

from __future__ import annotations

import datetime as dt
import io

import pytest

from nbkit import App, ConfigurationError, HandlerOutcome, NbkitError, RetryDestinationError, StdioBroker
from nbkit.wire.envelope import encode

from .helpers import RETRY, SEQ, START, drain, lines

EMPTY_TEXT = "invalid descriptor: stdio drops empty lines; an empty message cannot be transmitted"


def _app(broker, clock, **options):
    app = App(broker, clock=clock, **options)
    app.start()
    return app


def test_delivery_fields(clock):
    stdin = [
        '[2024-03-04T05:06:07.250 | jobs | 7 | 2] {"id": 1}',
        "[jobs] second",
        "no meta at all",
        "[other | 1] not mine",
    ]
    broker = StdioBroker(stdin=stdin, stdout=[])
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry")(seen.append)
    app = _app(broker, clock)
    drain(app)
    assert [(d.stream_key, d.seq, d.shard_id, d.payload, d.line) for d in seen] == [
        ("jobs", 7, 2, b'{"id": 1}', 1),
        ("jobs", 0, 0, b"second", 2),  # sequences are counted per (key, shard)
        ("broadcast", 0, 0, b"no meta at all", 3),  # a line without meta goes to every consumer
    ]
    first = seen[0]
    assert first.json() == {"id": 1}
    assert first.headers == {SEQ: "7"}
    assert first.timestamp == dt.datetime(2024, 3, 4, 5, 6, 7, 250000, tzinfo=dt.UTC)
    assert seen[1].timestamp == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)  # no timestamp: the clock's now
    assert (first.transport, first.position, first.attempt) == ("pipe", None, 1)
    assert app.all_ended()


@pytest.mark.parametrize("kind", ["str", "list", "file", "bytes-file"])
def test_stdin_sources(kind, clock):
    text = "[jobs] a\n[jobs] b\n"
    stdin = {
        "str": text,
        "list": ["[jobs] a\n", "[jobs] b"],
        "file": io.StringIO(text),
        "bytes-file": io.BytesIO(text.encode()),
    }[kind]
    broker = StdioBroker(stdin=stdin, stdout=[])
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append(d.payload))
    App(broker, clock=clock).run()
    assert seen == [b"a", b"b"]


def test_real_pipe_stdin(open_pipe, clock):
    pipe = open_pipe()
    broker = StdioBroker(stdin=pipe.reader, stdout=[])
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append(d.payload))
    app = _app(broker, clock)
    assert app.step() is None  # nothing yet; the pipe is open
    pipe.send("[jobs] one", "[jobs] two")
    drain(app)
    assert seen == [b"one", b"two"]
    assert not app.all_ended()
    pipe.close()
    assert app.step() is None
    assert app.all_ended()


def test_copies_go_to_stdout_under_out_retry(clock):
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs | 4] work-1", "[jobs | 5] work-2"], stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2)(lambda d: HandlerOutcome.retry())
    app = _app(broker, clock)
    events = drain(app)
    assert [(e.action, e.destination, e.copy_seq) for e in events] == [
        ("copy", "jobs.retry", 0),
        ("copy", "jobs.retry", 1),
    ]
    got = lines(out)
    assert [(ln.ts, ln.key, ln.seq) for ln in got] == [
        ("2024-01-01T00:00:00", "jobs.retry", 0),
        ("2024-01-01T00:00:00", "jobs.retry", 1),
    ]
    assert [(ln.headers, ln.payload) for ln in got] == [
        ({SEQ: "4", RETRY: "1"}, b"work-1"),
        ({SEQ: "5", RETRY: "1"}, b"work-2"),
    ]
    assert all(ln.enveloped for ln in got)
    # the copies do not come back without loopback
    assert app.step() is None and app.all_ended()


def test_dead_letter_copies_go_to_stdout_under_the_dead_letter_key(clock):
    out: list[str] = []
    stdin = ["[jobs] a", "[jobs] " + encode({RETRY: "1"}, b"b", force_text=True).decode()]
    broker = StdioBroker(stdin=stdin, stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2, dead_letter="jobs.dead")(
        lambda d: HandlerOutcome.retry_after(30)
    )
    app = _app(broker, clock)
    events = drain(app)
    assert [(e.action, e.destination) for e in events] == [
        ("delayed-copy", "jobs.retry"),
        ("dead-letter", "jobs.dead"),
    ]
    assert [(ln.key, ln.seq, ln.headers[RETRY], ln.payload) for ln in lines(out)] == [("jobs.dead", 0, "2", b"b")]
    app.fire_due(START + 30)
    assert [(ln.key, ln.seq, ln.ts, ln.headers[RETRY], ln.payload) for ln in lines(out)] == [
        ("jobs.dead", 0, "2024-01-01T00:00:00", "2", b"b"),
        ("jobs.retry", 0, "2024-01-01T00:00:30", "1", b"a"),
    ]


@pytest.mark.parametrize("options", [{}, {"max_attempts": 3}, {"dead_letter": "jobs.dead"}])
def test_a_registration_without_out_retry_refuses_to_start(clock, options):
    broker = StdioBroker(stdin=["[jobs] never read"], stdout=[])
    seen = []
    broker.subscriber("jobs", name="worker", **options)(seen.append)
    app = App(broker, clock=clock)
    with pytest.raises(RetryDestinationError) as info:
        app.start()
    message = str(info.value)
    # human first: what is missing, then the one-line fix with the registration's own key...
    assert message.startswith(
        "subscription `worker` reads a pipe but names no stream key for its retry copies (on a pipe they go "
        'to stdout, for the next stage). Fix: add out_retry="jobs.retry" to @broker.subscriber("jobs", ...). '
        "Upstream says: "
    )
    # ...then upstream's sentence word for word (runtime-semantics.md, section 5.3, "Error text")
    assert message.endswith(
        "subscription `worker`: descriptor `StdioStream` declares `Copies = NamedCopies`, so it addresses no "
        "retry copies, and this registration names no destination for them. Name one at the mount site with "
        '`.out_retry(policy).to("name")`, or compose a publish transform declaring `Destination = Names` that '
        "names one per delivery"
    )
    assert "\n" not in message
    assert isinstance(info.value, ConfigurationError)
    assert seen == [] and not app.started


def test_one_bad_registration_refuses_the_whole_broker(clock):
    broker = StdioBroker(stdin=["[a] x"], stdout=[])
    broker.subscriber("a", out_retry="a.retry")(lambda d: None)
    broker.subscriber("b")(lambda d: None)
    with pytest.raises(RetryDestinationError, match="`b`"):
        App(broker, clock=clock).run()


@pytest.mark.parametrize(
    "payload",
    [b"\x00\x01\xfe\xff", b"line one\nline two\n", b"  padded\t", b"caf\xc3\xa9\xc2\xa0", b"rs2:abc", b"\r"],
    ids=["binary", "multiline", "padded", "trailing-nbsp", "lookalike", "cr"],
)
def test_unsafe_payloads_round_trip_through_a_pipe_enveloped(payload, clock):
    upstream: list[str] = []
    producer = StdioBroker(stdin=[], stdout=upstream)
    producer.publish("jobs", payload)
    producer.publish("jobs", payload, {"h": "v"})
    [a, b] = lines(upstream)
    assert a.text.startswith("rs1:") and b.text.startswith("rs1:")
    assert "\n" not in a.text
    consumer = StdioBroker(stdin="\n".join(upstream) + "\n", stdout=[])
    seen = []
    consumer.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append((d.payload, d.headers)))
    App(consumer, clock=clock).run()
    assert seen == [(payload, {SEQ: "0"}), (payload, {"h": "v", SEQ: "1"})]


def test_a_line_safe_payload_stays_verbatim(clock):
    out: list[str] = []
    producer = StdioBroker(stdin=[], stdout=out)
    producer.bind_clock(clock)
    producer.publish("jobs", '{"id": 1}')
    producer.publish("jobs", "second")
    producer.publish("other", "x")
    assert out == [
        '[2024-01-01T00:00:00 | jobs | 0] {"id": 1}',
        "[2024-01-01T00:00:00 | jobs | 1] second",
        "[2024-01-01T00:00:00 | other | 0] x",
    ]


def test_copies_of_binary_and_multiline_payloads_round_trip(open_pipe, clock):
    pipe = open_pipe()
    out: list[str] = []
    broker = StdioBroker(stdin=pipe.reader, stdout=out, loopback=True)
    seen = []

    @broker.subscriber("jobs", out_retry="jobs", max_attempts=2)
    def handler(d):
        seen.append((d.payload, d.attempt))
        return HandlerOutcome.retry()

    app = _app(broker, clock)
    for payload in (b"\x00\xff", b"a\nb"):
        pipe.send("[jobs] " + encode({}, payload, force_text=True).decode())
    drain(app)
    assert sorted(seen) == [(b"\x00\xff", 1), (b"\x00\xff", 2), (b"a\nb", 1), (b"a\nb", 2)]
    assert sorted(ln.payload for ln in lines(out)) == [b"\x00\xff", b"a\nb"]
    assert all(ln.enveloped and ln.headers[RETRY] == "1" for ln in lines(out))


def test_loopback_feeds_copies_back(clock):
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs | 0] m"], stdout=out, loopback=True)
    seen = []

    @broker.subscriber("jobs", out_retry="jobs.retry")
    def first(d):
        seen.append(("jobs", d.payload, d.attempt))
        return HandlerOutcome.retry_after(0)

    @broker.subscriber("jobs.retry", out_retry="jobs.retry2")
    def second(d):
        seen.append(("jobs.retry", d.payload, d.attempt, d.seq, d.headers[SEQ]))

    app = _app(broker, clock)
    drain(app)
    assert seen == [("jobs", b"m", 1), ("jobs.retry", b"m", 2, 0, "0")]
    assert [ln.key for ln in lines(out)] == ["jobs.retry"]


def test_without_loopback_own_output_is_not_read(clock):
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs | 0] m"], stdout=out)
    seen = []
    broker.subscriber("jobs", out_retry="jobs")(lambda d: seen.append(d.attempt) or HandlerOutcome.retry_after(0))
    App(broker, clock=clock).run()
    assert seen == [1]
    assert len(out) == 1


def test_empty_payload_publish_is_rejected(clock):
    out: list[str] = []
    broker = StdioBroker(stdin=[], stdout=out)
    for empty in (b"", ""):
        with pytest.raises(NbkitError) as info:
            broker.publish("jobs", empty)
        assert str(info.value).startswith(EMPTY_TEXT)  # upstream's text, then what happened and the fix
        assert "publish('jobs', b'') on a pipe" in str(info.value) and "--skip-blank-lines" in str(info.value)
    with pytest.raises(NbkitError, match="^invalid descriptor: stdio drops empty lines"):
        broker.publish("jobs", b"", {})
    assert out == []
    # an empty payload with a header is a non-empty line (an envelope)
    broker.publish("jobs", b"", {"k": "v"})
    [ln] = lines(out)
    assert (ln.headers, ln.payload) == ({"k": "v"}, b"")


def test_stdout_file_object(clock):
    sink = io.StringIO()
    broker = StdioBroker(stdin=["[jobs] a"], stdout=sink)
    broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2)(lambda d: HandlerOutcome.retry())
    App(broker, clock=clock).run()
    assert (
        sink.getvalue()
        == "[2024-01-01T00:00:00 | jobs.retry | 0] "
        + encode({SEQ: "0", RETRY: "1"}, b"a", force_text=True).decode()
        + "\n"
    )


def test_pipe_refuses_file_only_options():
    broker = StdioBroker(stdin=[], stdout=[])
    with pytest.raises(ConfigurationError, match="replay is a file option"):
        broker.subscriber("jobs", out_retry="r", replay=True)(lambda d: None)
    with pytest.raises(ConfigurationError, match="checkpoint is a file option"):
        from nbkit import PositionStore

        broker.subscriber("jobs", out_retry="r", checkpoint=PositionStore("/nonexistent/p.json"))(lambda d: None)


def test_run_ends_at_eof_and_publishes_pending_copies(clock):
    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a", "[jobs] b"], stdout=out)
    broker.subscriber("jobs", out_retry="later")(lambda d: HandlerOutcome.retry_after(10 if d.payload == b"a" else 5))
    app = App(broker, clock=clock)
    app.run()
    assert [(ln.key, ln.seq, ln.ts, ln.payload) for ln in lines(out)] == [
        ("later", 0, "2024-01-01T00:00:05", b"b"),
        ("later", 1, "2024-01-01T00:00:10", b"a"),
    ]
    assert clock.now() == START + 10
    assert app.pending == []


def test_run_under_loopback_delivers_delayed_copies(clock):
    """The upstream cap scenario through run(): copies come back under loopback after stdin ends."""
    out: list[str] = []
    broker = StdioBroker(stdin=["[parcels] p"], stdout=out, loopback=True)
    seen = []

    @broker.subscriber("parcels", out_retry="parcels", max_attempts=3, dead_letter="parcels.dead")
    def handler(d):
        seen.append(d.headers.get(RETRY))
        return HandlerOutcome.retry_after(5)

    App(broker, clock=clock).run()
    assert seen == [None, "1", "2"]
    assert [(ln.key, ln.ts, ln.headers[RETRY]) for ln in lines(out)] == [
        ("parcels", "2024-01-01T00:00:05", "1"),
        ("parcels", "2024-01-01T00:00:10", "2"),
        ("parcels.dead", "2024-01-01T00:00:10", "3"),
    ]
    assert clock.now() == START + 10


def test_run_on_the_real_clock_waits_for_the_copy():
    import time

    out: list[str] = []
    broker = StdioBroker(stdin=["[jobs] a"], stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: HandlerOutcome.retry_after(0.15))
    app = App(broker)
    t0 = time.monotonic()
    app.run()
    elapsed = time.monotonic() - t0
    assert elapsed >= 0.15  # the real clock waited for the copy (no upper bound: a loaded machine may be slow)
    [ev] = app.events
    assert ev.written_at - ev.time >= 0.15
    assert [(ln.key, ln.payload) for ln in lines(out)] == [("jobs.retry", b"a")]


def test_one_app_over_a_file_and_a_pipe(tmp_path, clock):
    """A pipe stage that appends to a stream file, and a replay of that file, in one app."""
    from nbkit import FileBroker

    from .helpers import records, seed

    path = tmp_path / "both.ss"
    seed(path, [("orders", b"o1")])
    file_broker = FileBroker(path)
    pipe = StdioBroker(stdin=["[jobs] j1", "[jobs] j2"], stdout=[])
    seen = []

    @pipe.subscriber("jobs", out_retry="jobs.retry")
    def from_pipe(d):
        seen.append(("pipe", d.payload))
        file_broker.publish("orders", b"from-" + d.payload)

    file_broker.subscriber("orders", replay=True)(lambda d: seen.append(("file", d.payload)))
    App(file_broker, pipe, clock=clock).run()
    assert [p for t, p in seen if t == "pipe"] == [b"j1", b"j2"]
    assert [p for t, p in seen if t == "file"][0] == b"o1"
    assert [r.payload for r in records(path, "orders")] == [b"o1", b"from-j1", b"from-j2"]


def test_app_configuration_errors():
    with pytest.raises(ConfigurationError, match="at least one broker"):
        App()
    with pytest.raises(ConfigurationError, match="brokers"):
        App(object())
    with pytest.raises(ConfigurationError, match="shutdown_timeout"):
        App(StdioBroker(stdin=[], stdout=[]), shutdown_timeout=-1)
