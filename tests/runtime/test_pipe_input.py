"""How a pipe stage reads its stdin: upstream's reading of blank and CRLF lines by default, the options that
change it, bad lines (``on_bad_lines``), unreadable retry counts, lines for no subscription, and the bound on
pending copies (``max_pending``): backpressure, never loss."""

from __future__ import annotations

import logging

import pytest

from nbkit import App, HandlerOutcome, LineParseError, StdioBroker, VirtualClock
from nbkit.errors import ConfigurationError, Utf8Error
from nbkit.runtime import logs


def _stage(lines, **options):
    out: list[str] = []
    broker = StdioBroker(stdin=lines, stdout=out, **options)
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append(d) and None)
    return broker, seen, out


def test_by_default_blank_and_crlf_lines_are_read_as_upstream_reads_them():
    broker, seen, _ = _stage(["[jobs] a\r", "", "   ", "[jobs | 2"])
    App(broker, clock=VirtualClock()).run()
    # "\r" stays in the payload; empty, blank and a cut-off header are header-less messages for every subscription
    assert [(d.stream_key, d.payload) for d in seen] == [
        ("jobs", b"a\r"),
        ("broadcast", b""),
        ("broadcast", b"   "),
        ("broadcast", b"[jobs | 2"),
    ]


def test_skip_blank_lines_and_strip_cr():
    broker, seen, _ = _stage(["[jobs] a\r", "", " \r", "\t", "[jobs] b"], skip_blank_lines=True, strip_cr=True)
    app = App(broker, clock=VirtualClock())
    app.run()
    assert [d.payload for d in seen] == [b"a", b"b"]
    assert [d.line for d in seen] == [1, 5]  # line numbers still count every line read
    assert broker.counts.blank_skipped == 3
    assert "3 blank skipped" in app.summary().to_text()


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_on_bad_lines_warn_or_skip_reads_on_and_counts(caplog, mode):
    broker, seen, _ = _stage([b"[jobs] a", b"[jobs | x] bad", b"caf\xe9", b"[jobs] b"], on_bad_lines=mode)
    app = App(broker, clock=VirtualClock())
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.run()
    assert [d.payload for d in seen] == [b"a", b"b"]
    assert broker.counts.bad_skipped == 2
    skipped = [r for r in caplog.records if getattr(r, "nbkit_text", None) == logs.BAD_LINE_SKIPPED]
    if mode == "warn":
        assert [(r.levelno, r.nbkit_fields["line"]) for r in skipped] == [(logging.WARNING, 2), (logging.WARNING, 3)]
    else:
        assert skipped == []
    assert "2 bad skipped" in app.summary().to_text()


def test_on_bad_lines_error_stops_and_counts_the_lines_left_unread():
    broker, seen, _ = _stage(["[jobs] a", "[jobs | x] bad", "[jobs] b", "[jobs] c"])
    app = App(broker, clock=VirtualClock())
    with pytest.raises(LineParseError, match="line 2"):
        app.run()
    assert [d.payload for d in seen] == [b"a"]
    assert (broker.counts.unread, broker.counts.unread_exact) == (2, True)
    assert app.summary().to_text().endswith("2 lines read (2 left unread)")


def test_a_bad_utf8_line_from_a_descriptor_names_its_line(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"[jobs] a\n[jobs] caf\xe9\n[jobs] b\n[jobs] c\n")
    with path.open("rb") as stdin:
        broker = StdioBroker(stdin=stdin, stdout=[])
        broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: None)
        app = App(broker, clock=VirtualClock())
        with pytest.raises(Utf8Error, match="stdin line 2"):
            app.run()
    assert broker.counts.unread == 2  # read ahead in the same chunk: never parsed, counted as unread


def test_on_bad_lines_is_checked():
    with pytest.raises(ConfigurationError, match="on_bad_lines must be one of error, warn, skip"):
        StdioBroker(stdin=[], stdout=[], on_bad_lines="ignore")


def test_an_unreadable_retry_count_is_logged_once_by_line_and_counts_as_0(caplog):
    from nbkit.wire import envelope

    lines = [
        f"[jobs] {envelope.encode({envelope.RETRY_COUNT_HEADER: v}, b'x', force_text=False).decode()}"
        for v in ("abc", "2", "-1")
    ]
    broker = StdioBroker(stdin=lines, stdout=[])
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry", max_attempts=2)(lambda d: seen.append(d.attempt) and None)
    with caplog.at_level(logging.WARNING, logger="nbkit"):
        App(broker, clock=VirtualClock()).run()
    assert seen == [1, 3, 1]  # as upstream: an unreadable count reads as 0, so the cap does not see it
    bad = [r for r in caplog.records if getattr(r, "nbkit_text", None) == logs.BAD_RETRY_COUNT]
    assert [(r.nbkit_fields["line"], r.nbkit_fields["value"]) for r in bad] == [(1, "abc"), (3, "-1")]
    assert broker.counts.bad_retry_counts == 2


def test_lines_for_no_subscription_are_counted_and_logged_at_debug(caplog):
    broker, seen, _ = _stage(["[jobs] a", "[other] b", "[jobs] c"])
    app = App(broker, clock=VirtualClock())
    with caplog.at_level(logging.DEBUG, logger="nbkit"):
        app.run()
    assert len(seen) == 2 and broker.counts.unsubscribed == 1
    [rec] = [r for r in caplog.records if getattr(r, "nbkit_text", None) == logs.UNSUBSCRIBED_LINE]
    assert (rec.levelno, rec.nbkit_fields) == (logging.DEBUG, {"line": 2, "stream_key": "other"})


def test_max_pending_holds_input_back_until_copies_are_due_and_loses_nothing():
    clock = VirtualClock()
    out: list[str] = []
    broker = StdioBroker(stdin=[f"[jobs] {i}" for i in range(5)], stdout=out)
    broker.subscriber("jobs", out_retry="jobs.retry")(
        lambda d: HandlerOutcome.retry_after(10) if d.attempt == 1 else None
    )
    app = App(broker, clock=clock, max_pending=2)
    assert app.step() is not None and app.step() is not None
    assert len(app.pending) == 2 and app.pending_full
    assert app.step() is None  # at the cap: no delivery, though stdin has more
    assert broker.source is not None and broker.source.lineno == 2
    clock.advance(10)
    assert app.step() is not None  # the two copies went out, then the next line came in
    app.run()
    assert len(out) == 5 and app.counts.copies == 5 and app.counts.abandoned == 0
    assert app.counts.backpressure >= 1


def test_max_pending_is_checked():
    with pytest.raises(ConfigurationError, match="max_pending must be a whole number >= 1 or None"):
        App(StdioBroker(stdin=[], stdout=[]), max_pending=0)
