"""``refused_task=wait-free`` (actors/megha/gm_waiting.py): a GM driven message by message against a model
of the 2023 authors' rule, the contrast with ``retry``, its fault story, and small runs end to end."""

from __future__ import annotations

import types
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fedemu.actors.megha.global_manager import GlobalManager
from fedemu.actors.megha.messages import Heartbeat, Launch, LaunchFailed, TaskCompleted
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import Job, WorkerSpec
from fedemu.actors.megha.partition_search import ORDERS
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.worker_choice import RandomChoice
from fedemu.tools.run.runner import execute

LM, SUBMITTER = 50, 60  # the actor ids the GM sends to
CONSTRAINTS = 2


class Recorder:
    def __init__(self) -> None:
        self.counts = Counter()

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def task_dispatched(self, *args) -> None:
        pass


def gm_over(cons: list, gms: int, per: int, seed: int = 1, **knobs):
    """GM 0 over one LM of ``gms`` partitions of ``per`` one-slot workers (worker w provides ``cons[w]``),
    its sends kept in the returned list instead of crossing a fabric."""
    workers = [WorkerSpec(w, 0, (1,), tuple(sorted(cons[w]))) for w in range(gms * per)]
    views = [[PartitionView(workers[p * per:(p + 1) * per]) for p in range(gms)]]
    gm = GlobalManager(0, ["lm-0"], views, policy=RandomChoice(), feasible=lambda c, d: True, recorder=Recorder(),
                       **knobs)
    gm.fabric = types.SimpleNamespace(event_log=None)
    gm.lm_ids, gm.lm_of = [LM], {LM: 0}
    gm.search.rng = Stream(seed, "test/wait-free")
    sent = []
    gm.send = lambda dst, msg: sent.append(msg)
    return gm, sent


def launches(sent: list) -> list:
    out = [m for m in sent if isinstance(m, Launch)]
    sent.clear()
    return out


class WaitFreeMachine(RuleBasedStateMachine):
    """Jobs, refusals, completions and heartbeats in any order. The model is the authors' list: a task no
    worker matched goes to its back, a refused one to its front; a worker reported free goes to the first
    task in it that it suits; nothing else ever places a waiting task."""

    @initialize(data=st.data(), gms=st.integers(1, 2), per=st.integers(1, 3), seed=st.integers(0, 99),
                order=st.sampled_from(ORDERS))
    def build(self, data, gms, per, seed, order):
        n = gms * per
        self.cons = [data.draw(st.sets(st.integers(0, CONSTRAINTS - 1))) for _ in range(n)]
        self.gm, self.sent = gm_over(self.cons, gms, per, seed, refused_task="wait-free", spill_order=order)
        self.n = n
        self.free = [True] * n  # the model of the GM's view
        self.waiting: list[tuple] = []  # (job, index, constraints), in the authors' queue order
        self.flights: dict[tuple, tuple] = {}  # (job, index) -> (worker, attempt, constraints)
        self.jobs = 0

    def fits(self, w: int, constraints) -> bool:
        return set(constraints) <= self.cons[w]

    def took(self, key, constraints, got: list, worker=None) -> None:
        """``got`` must be exactly one launch of task ``key`` (on ``worker`` when given) to a free suitable
        worker."""
        assert len(got) == 1 and (got[0].job_id, got[0].index) == key, (key, got)
        w = got[0].worker
        assert worker is None or w == worker, (worker, w)
        assert self.free[w] and self.fits(w, constraints)
        self.free[w] = False
        self.flights[key] = (w, got[0].attempt, constraints)

    def reported_free(self, w: int) -> None:
        """Worker ``w`` was reported free: the first waiting task it suits goes there, and nothing else moves."""
        self.free[w] = True
        got = launches(self.sent)
        first = next((t for t in self.waiting if self.fits(w, t[2])), None)
        if first is None:
            assert got == [], f"a waiting task was placed though no reported worker suits it: {got}"
            return
        self.waiting.remove(first)
        self.took(first[:2], first[2], got, worker=w)

    @rule(data=st.data(), k=st.integers(1, 4))
    def job(self, data, k):
        self.jobs += 1
        cons = tuple(tuple(sorted(data.draw(st.sets(st.integers(0, CONSTRAINTS - 1))))) for _ in range(k))
        self.gm.on_Job(Job(self.jobs, 0, (10,) * k, cons), SUBMITTER)
        placed = {(m.job_id, m.index): m for m in launches(self.sent)}
        for i, c in enumerate(cons):
            key = (self.jobs, i)
            if key in placed:
                self.took(key, c, [placed[key]])
        for i, c in enumerate(cons):  # the rest found no free suitable worker: they wait, in task order
            if (self.jobs, i) not in placed:
                assert not any(self.free[w] and self.fits(w, c) for w in range(self.n))
                self.waiting.append((self.jobs, i, c))

    @precondition(lambda self: self.flights)
    @rule(which=st.integers(0, 99), down=st.booleans())
    def refuse(self, which, down):
        """The LM refuses a launch: its worker is busy with another GM's task (or down)."""
        key = sorted(self.flights)[which % len(self.flights)]
        w, attempt, c = self.flights.pop(key)
        self.free[w] = False
        self.gm.on_LaunchFailed(LaunchFailed(key[0], key[1], attempt, 0, (w,), ((0,),), (), down), LM)
        got = launches(self.sent)
        if not down:  # busy: it waits at the front, even where the view holds a free worker it suits
            assert got == [], f"a refused task was placed again before any worker was reported free: {got}"
            self.waiting.insert(0, (*key, c))
        elif any(self.free[v] and self.fits(v, c) for v in range(self.n)):  # down: matched again at once
            self.took(key, c, got)
        else:
            assert got == []
            self.waiting.append((*key, c))

    @precondition(lambda self: self.flights)
    @rule(which=st.integers(0, 99))
    def complete(self, which):
        key = sorted(self.flights)[which % len(self.flights)]
        w = self.flights.pop(key)[0]
        self.gm.on_TaskCompleted(TaskCompleted(key[0], key[1], 0, w, (1,)), LM)
        self.reported_free(w)

    @rule(data=st.data())
    def heartbeat(self, data):
        """A delta of other GMs' changes on workers with nothing of this GM's in flight."""
        idle = [w for w in range(self.n) if w not in {f[0] for f in self.flights.values()}]
        workers = data.draw(st.lists(st.sampled_from(idle), unique=True, max_size=3)) if idle else []
        values = [data.draw(st.booleans()) for _ in workers]
        self.gm.on_Heartbeat(Heartbeat(0, 0, tuple(workers), tuple((int(v),) for v in values), 0), LM)
        got = launches(self.sent)
        for w, v in zip(workers, values):
            self.free[w] = v
        for w, v in zip(workers, values):  # in the message's order, each free one to the first it suits
            if not v:
                continue
            first = next((t for t in self.waiting if self.fits(w, t[2])), None)
            if first is not None:
                self.waiting.remove(first)
                mine = [m for m in got if m.worker == w]
                self.took(first[:2], first[2], mine, worker=w)
                got.remove(mine[0])
        assert got == [], f"launches no reported worker explains: {got}"

    @precondition(lambda self: hasattr(self, "gm"))
    @invariant()
    def the_gm_holds_what_the_model_holds(self):
        assert len(self.gm.waiting) == len(self.waiting) and len(self.gm.queue) == 0
        assert sorted(self.gm.inflight) == sorted(self.flights)


WaitFreeMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_wait_free_against_the_authors_rule = WaitFreeMachine.TestCase


@pytest.mark.parametrize("knob", ["retry", "wait-free"])
def test_a_refused_task_waits_for_a_reported_worker_where_retry_places_it_at_once(knob):
    gm, sent = gm_over([set(), set()], gms=1, per=2, refused_task=knob)
    gm.on_Job(Job(1, 0, (10,)), SUBMITTER)
    first = launches(sent)[0]
    other = 1 - first.worker  # free in the view all along
    gm.on_LaunchFailed(LaunchFailed(1, 0, first.attempt, 0, (first.worker,), ((0,),)), LM)
    again = launches(sent)
    if knob == "retry":
        assert [m.worker for m in again] == [other]
        return
    assert again == [] and len(gm.waiting) == 1
    gm.on_Job(Job(2, 0, (10,)), SUBMITTER)  # a new job's task is matched against the view: it takes the other
    assert [(m.job_id, m.worker) for m in launches(sent)] == [(2, other)]
    gm.on_Heartbeat(Heartbeat(0, 0, (first.worker,), ((1,),), 0), LM)  # the refusing worker reported free
    assert [(m.job_id, m.worker) for m in launches(sent)] == [(1, first.worker)]


def test_a_task_no_worker_suits_waits_behind_and_a_refused_one_goes_ahead():
    """Job 1's second task finds nothing free and waits; job 1's first is refused and goes before it; the
    one worker reported free goes to the refused task."""
    gm, sent = gm_over([set()], gms=1, per=1, refused_task="wait-free")
    gm.on_Job(Job(1, 0, (10, 10)), SUBMITTER)
    (first,) = launches(sent)
    gm.on_LaunchFailed(LaunchFailed(1, first.index, first.attempt, 0, (0,), ((0,),)), LM)
    gm.on_Heartbeat(Heartbeat(0, 0, (0,), ((1,),), 0), LM)
    assert [(m.job_id, m.index) for m in launches(sent)] == [(1, first.index)]


def test_wait_free_with_users_or_gangs_is_a_clear_error():
    for extra in ({"users": 2}, {"gang": True}):
        with pytest.raises(ConfigError, match="refused_task=wait-free needs users=0 and gang=false"):
            execute("default", seed=1, overrides={"jobs": 5, "refused_task": "wait-free", **extra})


SMALL = {"jobs": 150, "gms": 3, "lms": 2, "workers_per_partition": 4, "load": 0.95, "heartbeat_s": 1.0,
         "cost_model": "zero"}


@pytest.mark.parametrize("knobs", [{"refused_task": "wait-free"}, {"spill_order": "fixed"},
                                   {"refused_task": "wait-free", "spill_order": "fixed"}])
def test_a_small_run_with_each_knob_holds_every_invariant(knobs):
    s = execute("default", seed=2, overrides={**SMALL, **knobs}).summary
    assert set(s["invariants"].values()) == {"ok"}
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"] == 150
    counters = s["counters"]
    assert counters.get("invalid_internal", 0) + counters.get("invalid_external", 0) > 0
    assert (counters.get("tasks_waited", 0) > 0) == ("refused_task" in knobs)


def test_wait_free_changes_where_waiting_tasks_go_but_not_the_default_run():
    base = execute("default", seed=2, overrides=SMALL).summary
    again = execute("default", seed=2, overrides={**SMALL, "refused_task": "retry", "spill_order": "rotate"}).summary
    wait = execute("default", seed=2, overrides={**SMALL, "refused_task": "wait-free"}).summary
    assert again["digest"] == base["digest"]
    assert wait["digest"] != base["digest"]


FAULTS = """
[[fault]]
at_s = 3.0
kind = "crash"
target = "gm-1"
for_s = 1.0

[[fault]]
at_s = 4.0
kind = "crash"
target = "lm-0"
for_s = 2.0

[[fault]]
at_s = 5.0
kind = "partition"
sides = ["gm-0", "lm-1"]
for_s = 70.0
"""


def test_wait_free_survives_crashes_and_a_long_cut(tmp_path):
    """A GM and an LM crash and restart, and a cut outlives the connection timeout (its deltas are lost):
    snapshots report the free workers, and every task runs once."""
    from fedemu.scenarios import fault_plan

    path = tmp_path / "plan.toml"
    path.write_text(FAULTS)
    s = execute("default", seed=3, overrides={**SMALL, "refused_task": "wait-free", "jobs": 300},
                faults=fault_plan.load(str(path))).summary
    assert set(s["invariants"].values()) == {"ok"}
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"]
    assert s["counters"].get("view_resyncs", 0) > 0 and s["counters"].get("tasks_waited", 0) > 0
