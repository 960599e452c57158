"""Gang scheduling (``--set gang=true``, actors/megha/gang.py): all-or-nothing jobs in Megha and centralized.

A one-LM gang (centralized) is one local decision; a gang spanning LMs is reserved on each, then
committed or released. Faults: a GM that dies mid-reservation leaves holds that the LMs' leases let go;
an LM that loses a hold has the commit checked again. ``gangs_whole`` bites on a task started before its
gang's commit and on a partial gang, and the fault search's plans never make a gang run partially."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from fedemu.actors.common.invariants import gangs_whole
from fedemu.actors.megha.gang import whole_fit
from fedemu.actors.megha.local_manager import LocalManager
from fedemu.fabric.errors import ConfigError
from fedemu.model import Cluster, ClusterSpec, Job, Recorder, WorkerSpec
from fedemu.scenarios import fault_plan
from fedemu.tools.search import strategies
from fedemu.tools.run.runner import execute
from scheduler_helpers import recorder_of

# two LMs of two 1-slot workers and gangs of 3 or 4 tasks: every gang spans both LMs
SPAN = {"gms": 1, "lms": 2, "workers_per_partition": 2, "constraints": False, "fanout": 3, "jobs": 6,
        "task_s": 0.5, "task_dist": "const", "load": 0.5, "gang": True, "cost_model": "zero"}


def run(plan_tables=(), seed=1, **overrides):
    plan = fault_plan.from_tables(list(plan_tables), "test plan") if plan_tables else None
    r = execute("default", seed=seed, overrides=overrides, faults=plan)
    s = r.summary
    assert set(s["invariants"].values()) == {"ok"}, s["invariants"]
    assert "gangs_whole" in s["invariants"]
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"]
    return r


def gang_lms(r):
    return [a.gang for a in map(r.fabric.actor, range(len(r.fabric.names)))
            if isinstance(a, LocalManager) and a.gang is not None]


def starts(rec, job_id, n):
    return [rec.tasks[(job_id, i)].start_us for i in range(n)]


def test_centralized_gangs_are_one_local_decision_each():
    r = run(scheduler="centralized", gang=True, jobs=60, load=0.95)
    c, rec = r.summary["counters"], recorder_of(r.fabric)
    done = [j for j in rec.jobs.values() if j.completion_us >= 0]
    assert c["gang_attempts"] == len(done)  # one LM, one decision: nothing to abort or release
    assert "gang_aborts" not in c and "gang_refusals" not in c
    for job in done:
        assert min(starts(rec, job.job_id, job.num_tasks)) >= job.committed_us >= job.arrival_us


def test_megha_gangs_spanning_lms_are_reserved_then_committed_and_conflicts_released():
    r = run(gang=True, jobs=80, load=0.95, fanout=12, seed=3)
    c, rec = r.summary["counters"], recorder_of(r.fabric)
    assert c["gang_attempts"] > c.get("gang_aborts", 0) > 0  # three GMs race for the same machines
    assert c["gang_refusals"] > 0
    for job in rec.jobs.values():
        if job.completion_us >= 0:
            assert min(starts(rec, job.job_id, job.num_tasks)) >= job.committed_us
    assert all(not lm.holds for lm in gang_lms(r))  # every hold was committed or let go


def test_a_gang_that_cannot_fit_even_idle_machines_is_rejected_at_submission():
    r = run(**{**SPAN, "fanout": 5})  # 5 tasks of 1 slot, 4 slots in all
    assert r.summary["unschedulable"] == SPAN["jobs"] and r.summary["counters"].get("gang_attempts", 0) == 0


def test_whole_fit_places_the_most_constrained_tasks_first():
    a, b = WorkerSpec(0, 0, (1,), (3, 12)), WorkerSpec(1, 0, (1,), (3,))
    assert whole_fit((a, b), ((3,), (12,)), (1,))  # (12,) first takes a, (3,) then b
    assert not whole_fit((a, b), ((12,), (12,)), (1,))
    assert not whole_fit((a, b), ((), (), ()), (1,))
    assert whole_fit((WorkerSpec(0, 0, (4, 8), ()),), ((), ()), (2, 4))
    assert not whole_fit((WorkerSpec(0, 0, (4, 8), ()),), ((), ()), (2, 5))


def first_arrival_us(**overrides):
    rec = recorder_of(execute("default", overrides=overrides).fabric)
    return min(j.arrival_us for j in rec.jobs.values())


def test_a_gm_that_dies_mid_reservation_leaves_holds_that_the_leases_let_go():
    at = first_arrival_us(**SPAN)
    # the GM hears of the job at +0.5 ms and reserves at once (the holds are taken at +1 ms); it dies before
    # the votes are back (they are lost with its connections), for longer than the lease: the holds must go
    # by themselves, and the job still runs, whole
    r = run([{"at_s": (at + 1200) / 1e6, "kind": "crash", "target": "gm-0", "for_s": 3.0}], **SPAN)
    c = r.summary["counters"]
    assert c["gang_leases_expired"] >= 2 and c["gm_rebuilds"] == 1
    assert all(not lm.holds for lm in gang_lms(r))


def test_an_lm_that_loses_its_hold_before_the_commit_has_the_commit_checked_again():
    at = first_arrival_us(**SPAN)
    # lm-0 votes yes at +1 ms (heard at +1.5 ms) and restarts (memory lost) at +2 ms, before the commit, which
    # waits for lm-1's vote over a link slowed x3 (heard at +3.5 ms), reaches it at +4 ms (a vote or a commit
    # in flight when an end crashes is lost with the connection)
    r = run([{"at_s": 0.0, "kind": "slow", "link": ["gm-0", "lm-1"], "value": 3.0},
             {"at_s": (at + 2000) / 1e6, "kind": "crash", "target": "lm-0", "for_s": 0.0003}], **SPAN)
    c = r.summary["counters"]
    assert c["lm_rebuilds"] >= 1 and c["gang_commits_rechecked"] >= 1


def test_a_standby_lm_takes_over_mid_gang():
    at = first_arrival_us(**SPAN, lm_standby=True)
    r = run([{"at_s": (at + 1200) / 1e6, "kind": "crash", "target": "lm-1", "for_s": 5.0}], **SPAN,
            lm_standby=True)
    assert r.summary["counters"]["failovers"] >= 1


@pytest.mark.parametrize("scheduler", ["pigeon", "pigeonc", "sparrow"])
def test_gang_is_one_line_error_for_schedulers_without_it(scheduler):
    with pytest.raises(ConfigError, match=r"parameter 'gang' does not apply to scheduler .*centralized/megha"):
        execute("default", overrides={"scheduler": scheduler, "gang": True, "jobs": 5})


def test_gang_off_keeps_the_journal_of_a_run_without_the_key():
    base = execute("default", overrides={"jobs": 30})
    off = execute("default", overrides={"jobs": 30, "gang": False})
    assert base.summary["digest"] == off.summary["digest"]
    assert "gangs_whole" not in base.summary["invariants"]


# ---- the invariant on recorded facts ------------------------------------------------------------------
CLUSTER = Cluster((ClusterSpec(0, "A", (WorkerSpec(0, 0, (2,), ()), WorkerSpec(1, 0, (2,), ()))),))


def _gang(commit_us, runs):
    """A recorder with one 3-task gang committed at ``commit_us`` (-1: never), its task i run as runs[i]."""
    rec = Recorder(total_units=4)
    rec.job_arrived(Job(0, 0, (10, 10, 10), gang=True))
    if commit_us >= 0:
        rec.gang_committed(0, commit_us)
    for i, run_ in enumerate(runs):
        if run_ is not None:
            worker, start = run_
            rec.task_started(0, i, start, worker)
            rec.task_finished(0, i, start + 10)
    return rec


def test_gangs_whole_holds_for_a_gang_started_after_its_commit_even_at_different_instants():
    assert gangs_whole(_gang(5, [(0, 5), (1, 6), (0, 9)]), CLUSTER, 100) == []


def test_gangs_whole_bites_on_a_task_started_before_the_commit_or_without_one():
    (v,) = gangs_whole(_gang(5, [(0, 4), (1, 6), (0, 9)]), CLUSTER, 100)
    assert v.invariant == "gangs_whole" and "started alone" in v.detail and v.time_us == 4
    (v,) = gangs_whole(_gang(-1, [(0, 4), None, None]), CLUSTER, 100)
    assert "never committed" in v.detail


def test_gangs_whole_bites_on_a_partial_gang():
    (v,) = gangs_whole(_gang(5, [(0, 5), None, (1, 5)]), CLUSTER, 100)
    assert "partial gang: 2 of 3" in v.detail and "0.1" in v.detail


def test_a_gang_with_a_task_aborted_by_a_crash_and_started_again_is_whole():
    rec = _gang(5, [None, (1, 5), (1, 5)])
    rec.task_started(0, 0, 5, 0)
    rec.task_aborted(0, 0, 0, 7)
    rec.task_started(0, 0, 30, 1)
    assert gangs_whole(rec, CLUSTER, 100) == []


# ---- the property over the fault search's plans ---------------------------------------------------------
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(strategies.examples("default", schedulers=["megha", "centralized"], fixed={"gang": True}))
def test_a_gang_never_runs_partially_under_any_fault_plan_the_search_generates(example):
    r = example.run()  # RunViolation on any broken invariant, gangs_whole among them
    assert r.summary["invariants"]["gangs_whole"] == "ok"
    rec = recorder_of(r.fabric)
    for job in rec.jobs.values():
        assert job.gang
        if job.completion_us >= 0:
            assert job.committed_us >= 0


def test_policy_tebas_places_a_gang_whole_by_algorithm_1_with_the_jobs_own_alpha(monkeypatch):
    from fedemu.actors.megha import gang
    calls = []
    real = gang.tebas.assign

    def spy(fit, remain, tasks, beta=3):
        calls.append((tuple(fit), tasks, beta))
        return real(fit, remain, tasks, beta)

    monkeypatch.setattr(gang.tebas, "assign", spy)
    r = run(scheduler="centralized", gang=True, policy="tebas", beta=2, constraints=False, jobs=1, fanout=4,
            machine_types="1@1.0:50,1@2.0:50", alpha="0.5", cost_model="zero")
    rec = recorder_of(r.fabric)
    (fit, tasks, beta), = calls
    assert tasks == 4 and beta == 2 and max(fit) == pytest.approx(1 / (0.5 + 0.5 / 2.0))
    speeds = {w.worker_id: w.speed for w in r.fabric.actor(r.fabric.addr("gm-0")).gang.machines}
    used = [rec.tasks[(0, i)].worker for i in range(4)]
    assert len(set(used)) == 4 and all(speeds[w] == 2.0 for w in used)  # the first Fitness group, one each


def _two_users_trace(tmp_path):
    """Six 4-task gangs of user 0 (one every 10 ms), then two of user 1: each gang needs every machine."""
    lines = [f"{0.01 * k:.2f} 4 1 1 1 1 1 user=0\n" for k in range(6)]
    lines += [f"{0.1 + 0.01 * k:.2f} 4 1 1 1 1 1 user=1\n" for k in range(2)]
    path = tmp_path / "two-users.tr"
    path.write_text("".join(lines))
    return path


def _gang_starts(r) -> list[tuple[int, int]]:
    """(start of the gang's first task, job) for every gang, in start order."""
    rec = recorder_of(r.fabric)
    return sorted((min(starts(rec, j.job_id, j.num_tasks)), j.job_id) for j in rec.jobs.values())


def test_gangs_with_users_take_turns_by_user_and_are_never_preempted(tmp_path):
    """gang=true with users (fairness=off): user 1's first gang, queued behind five of user 0's, runs
    second, not seventh; every gang runs whole and nothing is preempted. Without users, arrival order."""
    shape = {"scheduler": "centralized", "gang": True, "gms": 1, "lms": 1, "workers_per_partition": 4,
             "constraints": False, "workload": "trace", "trace": str(_two_users_trace(tmp_path)),
             "cost_model": "zero"}
    r = run(**shape, users=2, user_assign="trace", fairness="off")
    assert "preempted_requeued_once" in r.summary["invariants"]
    assert "preemption_attempts" not in r.summary["counters"]
    order = [job for _, job in _gang_starts(r)]
    assert order[:3] == [0, 6, 1] and sorted(order) == list(range(8))  # user 1's jobs are 6 and 7
    plain = run(**shape)
    assert [job for _, job in _gang_starts(plain)] == list(range(8))


def test_gangs_with_users_and_fairness_on_are_refused_in_one_line():
    with pytest.raises(ConfigError) as err:
        execute("default", overrides={"gang": True, "users": 2, "jobs": 5})
    assert "\n" not in str(err.value) and "needs fairness=off: Algorithm 2 preempts single tasks" in str(err.value)


def test_the_search_draws_gangs_and_users_together_with_fairness_off():
    """Where gang and users are both drawn, the run has fairness=off (they combine only so)."""
    seen = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategies.examples("default", schedulers=["megha"], max_events=1))
    def draw(example):
        o = example.overrides
        if o.get("gang") and o.get("users"):
            seen.append(o.get("fairness"))

    draw()
    assert seen and set(seen) == {"off"}
