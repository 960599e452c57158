"""Megha end to end: fixed message path at low load, invalid requests under contention, exactly-once
execution, unschedulable jobs, fine-grained capacities, determinism."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.tools.run.runner import execute
from scheduler_helpers import recorder_of, run_unless_refused

LOW_LOAD = {"workload": "syn_100", "jobs": 30, "gms": 10, "lms": 10, "workers_per_partition": 10,
            "constraints": False, "cost_model": "zero"}  # the message path alone: handlers take no time


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
    # The default constraint table gives some tasks a constraint set no machine provides.
    r = run(jobs=100)
    s, rec = r.summary, recorder_of(r.fabric)
    assert 0 < s["unschedulable"] < 100
    assert s["jobs_completed"] + s["unschedulable"] == 100
    assert s["counters"]["unschedulable_tasks"] == sum(len(bad) for _, bad in rec.unschedulable)
    for job_id, _ in rec.unschedulable:  # never queued, never launched
        job = rec.jobs[job_id]
        assert job.completion_us == -1
        assert all(rec.tasks[(job_id, i)].attempts == 0 and rec.tasks[(job_id, i)].worker == -1
                   for i in range(job.num_tasks))


def test_fine_grained_capacity_vectors():
    """(cpu, mem) = (4, 16) machines, tasks of (1, 5): memory allows three at once, cpu four. Rebuilt
    from the recorder, no machine ever holds more than its capacity, some hold three, and every task of
    every admitted job ran exactly once for its duration."""
    r = run(capacity="4,16", demand="1,5", jobs=100, load=0.9, gms=2, lms=2, workers_per_partition=10)
    s, rec = r.summary, recorder_of(r.fabric)
    assert s["jobs_completed"] + s["unschedulable"] == 100
    rejected = {job_id for job_id, _ in rec.unschedulable}
    events = {}
    for (job_id, index), t in rec.tasks.items():
        if job_id in rejected:
            assert t.start_us == -1
            continue
        assert t.attempts >= 1 and t.worker >= 0 and t.end_us - t.start_us == t.duration_us
        events.setdefault(t.worker, []).extend([(t.end_us, -1), (t.start_us, 1)])
    assert sum(len(e) for e in events.values()) // 2 == s["tasks_completed"] > 0
    peak = 0
    for worker, changes in events.items():
        running = 0
        for _, delta in sorted(changes):  # at equal times the end comes first (-1 < 1)
            running += delta
            assert running * 5 <= 16 and running * 1 <= 4, (worker, running)
            peak = max(peak, running)
    assert peak == 3


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


@pytest.mark.parametrize("key,value,message", [
    ("policy", "minconstraint", "unknown policy 'minconstraint'; known: binpack, d-choices, min-constraints, random, spread, tebas"),
    ("scheduler", "yarn", "unknown scheduler 'yarn'; known: centralized, eagle, hawk, megha, pigeon, pigeonc, sparrow"),
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
    r = run_unless_refused(dict(gms=gms, lms=lms, workers_per_partition=wpp, capacity=str(slots), jobs=25,
                                fanout=fanout, load=load, constraints=constraints, policy=policy, heartbeat_s=0.5),
                           seed)
    if r is None:
        return
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


def test_a_gm_reports_how_old_its_view_of_each_lm_is_and_what_it_has_in_flight():
    """After a busy run every GM has heard from every LM (ages below the end time), and its in-flight
    count is the launches it sent and has not heard back about (none once every job is done)."""
    result = execute("default", overrides={"jobs": 40, "load": 0.95})
    fabric = result.fabric
    gms = [fabric.actor(fabric.addr(f"gm-{g}")).statistics() for g in range(3)]
    for stats in gms:
        assert len(stats.view_age_us) == 4
        assert all(0 <= age < fabric.now for age in stats.view_age_us), stats.view_age_us
        assert stats.inflight == 0


def test_every_valid_launch_is_answered_with_the_gms_unseen_changes_unless_only_failures_are():
    """launch_replies=delta (the default): one LaunchOk per valid launch; 'failures': none, as before."""
    from fedemu.tools.run.runner import execute
    for replies, expect_ok in (("delta", True), ("failures", False)):
        s = execute("default", overrides={"jobs": 60, "launch_replies": replies}).summary
        kinds, c = s["messages_by_kind"], s["counters"]
        valid = kinds["megha.launch"] - c.get("invalid_internal", 0) - c.get("invalid_external", 0)
        assert kinds.get("megha.launch_ok", 0) == (valid if expect_ok else 0)
        assert set(s["invariants"].values()) == {"ok"}


@pytest.mark.parametrize("refresh", ["delta", "full"])
def test_without_faults_no_recovery_runs_and_only_the_papers_messages_are_sent(refresh):
    """Recovery starts from a broken connection or a new LM epoch, never from a snapshot the view refresh
    asked for (view_refresh=full asked every launch again at each completion, one GM's 60 jobs sent
    thousands of launches more): a fault-free run retries, resyncs and abandons nothing."""
    s = run(jobs=60, gms=2, lms=3, workers_per_partition=10, load=0.9, constraints=False, view_refresh=refresh).summary
    assert not {"launches_retried", "launches_abandoned", "view_resyncs", "duplicate_launches_suppressed"} & set(
        s["counters"])
    kinds = set(s["messages_by_kind"])
    assert kinds <= {"job", "megha.launch", "megha.launch_ok", "megha.launch_failed", "megha.task_completed",
                     "megha.heartbeat", "worker.run", "worker.finished", "submit.job_done"} | (
        {"megha.snapshot_request", "megha.snapshot"} if refresh == "full" else set())
