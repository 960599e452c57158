"""The master role of one Pigeon / PigeonC group for one epoch (``MasterCore``): it drives the group's
dispatch (``dispatch``, the schedulers' algorithm: tasks arrive in batches, idle notices free workers,
a launch goes to each worker the queues match), keeps what each worker runs, updates the second master
periodically (``sync``), and, as a new master, rebuilds from the members (``failover``). Any member of
the group can hold it (``membership``).

Worker failures (our protocol; the paper is silent) are learnt from the fabric's notices, never from
timers: when a worker's connection with the master breaks, its launches or idle notices may be lost, so
the master takes it for down and queues again what it ran there (``broken``). A crashed worker says
``Hello`` when it is back; a worker cut off for longer than the connection timeout is asked its
``Status`` again at each break, until an answer comes (the status says what it really runs). A worker
refuses a launch that does not fit what it runs (``Refused``), so a master whose view went stale can
never over-commit it.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, LOW

from ..common.events import RELAUNCH
from ..common.front_end import Pending
from ..common.protocol import TaskFinished
from .dispatch import Dispatch
from .failover import RECOVER_ROUNDS, Rebuild
from .messages import Launch, MasterTick, Probe, RecoverTimer
from .sync import SyncSender


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
    """The master role of one epoch: the group's dispatch, what each worker runs, the periodic sync to
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
        self.seq = [0] * n  # launches sent to each worker in this epoch
        self.mark = [(-1, 0)] * n  # the latest launch each worker should have received
        self.down: set[int] = set()  # workers taken for down (a broken connection) until they speak again
        self.probed: set[int] = set()  # workers asked for their status, not answered yet
        self.moved: dict = {}  # running task -> the distributor its job moved to (its result goes there too)
        self.tick_armed = False
        self.rebuild: Rebuild | None = None  # a new master's rebuild, while it waits for answers
        self.sync = SyncSender()  # what changed since the last sync to the second master

    # ---- the group's work (Pigeon 2019, 2.2) ---------------------------------------------
    def batch(self, msg, src: int) -> None:
        """A distributor's tasks (one sent again, by a distributor the job was handed to again: tasks
        already queued or running are skipped, and their results go to it)."""
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
        self.activity()
        self._dispatch()

    def idle(self, local: int, msg) -> None:
        """A worker's idle notice: the task ended and its resources are free."""
        key = (msg.job_id, msg.index)
        entry = self.running[local].get(key)
        if entry is not None:
            self._tell_moved(key, entry[0])
            self._drop_running(local, key, relaunch=False)
            self.dispatch.release(local, msg.demand)
        if local in self.down:
            self.probe(local)  # it speaks: it is up after all, and its status says what it runs
        self.activity()
        self._dispatch()

    def _dispatch(self) -> None:
        if self.rebuild is None:
            self.dispatch.run(self._launch)

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        """The dispatch placed ``task`` on worker ``local``: launch it there."""
        key = (task.job_id, task.index)
        sync = self.sync
        sync.queued[key] = None
        seq = self.seq[local] = self.seq[local] + 1
        epoch = self.epoch
        self.mark[local] = (epoch, seq)
        self.running[local][key] = (task, cls, epoch, seq)
        sync.running[(local, *key)] = None
        self.where[key] = local
        self.h.send(self.worker_ids[local], Launch(task.job_id, task.index, task.duration_us, task.demand,
                                                   task.distributor, epoch, seq))

    # ---- what the master believes each worker runs -------------------------------------
    def _repoint(self, key, src: int) -> None:
        """A task already held is sent again by another distributor (the job was handed to it again):
        its result goes there; a running one's result is sent there by the master when it ends."""
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

    def _tell_moved(self, key, task: Pending) -> None:
        """Task ``key`` ended: if its job moved to another distributor while it ran, the worker told the old
        one, so the master tells the new one."""
        dist = self.moved.pop(key, None)
        if dist is not None:
            self.h.send(dist, TaskFinished(key[0], key[1], task.demand, self.cfg.group))
            self.recorder.count("results_forwarded")

    def status(self, local: int, msg, refused=None) -> None:
        """A worker's whole state (or a refusal carrying it): believe it, keep launches still on their way,
        queue again what the worker lost, and never count on capacity it does not have."""
        self.probed.discard(local)
        self.down.discard(local)
        running = self.running[local]
        reported = {(j, i): d for j, i, d in msg.running}
        last = tuple(msg.last)
        seen = max(last[1] if last[0] == self.epoch else 0, getattr(msg, "answers", 0))
        in_flight = False
        for key, (task, cls, epoch, seq) in list(running.items()):
            if key in reported:
                continue
            if epoch == self.epoch and seq > seen:
                in_flight = True  # launched after what the worker has seen: still on its way
                continue
            if key == refused:
                self._drop_running(local, key, relaunch=False)
                self._requeue(task, cls)
                continue
            self._drop_running(local, key, relaunch=True)  # lost (or ended, its idle notice lost with a connection)
        for key, demand in reported.items():
            if key not in running:  # placed by an earlier master: it holds the worker all the same
                other = self.where.get(key)
                if other is not None and other != local:  # it runs there too (relaunched when this
                    # worker was taken for down): that copy holds its worker until its idle notice, and
                    # is not relaunched if lost
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

    def hello(self, local: int) -> None:
        """Worker ``local`` restarted with nothing: what its earlier incarnation ran is lost (queued again
        when its connection broke). Launches this master sent after the restart may have reached the new
        incarnation, so if it still counts some there it asks for the worker's status, which says which
        it runs (until then the worker counts as busy with them)."""
        self.mark[local] = (-1, 0)
        self.probed.discard(local)
        self.down.discard(local)
        if self.running[local]:
            self.probe(local)
        self._known(local)

    def probe(self, local: int) -> None:
        """Ask worker ``local`` for its Status (once at a time: a broken connection asks again)."""
        if local not in self.probed:
            self.probed.add(local)
            self.h.send(self.worker_ids[local], Probe(self.epoch, self.seq[local]))

    def mark_down(self, local: int) -> None:
        """Worker ``local`` may have lost launches or idle notices with a connection: its tasks are queued
        again and it gets none until it speaks again."""
        self.down.add(local)
        for key in sorted(self.running[local]):
            self._drop_running(local, key, relaunch=True)
        self._refresh(local)
        if self.worker_ids[local] == self.h.claim.second:
            self.h.new_second()

    # ---- the fabric's notices -------------------------------------------------------------
    def broken(self, peer: int, cause: str) -> None:
        """A connection with ``peer`` broke (``cause``: crash, refused or timeout)."""
        local = self.local_of.get(peer)
        if local is not None:
            if peer == self.h.claim.second:
                self.sync.reset = True  # a sync may have been lost with it: the next one is the whole state
            self.probed.discard(local)
            self.mark_down(local)
            if cause == "timeout":  # a cut: ask again on a new connection, which breaks too while it holds
                self.probe(local)
            if self.rebuild is not None:
                self.rebuild.workers.discard(local)
                self._maybe_recovered()
            self.activity()
            self._dispatch()
        elif peer in self.h.dist_ids:
            rec = self.rebuild
            if rec is not None and peer in rec.dists:
                rec.dists.discard(peer)  # it lists its tasks when it hears this master's claim again
                self._maybe_recovered()
            if cause == "timeout":  # the claim may have been lost: what it waits for is reconciled on it
                self.h.send(peer, self.h.claim)

    # ---- a distributor's list, and a new master's rebuild (failover.Rebuild) ---------------
    def outstanding(self, msg, src: int) -> None:
        """A distributor's tasks for the group that are not done: queue those nobody holds."""
        rec = self.rebuild
        if rec is not None:
            rec.heard_dist(src, msg.tasks)
        dispatch = self.dispatch
        for job_id, short, demand, index, duration, constraints in msg.tasks:
            key = (job_id, index)
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
            if rec is None:  # (a new master's rebuild queues the group's tasks from the lists: none lost)
                self.recorder.count("tasks_requeued_from_list")
            self._requeue(task, cls)
        if rec is not None:
            self._maybe_recovered()
        self.activity()
        self._dispatch()

    def recover(self, since_us: int, kind: str, snapshot=None) -> None:
        """Start from the second master's synced state, if any (the workers' statuses correct it), and wait
        for every other member's status and every distributor's list (the claim was just sent); dispatch
        waits."""
        others = {local for local, a in enumerate(self.worker_ids) if a != self.h.id}
        self.rebuild = rec = Rebuild(since_us, kind, others, set(self.h.dist_ids))
        if snapshot is not None:
            self._seed(snapshot, rec)
        self.h.set_timer(self.cfg.timeout_us * RECOVER_ROUNDS, RecoverTimer(self.epoch))

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
            self._refresh(local)

    def recover_timer(self) -> None:
        """The members that have not answered by now are taken for down (and asked again): dispatch."""
        rec = self.rebuild
        if rec is not None:
            self._finish_recovery()
            for local in sorted(rec.workers):
                self.probe(local)

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

    # ---- the periodic update of the second master (sync) --------------------------------
    def activity(self) -> None:
        """The group's state changed: update the second master one period from now (the paper's periodic
        update, while there is something to update); with none, nothing is kept."""
        if not self.tick_armed:
            second = self.h.claim.second
            if second < 0 or second == self.h.id:
                self.sync.forget()
                return
            self.tick_armed = True
            self.h.set_timer(self.cfg.sync_us, MasterTick(self.epoch))

    def tick(self) -> None:
        """Send the second master what changed since the last update (the whole state to a new one)."""
        self.tick_armed = False
        second = self.h.claim.second
        if second < 0 or second == self.h.id:
            self.sync.forget()  # nobody to sync: no changes kept (the next second master gets the full state)
        elif self.sync.pending():
            self.h.send(second, self.sync.message(self.dispatch.queued, self.running, second, self.epoch))

    def statistics(self, name: str) -> MasterStatistics:
        d = self.dispatch
        fq = d.fq
        return MasterStatistics(name, self.cfg.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], d.view.free_count, d.reserved)
