"""Hawk's long-job scheduler: the one centralized scheduler, which places each task of a long job on the
worker of the general partition with the least estimated waiting time (Hawk 2015, 3.1;
``policies.least_waiting``).

It is a front end like the distributed schedulers (the submitter hands it the long jobs) and binds its tasks
late the same way: each placed task is a reservation in the chosen node's queue, and the node asks for the
task when it is served. Its view of the waiting times follows its own messages: a placement adds the job's
estimated task time to the node, the request that binds a task marks it running from then, and its end (the
``TaskFinished`` every long task's node sends here) takes it off; a cancelled reservation is taken off too.
Short jobs reach it only when every distributed scheduler is down: it probes for them as they do.

Recovery: its view is soft state (only placement quality depends on it). A break with a node clears that node's
load (its long work is gone or unknown); a restarted long-job scheduler, which lost its view with its memory,
tells the submitter it is up (``Pong``) and asks every node what long work it holds (``LoadAsk``), rebuilding the
view from the answers (``Load``); the ends of long tasks placed meanwhile by a distributed scheduler reach it
too, so the rebuilt view drains. Nothing of this is sent in a fault-free run.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.log import emit
from fedemu.policies.least_waiting import WaitingView

from ..common.protocol import TaskFinished
from ..common.submitter import Pong
from .events import LONG_PLACED
from .messages import GetTask, Load, LoadAsk
from .scheduler import HawkScheduler


@attrs.frozen
class LongSchedulerStatistics:
    name: str
    open_jobs: int
    probes: int
    requests: int
    assigns: int
    cancels: int
    busy_nodes: int  # nodes its view holds long work on (Eagle's bitmap: the bits set)


class LongScheduler(HawkScheduler):
    """``rtt_us``: a round trip, which a node running a long task adds to its waiting time (the simulator's)."""

    def __init__(self, node_names: list[str], view, *, rtt_us: int, **kwargs) -> None:
        super().__init__(node_names, view, **kwargs)
        self.waits = self.waiting_view(len(node_names), rtt_us)
        self.position: dict[int, int] = {}  # node actor id -> its position
        self.estimates: dict[int, int] = {}  # job -> estimated task time, of long jobs with work on the nodes

    def waiting_view(self, size: int, rtt_us: int) -> WaitingView:
        return WaitingView(size, rtt_us)

    def on_start(self) -> None:
        super().on_start()
        self.position = {node: p for p, node in enumerate(self.node_ids)}
        if self.incarnation:  # restarted: its view and jobs went with its memory
            self.recorder.count("long_views_rebuilt")
            self.send(self.fabric.addr("submitter"), Pong(self.index, None))
            ask = LoadAsk()
            for node in self.node_ids:
                self.send(node, ask)

    def place_group(self, state, g: int, key: tuple, tasks: int) -> int:
        if not state.long:
            return super().place_group(state, g, key, tasks)
        pool = self.pool(key, True)
        if self.suspected:
            pool = self.recovery.usable(pool)
            if not pool:
                return 0
        self.estimates[state.job.job_id] = state.estimate_us
        chosen = self.waits.place(tasks, state.estimate_us, pool, self.now)
        if self.fabric.event_log is not None:
            emit(self, LONG_PLACED, job=state.job.job_id, tasks=tasks, workers=len(set(chosen)))
        self.recorder.count("long_tasks_placed", tasks)
        return self.send_probes(state, g, key, chosen)

    def bound_task(self, state, index: int, node: int) -> None:
        super().bound_task(state, index, node)
        if state.long:
            p = self.position.get(node)
            if p is not None:
                self.waits.started(p, (state.job.job_id, index), self.now, state.estimate_us)

    def cancelled(self, msg: GetTask, src: int) -> None:
        super().cancelled(msg, src)
        est = self.estimates.get(msg.job_id)
        p = self.position.get(src)
        if est is not None and p is not None:
            self.waits.remove(p, est)

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        est = self.estimates.get(msg.job_id)
        p = self.position.get(src)
        if est is not None and p is not None:
            self.waits.finished(p, (msg.job_id, msg.index), est)
        if msg.job_id in self.jobs or msg.job_id in self.closed:  # its own job's task
            super().on_TaskFinished(msg, src)
        elif self.suspected:
            self.recovery.heard(src)

    def node_lost(self, node: int) -> None:
        super().node_lost(node)
        p = self.position.get(node)
        if p is not None:
            self.waits.clear(p)

    def on_Load(self, msg: Load, src: int) -> None:
        p = self.position.get(src)
        if p is None:
            return
        for job_id, index, est, start in msg.work:
            self.estimates.setdefault(job_id, est)
            self.waits.add(p, est)
            if start >= 0:
                self.waits.started(p, (job_id, index), start, est)

    def statistics(self) -> LongSchedulerStatistics:
        return LongSchedulerStatistics(self.name, len(self.jobs), self.probes, self.requests, self.assigns,
                                       self.cancels, self.waits.busy_count)
