"""Fixtures for the runtime tests (helpers live in ``helpers.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nbkit import VirtualClock

from .helpers import OpenPipe, Rig


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def ss(tmp_path: Path) -> Path:
    """A path for a fresh stream file (not created)."""
    return tmp_path / "s.ss"


@pytest.fixture
def open_pipe():
    """``open_pipe()`` makes a real OS pipe to use as stdin; it stays open until the test ends."""
    pipes: list[OpenPipe] = []

    def make() -> OpenPipe:
        p = OpenPipe()
        pipes.append(p)
        return p

    yield make
    for p in pipes:
        p.close()
        p.reader.close()


@pytest.fixture(params=["file", "pipe"])
def transport(request) -> str:
    return request.param


@pytest.fixture
def rig(transport, tmp_path, clock):
    """``rig(loop=False, key="jobs")`` builds a :class:`Rig` on the parametrised transport."""
    made: list[Rig] = []

    def make(*, loop: bool = False, key: str = "jobs") -> Rig:
        r = Rig(transport, tmp_path, clock, loop=loop, key=key)
        made.append(r)
        return r

    yield make
    for r in made:
        if r.app is not None and not r.app.stopped:
            r.app.crash()
        r.close()
