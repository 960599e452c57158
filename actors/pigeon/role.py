"""The master role of one Pigeon / PigeonC group for one epoch (``MasterCore``): it drives the group's
dispatch (``dispatch``, the schedulers' algorithm), keeps what each worker runs, finds failed workers,
and, as a new master, rebuilds from the members (``failover``). Any member of the group can hold it
(``membership``).

Worker failures (our protocol; the paper is silent): a restarted worker says ``Hello`` (the master
requeues what it ran); a silent one is found when one of its tasks is overdue (the master knows
durations) and it does not answer a ``Probe``; a gap in a worker's numbered notices (a lost one) is also
probed. No per-worker heartbeat. A worker refuses a launch that does not fit what it really runs
(``Refused``), so a master whose view went stale can never over-commit it. Results a dead worker had
not seen acknowledged are resent by the master on its behalf.
"""

from __future__ import annotations

from heapq import heappop, heappush

import attrs

from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, LOW

from ..common.events import RELAUNCH
from ..common.front_end import Pending
from ..common.protocol import TaskFinished
from .dispatch import Dispatch
from .failover import RECOVER_ROUNDS, Rebuild
from .messages import RESULT_KEEP_US, BatchAck, Launch, MasterTick, Probe, RecoverTimer, told_incarnation
from .sync import SyncSender

QUIET_MAX = 8  # syncs while nothing changes (their period doubles each time) before the master stops ticking
TICK_LIMIT = 200  # ticks without a launch or a task end before a master stops ticking
DOWN_PROBES = 8  # probes of a down worker, one per tick; then, while tasks wait, one per backoff period


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
    """The master role of one epoch: the group's dispatch, what each worker runs, probes, the sync to
    the second master, and a new master's rebuild (``rebuild``, None once done)."""

    def __init__(self, host, epoch: int) -> None:
        cfg = host.cfg
        n = len(cfg.workers)
        self.h = host
        self.cfg = cfg
        self.epoch = epoch
        self.declared_us = host.claim.declared_us  # the claim this role was declared with
        self.recorder = cfg.recorder
        self.dispatch = Dispatch(host, cfg, host.rng.child("choice"))
        self.worker_ids = host.member_ids[1:]
        self.local_of = {a: i for i, a in enumerate(self.worker_ids)}
        self.running: list[dict] = [{} for _ in range(n)]  # per worker: (job, index) -> (Pending, cls, epoch, seq)
        self.where: dict[tuple, int] = {}  # (job, index) -> the worker running it
        self.heard = [0] * n  # the latest ``told`` applied per worker
        self.seq = [0] * n  # launches sent to each worker in this epoch
        self.mark = [(-1, 0)] * n  # the latest launch each worker should have received
        self.down: dict[int, int] = {}  # worker -> probes sent since it went down
        self.probed: dict[int, int] = {}  # worker -> when the pending probe was sent
        self.probed_at: dict[int, int] = {}  # worker -> when the last probe was sent
        self.deadlines: list = []  # heap of (overdue at, worker, job, index)
        self.results: list[dict] = [{} for _ in range(n)]  # per worker: its finished tasks not yet acknowledged
        self.moved: dict = {}  # running task -> the distributor its job moved to (its result goes there too)
        self.orphans: dict[tuple, list] = {}  # results the master resends: [task, tries, sent, first send]
        self.tick_armed = False
        self.tick_at = -1  # when the live tick is due: a timer for another time was superseded
        self.active = False
        self.quiet = 0
        self.sync_at = -1  # when the next sync to the second master is due (-1: none promised)
        self.idle_ticks = 0  # ticks since the last launch or task end
        self.rebuild: Rebuild | None = None  # a new master's rebuild, while it waits for answers
        self.sync = SyncSender()  # what changed since the last sync to the second master

    # ---- the group's work ------------------------------------------------------------
    def batch(self, msg, src: int) -> None:
        """A distributor's tasks (or a retry of them: tasks already queued or running are skipped)."""
        cls = HIGH if msg.short else LOW
        now = self.h.arrived  # the tasks wait from the batch's arrival (in the mailbox while the master is busy)
        demand = msg.demand
        dispatch = self.dispatch
        queued, where = dispatch.queued, self.where
        changed = self.sync.queued
        dispatch.admit(demand)
        job_id = msg.job_id
        for index, duration, constraints in zip(msg.indices, msg.durations, msg.constraints):
            key = (job_id, index)
            if key in queued or key in where:
                self._repoint(key, src)
                continue
            dispatch.enqueue(Pending(job_id, index, duration, constraints, demand, now, src), cls)
            changed[key] = None
        self.h.send(src, BatchAck(job_id, self.cfg.group, self.epoch))
        self.activity()
        self._dispatch()

    def _repoint(self, key, src: int) -> None:
        """A task already held is sent again by another distributor (the job was handed to it again):
        its result goes there; a running one's result is resent there by the master."""
        entry = self.dispatch.queued.get(key)
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
        if cls < 0 or key in self.dispatch.queued or key in self.where:
            return
        self.dispatch.enqueue(task, cls)
        self.sync.queued[key] = None

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
        free = [int(c) for c in self.dispatch.view.capacity[local]]
        if local in self.down:
            free = [0] * len(free)
        else:
            for entry in self.running[local].values():
                for r, d in enumerate(entry[0].demand):
                    free[r] -= d
        self.dispatch.refresh(local, [max(0, f) for f in free])

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
            self.dispatch.release(local, msg.demand)
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
        if self.rebuild is not None:
            self.rebuild.finished |= done
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
                entry = self.dispatch.queued.pop(key, None)
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
        """Worker ``local``'s state is known again: recount it, let a rebuild finish, dispatch."""
        self._refresh(local)
        if self.rebuild is not None:
            self.rebuild.workers.discard(local)
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
        rec = self.rebuild
        finished = ()
        if rec is not None:
            rec.heard_dist(src, msg.tasks)
            finished = rec.finished
        dispatch = self.dispatch
        for job_id, short, demand, index, duration, constraints in msg.tasks:
            key = (job_id, index)
            if key in finished:
                continue
            dispatch.admit(demand)
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
            if key in dispatch.queued or local is not None:
                self._repoint(key, src)  # its result goes to this distributor, which holds the job now
                continue
            self._requeue(task, cls)
        if rec is not None:
            self._maybe_recovered()
        self.activity()
        self._dispatch()

    # ---- a new master's rebuild (failover.Rebuild) -------------------------------------
    def recover(self, since_us: int, kind: str, snapshot=None) -> None:
        """Start from the second master's synced state, if any (the workers' statuses correct it), and
        ask every other member and every distributor (the claim was just sent); dispatch waits."""
        others = {local for local, a in enumerate(self.worker_ids) if a != self.h.id}
        self.rebuild = rec = Rebuild(since_us, kind, others, set(self.h.dist_ids))
        if snapshot is not None:
            self._seed(snapshot, rec)
        self.h.set_timer(self.cfg.timeout_us, RecoverTimer(self.epoch, 0))

    def _seed(self, snapshot, rec: Rebuild) -> None:
        for job_id, index, duration, constraints, demand, since, dist, cls in snapshot.queued_entries():
            self.dispatch.admit(demand)
            self._requeue(Pending(job_id, index, duration, constraints, demand, since, dist), cls)
            rec.seeded.add((job_id, index))
        for rank, job_id, index, duration, constraints, demand, dist, cls in snapshot.running_entries():
            key = (job_id, index)
            if key in self.where or key in self.dispatch.queued:
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

    def recover_timer(self, round_: int) -> None:
        rec = self.rebuild
        if rec is None:
            return
        if round_ + 1 < RECOVER_ROUNDS:
            claim = self.h.claim
            for local in sorted(rec.workers):
                self._send_local(local, claim)
            for dst in sorted(rec.dists):
                self.h.send(dst, claim)
            self.h.set_timer(self.cfg.timeout_us, RecoverTimer(self.epoch, round_ + 1))
            return
        self._finish_recovery()

    def _maybe_recovered(self) -> None:
        if self.rebuild is not None and self.rebuild.done():
            self._finish_recovery()

    def _finish_recovery(self) -> None:
        rec = self.rebuild
        self.rebuild = None
        for local in sorted(rec.workers):  # nobody answered for it
            self.mark_down(local)
        queued = self.dispatch.queued
        for key, (task, _) in list(queued.items()):  # synced tasks whose distributor says they are done
            if rec.synced_but_done(key, task):
                del queued[key]
                self.sync.queued[key] = None
        self.recorder.recovered(self.h.now - rec.since_us)
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
                if not len(self.dispatch):
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
            if (len(self.dispatch) or self.where) and self.quiet < QUIET_MAX:
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
        self.h.send(second, self.sync.message(self.dispatch.queued, self.running, second, self.epoch, next_us))

    # ---- dispatch --------------------------------------------------------------------
    def _dispatch(self) -> None:
        if self.rebuild is None:
            self.dispatch.run(self._launch)

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        """The dispatch placed ``task`` on worker ``local``: launch it there and expect its end."""
        h = self.h
        key = (task.job_id, task.index)
        self.sync.queued[key] = None
        self.idle_ticks = 0
        seq = self.seq[local] = self.seq[local] + 1
        self.mark[local] = (self.epoch, seq)
        self.running[local][key] = (task, cls, self.epoch, seq)
        self.sync.running[(local, *key)] = None
        self.where[key] = local
        heappush(self.deadlines, (h.now + task.duration_us + self.cfg.timeout_us, local, task.job_id, task.index))
        self._send_local(local, Launch(task.job_id, task.index, task.duration_us, task.demand, task.distributor,
                                       self.epoch, seq))

    def statistics(self, name: str) -> MasterStatistics:
        d = self.dispatch
        fq = d.fq
        return MasterStatistics(name, self.cfg.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], d.view.free_count, d.reserved)
