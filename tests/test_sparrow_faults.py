"""Sparrow under faults, on connections: node crashes with queued probes and running tasks (with and
without restart), cuts shorter and longer than the connection timeout, scheduler crashes, loss on every
link, and a hypothesis search over random plans of the kinds Sparrow claims to survive (both phases of the
fault search). Every run must end with every invariant "ok" (``execute`` raises RunViolation otherwise).

Recovery is driven by the fabric's notices only: a fault-free run, a run with loss and a short cut all
send the paper's messages and nothing else, and set no timer but the tasks' own.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from fedemu.actors import registry
from fedemu.actors.sparrow.messages import Probe
from fedemu.actors.sparrow.node import SparrowNode, node_books_balance, nodes_not_stuck
from fedemu.actors.sparrow.scheduler import SparrowScheduler
from fedemu.tools.search import fuzz, strategies
from fedemu.tools.run import runner
from scheduler_helpers import EventPlan as Plan

S = 1_000_000
SMALL = {"lms": 1, "gms": 1, "workers_per_partition": 6, "load": 1.0, "constraints": False,
         "cost_model": "zero"}  # probes queue up; protocol paths without service times
PAPER = {"job", "sparrow.probe", "sparrow.get_task", "sparrow.assign", "sparrow.cancel", "worker.finished",
         "submit.job_done"}


def run(events=(), jobs=40, seed=1, **over):
    """One default-scenario Sparrow run with the fault events; checks the verdict, returns the result."""
    result = runner.execute("default", seed=seed, overrides={"scheduler": "sparrow", "jobs": jobs, **over},
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


def timers(result, cls):
    """Timers the live actors of class ``cls`` set (a node's include one per task it ran)."""
    fabric = result.fabric
    actors = [fabric.actor(fabric.addr(n)) for n in fabric.names]
    return sum(a._timers for a in actors if isinstance(a, cls))


def ran(result):
    fabric = result.fabric
    return sum(fabric.actor(fabric.addr(n)).completed for n in fabric.names if n.startswith("w-")
               and fabric.actor(fabric.addr(n)) is not None)


# ---- nothing fails: the paper's messages only ------------------------------------------------------
@pytest.mark.parametrize("over", [{}, SMALL, {"loss": 0.05}])
def test_without_a_break_only_the_papers_messages_are_sent_and_nothing_is_timed(over):
    """Fault-free, or with loss on every link (retransmission delay on the connections): every probe ends
    in one request and one answer, and no scheduler or node sets a timer but the tasks' own."""
    r = run(**over)
    assert kinds(r) <= PAPER
    by = r.summary["messages_by_kind"]
    assert by["sparrow.probe"] == by["sparrow.get_task"] == counters(r)["probes"]
    assert by["sparrow.assign"] == ran(r) and by["sparrow.cancel"] <= by["sparrow.get_task"] - ran(r)
    assert timers(r, SparrowScheduler) == 0 and timers(r, SparrowNode) == ran(r)
    assert r.fabric.statistics().drops_by_cause == {}


def test_a_task_that_waits_long_in_a_queue_is_never_probed_for_again():
    """One worker, a long task ahead in its queue: the second job waits 100 s for its probe to reach the
    head, and its scheduler sends nothing meanwhile (Sparrow re-probes only on evidence of a fault)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.tr"
        trace.write_text("0 1 100 100\n0.001 1 1 1\n")
        r = run(jobs=2, workload="trace", trace=str(trace), lms=1, gms=1, workers_per_partition=1,
                constraints=False, cost_model="zero")
    rec = r.fabric.actor(r.fabric.addr("sparrow-0")).recorder
    assert rec.tasks[(1, 0)].start_us > 100 * S
    assert counters(r) == {"cancels": 2, "probes": 4} and kinds(r) <= PAPER


# ---- node crashes -----------------------------------------------------------------------------------
@pytest.fixture
def crash_log(monkeypatch):
    """What each crashed node held when it went down: (name, queued probes, running tasks)."""
    seen = []
    on_crash = SparrowNode.on_crash

    def noting(self):
        seen.append((self.name, len(self.probes), len(self.running)))
        on_crash(self)

    monkeypatch.setattr(SparrowNode, "on_crash", noting)
    return seen


@pytest.mark.parametrize("restart", [False, True])
def test_a_node_that_crashes_with_queued_probes_and_running_tasks(crash_log, restart):
    """The crash notice makes the scheduler place the node's running tasks again; its queued probes are
    lost (fewer requests than probes) and the jobs still end."""
    events = [(3 * S, "crash", "w-0")] + ([(5 * S, "restart", "w-0")] if restart else [])
    r = run(events, **SMALL)
    ((name, queued, running),) = crash_log
    assert name == "w-0" and queued > 0 and running > 0
    c = counters(r)
    assert c["tasks_relaunched"] == running == r.summary["faults"]["executions_aborted"]
    by = r.summary["messages_by_kind"]
    assert by["sparrow.get_task"] <= by["sparrow.probe"] - queued
    assert (r.fabric.actor(r.fabric.addr("w-0")) is None) == (not restart)


def test_probes_lost_with_a_node_are_sent_again_when_the_rest_do_not_cover_the_tasks(monkeypatch):
    """One probe per task, two nodes, one of them down from the start: a job whose probe went to it is
    refused, and probed for again at the notice, on the other node; the dead node gets no probe while it
    is suspected (a second after the first notice, doubling)."""
    sent = []
    send = SparrowScheduler.send

    def noting(self, dst, msg):
        if isinstance(msg, Probe):
            sent.append((self.now, self.fabric.name_of(dst), msg.job_id))
        send(self, dst, msg)

    monkeypatch.setattr(SparrowScheduler, "send", noting)
    r = run([(0, "crash", "w-0")], **dict(SMALL, lms=2, workers_per_partition=1, jobs=10, fanout=1,
                                           probe_ratio=1.0, load=0.3))
    to_dead = [(t, job) for t, node, job in sent if node == "w-0"]
    resent = counters(r)["probes_resent"]
    assert resent == len(to_dead) > 0  # each refused probe, and only those, sent again
    first, *later = [t for t, _ in to_dead]
    assert all(t >= first + S for t in later), to_dead


# ---- cuts ----------------------------------------------------------------------------------------------
def test_a_cut_shorter_than_the_connection_timeout_only_delays():
    nodes = [f"w-{i}" for i in range(3)]
    r = run([(3 * S, "partition", (["sparrow-0"], nodes)), (6 * S, "heal", ())], **SMALL)
    assert kinds(r) <= PAPER and "tasks_relaunched" not in counters(r)
    assert r.fabric.statistics().drops_by_cause == {}


def test_a_cut_longer_than_the_connection_timeout_asks_again_and_places_again():
    """200 s apart (the timeout is 60 s): the cut-off nodes ask again for what they were waiting on (and
    get the first answer again), and the scheduler places their tasks again."""
    nodes = [f"w-{i}" for i in range(3)]
    r = run([(3 * S, "partition", (["sparrow-0"], nodes)), (200 * S, "heal", ())], **SMALL)
    c = counters(r)
    assert c["requests_retried"] > 0 and c["tasks_relaunched"] > 0
    assert r.fabric.statistics().drops_by_cause.get("broken", 0) > 0


# ---- scheduler crashes ----------------------------------------------------------------------------------
@pytest.mark.parametrize("restart", [False, True])
def test_a_scheduler_crash_loses_no_job(restart):
    """The crash notice reaches the submitter at once: the crashed scheduler's open jobs go to the others."""
    events = [(S // 2, "crash", "sparrow-0")] + ([(S, "restart", "sparrow-0")] if restart else [])
    r = run(events)
    c = counters(r)
    assert c["jobs_resubmitted"] > 0 and c["front_ends_taken_down"] == 1
    assert not {"submit.ping", "submit.pong"} & set(r.summary["messages_by_kind"])


def test_the_only_scheduler_down_for_twenty_minutes_gets_its_jobs_back_when_it_restarts():
    """Every front end down: the submitter hands the jobs out again when its backoff ends (refused while
    the scheduler is down: each refusal a notice, the backoff doubling up to a minute), and they all run
    once it is back."""
    r = run([(S // 2, "crash", "sparrow-0"), (S // 2 + 1200 * S, "restart", "sparrow-0")], schedulers=1)
    c = counters(r)
    assert c["jobs_resubmitted"] > 0
    assert r.summary["virtual_end_s"] < 1200.5 + 60 + 60  # handed out within a minute of the restart


def test_a_cut_between_the_submitter_and_a_scheduler_is_asked_about_after_the_connection_breaks():
    """A cut longer than the connection timeout: the jobs handed meanwhile, and the reports sent, are lost
    with their connections; the submitter asks the scheduler what it holds (``Ping``) and hands it again
    what it does not, and the scheduler reports again what it closed."""
    r = run([(S // 2, "partition", (["submitter"], ["sparrow-0"])), (300 * S, "heal", ())])
    by = r.summary["messages_by_kind"]
    assert by.get("submit.ping", 0) >= 1 and by.get("submit.pong", 0) >= 1
    assert counters(r).get("jobs_resubmitted", 0) > 0


def test_nodes_drop_the_probes_and_requests_of_a_scheduler_that_crashed(monkeypatch):
    """At the crash notice each node forgets the crashed scheduler's probes and requests: none of its
    nodes keeps a probe of it queued, or a slot held for it."""
    seen = []
    broke = SparrowNode.connection_broke

    def noting(self, brk):
        broke(self, brk)
        if brk.cause == "crash":
            seen.append((self.name, any(p[0] == brk.peer for p in self.probes),
                         any(e[0] == brk.peer for e in self.outstanding.values())))

    monkeypatch.setattr(SparrowNode, "connection_broke", noting)
    run([(2 * S, "crash", "sparrow-0"), (3 * S, "restart", "sparrow-0")], **SMALL)
    assert seen and not any(probe or held for _, probe, held in seen)


# ---- the end-of-run checks can fail -------------------------------------------------------------------
def test_the_node_checks_catch_broken_books_and_a_stuck_probe():
    r = run(jobs=5)
    fabric = r.fabric
    assert node_books_balance(fabric) == [] and nodes_not_stuck(fabric) == []
    node = fabric.actor(fabric.addr("w-1"))
    node.held[0] += 1
    (v,) = node_books_balance(fabric)
    assert v.subject == "w-1" and "outstanding requests need" in v.detail
    node.held[0] -= 1
    node.free[0] -= 1
    assert "plus running" in node_books_balance(fabric)[0].detail
    node.free[0] += 1
    node.probes.append((0, 99, 0, (1,)))  # a probe that fits, never asked for
    (v,) = nodes_not_stuck(fabric)
    assert "never asked for" in v.detail


# ---- the fault search over what Sparrow claims ----------------------------------------------------------
def test_sparrow_claims_what_these_tests_prove():
    assert set(registry.get("sparrow").survives) == {"crash", "restart", "partition", "heal", "slow", "restore",
                                                    "loss"}


@settings(max_examples=30, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(strategies.examples("default", schedulers=["sparrow"], liveness=True))
def test_random_fault_plans_in_both_phases(example):
    fuzz.run_guarded(example)


def test_with_every_node_suspected_the_probes_wait_for_the_first_backoff_to_end():
    """One node, down for five minutes from the start: each probe it refuses is a notice, and the next one
    waits until its backoff ends (a second, doubling, up to a minute), so the outage costs a few probes, not
    one per network round trip; once it is back every job runs."""
    r = run([(0, "crash", "w-0"), (300 * S, "restart", "w-0")], jobs=5,
            **dict(SMALL, workers_per_partition=1, fanout=1, schedulers=1))
    c = counters(r)
    assert 0 < c["probes_resent"] < 5 * 20
    assert r.summary["virtual_end_s"] < 300 + 60 + 10
