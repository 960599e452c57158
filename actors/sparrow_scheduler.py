"""A Sparrow scheduler: probes d*F workers per job, binds tasks late, answers leftover requests with a cancel.

Choices where the Sparrow paper leaves room (or the issue fixes them):
- A job's tasks are split into probe groups, one per distinct (constraints, demand), in first-appearance
  order; a group of f tasks sends ceil(d * f) probes to workers drawn uniformly among those satisfying
  its constraints with capacity for its demand (per-task constraints, Sparrow 4.3). When fewer such
  workers exist than probes, every one of them gets floor or ceil of probes / workers (a random
  permutation repeated), so a group always has at least f probes and all its tasks get placed.
- A node's request for (job, group) gets the group's next unplaced task in index order; once the group
  is empty (or the job is done) it gets ``Cancel``. No proactive cancellation: every probe ends in one
  request and one answer.
- A job with a task no machine can run is rejected at submission; completion is recorded when the
  scheduler receives the last task's ``TaskFinished``.
- A task's scheduler queue time runs from the job's arrival here to the answer that binds it.
"""

from __future__ import annotations

import math
from collections import deque

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import LATE_BIND_CANCEL, emit

from .front_end import JobFrontEnd
from .protocol import TaskFinished
from .sparrow_messages import Assign, Cancel, GetTask, Probe

_CACHE_LIMIT = 4096


def probe_targets(pool_size: int, count: int, stream) -> list[int]:
    """``count`` positions in a pool of ``pool_size``: distinct when possible, else spread evenly."""
    if count <= pool_size:
        if count * 4 <= pool_size:  # sparse: rejection sampling, no O(pool) copy
            seen: dict[int, None] = {}
            out = []
            while len(out) < count:
                i = stream.randrange(pool_size)
                if i not in seen:
                    seen[i] = None
                    out.append(i)
            return out
        return stream.sample(range(pool_size), count)
    order = list(range(pool_size))
    stream.shuffle(order)
    return [order[i % pool_size] for i in range(count)]


class _OpenJob:
    __slots__ = ("job", "groups", "arrival_us")

    def __init__(self, job, groups, arrival_us):
        self.job = job
        self.groups = groups  # per probe group: deque of unplaced task indices
        self.arrival_us = arrival_us


@attrs.frozen
class SparrowSchedulerStatistics:
    name: str
    open_jobs: int
    probes: int
    requests: int
    assigns: int
    cancels: int


class SparrowScheduler(JobFrontEnd, Actor):
    """``node_names[p]`` names the node actor of the p-th worker of ``view`` (a PartitionView of every
    worker, used read-only to find the workers satisfying a task's constraints and demand)."""

    def __init__(self, node_names: list[str], view, *, probe_ratio: float, recorder, feasible) -> None:
        super().__init__()
        self.node_names = node_names
        self.node_ids: list[int] = []  # the nodes' actor ids, resolved from their names at start
        self.view = view
        self.probe_ratio = probe_ratio
        self.recorder = recorder
        self.feasible = feasible
        self.jobs: dict[int, _OpenJob] = {}
        self.pools: dict[tuple, object] = {}
        self.probes = self.requests = self.assigns = self.cancels = 0
        self.pick = None

    def on_start(self) -> None:
        self.node_ids = [self.fabric.addr(name) for name in self.node_names]
        self.pick = self.rng.child("probes")

    def _pool(self, key: tuple):
        pool = self.pools.get(key)
        if pool is None:
            if len(self.pools) >= _CACHE_LIMIT:
                self.pools.clear()
            pool = self.pools[key] = self.view.suitable(key[0], key[1]).tolist()
        return pool

    def on_Job(self, job, src: int) -> None:
        if not self.admit(job):
            return
        index_of: dict[tuple, int] = {}
        groups: list[deque] = []
        keys: list[tuple] = []
        for i, c in enumerate(job.constraints):
            key = (c, job.demand)
            g = index_of.get(key)
            if g is None:
                g = index_of[key] = len(groups)
                groups.append(deque())
                keys.append(key)
            groups[g].append(i)
        self.jobs[job.job_id] = _OpenJob(job, groups, self.now)
        self.open_job(job.job_id, job.num_tasks)
        node_ids = self.node_ids
        sent = 0
        for g, key in enumerate(keys):
            pool = self._pool(key)
            count = math.ceil(self.probe_ratio * len(groups[g]))
            probe = Probe(job.job_id, g, job.demand)
            for p in probe_targets(len(pool), count, self.pick):
                self.send(node_ids[pool[p]], probe)
            sent += count
        self.probes += sent
        self.recorder.count("probes", sent)

    def on_GetTask(self, msg: GetTask, src: int) -> None:
        self.requests += 1
        state = self.jobs.get(msg.job_id)
        queue = state.groups[msg.group] if state is not None else None
        if not queue:
            self.cancels += 1
            self.recorder.count("cancels")
            if self.fabric.event_log is not None:
                emit(self, LATE_BIND_CANCEL, job=msg.job_id, group=msg.group, node=self.fabric.name_of(src))
            self.send(src, Cancel(msg.job_id, msg.group))
            return
        index = queue.popleft()
        job = state.job
        self.recorder.task_dispatched(job.job_id, index, self.now - state.arrival_us)
        self.assigns += 1
        self.send(src, Assign(job.job_id, msg.group, index, job.durations_us[index], job.demand))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        if self.task_done(msg.job_id, msg.index):
            del self.jobs[msg.job_id]

    def statistics(self) -> SparrowSchedulerStatistics:
        return SparrowSchedulerStatistics(self.name, len(self.jobs), self.probes, self.requests, self.assigns,
                                          self.cancels)
