"""A Pigeon / PigeonC master: one group's two WFQ queues and dispatch, and the group's failover protocol.

Tasks of short jobs are HIGH, of long jobs LOW (``policies.fair_queue``, weight W). Pigeon (2019, 2.2)
reserves the last ``reserved`` workers of the group for HIGH tasks; a HIGH task takes an idle
low-priority worker first, else an idle reserved one; a LOW task only an idle low-priority worker.
PigeonC (2023, 4.2) has no reserved workers and matches constraints with the same bit-vector
PartitionView and worker-choice policy as Megha.

Choices where the papers are silent (dispatch):
- The two idle lists are the view's availability bit vector split by the reserved mask; the worker-choice
  policy (random / min-constraints) picks the member of a list.
- Arrivals and idle notices both run one dispatch pass: while some queued task fits an idle worker,
  serve the class WFQ prefers, else the other. After a pass no queued task fits any idle worker.
- PigeonC serves the oldest task of a class that fits some idle worker; Pigeon is FIFO per class.
- Pigeon ignores constraints, as published; a task placed on a machine lacking one of its constraints
  is counted as ``constraint_violations``.

Failover (Pigeon 2019, "Master Failure Recovery"; our protocol where the paper gives only the idea):
- The master role is an object (``MasterCore``) any group member can hold: ``master-<g>`` holds it
  first; the second master is a WORKER of the group, as the paper suggests, so that any worker can
  also declare itself master when both are lost (one code path for both). ``GroupMember`` is the
  membership protocol every member runs: which ``Claim`` it believes, syncs, suspicion, elections.
- The master sends its task state to the second master every ``master_sync_s`` while the group has
  work (less often while nothing changes), as deltas on a full state (``sync``); each ``Sync``
  says when the next is due. Ticks for overdue tasks in between send nothing. When a due sync has not
  come half of ``master_timeout_s`` later, the second master pings the master (one lost sync is no
  failure), and takes over (a failover, with the synced state) if it has not answered by the other half.
- A distributor whose master stops answering (``Suspect``) alerts the second master and one worker; a
  member pings the master, and if it does not answer within ``master_timeout_s`` the second master
  takes over, or else, after alerting the second master and waiting as long again, the member declares
  itself master (an election). Concurrent declarations are ordered by (epoch, earliest declaration
  time, lowest rank); every member and distributor keeps the best ``Claim`` it has seen, so exactly
  one wins and the others step down when they hear it.
- A new master rebuilds from the members themselves: every worker's ``Status`` (what it runs) and
  every distributor's ``Outstanding`` tasks for the group, plus the synced queue for a distributor
  that does not answer. A worker that answers nothing is down until it does.
- Worker failures: a restarted worker says ``Hello`` (the master requeues what it ran); a silent one is
  found when one of its tasks is overdue (the master knows durations) and it does not answer a
  ``Probe``; a gap in a worker's numbered notices (a lost one) is also probed. No per-worker heartbeat.
- A worker refuses a launch that does not fit what it really runs (``Refused``), so a master whose
  view went stale can never over-commit it.
"""

from __future__ import annotations

from heapq import heappop, heappush

import attrs
import numpy as np

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import FAILOVER, RELAUNCH, RESERVED_PLACED, TASK_PLACED, emit
from fedemu.policies.fair_queue import HIGH, LOW, FairQueue
from fedemu.policies.partition_view import PartitionView

from ..common.front_end import Pending
from ..common.protocol import TaskFinished
from .messages import (RESULT_KEEP_US, BatchAck, Claim, Hello, Launch, MasterTick, MasterPing, Probe,
                              RecoverTimer, Suspect, SuspectTimer, Sync, SyncReset, Watchdog, told_incarnation)
from .sync import SyncedState, SyncSender

_COUNTER = ("wfq_high", "wfq_low")
NO_KEY = (-1, 0, 0)
QUIET_MAX = 8  # syncs while nothing changes (their period doubles each time) before the master stops ticking
RECOVER_ROUNDS = 3  # claims sent to a member that does not answer before a new master gives up on it
TICK_LIMIT = 200  # ticks without a launch or a task end before a master stops ticking
DOWN_PROBES = 8  # probes of a down worker, one per tick; then, while tasks wait, one per backoff period


def claim_key(c: Claim) -> tuple:
    """The order of claims: a later epoch, then the earliest declaration, then the lowest rank."""
    return (c.epoch, -c.declared_us, -c.rank)


@attrs.define(eq=False)
class GroupConfig:
    """What every member of one group is built from (the same object for all of them)."""

    group: int
    workers: tuple  # WorkerSpecs, in rank order 1..n
    member_names: list  # rank 0: master-<g>, then the workers' actor names
    dist_names: list
    policy: object
    weight: object
    reserved: int
    aware: bool
    num_resources: int
    recorder: object
    sync_us: int
    timeout_us: int
    ids: tuple | None = None  # (member ids, distributor ids), resolved once for the whole group

    def addresses(self, fabric) -> tuple:
        """(member ids, distributor ids) in ``fabric``: every member of a large group would otherwise
        resolve all its names itself (a million lookups per 1,000-member group, and a list each)."""
        if self.ids is None:
            self.ids = (tuple(map(fabric.addr, self.member_names)), tuple(map(fabric.addr, self.dist_names)))
        return self.ids


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


class MasterCore:
    """The master role of one epoch: queues, the view of the group's workers, launches, recovery."""

    def __init__(self, host, epoch: int) -> None:
        cfg = host.cfg
        workers = cfg.workers
        n = len(workers)
        self.h = host
        self.cfg = cfg
        self.epoch = epoch
        self.declared_us = host.claim.declared_us  # the claim this role was declared with
        self.recorder = cfg.recorder
        self.policy = cfg.policy
        self.aware = cfg.aware
        self.view = PartitionView(workers, num_resources=cfg.num_resources)
        self.reserved = cfg.reserved
        self.is_low = np.ones(n, dtype=bool)
        if cfg.reserved:
            self.is_low[n - cfg.reserved:] = False
        self.worker_bits = [sum(1 << c for c in dict.fromkeys(w.constraints)) for w in workers]
        self.worker_cons = [tuple(dict.fromkeys(w.constraints)) for w in workers]
        self.cons_free = [0] * self.view.num_constraints  # idle workers providing each constraint id
        for local in range(n):
            if self.view.is_available(local):
                self._count(local, 1)
        self.unit_gate = True  # every task seen so far needs at least the unit demand
        self.fq = FairQueue(cfg.weight)
        self.accept = (self._match_high, self._match_low) if cfg.reserved else (self._match_any, self._match_any)
        self.choice = host.rng.child("choice")
        self.worker_ids = host.member_ids[1:]
        self.local_of = {a: i for i, a in enumerate(self.worker_ids)}
        self.queued: dict[tuple, tuple] = {}  # (job, index) -> (Pending, class), in arrival order
        self.running: list[dict] = [{} for _ in range(n)]  # per worker: (job, index) -> (Pending, cls, epoch, seq)
        self.where: dict[tuple, int] = {}  # (job, index) -> the worker running it
        self.heard = [0] * n  # the latest ``told`` applied per worker
        self.seq = [0] * n  # launches sent to each worker in this epoch
        self.mark = [(-1, 0)] * n  # the latest launch each worker should have received
        self.down: dict[int, int] = {}  # worker -> probes sent since it went down
        self.probed: dict[int, int] = {}  # worker -> when the pending probe was sent
        self.probed_at: dict[int, int] = {}  # worker -> when the last probe was sent
        self.deadlines: list = []  # heap of (overdue at, worker, job, index)
        self.finished: set = set()  # tasks workers reported done (result unacknowledged) during recovery
        self.seeded: set = set()  # queued tasks taken from the second master's sync (during a recovery)
        self.results: list[dict] = [{} for _ in range(n)]  # per worker: its finished tasks not yet acknowledged
        self.moved: dict = {}  # running task -> the distributor its job moved to (its result goes there too)
        self.orphans: dict[tuple, list] = {}  # results the master resends: [task, tries, sent, first send]
        self.tick_armed = False
        self.tick_at = -1  # when the live tick is due: a timer for another time was superseded
        self.active = False
        self.quiet = 0
        self.sync_at = -1  # when the next sync to the second master is due (-1: none promised)
        self.idle_ticks = 0  # ticks since the last launch or task end
        self.recovering = None
        self.sync = SyncSender()  # what changed since the last sync to the second master

    # ---- the group's work ------------------------------------------------------------
    def batch(self, msg, src: int) -> None:
        """A distributor's tasks (or a retry of them: tasks already queued or running are skipped)."""
        cls = HIGH if msg.short else LOW
        push = self.fq.push
        now = self.h.arrived  # the tasks wait from the batch's arrival (in the mailbox while the master is busy)
        demand = msg.demand
        aware = self.aware
        queued, where = self.queued, self.where
        changed = self.sync.queued
        if demand[0] < 1:
            self.unit_gate = False
        job_id = msg.job_id
        for index, duration, constraints in zip(msg.indices, msg.durations, msg.constraints):
            key = (job_id, index)
            if key in queued or key in where:
                self._repoint(key, src)
                continue
            task = Pending(job_id, index, duration, constraints, demand, now, src)
            queued[key] = (task, cls)
            changed[key] = None
            push(cls, task, (constraints if aware else (), demand))
        self.h.send(src, BatchAck(job_id, self.cfg.group, self.epoch))
        self.activity()
        self._dispatch()

    def _repoint(self, key, src: int) -> None:
        """A task already held is sent again by another distributor (the job was handed to it again):
        its result goes there; a running one's result is resent there by the master."""
        entry = self.queued.get(key)
        if entry is None:
            local = self.where[key]
            entry = self.running[local][key]
            if entry[0].distributor != src:  # (also a task an earlier master placed: its worker tells
                self.moved[key] = src         # a distributor this master does not know)
            self.sync.running[(local, *key)] = None
        else:
            self.sync.queued[key] = None
        entry[0].distributor = src

    def _requeue(self, task, cls: int) -> None:
        key = (task.job_id, task.index)
        if cls < 0 or key in self.queued or key in self.where:
            return
        self.queued[key] = (task, cls)
        self.sync.queued[key] = None
        self.fq.push(cls, task, (task.constraints if self.aware else (), task.demand))

    def _drop_running(self, local: int, key, relaunch: bool) -> None:
        """The task no longer holds worker ``local``: release it, and queue it again if it was lost."""
        task, cls, _, _ = self.running[local].pop(key)
        self.sync.running[(local, *key)] = None
        if self.where.get(key) == local:
            del self.where[key]
        if relaunch and cls >= 0:  # cls -1: a task an earlier master placed, which we cannot relaunch
            self.moved.pop(key, None)  # its new launch names the distributor it moved to
            self.recorder.count("tasks_relaunched")
            if self.h.fabric.event_log is not None:
                emit(self.h, RELAUNCH, job=key[0], task=key[1], worker=self.cfg.member_names[local + 1])
            self._requeue(task, cls)

    def _refresh(self, local: int) -> None:
        """The view of worker ``local``: its capacity less what the master believes it runs (none if down)."""
        free = [int(c) for c in self.view.capacity[local]]
        if local in self.down:
            free = [0] * len(free)
        else:
            for entry in self.running[local].values():
                for r, d in enumerate(entry[0].demand):
                    free[r] -= d
        change = self.view.update(local, [max(0, f) for f in free])
        if change:
            self._count(local, change)

    def idle(self, local: int, msg) -> None:
        """A worker's idle notice: the task ended; a gap in its numbering means one went missing."""
        heard = self.heard[local]
        if msg.told <= heard:
            return
        self._newer_incarnation(local, msg.told)
        self.heard[local] = msg.told
        key = (msg.job_id, msg.index)
        unacked = msg.unacked
        results = self.results[local]
        if len(results):
            self.results[local] = results = {k: t for k, t in results.items() if k in unacked}
        entry = self.running[local].get(key)
        if entry is not None:
            if key in unacked:
                results[key] = entry[0]
            self._tell_moved(key, entry[0])
            self._drop_running(local, key, relaunch=False)
            self.idle_ticks = 0
            view = self.view
            before = view.is_available(local)
            view.release(local, msg.demand)
            if not before and view.is_available(local):
                self._count(local, 1)
        if msg.told > heard + 1 or local in self.down:
            self.probe(local)
        self.activity()
        self._dispatch()

    def status(self, local: int, msg, refused=None) -> None:
        """A worker's whole state (or a refusal carrying it): believe it, keep launches still in flight,
        requeue what the worker lost, and never count on capacity it does not have."""
        if msg.told <= self.heard[local]:
            return
        self._newer_incarnation(local, msg.told)
        self.heard[local] = msg.told
        self.probed.pop(local, None)
        self.down.pop(local, None)
        running = self.running[local]
        reported = {(j, i): d for j, i, d in msg.running}
        done = set(msg.unacked)
        if self.recovering is not None:
            self.finished |= done
        if self.results[local]:
            self.results[local] = {k: t for k, t in self.results[local].items() if k in done}
        last = tuple(msg.last)
        seen = max(last[1] if last[0] == self.epoch else 0, getattr(msg, "answers", 0))
        in_flight = False
        for key, (task, cls, epoch, seq) in list(running.items()):
            if key in reported:
                continue
            if epoch == self.epoch and seq > seen:
                in_flight = True  # launched after what the worker has seen: still on its way
                heappush(self.deadlines, (self.h.now + self.cfg.timeout_us, local, key[0], key[1]))
                continue
            if key == refused:
                self._drop_running(local, key, relaunch=False)
                self._requeue(task, cls)
                continue
            if key in done:
                self._tell_moved(key, task)
            self._drop_running(local, key, relaunch=key not in done)
        for key, demand in reported.items():
            if key not in running:  # placed by an earlier master: it holds the worker all the same
                other = self.where.get(key)
                if other is not None and other != local:  # it runs there too (relaunched when this
                    # worker was thought to have lost it): that copy holds its worker until its idle
                    # notice, and is not relaunched if lost
                    task, _, epoch, seq = self.running[other][key]
                    self.running[other][key] = (task, -1, epoch, seq)
                    self.sync.running[(other, *key)] = None
                entry = self.queued.pop(key, None)
                self.sync.queued[key] = None
                if entry is None:  # known only by its demand: it cannot be relaunched if lost
                    entry = (Pending(key[0], key[1], 0, (), tuple(demand), self.h.now, -1), -1)
                running[key] = (entry[0], entry[1], -1, 0)
                self.sync.running[(local, *key)] = None
                self.where[key] = local
                self._expect_end(local, key, entry[0].duration_us)
        if not in_flight:
            self.mark[local] = last
        self._known(local)

    def _known(self, local: int) -> None:
        """Worker ``local``'s state is known again: recount it, let a recovery finish, dispatch."""
        self._refresh(local)
        if self.recovering is not None:
            self.recovering["workers"].discard(local)
            self._maybe_recovered()
        self.activity()
        self._dispatch()

    def _orphan(self, local: int) -> None:
        """Worker ``local`` died: resend the results it had not seen acknowledged, on its behalf."""
        results = self.results[local]
        self.results[local] = {}
        for key, task in results.items():
            if task.distributor >= 0 and key not in self.orphans:
                self.orphans[key] = [task, 0, 0, -1]
        self._resend_orphans()

    def _tell_moved(self, key, task: Pending) -> None:
        """Task ``key`` ended (an idle notice, or a status naming it done): if its job moved to another
        distributor while it ran, the worker told the old one, so the master tells the new one."""
        dist = self.moved.pop(key, None)
        if dist is not None:
            self.orphans.setdefault(key, [Pending(key[0], key[1], task.duration_us, task.constraints, task.demand,
                                                  task.since_us, dist), 0, 0, -1])
            self._resend_orphans()

    def _resend_orphans(self) -> None:
        now = self.h.now
        for key, entry in list(self.orphans.items()):
            task, tries, sent, first = entry
            if tries and now - sent < self.cfg.timeout_us:
                continue
            if tries >= RECOVER_ROUNDS * 4 and now - first >= RESULT_KEEP_US:
                del self.orphans[key]
                self.recorder.count("results_abandoned")
                continue
            self.h.send(task.distributor, TaskFinished(task.job_id, task.index, task.demand, self.cfg.group))
            self.recorder.count("results_resent_by_master")
            entry[1], entry[2] = tries + 1, now
            if first < 0:
                entry[3] = now
        if self.orphans:
            self.activity()

    def _newer_incarnation(self, local: int, told: int) -> None:
        """A state message from a worker incarnation whose ``Hello`` this master did not hear (lost, or
        still on its way): the results the old one had not seen acknowledged are resent on its behalf;
        the gap in ``told`` then asks for its status, which requeues what it lost."""
        if told_incarnation(told) > told_incarnation(self.heard[local]):
            self._orphan(local)

    def hello(self, local: int, told: int) -> None:
        """Worker ``local`` restarted with nothing: what its earlier incarnation ran is lost. Launches this
        master sent after the restart may have reached the new incarnation, so it asks for the worker's
        status, which says which tasks to relaunch (until then the worker counts as busy with them). A
        ``Hello`` no newer than what this master heard from the worker is a duplicate, or comes after the
        new incarnation's news."""
        if told <= self.heard[local]:
            return
        self._orphan(local)
        self.heard[local] = told
        self.mark[local] = (-1, 0)
        self.probed.pop(local, None)
        self.down.pop(local, None)
        if self.running[local]:
            self.probe(local)
        self._known(local)

    def probe(self, local: int) -> None:
        """Ask worker ``local`` for its Status (once at a time)."""
        if local in self.probed:
            return
        self.probed[local] = self.probed_at[local] = self.h.now
        self._send_local(local, Probe(self.epoch, self.seq[local]))

    def _send_local(self, local: int, msg) -> None:
        self.h.send(self.worker_ids[local], msg)

    def mark_down(self, local: int) -> None:
        """Worker ``local`` answers nothing: its tasks are lost and it gets none until it speaks again."""
        self.down[local] = self.down.get(local, 0)
        self._orphan(local)
        for key in sorted(self.running[local]):
            self._drop_running(local, key, relaunch=True)
        self._refresh(local)
        if self.worker_ids[local] == self.h.claim.second:
            self.h.new_second()

    def outstanding(self, msg, src: int) -> None:
        """A distributor's tasks for the group that are not done: queue those nobody holds."""
        self.h.send(src, BatchAck(-1, self.cfg.group, self.epoch))
        rec = self.recovering
        if rec is not None:
            if src in rec["dists"]:
                rec["dists"].discard(src)
                rec["outstanding"][src] = {(t[0], t[3]) for t in msg.tasks}
        for job_id, short, demand, index, duration, constraints in msg.tasks:
            key = (job_id, index)
            if key in self.finished:
                continue
            if demand[0] < 1:
                self.unit_gate = False
            task, cls = Pending(job_id, index, duration, constraints, demand, self.h.now, src), HIGH if short else LOW
            local = self.where.get(key)
            if local is not None:  # a worker holds it: if a status named it (known by its demand only),
                # the distributor's record makes it one the master can relaunch should the worker lose it
                held, held_cls, epoch, seq = self.running[local][key]
                if held_cls < 0:
                    self.running[local][key] = (task, cls, epoch, seq)
                    self.sync.running[(local, *key)] = None
                    if held.distributor != src:  # its worker tells whoever an earlier master named
                        self.moved[key] = src
                    continue
            if key in self.queued or local is not None:
                self._repoint(key, src)  # its result goes to this distributor, which holds the job now
                continue
            self._requeue(task, cls)
        if rec is not None:
            self._maybe_recovered()
        self.activity()
        self._dispatch()

    # ---- recovery (a new master) -----------------------------------------------------
    def seed(self, snapshot) -> None:
        """Start from the second master's synced state (the workers' statuses correct it)."""
        for job_id, index, duration, constraints, demand, since, dist, cls in snapshot.queued_entries():
            if demand[0] < 1:
                self.unit_gate = False
            self._requeue(Pending(job_id, index, duration, constraints, demand, since, dist), cls)
            self.seeded.add((job_id, index))
        for rank, job_id, index, duration, constraints, demand, dist, cls in snapshot.running_entries():
            key = (job_id, index)
            if key in self.where or key in self.queued:
                continue
            local = rank - 1
            self.running[local][key] = (Pending(job_id, index, duration, constraints, demand, 0, dist), cls, -1, 0)
            self.where[key] = local
            self._expect_end(local, key, duration)
            self._refresh(local)

    def _expect_end(self, local: int, key, duration_us: int) -> None:
        """A task runs on ``local`` that this master did not launch (synced, or named by a status): probe
        the worker if it still runs it a whole duration and a timeout from now, as for its own launches,
        so that a lost idle notice (the worker's last) is found."""
        heappush(self.deadlines, (self.h.now + duration_us + self.cfg.timeout_us, local, key[0], key[1]))

    def recover(self, since_us: int, kind: str) -> None:
        """Ask every other member and every distributor (the claim was just sent); dispatch waits."""
        others = {local for local, a in enumerate(self.worker_ids) if a != self.h.id}
        self.recovering = {"since": since_us, "kind": kind, "workers": others, "dists": set(self.h.dist_ids),
                           "outstanding": {}}
        self.h.set_timer(self.cfg.timeout_us, RecoverTimer(self.epoch, 0))

    def recover_timer(self, round_: int) -> None:
        rec = self.recovering
        if rec is None:
            return
        if round_ + 1 < RECOVER_ROUNDS:
            claim = self.h.claim
            for local in sorted(rec["workers"]):
                self._send_local(local, claim)
            for dst in sorted(rec["dists"]):
                self.h.send(dst, claim)
            self.h.set_timer(self.cfg.timeout_us, RecoverTimer(self.epoch, round_ + 1))
            return
        self._finish_recovery()

    def _maybe_recovered(self) -> None:
        rec = self.recovering
        if rec is not None and not rec["workers"] and not rec["dists"]:
            self._finish_recovery()

    def _finish_recovery(self) -> None:
        rec = self.recovering
        self.recovering = None
        for local in sorted(rec["workers"]):  # nobody answered for it
            self.mark_down(local)
        known = rec["outstanding"]
        for key, (task, _) in list(self.queued.items()):  # synced tasks whose distributor says they are done
            if key in self.seeded and task.distributor in known and key not in known[task.distributor]:
                del self.queued[key]
                self.sync.queued[key] = None
        self.seeded.clear()  # (a batch that came after the distributor's list is not among them)
        self.finished.clear()
        self.recorder.recovered(self.h.now - rec["since"])
        self.activity()
        self._dispatch()

    # ---- the master's own timer ---------------------------------------------------------
    def activity(self) -> None:
        """Something changed: keep syncing at the base period."""
        self.active = True
        if not self.tick_armed:
            self.quiet = 0
            self._arm_tick(self.h.now + self.cfg.sync_us)

    def _arm_tick(self, at: int) -> None:
        """Tick at ``at`` unless a tick is due sooner; one set for later is superseded (``tick_at``), so
        the master keeps one chain of ticks even when something in a tick calls ``activity``."""
        if self.tick_armed and self.tick_at <= at:
            return
        self.tick_armed = True
        self.tick_at = at
        self.h.set_timer(at - self.h.now, MasterTick(self.epoch))

    def tick(self) -> None:
        """Overdue tasks and unanswered probes, then the sync to the second master and the next tick."""
        if self.h.arrived != self.tick_at:
            return  # superseded by a sooner tick
        self.tick_armed = False
        now = self.h.now
        timeout = self.cfg.timeout_us
        deadlines = self.deadlines
        while deadlines and deadlines[0][0] <= now:
            _, local, job_id, index = heappop(deadlines)
            if (job_id, index) in self.running[local]:
                self.probe(local)
        for local, sent in sorted(self.probed.items()):
            if now - sent >= timeout:
                del self.probed[local]
                if local not in self.down:
                    self.mark_down(local)
        backoff = None  # when the next probe of a down worker is due, while tasks wait (a partition heals)
        for local, tries in sorted(self.down.items()):
            if local in self.probed:
                continue
            if tries >= DOWN_PROBES:
                if not len(self.fq):
                    continue
                due = self.probed_at.get(local, 0) + (timeout << min(tries - DOWN_PROBES, 5))
                if now < due:
                    backoff = due if backoff is None else min(backoff, due)
                    continue
            self.down[local] = tries + 1
            self.probe(local)
        if self.orphans:
            self._resend_orphans()
        self.idle_ticks += 1
        if self.idle_ticks > TICK_LIMIT:  # no launch or end for this long: stop (a run must end)
            if self.sync_at >= 0:  # the second master hears once that no sync is due
                self.sync_at = -1
                self._sync(0)
            return
        sync_us = self.cfg.sync_us
        sync_at = self.sync_at
        if (0 <= sync_at <= now) or (self.active and (sync_at < 0 or sync_at > now + sync_us)):
            # the sync promised is due, or something changed while none (or only a distant one) was
            if self.active:
                self.quiet = 0
            else:
                self.quiet += 1
            self.active = False
            sync_at = -1
            if (len(self.fq) or self.where) and self.quiet < QUIET_MAX:
                sync_at = now + sync_us * (1 << min(self.quiet, 5))
            self.sync_at = sync_at
            self._sync(max(sync_at, 0))
        nxt = [sync_at] if sync_at >= 0 else []
        if deadlines:
            nxt.append(max(deadlines[0][0], now + 1))
        if self.probed:
            nxt.append(min(self.probed.values()) + timeout)
        if self.orphans:
            nxt.append(now + timeout)
        if backoff is not None:
            nxt.append(backoff)
        if nxt:
            self._arm_tick(max(min(nxt), now + 1))
        self._dispatch()

    def _sync(self, next_us: int) -> None:
        second = self.h.claim.second
        if second < 0 or second == self.h.id:
            self.sync.forget()  # nobody to sync: no changes kept (the next second master gets the full state)
            return
        self.h.send(second, self.sync.message(self, second, self.epoch, next_us))

    # ---- dispatch --------------------------------------------------------------------
    def _count(self, local: int, delta: int) -> None:
        cons_free = self.cons_free
        for c in self.worker_cons[local]:
            cons_free[c] += delta

    def _dispatch(self) -> None:
        if self.recovering is not None:
            return
        fq = self.fq
        accept = self.accept
        view = self.view
        queued = self.queued
        changed = self.sync.queued
        while len(fq):
            if self.unit_gate and view.free_count == 0:
                break
            for cls in fq.order():
                got = fq.take(cls, accept[cls])
                if got is not None:
                    task = got[0]
                    key = (task.job_id, task.index)
                    if queued.pop(key, None) is not None:  # else dropped or placed
                        changed[key] = None
                        self._launch(cls, task, got[1])
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
        self.h.charge("worker", self.view.n)  # every worker of the group examined (a cost model's units)
        if not len(cand):
            return None
        return self.policy.choose(self.view, cand, self.choice, key[1])

    def _match_high(self, key):
        """A HIGH task: an idle low-priority worker if any, else an idle reserved one."""
        if self.unit_gate and self._blocked(key[0]):
            return None
        cand = self.view.suitable(key[0], key[1])
        self.h.charge("worker", self.view.n)  # every worker of the group examined (a cost model's units)
        if not len(cand):
            return None
        low = cand[self.is_low[cand]]
        return self.policy.choose(self.view, low if len(low) else cand, self.choice, key[1])

    def _match_low(self, key):
        """A LOW task: only an idle low-priority worker."""
        if self.unit_gate and self._blocked(key[0]):
            return None
        cand = self.view.suitable(key[0], key[1])
        self.h.charge("worker", self.view.n)  # every worker of the group examined (a cost model's units)
        if len(cand):
            cand = cand[self.is_low[cand]]
        if not len(cand):
            return None
        return self.policy.choose(self.view, cand, self.choice, key[1])

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        view = self.view
        before = view.is_available(local)
        view.allocate(local, task.demand)
        if before and not view.is_available(local):
            self._count(local, -1)
        recorder = self.recorder
        h = self.h
        recorder.task_dispatched(task.job_id, task.index, task.since_us, h.now)
        recorder.count(_COUNTER[cls])
        if not self.aware and task.constraints:
            need = sum(1 << c for c in task.constraints)
            if need & ~self.worker_bits[local]:
                recorder.count("constraint_violations")
        if h.fabric.event_log is not None:
            self._log_placed(cls, task, local)
        self.idle_ticks = 0
        seq = self.seq[local] = self.seq[local] + 1
        self.mark[local] = (self.epoch, seq)
        key = (task.job_id, task.index)
        self.running[local][key] = (task, cls, self.epoch, seq)
        self.sync.running[(local, *key)] = None
        self.where[key] = local
        heappush(self.deadlines, (h.now + task.duration_us + self.cfg.timeout_us, local, task.job_id, task.index))
        self._send_local(local, Launch(task.job_id, task.index, task.duration_us, task.demand, task.distributor,
                                       self.epoch, seq))

    def _log_placed(self, cls: int, task: Pending, local: int) -> None:
        fields = {"job": task.job_id, "task": task.index, "worker": self.cfg.member_names[local + 1]}
        emit(self.h, TASK_PLACED, queue="high" if cls == HIGH else "low", **fields)
        if self.reserved and not self.is_low[local]:
            emit(self.h, RESERVED_PLACED, **fields)

    def statistics(self, name: str) -> MasterStatistics:
        fq = self.fq
        return MasterStatistics(name, self.cfg.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], self.view.free_count, self.reserved)


class GroupMember:
    """The membership protocol every member of a group runs (mixed into the ``Master`` actor and
    ``PigeonWorker``): the claim it believes, the second master's watch, suspicion and elections, and
    the master role (``self.role``, a MasterCore) while it holds it."""

    def _member_init(self, cfg: GroupConfig, rank: int) -> None:
        self.cfg = cfg
        self.rank = rank
        self.role: MasterCore | None = None
        self.claim: Claim | None = None
        self.key = NO_KEY
        self.member_ids: tuple = ()
        self.dist_ids: tuple = ()
        self.synced: SyncedState | None = None  # the group's state as the syncs told it (as second master)
        self.last_sync_us = -1
        self.watch_pinged_us = -1  # when the watch pinged a master whose sync did not come (-1: not)
        self.watch_armed = False
        self.heard_master_us = -1
        self.suspecting = None  # (stage, since) while checking a suspected master
        self.suspecters: list[int] = []

    def _member_start(self) -> None:
        cfg = self.cfg
        self.member_ids, self.dist_ids = cfg.addresses(self.fabric)
        if self.incarnation == 0:
            second = self.member_ids[1] if len(self.member_ids) > 1 else -1
            self._adopt(Claim(cfg.group, 0, 0, 0, self.member_ids[0], second))
            if self.rank == 0:
                self.role = MasterCore(self, 0)
        else:  # back with nothing: whoever is master requeues what this member ran
            hello = Hello(cfg.group, self.told_now())
            for dst in self.member_ids:
                if dst != self.id:
                    self.send(dst, hello)

    def told_now(self) -> int:
        return 0

    def on_master_changed(self) -> None:
        """A better claim was adopted (workers answer it with their status)."""

    def status_message(self):
        return None

    # ---- claims --------------------------------------------------------------------------
    def _adopt(self, claim: Claim) -> None:
        self.claim = claim
        self.key = claim_key(claim)
        if self.role is not None and claim.master != self.id:
            self.role = None  # a better master exists: step down, and tell the distributors who it is (its
            for dst in self.dist_ids:  # own claims to one may all have been lost, and that distributor,
                self.send(dst, claim)  # hearing this master answer, would wait for it for good)
        if claim.second != self.id:
            self.synced = None
        self.heard_master_us = self.now

    def _broadcast(self, claim: Claim) -> None:
        for dst in self.member_ids:
            if dst != self.id:
                self.send(dst, claim)
        for dst in self.dist_ids:
            self.send(dst, claim)

    def on_Claim(self, msg: Claim, src: int) -> None:
        key = claim_key(msg)
        if key > self.key:
            self._adopt(msg)
            self._suspicion_over()
            if msg.master == self.id and (self.role is None or self.role.declared_us != msg.declared_us):
                # a claim from before this member restarted names it master: it holds nothing of that
                # claim (and others hold it better than the one it has since declared), so it takes the
                # role again in a new epoch and rebuilds from the members and distributors
                self._take_over(self.now, "election")
                return
            self.on_master_changed()
        elif key == self.key:
            if src == msg.master:
                self.heard_master_us = self.now
                if msg.second != self.claim.second:
                    self._adopt(msg)
                self.on_master_changed()  # a new master asking again
        elif self.claim is not None:
            self.send(src, self.claim)  # a stale claim: tell it who is master now

    def on_MasterPing(self, msg: MasterPing, src: int) -> None:
        if self.claim is not None:
            self.send(src, self.claim)
        elif src in self.dist_ids:  # back from a restart knowing nothing: ask the distributor who is master
            self.send(src, MasterPing(self.cfg.group))

    def new_second(self, exclude: int = -1, announce: bool = True) -> None:
        """The master picks the next live worker after itself, in rank order, as its second master."""
        role = self.role
        n = len(self.member_ids)
        second = -1
        for step in range(1, n):
            rank = (self.rank + step - 1) % (n - 1) + 1
            if self.member_ids[rank] not in (self.id, exclude) and (rank - 1) not in role.down:
                second = self.member_ids[rank]
                break
        c = self.claim
        if second != c.second:
            self._adopt(Claim(c.group, c.epoch, c.declared_us, c.rank, c.master, second))
            if announce:
                self._broadcast(self.claim)

    # ---- the second master's watch -------------------------------------------------------
    def on_Sync(self, msg: Sync, src: int) -> None:
        if self.claim is None or src != self.claim.master or msg.epoch != self.key[0]:
            if self.claim is not None and msg.epoch < self.key[0]:
                self.send(src, self.claim)
            return
        self.heard_master_us = self.last_sync_us = self.now
        self.watch_pinged_us = -1
        if self.claim.second != self.id or self.role is not None:
            return
        state = self.synced
        if state is None or state.epoch != msg.epoch:
            state = self.synced = SyncedState(msg.epoch)
        if not state.apply(msg):
            self.send(src, SyncReset(msg.epoch))
            self.cfg.recorder.count("syncs_reset")
        if msg.next_us and not self.watch_armed:
            self.watch_armed = True
            self.set_timer(max(0, msg.next_us + self.cfg.timeout_us // 2 - self.now), Watchdog(msg.epoch))

    def on_Watchdog(self, msg: Watchdog, src: int) -> None:
        self.watch_armed = False
        snap = self.synced
        if (self.role is not None or snap is None or msg.epoch != self.key[0] or self.claim.second != self.id
                or not snap.next_us):
            return
        half = self.cfg.timeout_us // 2
        due = snap.next_us + half
        if self.now >= due and self.last_sync_us < snap.next_us:
            pinged = self.watch_pinged_us
            if pinged < 0:  # one lost sync is no failure: ask the master, wait the other half
                self.watch_pinged_us = self.now
                self.send(self.claim.master, MasterPing(self.cfg.group))
                self.watch_armed = True
                self.set_timer(self.cfg.timeout_us - half, Watchdog(msg.epoch))
            elif self.heard_master_us >= pinged:  # it answered: alive, the next sync re-arms the watch
                self.watch_pinged_us = -1
            elif self.now >= pinged + self.cfg.timeout_us - half:
                self._take_over(self.last_sync_us, "failover")
            return
        if self.now < due:
            self.watch_armed = True
            self.set_timer(due - self.now, Watchdog(msg.epoch))

    # ---- suspicion and elections --------------------------------------------------------
    def on_Suspect(self, msg: Suspect, src: int) -> None:
        if self.role is not None:
            if src >= 0:
                self.send(src, self.claim)
            return
        if src >= 0 and src not in self.suspecters:
            self.suspecters.append(src)
        if self.suspecting is not None:
            return
        self.suspecting = (1, self.now)
        if self.claim is not None and self.claim.master != self.id:
            self.send(self.claim.master, MasterPing(self.cfg.group))
        self.set_timer(self.cfg.timeout_us, SuspectTimer(1, self.key))

    def on_SuspectTimer(self, msg: SuspectTimer, src: int) -> None:
        if self.suspecting is None:
            return
        since = self.suspecting[1]
        if self.role is not None or msg.key != self.key or self.heard_master_us >= since:
            self._suspicion_over()
            return
        claim = self.claim
        if msg.stage == 1 and claim is not None:
            if claim.second == self.id:
                self._take_over(since, "failover")
                return
            if claim.second >= 0:
                self.suspecting = (2, since)
                self.send(claim.second, Suspect(self.cfg.group))
                if claim.master != self.id:
                    self.send(claim.master, MasterPing(self.cfg.group))  # it may be back: its answer ends this
                self.set_timer(self.cfg.timeout_us, SuspectTimer(2, self.key))
                return
        self._take_over(since, "election")

    def _suspicion_over(self) -> None:
        """Tell whoever alerted this member who the master is now."""
        if self.suspecting is None:
            return
        self.suspecting = None
        if self.claim is not None:
            for dst in self.suspecters:
                self.send(dst, self.claim)
        self.suspecters = []

    def _take_over(self, since_us: int, kind: str) -> None:
        """Become master of the next epoch: claim it, rebuild from the members and distributors."""
        snapshot = self.synced if kind == "failover" else None
        old = self.claim
        claim = Claim(self.cfg.group, self.key[0] + 1, self.now, self.rank, self.id, -1)
        self._adopt(claim)
        self.role = role = MasterCore(self, claim.epoch)
        if snapshot is not None:
            role.seed(snapshot)
        self.cfg.recorder.count("failovers" if kind == "failover" else "master_elections")
        if self.fabric.event_log is not None:
            emit(self, FAILOVER, group=self.cfg.group, kind=kind, epoch=claim.epoch,
                 failed=self.fabric.name_of(old.master) if old is not None else "?")
        # the next second master: the next live worker after this one, never the failed master
        self.new_second(exclude=old.master if old is not None else -1, announce=False)
        self._broadcast(self.claim)
        self.synced = None
        self._suspicion_over()
        role.recover(since_us, kind)
        own = self.status_message()
        if own is not None:
            role.status(self.rank - 1, own)

    # ---- the master role's messages -----------------------------------------------------
    def _redirect(self, src: int) -> None:
        """A message for the master reached a member that is not: say who is, or, back from a restart
        knowing nothing, ask the sender (its answering ``Claim`` may name this member master again)."""
        if self.claim is None:
            self.send(src, MasterPing(self.cfg.group))
        elif self.claim.master != self.id:
            self.send(src, self.claim)

    def on_TaskBatch(self, msg, src: int) -> None:
        if self.role is None:
            self._redirect(src)
            return
        self.role.batch(msg, src)

    def _worker_local(self, src: int) -> int:
        """The sender's worker slot, while this member is master; else -1, and the sender is redirected."""
        local = -1 if self.role is None else self.role.local_of.get(src, -1)
        if local < 0:
            self._redirect(src)
        return local

    def on_Idle(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.idle(local, msg)

    def on_Status(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.status(local, msg)

    def on_Refused(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.status(local, msg, refused=(msg.job_id, msg.index))

    def on_Hello(self, msg, src: int) -> None:
        if self.role is None:
            return
        local = self.role.local_of.get(src, -1)
        if local >= 0:
            self.role.hello(local, msg.told)
        self.send(src, self.claim)

    def on_Outstanding(self, msg, src: int) -> None:
        if self.role is None or msg.epoch != self.role.epoch:
            self._redirect(src)
            return
        self.role.outstanding(msg, src)

    def on_SyncReset(self, msg: SyncReset, src: int) -> None:
        """The second master missed a sync: the next one is the full state."""
        if self.role is not None and msg.epoch == self.role.epoch and src == self.claim.second:
            self.role.sync.reset = True

    def on_MasterTick(self, msg: MasterTick, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.tick()

    def on_RecoverTimer(self, msg: RecoverTimer, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.recover_timer(msg.round)

    def on_BatchAck(self, msg, src: int) -> None:
        """The ack of tasks a stepping-down master handed on: nothing to do."""

    def on_ResultAck(self, msg, src: int) -> None:
        """A distributor got a result this master resent for a dead worker."""
        if self.role is not None:
            self.role.orphans.pop((msg.job_id, msg.index), None)


class Master(GroupMember, Actor):
    COST_ROLE, COST_UNITS = "master", ("worker",)  # a single server (fabric.service): what it charges
    """``master-<g>``: the group's first master (rank 0); restarted, it is a member without work."""

    def __init__(self, cfg: GroupConfig) -> None:
        super().__init__()
        self._member_init(cfg, 0)

    def on_start(self) -> None:
        self._member_start()

    def statistics(self) -> MasterStatistics:
        if self.role is not None:
            return self.role.statistics(self.name)
        return MasterStatistics(self.name, self.cfg.group, 0, 0, 0, 0, 0, self.cfg.reserved)
