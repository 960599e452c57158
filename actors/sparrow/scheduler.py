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
- A job with a task no machine can run is rejected at submission. The submitter is each job's owner
  of record (``actors.submitter``): the scheduler reports a job done (at the last task's
  ``TaskFinished``) or rejected with ``JobDone``, and the submitter records it, once.
- A task's scheduler queue time runs from the job's arrival here to the answer that binds it (from its
  return to the queue, for a task placed again).

Recovery (a fault-free run pays one acknowledgement per task and a few timer events per scheduler):
- Every request gets an answer, and a repeated request (the node asked again: an answer was lost, or the
  request was duplicated) gets the same answer, so no held slot ever binds two tasks.
- A job whose tasks are not all bound ``probe_timeout`` after its last probes gets new probes for its
  unbound tasks (``probes_resent``; the period doubles per round, up to 16 times): a lost probe or
  request, or a node that failed or restarted with the job's probes queued.
- A bound task's result is due by its duration plus ``result_grace``; then the scheduler asks the node
  (``TaskQuery``). Running: wait for its end; still asking (the ``Assign`` was lost): it is sent again; a
  result: it is resent; nothing known (a restarted node, a lost ``Assign`` given up on), a ``Reject``, or
  no answer to three queries a grace apart (a dead or cut-off node): the task goes back to its group's queue and gets new probes (``tasks_relaunched``). A result is
  acknowledged every time it arrives; the front end counts each task once.
- Scheduler crash: a restarted scheduler knows no job. The submitter pings every front end holding its
  open jobs each ``resubmit_s`` and hands a job again (``Resubmit``) to the one that does not know it, or
  to another scheduler when one misses three pings; the scheduler then runs the whole job again (tasks
  that ran before the crash run twice: counted in ``duplicate_executions``; a task's first result
  counts). A job arriving again while open is ignored; one closed here is answered with its ``JobDone``
  again (a lost ``JobDone`` is repaired the same way, by the ping).
"""

from __future__ import annotations

import math
from collections import deque

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit

from ..common.deadlines import Deadlines
from ..common.events import JOB_UNSCHEDULABLE, RELAUNCH
from ..common.front_end import JobFrontEnd
from ..common.protocol import TaskFinished
from ..common.submitter import JobDone, Ping, Pong, Resubmit
from .events import LATE_BIND_CANCEL
from .messages import TICK, Assign, Cancel, GetTask, Probe, Reject, ResultAck, TaskQuery, TaskStatus

_CACHE_LIMIT = 4096
PROBE, RESULT = 0, 1  # the kinds of a scheduler's timeouts: (PROBE, job, due) and (RESULT, job, index, node, request)
MAX_BACKOFF = 4  # probe rounds double their period up to 2**4 times
QUERIES = 3  # unanswered queries about an overdue result before its task is placed again


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
    __slots__ = ("job", "groups", "arrival_us", "group_of", "bound", "answers", "requeued", "probe_due", "rounds")

    def __init__(self, job, groups, group_of, arrival_us):
        self.job = job
        self.groups = groups  # per probe group: deque of unbound task indices
        self.group_of = group_of  # (constraints, demand) -> its probe group
        self.arrival_us = arrival_us
        self.bound: dict[int, list] = {}  # task index -> [node, request, unanswered queries]: bound, no result yet
        self.answers: dict[tuple[int, int], int] = {}  # (node, request) -> the task it bound, -1: cancel
        self.requeued: dict[int, int] = {}  # task index -> when it went back to its queue (placed again)
        self.probe_due = -1  # when the pending probe timeout is due (-1: none)
        self.rounds = 0  # probe timeouts that sent probes


@attrs.frozen
class SparrowSchedulerStatistics:
    name: str
    open_jobs: int
    probes: int
    requests: int
    assigns: int
    cancels: int


class SparrowScheduler(JobFrontEnd, Actor):
    COST_ROLE = "sparrow"  # a single server (fabric.service)
    """``node_names[p]`` names the node actor of the p-th worker of ``view`` (a PartitionView of every
    worker, used read-only to find the workers satisfying a task's constraints and demand)."""

    def __init__(self, node_names: list[str], view, *, probe_ratio: float, recorder, feasible, index: int = 0,
                 probe_timeout_us: int = 10_000_000, result_grace_us: int = 1_000_000) -> None:
        super().__init__()
        self.index = index  # this front end's number (the submitter's target index)
        self.node_names = node_names
        self.node_ids: list[int] = []  # the nodes' actor ids, resolved from their names at start
        self.view = view
        self.probe_ratio = probe_ratio
        self.recorder = recorder
        self.feasible = feasible
        self.probe_timeout_us = probe_timeout_us
        self.result_grace_us = result_grace_us
        self.jobs: dict[int, _OpenJob] = {}
        self.source: dict[int, int] = {}  # open job -> who submitted it (told when it is done)
        self.closed: dict[int, JobDone] = {}  # jobs this incarnation closed or rejected: the report sent
        self.pools: dict[tuple, object] = {}
        self.probes = self.requests = self.assigns = self.cancels = 0
        self.pick = None
        self.deadlines = Deadlines(self, max(1, min(probe_timeout_us, result_grace_us) // 4), TICK)

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
        if job.job_id in self.jobs:  # a duplicated submission
            self.recorder.count("repeated_jobs")
            return
        done = self.closed.get(job.job_id)
        if done is not None:  # closed here already: its owner did not hear it
            self.recorder.count("repeated_jobs")
            self.send(src, done)
            return
        bad = self.infeasible(job)
        if bad:
            if self.fabric.event_log is not None:
                emit(self, JOB_UNSCHEDULABLE, job=job.job_id, tasks=bad)
            done = self.closed[job.job_id] = JobDone(job.job_id, self.now, bad)
            self.send(src, done)
            return
        self.source[job.job_id] = src
        group_of: dict[tuple, int] = {}
        groups: list[deque] = []
        for i, c in enumerate(job.constraints):
            key = (c, job.demand)
            g = group_of.get(key)
            if g is None:
                g = group_of[key] = len(groups)
                groups.append(deque())
            groups[g].append(i)
        state = self.jobs[job.job_id] = _OpenJob(job, groups, group_of, self.arrived)
        self.open_job(job.job_id, job.num_tasks)
        sent = 0
        for g, key in enumerate(group_of):
            sent += self._probe(job, g, key, len(groups[g]))
        self.probes += sent
        self.recorder.count("probes", sent)
        self._arm_probes(state)

    def _probe(self, job, g: int, key: tuple, tasks: int) -> int:
        """Send probes for ``tasks`` tasks of probe group ``g`` (``key``: its (constraints, demand));
        returns how many."""
        pool = self._pool(key)
        count = math.ceil(self.probe_ratio * tasks)
        probe = Probe(job.job_id, g, job.demand)
        node_ids = self.node_ids
        for p in probe_targets(len(pool), count, self.pick):
            self.send(node_ids[pool[p]], probe)
        return count

    def _arm_probes(self, state: _OpenJob) -> None:
        due = self.now + (self.probe_timeout_us << min(state.rounds, MAX_BACKOFF))
        state.probe_due = due
        self.deadlines.add(due, (PROBE, state.job.job_id, due))

    def on_GetTask(self, msg: GetTask, src: int) -> None:
        self.requests += 1
        state = self.jobs.get(msg.job_id)
        if state is None:
            self._cancel(msg, src)
            return
        asked = (src, msg.request)
        index = state.answers.get(asked)
        if index is not None:  # asked again: the same answer again
            self.recorder.count("requests_repeated")
            if index < 0:
                self._cancel(msg, src)
            else:
                self._assign(state, index, src, msg.request)
            return
        queue = state.groups[msg.group]
        if not queue:
            state.answers[asked] = -1
            self._cancel(msg, src)
            return
        index = queue.popleft()
        job = state.job
        state.answers[asked] = index
        state.bound[index] = [src, msg.request, 0]
        self.recorder.task_dispatched(job.job_id, index, state.requeued.pop(index, state.arrival_us), self.now)
        self.assigns += 1
        self._assign(state, index, src, msg.request)
        self.deadlines.add(self.now + job.durations_us[index] + self.result_grace_us,
                           (RESULT, job.job_id, index, src, msg.request))

    def _assign(self, state: _OpenJob, index: int, node: int, request: int) -> None:
        job = state.job
        group = state.group_of[(job.constraints[index], job.demand)]
        self.send(node, Assign(job.job_id, group, index, job.durations_us[index], job.demand, request))

    def _cancel(self, msg: GetTask, src: int) -> None:
        self.cancels += 1
        self.recorder.count("cancels")
        if self.fabric.event_log is not None:
            emit(self, LATE_BIND_CANCEL, job=msg.job_id, group=msg.group, node=self.fabric.name_of(src))
        self.send(src, Cancel(msg.job_id, msg.group, msg.request))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        self.send(src, ResultAck(msg.job_id, msg.index))
        state = self.jobs.get(msg.job_id)
        if state is not None:
            index = msg.index
            binding = state.bound.pop(index, None)
            if binding is not None:
                state.answers[(binding[0], binding[1])] = -1
            elif msg.job_id in self.open_jobs and not self.open_jobs[msg.job_id][1][index]:
                # unbound (placed again, or a resubmitted job), but an earlier execution's result came
                state.requeued.pop(index, None)
                job = state.job
                queue = state.groups[state.group_of[(job.constraints[index], job.demand)]]
                if index in queue:
                    queue.remove(index)
        self.task_done(msg.job_id, msg.index)

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        del self.jobs[job_id]
        done = self.closed[job_id] = JobDone(job_id, self.now, ())
        self.send(self.source.pop(job_id), done)

    def on_Resubmit(self, msg: Resubmit, src: int) -> None:
        """A job handed again (this scheduler restarted and forgot it, or another one stopped answering)."""
        self.on_Job(msg.job, src)

    def on_Ping(self, msg: Ping, src: int) -> None:
        """The submitter asks about the jobs it handed here: report those closed again, name the unknown."""
        unknown = []
        for job_id in msg.jobs:
            if job_id in self.jobs:
                continue
            done = self.closed.get(job_id)
            if done is None:
                unknown.append(job_id)
            else:
                self.send(src, done)
        self.send(src, Pong(self.index, tuple(unknown)))

    # ---- timeouts and what nodes say about overdue results ---------------------------------------------
    def on_Tick(self, msg, src: int) -> None:
        for key in self.deadlines.due():
            state = self.jobs.get(key[1])
            if state is None:
                continue
            if key[0] == PROBE:
                if key[2] == state.probe_due:
                    self._probe_due(state)
            else:
                self._result_due(state, key)

    def _probe_due(self, state: _OpenJob) -> None:
        """The job's probe timeout: new probes for the tasks still unbound (none: the timeout ends)."""
        job = state.job
        sent = 0
        for key, g in state.group_of.items():
            if state.groups[g]:
                sent += self._probe(job, g, key, len(state.groups[g]))
        if not sent:
            state.probe_due = -1
            return
        self.probes += sent
        self.recorder.count("probes_resent", sent)
        state.rounds += 1
        self._arm_probes(state)

    def _result_due(self, state: _OpenJob, key: tuple) -> None:
        _, job_id, index, node, request = key
        binding = state.bound.get(index)
        if binding is None or binding[0] != node or binding[1] != request:
            return  # done, or bound again since
        if binding[2] == QUERIES:  # asked, no answer: the node is dead or cut off
            self._relaunch(state, index, "no answer")
            return
        binding[2] += 1
        self.recorder.count("results_queried")
        self.send(node, TaskQuery(job_id, index, request))
        self.deadlines.add(self.now + self.result_grace_us, key)

    def on_TaskStatus(self, msg: TaskStatus, src: int) -> None:
        state = self.jobs.get(msg.job_id)
        binding = state.bound.get(msg.index) if state is not None else None
        if binding is None or binding[0] != src or binding[1] != msg.request:
            return
        if msg.ends_us < 0 and not msg.pending:
            self._relaunch(state, msg.index, "unknown to its node")
            return
        binding[2] = 0
        ends = msg.ends_us
        if msg.pending:  # the node still asks: the Assign was lost
            self.recorder.count("answers_resent")
            self._assign(state, msg.index, src, msg.request)
            ends = self.now + state.job.durations_us[msg.index]
        self.deadlines.add(max(ends, self.now) + self.result_grace_us,
                           (RESULT, msg.job_id, msg.index, src, msg.request))

    def on_Reject(self, msg: Reject, src: int) -> None:
        state = self.jobs.get(msg.job_id)
        binding = state.bound.get(msg.index) if state is not None else None
        if binding is not None and binding[0] == src and binding[1] == msg.request:
            self._relaunch(state, msg.index, "refused")

    def _relaunch(self, state: _OpenJob, index: int, why: str) -> None:
        """Task ``index`` was bound to a node that lost it (or may have): back to its queue, new probes."""
        node, request, _ = state.bound.pop(index)
        state.answers[(node, request)] = -1
        job = state.job
        key = (job.constraints[index], job.demand)
        g = state.group_of[key]
        state.groups[g].append(index)
        state.requeued[index] = self.arrived
        self.recorder.count("tasks_relaunched")
        if self.fabric.event_log is not None:
            emit(self, RELAUNCH, job=job.job_id, task=index, node=self.fabric.name_of(node), why=why)
        sent = self._probe(job, g, key, 1)
        self.probes += sent
        self.recorder.count("probes_resent", sent)
        if state.probe_due < 0:
            self._arm_probes(state)

    def statistics(self) -> SparrowSchedulerStatistics:
        return SparrowSchedulerStatistics(self.name, len(self.jobs), self.probes, self.requests, self.assigns,
                                          self.cancels)
