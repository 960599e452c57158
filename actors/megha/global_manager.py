"""Megha's Global Manager: an eventually consistent view of every LM, a task queue, and matching.

Choices where the papers leave room (written down here):
- The view holds one PartitionView per (LM, partition), seeded with the configured cluster; it is
  changed optimistically by our own launches, and with absolute values by completions, heartbeats
  and failure replies. A stale heartbeat can therefore undo an optimistic launch and cause an
  invalid request, as in the real system.
- Matching (Algorithm 1 of the Megha 2023 paper) and its search order and
  empty-search memo live in ``policies.partition_search``: internal partitions first, then external
  ones; a match in an external partition is sent as a repartition request.
- A task that matches nowhere stays queued (a "reschedule") and is retried when the view changes,
  never by polling. Queued tasks are grouped by (constraints, demand) signature (a one-class
  ``FairQueue``) and tried oldest signature first; a signature that fails is parked for the rest of
  the pass, so one pass costs O(signatures), not O(queued tasks). A task whose launch fails goes to
  the back of the queue.
- Queue knobs (Megha ``PARAMS``): ``gm_queue=fewest-remaining`` serves the task whose job had the
  fewest tasks not yet done when it was queued first (FIFO among ties) instead of oldest first;
  ``failed_launch=front`` puts a task whose launch the LM refused at the front of the queue.
- A partition that had no suitable worker for a signature is not searched again for it until an
  update changes that partition (``PartitionSearch``'s memo); allocations only take resources
  away, so the memo is exact, not a heuristic.
- A job with a task no machine in the whole cluster can ever run is rejected at submission.
- Job completion is recorded by the submitter, not here: the submitter outlives GMs and is each job's
  owner of record, so when a job is resubmitted after a GM failure and two GMs (or two incarnations)
  both end up closing it, only the first ``JobDone`` counts. The GM reports the time it closed the job,
  so response times are what the GM saw.

Faults (2022 paper, IV, high availability; our timers where it gives none):
- Stateless GM: a restarted GM (incarnation > 0) knows nothing. Its view of every LM starts empty (it
  launches nowhere) until that LM's ``Snapshot`` arrives (asked again every ``request_timeout_s``);
  the last one ends the rebuild (``gm_rebuilds``, and its duration in ``recovery_s``).
- A job the submitter hands again (``Resubmit``: it was never reported complete) is first adopted:
  every LM says which of its tasks run or ran there (and makes this GM their owner); the others are
  queued. An LM that does not answer after a few asks is left out (a task running there may run twice).
- The answer to a launch is the task's completion (or a failure reply): no acknowledgement per launch.
  A launch with no answer by its expected end plus ``launch_timeout_s`` (looked for whenever the GM
  hears from an LM or is pinged by the submitter: no timer) is asked again on the same LM and worker (``launches_retried``; the LM's idempotence makes it safe: a running task is answered
  ``LaunchAccepted`` with its expected end, a done one with its completion). After three unanswered
  asks the task is queued again and that LM's view emptied until it is heard from.
- Messages travel on connections (docs/connections.md): a heartbeat is lost only with its connection.
  A connection with an LM that breaks (the fabric's ``ConnectionBroken`` notice) makes the GM ask that
  LM for a snapshot (``view_resyncs``).
- Active-standby LMs (``lm_standby``, see ``standby``): every request goes to both replicas; the GM
  follows the replica of the latest epoch a heartbeat or snapshot came from, and answers one from an
  older epoch with ``Fenced``.
"""

from __future__ import annotations

import heapq
import math

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, FairQueue
from fedemu.policies.partition_search import PartitionSearch

from ..common.events import JOB_UNSCHEDULABLE
from ..common.front_end import JobFrontEnd, Pending
from ..common.submitter import JobDone, Ping, Pong
from .events import LAUNCH_REQUEUED
from .gang import GangTimer, GangVote, GmGang
from .gm_fairness import FairConfig, GmFairness
from .messages import (RETRIES, AdoptJob, Fenced, GmTimer, Heartbeat, JobTasks, Launch,
                             LaunchAccepted, LaunchFailed, LaunchOk, Snapshot, SnapshotRequest, TaskCompleted,
                             TaskLost, backoff)

LAUNCH_ASKS = 3  # unanswered asks of one launch before it is queued again
REQUEST_TRIES = RETRIES  # asks of a snapshot or of a job's tasks (backing off) before the GM goes on without


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


class Inflight:
    """A launch sent and not yet answered by a completion: where to, by when, asked how often."""

    __slots__ = ("task", "lm", "worker", "deadline_us", "asks", "seq", "attempt")

    def __init__(self, task, lm, worker):
        self.task = task
        self.lm = lm
        self.worker = worker
        self.attempt = 0  # this GM's number for the launch (0: none sent yet, an adopted task)
        self.deadline_us = 0
        self.asks = 1
        self.seq = 0


class GlobalManager(JobFrontEnd, Actor):
    """The GM of Megha's papers (above): a queue, a view, matching and launches. What a run adds hangs
    off it as components, each None when off: ``users`` (user queues and Algorithm 2, ``gm_fairness``)
    and ``gang`` (gangs placed whole, ``gang``)."""

    COST_ROLE, COST_UNITS = "gm", ("worker", "change")  # a single server (fabric.service): what it charges

    def __init__(self, gm: int, lm_names: list[str], views, *, policy, feasible, recorder,
                 launch_timeout_us: int = 2_000_000, request_timeout_us: int = 1_000_000, gm_queue: str = "fifo",
                 failed_launch: str = "back", standby_names: list[str] | None = None,
                 fair: FairConfig | None = None, machines=None, view_refresh: str = "delta") -> None:
        """``views[lm][p]``: PartitionView of partition p (GM p's) in LM lm's cluster; ``standby_names``:
        each LM's standby replica (active-standby LMs); ``fair``: the run's users (``gm_fairness``);
        ``machines``: every worker's WorkerSpec, given when jobs are gangs (``gang``)."""
        super().__init__()
        self.gm = gm
        self.lm_names = lm_names
        self.standby_names = standby_names
        self.lm_ids: list[int] = []  # the LMs' actor ids (the active replicas), resolved from their names at start
        self.lm_of: dict[int, int] = {}
        self.replicas: list[tuple] = []  # with standbys: each LM's two replicas
        self.feasible = feasible
        self.recorder = recorder
        self.launch_timeout_us = launch_timeout_us
        self.request_timeout_us = request_timeout_us
        self.search = PartitionSearch(views, gm, policy)
        # one class: tasks keyed by signature, oldest signature first (or fewest remaining: ``_enqueue``)
        self.queue = FairQueue(math.inf, ranked=gm_queue == "fewest-remaining")
        self.failed_front = failed_launch == "front"
        self.full_refresh = view_refresh == "full"
        self.inflight: dict[tuple[int, int], Inflight] = {}
        self.due: dict[int, list] = {}  # check time -> [(seq, key)] of launches due by then
        self.due_at: list[int] = []  # the check times of ``due``, a heap
        self.seq = 0
        self.attempts = 0  # launches numbered so far
        self.source: dict[int, int] = {}  # job -> the actor that handed it (told when it is done)
        self.adopting: dict[int, list] = {}  # job -> [job, LMs yet to answer, running, done, asks]
        self.rebuilding: set[int] = set()  # LMs whose snapshot a restarted GM still waits for
        self.resyncing: set[int] = set()  # LMs asked for a snapshot after a lost heartbeat
        self.lm_inc = [0] * len(lm_names)  # each LM's epoch, and the log position its last update was cut at
        self.lm_upto = [0] * len(lm_names)
        self.resync_asks = [0] * len(lm_names)
        self.asked_at = [-1] * len(lm_names)  # per LM asked for its state: the launches numbered by then
        self.snapshot_asks = 0
        self.started_us = 0
        self.heard_us = [0] * len(lm_names)  # when each LM's state was last learnt (the view's age)
        self.launches = self.internal = self.external = self.failures = self.passes = 0
        self.users = GmFairness(self, fair, gm_queue == "fewest-remaining") if fair is not None else None
        if self.users is not None:  # one queue per user, and launches in flight counted per user
            self.queue, self.inflight = self.users.queue, self.users.flights
        self.gang = GmGang(self, machines) if machines is not None else None

    def new_flight(self, task, lm: int, worker: int) -> Inflight:
        return Inflight(task, lm, worker)

    def on_start(self) -> None:
        self.lm_ids = [self.fabric.addr(name) for name in self.lm_names]
        self.lm_of = {actor: lm for lm, actor in enumerate(self.lm_ids)}  # each LM replica's actor -> its LM
        self.attempts = self.incarnation << 32  # launch numbers never repeat across incarnations
        if self.standby_names is not None:
            self.replicas = [(a, self.fabric.addr(b)) for a, b in zip(self.lm_ids, self.standby_names)]
            self.lm_of.update({b: lm for lm, (_, b) in enumerate(self.replicas)})
        self.search.rng = self.rng.child("choice")
        if self.incarnation > 0:  # stateless: rebuild the whole view from the LMs
            self.started_us = self.now
            for lm in range(len(self.lm_names)):
                self._forget(lm)
            self._ask_snapshots()
            if "submitter" in self.fabric.names:  # the jobs' owner of record: ask for my jobs back now
                self.send(self.fabric.addr("submitter"), Pong(self.gm, None))

    # ---- the view --------------------------------------------------------------------
    def _set_free(self, lm: int, worker: int, free: tuple) -> None:
        self.heard_us[lm] = self.now
        self.charge("change")
        self.search.learn(lm, (worker,), (free,))
        if self.gang is not None:
            self.gang.learnt(lm, (worker,))

    def apply(self, lm: int, workers: tuple, frees: tuple, holders: tuple = ()) -> None:
        """Learn absolute free vectors of LM ``lm``'s workers (the search's memo notes the change), and
        with users who holds each of them."""
        self.heard_us[lm] = self.now
        self.charge("change", len(workers))
        self.search.learn(lm, workers, frees)
        if holders and self.users is not None:
            self.users.learn_holders(lm, workers, holders)
        if self.gang is not None:
            self.gang.learnt(lm, workers)

    def _forget(self, lm: int) -> None:
        """Treat LM ``lm``'s view as empty (launch nothing there) until its snapshot arrives."""
        search = self.search
        n = search.num_partitions * search.per_partition
        zero = (0,) * search.views[lm][0].num_resources
        search.learn(lm, tuple(range(n)), (zero,) * n)
        self.rebuilding.add(lm)
        if self.users is not None:
            self.users.forget_holders(lm)

    def _ask_snapshots(self) -> None:
        for lm in sorted(self.rebuilding):
            self.ask_state(lm)
        self.snapshot_asks += 1
        self.set_timer(backoff(self.request_timeout_us, self.snapshot_asks), GmTimer("snapshots"))

    # ---- jobs ------------------------------------------------------------------------
    def _admit(self, job, src: int) -> bool:
        """Open the job unless it is open already (a duplicate) or can never run (reported at once)."""
        if job.job_id in self.open_jobs or job.job_id in self.adopting:
            return False
        if self.gang is not None and not self.gang.admits(job, src):
            return False
        bad = self.infeasible(job)
        if bad:
            if self.fabric.event_log is not None:
                emit(self, JOB_UNSCHEDULABLE, job=job.job_id, tasks=bad)
            self.send(src, JobDone(job.job_id, self.now, bad))
            return False
        self.source[job.job_id] = src
        self.open_job(job.job_id, job.num_tasks)
        if self.users is not None:
            self.users.job_user[job.job_id] = job.user
        return True

    def on_Job(self, job, src: int) -> None:
        if not self._admit(job, src):
            return
        if job.gang and self.gang is not None:
            self.gang.arrived(job)
        else:
            now = self.arrived  # the tasks wait from the job's arrival (in the mailbox while the GM is busy)
            for i, d in enumerate(job.durations_us):
                self._enqueue(Pending(job.job_id, i, d, job.constraints[i], job.demand, now))
        self.schedule()

    def on_Resubmit(self, msg, src: int) -> None:
        """A job handed again (its GM failed, or a message was lost): ask the LMs what of it ran."""
        job = msg.job
        if not self._admit(job, src):
            return
        self.recorder.count("jobs_adopted")
        self.adopting[job.job_id] = [job, set(range(len(self.lm_ids))), {}, set(), 0]
        self._ask_adoption(job.job_id)

    def _ask_adoption(self, job_id: int) -> None:
        entry = self.adopting[job_id]
        entry[4] += 1
        for lm in sorted(entry[1]):
            self.to_lm(lm, AdoptJob(job_id, self.gm))
        self.set_timer(backoff(self.request_timeout_us, entry[4]), GmTimer(f"adopt {job_id}"))

    def on_JobTasks(self, msg: JobTasks, src: int) -> None:
        entry = self.adopting.get(msg.job_id)
        if entry is None or msg.lm not in entry[1]:
            return
        entry[1].discard(msg.lm)
        for index, worker, end_us in msg.running:
            entry[2][index] = (msg.lm, worker, end_us)
        entry[3].update(msg.done)
        if not entry[1]:
            self._adopted(msg.job_id)

    def _adopted(self, job_id: int) -> None:
        if self.gang is not None and self.gang.adopted(job_id):
            return  # a gang again
        job, _, running, done, _ = self.adopting.pop(job_id)
        now = self.now
        for i, d in enumerate(job.durations_us):
            task = Pending(job_id, i, d, job.constraints[i], job.demand, now)
            if i in done:
                continue
            if i in running:
                lm, worker, end_us = running[i]
                self.await_end(self.new_flight(task, lm, worker), end_us)
            else:
                self._enqueue(task)
        for i in sorted(done):
            if job_id in self.open_jobs:
                self.task_done(job_id, i)
        self.schedule()

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        if self.gang is not None:
            self.gang.closed(job_id)
        self.send(self.source.pop(job_id), JobDone(job_id, self.now, ()))

    def on_Ping(self, msg: Ping, src: int) -> None:
        """The submitter asks about the jobs it handed here: answer those this GM does not hold."""
        unknown = tuple(j for j in msg.jobs if j not in self.open_jobs and j not in self.adopting)
        self.send(src, Pong(self.gm, unknown))
        if self.rebuilding and self.snapshot_asks > REQUEST_TRIES:
            self._ask_snapshots()  # its asks ran out before an LM answered (a long outage): ask once more per ping
        self._check_due()

    # ---- messages from LMs -------------------------------------------------------------
    def on_TaskCompleted(self, msg: TaskCompleted, src: int) -> None:
        if self.followed(msg.lm, src):
            self._set_free(msg.lm, msg.worker, msg.free)
        self.inflight.pop((msg.job_id, msg.index), None)
        self._released(msg.lm, msg.worker, msg.job_id, msg.index)
        self.task_done(msg.job_id, msg.index)
        if self.full_refresh:
            self._refresh_all()
        self._check_due()
        self.schedule()

    def _refresh_all(self) -> None:
        """``view_refresh=full``: ask every LM not already asked for its whole state."""
        self.recorder.count("view_refreshes")
        for lm in range(len(self.lm_ids)):
            if lm not in self.resyncing and lm not in self.rebuilding:
                self.resyncing.add(lm)
                self.resync_asks[lm] = 0
                self._ask_resync(lm)

    def on_Heartbeat(self, msg: Heartbeat, src: int) -> None:
        """A delta: the changes since the LM's last status update to this GM (not its own)."""
        lm = msg.lm
        if msg.incarnation != self.lm_inc[lm]:
            switch = self.replicas and src != self.lm_ids[lm]
            if not self._follow(lm, msg.incarnation, src):
                return  # from an LM incarnation that has since restarted, or an old active
            self.lm_inc[lm] = msg.incarnation
            if switch:  # answers from it were not learnt while this GM followed the other replica
                self._resync(lm)
        self.lm_upto[lm] = msg.upto
        self.apply(lm, msg.workers, msg.frees, msg.holders)
        if self.users is not None:
            self.users.heard_heartbeat()
        self._check_due()
        self.schedule()

    def on_ConnectionBroken(self, msg, src: int) -> None:
        """A connection with an LM broke (docs/connections.md): what it carried may be lost, so ask that
        LM for its whole state: at once after a long cut, a retry period later when the LM is down (a
        crash, or a refused message: it sends every GM its state when it is back)."""
        peer = msg.dst if msg.src == self.id else msg.src
        lm = self.lm_of.get(peer)
        if lm is not None and (not self.replicas or peer == self.lm_ids[lm]):  # (not the replica this GM
            self._resync(lm, now=msg.cause == "timeout")  # does not follow: it acts on nothing it was sent)

    def _resync(self, lm: int, now: bool = True) -> None:
        """Ask LM ``lm`` for its whole state (now, or after the first retry period), unless already asking."""
        if lm in self.resyncing or (lm in self.rebuilding and self.snapshot_asks <= REQUEST_TRIES):
            return  # already asking (a restarted GM asks until its asks run out)
        self.resyncing.add(lm)
        self.resync_asks[lm] = 0
        self.recorder.count("view_resyncs")
        if now:
            self._ask_resync(lm)
        else:
            self.set_timer(self.request_timeout_us, GmTimer(f"resync {lm}"))

    def _ask_resync(self, lm: int) -> None:
        self.resync_asks[lm] += 1
        self.ask_state(lm)
        self.set_timer(backoff(self.request_timeout_us, self.resync_asks[lm]), GmTimer(f"resync {lm}"))

    def ask_state(self, lm: int) -> None:
        """Ask LM ``lm`` for a snapshot, noting which launches it will already have seen."""
        self.asked_at[lm] = self.attempts
        self.to_lm(lm, SnapshotRequest(self.gm))

    def _retake(self, lm: int) -> None:
        """A snapshot asked for reflects the launches sent before the ask (the connection is FIFO), not
        those sent since, which its values just undid in the view: take their demand again."""
        after, self.asked_at[lm] = self.asked_at[lm], -1
        if after >= 0:
            for flight in self.inflight.values():
                if flight.lm == lm and flight.attempt > after:
                    self.search.take_back(lm, flight.worker, flight.task.demand)

    def on_Snapshot(self, msg: Snapshot, src: int) -> None:
        """An LM's whole state: asked for, or sent unasked by an LM that rebuilt its state (a restart, or a
        standby that took over: a later epoch, which this GM follows from now on)."""
        lm = msg.lm
        if not self._follow(lm, msg.incarnation, src):
            return
        self.rebuilding.discard(lm)
        self.resyncing.discard(lm)
        self.lm_inc[lm], self.lm_upto[lm] = msg.incarnation, msg.upto
        self.apply(lm, msg.workers, msg.frees, msg.holders)
        self._retake(lm)
        if not self.rebuilding and self.incarnation > 0 and self.started_us >= 0:
            self.recorder.count("gm_rebuilds")
            self.recorder.recovered(self.now - self.started_us)
            self.started_us = -1
        self.schedule()

    def on_LaunchFailed(self, msg: LaunchFailed, src: int) -> None:
        self.failures += 1
        if self.followed(msg.lm, src):
            self.apply(msg.lm, msg.workers, msg.frees, msg.holders)
        key = (msg.job_id, msg.index)
        flight = self.inflight.get(key)
        if flight is not None and flight.attempt == msg.attempt:  # (not a late answer to an earlier launch)
            del self.inflight[key]
            self._released(flight.lm, flight.worker, msg.job_id, msg.index)
            if self.fabric.event_log is not None:
                emit(self, LAUNCH_REQUEUED, job=msg.job_id, task=msg.index, lm=self.lm_names[msg.lm],
                     learned=len(msg.workers))
            self.requeue(flight.task, front=self.failed_front)
        if self.full_refresh:
            self._refresh_all()
        self.schedule()

    def on_LaunchOk(self, msg: LaunchOk, src: int) -> None:
        """A valid launch's reply: the changes this GM has not seen (not its own)."""
        if msg.workers and self.followed(msg.lm, src):
            self.apply(msg.lm, msg.workers, msg.frees, msg.holders)
            self.schedule()

    def on_LaunchAccepted(self, msg: LaunchAccepted, src: int) -> None:
        """A retried launch of a task already running there: wait for its end. (An answer about another
        launch of the task, an earlier one elsewhere, moves nothing but the view.)"""
        if not self.followed(msg.lm, src):
            return
        self._set_free(msg.lm, msg.worker, msg.free)
        flight = self.inflight.get((msg.job_id, msg.index))
        if flight is not None and flight.lm == msg.lm and flight.worker == msg.worker:
            flight.asks = 1
            self.await_end(flight, msg.end_us)
        self.schedule()

    def on_TaskLost(self, msg: TaskLost, src: int) -> None:
        """The task's worker stayed down: schedule it again."""
        flight = self.inflight.pop((msg.job_id, msg.index), None)
        if flight is not None:
            self._released(flight.lm, flight.worker, msg.job_id, msg.index)
        if flight is not None and msg.job_id in self.open_jobs:
            self.requeue(flight.task)
            self.schedule()

    def requeue(self, task: Pending, front: bool = False) -> None:
        task.since_us = self.arrived
        if front:
            self.queue.push_front(HIGH, task, (task.constraints, task.demand))
        else:
            self._enqueue(task)

    # ---- launches that get no answer -----------------------------------------------------
    def await_end(self, flight: Inflight, end_us: int) -> None:
        """Expect the task's completion by ``end_us`` plus the launch timeout. No timer: overdue launches
        are looked for when the GM hears from an LM or from the submitter (``_check_due``), which costs
        nothing in a busy GM and is at most a ping period late in an idle one."""
        key = (flight.task.job_id, flight.task.index)
        self.inflight[key] = flight
        self.seq += 1
        flight.seq = self.seq
        step = self.launch_timeout_us
        flight.deadline_us = end_us + step
        at = (flight.deadline_us // step + 1) * step
        bucket = self.due.get(at)
        if bucket is None:
            bucket = self.due[at] = []
            heapq.heappush(self.due_at, at)
        bucket.append((self.seq, key))

    def _check_due(self) -> None:
        if self.due_at and self.due_at[0] <= self.now:
            self._check_launches()

    def on_GmTimer(self, msg: GmTimer, src: int) -> None:
        what = msg.what
        if what == "snapshots":
            if self.rebuilding and self.snapshot_asks <= REQUEST_TRIES:
                self._ask_snapshots()
        elif what.startswith("resync"):
            lm = int(what.split()[1])
            if lm in self.resyncing:
                if self.resync_asks[lm] < REQUEST_TRIES:
                    self._ask_resync(lm)
                else:  # the LM does not answer: the next heartbeat from it asks again
                    self.resyncing.discard(lm)
        else:  # "adopt <job>"
            job_id = int(what.split()[1])
            entry = self.adopting.get(job_id)
            if entry is not None:
                if entry[4] < REQUEST_TRIES:
                    self._ask_adoption(job_id)
                else:
                    self._adopted(job_id)

    def _check_launches(self) -> None:
        now, due, due_at, inflight = self.now, self.due, self.due_at, self.inflight
        expired = []
        while due_at and due_at[0] <= now:
            for seq, key in due.pop(heapq.heappop(due_at)):
                flight = inflight.get(key)
                if flight is not None and flight.seq == seq:
                    expired.append(flight)
        for flight in expired:
            task = flight.task
            if flight.asks < LAUNCH_ASKS:  # ask again: the same LM and worker
                flight.asks += 1
                self.recorder.count("launches_retried")
                self._send_launch(flight)
                self.await_end(flight, now + task.duration_us)
            else:  # that LM does not answer: queue the task again, launch nothing there until heard from
                del inflight[(task.job_id, task.index)]
                self.recorder.count("launches_abandoned")
                self._released(flight.lm, flight.worker, task.job_id, task.index)
                if flight.lm not in self.rebuilding:
                    self._forget(flight.lm)
                    self.snapshot_asks = 0
                    self._ask_snapshots()
                self.requeue(task)
        if expired:
            self.schedule()

    # ---- queue and matching ------------------------------------------------------------
    def _enqueue(self, task: Pending) -> None:
        left = self.open_jobs.get(task.job_id)  # ranked by its job's tasks not yet done (gm_queue)
        self.queue.push(HIGH, task, (task.constraints, task.demand), left[0] if left else 0)

    def schedule(self) -> None:
        """One pass over the queue (the users' queues, with users), then over the waiting gangs."""
        if self.users is not None:
            self.users.schedule()
        else:
            self._pass()
        if self.gang is not None and self.gang.waiting:
            if self.users is None:
                self.gang.place()
            else:  # with users, gangs take turns by user too (fairness=off: gangs are never preempted)
                self.users.gangs_placed(self.gang.place(self.users.interleave(self.gang.waiting)))

    def _pass(self) -> None:
        """Place queued tasks oldest first until nothing more fits the view. A signature that matches
        nowhere is parked for the rest of the pass (a "reschedule")."""
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
            self.launch(got[0], *got[1])
        self.charge("worker", search.take_scanned())
        if queue.rejected != rejected:  # something was parked: due again in the next pass
            queue.reopen()
            self.recorder.count("reschedules", queue.rejected - rejected)

    def launch(self, task: Pending, lm: int, p: int, local: int) -> None:
        entry = self.open_jobs.get(task.job_id)
        if entry is None or entry[1][task.index]:
            return  # done meanwhile: a copy queued again when its launch was given up
        worker = self.search.allocate(lm, p, local, task.demand)
        if p != self.gm:
            self.external += 1
        else:
            self.internal += 1
        self.launches += 1
        self.recorder.task_dispatched(task.job_id, task.index, task.since_us, self.now)
        flight = self.new_flight(task, lm, worker)
        self._send_launch(flight)
        self.await_end(flight, self.now + task.duration_us)
        if self.users is not None:
            self.users.hold_own(flight)

    def _released(self, lm: int, worker: int, job_id: int, index: int) -> None:
        """A launch of this GM no longer holds LM ``lm``'s worker (its end, a failure, a loss): the users'
        holders view lets it go."""
        if self.users is not None:
            self.users.release_own(lm, worker, job_id, index)

    def _send_launch(self, flight: Inflight) -> None:
        """Ask the flight's LM to launch its task; a failure reply names the attempt, so a late one (a
        duplicate, or the answer to an earlier launch of the task) cannot cancel a later launch."""
        if self.gang is not None and self.gang.resend(flight):
            return
        if not flight.attempt:
            self.attempts += 1
            flight.attempt = self.attempts
        task, worker = flight.task, flight.worker
        external = worker // self.search.per_partition != self.gm
        user = self.users.user_of(task) if self.users is not None else -1
        self.to_lm(flight.lm, Launch(task.job_id, task.index, task.duration_us, task.demand, worker, self.gm,
                                     external, flight.attempt, user))

    def to_lm(self, lm: int, msg) -> None:
        """Send to LM ``lm``: with active-standby LMs, to both replicas (only the active acts on it)."""
        if self.replicas:
            for dst in self.replicas[lm]:
                self.send(dst, msg)
        else:
            self.send(self.lm_ids[lm], msg)

    def _follow(self, lm: int, epoch: int, src: int) -> bool:
        """Whether a heartbeat or snapshot of ``epoch`` from ``src`` is current: one from a later epoch
        makes ``src`` the LM this GM follows; one from an older epoch is refused (and, with standbys,
        answered ``Fenced``: an old active that still believes it is one)."""
        if epoch < self.lm_inc[lm]:
            if self.replicas:
                self.send(src, Fenced(self.lm_inc[lm]))
            return False
        if epoch > self.lm_inc[lm] and self.replicas and src != self.lm_ids[lm]:
            self.lm_ids[lm] = src
            self.recorder.count("gm_lm_switches")
        return True

    def followed(self, lm: int, src: int) -> bool:
        """Whether an answer's free vectors may be learnt: with standby LMs only the followed replica's
        are. An answer from the other is an old active's, or a new active's this GM has not heard the
        epoch of: ask both for a snapshot, whose epoch says which to follow."""
        if not self.replicas or src == self.lm_ids[lm]:
            return True
        self._resync(lm)
        return False

    # ---- the components' messages --------------------------------------------------------
    def on_PreemptFailed(self, msg, src: int) -> None:
        self.users.on_preempt_failed(msg, src)

    def on_Preempted(self, msg, src: int) -> None:
        self.users.on_preempted(msg, src)

    def on_GangVote(self, msg: GangVote, src: int) -> None:
        self.gang.on_vote(msg, src)

    def on_GangTimer(self, msg: GangTimer, src: int) -> None:
        self.gang.on_timer(msg)

    def statistics(self) -> GlobalManagerStatistics:
        now = self.fabric.now if self.fabric is not None else self.now
        return GlobalManagerStatistics(self.name, self.gm, len(self.queue), len(self.inflight),
                                       self.queue.keys(HIGH), self.search.total_free, self.launches,
                                       self.internal, self.external, self.failures, self.passes,
                                       len(self.open_jobs), tuple(now - t for t in self.heard_us))
