"""An Eagle worker node: Hawk's node (``actors/hawk/node``) with Eagle's three mechanisms on the worker side.

- Succinct State Sharing (Eagle 2016, 4.1): a node with long work (queued, asked for or running) rejects a short
  probe of rounds 1 and 2 (``Reject``), with the freshest bitmap it has; it gets the long-job scheduler's bitmap
  with each long reservation. A probe of round 3 (the fallback) is always queued.
- Sticky Batch Probing (4.2): a short reservation that got a task stays in the queue, where it was, so the node
  asks for the job's next task again (``sticky``); it leaves with a cancel. The node learns from each answer how
  many of the job's tasks are unbound (``Assign.left``): at none it drops the job's reservations, and a cancel
  drops the group's, without asking (the simulator drops them as the job's last task is handed out).
- Queue order (4.3): shortest remaining job first with a bound (``queue_order``), each reservation knowing its
  job's remaining work as the probe and the answers since told it.

No stealing: Eagle's simulator runs without it (SSS replaces it).
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.log import emit

from ..hawk.node import HawkNode, Reservation
from . import queue_order
from .events import REJECTED
from .messages import Probe, Reject

ROUNDS = 2  # probing rounds that may be rejected; round ROUNDS + 1 is the fallback to the reserved partition


class EagleReservation(Reservation):
    """A Hawk reservation with its job's estimated remaining work, the delay it has suffered from reservations
    served past it, and where it stood when it was last asked for (``position``)."""

    __slots__ = ("remaining_us", "delay_us", "position", "kept")

    def __init__(self, *args, remaining_us: int = 0) -> None:
        super().__init__(*args)
        self.remaining_us = remaining_us
        self.delay_us = 0
        self.position = 0
        self.kept = False  # it got a task and stayed (sticky)


@attrs.frozen
class EagleNodeStatistics:
    name: str
    worker_id: int
    free: tuple
    running: int
    completed: int
    queued_probes: int
    outstanding: int
    long_work: int
    rejected: int
    sticky: int


class EagleNode(HawkNode):
    """``sss``: reject short probes while it has long work; ``sticky``: Sticky Batch Probing on; ``srpt_bound``: the
    queue order's bound (None: FIFO)."""

    def __init__(self, spec, recorder, *, sss: bool = True, sticky: bool = True, srpt_bound: float | None = 5.0,
                 **kwargs) -> None:
        super().__init__(spec, recorder, **kwargs)
        self.sss = sss
        self.sticky = sticky
        self.srpt_bound = srpt_bound
        self.bitmap = b""
        self.bitmap_stamp = -1
        self.rejected = 0
        self.sticky_hits = 0

    def on_Probe(self, msg: Probe, src: int) -> None:
        if msg.long:
            if msg.stamp_us > self.bitmap_stamp:
                self.bitmap, self.bitmap_stamp = msg.bitmap, msg.stamp_us
        elif self.long_work and self.sss and msg.round <= ROUNDS:
            self.rejected += 1
            self.recorder.count("rejections")
            if self.fabric.event_log is not None:
                emit(self, REJECTED, job=msg.job_id, round=msg.round, scheduler=self.fabric.name_of(src))
            self.send(src, Reject(msg.job_id, msg.group, msg.round, self.bitmap, self.bitmap_stamp))
            return
        self.enqueue(EagleReservation(src, msg.job_id, msg.group, msg.demand, msg.constraints, msg.estimate_us,
                                      msg.long, self.id, remaining_us=msg.remaining_us))
        self._pump()

    def choose(self) -> int:
        if self.srpt_bound is None or not self.queue:
            return super().choose()
        return queue_order.choose(self.queue, self.srpt_bound)

    def asking(self, r, position: int) -> None:
        r.position = position

    def assigned(self, r, msg) -> None:
        left = msg.left
        if r.long:
            return
        if r.kept:
            self.sticky_hits += 1
            self.recorder.count("sticky_hits")
        queue = self.queue
        pos = min(r.position, len(queue))
        if self.srpt_bound is not None and self.srpt_bound != math.inf:
            queue_order.passed(queue, pos, r.estimate_us)
        remaining = left * r.estimate_us
        if not left:
            self._drop(r.scheduler, r.job_id, None)
        else:
            for other in queue:
                if other.job_id == r.job_id and other.scheduler == r.scheduler:
                    other.remaining_us = min(other.remaining_us, remaining)
            if self.sticky:
                r.remaining_us = remaining
                r.kept = True
                self.queue.insert(pos, r)

    def cancelled(self, r, msg) -> None:
        if not r.long:
            self._drop(r.scheduler, r.job_id, r.group)

    def on_Drop(self, msg, src: int) -> None:
        self._drop(src, msg.job_id, None)
        self._pump()

    def _drop(self, scheduler: int, job_id: int, group: int | None) -> None:
        """Drop the queued short reservations of ``job_id`` (of ``group`` only, unless None): its tasks are bound."""
        queue = self.queue
        if any(r.job_id == job_id and r.scheduler == scheduler and not r.long and (group is None or r.group == group)
               for r in queue):
            kept = [r for r in queue if not (r.job_id == job_id and r.scheduler == scheduler and not r.long
                                              and (group is None or r.group == group))]
            self.recorder.count("reservations_dropped", len(queue) - len(kept))
            queue.clear()
            queue.extend(kept)

    def statistics(self) -> EagleNodeStatistics:
        return EagleNodeStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                   self.completed, len(self.queue), len(self.outstanding), self.long_work,
                                   self.rejected, self.sticky_hits)
