"""Megha's global fairness (Megha 2022, IV-C): users, shares and queues, Algorithm 2's preemption verified by the
LM, the workers' stop, the re-queue, the measurements, and the properties the issue lists, on small runs.

The tolerance of the share property is measured here, not assumed: on ``CONTENDED`` (30 one-slot
workers, 4 users 10/25/15/50, 20 s tasks at load 3) a user that kept a task waiting under contention got
at worst 3.3 points below its share over seeds 1-8: one worker of 30 (the 7.5 and 4.5 slots of the 25%
and 15% users cannot both be held, and the guards keep a victim at or above its share), while without
Algorithm 2 the 50% user got 28-30 points below. The test allows ``TOLERANCE`` = 5 points.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.actors.common.invariants import preempted_requeued_once
from fedemu.model import Job, Recorder
from fedemu.scenarios import fairness as fairness_scenario
from fedemu.scenarios.trace import TraceError, count_trace, read_trace
from fedemu.tools.cli import main
from fedemu.tools.run.runner import execute

from test_megha_faults import crash

TOLERANCE = 0.05
PAPER = {"users": 4, "shares": "10,25,15,50"}
CONTENDED = {**PAPER, "lms": 1, "gms": 3, "workers_per_partition": 10, "constraints": False, "load": 3.0,
             "task_s": 20.0, "task_dist": "const", "fanout": 5, "jobs": 80}
# the fairness scenario's own workload is the papers' GOOG trace; without it, the stand-in it offers
FAIRNESS = {} if fairness_scenario.TRACE.is_file() else dict(fairness_scenario.STAND_IN)
SMALL = settings(max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def run(seed=1, faults=None, **overrides):
    """A run whose every invariant held (execute raises RunViolation otherwise)."""
    r = execute("default", seed=seed, overrides=overrides, faults=faults)
    assert set(r.summary["invariants"].values()) == {"ok"}, r.summary["invariants"]
    return r


def fairness(r) -> dict:
    return r.summary["fairness"]


# ---- configuration ------------------------------------------------------------------------------
@pytest.mark.parametrize("sets, words", [
    (["users=4", "shares=10,25"], "2 shares for 4 users"),
    (["users=2", "shares=60,50"], "sum to 110%"),
    (["users=2", "shares=0,50"], "above 0"),
    (["users=4", "user_gms=0,1,2"], "3 GMs for 4 users"),
    (["users=2", "user_gms=0,7"], "GM 7 does not exist"),
    (["users=2", "user_gms=a,b"], "GM numbers separated by commas"),
    (["shares=10,90"], "there are no users"),
    (["users=2", "fairness=maybe"], "on or off"),
    (["users=2", "user_assign=lottery"], "round-robin or weighted or trace"),
])
def test_bad_fairness_settings_are_one_line_errors(sets, words, capsys):
    args = ["run", "default", "--quiet", "--set", "jobs=5"]
    for s in sets:
        args += ["--set", s]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedemu: error: ") and words in err[0], err


def test_the_papers_mapping_is_the_default_for_four_users_on_three_gms():
    r = run(jobs=12, **PAPER)
    assert [u["gm"] for u in fairness(r)["users"]] == [0, 1, 1, 2]
    gms = {n: r.fabric.actor(r.fabric.addr(n)) for n in ("gm-0", "gm-1", "gm-2")}
    assert set(gms["gm-0"].users.job_user.values()) == {0} and set(gms["gm-1"].users.job_user.values()) == {1, 2}
    assert set(gms["gm-2"].users.job_user.values()) == {3}
    assert [u["jobs"] for u in fairness(r)["users"]] == [3, 3, 3, 3]  # round robin


def test_weighted_assignment_follows_the_shares():
    r = run(jobs=400, load=0.3, user_assign="weighted", **PAPER)
    jobs = [u["jobs"] for u in fairness(r)["users"]]
    assert sum(jobs) == 400 and jobs[3] > jobs[1] > jobs[2] > jobs[0]


# ---- the trace's user column --------------------------------------------------------------------
def test_the_trace_user_column_is_optional_and_checked_with_file_and_line(tmp_path):
    path = tmp_path / "t.tr"
    path.write_text("0 2 1.0 1.0 1.0 user=1\n1 1 2.0 2.0\n")
    assert count_trace(path) == (2, 3)
    assert [j.user for j in read_trace(path)] == [-1, -1]  # ignored unless asked for
    with pytest.raises(TraceError, match=r"t.tr:2: no user field"):
        list(read_trace(path, users=2))
    path.write_text("0 2 1.0 1.0 1.0 user=1\n1 1 2.0 2.0 user=2\n")
    with pytest.raises(TraceError, match=r"t.tr:2: user=2: expected user=K with K a whole number from 0 to 1"):
        list(read_trace(path, users=2))
    path.write_text("0 2 1.0 1.0 1.0 user=1\n1 1 2.0 2.0 user=0\n")
    assert [j.user for j in read_trace(path, users=2)] == [1, 0]
    r = run(workload="trace", trace=str(path), user_assign="trace", users=2, constraints=False)
    assert [u["jobs"] for u in fairness(r)["users"]] == [1, 1]


def test_a_job_without_a_user_keeps_its_journal_fields():
    from fedemu.fabric.messages import encode

    assert len(encode(Job(1, 0, (5,)))[1]) == 5 and len(encode(Job(1, 0, (5,), user=2))[1]) == 7


# ---- the protocol ---------------------------------------------------------------------------------
def test_under_contention_preemption_happens_and_every_preempted_task_runs_again():
    r = run(**CONTENDED)
    c = r.summary["counters"]
    recorder = recorder_of(r)
    assert c["preemptions"] > 0 and c["preemption_attempts"] >= 1
    assert len(recorder.preempted) == c["preemptions"] == sum(len(p[5]) for p in recorder.preemptions)
    assert sum(recorder.requeued.values()) == c["preemptions"]  # no fault: each notice arrives once
    for job_id, index, worker, start, stop, _ in recorder.preempted:
        t = recorder.tasks[(job_id, index)]
        assert t.start_us >= stop and t.end_us - t.start_us == t.duration_us  # from scratch, whole
    wasted = sum((stop - start) * units for *_, start, stop, units in recorder.preempted) / 1e6
    assert sum(u["wasted_s"] for u in fairness(r)["users"]) == pytest.approx(wasted)


def test_fairness_off_runs_the_same_user_queues_without_preemption():
    r = run(**{**CONTENDED, "fairness": "off"})
    c = r.summary["counters"]
    assert "preemptions" not in c and "preemption_attempts" not in c
    assert fairness(r)["algorithm2"] == "off"


def test_no_preemption_without_contention():
    r = run(jobs=100, load=0.2, **PAPER)
    assert "preemption_attempts" not in r.summary["counters"]


def recorder_of(r) -> Recorder:
    return r.fabric.actor(r.fabric.addr("submitter")).recorder


def _held(rec: Recorder, t_us: int, who) -> dict:
    """Units each worker (or user) holds at ``t_us`` by the recorded executions (ends first)."""
    out: dict = {}
    runs = [(x.job_id, x.worker, x.start_us, x.end_us) for x in rec.tasks.values() if x.start_us >= 0]
    runs += [(j, w, s, e) for j, _, w, s, e, _ in rec.other_runs]
    for job_id, worker, start, end in runs:
        if start <= t_us and (end < 0 or end > t_us):
            key = who(job_id, worker)
            out[key] = out.get(key, 0) + rec.jobs[job_id].demand[0]
    return out


def _peak(rec: Recorder, worker: int, lo: int, hi: int) -> int:
    """The most units ``worker`` held at any time in [lo, hi], by the recorded executions."""
    runs = [(x.job_id, x.start_us, x.end_us) for x in rec.tasks.values() if x.worker == worker and x.start_us >= 0]
    runs += [(j, s, e) for j, _, w, s, e, _ in rec.other_runs if w == worker]
    live = [(max(s, lo), e if e >= 0 else hi + 1, rec.jobs[j].demand[0]) for j, s, e in runs
            if s <= hi and (e < 0 or e > lo)]
    return max((sum(d for s, e, d in live if s <= t < e) for t, _, _ in live), default=0)


def _shares_held(seed):
    r = run(seed=seed, **CONTENDED)
    for u in fairness(r)["users"]:
        if u["waiting_s"] >= 20:  # contention lasting long enough: a task length
            assert u["measured_waiting"] >= u["share"] - TOLERANCE, u


@settings(SMALL, derandomize=True)  # the same seeds in every CI run: the known misses are listed below
@given(st.integers(1, 10_000))
def test_every_user_that_keeps_demand_gets_its_share_within_the_tolerance(seed):
    _shares_held(seed)


# Found 2026-11-26 (about 1 seed in 300): the 50% user waited 5.4-5.9 points below its share (seed 1335: 0.446,
# 3375: 0.441). The three preemption requests one pass had sent on a stale view (victims whose tasks had just
# ended together) were refused at once and counted as three tries, so its GM planned no preemption until the
# next heartbeat, 10 s later. Requests planned before a refusal was learnt now count as one try.
@pytest.mark.parametrize("seed", [1335, 3375])
def test_requests_refused_from_one_stale_pass_count_as_one_try(seed):
    _shares_held(seed)


def test_without_fairness_the_share_property_fails():
    """The property above bites: without Algorithm 2 the 50% user gets far less while it waits."""
    worst = min(u["measured_waiting"] - u["share"] for u in fairness(run(**{**CONTENDED, "fairness": "off"}))["users"]
                if u["waiting_s"] >= 20)
    assert worst < -TOLERANCE


@SMALL
@given(st.integers(1, 10_000), st.sampled_from(["10,25,15,50", "40,20,20,20", "25,25,25,25"]))
def test_preemption_never_takes_a_user_past_its_share_nor_leaves_an_eligible_worker_idle(seed, shares):
    """When the LM verifies a preemption, the requester, with the task launched, holds at most its share (its
    GM's view of its own users, its launches in flight, is never below the truth); and (one LM, so the
    LM's check covers the datacenter) no other worker had room for the task throughout the millisecond
    either side of it (the LM's state lags the workers' by a message; a worker being preempted is idle for
    two messages between stop and launch). A worker freed while the stop is under way is not counted:
    the victims are already stopped then."""
    r = run(seed=seed, **{**CONTENDED, "shares": shares, "jobs": 40})
    rec = recorder_of(r)
    total = rec.total_units
    fractions = [float(x) / 100 for x in shares.split(",")]
    specs = {w.worker_id: w for w in r.fabric.actor(r.fabric.addr("lm-0")).specs}
    for _, worker, user, victim, (job_id, index), victims, at in rec.preemptions:  # at: the LM verified it
        mine = _held(rec, at, lambda j, w: rec.jobs[j].user).get(user, 0)
        assert (mine + rec.jobs[job_id].demand[0]) / total <= fractions[user] + 1e-9
        assert all(rec.jobs[j].user == victim for j, _ in victims)
        idle = [w for w in specs if w != worker and _peak(rec, w, at - 1000, at + 1000) + 1 <= specs[w].capacity[0]]
        assert not idle, f"preemption verified at {at} us while w-{idle[0]} was idle"


# ---- faults ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("plan", [
    [crash("lm-0", 30.0)],  # the active LM fails for good, preemptions in flight (its standby takes over)
    [crash("gm-2", 30.0, 2.0)],  # the 50% user's GM dies mid-contention and restarts stateless
    [crash("gm-0", 25.0, 1.0), crash("lm-0-standby", 40.0)],
])
def test_preemption_in_flight_through_failover_loses_and_duplicates_nothing(plan):
    from fedemu.scenarios import fault_plan

    r = run(faults=fault_plan.from_tables(plan, "test plan"), lm_standby=True, **{**CONTENDED, "jobs": 60})
    assert r.summary["counters"]["preemptions"] > 0
    assert r.summary["jobs_completed"] == 60  # and every invariant held, preempted_requeued_once included


def test_a_worker_heard_again_during_a_stop_gets_the_stop_again_under_the_same_one_timer(monkeypatch):
    """The worker of the first preemption crashes just after its stop is sent and is back 0.5 s later,
    inside the stop's wait. The LM sends the stop again, as it must (it may have been lost), but used to arm
    a second timer with the same nonce: two chains of asks, which gave the preemption up twice as early."""
    from fedemu.actors.megha.lm_fairness import LmFairness
    from fedemu.actors.megha.local_manager import LocalManager
    from fedemu.actors.megha.messages import LmTimer, StopTask
    from fedemu.scenarios import fault_plan

    shape = {**CONTENDED, "jobs": 40}
    first = recorder_of(run(**shape)).preemptions[0]
    worker, at_us = first[1], first[6]
    pending, doubles, stops = set(), [], []
    set_timer, send, due = LocalManager.set_timer, LocalManager.send, LmFairness.due

    def spy_timer(self, delay_us, msg):
        if isinstance(msg, LmTimer) and msg.what == "stop":
            key = (self.name, msg.key, msg.nonce)
            doubles.extend([key] if key in pending else [])
            pending.add(key)
        set_timer(self, delay_us, msg)

    def spy_send(self, dst, msg):
        if isinstance(msg, StopTask):
            stops.append(dst)
        send(self, dst, msg)

    def spy_due(self, msg):
        pending.discard((self.core.name, msg.key, msg.nonce))
        due(self, msg)

    monkeypatch.setattr(LocalManager, "set_timer", spy_timer)
    monkeypatch.setattr(LocalManager, "send", spy_send)
    monkeypatch.setattr(LmFairness, "due", spy_due)
    plan = fault_plan.from_tables([crash(f"w-{worker}", (at_us + 1) / 1e6, 0.5)], "test plan")
    r = run(faults=plan, **shape)
    victim = r.fabric.addr(f"w-{worker}")
    assert stops.count(victim) >= 2  # the stop, and again once the worker was heard from
    assert doubles == []


# ---- the invariant bites ----------------------------------------------------------------------------
def _recorder_with_a_preemption() -> Recorder:
    rec = Recorder(total_units=2)
    rec.job_arrived(Job(0, 0, (10, 10), user=0))
    rec.task_started(0, 0, 0, worker=1)
    rec.task_preempted(0, 0, 1, 5)
    rec.preemptions.append((5, 1, 1, 0, (9, 0), ((0, 0),), 4))
    return rec


def test_the_invariant_catches_a_double_requeue_a_lost_task_and_a_duplicate():
    rec = _recorder_with_a_preemption()
    rec.task_requeued(0, 0)
    assert preempted_requeued_once(rec, None, 100) == []
    rec.task_requeued(0, 0)
    assert "queued again 2 times for 1 preemption(s)" in preempted_requeued_once(rec, None, 100)[0].detail
    rec = _recorder_with_a_preemption()
    rec.job_completed(0, 50)
    assert "never started again" in preempted_requeued_once(rec, None, 100)[0].detail
    rec = _recorder_with_a_preemption()
    rec.task_started(0, 0, 10, worker=1)
    rec.task_started(0, 0, 12, worker=2)
    assert "ran twice at once" in preempted_requeued_once(rec, None, 100)[0].detail


def test_the_fairness_scenario_is_the_papers_setup():
    r = execute("fairness", overrides={**FAIRNESS, "jobs": 6})
    s = r.summary
    assert s["params"]["users"] == 4 and s["params"]["shares"] == "10,25,15,50" and s["cluster"]["workers"] == 198
    assert [u["gm"] for u in s["fairness"]["users"]] == [0, 1, 1, 2]
    assert set(s["invariants"].values()) == {"ok"} and s["jobs_completed"] == 6


def test_compare_rows_carry_each_users_shares(tmp_path):
    from fedemu.tools.run import compare

    summary = execute("fairness", overrides={**FAIRNESS, "jobs": 6}).summary
    spec = {"scheduler": "megha", "policy": "random", "seed": 1, "out_dir": str(tmp_path)}
    row = compare.row_of(spec, summary)
    plain = compare.row_of({**spec, "scheduler": "pigeon"}, {"counters": {}})
    assert row["fairness"]["user3_share"] == 0.5 and plain["fairness"] == {}
    compare.write_csv(tmp_path / "c.csv", [row, plain])
    head, first, second = (tmp_path / "c.csv").read_text().splitlines()
    assert "fair:user3_measured_waiting" in head.split(",") and second.endswith(",,")
    assert compare.mean_rows([row, row])[0]["fairness"]["user0_share"] == 0.1


def test_a_run_with_users_replays_identically_and_plots_the_shares(tmp_path, capsys):
    out = tmp_path / "out"
    sets = [x for k, v in {**FAIRNESS, "jobs": 8}.items() for x in ("--set", f"{k}={v}")]
    assert main(["run", "fairness", *sets, "--quiet", "--record", "--out", str(out)]) == 0
    assert (out / "share_over_time.png").stat().st_size > 0
    assert main(["replay", str(out / "messages.log"), "--verify"]) == 0
    assert "digest matches" in capsys.readouterr().out


def test_delayed_messages_never_run_a_preempting_task_twice():
    """With messages delayed by retransmissions (loss 0.3; duplicated ones, before connections), a launch
    retry that reaches the LM while the stop is under way is not refused (the GM would queue the task again
    and, with two LMs, run it twice at once: ``preempted_requeued_once`` then fails, as it did before the LM
    held such copies)."""
    for seed in range(1, 13):
        r = run(seed=seed, **{**CONTENDED, "loss": 0.3, "rto_ms": 20.0, "jobs": 40, "lms": 2,
                              "workers_per_partition": 5})
        assert r.summary["counters"].get("duplicate_executions", 0) == 0


def test_the_fairness_scenario_never_changes_its_workload_silently(monkeypatch, tmp_path, capsys):
    """Finding 1: without the papers' data the fairness scenario ran a Poisson stand-in instead of its trace,
    silently. Now its workload is the trace, and without the file it is refused with the stand-in's keys."""
    assert fairness_scenario.PARAMS["workload"] == "trace"
    monkeypatch.setattr(fairness_scenario, "TRACE", tmp_path / "absent" / "GOOG_subtrace.tr")
    monkeypatch.setitem(fairness_scenario.PARAMS, "trace", str(fairness_scenario.TRACE))
    assert main(["run", "fairness", "--quiet", "--set", "jobs=4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GOOG_subtrace.tr, the papers' data, which is absent here" in err
    hint = [w.replace("jobs=300", "jobs=4") for w in err.split("fedemu run fairness ")[1].split()]
    assert hint[:2] == ["--set", "workload=poisson"] and "jobs=4" in hint
    out = tmp_path / "out"
    assert main(["run", "fairness", "--quiet", *hint, "--record", "--out", str(out)]) == 0
    assert main(["replay", str(out / "messages.log"), "--verify"]) == 0  # its Poisson run replays as it ran


def test_planning_work_follows_the_changes_not_users_times_tasks(monkeypatch):
    """Finding 6: with users, every plan worked out every user's share again (users=100 took the 4 s
    default run to 21.5 s; dominant() ran 1.1 million times for 100 users and 200 jobs). Each user's share
    is now worked out again only when it changes: the same run costs a few evaluations per task."""
    from fedemu.actors.megha import gm_fairness

    calls = [0]
    real = gm_fairness.dominant

    def counting(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(gm_fairness, "dominant", counting)
    r = run(users=50, jobs=100)
    assert r.summary["counters"]["preemption_attempts"] > 0  # Algorithm 2 did plan
    assert calls[0] < 20 * r.summary["tasks"], calls[0]


def test_the_planning_caches_change_no_decision(monkeypatch):
    """The same run with every user's share worked out afresh for every plan: the same journal."""
    from fedemu.actors.megha.gm_fairness import GmFairness

    cached = run(users=30, jobs=80).digest
    real = GmFairness._use

    def afresh(self):
        self.changed.update(range(len(self.usage)))
        return real(self)

    monkeypatch.setattr(GmFairness, "_use", afresh)
    assert run(users=30, jobs=80).digest == cached


def test_more_users_than_jobs_is_refused(capsys):
    """Finding 6: nothing refused more users than jobs (users=10000 printed nothing for over 100 s)."""
    assert main(["run", "default", "--quiet", "--set", "users=1000"]) == 2
    err = capsys.readouterr().err
    assert err == ("fedemu: error: users=1000 is more than the 500 jobs of the workload: 500 users would never "
                   "have a job; give at most 500 users, or more jobs\n")


def test_a_gm_pauses_preemption_after_refused_tries_but_one_stale_pass_is_one_try():
    """``PREEMPT_TRIES`` refusals of requests each planned knowing the refusals before pause the GM's
    preemption until a heartbeat; the refusals of requests one pass sent together count once."""
    from types import SimpleNamespace

    from fedemu.actors.megha.gm_fairness import PREEMPT_TRIES, GmFairness

    gm = SimpleNamespace(attempts=0, recovery=SimpleNamespace(followed=lambda lm, src: False),
                         requeue=lambda task, front: None, schedule=lambda: None)
    fair = object.__new__(GmFairness)
    fair.core, fair.flights, fair.busy_until, fair.holders = gm, {}, {}, [{}]
    fair.refusals, fair.learnt, fair.calm = 0, 0, False

    def plan(n):
        sent = []
        for _ in range(n):
            gm.attempts += 1
            task = SimpleNamespace(job_id=gm.attempts, index=0)
            fair.flights[(task.job_id, 0)] = SimpleNamespace(attempt=gm.attempts, lm=0, worker=0, task=task)
            sent.append(task.job_id)
        return sent

    def refuse(job_id):
        fair.on_preempt_failed(SimpleNamespace(lm=0, job_id=job_id, index=0, attempt=job_id), src=0)

    for job_id in plan(PREEMPT_TRIES):  # one pass on one stale view: one try
        refuse(job_id)
    assert (fair.refusals, fair.calm) == (1, False)
    for _ in range(PREEMPT_TRIES - 1):  # each planned after the last refusal was learnt
        refuse(plan(1)[0])
    assert fair.calm
    fair.heard_heartbeat()
    assert (fair.refusals, fair.calm) == (0, False)
