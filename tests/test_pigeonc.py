"""PigeonC: constraint-set weights (the CS1/CS2 example of 2023 paper 4.2) and the selection frequencies
they produce, constraint-respecting masters, long tasks on idle workers no short task matches, defaults."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors.pigeon.constraint_sets import ConstraintSetCounts
from fedemu.actors.pigeon.distributor import Distributor
from fedemu.actors.pigeon.group import GroupConfig
from fedemu.actors.pigeon.master import Master
from fedemu.actors.pigeon.messages import TaskBatch
from fedemu.actors.pigeon.worker import PigeonWorker
from fedemu.fabric.actor import Actor
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.messages import message
from fedemu.model import US_PER_S as US
from fedemu.model import Job, Recorder, WorkerSpec
from fedemu.policies.worker_choice import RandomChoice
from fedemu.tools.run.runner import execute
from scheduler_helpers import rebuilt

# Section 4.2 with constraint Ck written as id k: L1 = (C1,C3,C5), (C1,C2), (C4); L2 = (C2,C4), (C4), (C2,C4)
L1 = [WorkerSpec(0, 0, (1,), (1, 3, 5)), WorkerSpec(1, 0, (1,), (1, 2)), WorkerSpec(2, 0, (1,), (4,))]
L2 = [WorkerSpec(3, 1, (1,), (2, 4)), WorkerSpec(4, 1, (1,), (4,)), WorkerSpec(5, 1, (1,), (2, 4))]


def test_constraint_set_occurrences_match_the_paper():
    counts = ConstraintSetCounts([L1, L2])
    assert counts.tables[0] == {(1, 3, 5): 1, (1, 2): 1, (4,): 1}  # CS1
    assert counts.tables[1] == {(2, 4): 2, (4,): 1}  # CS2


@pytest.mark.parametrize("task,weights", [
    ((4,), (1, 3)),  # L1: (C4); L2: (C2,C4) x2 + (C4)
    ((2,), (1, 2)),
    ((1,), (2, 0)),
    ((2, 4), (0, 2)),
    ((1, 3), (1, 0)),
    ((), (3, 3)),  # no constraints: group sizes
    ((7,), (0, 0)),
])
def test_weights_are_counts_of_supersets(task, weights):
    assert ConstraintSetCounts([L1, L2]).weights(task) == weights


@given(groups=st.lists(st.lists(st.tuples(st.lists(st.integers(0, 5), max_size=4), st.integers(1, 3)), max_size=8),
                       min_size=1, max_size=3),
       tasks=st.lists(st.tuples(st.lists(st.integers(0, 6), max_size=3), st.integers(1, 3)), min_size=1, max_size=6))
@settings(max_examples=60, deadline=None)
def test_weights_match_a_count_of_every_machine(groups, tasks):
    """The bit-mask counts equal a plain count: machines holding every constraint with room for the demand."""
    specs, wid = [], 0
    for g, machines in enumerate(groups):
        specs.append([])
        for cons, cap in machines:
            specs[-1].append(WorkerSpec(wid, g, (cap,), tuple(cons)))
            wid += 1
    counts = ConstraintSetCounts(specs)
    for cons, demand in tasks + tasks:  # twice: the cached answer too
        want = tuple(sum(1 for w in ws if set(cons) <= set(w.constraints) and w.capacity[0] >= demand)
                     for ws in specs)
        assert counts.weights(tuple(cons), (demand,)) == want


def test_weights_skip_machines_too_small_for_the_demand():
    big = [WorkerSpec(0, 0, (4,), (1,)), WorkerSpec(1, 0, (1,), (1,))]
    small = [WorkerSpec(2, 1, (1,), (1,))]
    counts = ConstraintSetCounts([big, small])
    assert counts.weights((1,), (1,)) == (2, 1)
    assert counts.weights((1,), (2,)) == (1, 0)


class CountingMaster(Actor):
    """A stub master that only counts the tasks it is sent."""

    def __init__(self):
        super().__init__()
        self.tasks = 0

    def on_TaskBatch(self, msg, src):
        self.tasks += len(msg.indices)


@pytest.mark.parametrize("task,p_second", [((4,), 3 / 4), ((2,), 2 / 3), ((), 1 / 2), ((1,), 0.0), ((2, 4), 1.0)])
def test_selection_frequencies_through_the_fabric(task, p_second):
    """A real distributor actor on a fabric sends N tasks with constraints C_T; the share each stub master
    receives must match count_i / sum(count): within 4 standard deviations of the binomial."""
    n = 4000
    fabric = Fabric(11)
    counts = ConstraintSetCounts([L1, L2])
    masters = ["master-0", "master-1"]
    fabric.add("dist-0", lambda: Distributor(masters, counts=counts, short_cutoff_us=90 * US, recorder=Recorder(),
                                             feasible=lambda c, d: True))
    fabric.add("master-0", CountingMaster)
    fabric.add("master-1", CountingMaster)
    for j in range(4):  # several jobs: every task draws on its own
        fabric.inject(0, Job(j, 0, (US,) * (n // 4), (task,) * (n // 4)), at_us=j)
    fabric.run_blocking()
    got = fabric.actor(2).tasks
    assert fabric.actor(1).tasks + got == n
    sd = math.sqrt(n * p_second * (1 - p_second))
    assert abs(got - n * p_second) <= 4 * sd + 1e-9


@pytest.mark.parametrize("policy", ["random", "min-constraints"])
def test_pigeonc_respects_constraints_end_to_end(policy):
    overrides = {"scheduler": "pigeonc", "policy": policy, "jobs": 200, "load": 0.9}
    r = execute("default", seed=4, overrides=overrides)
    s = r.summary
    assert s["jobs_completed"] + s["unschedulable"] == 200
    assert "constraint_violations" not in s["counters"]
    cluster, jobs = rebuilt(overrides, 4)
    provides = {w.worker_id: set(w.constraints) for w in cluster.workers()}
    rec = r.fabric.actor(r.fabric.addr("dist-0")).recorder
    checked = 0
    for (job_id, index), task in rec.tasks.items():
        if task.worker >= 0:
            assert set(jobs[job_id].constraints[index]) <= provides[task.worker]
            checked += 1
    assert checked == s["tasks_completed"] > 0


def test_defaults_fqw_20_and_no_reserved_workers():
    r = execute("default", overrides={"scheduler": "pigeonc", "jobs": 10})
    master = r.fabric.actor(r.fabric.addr("master-0")).role
    assert master.dispatch.fq.weight == 20 and master.dispatch.reserved == 0
    with pytest.raises(ConfigError, match="parameter 'reserved_fraction' does not apply to scheduler 'pigeonc'"):
        execute("default", overrides={"scheduler": "pigeonc", "jobs": 10, "reserved_fraction": 0.1})
    r = execute("default", overrides={"scheduler": "pigeon", "jobs": 10, "reserved_fraction": 0.1})
    master = r.fabric.actor(r.fabric.addr("master-0")).role
    assert master.dispatch.fq.weight == 20 and master.dispatch.reserved == 8  # round(0.1 * 75)


@message("test.pigeonc.go")
class Go:
    """The driver's timer: send the long job now."""


class Driver(Actor):
    """Plays the distributor: a short job of three (C1) tasks, then one unconstrained long task."""

    def __init__(self, master: int):
        super().__init__()
        self.master = master

    def on_start(self):
        self.send(self.master, TaskBatch(0, True, (1,), (0, 1, 2), (10 * US,) * 3, ((1,),) * 3))
        self.set_timer(US, Go())

    def on_Go(self, msg, src):
        self.send(self.master, TaskBatch(1, False, (1,), (0,), (US,), ((),)))

    def on_TaskFinished(self, msg, src):
        pass

    def unhandled(self, msg, src):
        """Claims: a driver plays no failover."""


def test_long_task_runs_on_an_idle_worker_no_short_task_matches():
    """Strict priority (W = inf), yet the long task starts at once on worker 1, which lacks C1: the
    queued short tasks (all needing C1) can only use worker 0 (2023 paper, 4.2)."""
    workers = [WorkerSpec(0, 0, (1,), (1,)), WorkerSpec(1, 0, (1,), ())]
    rec = Recorder()
    rec.job_arrived(Job(0, 0, (10 * US,) * 3, ((1,),) * 3))
    rec.job_arrived(Job(1, 0, (US,), ((),)), short=False)
    fabric = Fabric(3)
    fabric.add("driver", lambda: Driver(1))
    cfg = GroupConfig(0, tuple(workers), ["master-0", "w-0", "w-1"], ["driver"], RandomChoice(), math.inf, 0, True, 1,
                      rec, 10 * US, 30 * US)
    fabric.add("master-0", lambda: Master(cfg))
    for rank, w in enumerate(workers, 1):
        fabric.add(f"w-{w.worker_id}", lambda w=w, rank=rank: PigeonWorker(w, rec, cfg, rank))
    fabric.run_blocking()
    short = [rec.tasks[(0, i)] for i in range(3)]
    long_task = rec.tasks[(1, 0)]
    assert [t.worker for t in short] == [0, 0, 0]
    assert long_task.worker == 1 and long_task.start_us == US + 1000  # timer + 2 hops of 0.5 ms
    assert long_task.start_us < short[1].start_us
    assert fabric.actor(1).statistics().served_low == 1


def _dispatch(workers, aware=True, reserved=0, policy="random", make=None):
    """A master's dispatch of ``workers`` on a host of its own, with no cost model."""
    from types import SimpleNamespace

    from fedemu.actors.pigeon.dispatch import Dispatch
    from fedemu.fabric.rand import Stream
    from fedemu.policies.worker_choice import get_worker_choice

    recorder = SimpleNamespace(task_dispatched=lambda *a: None, count=lambda *a: None)
    host = SimpleNamespace(timed=False, charge=lambda *a: None, now=0, fabric=SimpleNamespace(event_log=None))
    cfg = SimpleNamespace(workers=workers, member_names=[f"m{i}" for i in range(len(workers) + 1)],
                          recorder=recorder, policy=get_worker_choice(policy), aware=aware, num_resources=1,
                          reserved=reserved, weight=2)
    return (make or Dispatch)(host, cfg, Stream(7, "choice"))


def test_a_status_that_gives_a_worker_more_room_offers_a_key_refused_for_room_again():
    """A worker still available for one unit whose status gives it a second: the key of a two-unit task,
    refused when it had one, is offered again (a gain that changes no availability)."""
    from fedemu.actors.common.front_end import Pending
    from fedemu.policies.fair_queue import HIGH

    dispatch = _dispatch((WorkerSpec(0, 0, (3,), (1,)),))
    placed = []
    launch = lambda cls, task, local: placed.append(task.job_id)  # noqa: E731
    dispatch.refresh(0, [1])  # the status says one unit is free
    dispatch.enqueue(Pending(1, 0, 1, (1,), (2,), 0), HIGH)
    dispatch.run(launch)
    assert placed == [] and dispatch.fq.rejected == 1
    dispatch.refresh(0, [2])  # still available, with room for two now
    dispatch.run(launch)
    assert placed == [1]


def _every_key(host, cfg, choice):
    """A master's dispatch as it was before the refusal memo: every pass offers every queued key again."""
    from fedemu.actors.pigeon.dispatch import Dispatch

    class Offered(Dispatch):
        def _reopen(self):
            self.gained = 0
            self.fq.reopen()

    return Offered(host, cfg, choice)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_pass_skips_only_keys_it_would_refuse_again(data):
    """The dispatch offers a pass only the refused keys some worker that gained free capacity since could
    serve. Against a dispatch that offers every key each pass, under any sequence of arrivals, releases,
    statuses and passes (PigeonC and Pigeon with reserved workers, one or two units of demand): the same
    tasks on the same workers in the same order with the same draws, and never more offers refused."""
    from fedemu.actors.common.front_end import Pending
    from fedemu.policies.fair_queue import HIGH, LOW

    n = data.draw(st.integers(1, 6))
    caps = [data.draw(st.integers(1, 3)) for _ in range(n)]
    workers = tuple(WorkerSpec(i, 0, (caps[i],), tuple(data.draw(st.sets(st.integers(0, 3), max_size=3))))
                    for i in range(n))
    aware = data.draw(st.booleans())
    reserved = 0 if aware else data.draw(st.integers(0, n - 1))
    policy = data.draw(st.sampled_from(["random", "min-constraints"]))
    made = [(_dispatch(workers, aware, reserved, policy, make), []) for make in (None, _every_key)]
    running: list[tuple] = []  # (local, demand) of each task placed and not yet released
    for step in range(data.draw(st.integers(1, 40))):
        op = data.draw(st.sampled_from(["task", "task", "release", "status", "pass"]))
        if op == "task":
            constraints = data.draw(st.lists(st.integers(0, 3), max_size=2).map(tuple))
            demand, cls = (data.draw(st.integers(1, 2)),), data.draw(st.sampled_from([HIGH, LOW]))
            for dispatch, _ in made:
                dispatch.admit(demand)
                dispatch.enqueue(Pending(step, 0, 1, constraints, demand, 0), cls)
        elif op == "release" and running:
            local, demand = running.pop(data.draw(st.integers(0, len(running) - 1)))
            for dispatch, _ in made:
                dispatch.release(local, demand)
        elif op == "status":
            local = data.draw(st.integers(0, n - 1))
            held = sum(d[0] for w, d in running if w == local)
            free = data.draw(st.integers(0, caps[local] - held))  # (a status may say less is free than is)
            for dispatch, _ in made:
                dispatch.refresh(local, [free])
        if op in ("task", "release", "pass"):  # an arrival or an idle notice runs a pass (and a tick may)
            before = len(made[0][1])
            for dispatch, launched in made:
                dispatch.run(lambda cls, task, local, out=launched: out.append((cls, task.job_id, local, task.demand)))
            assert made[0][1] == made[1][1]
            running += [(local, demand) for _, _, local, demand in made[0][1][before:]]
    (memo, placed), (every, _) = made
    assert memo.choice.counter == every.choice.counter  # the same draws from the same stream
    assert memo.fq.rejected <= every.fq.rejected
    assert list(memo.queued) == list(every.queued)
