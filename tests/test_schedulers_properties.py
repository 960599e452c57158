"""Properties every scheduler keeps across random small clusters and workloads: each job completes or is
rejected, each task runs exactly once for its duration (FederationRun.check), no worker ever exceeds its
capacity (the Worker asserts it) and all are whole at the end, constraint-aware schedulers only place
tasks on machines that satisfy them, and the same seed gives the same journal digest."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.scenarios import federation
from fedemu.scenarios.default import PARAMS
from fedemu.tools.params import resolve
from fedemu.tools.runner import execute

SCHEDULERS = ("megha", "centralized", "pigeon", "pigeonc", "sparrow")
CONSTRAINT_AWARE = ("megha", "centralized", "pigeonc", "sparrow")
JOBS = 20

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


def run(scheduler, seed, params):
    return execute("default", seed=seed, overrides={**params, "scheduler": scheduler, "jobs": JOBS})


def recorder_of(fabric):
    return next(a.recorder for a in map(fabric.actor, range(len(fabric.names))) if hasattr(a, "recorder"))


def check_placements(result, scheduler, seed, params):
    overrides = {**params, "scheduler": scheduler, "jobs": JOBS}
    resolved = resolve(PARAMS, overrides)
    cluster, table = federation.build_cluster(resolved, seed)
    total = sum(w.capacity[0] for w in cluster.workers())
    jobs = {j.job_id: j for j in federation.build_workload(resolved, seed, total, table)}
    provides = {w.worker_id: set(w.constraints) for w in cluster.workers()}
    recorder = recorder_of(result.fabric)
    for (job_id, index), task in recorder.tasks.items():
        if task.worker >= 0:
            assert set(jobs[job_id].constraints[index]) <= provides[task.worker], (scheduler, job_id, index)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=workloads, seed=st.integers(0, 2**16))
def test_every_scheduler_runs_each_task_once_within_capacity(params, seed):
    for scheduler in SCHEDULERS:
        r = run(scheduler, seed, params)
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
        if scheduler in CONSTRAINT_AWARE:
            check_placements(r, scheduler, seed, params)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=workloads, seed=st.integers(0, 2**16), scheduler=st.sampled_from(SCHEDULERS))
def test_same_seed_same_digest(params, seed, scheduler):
    a, b = run(scheduler, seed, params), run(scheduler, seed, params)
    assert a.digest == b.digest
    assert a.summary["delay_s"] == b.summary["delay_s"]
