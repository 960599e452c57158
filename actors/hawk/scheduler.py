"""A Hawk distributed scheduler: batch probing with late binding for short jobs (Hawk 2015, 3.2).

The rules are the Eagle authors' simulator's (epfl-labos/eagle ``simulation/eagle_simulation.py``, the code
the Pigeon paper ran), where the papers leave room:
- A job is long when its mean task time is above ``short_cutoff_s`` (the run's cutoff, shared with the
  submitter, which hands long jobs to the long-job scheduler); its estimated task time is that mean.
- A job's tasks are split into probe groups, one per distinct (constraints, demand). A group of f tasks sends
  max(ceil(d * f), ``min_probes``) reservations to nodes drawn uniformly, with replacement, among the nodes
  satisfying its constraints (short jobs: every node, the reserved partition included).
- A node's request for (job, group) gets the group's next unbound task in index order, else ``Cancel``.
- A long job handed to this scheduler (only while the long-job scheduler is down) gets one reservation per task,
  on nodes of the general partition drawn the same way (the simulator's mode without a centralized scheduler,
  but without spare probes: each one ends in a task, so the long-job scheduler's view, which hears of their
  ends, drains once it is back).
- Jobs are reported to their owner of record, the submitter (``JobDone``), as Sparrow's are.

Per open job the scheduler counts its reservations waiting per (group, node they were sent to) and which task
each node runs (``bound``); per node the last request it sent (``seen``). When a group's last task is bound its
waiting reservations no longer count (they will get cancels): a task placed again after a break is placed
afresh. Recovery is ``recovery.PlacementRecovery``, from notices only.
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit

from ..common.front_end import ReportingFrontEnd
from ..common.probe_groups import probe_groups
from ..common.protocol import TaskFinished
from ..common.recovery import Recovering
from .events import HAWK_CANCEL
from .messages import Assign, Cancel, GetTask, Lost, Probe
from .recovery import GROUP_SHIFT, PlacementRecovery

_CACHE_LIMIT = 4096


def uncount(state, group: int, node: int, count: int = 1) -> None:
    """``count`` reservations of ``group`` counted at ``node`` no longer wait there (never below none)."""
    probed, k = state.probed, group << GROUP_SHIFT | node
    left = probed.get(k, 0) - count
    if left > 0:
        probed[k] = left
    else:
        probed.pop(k, None)


class OpenJob:
    __slots__ = ("job", "groups", "arrival_us", "group_of", "bound", "requeued", "probed", "long", "estimate_us")

    def __init__(self, job, groups, group_of, arrival_us, long, estimate_us):
        self.job = job
        self.groups = groups  # per probe group: its unbound task indices, the next last (``probe_groups``)
        self.group_of = group_of  # (constraints, demand) -> its probe group
        self.arrival_us = arrival_us
        self.bound: dict[int, tuple[int, int]] = {}  # task index -> (node, request): bound, no result yet
        self.requeued: dict[int, int] = {}  # task index -> when it went back to its queue (placed again)
        self.probed: dict[int, int] = {}  # group << GROUP_SHIFT | node -> its reservations there not yet asked on
        self.long = long
        self.estimate_us = estimate_us

    def unbound(self) -> int:
        return sum(len(q) for q in self.groups)


@attrs.frozen
class HawkSchedulerStatistics:
    name: str
    open_jobs: int
    probes: int
    requests: int
    assigns: int
    cancels: int


class HawkScheduler(Recovering, ReportingFrontEnd, Actor):
    COST_ROLE = "hawk"  # a single server (fabric.service)
    """``node_names[p]`` names the node of the p-th worker of ``view`` (a PartitionView of every worker, read
    only); the first ``reserved`` positions are the reserved (short-only) partition."""

    def __init__(self, node_names: list[str], view, *, reserved: int, probe_ratio: float, min_probes: int,
                 cutoff_us: int, recorder, feasible, index: int = 0, pools: dict | None = None) -> None:
        super().__init__()
        self.index = index  # this front end's number (the submitter's target index)
        self.node_names = node_names
        self.node_ids: list[int] = []  # the nodes' actor ids, resolved from their names at start
        self.view = view
        self.reserved = reserved
        self.probe_ratio = probe_ratio
        self.min_probes = min_probes
        self.cutoff_us = cutoff_us
        self.recorder = recorder
        self.feasible = feasible
        self.jobs: dict[int, OpenJob] = {}
        self.seen: dict[int, int] = {}  # node -> the last request it sent here (a lower one is asked again)
        self.pools: dict[tuple, list] = {} if pools is None else pools  # (the plug-in shares one: see ``pool``)
        self.probes = self.requests = self.assigns = self.cancels = 0
        self.pick = None
        self.recovery = self.recover(PlacementRecovery(self))
        self.suspected = self.recovery.suspects.until  # nodes suspected down (empty: none, the fault-free case)

    def on_start(self) -> None:
        self.node_ids = [self.fabric.addr(name) for name in self.node_names]
        self.pick = self.rng.child("probes")

    def pool(self, key: tuple, long: bool) -> list:
        """The positions a group of ``key`` (constraints, demand) may go to: every suitable worker for a short
        job; for a long one the suitable workers of the general partition (all suitable ones if it has none). A
        pool follows from the cluster alone (the plug-in shares one cache among the schedulers and their
        incarnations); callers never change it."""
        pool = self.pools.get((key, long))
        if pool is None:
            if len(self.pools) >= _CACHE_LIMIT:
                self.pools.clear()
            pool = self.view.suitable(key[0], key[1]).tolist()
            if long:
                general = [p for p in pool if p >= self.reserved]
                pool = general or pool
            self.pools[(key, long)] = pool
        return pool

    def on_Job(self, job, src: int) -> None:
        if not self.take_job(job, src):
            return
        groups, group_of = probe_groups(job)
        mean = job.mean_task_us
        state = self.jobs[job.job_id] = OpenJob(job, groups, group_of, self.arrived, mean > self.cutoff_us,
                                                max(1, round(mean)))
        self.open_job(job.job_id, job.num_tasks)
        if state.long:
            self.recorder.count("long_jobs")
        for g, key in enumerate(group_of):
            self.place_group(state, g, key, len(groups[g]))
        if self.suspected:  # some nodes are suspected down: a group short of a node waits for one
            self.recovery.reprobe(state)

    def place_group(self, state: OpenJob, g: int, key: tuple, tasks: int) -> int:
        """Send reservations for ``tasks`` tasks of probe group ``g`` (``key``: its (constraints, demand)); returns
        how many (0: no usable node now)."""
        pool = self.pool(key, state.long)
        if self.suspected:
            pool = self.recovery.usable(pool)
            if not pool:
                return 0
        count = tasks if state.long else max(math.ceil(self.probe_ratio * tasks), self.min_probes)
        randrange, n = self.pick.randrange, len(pool)
        return self.send_probes(state, g, key, [pool[randrange(n)] for _ in range(count)])

    uncount = staticmethod(uncount)

    def place_again(self, state: OpenJob, g: int, key: tuple, tasks: int) -> int:
        """Recovery's way to place again (``common.probe_recovery``)."""
        return self.place_group(state, g, key, tasks)

    def send_probes(self, state: OpenJob, g: int, key: tuple, positions: list[int]) -> int:
        """One reservation of group ``g`` (``key``) to the node at each of ``positions``; returns how many."""
        probe = self.probe_message(state, g, key)
        node_ids, probed, base = self.node_ids, state.probed, g << GROUP_SHIFT
        for p in positions:
            node = node_ids[p]
            self.send(node, probe)
            k = base | node
            probed[k] = probed.get(k, 0) + 1
        self.probes += len(positions)
        self.recorder.count("probes", len(positions))
        return len(positions)

    def probe_message(self, state: OpenJob, g: int, key: tuple):
        """The reservation group ``g`` (``key``: its (constraints, demand)) sends."""
        job = state.job
        return Probe(job.job_id, g, job.demand, key[0], state.estimate_us, state.long)

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
        self.consumed(state, msg, src)
        queue = state.groups[group]
        if not queue:
            self._cancel(msg, src)
            return
        index = queue.pop()
        job = state.job
        state.bound[index] = (src, request)
        if not queue:
            self.group_placed(state, group, src)
        self.recorder.task_dispatched(job.job_id, index, state.requeued.pop(index, state.arrival_us), self.now)
        self.assigns += 1
        self.bound_task(state, index, src)
        self.send(src, self.assign_message(state, msg, index))

    def group_placed(self, state: OpenJob, group: int, node: int) -> None:
        """Every task of ``group`` is bound (the last to ``node``): its reservations still out will get cancels,
        and no longer count."""
        for k in [k for k in state.probed if k >> GROUP_SHIFT == group]:
            del state.probed[k]

    def consumed(self, state: OpenJob, msg: GetTask, src: int) -> None:
        """The reservation behind ``msg`` is used up (counted at ``msg.origin``, where it was sent)."""
        uncount(state, msg.group, msg.origin)

    def bound_task(self, state: OpenJob, index: int, node: int) -> None:
        """Hook: task ``index`` of ``state`` is bound to ``node`` now."""

    def assign_message(self, state: OpenJob, msg: GetTask, index: int):
        job = state.job
        return Assign(job.job_id, msg.group, index, job.durations_us[index], job.demand, msg.request)

    def _answer_again(self, msg: GetTask, src: int) -> None:
        """A request asked again: the task it bound if that is still bound to it, else a cancel."""
        self.recorder.count("requests_repeated")
        state = self.jobs.get(msg.job_id)
        asked = (src, msg.request)
        index = next((i for i, b in state.bound.items() if b == asked), None) if state is not None else None
        if index is None:
            self._cancel(msg, src)
            return
        self.send(src, self.assign_message(state, msg, index))

    def _cancel(self, msg: GetTask, src: int) -> None:
        self.cancels += 1
        self.recorder.count("cancels")
        if self.fabric.event_log is not None:
            emit(self, HAWK_CANCEL, job=msg.job_id, group=msg.group, node=self.fabric.name_of(src))
        self.cancelled(msg, src)
        self.send(src, Cancel(msg.job_id, msg.group, msg.request))

    def cancelled(self, msg: GetTask, src: int) -> None:
        """Hook: ``src``'s request ``msg`` gets a cancel."""

    def on_Lost(self, msg: Lost, src: int) -> None:
        state = self.jobs.get(msg.job_id)
        if state is not None:
            self.recovery.lost(state, msg.group, msg.origin, msg.count)

    def node_lost(self, node: int) -> None:
        """Hook: a break with ``node``: what it held may be lost."""

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

    def statistics(self) -> HawkSchedulerStatistics:
        return HawkSchedulerStatistics(self.name, len(self.jobs), self.probes, self.requests, self.assigns,
                                       self.cancels)
