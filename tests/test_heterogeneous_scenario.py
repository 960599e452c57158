"""``fedemu run heterogeneous``: mixed machine types, per-job demands and alpha, gang on; every invariant
holds (gangs_whole among them) and the run has what the scenario says it has."""

from __future__ import annotations

import pytest

from fedemu.tools.run.runner import execute
from scheduler_helpers import recorder_of


@pytest.mark.parametrize("scheduler", ["megha", "centralized"])
def test_the_heterogeneous_scenario_runs_mixed_machines_demands_alpha_and_gangs(scheduler):
    r = execute("heterogeneous", overrides={"scheduler": scheduler, "jobs": 120})
    s = r.summary
    assert set(s["invariants"].values()) == {"ok"} and "gangs_whole" in s["invariants"], s["invariants"]
    assert s["jobs_completed"] + s["unschedulable"] == 120 and s["jobs_completed"] > 100
    rec = recorder_of(r.fabric)
    assert len({tuple(c) for c in rec.machines.values()}) == 3
    done = [j for j in rec.jobs.values() if j.completion_us >= 0]
    assert {j.demand for j in done} == {(1, 2), (2, 4), (4, 8)}
    assert all(j.gang and 0.3 <= j.alpha <= 0.9 and j.committed_us >= j.arrival_us for j in done)
    assert len({j.alpha for j in done}) == len(done)
    faster = [t for t in rec.tasks.values() if t.end_us >= 0 and t.end_us - t.start_us < t.duration_us]
    assert faster  # tasks on the faster types ran shorter than their nominal duration (Amdahl)
    assert s["gang_wait_s"]["count"] == len(done)
