"""The PolicyExplorer: its controls change the simulation and the figures (driven through ``.value``),
and in the background a dragged slider makes few runs, the last one with the final values."""

from __future__ import annotations

import pytest

import nbkit.widgets
from nbkit import RetryPolicy, Workload
from nbkit.notebook import policy_explorer as module
from nbkit.notebook.policy_explorer import PolicyExplorer, explore

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def explorer():
    ex = PolicyExplorer(Workload(messages=40, span=20, failure_rate=0.0), RetryPolicy(max_attempts=3), background=False)
    yield ex
    ex.close()


def figures(ex: PolicyExplorer) -> tuple[bytes, bytes]:
    return bytes(ex.dashboard.value), bytes(ex.timeline.value)


def test_it_starts_with_a_run_of_the_given_workload_and_policy(explorer):
    assert explorer.runs == 1
    assert explorer.workload == Workload(messages=40, span=20, failure_rate=0.0)
    assert explorer.policy == RetryPolicy(max_attempts=3)
    dashboard, timeline = figures(explorer)
    assert dashboard.startswith(PNG) and timeline.startswith(PNG)
    summary = explorer.result.summary
    assert summary.loc["file", "delivered"] == summary.loc["pipe", "delivered"] == 40
    assert "nbkit-explorer-summary" in explorer.summary_view.value and "dead-lettered" in explorer.summary_view.value
    assert "40 messages" in explorer.status.value and "run 1" in explorer.status.value
    assert repr(explorer).startswith("PolicyExplorer(Workload(messages=40")


def test_changing_the_failure_rate_reruns_and_redraws(explorer):
    before = figures(explorer)
    explorer.controls["failure_rate"].value = 1.0
    assert explorer.runs == 2
    summary = explorer.result.summary
    assert summary.loc["file", "dead-lettered"] == summary.loc["pipe", "dead-lettered"] == 40
    assert summary.loc["file", "copies written"] == 3 * 40
    after = figures(explorer)
    assert after[0] != before[0] and after[1] != before[1]
    assert ">40<" in explorer.summary_view.value.replace(" ", "")


def test_the_policy_controls_reach_the_handler(explorer):
    c = explorer.controls
    c["failure_rate"].value = 1.0
    c["backoff"].value = "linear"
    c["delay"].value = 3.0
    c["max_attempts"].value = 4
    events = explorer.result.events
    assert explorer.runs == 5
    assert sorted(events.loc[events["action"] == "delayed-copy", "delay"].unique()) == [3.0, 6.0, 9.0]
    shown = figures(explorer)
    c["capped"].value = True
    c["max_delay"].value = 5.0
    events = explorer.result.events
    assert sorted(events.loc[events["action"] == "delayed-copy", "delay"].unique()) == [3.0, 5.0]
    assert figures(explorer) != shown
    c["dead_letter"].value = False
    assert explorer.result.summary.loc["file", "rejected"] == 40
    assert "then rejected" in explorer.status.value


def test_the_optional_fields_are_switched_by_their_checkboxes(explorer):
    c = explorer.controls
    assert c["heal_after"].disabled and explorer.workload.heal_after is None
    c["failure_rate"].value = 1.0
    c["heals"].value = True
    c["heal_after"].value = 10.0
    assert not c["heal_after"].disabled and explorer.workload.heal_after == 10.0
    summary = explorer.result.summary
    assert summary.loc["file", "dead-lettered"] < 40  # the messages arriving after 10 s succeed
    assert c["max_delay"].disabled and explorer.policy.max_delay is None


def test_a_failing_run_is_shown_not_raised(explorer, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(module, "simulate", broken)
    explorer.controls["delay"].value = 2.0
    assert "error: RuntimeError: disk full" in explorer.status.value
    assert explorer.runs == 1


def test_in_the_background_a_drag_is_coalesced_into_few_runs_with_the_final_values():
    ex = PolicyExplorer(Workload(messages=30, span=10, failure_rate=0.5), background=True, debounce=0.2)
    try:
        assert ex.runs == 1  # the first run is made at once, so the views are never empty
        slider = ex.controls["delay"]
        for value in range(1, 21):  # a drag: 20 values in quick succession
            slider.value = value / 2
        assert ex.wait(timeout=60)
        assert 2 <= ex.runs <= 3
        assert ex.result.policy.delay == 10.0 and ex.result.policy == ex.policy
    finally:
        ex.close()


def test_explore_runs_without_widgets():
    result = explore(Workload(messages=10, failure_rate=1.0), RetryPolicy(max_attempts=2), timeline_messages=5)
    assert result.summary.loc["pipe", "dead-lettered"] == 10
    assert result.dashboard_png.startswith(PNG) and result.timeline_png.startswith(PNG) and result.seconds > 0


def test_it_is_in_nbkit_widgets_and_checks_its_arguments():
    assert nbkit.widgets.PolicyExplorer is PolicyExplorer
    with pytest.raises(ValueError, match="workload must be an nbkit.Workload"):
        PolicyExplorer(workload={"messages": 3}, background=False)
    with pytest.raises(ValueError, match="policy must be an nbkit.RetryPolicy"):
        PolicyExplorer(policy=3, background=False)


def test_a_browser_echoing_a_value_with_rounding_noise_does_not_rerun(explorer):
    explorer.controls["span"].value = 19.999999999999996  # what a slider's step arithmetic sends back for 20.0
    assert explorer.runs == 1
    assert explorer.workload.span == 20.0


def test_each_readout_shows_the_value_and_the_step_exactly():
    workload = Workload(messages=40, span=20, failure_rate=0.05, poison=0.005)
    ex = PolicyExplorer(workload, RetryPolicy(max_attempts=3, delay=2.5), background=False)
    try:
        poison = ex.controls["poison"]
        assert format(poison.value, poison.readout_format) == "0.005"  # d3's ".3f" is Python's
        for name, control in ex.controls.items():
            if hasattr(control, "readout_format") and hasattr(control, "step"):
                for number in (control.value, control.step):
                    assert float(format(number, control.readout_format)) == pytest.approx(number, abs=1e-12), name
    finally:
        ex.close()
