"""Heterogeneous machines (``machine_types``) and TEBAS's Amdahl run time (``alpha``).

Checked: the text format and its one-line errors, the proportions every cluster gets, run times equal to
``duration x ((1 - alpha) + alpha / k_n)`` on the machine each task ran on, for every scheduler, and the
``tasks_ran_once`` check catching a task run for its nominal duration on a fast machine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors import registry
from fedemu.actors.common.invariants import tasks_ran_once
from fedemu.fabric.errors import ConfigError
from fedemu.model import Cluster, ClusterSpec, Job, Recorder, WorkerSpec, run_time_us
from fedemu.scenarios import machines
from fedemu.tools.run.runner import execute

from scheduler_helpers import rebuilt, recorder_of

MIXED = "4x16@1.0:60,8x32@1.5:40"
RUN = {"machine_types": MIXED, "demand": "1,2", "alpha": "U(0.2,0.9)", "jobs": 40, "constraints": False}


def test_the_text_parses_into_capacity_speed_and_share():
    assert machines.parse(MIXED) == (machines.MachineType((4, 16), 1.0, 60.0), machines.MachineType((8, 32), 1.5, 40.0))
    assert machines.parse("8:1") == (machines.MachineType((8,), 1.0, 1.0),)


@pytest.mark.parametrize("text", ["", "4x16", "4x16@1:0", "4x16@0.5:1", "4x0@1:1", "4x16@1:1,8@1:1", "ax2@1:1",
                                  "4x16@nan:1", "1x1x1x1x1@1:1"])
def test_bad_machine_types_are_one_config_error_naming_key_and_value(text):
    with pytest.raises(ConfigError) as err:
        machines.parse(text)
    assert "'machine_types'" in str(err.value) and repr(text) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("text", ["-0.1", "1.5", "U(0.5,0.2)", "U(0,2)", "x", "U(1)"])
def test_bad_alpha_is_one_config_error(text):
    with pytest.raises(ConfigError, match="parameter 'alpha'"):
        machines.parse_alpha(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=5), st.integers(1, 400))
def test_counts_follow_the_shares_within_one_machine(shares, n):
    types = tuple(machines.MachineType((1,), 1.0, float(s)) for s in shares)
    got = machines.counts(types, n)
    assert sum(got) == n
    for k, s in zip(got, shares):
        assert abs(k - n * s / sum(shares)) < 1


def test_every_cluster_gets_the_mix_and_constraints_stay_as_they_were():
    cluster, _ = rebuilt({"machine_types": MIXED, "demand": "1,2"}, seed=3)
    plain, _ = rebuilt({"capacity": "4,16", "demand": "1,2"}, seed=3)
    assert cluster.resources == ("cpu", "mem")
    for spec, before in zip(cluster.clusters, plain.clusters):
        fast = sum(w.speed == 1.5 for w in spec.workers)
        assert fast == round(0.4 * len(spec.workers))
        assert all((w.capacity, w.speed) in (((4, 16), 1.0), ((8, 32), 1.5)) for w in spec.workers)
        assert [w.constraints for w in spec.workers] == [w.constraints for w in before.workers]


def test_capacity_and_machine_types_together_are_refused():
    with pytest.raises(ConfigError, match="'capacity'.*'machine_types'"):
        rebuilt({"machine_types": MIXED, "capacity": "4,16"}, seed=1)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 10**9), st.floats(0, 1), st.floats(1, 16))
def test_run_time_is_the_amdahl_formula_rounded(duration, alpha, speed):
    got = run_time_us(duration, alpha, speed)
    assert abs(got - duration * ((1 - alpha) + alpha / speed)) <= 0.5 + 1e-6 * duration
    assert got <= duration
    assert run_time_us(duration, 0.0, speed) == duration and run_time_us(duration, alpha, 1.0) == duration


@pytest.mark.parametrize("scheduler", list(registry.SCHEDULERS))
def test_every_scheduler_runs_each_task_for_its_machine_adjusted_time(scheduler):
    result = execute("default", overrides={**RUN, "scheduler": scheduler})
    assert set(result.summary["invariants"].values()) == {"ok"}
    cluster, jobs = rebuilt({**RUN, "scheduler": scheduler}, seed=1)
    speed = {w.worker_id: w.speed for w in cluster.workers()}
    rec = recorder_of(result.fabric)
    faster = 0
    for (job_id, index), t in rec.tasks.items():
        job = jobs[job_id]
        assert rec.jobs[job_id].alpha == job.alpha and 0.2 <= job.alpha <= 0.9
        want = run_time_us(job.durations_us[index], job.alpha, speed[t.worker])
        assert t.end_us - t.start_us == want
        faster += want < t.duration_us
    assert faster > 0  # some tasks ran on the fast machines, and ran shorter


def test_alpha_unset_keeps_every_run_time_the_nominal_duration():
    overrides = {**RUN, "alpha": "0"}
    rec = recorder_of(execute("default", overrides=overrides).fabric)
    assert all(t.end_us - t.start_us == t.duration_us for t in rec.tasks.values())


def test_tasks_ran_once_catches_a_nominal_run_time_on_a_fast_machine():
    cluster = Cluster((ClusterSpec(0, "A", (WorkerSpec(0, 0, (2,), speed=2.0), WorkerSpec(1, 0, (2,)))),))
    rec = Recorder(total_units=4)
    rec.job_arrived(Job(0, 0, (1000, 1000), alpha=0.5))
    rec.task_started(0, 0, 0, 0)
    rec.task_finished(0, 0, 750)  # 1000 x (0.5 + 0.5 / 2): right on the fast machine
    rec.task_started(0, 1, 0, 1)
    rec.task_finished(0, 1, 1000)  # speed 1: the nominal duration is right
    rec.job_completed(0, 1000)
    assert tasks_ran_once(rec, cluster, 2000) == []
    rec.tasks[(0, 0)].end_us = 1000  # the nominal duration on the fast machine is wrong
    (v,) = tasks_ran_once(rec, cluster, 2000)
    assert v.subject == "task 0.0" and "750 us" in v.detail
    rec.tasks[(0, 0)].end_us = 750
    rec.tasks[(0, 1)].end_us = 750  # and the fast time on the slow one
    assert [v.subject for v in tasks_ran_once(rec, cluster, 2000)] == ["task 0.1"]


def test_a_demand_no_single_type_holds_is_rejected_at_submission():
    """4x8 and 8x4 machines: 6,6 fits neither though each resource fits some machine."""
    with pytest.raises(ConfigError, match="no job can run"):
        execute("default", overrides={"machine_types": "4x8@1:1,8x4@1:1", "demand": "6,6", "jobs": 5,
                                      "constraints": False})
    result = execute("default", overrides={"machine_types": "4x8@1:1,8x4@1:1", "demand": "4,4", "jobs": 5,
                                           "constraints": False})
    assert set(result.summary["invariants"].values()) == {"ok"}
