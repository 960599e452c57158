"""The end-of-run invariants: a clean run keeps them all, and each planted fault breaks exactly its own.

The capacity check is also compared with a brute-force sweep over random task placements.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors import registry
from fedemu.actors.common.invariants import CHECKS, capacity_respected, check_run
from fedemu.model import Cluster, ClusterSpec, Job, Recorder, WorkerSpec
from fedemu.tools.run import runner

CLUSTER = Cluster((ClusterSpec(0, "A", (WorkerSpec(0, 0, (2,), (3,)), WorkerSpec(1, 0, (1,), ()))),))


def _recorder(jobs, placements):
    """A recorder that saw ``jobs`` and ran task (job, index) on worker w from start to start + duration."""
    rec = Recorder(total_units=3)
    for job in jobs:
        rec.job_arrived(job)
    for (job_id, index), (worker, start) in placements.items():
        duration = rec.tasks[(job_id, index)].duration_us
        rec.task_started(job_id, index, start, worker)
        rec.task_finished(job_id, index, start + duration)
    return rec


def _clean():
    jobs = [Job(0, 0, (10, 20), constraints=((3,), ())), Job(1, 5, (10,))]
    rec = _recorder(jobs, {(0, 0): (0, 0), (0, 1): (0, 0), (1, 0): (1, 5)})
    rec.job_completed(0, 25)
    rec.job_completed(1, 16)
    return rec


def _broken(check_run_result):
    return {name for name, found in check_run_result.items() if found}


def test_a_clean_run_keeps_every_invariant():
    assert _broken(check_run(_clean(), CLUSTER, 30)) == set()


def test_a_job_never_closed_is_reported_with_where_its_tasks_are():
    rec = _recorder([Job(0, 0, (10, 20, 30))], {(0, 0): (0, 0), (0, 1): (1, 0)})
    rec.tasks[(0, 1)].end_us = -1  # still running at the end
    found = check_run(rec, CLUSTER, 99)
    assert _broken(found) == {"jobs_closed"}
    (v,) = found["jobs_closed"]
    assert v.subject == "job 0" and v.time_us == 99
    assert "1 of 3 tasks done" in v.detail and "running: 0.1 on w-1" in v.detail and "never started: 0.2" in v.detail


def test_a_rejected_job_is_not_a_stuck_one():
    rec = Recorder()
    rec.job_arrived(Job(0, 0, (10,)))
    rec.job_unschedulable(0, (0,))
    assert _broken(check_run(rec, CLUSTER, 10)) == set()


def test_a_task_cut_short_or_closed_early_breaks_tasks_ran_once():
    rec = _clean()
    rec.tasks[(0, 1)].end_us = 15  # ran 15 of its 20 us
    assert _broken(check_run(rec, CLUSTER, 30)) == {"tasks_ran_once"}
    rec = _clean()
    rec.jobs[0].completion_us = 12  # closed before task 0.1 ended at 20
    assert [v.subject for v in check_run(rec, CLUSTER, 30)["tasks_ran_once"]] == ["task 0.1"]


def test_three_tasks_on_a_two_slot_worker_break_capacity():
    rec = _recorder([Job(0, 0, (10, 10, 10))], {(0, 0): (0, 0), (0, 1): (0, 3), (0, 2): (0, 9)})
    rec.job_completed(0, 19)
    (v,) = check_run(rec, CLUSTER, 30)["capacity_respected"]
    assert (v.subject, v.time_us, v.detail) == ("w-0", 9, "held (3,) of capacity (2,)")


def test_a_slot_freed_and_taken_at_the_same_instant_is_fine():
    rec = _recorder([Job(0, 0, (10, 10))], {(0, 0): (1, 0), (0, 1): (1, 10)})
    rec.job_completed(0, 20)
    assert capacity_respected(rec, CLUSTER, 30) == []


def test_a_task_on_a_worker_without_its_constraint_breaks_constraints_met():
    rec = _recorder([Job(0, 0, (10,), constraints=((3,),))], {(0, 0): (1, 0)})
    rec.job_completed(0, 10)
    (v,) = check_run(rec, CLUSTER, 30)["constraints_met"]
    assert v.subject == "task 0.0" and "w-1" in v.detail and "[3]" in v.detail
    assert "constraints_met" not in check_run(rec, CLUSTER, 30, skip=["constraints_met"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(1, 15)), min_size=1, max_size=12))
def test_capacity_agrees_with_a_brute_force_sweep(tasks):
    """Random placements on the two workers: the check fires exactly when some instant overloads one."""
    job = Job(0, 0, tuple(d for _, _, d in tasks))
    rec = _recorder([job], {(0, i): (w, s) for i, (w, s, _) in enumerate(tasks)})
    caps = {0: 2, 1: 1}
    overloaded = any(sum(1 for w2, s, d in tasks if w2 == w and s <= t < s + d) > caps[w]
                     for w in caps for t in range(0, 60))
    assert bool(capacity_respected(rec, CLUSTER, 100)) == overloaded


@pytest.mark.parametrize("scheduler", list(registry.SCHEDULERS))
def test_every_scheduler_keeps_every_invariant_on_the_default_scenario(scheduler):
    """Constraints are checked for the schedulers that declare themselves constraint-aware, gangs_whole
    for runs with gangs only, preempted_requeued_once for runs with users only."""
    result = runner.execute("default", overrides={"scheduler": scheduler, "jobs": 60})
    plugin = registry.get(scheduler)
    names = [*CHECKS, *(check.__name__ for check in plugin.checks)]
    assert result.summary["invariants"] == {name: "ok" for name in names
                                            if name not in ("gangs_whole", "preempted_requeued_once")
                                            if plugin.constraint_aware or name != "constraints_met"}


def test_a_broken_run_ends_in_a_one_line_verdict_with_its_results_and_journal(tmp_path, capsys):
    """Every GM crashed for good leaves jobs open: the run says which, exits 1, still writes its
    results, and its journal replays to the same verdict."""
    import json

    from fedemu.tools.cli import main

    out = tmp_path / "out"
    plan = tmp_path / "gms.toml"
    plan.write_text('[[fault]]\nat_s = 1.0\nkind = "crash"\ntarget = {role = "gm", count = 3}\n')
    code = main(["run", "default", "--faults", str(plan), "--set", "jobs=50", "--quiet", "--record", "--out",
                 str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert len(err) == 1 and err[0].startswith("fedemu: violation: jobs_closed: job ")
    assert "virtual time" in err[0] and "Traceback" not in err[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["invariants"]["jobs_closed"].startswith("jobs_closed: job ")
    assert summary["invariants"]["capacity_respected"] == "ok"
    assert main(["replay", str(out / "messages.log"), "--verify"]) == 0
    said = capsys.readouterr().out
    assert "digest matches (run ended with: violation: jobs_closed: job " in said


def test_an_actor_that_raises_mid_run_ends_in_one_line_naming_it_and_when(tmp_path, capsys, monkeypatch):
    """A bug planted in the workers (job 3's first task raises when it ends): the run fails with one
    line naming the actor, the virtual time and the line of code, exit 1; its journal replays to the
    same end. FEDEMU_TRACEBACK=1 would show the traceback instead."""
    from fedemu.actors.megha.worker import MeghaWorker as Worker  # the default scenario's (Megha's) workers
    from fedemu.tools.cli import main

    original = Worker.on_TaskTimer

    def planted(self, msg, src):
        if (msg.job_id, msg.index) == (3, 0):
            raise RuntimeError("planted")
        original(self, msg, src)

    monkeypatch.setattr(Worker, "on_TaskTimer", planted)
    monkeypatch.setattr(Worker, "_fedemu_handlers", {}, raising=False)  # the fabric's handler cache
    monkeypatch.delenv("FEDEMU_TRACEBACK", raising=False)
    out = tmp_path / "out"
    code = main(["run", "default", "--set", "jobs=10", "--quiet", "--record", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith("fedemu: failed: w-") and " at virtual time " in err[0]
    assert "test_invariants.py:" in err[0] and "raised RuntimeError: planted" in err[0]
    assert main(["replay", str(out / "messages.log"), "--verify"]) == 0
    assert "(run ended with: RuntimeError: planted)" in capsys.readouterr().out


def test_an_aborted_execution_still_held_its_worker_until_the_crash():
    """Executions a crash ended and duplicates are part of the capacity sweep: a relaunch that starts on
    worker 1 (capacity 1) before the aborted execution there ended breaks capacity; one after it does not."""
    for relaunch_at, broken in ((4, {"capacity_respected"}), (5, set())):
        rec = Recorder(total_units=3)
        rec.job_arrived(Job(0, 0, (10,)))
        rec.task_started(0, 0, 0, worker=1)
        rec.task_aborted(0, 0, 1, 5)
        rec.task_started(0, 0, relaunch_at, worker=1)
        rec.task_finished(0, 0, relaunch_at + 10, worker=1)
        rec.job_completed(0, relaunch_at + 10)
        assert _broken(check_run(rec, CLUSTER, 30)) == broken
        assert rec.wasted_us == 5 and rec.aborted == 1


def test_a_duplicate_execution_counts_against_capacity():
    rec = Recorder(total_units=3)
    rec.job_arrived(Job(0, 0, (10,)))
    rec.task_started(0, 0, 0, worker=1)
    rec.task_started(0, 0, 3, worker=1)  # a second copy on the same 1-slot worker
    rec.task_finished(0, 0, 10, worker=1)
    rec.task_finished(0, 0, 13, worker=1)
    rec.job_completed(0, 10)
    (v,) = check_run(rec, CLUSTER, 30)["capacity_respected"]
    assert v.subject == "w-1" and v.time_us == 3


def test_when_the_first_execution_is_aborted_a_live_second_one_becomes_the_tasks_own():
    """Found by the fault search: the task ran on workers 1 and 0; worker 1 crashed; the run on worker 0
    is the task's execution (it was reported 'never started')."""
    rec = Recorder(total_units=3)
    rec.job_arrived(Job(0, 0, (10,)))
    rec.task_started(0, 0, 0, worker=1)
    rec.task_started(0, 0, 1, worker=0)
    rec.task_aborted(0, 0, 1, 2)
    rec.task_finished(0, 0, 11, worker=0)
    rec.job_completed(0, 11)
    assert _broken(check_run(rec, CLUSTER, 30)) == set()
    task = rec.tasks[(0, 0)]
    assert (task.start_us, task.end_us, task.worker) == (1, 11, 0)
    assert rec.other_runs == [[0, 0, 1, 0, 2, 1]] and rec.wasted_us == 2


HOLED = Cluster((ClusterSpec(0, "A", (WorkerSpec(0, 0, (2,), (3,)), WorkerSpec(1, 0, (1,), ()),
                                      WorkerSpec(3, 0, (1,), (), speed=2.0))),))


def _ran(jobs, placements):
    """A recorder that saw ``jobs`` and ran (job, index) on worker w from start for dur (None: still running)."""
    rec = Recorder(total_units=4)
    for job in jobs:
        rec.job_arrived(job)
    for (job_id, index), (worker, start, dur) in placements.items():
        rec.task_started(job_id, index, start, worker)
        if dur is not None:
            rec.task_finished(job_id, index, start + dur)
    return rec


def test_each_way_a_task_can_break_tasks_ran_once_is_said_in_its_own_words():
    rec = _ran([Job(0, 0, (10, 20, 30, 40)), Job(1, 0, (100,), alpha=0.5), Job(2, 0, (7,))],
               {(0, 1): (1, 0, None), (0, 2): (0, 0, 25), (0, 3): (0, 5, 40), (1, 0): (3, 0, 100), (2, 0): (1, 50, 7)})
    for job_id in (0, 1, 2):
        rec.job_completed(job_id, 44)
    assert [v.line() for v in check_run(rec, HOLED, 60)["tasks_ran_once"]] == [
        "tasks_ran_once: task 0.0: its job completed but the task never started (virtual time 0.000044 s)",
        "tasks_ran_once: task 0.1: its job completed but the task never ended (virtual time 0.000044 s)",
        "tasks_ran_once: task 0.2: ran 25 us, its duration is 30 us (virtual time 0.000025 s)",
        "tasks_ran_once: task 0.3: its job was closed at 44 us, before the task ended at 45 us (virtual time 0.000044 s)",
        "tasks_ran_once: task 1.0: ran 100 us, its duration is 100 us and its run time on w-3 is 75 us "
        "(virtual time 0.000100 s)",
        "tasks_ran_once: task 2.0: its job was closed at 44 us, before the task ended at 57 us (virtual time 0.000044 s)",
    ]


def test_a_task_on_a_worker_id_the_cluster_skips_is_named_not_a_traceback():
    # w-2 lies between the cluster's ids: the check once looked its capacity up and raised KeyError
    rec = _ran([Job(0, 0, (10,)), Job(1, 0, (10,))], {(0, 0): (0, 0, 10), (1, 0): (2, 0, 10)})
    assert [v.line() for v in capacity_respected(rec, HOLED, 60)] == [
        "capacity_respected: task 1.0: ran on w-2, which is not a worker of this cluster or has another number of "
        "resources (virtual time 0.000000 s)"]


def test_the_first_task_lacking_a_constraint_is_named_with_what_it_lacks():
    rec = _ran([Job(0, 0, (10, 10), constraints=((3,), (3, 5)))], {(0, 0): (0, 0, 10), (0, 1): (1, 0, 10)})
    assert [v.line() for v in check_run(rec, HOLED, 60)["constraints_met"]] == [
        "constraints_met: task 0.1: ran on w-1, which lacks constraint(s) [3, 5] (virtual time 0.000000 s)"]
