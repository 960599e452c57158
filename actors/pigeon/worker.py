"""A Pigeon worker: the generic worker's machine, plus Pigeon's worker protocol and group membership.

It runs what its master ``Launch``es, unless the task does not fit what it really runs (``Refused``:
a master with a stale view never over-commits it) or comes from a master of an older epoch (answered
with the newer ``Claim``). A finished task's result goes to the job's distributor and its idle notice to
the current master (Pigeon 2019, 2.2), each once: a connection loses neither while it is up, and the
ends of one that breaks recover what it lost (the distributor lists what it still waits for, the
master asks the worker's status). As a group member it can be second master, take over from a failed
master and be elected (``master.GroupMember``, ``election``).
"""

from __future__ import annotations

from ..common.protocol import TaskFinished, TaskTimer
from ..common.worker import Worker
from .master import GroupMember
from .messages import Idle, Launch, MasterPing, Probe, Refused, Status


class PigeonWorker(GroupMember, Worker):
    """Worker ``spec`` of group ``cfg`` at ``rank`` (1..n)."""

    def __init__(self, spec, recorder, cfg, rank: int) -> None:
        super().__init__(spec, recorder)
        self._member_init(cfg, rank)
        self.last = (-1, 0)  # the latest (epoch, seq) launch received

    def on_start(self) -> None:
        self._member_start()

    # ---- tasks ---------------------------------------------------------------------------
    def on_Launch(self, msg: Launch, src: int) -> None:
        epoch = msg.epoch
        if epoch < self.key[0]:
            self.send(src, self.claim)  # a stale master: tell it who is master now
            return
        last = (epoch, msg.seq)
        if last > self.last:
            self.last = last
        key = (msg.job_id, msg.index)
        if key in self.running:
            self.recorder.count("duplicate_launches_suppressed")
            return
        free = self.free
        demand = msg.demand
        for r, d in enumerate(demand):
            if free[r] < d:
                self.send(src, Refused(msg.job_id, msg.index, self._running(), self.last))
                return
        for r, d in enumerate(demand):
            free[r] -= d
        self.running[key] = msg
        self.recorder.task_started(msg.job_id, msg.index, self.now, self.spec.worker_id, demand[0])
        self.set_timer(self.run_us(msg), TaskTimer(msg.job_id, msg.index))

    def on_TaskTimer(self, msg: TaskTimer, src: int) -> None:
        task = self.running.pop((msg.job_id, msg.index))
        demand = task.demand
        free = self.free
        for r, d in enumerate(demand):
            free[r] += d
        self.completed += 1
        self.recorder.task_finished(msg.job_id, msg.index, self.now, demand[0], self.spec.worker_id)
        self.send(task.distributor, TaskFinished(msg.job_id, msg.index, demand, self.cfg.group))
        if self.claim is not None:
            self.send(self.claim.master, Idle(msg.job_id, msg.index, demand))

    # ---- status --------------------------------------------------------------------------
    def _running(self) -> tuple:
        return tuple((j, i, t.demand, t.distributor) for (j, i), t in sorted(self.running.items()))

    def status_message(self, answers: int = 0) -> Status:
        return Status(self._running(), self.last, answers)

    def on_Probe(self, msg: Probe, src: int) -> None:
        if msg.epoch < self.key[0]:
            self.send(src, self.claim)
            return
        if msg.epoch > self.key[0]:  # a master of a newer epoch: its claim was lost with a connection, ask it
            self.send(src, MasterPing(self.cfg.group))
        self.send(src, self.status_message(msg.seq))

    def on_master_changed(self) -> None:
        """A new master (or one that asks again): tell it what this worker runs."""
        if self.claim is None or self.role is not None:
            return
        self.send(self.claim.master, self.status_message())
