"""A Pigeon worker: the generic worker's machine, plus Pigeon's worker protocol and group membership.

It runs what its master ``Launch``es, unless the task does not fit what it really runs (``Refused``:
a master with a stale view never over-commits it) or comes from a master of an older epoch (answered
with the newer ``Claim``). A finished task's result goes to the job's distributor and is resent until
acknowledged (``result_retry_s``, doubling up to 64 times it; given up after ``RESULT_TRIES`` sends and
``RESULT_KEEP_US`` from the first, so a partition shorter than that loses none); the idle notice goes to
the current master at once. Every state message to a master (idle notice, refusal, status) carries
``told``, numbered above every earlier incarnation's. As a group member it can be second master, alert
its master's death and take over (``master.GroupMember``).
"""

from __future__ import annotations

from collections import deque

from ..common.protocol import TaskFinished, TaskTimer
from ..common.worker import Worker
from .membership import GroupMember
from .messages import RESULT_KEEP_US, TOLD_SHIFT, Idle, Launch, Probe, Refused, ResultAck, ResultTimer, Status

RESULT_TRIES = 12  # sends of one result before the worker gives up on its distributor
RECENT = 64  # finished tasks a status reports as done (a lost idle notice is then not run again)


class PigeonWorker(GroupMember, Worker):
    """Worker ``spec`` of group ``cfg`` at ``rank`` (1..n)."""

    def __init__(self, spec, recorder, cfg, rank: int, result_retry_us: int) -> None:
        super().__init__(spec, recorder)
        self._member_init(cfg, rank)
        self.result_retry_us = result_retry_us
        self.told = 0
        self.last = (-1, 0)  # the latest (epoch, seq) launch received
        self.unacked: dict[tuple, list] = {}  # (job, index) -> [result, distributor, tries, sent at]
        self.recent: deque = deque(maxlen=RECENT)
        self.result_armed = False

    def on_start(self) -> None:
        self.told = self.incarnation << TOLD_SHIFT  # numbered above everything an earlier incarnation sent
        self._member_start()

    def told_now(self) -> int:
        return self.told

    # ---- tasks ---------------------------------------------------------------------------
    def on_Launch(self, msg: Launch, src: int) -> None:
        if msg.epoch < self.key[0]:
            self.send(src, self.claim)  # a stale master: tell it who is master now
            return
        if (msg.epoch, msg.seq) > self.last:
            self.last = (msg.epoch, msg.seq)
        key = (msg.job_id, msg.index)
        if key in self.running:
            self.recorder.count("duplicate_launches_suppressed")
            return
        if key in self.unacked or key in self.recent:  # it ran here already: say so again
            self._resend_result(key, msg)
            self.told += 1
            self.send(src, Idle(msg.job_id, msg.index, msg.demand, self.told, tuple(self.unacked)))
            return
        free = self.free
        demand = msg.demand
        if any(free[r] < d for r, d in enumerate(demand)):
            self.told += 1
            self.send(src, Refused(msg.job_id, msg.index, self._running(), self.last, self.told, self._done()))
            return
        for r, d in enumerate(demand):
            free[r] -= d
        self.running[key] = msg
        self.recorder.task_started(msg.job_id, msg.index, self.now, self.spec.worker_id, demand[0])
        self.set_timer(self.run_us(msg), TaskTimer(msg.job_id, msg.index))

    def on_TaskTimer(self, msg: TaskTimer, src: int) -> None:
        key = (msg.job_id, msg.index)
        task = self.running.pop(key)
        for r, d in enumerate(task.demand):
            self.free[r] += d
        self.completed += 1
        self.recorder.task_finished(msg.job_id, msg.index, self.now, task.demand[0], self.spec.worker_id)
        result = TaskFinished(msg.job_id, msg.index, task.demand, self.cfg.group)
        self.send(task.distributor, result)
        self.unacked[key] = [result, task.distributor, 1, self.now, self.now]
        self.recent.append(key)
        if not self.result_armed:
            self.result_armed = True
            self.set_timer(self.result_retry_us, ResultTimer())
        self.told += 1
        if self.claim is not None:
            self.send(self.claim.master, Idle(msg.job_id, msg.index, task.demand, self.told, tuple(self.unacked)))

    def _resend_result(self, key, launch: Launch) -> None:
        """A task that ran here is launched again (its job was handed again to a distributor that had
        forgotten it, and may have acknowledged the first result while it did): send the result again, to
        the distributor the launch names, until acknowledged."""
        result = TaskFinished(launch.job_id, launch.index, launch.demand, self.cfg.group)
        self.send(launch.distributor, result)
        self.unacked[key] = [result, launch.distributor, 1, self.now, self.now]
        self.recorder.count("results_retried")
        if not self.result_armed:
            self.result_armed = True
            self.set_timer(self.result_retry_us, ResultTimer())

    def on_ResultAck(self, msg: ResultAck, src: int) -> None:
        self.unacked.pop((msg.job_id, msg.index), None)
        if self.role is not None:
            self.role.orphans.pop((msg.job_id, msg.index), None)

    def on_ResultTimer(self, msg, src: int) -> None:
        """Resend each result not acknowledged within its (doubling) retry time."""
        self.result_armed = False
        now = self.now
        base = self.result_retry_us
        wait = []
        for key, entry in list(self.unacked.items()):
            result, dst, tries, sent, first = entry
            due = sent + base * (1 << min(tries - 1, 6))
            if now < due:
                wait.append(due)
                continue
            if tries >= RESULT_TRIES and now - first >= RESULT_KEEP_US:
                del self.unacked[key]
                self.recorder.count("results_abandoned")
                continue
            self.send(dst, result)
            self.recorder.count("results_retried")
            entry[2], entry[3] = tries + 1, now
            wait.append(now + base * (1 << min(tries, 6)))
        if wait:
            self.result_armed = True
            self.set_timer(min(wait) - now, ResultTimer())

    # ---- status --------------------------------------------------------------------------
    def _running(self) -> tuple:
        return tuple((j, i, t.demand) for (j, i), t in sorted(self.running.items()))

    def _done(self) -> tuple:
        return tuple(sorted(set(self.unacked) | set(self.recent)))

    def status_message(self, answers: int = 0) -> Status:
        self.told += 1
        return Status(self._running(), self._done(), self.last, self.told, answers)

    def on_Probe(self, msg: Probe, src: int) -> None:
        if msg.epoch < self.key[0]:
            self.send(src, self.claim)
            return
        self.send(src, self.status_message(msg.seq))

    def on_master_changed(self) -> None:
        """A new (or re-asking) master: tell it what this worker runs."""
        if self.claim is None or self.role is not None:
            return
        self.send(self.claim.master, self.status_message())
