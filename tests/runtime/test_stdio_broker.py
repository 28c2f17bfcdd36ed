"""StdioBroker: feed() is refused before the app starts and after its input ended (never a silent loss),
and the stdin line bound (``max_line_bytes``) is a bad line naming its number, handled as ``on_bad_lines``."""

from __future__ import annotations

import pytest

from nbkit import App, LineParseError, Session, StdioBroker, VirtualClock
from nbkit.errors import ConfigurationError


def _stage(lines, **options):
    out: list[str] = []
    broker = StdioBroker(stdin=lines, stdout=out, **options)
    seen = []
    broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append(d.payload) and None)
    return broker, seen, out


def test_feed_before_the_start_and_after_the_end_is_refused():
    broker, seen, _ = _stage([])
    with pytest.raises(ConfigurationError, match="start the app or session first"):
        broker.feed("[jobs] early")
    app = App(broker, clock=VirtualClock())
    Session(app).run()
    assert app.all_ended()
    with pytest.raises(ConfigurationError, match=r"feed\(\) after the input ended \(eof\).*would be lost"):
        broker.feed("[jobs] late")
    assert seen == []


def test_feed_while_the_input_is_open_is_read_then_refused_once_it_ended():
    broker, seen, _ = _stage(["[jobs] a"])
    session = Session(App(broker))
    session.step()
    broker.feed("[jobs] fed\n")
    session.run()
    assert seen == [b"a", b"fed"]
    with pytest.raises(ConfigurationError, match="after the input ended"):
        broker.feed("[jobs] late")
    assert seen == [b"a", b"fed"]


def test_a_line_over_the_bound_stops_the_stage_naming_it():
    broker, seen, _ = _stage(["[jobs] a", "[jobs] " + "x" * 100, "[jobs] b", "[jobs] c"], max_line_bytes=100)
    app = App(broker, clock=VirtualClock())
    with pytest.raises(LineParseError, match="^line 2: stdin line 2 is longer than the line bound of 100 bytes"):
        app.run()
    assert seen == [b"a"]
    assert (broker.counts.unread, broker.counts.unread_exact) == (2, True)


@pytest.mark.parametrize("mode", ["warn", "skip"])
def test_a_line_over_the_bound_is_skipped_as_a_bad_line(mode):
    broker, seen, _ = _stage(["[jobs] a", "[jobs] " + "x" * 100, "[jobs] b"], max_line_bytes=100, on_bad_lines=mode)
    App(broker, clock=VirtualClock()).run()
    assert seen == [b"a", b"b"] and broker.counts.bad_skipped == 1


def test_the_bound_is_configured_before_the_start():
    broker, _, _ = _stage(["[jobs] " + "x" * 100])
    broker.configure_input(max_line_bytes=10)
    with pytest.raises(LineParseError, match="line bound of 10 bytes"):
        App(broker, clock=VirtualClock()).run()
    with pytest.raises(ConfigurationError, match="before the app starts"):
        broker.configure_input(max_line_bytes=20)
    with pytest.raises(ConfigurationError, match="max_line_bytes must be a whole number"):
        StdioBroker(stdin=[], stdout=[], max_line_bytes=-1)


def test_a_line_over_the_bound_from_a_descriptor_counts_the_lines_after_it_as_unread(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"[jobs] a\n[jobs] " + b"x" * 300_000 + b"\n[jobs] b\n[jobs] c\n")
    with path.open("rb") as stdin:
        broker = StdioBroker(stdin=stdin, stdout=[], max_line_bytes=1000)
        seen = []
        broker.subscriber("jobs", out_retry="jobs.retry")(lambda d: seen.append(d.payload) and None)
        with pytest.raises(LineParseError, match="stdin line 2 is longer"):
            App(broker, clock=VirtualClock()).run()
    assert seen == [b"a"]
    assert (broker.counts.unread, broker.counts.unread_exact) == (2, True)
