"""Crash safety of the writer: SIGKILL at random moments, then read, resume and append.

A crash can only cut the file (the writer never rewrites bytes it wrote), so every cut point is a
case: the hypothesis test below resumes after cuts anywhere in six seed files; the process tests
kill real writer processes (see :mod:`.crashlib` for what is checked after each kill).
"""

from __future__ import annotations

import itertools
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nbkit.errors import NbkitError
from nbkit.transport.file_reader import StreamReader
from nbkit.transport.file_writer import StreamWriter

from . import fuzzlib
from .crashlib import crash_chain

_names = itertools.count()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sigkill_a_writer_24_times_loses_no_returned_write(tmp_path, figures) -> None:
    fig = crash_chain(tmp_path / "crash.ss", runs=24, seed=1, flush_every=1)
    figures(kind="writer SIGKILL, flush_every=1", **fig.as_dict())
    assert fig.kills == 24 and fig.lost_returned_writes == 0
    assert fig.returned_writes > 1000, "the writers were killed before they wrote anything"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sigkill_with_flush_every_16_loses_at_most_15_buffered_writes(tmp_path, figures) -> None:
    """``flush_every=N`` buffers up to N-1 returned writes in the process: a crash loses those, never
    more, and never a byte of what was flushed."""
    fig = crash_chain(tmp_path / "batched.ss", runs=12, seed=2, flush_every=16)
    figures(kind="writer SIGKILL, flush_every=16", **fig.as_dict())
    assert fig.max_lost_in_one_run <= 15
    assert fig.lost_returned_writes > 0, "no kill caught a batch in memory: the test proves nothing"


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rnd=st.randoms(use_true_random=False))
@pytest.mark.timeout(120)
def test_append_after_a_cut_anywhere_resumes_after_the_last_complete_frame(corpus, tmp_path_factory, rnd) -> None:
    """A torn write leaves any prefix of the file (see :func:`fuzzlib.check_cut_and_append`)."""
    fuzzlib.check_cut_and_append(rnd, corpus, tmp_path_factory.getbasetemp() / f"cut-{next(_names)}.ss")


@pytest.mark.parametrize("size", [1, 2, 3, 4, 64, 127])
def test_a_file_cut_inside_its_header_is_refused_with_a_clear_error(tmp_path, corpus, size) -> None:
    path = tmp_path / "short.ss"
    path.write_bytes(corpus[0].data[:size])
    with pytest.raises(NbkitError) as info:
        StreamWriter(path)
    message = str(info.value)
    assert str(path) in message and ("128-byte" in message or "header" in message), message


def test_an_empty_file_left_by_a_crash_is_started_afresh(tmp_path) -> None:
    path = tmp_path / "empty.ss"
    path.write_bytes(b"")
    with StreamWriter(path) as w:
        w.write("a", b"x")
    with StreamReader(path) as r:
        assert [m.seq for m in r] == [1]


def test_crash_chain_checks_catch_a_writer_that_rewrites_history(tmp_path, corpus, monkeypatch) -> None:
    """The chain's checks are not vacuous: a file whose verified bytes change between kills fails."""
    from . import crashlib

    path = tmp_path / "c.ss"
    real_read = crashlib.Path.read_bytes
    calls = itertools.count()

    def tampered(self):
        data = real_read(self)
        if self == path and next(calls) == 1 and len(data) > 300:
            return data[:200] + bytes([data[200] ^ 1]) + data[201:]
        return data

    monkeypatch.setattr(crashlib.Path, "read_bytes", tampered)
    with pytest.raises(AssertionError, match="verified before were changed"):
        crash_chain(path, runs=3, seed=3, early_kill_every=0)
    shutil.rmtree(tmp_path, ignore_errors=True)
