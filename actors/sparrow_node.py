"""A Sparrow worker node: the generic Worker plus a FIFO queue of probes and the late-binding handshake.

It subclasses ``actors.worker.Worker`` (one actor per machine, so a probe, a request and a launch cost
exactly the network hops Sparrow pays, with no extra hop to a separate worker actor). The Worker part
still runs tasks, asserts capacity and sends ``TaskFinished`` (here to the task's scheduler).

Choices where the Sparrow paper leaves room:
- Strict FIFO: the head probe waits until the free capacity not already held for an outstanding request
  covers its demand; later probes never overtake it.
- While a request is out, its demand is held, so the answer can always run; a cancel releases it.
"""

from __future__ import annotations

from collections import deque

import attrs

from .protocol import RunTask
from .sparrow_messages import Assign, Cancel, GetTask, Probe
from .worker import Worker


@attrs.frozen
class SparrowNodeStatistics:
    name: str
    worker_id: int
    free: tuple
    running: int
    completed: int
    queued_probes: int
    outstanding: int


class SparrowNode(Worker):
    def __init__(self, spec, recorder) -> None:
        super().__init__(spec, recorder)
        self.probes: deque = deque()  # (scheduler, job_id, group, demand)
        self.held = [0] * len(spec.capacity)
        self.outstanding: dict[tuple[int, int, int], list] = {}  # (scheduler, job, group) -> [count, demand]

    def on_Probe(self, msg: Probe, src: int) -> None:
        self.probes.append((src, msg.job_id, msg.group, msg.demand))
        self._pump()

    def on_Assign(self, msg: Assign, src: int) -> None:
        self._answered(src, msg.job_id, msg.group)
        self.on_RunTask(RunTask(msg.job_id, msg.index, msg.duration_us, msg.demand, -1, (src,)), src)
        self._pump()

    def on_Cancel(self, msg: Cancel, src: int) -> None:
        self._answered(src, msg.job_id, msg.group)
        self._pump()

    def on_TaskTimer(self, msg, src: int) -> None:
        super().on_TaskTimer(msg, src)
        self._pump()

    def _answered(self, scheduler: int, job_id: int, group: int) -> None:
        key = (scheduler, job_id, group)
        entry = self.outstanding[key]
        for r, d in enumerate(entry[1]):
            self.held[r] -= d
        entry[0] -= 1
        if entry[0] == 0:
            del self.outstanding[key]

    def _pump(self) -> None:
        """Send a request for each head probe that fits what is free and not held."""
        probes = self.probes
        free, held = self.free, self.held
        while probes:
            scheduler, job_id, group, demand = probes[0]
            for r, d in enumerate(demand):
                if free[r] - held[r] < d:
                    return
            probes.popleft()
            for r, d in enumerate(demand):
                held[r] += d
            key = (scheduler, job_id, group)
            entry = self.outstanding.get(key)
            if entry is None:
                self.outstanding[key] = [1, demand]
            else:
                entry[0] += 1
            self.send(scheduler, GetTask(job_id, group))

    def statistics(self) -> SparrowNodeStatistics:
        return SparrowNodeStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                     self.completed, len(self.probes), sum(e[0] for e in self.outstanding.values()))
