"""PositionStore under SIGKILL: a process saving positions in a loop is killed at random moments
(150 times); the store must then hold the old or the new position, never a damaged file, and the
temporary files of killed saves must not pile up (see :func:`crashlib.position_kills`).

The saver is forked from this process (no interpreter start per kill); it reports each save that
returned on a pipe, so the parent knows the last completed value and the one in flight.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nbkit.runtime.position_store import PositionStore

from .crashlib import position_kills

KILLS = 150


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_position_saves_killed_150_times_leave_the_old_or_the_new_value(tmp_path, figures) -> None:
    fig = position_kills(tmp_path, kills=KILLS, seed=5)
    figures(kind="PositionStore save killed by SIGKILL", **fig.as_dict())
    assert fig.kills == KILLS and fig.damaged == 0
    assert fig.last_value >= KILLS, "each saver is killed after its first save returned: one save per kill at least"
    assert fig.kills_with_a_save_in_flight > 0, "no kill landed inside a save: the test proves little"
    # before the fix every kill inside a save left a .positions-XXXX file behind for good
    assert fig.temp_files_found > 0 and fig.temp_files_left == 0


def test_only_temporaries_of_dead_savers_of_this_store_are_removed(tmp_path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = {
        f".positions.json.{dead.pid}.abcd1234.tmp": False,  # a killed saver of this store: removed
        f".positions.json.{os.getpid()}.abcd1234.tmp": True,  # a saver that still runs: kept
        f".positions.json.5.{dead.pid}.abcd1234.tmp": True,  # a store named positions.json.5: not ours
        f".other.json.{dead.pid}.abcd1234.tmp": True,  # another store
        "positions.json.bak": True,
    }
    for name in names:
        (tmp_path / name).write_text("{}")
    PositionStore(tmp_path / "positions.json")
    assert {n: (tmp_path / n).exists() for n in names} == names
