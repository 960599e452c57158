"""Hawk and Eagle under faults, on connections: node crashes with queued reservations and running tasks (with and
without restart), crashes of a distributed scheduler and of the long-job scheduler (its view and bitmap rebuilt
from the nodes), cuts shorter and longer than the connection timeout, a thief that crashes with what it stole,
loss on every link, and a hypothesis search over random plans in both phases of the fault search. Every run must
end with every invariant "ok" (``execute`` raises RunViolation otherwise).

Recovery is driven by the fabric's notices only: a fault-free run, a run with loss and a short cut all send the
protocol's messages and nothing else, and set no timer but the tasks' own.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from fedemu.actors import registry
from fedemu.actors.eagle.node import EagleReservation
from fedemu.actors.hawk.node import HawkNode, Reservation, node_books_balance, nodes_not_stuck
from fedemu.actors.hawk.scheduler import HawkScheduler
from fedemu.tools.search import fuzz, strategies
from fedemu.tools.run import runner
from scheduler_helpers import EventPlan as Plan

S = 1_000_000
NAMES = ("hawk", "eagle")
# probes queue up, some jobs are long (their mean task above 0.9 s), no service times
SMALL = {"lms": 1, "gms": 1, "workers_per_partition": 8, "load": 1.0, "constraints": False, "cost_model": "zero",
         "short_cutoff_s": 0.9}
PROTOCOL = {"job", "worker.finished", "submit.job_done", "hawk.probe", "hawk.get_task", "hawk.assign", "hawk.cancel",
            "hawk.steal_ask", "hawk.stolen", "eagle.probe", "eagle.assign", "eagle.reject", "eagle.drop"}
RECOVERY_ONLY = {"hawk.lost", "hawk.load_ask", "hawk.load", "submit.ping", "submit.pong", "submit.resubmit"}


def run(name, events=(), jobs=40, seed=1, **over):
    """One default-scenario run of ``name`` with the fault events; checks the verdict, returns the result."""
    result = runner.execute("default", seed=seed, overrides={"scheduler": name, "jobs": jobs, **over},
                            faults=Plan(tuple(events)) if events else None)
    invariants = result.summary["invariants"]
    assert set(invariants.values()) == {"ok"}, invariants
    assert {"node_books_balance", "nodes_not_stuck"} <= set(invariants)
    assert result.summary["jobs_completed"] + result.summary["unschedulable"] == jobs
    return result


def counters(result):
    return result.summary["counters"]


def kinds(result):
    return set(result.summary["messages_by_kind"])


def actors(result, cls):
    fabric = result.fabric
    return [a for a in (fabric.actor(fabric.addr(n)) for n in fabric.names) if isinstance(a, cls)]


def ran(result):
    return sum(n.completed for n in actors(result, HawkNode))


# ---- nothing fails: the protocol's messages only ----------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("over", [{}, SMALL, {**SMALL, "loss": 0.05}])
def test_without_a_break_only_the_protocols_messages_are_sent_and_nothing_is_timed(name, over):
    """Fault-free, or with loss on every link: every reservation ends in one request and one answer (or, in
    Eagle, a rejection or a drop), nothing of recovery is sent, and no scheduler or node sets a timer but the
    tasks' own."""
    r = run(name, **over)
    assert kinds(r) <= PROTOCOL and not kinds(r) & RECOVERY_ONLY
    by = r.summary["messages_by_kind"]
    assert by[f"{name}.assign"] == ran(r)
    assert sum(a._timers for a in actors(r, HawkScheduler)) == 0
    assert sum(a._timers for a in actors(r, HawkNode)) == ran(r)
    assert r.fabric.statistics().drops_by_cause == {}
    assert by[f"{name}.probe"] == counters(r)["probes"] >= by["hawk.get_task"]  # Eagle asks and cancels as Hawk
    assert by[f"{name}.assign"] + by.get("hawk.cancel", 0) <= by["hawk.get_task"]  # the run ends at the last
    # job's end, so a few reservations may still be queued or asked for


@pytest.mark.parametrize("name", NAMES)
def test_long_jobs_go_to_the_long_job_scheduler_and_never_to_the_reserved_partition(name):
    """With half the workers reserved, every long task runs on the general half, placed by the long-job
    scheduler; short tasks run on both halves."""
    r = run(name, **{**SMALL, "reserved_fraction": 0.5})
    rec = actors(r, HawkScheduler)[0].recorder
    long_jobs = {j for j, job in rec.jobs.items() if not job.short}
    assert long_jobs and counters(r)["long_tasks_placed"] == sum(rec.jobs[j].num_tasks for j in long_jobs)
    nodes = sorted(actors(r, HawkNode), key=lambda n: n.spec.worker_id)
    reserved = {n.spec.worker_id for n in nodes[:len(nodes) // 2]}
    assert all(t.worker not in reserved for (j, _), t in rec.tasks.items() if j in long_jobs)
    assert any(t.worker in reserved for (j, _), t in rec.tasks.items() if j not in long_jobs)


def _stealing(tmp_path, events=()):
    """Three workers, none reserved: a long job's two tasks on the first two, a short job's twelve probes over
    all three; the third runs its share, then steals the short reservations queued behind the long tasks."""
    trace = tmp_path / "t.tr"
    trace.write_text("0 2 100 100 100\n0.01 6 5 5 5 5 5 5 5\n")
    return run("hawk", events, jobs=2, workload="trace", trace=str(trace), lms=1, gms=1, workers_per_partition=3,
               constraints=False, cost_model="zero", reserved_fraction=0.0)


def test_an_idle_hawk_node_steals_the_short_tasks_queued_behind_a_long_one(tmp_path):
    r = _stealing(tmp_path)
    c = counters(r)
    assert c["steals"] >= 1 and c["stolen_probes"] >= 1
    rec = actors(r, HawkScheduler)[0].recorder
    assert max(t.end_us for (j, _), t in rec.tasks.items() if j == 1) < 50 * S  # not behind the 100-s tasks
    thieves = {t.worker for (j, _), t in rec.tasks.items() if j == 1}
    assert thieves == {2}  # every short task ran on the idle worker


# ---- node crashes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("restart", [False, True])
def test_a_node_that_crashes_with_queued_reservations_and_running_tasks(name, restart):
    """The crash notice makes the schedulers place the node's tasks again and send its lost reservations
    again; every job ends."""
    events = [(5 * S, "crash", "w-2")] + ([(7 * S, "restart", "w-2")] if restart else [])
    r = run(name, events, **SMALL)
    c = counters(r)
    assert c["tasks_relaunched"] == r.summary["faults"]["executions_aborted"] > 0
    assert (r.fabric.actor(r.fabric.addr("w-2")) is None) == (not restart)


# ---- scheduler crashes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("restart", [False, True])
def test_a_distributed_scheduler_crash_loses_no_job(name, restart):
    events = [(4 * S, "crash", f"{name}-0")] + ([(5 * S, "restart", f"{name}-0")] if restart else [])
    r = run(name, events, **SMALL)
    c = counters(r)
    assert c["jobs_resubmitted"] > 0 and c["front_ends_taken_down"] == 1


@pytest.mark.parametrize("name", NAMES)
def test_a_long_job_scheduler_crash_rebuilds_its_view_from_the_nodes(name):
    """Its long jobs go to a distributed scheduler (which probes for them over the general partition); the
    restarted one announces itself, asks every node for its long work, gets the long jobs again, and every
    job ends."""
    r = run(name, [(2 * S, "crash", f"{name}-long-0"), (4 * S, "restart", f"{name}-long-0")], jobs=60, **SMALL)
    c = counters(r)
    by = r.summary["messages_by_kind"]
    assert c["long_views_rebuilt"] == 1 and c["jobs_resubmitted"] > 0
    assert by["hawk.load_ask"] == by["hawk.load"] == 8
    scheduler = r.fabric.actor(r.fabric.addr(f"{name}-long-0"))
    assert scheduler.waits.busy_count == 0 and not any(scheduler.waits.load)  # drained again at the end


@pytest.mark.parametrize("name", NAMES)
def test_a_long_job_scheduler_down_for_good_leaves_long_jobs_to_the_others(name):
    r = run(name, [(S, "crash", f"{name}-long-0")], jobs=60, **SMALL)
    assert counters(r)["front_ends_taken_down"] == 1


# ---- cuts ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_a_cut_shorter_than_the_connection_timeout_only_delays(name):
    nodes = [f"w-{i}" for i in range(3)]
    r = run(name, [(3 * S, "partition", ([f"{name}-0", f"{name}-long-0"], nodes)), (6 * S, "heal", ())], **SMALL)
    assert kinds(r) <= PROTOCOL and "tasks_relaunched" not in counters(r)
    assert r.fabric.statistics().drops_by_cause == {}


@pytest.mark.parametrize("name", NAMES)
def test_a_cut_longer_than_the_connection_timeout_places_again(name):
    nodes = [f"w-{i}" for i in range(3)]
    r = run(name, [(3 * S, "partition", ([f"{name}-0", f"{name}-long-0"], nodes)), (200 * S, "heal", ())],
            **SMALL)
    c = counters(r)
    assert c["requests_retried"] > 0 and c["tasks_relaunched"] > 0 and c["probes_resent"] > 0
    assert r.fabric.statistics().drops_by_cause.get("broken", 0) > 0


# ---- a thief that crashes with what it stole -------------------------------------------------------------
def test_a_thief_that_crashes_with_stolen_reservations_is_reported_by_its_victims(tmp_path):
    """The thief crashes holding what it stole: its victims report it (``Lost``) and the short job still ends."""
    r = _stealing(tmp_path, [(31 * S, "crash", "w-2"), (32 * S, "restart", "w-2")])
    c = counters(r)
    assert c["steals"] >= 1 and c["lent_reported_lost"] >= 1
    assert r.summary["messages_by_kind"]["hawk.lost"] >= 1


# ---- the end-of-run checks can fail ----------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_node_checks_catch_broken_books_and_a_stuck_reservation(name):
    r = run(name, jobs=5)
    fabric = r.fabric
    assert node_books_balance(fabric) == [] and nodes_not_stuck(fabric) == []
    node = fabric.actor(fabric.addr("w-1"))
    node.held[0] += 1
    (v,) = node_books_balance(fabric)
    assert v.subject == "w-1" and "outstanding requests need" in v.detail
    node.held[0] -= 1
    node.long_work += 1
    assert "long reservations" in node_books_balance(fabric)[0].detail
    node.long_work -= 1
    node.free[0] -= 1
    assert "plus running" in node_books_balance(fabric)[0].detail
    node.free[0] += 1
    node.queue.append((EagleReservation if name == "eagle" else Reservation)(0, 99, 0, (1,), (), 1, False, node.id))
    (v,) = nodes_not_stuck(fabric)
    assert "never asked for" in v.detail


# ---- the fault search over what they claim -------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_they_claim_every_fault_kind(name):
    assert set(registry.get(name).survives) == {"crash", "restart", "partition", "heal", "slow", "restore", "loss"}


@pytest.mark.parametrize("name", NAMES)
def test_random_fault_plans_in_both_phases(name):
    @settings(max_examples=15, derandomize=True, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategies.examples("default", schedulers=[name], liveness=True))
    def search(example):
        fuzz.run_guarded(example)

    search()
