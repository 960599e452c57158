"""Megha end to end: fixed message path at low load, invalid requests under contention, exactly-once
execution, unschedulable jobs, fine-grained capacities, determinism."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.tools.runner import execute

LOW_LOAD = {"workload": "syn_100", "jobs": 30, "gms": 10, "lms": 10, "workers_per_partition": 10,
            "constraints": False}


def run(seed=1, **overrides):
    return execute("default", seed=seed, overrides=overrides)


def test_low_load_delay_is_the_fixed_message_path():
    # submit->GM, GM->LM launch, LM->worker, worker->LM done, LM->GM completion: 5 hops of 0.5 ms.
    s = run(**LOW_LOAD).summary
    assert s["jobs_completed"] == 30
    assert s["delay_s"]["p50"] == pytest.approx(0.0025)
    assert s["delay_s"]["max"] == pytest.approx(0.0025)
    assert s["counters"].get("invalid_internal", 0) == 0
    assert s["messages_by_kind"]["megha.launch"] == 3000


def test_latency_scales_the_fixed_path():
    s = run(**{**LOW_LOAD, "latency_ms": 2.0}).summary
    assert s["delay_s"]["max"] == pytest.approx(0.010)


def test_high_load_several_gms_invalid_requests_answered_and_every_task_runs_once():
    r = run(seed=3, gms=4, lms=3, workers_per_partition=5, load=0.95, jobs=300, fanout=8, heartbeat_s=1.0)
    s = r.summary
    counters = s["counters"]
    invalid = counters.get("invalid_internal", 0) + counters.get("invalid_external", 0)
    assert invalid > 0
    # every invalid request was answered with state: one LaunchFailed each, and the task relaunched
    assert s["messages_by_kind"]["megha.launch_failed"] == invalid
    assert s["messages_by_kind"]["megha.launch"] == s["tasks_completed"] + invalid
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"] == 300
    assert counters.get("repartitions", 0) > 0
    # FederationRun.check() (run inside finish) asserted every task started and ended exactly once
    fabric = r.fabric  # the fabric still holds the actors: every worker is idle and whole at the end
    for name in fabric.names:
        if name.startswith("w-"):
            stats = fabric.actor(fabric.addr(name)).statistics()
            assert stats.running == 0 and stats.free == (1,)


def test_unschedulable_task_is_rejected_at_submission_not_queued():
    # Demand 2 slots on 1-slot machines: nothing can ever run it.
    s = run(jobs=5, demand="2").summary
    assert s["unschedulable"] == 5
    assert s["jobs_completed"] == 0
    assert s["counters"]["unschedulable_tasks"] == 50
    assert s["virtual_end_s"] < 1.0  # the run ended; nothing waited forever


def test_fine_grained_capacity_vectors():
    s = run(capacity="4,16", demand="1,3", jobs=100, load=0.9, gms=2, lms=2, workers_per_partition=10).summary
    assert s["jobs_completed"] + s["unschedulable"] == 100
    assert s["jobs_completed"] > 0


def test_centralized_is_one_gm_one_lm_same_command():
    r = run(scheduler="centralized", jobs=100)
    assert r.fabric.names[:2] == ["gm-0", "lm-0"]
    assert r.summary["jobs_completed"] + r.summary["unschedulable"] == 100
    assert r.summary["counters"].get("invalid_internal", 0) == 0  # one GM: its view is never contradicted


def test_deterministic_digest_and_numbers():
    a, b = run(seed=5, jobs=120), run(seed=5, jobs=120)
    assert a.digest == b.digest
    assert a.summary["delay_s"] == b.summary["delay_s"]
    assert run(seed=6, jobs=120).digest != a.digest


def test_min_constraints_policy_runs_and_differs():
    a = run(jobs=150, policy="min-constraints")
    b = run(jobs=150, policy="random")
    assert a.digest != b.digest
    assert a.summary["jobs_completed"] + a.summary["unschedulable"] == 150


@pytest.mark.parametrize("key,value,message", [
    ("policy", "minconstraint", "unknown policy 'minconstraint'; known: min-constraints, random"),
    ("scheduler", "yarn", "unknown scheduler 'yarn'; known: centralized, megha, pigeon, pigeonc, sparrow"),
    ("workload", "zipf", "unknown workload 'zipf'; known: poisson, syn_N, trace"),
    ("workers", 1001, "workers=1001 is not a multiple of gms*lms=12"),
    ("heartbeat_s", 0, "parameter 'heartbeat_s' is 0; expected a finite number > 0"),
])
def test_bad_parameters_are_clear_errors(key, value, message):
    with pytest.raises(ConfigError) as err:
        run(**{key: value})
    assert str(err.value) == message


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gms=st.integers(1, 3), lms=st.integers(1, 3), wpp=st.integers(1, 4), slots=st.integers(1, 3),
       fanout=st.integers(1, 12), load=st.floats(0.3, 1.5), seed=st.integers(0, 2**16),
       constraints=st.booleans(), policy=st.sampled_from(["random", "min-constraints"]))
def test_property_exactly_once_and_capacity(gms, lms, wpp, slots, fanout, load, seed, constraints, policy):
    """Random clusters, constraint assignments and workloads: every job completes or is rejected,
    every task runs once for its duration (FederationRun.check), no worker exceeds its capacity
    (the Worker asserts it on every launch, the LM on every release)."""
    r = run(seed=seed, gms=gms, lms=lms, workers_per_partition=wpp, capacity=str(slots), jobs=25,
            fanout=fanout, load=load, constraints=constraints, policy=policy, heartbeat_s=0.5)
    s = r.summary
    assert s["jobs_completed"] + s["unschedulable"] == 25
    for name in r.fabric.names:
        if name.startswith("lm-"):
            lm = r.fabric.actor(r.fabric.addr(name))
            assert all(f == list(c) for f, c in zip(lm.free, lm.capacity))


def test_centralized_runs_on_the_same_machines_as_megha():
    """The cluster is described once: centralized Megha merges the LMs' clusters, same ids and constraints."""
    a = run(scheduler="centralized", jobs=50)
    b = run(scheduler="megha", jobs=50)
    workers = lambda r: sorted(  # noqa: E731
        (a.spec.worker_id, a.spec.constraints) for a in map(r.fabric.actor, range(len(r.fabric.names)))
        if a is not None and hasattr(a, "spec"))
    assert workers(a) == workers(b)
    assert a.summary["unschedulable"] == b.summary["unschedulable"]
