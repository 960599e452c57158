"""Pigeon's Distributor: hands each job's tasks to the masters and records the job's completion.

Choices where the papers are silent:
- Pigeon (2019, 2.2): with S = floor(F / Ng) and r = F mod Ng, task i < S * Ng goes to master i // S
  (contiguous blocks in master order, as in the 4-worker example of section 4, where job A's first three
  tasks go to group one); the r remaining tasks go one each, in task order, to r distinct masters drawn
  uniformly from the distributor's stream.
- Pigeon is constraint-oblivious as published: the split ignores task constraints (and so do its masters).
- PigeonC (2023, 4.2): every task draws its own master with weight sum(count(X) for X in CS_i if
  X contains C_T); the counts only include machines whose capacity covers the task's demand (in the
  project's clusters every machine's does). A task without constraints weighs groups by their size.
- Both reject, at submission, a job with a task no machine can run (the same jobs every scheduler rejects).
- One ``TaskBatch`` per master per job, sent in master order; the job completes when the distributor has
  received the ``TaskFinished`` result of its last task.
"""

from __future__ import annotations

from typing import Sequence

import attrs

from fedemu.fabric.actor import Actor

from .front_end import JobFrontEnd
from .pigeon_messages import TaskBatch
from .protocol import TaskFinished

_CACHE_LIMIT = 4096


def _bits(constraints) -> int:
    mask = 0
    for c in constraints:
        mask |= 1 << c
    return mask


class ConstraintSetCounts:
    """PigeonC's CS_i: per group, how many machines have each distinct (constraint set, capacity)."""

    def __init__(self, groups: Sequence[Sequence]) -> None:
        self._sets: list[list[tuple[int, tuple, int]]] = []
        self.tables: list[dict[tuple, int]] = []
        for workers in groups:
            counts: dict[tuple, int] = {}
            for w in workers:
                key = (tuple(sorted(dict.fromkeys(w.constraints))), tuple(w.capacity))
                counts[key] = counts.get(key, 0) + 1
            self._sets.append([(_bits(cons), cap, n) for (cons, cap), n in counts.items()])
            table: dict[tuple, int] = {}
            for (cons, _), n in counts.items():
                table[cons] = table.get(cons, 0) + n
            self.tables.append(table)
        self._cache: dict[tuple, tuple[int, ...]] = {}

    def weights(self, constraints: tuple, demand: tuple = (1,)) -> tuple[int, ...]:
        """count_i(C_T) for every group i: machines whose constraint set contains ``constraints``."""
        key = (constraints, demand)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        need = _bits(constraints)
        out = []
        for sets in self._sets:
            total = 0
            for mask, cap, n in sets:
                if mask & need == need and all(c >= d for c, d in zip(cap, demand)):
                    total += n
            out.append(total)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = hit = tuple(out)
        return hit


def split_evenly(num_tasks: int, num_masters: int, stream) -> list[int]:
    """Pigeon's split: the master index of every task (S to each, the remainder to distinct random ones)."""
    per, rest = divmod(num_tasks, num_masters)
    out = [i // per for i in range(per * num_masters)] if per else []
    if rest:
        out.extend(stream.sample(range(num_masters), rest))
    return out


@attrs.frozen
class DistributorStatistics:
    name: str
    jobs: int
    tasks: int
    open_jobs: int
    rejected: int


class Distributor(JobFrontEnd, Actor):
    """One of Ns distributors; ``counts`` (a ConstraintSetCounts) makes it PigeonC's, None Pigeon's."""

    def __init__(self, master_names: list[str], *, counts: ConstraintSetCounts | None, short_cutoff_us: int,
                 recorder, feasible) -> None:
        super().__init__()
        self.master_names = master_names
        self.master_ids: list[int] = []  # the masters' actor ids, resolved from their names at start
        self.counts = counts
        self.short_cutoff_us = short_cutoff_us
        self.recorder = recorder
        self.feasible = feasible
        self.jobs = self.tasks = self.rejected = 0
        self.pick = None

    def on_start(self) -> None:
        self.master_ids = [self.fabric.addr(name) for name in self.master_names]
        self.pick = self.rng.child("masters")

    def on_Job(self, job, src: int) -> None:
        self.jobs += 1
        if not self.admit(job):
            self.rejected += 1
            return
        self.open_job(job.job_id, job.num_tasks)
        self.tasks += job.num_tasks
        n = len(self.master_ids)
        if self.counts is None:
            where = split_evenly(job.num_tasks, n, self.pick)
        else:
            weights = self.counts.weights
            where = [self.pick.weighted_index(weights(c, job.demand)) for c in job.constraints]
        per_master: list[list[int]] = [[] for _ in range(n)]
        for index, m in enumerate(where):
            per_master[m].append(index)
        short = job.mean_task_us <= self.short_cutoff_us
        durations, constraints = job.durations_us, job.constraints
        for m, indices in enumerate(per_master):
            if indices:
                self.send(self.master_ids[m], TaskBatch(job.job_id, short, job.demand, tuple(indices),
                                                        tuple(durations[i] for i in indices),
                                                        tuple(constraints[i] for i in indices)))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        self.task_done(msg.job_id, msg.index)

    def statistics(self) -> DistributorStatistics:
        return DistributorStatistics(self.name, self.jobs, self.tasks, len(self.open_jobs), self.rejected)
