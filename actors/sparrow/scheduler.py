"""A Sparrow scheduler: probes d*F workers per job, binds tasks late, answers leftover requests with a cancel.

Choices where the Sparrow paper leaves room (or the issue fixes them):
- A job's tasks are split into probe groups, one per distinct (constraints, demand), in first-appearance
  order; a group of f tasks sends ceil(d * f) probes to workers drawn uniformly among those satisfying
  its constraints with capacity for its demand (per-task constraints, Sparrow 2013, 4.3). When fewer
  such workers exist than probes, every one of them gets floor or ceil of probes / workers (a random
  permutation repeated), so a group always has at least f probes and all its tasks get placed.
- A node's request for (job, group) gets the group's next unplaced task in index order; once the group
  is empty (or the job is done) it gets ``Cancel``. No proactive cancellation: every probe ends in one
  request and one answer. A task waiting in a node's queue is never probed for again: that is the
  paper's protocol, whose tail comes from those FIFO queues.
- A job with a task no machine can run is rejected at submission. The submitter is each job's owner
  of record (``actors.common.submitter``): the scheduler reports a job done (at the last task's
  ``TaskFinished``) or rejected with ``JobDone``, and the submitter records it, once.
- A task's scheduler queue time runs from the job's arrival here to the answer that binds it (from its
  return to the queue, for a task placed again).

Messages travel on connections (docs/connections.md), so a fault-free run sends exactly the paper's
messages and sets no timer. Recovery is in ``recovery.ProbeRecovery``: only a ``ConnectionBroken`` notice
for a node that held this job's probes or a bound task moves work (the node crashed, refused, or a cut
outlasted the connection timeout). For that the scheduler keeps, per open job, where its probes wait
(``probed``) and which task each node runs (``bound``), and per node the last request it sent (``seen``):
a node asks again only after a break, and gets the task still bound to that request, else a cancel, so
no held slot binds two tasks.
"""

from __future__ import annotations

import math
from array import array

import attrs
import numpy as np

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit

from ..common.front_end import ReportingFrontEnd
from ..common.probe_groups import probe_groups
from ..common.protocol import TaskFinished
from ..common.recovery import Recovering
from .events import LATE_BIND_CANCEL
from .messages import Assign, Cancel, GetTask, Probe
from .recovery import GROUP_SHIFT, ProbeRecovery

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
    __slots__ = ("job", "groups", "arrival_us", "group_of", "bound", "requeued", "probed")

    def __init__(self, job, groups, group_of, arrival_us):
        self.job = job
        self.groups = groups  # per probe group: its unbound task indices, the next last (``probe_groups``)
        self.group_of = group_of  # (constraints, demand) -> its probe group
        self.arrival_us = arrival_us
        self.bound: dict[int, tuple[int, int]] = {}  # task index -> (node, request): bound, no result yet
        self.requeued: dict[int, int] = {}  # task index -> when it went back to its queue (placed again)
        self.probed: dict[int, int] = {}  # group << GROUP_SHIFT | node -> its probes there not yet asked on


@attrs.frozen
class SparrowSchedulerStatistics:
    name: str
    open_jobs: int
    probes: int
    requests: int
    assigns: int
    cancels: int


class SparrowScheduler(Recovering, ReportingFrontEnd, Actor):
    COST_ROLE = "sparrow"  # a single server (fabric.service)
    """``node_names[p]`` names the node actor of the p-th worker of ``view`` (a PartitionView of every
    worker, used read-only to find the workers satisfying a task's constraints and demand)."""

    def __init__(self, node_names: list[str], view, *, probe_ratio: float, recorder, feasible, index: int = 0,
                 pools: dict | None = None) -> None:
        super().__init__()
        self.index = index  # this front end's number (the submitter's target index)
        self.node_names = node_names
        self.node_ids: list[int] = []  # the nodes' actor ids, resolved from their names at start
        self.view = view
        self.probe_ratio = probe_ratio
        self.recorder = recorder
        self.feasible = feasible
        self.jobs: dict[int, _OpenJob] = {}
        self.seen: dict[int, int] = {}  # node -> the last request it sent here (a lower one is asked again)
        self.pools: dict[tuple, object] = {} if pools is None else pools  # (the plug-in shares one: see ``_pool``)
        self.probes = self.requests = self.assigns = self.cancels = 0
        self.pick = None
        self.recovery = self.recover(ProbeRecovery(self))
        self.suspected = self.recovery.suspects.until  # nodes suspected down (empty: none, the fault-free case)

    def on_start(self) -> None:
        self.node_ids = [self.fabric.addr(name) for name in self.node_names]
        self.pick = self.rng.child("probes")

    def _pool(self, key: tuple):
        """The positions of the nodes a probe group of ``key`` (constraints, demand) may go to, kept as 4-byte
        ints (a list of Python ints took 36 bytes a node: 49 MB for the pools of 10 schedulers over 10,000
        nodes on YH1_sub's first 1,000 jobs). A pool follows from the cluster alone, never from what this scheduler
        learnt, so the plug-in gives every scheduler and incarnation one cache (and one read-only ``view``)."""
        pool = self.pools.get(key)
        if pool is None:
            if len(self.pools) >= _CACHE_LIMIT:
                self.pools.clear()
            pool = self.pools[key] = array("i", self.view.suitable(key[0], key[1]).astype(np.int32).tobytes())
        return pool

    def on_Job(self, job, src: int) -> None:
        if not self.take_job(job, src):
            return
        groups, group_of = probe_groups(job)
        state = self.jobs[job.job_id] = _OpenJob(job, groups, group_of, self.arrived)
        self.open_job(job.job_id, job.num_tasks)
        sent = 0
        for g, key in enumerate(group_of):
            sent += self.probe(state, g, key, len(groups[g]))
        self.recorder.count("probes", sent)
        if self.suspected:  # some nodes are suspected down: probes short of a node wait for one
            self.recovery.reprobe(state)

    def place_again(self, state: _OpenJob, g: int, key: tuple, tasks: int) -> int:
        """Recovery's way to probe again (``common.probe_recovery``)."""
        return self.probe(state, g, key, tasks)

    def probe(self, state: _OpenJob, g: int, key: tuple, tasks: int) -> int:
        """Send probes for ``tasks`` tasks of probe group ``g`` (``key``: its (constraints, demand)) to
        nodes of its pool (while some are suspected down, to the others); returns how many."""
        pool = self._pool(key)
        if self.suspected:
            pool = self.recovery.usable(pool)
            if not pool:
                return 0
        count = math.ceil(self.probe_ratio * tasks)
        job = state.job
        probe = Probe(job.job_id, g, job.demand)
        node_ids = self.node_ids
        probed = state.probed
        base = g << GROUP_SHIFT
        for p in probe_targets(len(pool), count, self.pick):
            node = node_ids[pool[p]]
            self.send(node, probe)
            k = base | node
            probed[k] = probed.get(k, 0) + 1
        self.probes += count
        return count

    def on_GetTask(self, msg: GetTask, src: int) -> None:
        self.requests += 1
        if self.suspected:
            self.recovery.heard(src)
        request = msg.request
        if request <= self.seen.get(src, -1):  # asked again after a break: the same answer again
            self._answer_again(msg, src)
            return
        self.seen[src] = request
        state = self.jobs.get(msg.job_id)
        if state is None:
            self._cancel(msg, src)
            return
        group = msg.group
        probed = state.probed
        k = group << GROUP_SHIFT | src
        left = probed.get(k)
        if left is not None:
            if left > 1:
                probed[k] = left - 1
            else:
                del probed[k]
        queue = state.groups[group]
        if not queue:
            self._cancel(msg, src)
            return
        index = queue.pop()
        job = state.job
        state.bound[index] = (src, request)
        self.recorder.task_dispatched(job.job_id, index, state.requeued.pop(index, state.arrival_us), self.now)
        self.assigns += 1
        self.send(src, Assign(job.job_id, group, index, job.durations_us[index], job.demand, request))

    def _answer_again(self, msg: GetTask, src: int) -> None:
        """A request asked again: the task it bound if that is still bound to it, else a cancel (it was
        cancelled, or its task went back to its queue when the connection broke)."""
        self.recorder.count("requests_repeated")
        state = self.jobs.get(msg.job_id)
        asked = (src, msg.request)
        index = next((i for i, b in state.bound.items() if b == asked), None) if state is not None else None
        if index is None:
            self._cancel(msg, src)
            return
        job = state.job
        self.send(src, Assign(job.job_id, msg.group, index, job.durations_us[index], job.demand, msg.request))

    def _cancel(self, msg: GetTask, src: int) -> None:
        self.cancels += 1
        self.recorder.count("cancels")
        if self.fabric.event_log is not None:
            emit(self, LATE_BIND_CANCEL, job=msg.job_id, group=msg.group, node=self.fabric.name_of(src))
        self.send(src, Cancel(msg.job_id, msg.group, msg.request))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        if self.suspected:
            self.recovery.heard(src)
        state = self.jobs.get(msg.job_id)
        if state is not None:
            index = msg.index
            binding = state.bound.pop(index, None)
            if binding is None and msg.job_id in self.open_jobs and not self.open_jobs[msg.job_id][1][index]:
                # placed again after a break, but the first execution's result came
                self.recovery.unqueue(state, index)
        self.task_done(msg.job_id, msg.index)

    def statistics(self) -> SparrowSchedulerStatistics:
        return SparrowSchedulerStatistics(self.name, len(self.jobs), self.probes, self.requests, self.assigns,
                                          self.cancels)
