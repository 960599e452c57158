"""A Pigeon / PigeonC Master: owns one group of workers, queues its tasks in two WFQ classes, dispatches.

Tasks of short jobs are HIGH, of long jobs LOW (``policies.fair_queue``, weight W). Pigeon (2019, 2.2)
reserves the last ``reserved`` workers of the group for HIGH tasks; a HIGH task takes an idle
low-priority worker first, else an idle reserved one; a LOW task only an idle low-priority worker.
PigeonC (2023, 4.2) has no reserved workers and matches constraints with the same bit-vector
PartitionView and worker-choice policy as Megha.

Choices where the papers are silent:
- The two idle lists are the view's availability bit vector split by the reserved mask; the worker-choice
  policy (random / min-constraints) picks the member of a list.
- Arrivals and idle notices both run one dispatch pass: while some queued task fits an idle worker,
  serve the class WFQ prefers, else the other. After a pass no queued task fits any idle worker, so a
  pass started by one freed worker does exactly what 2.2 prescribes for that worker, and a batch of
  arriving tasks is handled one by one in order. Every dispatch counts as a WFQ serve.
- PigeonC serves the oldest task of a class that fits some idle worker (constrained heads do not block
  the class); Pigeon has one key per class, so it is FIFO.
- Pigeon ignores constraints, as published; placing a task on a machine lacking one of its constraints is
  counted as ``constraint_violations`` so comparisons show it.
- The master's view is exact for its own workers: it allocates before launching and releases on the
  worker's idle notice, so it never over-commits a worker.
"""

from __future__ import annotations

import attrs
import numpy as np

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import RESERVED_PLACED, TASK_PLACED, emit
from fedemu.policies.fair_queue import HIGH, LOW, FairQueue
from fedemu.policies.partition_view import PartitionView

from .front_end import Pending
from .pigeon_messages import TaskBatch
from .protocol import RunTask, TaskFinished

_COUNTER = ("wfq_high", "wfq_low")


@attrs.frozen
class MasterStatistics:
    name: str
    group: int
    queued_high: int
    queued_low: int
    served_high: int
    served_low: int
    idle_workers: int
    reserved: int


class Master(Actor):
    """Master of group ``group``: ``workers`` are its WorkerSpecs, ``worker_names`` their actors' names."""

    def __init__(self, group: int, workers, worker_names: list[str], *, policy, weight, reserved: int,
                 constraint_aware: bool, num_resources: int, recorder) -> None:
        super().__init__()
        n = len(workers)
        if len(worker_names) != n:
            raise ValueError(f"master {group}: {len(worker_names)} worker names for {n} workers")
        if not 0 <= reserved < n:
            raise ValueError(f"master {group}: {reserved} reserved of {n} workers leaves none for long tasks")
        self.group = group
        self.worker_names = worker_names
        self.worker_ids: list[int] = []  # the workers' actor ids, resolved from their names at start
        self.local_of: dict[int, int] = {}  # worker actor id -> index in the group
        self.policy = policy
        self.aware = constraint_aware
        self.recorder = recorder
        self.view = PartitionView(workers, num_resources=num_resources)
        self.reserved = reserved
        self.is_low = np.ones(n, dtype=bool)
        if reserved:
            self.is_low[n - reserved:] = False
        self.worker_bits = [sum(1 << c for c in dict.fromkeys(w.constraints)) for w in workers]
        self.worker_cons = [tuple(dict.fromkeys(w.constraints)) for w in workers]
        # idle workers providing each constraint id: a constant-time "nothing can fit" test per key
        self.cons_free = [0] * self.view.num_constraints
        for local in range(n):
            if self.view.is_available(local):
                self._count(local, 1)
        self.unit_gate = True  # every task seen so far needs at least the unit demand
        self.fq = FairQueue(weight)
        self.accept = (self._match_high, self._match_low) if reserved else (self._match_any, self._match_any)
        self.choice = None

    def on_start(self) -> None:
        self.worker_ids = [self.fabric.addr(name) for name in self.worker_names]
        self.local_of = {actor: local for local, actor in enumerate(self.worker_ids)}
        self.choice = self.rng.child("choice")

    # ---- messages --------------------------------------------------------------------
    def on_TaskBatch(self, msg: TaskBatch, src: int) -> None:
        cls = HIGH if msg.short else LOW
        push = self.fq.push
        now = self.now
        demand = msg.demand
        aware = self.aware
        if demand[0] < 1:
            self.unit_gate = False
        for index, duration, constraints in zip(msg.indices, msg.durations, msg.constraints):
            key = (constraints if aware else (), demand)
            push(cls, Pending(msg.job_id, index, duration, constraints, demand, now, src), key)
        self._dispatch()

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        local = self.local_of[src]
        view = self.view
        before = view.is_available(local)
        view.release(local, msg.demand)
        if not before and view.is_available(local):
            self._count(local, 1)
        self._dispatch()

    # ---- dispatch --------------------------------------------------------------------
    def _count(self, local: int, delta: int) -> None:
        cons_free = self.cons_free
        for c in self.worker_cons[local]:
            cons_free[c] += delta

    def _dispatch(self) -> None:
        fq = self.fq
        accept = self.accept
        view = self.view
        while len(fq):
            if self.unit_gate and view.free_count == 0:
                break
            for cls in fq.order():
                got = fq.take(cls, accept[cls])
                if got is not None:
                    self._launch(cls, got[0], got[1])
                    break
            else:
                break
        fq.reopen()

    def _blocked(self, constraints) -> bool:
        cons_free = self.cons_free
        for c in constraints:
            if cons_free[c] <= 0:
                return True
        return False

    def _match_any(self, key):
        if self.unit_gate and self._blocked(key[0]):
            return None
        cand = self.view.suitable(key[0], key[1])
        if not len(cand):
            return None
        return self.policy.choose(self.view, cand, self.choice)

    def _match_high(self, key):
        """A HIGH task: an idle low-priority worker if any, else an idle reserved one."""
        if self.unit_gate and self._blocked(key[0]):
            return None
        cand = self.view.suitable(key[0], key[1])
        if not len(cand):
            return None
        low = cand[self.is_low[cand]]
        return self.policy.choose(self.view, low if len(low) else cand, self.choice)

    def _match_low(self, key):
        """A LOW task: only an idle low-priority worker."""
        if self.unit_gate and self._blocked(key[0]):
            return None
        cand = self.view.suitable(key[0], key[1])
        if len(cand):
            cand = cand[self.is_low[cand]]
        if not len(cand):
            return None
        return self.policy.choose(self.view, cand, self.choice)

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        view = self.view
        before = view.is_available(local)
        view.allocate(local, task.demand)
        if before and not view.is_available(local):
            self._count(local, -1)
        recorder = self.recorder
        recorder.task_dispatched(task.job_id, task.index, self.now - task.since_us)
        recorder.count(_COUNTER[cls])
        if not self.aware and task.constraints:
            need = sum(1 << c for c in task.constraints)
            if need & ~self.worker_bits[local]:
                recorder.count("constraint_violations")
        if self.fabric.event_log is not None:
            self._log_placed(cls, task, local)
        self.send(self.worker_ids[local], RunTask(task.job_id, task.index, task.duration_us, task.demand, -1,
                                                  (task.distributor, self.id)))

    def _log_placed(self, cls: int, task: Pending, local: int) -> None:
        fields = {"job": task.job_id, "task": task.index, "worker": self.worker_names[local]}
        emit(self, TASK_PLACED, queue="high" if cls == HIGH else "low", **fields)
        if self.reserved and not self.is_low[local]:
            emit(self, RESERVED_PLACED, **fields)

    def statistics(self) -> MasterStatistics:
        fq = self.fq
        return MasterStatistics(self.name, self.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], self.view.free_count, self.reserved)
