"""Megha's Local Manager: the true, current state of one cluster, and validation of GM requests.

The cluster's workers are split into one partition per GM (contiguous blocks). The LM holds each
worker's free capacity; a GM's launch request is valid when the worker still has the demand free.
A request on another GM's partition is a repartition: a logical node with just the requested
resources moves to the requester for the task's lifetime and returns to its home partition when the
task ends (Megha 2022 paper, shared/papers file 002, IV-B4). Invalid requests are answered with every
change the GM has not seen.

Delta updates (Megha 2023 paper, shared/papers file 000, 4.4) are ``policies.change_log``: every
change is logged with its cause; a heartbeat sends each GM the workers changed since its cursor,
leaving out those whose latest change the GM caused itself (its own launches, and completions of its
own tasks, which reach it through ``TaskCompleted``).

Heartbeats tick at multiples of the heartbeat period, but a GM with nothing new is sent nothing and
an LM with no change since its last tick arms no timer until the next change (the next tick is then
the next multiple of the period, as if it had ticked all along): an idle day of trace costs nothing.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import LAUNCH_INVALID, REPARTITION, emit
from fedemu.policies.change_log import ChangeLog

from .megha_messages import Heartbeat, HeartbeatTick, Launch, LaunchFailed, TaskCompleted
from .protocol import RunTask, TaskFinished


@attrs.frozen
class LocalManagerStatistics:
    name: str
    lm: int
    free_units: int
    launches: int
    invalid_internal: int
    invalid_external: int
    repartitions: int
    heartbeats: int
    log_length: int


class LocalManager(Actor):
    def __init__(self, lm: int, workers, worker_names: list[str], gm_names: list[str], *, heartbeat_us: int,
                 recorder) -> None:
        """``worker_names[w]`` names the actor of LM-local worker ``w``; ``gm_names[g]`` GM ``g``'s actor."""
        super().__init__()
        self.lm = lm
        self.specs = list(workers)
        self.worker_names = worker_names
        self.gm_names = gm_names
        self.worker_ids: list[int] = []  # resolved from the names at start, like the next two
        self.gm_ids: list[int] = []
        self.local_of: dict[int, int] = {}  # worker actor id -> LM-local worker index
        self.heartbeat_us = heartbeat_us
        self.recorder = recorder
        n = len(self.specs)
        self.per_partition = n // len(gm_names)
        self.capacity = [tuple(w.capacity) for w in self.specs]
        self.free = [list(w.capacity) for w in self.specs]
        self.change_log = ChangeLog(self.free, len(gm_names))
        self.launches = 0
        self.invalid_internal = 0
        self.invalid_external = 0
        self.repartitions = 0
        self.heartbeats = 0
        self.armed = False
        if len(worker_names) != n:
            raise ValueError(f"LM {lm}: {len(worker_names)} worker names for {n} workers")

    def on_start(self) -> None:
        addr = self.fabric.addr
        self.worker_ids = [addr(name) for name in self.worker_names]
        self.gm_ids = [addr(name) for name in self.gm_names]
        self.local_of = {actor: w for w, actor in enumerate(self.worker_ids)}

    def _arm(self) -> None:
        period = self.heartbeat_us
        self.set_timer((self.now // period + 1) * period - self.now, HeartbeatTick())
        self.armed = True

    def home_gm(self, worker: int) -> int:
        return worker // self.per_partition

    def _changed(self, worker: int, cause: int) -> None:
        """Log a change GM ``cause`` made; an idle LM's heartbeat timer starts again."""
        self.change_log.record(worker, cause)
        if not self.armed:
            self._arm()

    def on_Launch(self, msg: Launch, src: int) -> None:
        w = msg.worker
        free = self.free[w]
        demand = msg.demand
        if all(f >= d for f, d in zip(free, demand)):
            for r, d in enumerate(demand):
                free[r] -= d
            self._changed(w, msg.gm)
            self.launches += 1
            if msg.external:
                self.repartitions += 1
                self.recorder.count("repartitions")
                if self.fabric.event_log is not None:
                    emit(self, REPARTITION, job=msg.job_id, task=msg.index, worker=self.worker_names[w],
                         gm=self.gm_names[msg.gm], home=self.gm_names[self.home_gm(w)])
            self.send(self.worker_ids[w], RunTask(msg.job_id, msg.index, msg.duration_us, demand, msg.gm,
                                                  (self.id,)))
            return
        if msg.external:
            self.invalid_external += 1
            self.recorder.count("invalid_external")
        else:
            self.invalid_internal += 1
            self.recorder.count("invalid_internal")
        if self.fabric.event_log is not None:
            emit(self, LAUNCH_INVALID, job=msg.job_id, task=msg.index, worker=self.worker_names[w],
                 gm=self.gm_names[msg.gm], external=msg.external, demand=demand, free=free)
        workers, frees = self.change_log.since(msg.gm, always=w)
        self.send(self.gm_ids[msg.gm], LaunchFailed(msg.job_id, msg.index, self.lm, workers, frees))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        w = self.local_of[src]
        free = self.free[w]
        cap = self.capacity[w]
        for r, d in enumerate(msg.demand):
            free[r] += d
            if free[r] > cap[r]:
                raise AssertionError(f"{self.name}: worker {w} would have {free} free of capacity {cap}")
        self._changed(w, msg.owner)
        self.send(self.gm_ids[msg.owner], TaskCompleted(msg.job_id, msg.index, self.lm, w, tuple(free)))

    def on_HeartbeatTick(self, msg, src) -> None:
        """Send every GM with something new its delta."""
        self.armed = False
        for gm, workers, frees in self.change_log.deltas():
            self.send(self.gm_ids[gm], Heartbeat(self.lm, workers, frees))
        self.heartbeats += 1

    def statistics(self) -> LocalManagerStatistics:
        return LocalManagerStatistics(self.name, self.lm, sum(f[0] for f in self.free), self.launches,
                                      self.invalid_internal, self.invalid_external, self.repartitions,
                                      self.heartbeats, len(self.change_log))
