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

Faults (see ``master`` for the masters' side):
- A batch is resent to the group's current master until a ``BatchAck``, after ``dist_retry_s`` and then
  doubling up to 32 times that: a job is never given up while its group may come back; results are acknowledged (``ResultAck``) to the worker that sent them.
- While the distributor waits for tasks of a group and has not heard from its master for a period, it
  pings it; a ping unanswered for a period makes it alert the second master and one worker of the
  group (``Suspect``; a different worker each round). The period doubles while nothing changes (at most
  ``QUIET_ROUNDS`` rounds), so a run with nothing left to do ends; while the master left the last ping
  unanswered, each ping of the submitter about a job still open here buys one more round (a new master
  whose claims were all lost is found), and a result restarts the watch.
- On a better ``Claim`` (a new master) it sends the new master every task of the group it still waits
  for (``Outstanding``, resent until acknowledged, doubling as batches are) and its unacknowledged
  batches. A job handed here again that waits on a group with no news for ``RECONCILE_ROUNDS`` pings
  sends its master the same list, again at each later round (the master queues what it neither holds
  nor knows finished); such a group's watch also restarts on a result or a ping of the submitter.
- The submitter is each job's owner of record (``submitter``): a distributor reports a job done or
  rejected with ``JobDone`` and answers the submitter's pings with the jobs it does not hold, which it
  is then handed again (``Resubmit``: a lost submission, or a distributor that crashed and forgot
  them). A handed-again job is split afresh; masters skip tasks they already queue or run and send
  their results to the new distributor too, so some tasks may run twice (counted), none is lost.
- A result for a job the distributor neither holds nor closed (it forgot the job in a crash) is kept,
  not acknowledged: when the job is handed again those tasks count as done and are not sent to a master,
  which may no longer know of them (``results_before_job``). The worker resends it until the job is
  here again, so a second crash before then loses nothing.
"""

from __future__ import annotations

from typing import Sequence

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit

from ..common.events import JOB_UNSCHEDULABLE
from ..common.front_end import JobFrontEnd
from ..common.protocol import TaskFinished
from ..common.submitter import JobDone, Pong
from .group import NO_KEY, claim_key
from .messages import BatchAck, Claim, DistTick, MasterPing, Outstanding, ResultAck, Suspect, TaskBatch

_CACHE_LIMIT = 4096
BACKOFF = 5  # a batch is resent after dist_retry_s, doubling per try up to 2**BACKOFF times it; never dropped
QUIET_ROUNDS = 10  # pings or alerts of a group without news before the distributor stops asking
RECONCILE_ROUNDS = 2  # pings without news before a job handed here again is reconciled with the master


class ConstraintSetCounts:
    """PigeonC's CS_i: per group, how many machines have each distinct (constraint set, capacity).

    ``weights`` counts a group's machines with a bit per machine: one mask per constraint (the machines
    that have it) and one per demand (those big enough), ANDed and counted, so a new constraint set costs
    a few big-integer operations per group rather than a pass over the group's distinct sets."""

    def __init__(self, groups: Sequence[Sequence]) -> None:
        self.tables: list[dict[tuple, int]] = []
        self._masks: list[dict[int, int]] = []  # per group: constraint id -> the machines that have it
        self._capacities: list[list[tuple]] = []  # per group: each machine's capacity, in order
        for workers in groups:
            table: dict[tuple, int] = {}
            masks: dict[int, int] = {}
            for i, w in enumerate(workers):
                cons = tuple(sorted(dict.fromkeys(w.constraints)))
                table[cons] = table.get(cons, 0) + 1
                for c in cons:
                    masks[c] = masks.get(c, 0) | (1 << i)
            self.tables.append(table)
            self._masks.append(masks)
            self._capacities.append([tuple(w.capacity) for w in workers])
        self._fits: dict[tuple, list[int]] = {}  # demand -> per group: the machines with room for it
        self._cache: dict[tuple, tuple[int, ...]] = {}

    def _fit(self, demand: tuple) -> list[int]:
        fits = self._fits.get(demand)
        if fits is None:
            fits = self._fits[demand] = [
                sum(1 << i for i, cap in enumerate(caps) if all(c >= d for c, d in zip(cap, demand)))
                for caps in self._capacities]
        return fits

    def weights(self, constraints: tuple, demand: tuple = (1,)) -> tuple[int, ...]:
        """count_i(C_T) for every group i: machines whose constraint set contains ``constraints``."""
        key = (constraints, demand)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = []
        for fit, masks in zip(self._fit(demand), self._masks):
            for c in constraints:
                fit &= masks.get(c, 0)
                if not fit:
                    break
            out.append(fit.bit_count())
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
    COST_ROLE = "distributor"  # a single server (fabric.service)
    """One of Ns distributors; ``counts`` (a ConstraintSetCounts) makes it PigeonC's, None Pigeon's.
    ``members[g]``: the actor names of group g (its master first), whom it alerts when g's master is
    silent; ``retry_us``: the batch retry and ping period."""

    def __init__(self, master_names: list[str], *, counts: ConstraintSetCounts | None, short_cutoff_us: int,
                 recorder, feasible, members: list | None = None, retry_us: int = 1_000_000, index: int = 0) -> None:
        super().__init__()
        self.master_names = master_names
        self.master_ids: list[int] = []  # the current master of each group (actor ids)
        self.members = members or [[name] for name in master_names]
        self.member_ids: list[list[int]] = []
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
        self.heard = [0] * n  # when each group's master last spoke to us
        self.pinged = [-1] * n  # when an unanswered ping went out (-1: none)
        self.rounds = [0] * n  # pings / alerts since the master last spoke
        self.waiting = [0] * n  # tasks sent to each group whose result has not come
        self.recover = [0] * n  # sends of an Outstanding list the group's master has not acknowledged (0: none due)
        self.recover_at = [0] * n  # when it was last sent
        self.split: dict[int, tuple] = {}  # open job -> (job, group of each task)
        self.unacked: dict[tuple, list] = {}  # (job, group) -> [batch, tries, sent at]
        self.armed = False
        self.source: dict[int, int] = {}  # open job -> who submitted it (its owner of record)
        self.closed: dict[int, int] = {}  # closed job -> when (a lost JobDone is reported again)
        self.early: dict[int, set] = {}  # job it does not hold -> indices of the results that came anyway
        self.handed_again: set = set()  # open jobs the submitter handed here again (another front end had them)
        self.index = index  # this distributor's number, as its Pong says

    def on_start(self) -> None:
        self.master_ids = [self.fabric.addr(name) for name in self.master_names]
        self.member_ids = [[self.fabric.addr(name) for name in group] for group in self.members]
        for g, master in enumerate(self.master_ids):
            members = self.member_ids[g]
            self.claims[g] = Claim(g, 0, 0, 0, master, members[1] if len(members) > 1 else -1)
            self.keys[g] = claim_key(self.claims[g])
        self.pick = self.rng.child("masters")

    def on_Job(self, job, src: int) -> None:
        if job.job_id in self.open_jobs or job.job_id in self.closed:  # a duplicated submission
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
            weights = self.counts.weights
            where = [self.pick.weighted_index(weights(c, job.demand)) for c in job.constraints]
        self.split[job.job_id] = (job, where)
        for index in range(job.num_tasks):  # the tasks pass through here: their wait and this handler's service
            self.recorder.task_handled(job.job_id, index, self.arrived, self.now)
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
        now = self.now
        for m, indices in enumerate(per_master):
            if indices:
                batch = TaskBatch(job.job_id, short, job.demand, tuple(indices),
                                  tuple(durations[i] for i in indices), tuple(constraints[i] for i in indices))
                self.send(self.master_ids[m], batch)
                self.unacked[(job.job_id, m)] = [batch, 1, now]
                self.waiting[m] += len(indices)
        self._arm()

    def on_Resubmit(self, msg, src: int) -> None:
        """A job the submitter hands again (this distributor forgot it, or another one went down)."""
        self.recorder.count("jobs_redistributed")
        self.on_Job(msg.job, src)
        if msg.job.job_id in self.open_jobs:
            self.handed_again.add(msg.job.job_id)

    def on_Ping(self, msg, src: int) -> None:
        """The submitter asks about the jobs it handed here: the closed ones are reported again, the
        ones this distributor does not hold are named (they will be handed again)."""
        unknown = []
        held = False
        for job_id in msg.jobs:
            if job_id in self.closed:
                self.send(src, JobDone(job_id, self.closed[job_id], ()))
            elif job_id not in self.open_jobs:
                unknown.append(job_id)
            else:
                held = True
        self.send(src, Pong(self.index, tuple(unknown)))
        if held:
            self._ask_quiet_groups()

    def _ask_quiet_groups(self) -> None:
        """A job here is still open and its owner asks after it: every group this distributor waits on
        whose master left its last ping unanswered, or that a job handed here again waits on, is watched
        again (one that stopped asking after QUIET_ROUNDS for one more round), so a master change it
        missed (every claim lost) is learnt and such a job is reconciled, at the pace of the submitter's
        pings. A master that answers while a long task runs is left alone (as in a run without faults)."""
        watch = False
        for g, waiting in enumerate(self.waiting):
            if waiting and (self.pinged[g] >= 0 or (self.handed_again and self._waits_on_handed_again(g))):
                self.rounds[g] = min(self.rounds[g], QUIET_ROUNDS - 1)
                watch = True
        if watch:
            self._arm()

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        src = self.source.pop(job_id, -1)
        if src < 0:
            super().close_job(job_id)
            return
        self.closed[job_id] = self.now
        self.handed_again.discard(job_id)
        self.send(src, JobDone(job_id, self.now, ()))

    def on_BatchAck(self, msg: BatchAck, src: int) -> None:
        g = msg.group
        if src == self.master_ids[g]:
            self._heard(g)
        if msg.job_id < 0:
            if msg.epoch == self.keys[g][0]:
                self.recover[g] = 0
        else:
            self.unacked.pop((msg.job_id, g), None)

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        entry = self.open_jobs.get(msg.job_id)
        if entry is None and msg.job_id not in self.closed:
            # a job this distributor forgot in a crash: the submitter hands it again, and the task is done.
            # Not acknowledged: the worker resends it until the job is here, so a second crash loses nothing
            early = self.early.setdefault(msg.job_id, set())
            if msg.index not in early:
                early.add(msg.index)
                self.recorder.count("results_before_job")
            return
        self.send(src, ResultAck(msg.job_id, msg.index))
        if entry is not None and not entry[1][msg.index]:
            g = self.split[msg.job_id][1][msg.index]
            self.waiting[g] -= 1
            self.rounds[g] = 0
            self.heard[g] = max(self.heard[g], self.now)
            if self.waiting[g] and (self.pinged[g] >= 0 or self.handed_again):
                self._arm()  # its master was silent, or faults moved jobs here: the watch starts again
        if self.task_done(msg.job_id, msg.index):
            job, where = self.split.pop(msg.job_id)
            for g in sorted(set(where)):
                self.unacked.pop((msg.job_id, g), None)

    # ---- masters changing ----------------------------------------------------------------
    def on_Claim(self, msg: Claim, src: int) -> None:
        g = msg.group
        key = claim_key(msg)
        if key > self.keys[g]:
            self.claims[g], self.keys[g] = msg, key
            self.master_ids[g] = msg.master
            self._heard(g)
            self.recover[g] = 0
            self._send_outstanding(g)
            now = self.now
            for (job_id, group), entry in sorted(self.unacked.items()):
                if group == g:
                    self.send(msg.master, entry[0])
                    entry[2] = now
            self._arm()
        elif key == self.keys[g]:
            if src == msg.master:
                self._heard(g)
                self.claims[g] = msg  # the second master may have changed
                if self.recover[g]:
                    self._send_outstanding(g)  # the new master asks again
        elif self.claims[g] is not None:
            self.send(src, self.claims[g])

    def on_MasterPing(self, msg: MasterPing, src: int) -> None:
        """A group member back from a restart asks who its master is."""
        if self.claims[msg.group] is not None:
            self.send(src, self.claims[msg.group])

    def _heard(self, g: int) -> None:
        self.heard[g] = self.now
        self.pinged[g] = -1

    def _send_outstanding(self, g: int) -> None:
        """Send group ``g``'s master the tasks this distributor still waits for there; resent (doubling, as
        batches are) until acknowledged, never given up while the group may come back."""
        self.recover[g] += 1
        self.recover_at[g] = self.now
        tasks = []
        for job_id, (job, where) in self.split.items():
            done = self.open_jobs[job_id][1]
            short = job.mean_task_us <= self.short_cutoff_us
            for index, m in enumerate(where):
                if m == g and not done[index]:
                    tasks.append((job_id, short, job.demand, index, job.durations_us[index], job.constraints[index]))
        self.send(self.master_ids[g], Outstanding(g, self.keys[g][0], tuple(tasks)))

    # ---- the retry timer -----------------------------------------------------------------
    def _arm(self) -> None:
        if not self.armed:
            self.armed = True
            self.set_timer(self.retry_us, DistTick())

    def on_DistTick(self, msg, src: int) -> None:
        """Resend what the masters have not acknowledged; ping silent masters, alert their groups."""
        self.armed = False
        now = self.now
        period = self.retry_us
        busy = False
        for key, entry in list(self.unacked.items()):
            batch, tries, sent = entry
            busy = True
            if now - sent < period << min(tries - 1, BACKOFF):
                continue
            self.send(self.master_ids[key[1]], batch)
            self.recorder.count("batches_retried")
            entry[1], entry[2] = tries + 1, now
            busy = True
        for g in range(len(self.master_ids)):
            if self.recover[g]:
                if now - self.recover_at[g] >= period << min(self.recover[g] - 1, BACKOFF):
                    self._send_outstanding(g)
                busy = True
            if not self.waiting[g] or self.rounds[g] >= QUIET_ROUNDS:
                continue
            busy = True
            if self.pinged[g] >= 0:
                if now - self.pinged[g] >= period:
                    self._alert(g)  # the ping went unanswered
                continue
            if now - self.heard[g] >= period << min(self.rounds[g], 5):
                self.rounds[g] += 1
                self.pinged[g] = self.heard[g] = now
                self.send(self.master_ids[g], MasterPing(g))
                if self.rounds[g] >= RECONCILE_ROUNDS and not self.recover[g] and self._waits_on_handed_again(g):
                    self._reconcile(g)
        if busy:
            self._arm()

    def _waits_on_handed_again(self, g: int) -> bool:
        """Whether a job handed here again still waits for a task of group ``g``."""
        for job_id in self.handed_again:
            entry = self.open_jobs.get(job_id)
            split = self.split.get(job_id)
            if entry is not None and split is not None and any(
                    m == g and not entry[1][i] for i, m in enumerate(split[1])):
                return True
        return False

    def _reconcile(self, g: int) -> None:
        """A job handed here again waits on group ``g`` with no news: send its master the tasks still
        awaited (``Outstanding``, resent until acknowledged). It queues those it neither holds nor knows
        finished and tells this distributor of those it holds: a task that ran for the job's earlier
        front end (its result went there, and the record that it moved was lost with a master) runs
        again rather than never being heard of. Repeated at each later ping round without news (a task
        still running at the first may end with its result sent elsewhere). Never in a run without
        faults: no job is handed again."""
        self.recorder.count("groups_reconciled")
        self.recover[g] = 0
        self._send_outstanding(g)

    def _alert(self, g: int) -> None:
        """Group g's master did not answer: ping it again, and alert its second master and one worker."""
        self.rounds[g] += 1
        self.pinged[g] = self.heard[g] = self.now
        self.send(self.master_ids[g], MasterPing(g))
        claim = self.claims[g]
        members = self.member_ids[g]
        if claim.second >= 0 and claim.second != self.master_ids[g]:
            self.send(claim.second, Suspect(g))
        if len(members) > 1:
            pick = members[1 + (self.rounds[g] - 1) % (len(members) - 1)]
            if pick not in (claim.second, self.master_ids[g]):
                self.send(pick, Suspect(g))
        self.recorder.count("masters_suspected")

    def statistics(self) -> DistributorStatistics:
        return DistributorStatistics(self.name, self.jobs, self.tasks, len(self.open_jobs), self.rejected)
