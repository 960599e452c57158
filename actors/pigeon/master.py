"""The master of a Pigeon / PigeonC group, as Pigeon (2019, 2.2) describes it, in the paper's order: a
distributor's tasks arrive in a batch and wait in the group's two weighted fair queues; whenever a worker is
selected for one, the master sends it the task with its distributor's id; a worker's idle notice frees it
(``dispatch`` holds the queues, the view of the workers and the matching: the schedulers' algorithm). Then,
from "Master Failure Recovery", the master updates its second master periodically (``sync``).

Any member of the group can hold the master role (``GroupMember``): ``master-<g>`` (``Master``) holds it
first, and a worker holds it after a failover or an election (``election``). What a fault needs beside the
paper's handlers (workers taken for down, a distributor's list, a new master's rebuild, tasks no live
worker can run) is a component, ``failover.MasterRecovery``, which uses the role only through ``CORE``.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, LOW

from ..common.events import RELAUNCH
from ..common.front_end import Pending
from .dispatch import Dispatch
from .election import Election
from .failover import MasterRecovery
from .group import GroupConfig
from .messages import Launch, MasterPing, MasterTick
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
    the second master; its recovery is a component beside it (``recovery``)."""

    # all that the recovery component (``failover.MasterRecovery``, through its ``core``) and the election
    # (``election.Election``, through its ``role``) use of the role: the epoch, the dispatch, what each worker
    # runs and the launches sent to it, the workers' addresses and the bookkeeping below; and, for the
    # election, the claim the role was declared with and the recovery it starts at a takeover and tells of
    # a broken connection
    CORE = frozenset({"epoch", "dispatch", "running", "where", "seq", "mark", "worker_ids", "local_of", "requeue",
                      "drop_running", "changed", "resync", "activity", "dispatch_pass"})

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
        self.tick_armed = False
        self.sync = SyncSender()  # what changed since the last sync to the second master
        self.recovery = MasterRecovery(self, host)

    # ---- a distributor's tasks arrive (Pigeon 2019, 2.2) ----------------------------------
    def batch(self, msg, src: int) -> None:
        """A distributor's tasks (one sent again, by a distributor the job was handed to again: tasks
        already queued or running are skipped, and their results go to it)."""
        cls = HIGH if msg.short else LOW
        now = self.h.arrived  # the tasks wait from the batch's arrival (in the mailbox while the master is busy)
        demand = msg.demand
        dispatch = self.dispatch
        queued, where = dispatch.queued, self.where
        changed = self.sync.queued
        recovery = self.recovery
        dispatch.admit(demand)
        job_id = msg.job_id
        for index, duration, constraints in zip(msg.indices, msg.durations, msg.constraints):
            key = (job_id, index)
            if key in queued or key in where:
                recovery.repoint(key, src, handed_again=True)
                continue
            dispatch.enqueue(Pending(job_id, index, duration, constraints, demand, now, src), cls)
            changed[key] = None
        self.activity()
        self.dispatch_pass()
        if recovery.down:  # (recovery) a worker is down: these tasks may have no live worker to run them
            recovery.watch_stranded(recovery.sent_again(job_id, msg.indices))

    def dispatch_pass(self) -> None:
        """Place queued tasks on idle workers while some fit (not while a new master rebuilds)."""
        if self.recovery.rebuild is None:
            self.dispatch.run(self._launch)

    def _launch(self, cls: int, task: Pending, local: int) -> None:
        """The dispatch placed ``task`` on worker ``local``: launch it there, naming its distributor."""
        key = (task.job_id, task.index)
        self.sync.queued[key] = None
        seq = self.seq[local] = self.seq[local] + 1
        epoch = self.epoch
        self.mark[local] = (epoch, seq)
        self.running[local][key] = (task, cls, epoch, seq)
        self.where[key] = local
        self.h.send(self.worker_ids[local], Launch(task.job_id, task.index, task.duration_us, task.demand,
                                                   task.distributor, epoch, seq))

    # ---- a worker's idle notice (Pigeon 2019, 2.2) ----------------------------------------
    def idle(self, local: int, msg) -> None:
        """A worker's idle notice: the task ended and its resources are free."""
        key = (msg.job_id, msg.index)
        recovery = self.recovery
        entry = self.running[local].pop(key, None)
        if entry is not None:
            if recovery.also:  # (recovery) the job was handed again: other distributors wait for the result
                recovery.tell_others(key, entry[0])
            where = self.where  # ``drop_running`` without a relaunch, written out: it runs once per task
            if where.get(key) == local:
                del where[key]
            self.dispatch.release(local, msg.demand)
        if local in recovery.down:
            recovery.probe(local)  # it speaks: it is up after all, and its status says what it runs
        if not self.tick_armed:
            self.activity()
        if recovery.rebuild is None:
            self.dispatch.run(self._launch)

    # ---- the periodic update of the second master ("Master Failure Recovery") ------------
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

    def changed(self, key) -> None:
        """Task ``key`` was queued or taken off the queues: the next sync says so."""
        self.sync.queued[key] = None

    def resync(self) -> None:
        """A sync may have been lost (the connection to the second master broke): the next is the whole state."""
        self.sync.reset = True

    # ---- what the master believes each worker runs -------------------------------------
    def requeue(self, task, cls: int) -> None:
        """Queue ``task`` again, unless it is queued or running already (or of class -1: not relaunchable)."""
        key = (task.job_id, task.index)
        if cls < 0 or key in self.dispatch.queued or key in self.where:
            return
        self.dispatch.enqueue(task, cls)
        self.sync.queued[key] = None

    def drop_running(self, local: int, key, relaunch: bool) -> None:
        """The task no longer holds worker ``local``: release it, and queue it again if it was lost."""
        task, cls, _, _ = self.running[local].pop(key)
        if self.where.get(key) == local:
            del self.where[key]
        if relaunch and cls >= 0:  # cls -1: a task an earlier master placed, which we cannot relaunch
            self.recorder.count("tasks_relaunched")
            if self.h.fabric.event_log is not None:
                emit(self.h, RELAUNCH, job=key[0], task=key[1], worker=self.cfg.member_names[local + 1])
            self.requeue(task, cls)

    def statistics(self, name: str) -> MasterStatistics:
        d = self.dispatch
        fq = d.fq
        return MasterStatistics(name, self.cfg.group, fq.size(HIGH), fq.size(LOW), fq.served[HIGH],
                                fq.served[LOW], d.view.free_count, d.reserved)


class GroupMember(Election):
    """One member of a group (``master-<g>`` or a worker): the election, and the master role while it holds
    it (``role``). The master's messages go to the role; a member without it tells the sender who is master."""

    def _new_role(self, epoch: int) -> MasterCore:
        return MasterCore(self, epoch)

    # ---- the paper's messages to a master, in its order ------------------------------------
    def on_TaskBatch(self, msg, src: int) -> None:
        if self.role is None:
            self._redirect(src)
            return
        self.role.batch(msg, src)

    def on_Idle(self, msg, src: int) -> None:
        role = self.role  # ``_worker_local`` written out: an idle notice comes once per task
        local = -1 if role is None else role.local_of.get(src, -1)
        if local >= 0:
            role.idle(local, msg)
        else:
            self._redirect(src)

    def on_MasterTick(self, msg, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.tick()

    # ---- the recovery's messages (``failover.MasterRecovery``) -----------------------------
    def on_Status(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.recovery.status(local, msg)

    def on_Refused(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.recovery.status(local, msg, refused=(msg.job_id, msg.index))

    def on_Hello(self, msg, src: int) -> None:
        if self.role is None:
            return
        local = self.role.local_of.get(src, -1)
        if local >= 0:
            self.role.recovery.hello(local)
        self.send(src, self.claim)

    def on_Outstanding(self, msg, src: int) -> None:
        if self.role is None or msg.epoch != self.role.epoch:
            self._redirect(src)
            return
        self.role.recovery.outstanding(msg, src)

    def on_StrandedTimer(self, msg, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.recovery.stranded_timer()

    def on_RecoverTimer(self, msg, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.recovery.recover_timer()

    # ---- a message for the master at a member that is not -------------------------------
    def _redirect(self, src: int) -> None:
        """A message for the master reached a member that is not: say who is, or, back from a restart
        knowing nothing, ask the sender (its answering ``Claim`` may name this member master again)."""
        if self.claim is None:
            self.send(src, MasterPing(self.cfg.group))
        elif self.claim.master != self.id:
            self.send(src, self.claim)

    def _worker_local(self, src: int) -> int:
        """The sender's worker slot, while this member is master; else -1, and the sender is redirected."""
        local = -1 if self.role is None else self.role.local_of.get(src, -1)
        if local < 0:
            self._redirect(src)
        return local


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
