"""Properties every scheduler in the registry keeps across random small clusters and workloads: each job
completes or is rejected, each task runs exactly once for its duration (FederationRun.check), no worker
ever exceeds its capacity (the Worker asserts it) and all are whole at the end, constraint-aware
schedulers only place tasks on machines that satisfy them, and the same seed gives the same journal
digest."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.actors.registry import SCHEDULERS
from fedemu.scenarios.federation import COMMON
from scheduler_helpers import rebuilt, recorder_of, run_unless_refused

JOBS = 20
COMMON_KEYS = {p.name for p in COMMON}

workloads = st.fixed_dictionaries({
    "lms": st.integers(1, 3),
    "gms": st.integers(1, 3),
    "workers_per_partition": st.integers(1, 4),
    "capacity": st.sampled_from(["1", "2", "3"]),
    "fanout": st.integers(1, 12),
    "load": st.floats(0.3, 1.5),
    "task_dist": st.sampled_from(["exp", "const"]),
    "constraints": st.booleans(),
    "policy": st.sampled_from(["random", "min-constraints"]),
    "short_cutoff_s": st.sampled_from([0.5, 1.0, 90.0]),
    "masters": st.sampled_from([0, 1]),
    "distributors": st.integers(1, 3),
    "reserved_fraction": st.sampled_from([0.0, 0.02, 0.3]),
    "fqw": st.sampled_from([0, 1, 3, math.inf]),
    "schedulers": st.integers(1, 3),
    "heartbeat_s": st.sampled_from([0.2, 1.0]),
})


def overrides_for(name, params):
    """The drawn keys that apply to scheduler ``name`` (a key that does not apply is an error)."""
    s = SCHEDULERS[name]
    keep = (COMMON_KEYS - ({"policy"} if not s.takes_policy else set())) | set(s.param_names)
    return {**{k: v for k, v in params.items() if k in keep}, "scheduler": name, "jobs": JOBS}


def check_placements(result, overrides, seed):
    cluster, jobs = rebuilt(overrides, seed)
    provides = {w.worker_id: set(w.constraints) for w in cluster.workers()}
    for (job_id, index), task in recorder_of(result.fabric).tasks.items():
        if task.worker >= 0:
            assert set(jobs[job_id].constraints[index]) <= provides[task.worker], (job_id, index)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=workloads, seed=st.integers(0, 2**16))
def test_every_scheduler_runs_each_task_once_within_capacity(params, seed):
    for scheduler in SCHEDULERS:
        overrides = overrides_for(scheduler, params)
        r = run_unless_refused(overrides, seed)
        if r is None:
            return  # no job can run on this cluster, whichever scheduler
        s = r.summary
        assert s["jobs_completed"] + s["unschedulable"] == s["jobs"] == JOBS, scheduler
        fabric = r.fabric
        recorder = recorder_of(fabric)
        rejected = {job_id for job_id, _ in recorder.unschedulable}
        runnable = sum(j.num_tasks for j in recorder.jobs.values() if j.job_id not in rejected)
        assert s["tasks_completed"] == runnable, scheduler
        for name in fabric.names:
            if name.startswith("w-"):
                stats = fabric.actor(fabric.addr(name)).statistics()
                assert stats.running == 0, (scheduler, name)
                assert stats.free == (int(params["capacity"]),), (scheduler, name)
            elif name.startswith("master-"):
                master = fabric.actor(fabric.addr(name)).statistics()
                assert master.queued_high == master.queued_low == 0
        if SCHEDULERS[scheduler].constraint_aware:
            check_placements(r, overrides, seed)
        else:
            assert "constraint_violations" in dict(SCHEDULERS[scheduler].counters)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=workloads, seed=st.integers(0, 2**16), scheduler=st.sampled_from(sorted(SCHEDULERS)))
def test_same_seed_same_digest(params, seed, scheduler):
    overrides = overrides_for(scheduler, params)
    a = run_unless_refused(overrides, seed)
    if a is None:
        return
    b = run_unless_refused(overrides, seed)
    assert a.digest == b.digest
    assert a.summary["delay_s"] == b.summary["delay_s"]
