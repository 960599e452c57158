"""The failover scenario takes every scheduler through its recovery protocols and ends with every
invariant ok; the recoveries it is written for happen (takeovers, a GM rebuild, an election-free failover)."""

from __future__ import annotations

import pytest

from fedemu.tools.run.runner import execute

EXPECT = {  # counters the scenario's plan must drive above zero, per scheduler
    "megha": ("failovers", "gm_rebuilds", "gm_lm_switches"),
    "centralized": ("failovers", "gm_rebuilds", "gm_lm_switches"),
    "pigeon": ("failovers", "jobs_redistributed"),
    "pigeonc": ("failovers", "jobs_redistributed"),
    "sparrow": ("jobs_resubmitted",),
}


@pytest.mark.parametrize("scheduler", sorted(EXPECT))
def test_the_failover_scenario_recovers_every_scheduler(scheduler):
    s = execute("failover", overrides={"scheduler": scheduler, "jobs": 150}).summary
    assert set(s["invariants"].values()) == {"ok"}, s["invariants"]
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"]
    assert all(s["counters"].get(c, 0) >= 1 for c in EXPECT[scheduler]), s["counters"]
    assert s["faults"]["crashes"] >= 6 and s["faults"]["recovery_s"]["count"] >= (scheduler != "sparrow")
