"""One Pigeon / PigeonC group's two WFQ queues, the view of its workers, and the matching of queued
tasks to idle workers: the schedulers' own algorithm, which the master role (``master``) drives.

Tasks of short jobs are HIGH, of long jobs LOW (``policies.fair_queue``, weight W). Pigeon (2019, 2.2)
reserves the last ``reserved`` workers of the group for HIGH tasks; a HIGH task takes an idle
low-priority worker first, else an idle reserved one; a LOW task only an idle low-priority worker.
PigeonC (2023, 4.2) has no reserved workers and matches constraints with the same bit-vector
PartitionView and worker-choice policy as Megha.

Choices where the papers are silent:
- The two idle lists are the view's availability bit vector split by the reserved mask; the worker-choice
  policy (random / min-constraints) picks the member of a list.
- Arrivals and idle notices both run one dispatch pass: while some queued task fits an idle worker,
  serve the class WFQ prefers, else the other. After a pass no queued task fits any idle worker.
- PigeonC serves the oldest task of a class that fits some idle worker; Pigeon is FIFO per class.
- A pass offers again only the (constraints, demand) keys that the last pass refused and that some worker
  which gained free capacity since could serve: the others would be refused again (between passes a
  worker only gains by a release or a status; within one it only loses). The same tasks are placed on the
  same workers with the same draws; only under a cost model is every key offered, as each offer is
  charged.
- Pigeon ignores constraints, as published; a task placed on a machine lacking one of its constraints
  is counted as ``constraint_violations``.
"""

from __future__ import annotations

import numpy as np

from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, FairQueue
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.worker_choice import among

from .events import RESERVED_PLACED, TASK_PLACED

_COUNTER = ("wfq_high", "wfq_low")


class Dispatch:
    """The queues and the view of one master role (``host``: the actor holding it, which it charges
    and logs through); ``queued`` holds every task waiting, by (job, index), in arrival order."""

    def __init__(self, host, cfg, choice) -> None:
        workers = cfg.workers
        n = len(workers)
        self.h = host
        self.member_names = cfg.member_names
        self.recorder = cfg.recorder
        self.policy = cfg.policy
        self.among = among(cfg.policy)  # its choice from candidates as bits
        self.aware = cfg.aware
        self.view = PartitionView(workers, num_resources=cfg.num_resources)
        self.reserved = cfg.reserved
        self.is_low = np.ones(n, dtype=bool)
        if cfg.reserved:
            self.is_low[n - cfg.reserved:] = False
        self.low_bits = sum(1 << i for i in range(n) if self.is_low[i])  # the low-priority workers, as bits
        self.worker_bits = self.view.worker_constraints  # each worker's constraint ids, as bits
        self.worker_cons = [tuple(dict.fromkeys(w.constraints)) for w in workers]
        self.cons_free = [0] * self.view.num_constraints  # idle workers providing each constraint id
        for local in range(n):
            if self.view.is_available(local):
                self._count(local, 1)
        self.unit_gate = True  # every task seen so far needs at least the unit demand
        self.fq = FairQueue(cfg.weight)
        self.accept = (self._match_high, self._match_low) if cfg.reserved else (self._match_any, self._match_any)
        self.choice = choice
        self.queued: dict[tuple, tuple] = {}  # (job, index) -> (Pending, class), in arrival order
        self.gained = 0  # the workers that gained free capacity since the last pass, as bits

    def __len__(self) -> int:
        """Tasks in the queues (a task dropped from ``queued`` stays there until its turn comes)."""
        return len(self.fq)

    def admit(self, demand) -> None:
        """A task of ``demand`` arrives: one needing less than a unit turns the unit gate off for good."""
        if demand[0] < 1:
            self.unit_gate = False

    def enqueue(self, task, cls: int) -> None:
        """Queue ``task`` in class ``cls`` (the caller knows it is neither queued nor running)."""
        self.queued[(task.job_id, task.index)] = (task, cls)
        self.fq.push(cls, task, (task.constraints if self.aware else (), task.demand))

    # ---- the view of the workers ------------------------------------------------------------
    def _count(self, local: int, delta: int) -> None:
        cons_free = self.cons_free
        for c in self.worker_cons[local]:
            cons_free[c] += delta

    def refresh(self, local: int, free: list) -> None:
        """Worker ``local`` has ``free`` (what the master believes it runs taken off its capacity)."""
        view = self.view
        change = view.update(local, free)
        if change is not None and view.grew:
            self.gained |= 1 << local
        if change:
            self._count(local, change)

    def release(self, local: int, demand) -> None:
        """A task of ``demand`` ended on worker ``local``."""
        view = self.view
        before = view.is_available(local)
        view.release(local, demand)
        self.gained |= 1 << local
        if not before and view.is_available(local):
            self._count(local, 1)

    def could_run(self, cls: int, constraints, demand, down) -> bool:
        """Some worker not in ``down`` could run a task of class ``cls``, ``constraints`` and ``demand`` once
        idle: a LOW task only a low-priority worker (Pigeon 2019, 2.2), a PigeonC task only a machine with
        its constraints, any task only one whose capacity covers its demand."""
        need = sum(1 << c for c in dict.fromkeys(constraints)) if self.aware else 0
        capacity, is_low, bits = self.view.capacity, self.is_low, self.worker_bits
        for local in range(len(bits)):
            if local in down or (cls != HIGH and not is_low[local]) or need & ~bits[local]:
                continue
            if all(int(c) >= d for c, d in zip(capacity[local], demand)):
                return True
        return False

    # ---- a dispatch pass --------------------------------------------------------------------
    def run(self, launch) -> None:
        """While some queued task fits an idle worker: take the one WFQ prefers, place it (the view, the
        run's counts and the event log say so), and hand it to ``launch(cls, task, local)``. Written out
        in one function: it runs once per task."""
        fq = self.fq
        accept = self.accept
        view = self.view
        queued = self.queued
        recorder = self.recorder
        h = self.h
        self._reopen()
        while len(fq):
            if self.unit_gate and view.free_count == 0:
                break
            for cls in fq.order():
                got = fq.take(cls, accept[cls])
                if got is not None:
                    task = got[0]
                    key = (task.job_id, task.index)
                    entry = queued.get(key)
                    if entry is not None and entry[0] is task:  # else dropped, placed, or queued anew since
                        del queued[key]                         # (a newer entry, later in the queue)
                        local = got[1]
                        # the task takes worker ``local``: the view, the run's counts and the event log say so
                        before = view.is_available(local)
                        view.allocate(local, task.demand)
                        if before and not view.is_available(local):
                            self._count(local, -1)
                        recorder.task_dispatched(task.job_id, task.index, task.since_us, h.now)
                        recorder.count(_COUNTER[cls])
                        if not self.aware and task.constraints:
                            need = sum(1 << c for c in task.constraints)
                            if need & ~self.worker_bits[local]:
                                recorder.count("constraint_violations")
                        if h.fabric.event_log is not None:
                            self._log_placed(cls, task, local)
                        launch(cls, task, local)
                    break
            else:
                break

    def _reopen(self) -> None:
        """Offer again the keys the last pass refused, except those no worker that gained since could
        serve (every key under a cost model: offers are charged)."""
        gained, self.gained = self.gained, 0
        if self.h.timed:
            self.fq.reopen()
        elif gained:
            having = self.view.having
            self.fq.reopen(lambda key: not having(key[0]) & gained)

    def _blocked(self, constraints) -> bool:
        cons_free = self.cons_free
        for c in constraints:
            if cons_free[c] <= 0:
                return True
        return False

    def _candidates(self, key) -> int:
        """The idle workers that fit ``key`` ((constraints, demand)), as bits of an int, every one of the
        group examined (a cost model's units); 0 when none does."""
        if self.unit_gate and self._blocked(key[0]):
            return 0
        cand = self.view.suitable_bits(key[0], key[1])
        self.h.charge("worker", self.view.n)
        return cand

    def _match_any(self, key):
        cand = self._candidates(key)
        return self.among(self.view, cand, self.choice, key[1]) if cand else None

    def _match_high(self, key):
        """A HIGH task: an idle low-priority worker if any, else an idle reserved one."""
        cand = self._candidates(key)
        if not cand:
            return None
        return self.among(self.view, cand & self.low_bits or cand, self.choice, key[1])

    def _match_low(self, key):
        """A LOW task: only an idle low-priority worker."""
        cand = self._candidates(key) & self.low_bits
        return self.among(self.view, cand, self.choice, key[1]) if cand else None

    def _log_placed(self, cls: int, task, local: int) -> None:
        """``task`` took worker ``local``: the event log says so."""
        fields = {"job": task.job_id, "task": task.index, "worker": self.member_names[local + 1]}
        emit(self.h, TASK_PLACED, queue="high" if cls == HIGH else "low", **fields)
        if self.reserved and not self.is_low[local]:
            emit(self.h, RESERVED_PLACED, **fields)
