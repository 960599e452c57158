"""Megha's Global Manager: an eventually consistent view of every LM, a task queue, and matching.

Choices where the papers leave room (written down here as the issue asks):
- The view holds one PartitionView per (LM, partition), seeded with the configured cluster; it is
  changed optimistically by our own launches, and with absolute values by completions, heartbeats
  and failure replies. A stale heartbeat can therefore undo an optimistic launch and cause an
  invalid request, as in the real system.
- Matching (Algorithm 1 of the Megha 2023 paper, shared/papers file 000) and its search order and
  empty-search memo live in ``policies.partition_search``: internal partitions first, then external
  ones; a match in an external partition is sent as a repartition request.
- A task that matches nowhere stays queued (a "reschedule") and is retried when the view changes,
  never by polling. Queued tasks are grouped by (constraints, demand) signature (a one-class
  ``FairQueue``) and tried oldest signature first; a signature that fails is parked for the rest of
  the pass, so one pass costs O(signatures), not O(queued tasks). A task whose launch fails goes to
  the back of the queue.
- A partition that had no suitable worker for a signature is not searched again for it until an
  update changes that partition (``PartitionSearch``'s memo); allocations only take resources
  away, so the memo is exact, not a heuristic.
- A job with a task no machine in the whole cluster can ever run is rejected at submission.
- Job completion is recorded when the GM receives the last task's completion.
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import LAUNCH_REQUEUED, emit
from fedemu.policies.fair_queue import HIGH, FairQueue
from fedemu.policies.partition_search import PartitionSearch

from .front_end import JobFrontEnd, Pending
from .megha_messages import Heartbeat, Launch, LaunchFailed, TaskCompleted


@attrs.frozen
class GlobalManagerStatistics:
    """``inflight``: launches sent and not yet answered; ``view_age_us``: per LM, virtual time since
    this GM last heard of that LM's state (a heartbeat, a completion or a failure reply)."""

    name: str
    gm: int
    queued: int
    inflight: int
    signatures: int
    free_in_view: int
    launches: int
    internal: int
    external: int
    failures: int
    passes: int
    jobs_open: int
    view_age_us: tuple


class GlobalManager(JobFrontEnd, Actor):
    def __init__(self, gm: int, lm_names: list[str], views, *, policy, feasible, recorder) -> None:
        """``views[lm][p]``: PartitionView of partition p (GM p's) in LM lm's cluster."""
        super().__init__()
        self.gm = gm
        self.lm_names = lm_names
        self.lm_ids: list[int] = []  # the LMs' actor ids, resolved from their names at start
        self.feasible = feasible
        self.recorder = recorder
        self.search = PartitionSearch(views, gm, policy)
        self.queue = FairQueue(math.inf)  # one class: tasks keyed by signature, oldest signature first
        self.inflight: dict[tuple[int, int], Pending] = {}
        self.heard_us = [0] * len(lm_names)  # when each LM's state was last learnt (the view's age)
        self.launches = self.internal = self.external = self.failures = self.passes = 0

    def on_start(self) -> None:
        self.lm_ids = [self.fabric.addr(name) for name in self.lm_names]
        self.search.rng = self.rng.child("choice")

    # ---- the view --------------------------------------------------------------------
    def _set_free(self, lm: int, worker: int, free: tuple) -> None:
        self.heard_us[lm] = self.now
        self.search.learn(lm, (worker,), (free,))

    def _apply(self, lm: int, workers: tuple, frees: tuple) -> None:
        """Learn absolute free vectors of LM ``lm``'s workers (the search's memo notes the change)."""
        self.heard_us[lm] = self.now
        self.search.learn(lm, workers, frees)

    # ---- messages --------------------------------------------------------------------
    def on_Job(self, job, src: int) -> None:
        if not self.admit(job):
            return
        self.open_job(job.job_id, job.num_tasks)
        now = self.now
        for i, d in enumerate(job.durations_us):
            self._enqueue(Pending(job.job_id, i, d, job.constraints[i], job.demand, now))
        self._schedule()

    def on_TaskCompleted(self, msg: TaskCompleted, src: int) -> None:
        self._set_free(msg.lm, msg.worker, msg.free)
        self.inflight.pop((msg.job_id, msg.index), None)
        self.task_done(msg.job_id, msg.index)
        self._schedule()

    def on_Heartbeat(self, msg: Heartbeat, src: int) -> None:
        if msg.workers:
            self._apply(msg.lm, msg.workers, msg.frees)
            self._schedule()

    def on_LaunchFailed(self, msg: LaunchFailed, src: int) -> None:
        self.failures += 1
        self._apply(msg.lm, msg.workers, msg.frees)
        task = self.inflight.pop((msg.job_id, msg.index))
        task.since_us = self.now
        if self.fabric.event_log is not None:
            emit(self, LAUNCH_REQUEUED, job=msg.job_id, task=msg.index, lm=self.lm_names[msg.lm],
                 learned=len(msg.workers))
        self._enqueue(task)
        self._schedule()

    # ---- queue and matching ------------------------------------------------------------
    def _enqueue(self, task: Pending) -> None:
        self.queue.push(HIGH, task, (task.constraints, task.demand))

    def _schedule(self) -> None:
        """One pass: place queued tasks oldest first until nothing more fits the view. A signature
        that matches nowhere is parked for the rest of the pass (a "reschedule")."""
        queue, search = self.queue, self.search
        if not queue.sizes[HIGH] or search.total_free <= 0:
            return
        self.passes += 1
        rejected = queue.rejected
        take, find = queue.take, search.find
        while search.total_free > 0:
            got = take(HIGH, find)
            if got is None:
                break
            self._launch(got[0], *got[1])
        if queue.rejected != rejected:  # something was parked: due again in the next pass
            queue.reopen()
            self.recorder.count("reschedules", queue.rejected - rejected)

    def _launch(self, task: Pending, lm: int, p: int, local: int) -> None:
        worker = self.search.allocate(lm, p, local, task.demand)
        external = p != self.gm
        if external:
            self.external += 1
        else:
            self.internal += 1
        self.launches += 1
        self.recorder.task_dispatched(task.job_id, task.index, self.now - task.since_us)
        self.inflight[(task.job_id, task.index)] = task
        self.send(self.lm_ids[lm], Launch(task.job_id, task.index, task.duration_us, task.demand, worker, self.gm,
                                          external))

    def statistics(self) -> GlobalManagerStatistics:
        now = self.fabric.now if self.fabric is not None else self.now
        return GlobalManagerStatistics(self.name, self.gm, len(self.queue), len(self.inflight),
                                       self.queue.keys(HIGH), self.search.total_free, self.launches,
                                       self.internal, self.external, self.failures, self.passes,
                                       len(self.open_jobs), tuple(now - t for t in self.heard_us))
