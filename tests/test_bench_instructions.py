"""bench/instructions.py: the committed instruction budget, the verdict rule (fail above +15 %), the refusal
to raise the budget without a reason, and one run under callgrind against a budget it must break.
No timing is asserted (the counts are what CI compares, in .ci/run)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_env import checkout_env

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench" / "instructions.py"

_spec = importlib.util.spec_from_file_location("bench_instructions", SCRIPT)
assert _spec is not None and _spec.loader is not None
instructions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(instructions)


def _script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=checkout_env(),
        cwd=str(ROOT),
    )


def test_the_committed_budget_names_every_workload_with_a_date_and_a_reason():
    data = instructions.load_budget()
    assert set(data["workloads"]) == set(instructions.WORKLOADS)
    for name, entry in data["workloads"].items():
        assert entry["instructions_per_message"] > 0, name
        dt.date.fromisoformat(entry["date"])
        assert entry["why"].strip(), name


def test_a_workload_fails_only_above_fifteen_percent_over_its_budget():
    budget = {"a": 1000.0, "b": 1000.0, "c": 1000.0, "d": 1000.0}
    verdicts = instructions.compare(budget, {"a": 900.0, "b": 1150.0, "c": 1151.0, "d": 2000.0})
    assert [(v.workload, v.ok) for v in verdicts] == [("a", True), ("b", True), ("c", False), ("d", False)]
    assert verdicts[2].ratio == pytest.approx(1.151)
    assert "over budget" in verdicts[2].note


def test_a_workload_without_a_budget_fails():
    (verdict,) = instructions.compare({"a": 1000.0}, {"new": 10.0})
    assert not verdict.ok and verdict.budget is None and "--update" in verdict.note


def test_a_workload_well_under_its_budget_passes_with_a_hint_to_lower_it():
    (verdict,) = instructions.compare({"a": 1000.0}, {"a": 600.0})
    assert verdict.ok and "under budget" in verdict.note


def test_the_table_shows_budget_measured_ratio_and_verdict():
    text = instructions.table(instructions.compare({"read": 10_000.0}, {"read": 12_000.0, "new": 5.0}))
    assert "workload" in text and "budget" in text and "measured" in text and "ratio" in text
    read = next(line for line in text.splitlines() if "read" in line)
    assert "10,000" in read and "12,000" in read and "1.200" in read and "FAIL" in read
    assert "PASS" not in text


def test_an_update_keeps_the_other_workloads_and_records_the_reason(tmp_path):
    old = instructions.load_budget()
    new = instructions.updated_budget(old, {"dispatch": 1234.4}, "  handlers settle in bulk  ", 500, "2030-01-02")
    assert new["workloads"]["dispatch"] == {
        "instructions_per_message": 1234,
        "date": "2030-01-02",
        "why": "handlers settle in bulk",
    }
    for name in set(instructions.WORKLOADS) - {"dispatch"}:
        assert new["workloads"][name] == old["workloads"][name]
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(new))
    assert instructions.load_budget(str(path))["workloads"] == new["workloads"]
    with pytest.raises(ValueError, match="reason"):
        instructions.updated_budget(old, {"dispatch": 1.0}, " ", 500, "2030-01-02")


@pytest.mark.parametrize("why", [None, "", "   "])
def test_update_without_a_reason_is_refused_before_measuring(tmp_path, why):
    budget = tmp_path / "budget.json"
    budget.write_text((ROOT / "bench" / "instruction_budget.json").read_text())
    args = ["--update", "--budget", str(budget)] + ([] if why is None else ["--why", why])
    proc = _script(*args)
    assert proc.returncode == 2
    assert "--update needs --why" in proc.stderr
    assert budget.read_text() == (ROOT / "bench" / "instruction_budget.json").read_text()


def test_update_at_another_size_than_the_budget_is_refused(tmp_path):
    budget = tmp_path / "budget.json"
    budget.write_text((ROOT / "bench" / "instruction_budget.json").read_text())
    proc = _script("--update", "--why", "smaller", "--messages", "500", "--budget", str(budget))
    assert proc.returncode == 2 and "budget's size" in proc.stderr
    assert budget.read_text() == (ROOT / "bench" / "instruction_budget.json").read_text()


def test_a_damaged_budget_file_is_named(tmp_path):
    budget = tmp_path / "budget.json"
    budget.write_text('{"workloads": {"dispatch": {"instructions_per_message": 10, "date": "2030-01-02"}}}')
    with pytest.raises(instructions.BudgetError, match="dispatch.*'why'"):
        instructions.load_budget(str(budget))
    proc = _script("--budget", str(budget))
    assert proc.returncode == 2 and str(budget) in proc.stderr


def test_every_workload_runs_natively_and_handles_every_message():
    proc = _script("--no-valgrind", "--messages", "200", "--jobs", "1")
    assert proc.returncode == 0, proc.stderr
    assert "4 workloads ran natively on 200 and 600 messages" in proc.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)")
@pytest.mark.timeout(600)
def test_a_workload_over_its_budget_fails_under_callgrind(tmp_path):
    budget = tmp_path / "budget.json"
    one = {"instructions_per_message": 1, "date": "2030-01-02", "why": "a budget nothing can meet"}
    budget.write_text(json.dumps({"workloads": {"read_stream bytes": one}}))
    proc = _script("--only", "read_stream bytes", "--messages", "200", "--budget", str(budget), timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    row = next(
        line for line in proc.stdout.splitlines() if line.strip().startswith("read_stream bytes") and "FAIL" in line
    )
    measured = float(row.split()[3].replace(",", ""))
    assert measured > 100  # a read costs instructions per message: the count is real
    assert "== FAIL: read_stream bytes over budget" in proc.stdout
