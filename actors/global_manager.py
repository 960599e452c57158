"""Megha's Global Manager: an eventually consistent view of every LM, a task queue, and matching.

Choices where the papers leave room (written down here as the issue asks):
- The view holds one PartitionView per (LM, partition), seeded with the configured cluster; it is
  changed optimistically by our own launches, and with absolute values by completions, heartbeats
  and failure replies. A stale heartbeat can therefore undo an optimistic launch and cause an
  invalid request, as in the real system.
- Matching (Algorithm 1 of the 2023 paper) tries the GM's internal partitions round robin over LMs,
  then the external partitions (round robin across LMs, partitions in GM order after our own);
  a match in an external partition is sent as a repartition request.
- A task that matches nowhere stays queued (a "reschedule") and is retried when the view changes,
  never by polling. Queued tasks are grouped by (constraints, demand) signature and tried oldest
  first; a signature that fails once is not retried until the next change, so one pass costs
  O(signatures), not O(queued tasks). A task whose launch fails goes to the back of the queue.
- A partition that had no suitable worker for a signature is not searched again for it until that
  partition's state has changed upward (``gains`` counters bumped by every update that may free
  resources); allocations only take resources away, so the memo is exact, not a heuristic.
- A job with a task no machine in the whole cluster can ever run is rejected at submission.
- Job completion is recorded when the GM receives the last task's completion.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush, heapreplace

import attrs

from fedemu.fabric.actor import Actor

from .front_end import JobFrontEnd, Pending
from .megha_messages import Heartbeat, Launch, LaunchFailed, TaskCompleted


@attrs.frozen
class GlobalManagerStatistics:
    name: str
    gm: int
    queued: int
    signatures: int
    free_in_view: int
    launches: int
    internal: int
    external: int
    failures: int
    passes: int
    jobs_open: int


class GlobalManager(JobFrontEnd, Actor):
    def __init__(self, gm: int, lm_names: list[str], views, *, policy, feasible, recorder) -> None:
        """``views[lm][p]``: PartitionView of partition p (GM p's) in LM lm's cluster."""
        super().__init__()
        self.gm = gm
        self.lm_names = lm_names
        self.lm_ids: list[int] = []  # the LMs' actor ids, resolved from their names at start
        self.views = views
        self.policy = policy
        self.feasible = feasible
        self.recorder = recorder
        self.num_lms = len(lm_names)
        self.num_gms = len(views[0])
        self.per_partition = views[0][0].n
        self.rr_internal = 0
        self.rr_external = 0
        self.external_order = [(gm + j) % self.num_gms for j in range(1, self.num_gms)]  # other GMs' partitions, in order
        self.queues: dict[tuple, deque] = {}
        self.heads: list = []  # (seq, signature) of every non-empty signature queue
        self.seq = 0
        self.queued = 0
        self.inflight: dict[tuple[int, int], Pending] = {}
        self.total_free = 0
        self.gains = [[0] * self.num_gms for _ in range(self.num_lms)]
        self.gain_total = 0
        self.row_gains = [0] * self.num_lms
        self.empty_memo: dict[tuple, list] = {}
        self.total_free = sum(view.free_count for row in views for view in row)
        self.launches = self.internal = self.external = self.failures = self.passes = 0
        self.choice_rng = None

    def on_start(self) -> None:
        self.lm_ids = [self.fabric.addr(name) for name in self.lm_names]
        self.choice_rng = self.rng.child("choice")

    # ---- the view --------------------------------------------------------------------
    def _set_free(self, lm: int, worker: int, free: tuple) -> None:
        self._apply(lm, (worker,), (free,))

    def _apply(self, lm: int, workers: tuple, frees: tuple) -> None:
        """Learn absolute free vectors of LM ``lm``'s workers; bump the search memo's counters."""
        per = self.per_partition
        views, gains = self.views[lm], self.gains[lm]
        changed = free_delta = 0
        for w, free in zip(workers, frees):
            p, local = divmod(w, per)
            delta = views[p].update(local, free)
            if delta is None:
                continue  # nothing new: no search memo needs invalidating either
            gains[p] += 1
            changed += 1
            free_delta += delta
        if changed:
            self.total_free += free_delta
            self.row_gains[lm] += changed
            self.gain_total += changed

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
        self.task_done(msg.job_id)
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
        self._enqueue(task)
        self._schedule()

    # ---- queue and matching ------------------------------------------------------------
    def _enqueue(self, task: Pending) -> None:
        sig = (task.constraints, task.demand)
        self.seq += 1
        q = self.queues.get(sig)
        if q is None:
            q = self.queues[sig] = deque()
            heappush(self.heads, (self.seq, sig))
        q.append((self.seq, task))
        self.queued += 1

    def _schedule(self) -> None:
        """One pass: place queued tasks oldest first until nothing more fits the view."""
        heads = self.heads
        if not heads or self.total_free <= 0:
            return
        self.passes += 1
        blocked = []
        while heads and self.total_free > 0:
            seq, sig = heads[0]
            where = self._match(*sig)
            if where is None:
                blocked.append(heappop(heads))
                self.recorder.count("reschedules")
                continue
            q = self.queues[sig]
            _, task = q.popleft()
            self.queued -= 1
            if q:
                heapreplace(heads, (q[0][0], sig))
            else:
                heappop(heads)
                del self.queues[sig]
            self._launch(task, *where)
        for item in blocked:
            heappush(heads, item)

    def _match(self, constraints: tuple, demand: tuple):
        """(lm, partition, local) of a suitable worker: internal partitions first, then external."""
        key = (constraints, demand)
        memo = self.empty_memo.get(key)
        n_lm, n_gm = self.num_lms, self.num_gms
        if memo is None:
            memo = self.empty_memo[key] = [-1, [-1] * n_lm, [[-1] * n_gm for _ in range(n_lm)]]
        elif memo[0] == self.gain_total:
            return None  # nothing was freed anywhere since every partition was found empty
        _, known_rows, known = memo
        gains, row_gains, views = self.gains, self.row_gains, self.views
        g = self.gm
        start = self.rr_internal
        for k in range(n_lm):
            lm = (start + k) % n_lm
            if known_rows[lm] == row_gains[lm] or known[lm][g] == gains[lm][g]:
                continue
            view = views[lm][g]
            if view.free_count:
                cand = view.suitable(constraints, demand)
                if len(cand):
                    self.rr_internal = (lm + 1) % n_lm
                    return lm, g, self.policy.choose(view, cand, self.choice_rng)
            known[lm][g] = gains[lm][g]
        start = self.rr_external
        for k in range(n_lm):
            lm = (start + k) % n_lm
            if known_rows[lm] == row_gains[lm]:
                continue
            row, known_row, gains_row = views[lm], known[lm], gains[lm]
            for p in self.external_order:
                if known_row[p] != gains_row[p]:
                    view = row[p]
                    if view.free_count:
                        cand = view.suitable(constraints, demand)
                        if len(cand):
                            self.rr_external = (lm + 1) % n_lm
                            return lm, p, self.policy.choose(view, cand, self.choice_rng)
                    known_row[p] = gains_row[p]
            known_rows[lm] = row_gains[lm]  # every partition of this LM is known empty for the signature
        memo[0] = self.gain_total
        return None

    def _launch(self, task: Pending, lm: int, p: int, local: int) -> None:
        view = self.views[lm][p]
        before = view.is_available(local)
        view.allocate(local, task.demand)
        worker = p * self.per_partition + local
        if before and not view.is_available(local):
            self.total_free -= 1
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
        return GlobalManagerStatistics(self.name, self.gm, self.queued, len(self.queues), self.total_free,
                                       self.launches, self.internal, self.external, self.failures, self.passes,
                                       len(self.open_jobs))
