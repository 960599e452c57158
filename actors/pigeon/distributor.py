"""Pigeon's Distributor: hands each job's tasks to the masters and records the job's completion.

Choices where the papers are silent:
- Pigeon (2019, 2.2): with S = floor(F / Ng) and r = F mod Ng, task i < S * Ng goes to master i // S
  (contiguous blocks in master order, as in the 4-worker example of section 4, where job A's first three
  tasks go to group one); the r remaining tasks go one each, in task order, to r distinct masters drawn
  uniformly from the distributor's stream.
- Pigeon is constraint-oblivious as published: the split ignores task constraints (and so do its masters).
- PigeonC (2023, 4.2): every task draws its own master with weight sum(count(X) for X in CS_i if
  X contains C_T) (``constraint_sets``); the counts only include machines whose capacity covers the
  task's demand (in the project's clusters every machine's does). A task without constraints weighs groups
  by their size.
- Both reject, at submission, a job with a task no machine can run (the same jobs every scheduler rejects).
- One ``TaskBatch`` per master per job, sent in master order; the job completes when the distributor has
  received the ``TaskFinished`` result of its last task.

Faults (our protocol; the papers are silent): the distributor's recovery is ``group_watch.GroupWatch``, a
component (what a broken connection may have lost, and the watch on a group whose master it suspects).
- The submitter is each job's owner of record (``submitter``): a distributor reports a job done or
  rejected with ``JobDone``; a job it is handed again (``Resubmit``: it crashed and forgot it, or another
  front end did) is split afresh; masters skip tasks they already queue or run and send their results
  to the new distributor too, so some tasks may run twice (counted), none is lost.
- A result for a job the distributor neither holds nor closed (it forgot the job in a crash) is kept:
  when the job is handed again those tasks count as done and are not sent to a master, which may no
  longer know of them (``results_before_job``).
"""

from __future__ import annotations

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit

from ..common.components import routed
from ..common.events import JOB_UNSCHEDULABLE
from ..common.front_end import JobFrontEnd
from ..common.protocol import TaskFinished
from ..common.submitter import JobDone, Pong
from .constraint_sets import ConstraintSetCounts
from .group import NO_KEY, claim_key
from .group_watch import GroupWatch
from .messages import Claim, TaskBatch


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
    COST_ROLE = "distributor"  # a single server (fabric.service)
    """One of Ns distributors; ``counts`` (a ConstraintSetCounts) makes it PigeonC's, None Pigeon's.
    ``members[g]``: the actor names of group g (its master first), whom it alerts when g's master's
    connection breaks; ``retry_us``: the first wait before it alerts a suspected group again."""

    CORE = frozenset({  # what its recovery may use (tests/test_role_shape.py)
        "group_of", "waiting", "master_ids", "member_ids", "claims", "keys", "split", "open_jobs", "short_cutoff_us",
        "counts", "recorder", "retry_us"})

    def __init__(self, master_names: list[str], *, counts: ConstraintSetCounts | None, short_cutoff_us: int,
                 recorder, feasible, members: list | None = None, retry_us: int = 1_000_000, index: int = 0) -> None:
        super().__init__()
        self.master_names = master_names
        self.master_ids: list[int] = []  # the current master of each group (actor ids)
        self.members = members or [[name] for name in master_names]
        self.member_ids: list[list[int]] = []
        self.group_of: dict[int, int] = {}  # member actor id -> its group
        self.counts = counts
        self.short_cutoff_us = short_cutoff_us
        self.recorder = recorder
        self.feasible = feasible
        self.retry_us = retry_us
        self.jobs = self.tasks = self.rejected = 0
        self.pick = None
        n = len(master_names)
        self.claims: list = [None] * n  # the best Claim heard per group
        self.keys = [NO_KEY] * n
        self.waiting = [0] * n  # tasks sent to each group whose result has not come
        self.split: dict[int, tuple] = {}  # open job -> (job, group of each task)
        self.recovery = GroupWatch(self, n)
        self.source: dict[int, int] = {}  # open job -> who submitted it (its owner of record)
        self.closed: dict[int, int] = {}  # closed job -> when (a lost JobDone is reported again)
        self.early: dict[int, set] = {}  # job it does not hold -> indices of the results that came anyway
        self.index = index  # this distributor's number, as its Pong says

    def on_start(self) -> None:
        self.master_ids = [self.fabric.addr(name) for name in self.master_names]
        self.member_ids = [[self.fabric.addr(name) for name in group] for group in self.members]
        for g, members in enumerate(self.member_ids):
            for member in members:
                self.group_of[member] = g
            self.claims[g] = Claim(g, 0, 0, 0, self.master_ids[g], members[1] if len(members) > 1 else -1)
            self.keys[g] = claim_key(self.claims[g])
        self.pick = self.rng.child("masters")

    def on_Job(self, job, src: int) -> None:
        if job.job_id in self.open_jobs or job.job_id in self.closed:  # handed here again after all
            self.recorder.count("duplicate_jobs_ignored")
            if job.job_id in self.closed and src >= 0:
                self.send(src, JobDone(job.job_id, self.closed[job.job_id], ()))
            return
        self.jobs += 1
        bad = self.infeasible(job)
        if bad:
            self.rejected += 1
            if src < 0:  # no owner of record (a test driving the distributor alone)
                self.admit(job)
                return
            if self.fabric.event_log is not None:
                emit(self, JOB_UNSCHEDULABLE, job=job.job_id, tasks=bad)
            self.send(src, JobDone(job.job_id, self.now, bad))
            return
        self.source[job.job_id] = src
        self.open_job(job.job_id, job.num_tasks)
        self.tasks += job.num_tasks
        n = len(self.master_ids)
        if self.counts is None:
            where = split_evenly(job.num_tasks, n, self.pick)
        else:
            pick, table, demand = self.pick.pick, self.counts.table, job.demand
            where = [pick(table(c, demand)) for c in job.constraints]
        self.split[job.job_id] = (job, where)
        # the tasks pass through here: their wait and this handler's service
        self.recorder.tasks_handled(job.job_id, job.num_tasks, self.arrived, self.now)
        done = self.early.pop(job.job_id, ())
        for index in sorted(done):  # finished before this distributor held the job (it forgot it in a crash)
            if self.task_done(job.job_id, index):
                self.split.pop(job.job_id)
                return
        per_master: list[list[int]] = [[] for _ in range(n)]
        for index, m in enumerate(where):
            if index not in done:
                per_master[m].append(index)
        short = job.mean_task_us <= self.short_cutoff_us
        durations, constraints = job.durations_us, job.constraints
        for m, indices in enumerate(per_master):
            if indices:
                batch = TaskBatch(job.job_id, short, job.demand, tuple(indices),
                                  tuple(durations[i] for i in indices), tuple(constraints[i] for i in indices))
                self.send(self.master_ids[m], batch)
                self.waiting[m] += len(indices)

    def on_Resubmit(self, msg, src: int) -> None:
        """A job the submitter hands again (this distributor forgot it, or another one went down)."""
        self.recorder.count("jobs_redistributed")
        self.on_Job(msg.job, src)

    def on_Ping(self, msg, src: int) -> None:
        """The submitter asks about the jobs it handed here: the closed ones are reported again, the
        ones this distributor does not hold are named (they will be handed again)."""
        unknown = []
        for job_id in msg.jobs:
            if job_id in self.closed:
                self.send(src, JobDone(job_id, self.closed[job_id], ()))
            elif job_id not in self.open_jobs:
                unknown.append(job_id)
        self.send(src, Pong(self.index, tuple(unknown)))

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        src = self.source.pop(job_id, -1)
        if src < 0:
            super().close_job(job_id)
            return
        self.closed[job_id] = self.now
        self.send(src, JobDone(job_id, self.now, ()))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        entry = self.open_jobs.get(msg.job_id)
        if entry is None:
            if msg.job_id not in self.closed:
                # a job this distributor forgot in a crash: the submitter hands it again, and the task is done
                early = self.early.setdefault(msg.job_id, set())
                if msg.index not in early:
                    early.add(msg.index)
                    self.recorder.count("results_before_job")
                    return
            self.recorder.count("repeated_completions")
            return
        if not entry[1][msg.index]:
            self.waiting[self.split[msg.job_id][1][msg.index]] -= 1
            if entry[0] > 1:  # not the job's last task: ``task_done``'s count, written out (it runs per task)
                entry[1][msg.index] = 1
                entry[0] -= 1
                return
        if self.task_done(msg.job_id, msg.index):
            self.split.pop(msg.job_id)

    # ---- recovery (``group_watch``) ----------------------------------------------------------
    on_ConnectionBroken = routed("recovery", "on_broken")
    on_Claim = routed("recovery", "on_claim")
    on_MasterPing = routed("recovery", "on_master_ping")
    on_DistWatch = routed("recovery", "on_watch", timer=True)
    on_Returned = routed("recovery", "on_returned")

    def statistics(self) -> DistributorStatistics:
        return DistributorStatistics(self.name, self.jobs, self.tasks, len(self.open_jobs), self.rejected)
