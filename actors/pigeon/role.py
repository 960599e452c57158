"""The master role of one Pigeon / PigeonC group for one epoch (``MasterCore``), as Pigeon (2019, 2.2)
describes a master: tasks arrive in batches from the distributors and wait in the group's two weighted
fair queues; a worker's idle notice frees it; the master launches a queued task on each idle worker the
queues match (``dispatch``, the schedulers' algorithm). The master also updates its second master
periodically with what changed among the group's waiting tasks (``sync``; "Master Failure Recovery"). Any member of
the group can hold the role (``membership``).

What a fault needs beside it (workers taken for down on a broken connection, a distributor's list of what
it still waits for, a new master's rebuild) is in ``failover.MasterRecovery``, which this class mixes in.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, LOW

from ..common.events import RELAUNCH
from ..common.front_end import Pending
from .dispatch import Dispatch
from .failover import MasterRecovery, Rebuild
from .messages import Launch, MasterTick
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


class MasterCore(MasterRecovery):
    """The master role of one epoch: the group's dispatch, what each worker runs, the periodic sync to
    the second master; and, mixed in, its recovery (a new master's ``rebuild``, None once done)."""

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
        self.also: dict = {}  # task -> distributors the master tells its result (besides its launch's)
        self.tick_armed = False
        self.rebuild: Rebuild | None = None  # a new master's rebuild, while it waits for answers
        self.stranded_armed = False  # the timer of tasks no live worker can run is pending
        self.stranded_rounds = 0  # that timer's rounds since it last found nothing to hand back
        self.handed_back: set = set()  # tasks handed back (a batch bringing one again: nowhere else runs it)
        self.parked: set = set()  # tasks sent here again after a hand-back: kept until a worker comes back
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
                self._repoint(key, src, handed_again=True)
                continue
            dispatch.enqueue(Pending(job_id, index, duration, constraints, demand, now, src), cls)
            changed[key] = None
        self.activity()
        self._dispatch()
        if self.down:  # (recovery) a worker is down: these tasks may have no live worker to run them
            self._watch_stranded(self._sent_again(job_id, msg.indices))

    def idle(self, local: int, msg) -> None:
        """A worker's idle notice: the task ended and its resources are free."""
        key = (msg.job_id, msg.index)
        entry = self.running[local].pop(key, None)
        if entry is not None:
            if self.also:  # (recovery) the job was handed again: other distributors wait for the result
                self._tell_others(key, entry[0])
            where = self.where  # ``_drop_running`` without a relaunch, written out: it runs once per task
            if where.get(key) == local:
                del where[key]
            self.dispatch.release(local, msg.demand)
        if local in self.down:
            self.probe(local)  # it speaks: it is up after all, and its status says what it runs
        if not self.tick_armed:
            self.activity()
        if self.rebuild is None:
            self.dispatch.run(self._launch)

    def _dispatch(self) -> None:
        if self.rebuild is None:
            self.dispatch.run(self._launch)

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        """The dispatch placed ``task`` on worker ``local``: launch it there."""
        key = (task.job_id, task.index)
        self.sync.queued[key] = None
        seq = self.seq[local] = self.seq[local] + 1
        epoch = self.epoch
        self.mark[local] = (epoch, seq)
        self.running[local][key] = (task, cls, epoch, seq)
        self.where[key] = local
        self.h.send(self.worker_ids[local], Launch(task.job_id, task.index, task.duration_us, task.demand,
                                                   task.distributor, epoch, seq))

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
            self.h.send(second, self.sync.message(self.dispatch.queued, second, self.epoch))

    # ---- what the master believes each worker runs -------------------------------------
    def _requeue(self, task, cls: int) -> None:
        key = (task.job_id, task.index)
        if cls < 0 or key in self.dispatch.queued or key in self.where:
            return
        self.dispatch.enqueue(task, cls)
        self.sync.queued[key] = None

    def _drop_running(self, local: int, key, relaunch: bool) -> None:
        """The task no longer holds worker ``local``: release it, and queue it again if it was lost."""
        task, cls, _, _ = self.running[local].pop(key)
        if self.where.get(key) == local:
            del self.where[key]
        if relaunch and cls >= 0:  # cls -1: a task an earlier master placed, which we cannot relaunch
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

    def statistics(self, name: str) -> MasterStatistics:
        d = self.dispatch
        fq = d.fq
        return MasterStatistics(name, self.cfg.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], d.view.free_count, d.reserved)
