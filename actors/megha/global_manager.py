"""Megha's Global Manager: an eventually consistent view of every LM, a task queue, and matching.

Choices where the papers leave room (written down here):
- The view holds one PartitionView per (LM, partition), seeded with the configured cluster; it is
  changed optimistically by our own launches, and with absolute values by completions, heartbeats
  and failure replies. A stale heartbeat can therefore undo an optimistic launch and cause an
  invalid request, as in the real system.
- Matching (Algorithm 1 of the Megha 2023 paper) and its search order and
  empty-search memo live in ``partition_search``: internal partitions first, then external
  ones; a match in an external partition is sent as a repartition request.
- A task that matches nowhere stays queued (a "reschedule") and is retried when the view changes,
  never by polling. Queued tasks are grouped by (constraints, demand) signature (a one-class
  ``FairQueue``) and tried oldest signature first; a signature that fails is parked for the rest of
  the pass, so one pass costs O(signatures), not O(queued tasks). A task whose launch fails goes to
  the back of the queue.
- Queue knobs (Megha ``PARAMS``): ``gm_queue=fewest-remaining`` serves the task whose job had the
  fewest tasks not yet done when it was queued first (FIFO among ties) instead of oldest first;
  ``failed_launch=front`` puts a task whose launch the LM refused at the front of the queue.
- ``refused_task=wait-free`` (the 2023 authors' GM, ``gm_waiting``): a refused task, and one that matched
  nowhere, wait in a second queue and are placed only on a worker an LM message later reports free,
  never matched against the view again. ``spill_order=fixed``: the authors' search order
  (``PartitionSearch``).
- A partition that had no suitable worker for a signature is not searched again for it until an
  update changes that partition (``PartitionSearch``'s memo); allocations only take resources
  away, so the memo is exact, not a heuristic.
- A job with a task no machine in the whole cluster can ever run is rejected at submission.
- Job completion is recorded by the submitter, not here: the submitter outlives GMs and is each job's
  owner of record, so when a job is resubmitted after a GM failure and two GMs (or two incarnations)
  both end up closing it, only the first ``JobDone`` counts. The GM reports the time it closed the job,
  so response times are what the GM saw.

Faults: what the GM does when something fails is ``gm_recovery`` (a component, ``recovery``): a
broken connection with an LM, a restart (stateless), a job handed again, a later LM epoch. Messages
travel on connections (docs/connections.md): fault-free, the GM sends and handles only the protocol
above.
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit
from fedemu.policies.fair_queue import HIGH, FairQueue
from fedemu.actors.megha.partition_search import PartitionSearch

from ..common.components import routed
from ..common.events import JOB_UNSCHEDULABLE
from ..common.front_end import JobFrontEnd, Pending
from ..common.submitter import JobDone
from .events import LAUNCH_REQUEUED
from .gang import GmGang
from .gm_fairness import FairConfig, GmFairness
from .gm_recovery import GmRecovery
from .gm_waiting import GmWaiting
from .messages import AdoptJob, Heartbeat, Launch, LaunchFailed, LaunchOk, SnapshotRequest, TaskCompleted


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
    """A launch sent and not yet answered by a completion: where to, and its task's expected end."""

    __slots__ = ("task", "lm", "worker", "end_us", "attempt")

    def __init__(self, task, lm, worker, end_us=0):
        self.task = task
        self.lm = lm
        self.worker = worker
        self.end_us = end_us
        self.attempt = 0  # this GM's number for the launch (0: none sent yet, an adopted task)


class GlobalManager(JobFrontEnd, Actor):
    """The GM of Megha's papers (above): a queue, a view, matching and launches; a core in the one role
    shape (``common.components``). What a run adds hangs off it as components, each None when off:
    ``users`` (user queues and Algorithm 2, ``gm_fairness``), ``gang`` (gangs placed whole, ``gang``) and
    ``waiting`` (``gm_waiting``); ``recovery`` (``gm_recovery``) handles failures."""

    COST_ROLE, COST_UNITS = "gm", ("worker", "change")  # a single server (fabric.service): what it charges
    CORE = frozenset({  # what its components may use (tests/test_role_shape.py)
        "gm", "lm_names", "lm_ids", "lm_of", "replicas", "lm_upto", "search", "queue", "inflight", "attempts",
        "open_jobs", "launch_timeout_us", "request_timeout_us", "recorder", "launches", "internal", "external",
        "passes", "users", "gang", "recovery", "admit", "apply", "set_free", "enqueue", "requeue", "schedule",
        "launch", "new_flight", "track", "send_launch", "released", "task_done", "to_lm"})

    def __init__(self, gm: int, lm_names: list[str], views, *, policy, feasible, recorder,
                 launch_timeout_us: int = 2_000_000, request_timeout_us: int = 1_000_000, gm_queue: str = "fifo",
                 failed_launch: str = "back", standby_names: list[str] | None = None,
                 fair: FairConfig | None = None, machines=None, view_refresh: str = "delta",
                 refused_task: str = "retry", spill_order: str = "rotate") -> None:
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
        self.search = PartitionSearch(views, gm, policy, spill_order)
        # one class: tasks keyed by signature, oldest signature first (or fewest remaining: ``_enqueue``)
        self.queue = FairQueue(math.inf, ranked=gm_queue == "fewest-remaining")
        self.failed_front = failed_launch == "front"
        self.full_refresh = view_refresh == "full"
        self.inflight: dict[tuple[int, int], Inflight] = {}
        self.attempts = 0  # launches numbered so far
        self.source: dict[int, int] = {}  # job -> the actor that handed it (told when it is done)
        self.lm_upto = [0] * len(lm_names)  # per LM, the log position its last update was cut at
        self.heard_us = [0] * len(lm_names)  # when each LM's state was last learnt (the view's age)
        self.launches = self.internal = self.external = self.failures = self.passes = 0
        self.fruitless = None  # (gains, queue stamp) after a pass that ended with every signature refused
        self.users = GmFairness(self, fair, gm_queue == "fewest-remaining") if fair is not None else None
        if self.users is not None:  # one queue per user, and launches in flight counted per user
            self.queue, self.inflight = self.users.queue, self.users.flights
        self.gang = GmGang(self, machines) if machines is not None else None
        self.recovery = GmRecovery(self, len(lm_names))
        self.waiting = GmWaiting(self) if refused_task == "wait-free" else None  # (needs users and gangs off)

    def new_flight(self, task, lm: int, worker: int) -> Inflight:
        return Inflight(task, lm, worker, self.now + task.duration_us)

    def on_start(self) -> None:
        self.lm_ids = [self.fabric.addr(name) for name in self.lm_names]
        self.lm_of = {actor: lm for lm, actor in enumerate(self.lm_ids)}  # each LM replica's actor -> its LM
        self.attempts = self.incarnation << 32  # launch numbers never repeat across incarnations
        if self.standby_names is not None:
            self.replicas = [(a, self.fabric.addr(b)) for a, b in zip(self.lm_ids, self.standby_names)]
            self.lm_of.update({b: lm for lm, (_, b) in enumerate(self.replicas)})
        self.search.rng = self.rng.child("choice")
        if self.incarnation > 0:  # stateless: rebuild the whole view from the LMs
            self.recovery.start()

    # ---- the view --------------------------------------------------------------------
    def set_free(self, lm: int, worker: int, free: tuple) -> None:
        self.heard_us[lm] = self.now
        self.charge("change")
        self.search.learn(lm, (worker,), (free,))
        if self.waiting is not None:
            self.waiting.heard(lm, (worker,))
        if self.gang is not None:
            self.gang.learnt(lm, (worker,))

    def apply(self, lm: int, workers: tuple, frees: tuple, holders: tuple = ()) -> None:
        """Learn absolute free vectors of LM ``lm``'s workers (the search's memo notes the change), and
        with users who holds each of them."""
        self.heard_us[lm] = self.now
        self.charge("change", len(workers))
        self.search.learn(lm, workers, frees)
        if self.waiting is not None:
            self.waiting.heard(lm, workers)
        if holders and self.users is not None:
            self.users.learn_holders(lm, workers, holders)
        if self.gang is not None:
            self.gang.learnt(lm, workers)

    # ---- jobs ------------------------------------------------------------------------
    def admit(self, job, src: int) -> bool:
        """Open the job unless it is open already (handed again) or can never run (reported at once)."""
        if job.job_id in self.open_jobs or job.job_id in self.recovery.adopting:
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
            self.users.opened(job)
        return True

    def on_Job(self, job, src: int) -> None:
        if not self.admit(job, src):
            return
        if job.gang and self.gang is not None:
            self.gang.arrived(job)
        else:
            now = self.arrived  # the tasks wait from the job's arrival (in the mailbox while the GM is busy)
            for i, d in enumerate(job.durations_us):
                self.enqueue(Pending(job.job_id, i, d, job.constraints[i], job.demand, now))
        self.schedule()

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        if self.gang is not None:
            self.gang.closed(job_id)
        self.send(self.source.pop(job_id), JobDone(job_id, self.now, ()))

    # ---- messages from LMs -------------------------------------------------------------
    def on_TaskCompleted(self, msg: TaskCompleted, src: int) -> None:
        if self.recovery.followed(msg.lm, src):
            self.set_free(msg.lm, msg.worker, msg.free)
        self.inflight.pop((msg.job_id, msg.index), None)
        self.released(msg.lm, msg.worker, msg.job_id, msg.index)
        self.task_done(msg.job_id, msg.index)
        if self.full_refresh:
            self._refresh_all()
        self.schedule()

    def _refresh_all(self) -> None:
        """``view_refresh=full``: ask every LM not already asked for its whole state."""
        self.recorder.count("view_refreshes")
        for lm in range(len(self.lm_ids)):
            self.recovery.refresh(lm)

    def on_Heartbeat(self, msg: Heartbeat, src: int) -> None:
        """A delta: the changes since the LM's last status update to this GM (not its own)."""
        lm = msg.lm
        if not self.recovery.heard(lm, msg.incarnation, src):
            return  # from an LM incarnation that has since restarted, or an old active
        self.lm_upto[lm] = msg.upto
        self.apply(lm, msg.workers, msg.frees, msg.holders)
        if self.users is not None:
            self.users.heard_heartbeat()
        self.schedule()

    def on_LaunchFailed(self, msg: LaunchFailed, src: int) -> None:
        self.failures += 1
        if self.recovery.followed(msg.lm, src):
            self.apply(msg.lm, msg.workers, msg.frees, msg.holders)
        key = (msg.job_id, msg.index)
        flight = self.inflight.get(key)
        if flight is not None and flight.attempt == msg.attempt:  # (not a late answer to an earlier launch)
            del self.inflight[key]
            self.released(flight.lm, flight.worker, msg.job_id, msg.index)
            if self.fabric.event_log is not None:
                emit(self, LAUNCH_REQUEUED, job=msg.job_id, task=msg.index, lm=self.lm_names[msg.lm],
                     learned=len(msg.workers))
            if self.waiting is not None and not msg.down:
                self.waiting.hold(flight.task, front=True)  # (a down worker promises no report: retried)
            else:
                self.requeue(flight.task, front=self.failed_front)
        if self.full_refresh:
            self._refresh_all()
        self.schedule()

    def on_LaunchOk(self, msg: LaunchOk, src: int) -> None:
        """A valid launch's reply: the changes this GM has not seen (not its own)."""
        if msg.workers and self.recovery.followed(msg.lm, src):
            self.apply(msg.lm, msg.workers, msg.frees, msg.holders)
            self.schedule()

    def requeue(self, task: Pending, front: bool = False) -> None:
        task.since_us = self.arrived
        if front:
            self.queue.push_front(HIGH, task, self.search.key((task.constraints, task.demand)))
        else:
            self.enqueue(task)

    def track(self, flight: Inflight) -> None:
        """Await the launch's answer: its completion or a failure reply (on a connection, it comes unless
        the connection breaks: then ``recovery`` asks again)."""
        self.inflight[(flight.task.job_id, flight.task.index)] = flight

    # ---- queue and matching ------------------------------------------------------------
    def enqueue(self, task: Pending) -> None:
        left = self.open_jobs.get(task.job_id)  # ranked by its job's tasks not yet done (gm_queue)
        self.queue.push(HIGH, task, self.search.key((task.constraints, task.demand)), left[0] if left else 0)

    def schedule(self) -> None:
        """One pass over the queue (the users' queues, with users), then over the waiting gangs. With
        ``refused_task=wait-free`` the workers just reported go to waiting tasks first, and what the pass
        leaves waits."""
        if self.users is not None:
            self.users.schedule()
        elif self.waiting is not None:
            self.waiting.serve()
            self._pass()
            self.waiting.park()
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
        if self.fruitless == (search.gain_total, queue.stamp()):
            # nothing gained and nothing queued since a pass that refused every signature: each would be
            # refused again (the memo answers each in O(1)), so count the refusals and skip the asking
            refused = queue.keys(HIGH)
            queue.rejected += refused
            self.recorder.count("reschedules", refused)
            return
        rejected = queue.rejected
        take, find = queue.take, search.find_key
        while search.total_free > 0:
            got = take(HIGH, find)
            if got is None:
                self.fruitless = (search.gain_total, queue.stamp())
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
        self.send_launch(flight)
        self.track(flight)
        if self.users is not None:
            self.users.hold_own(flight)

    def released(self, lm: int, worker: int, job_id: int, index: int) -> None:
        """A launch of this GM no longer holds LM ``lm``'s worker (its end, a failure, a loss): the users'
        holders view lets it go."""
        if self.users is not None:
            self.users.release_own(lm, worker, job_id, index)

    def send_launch(self, flight: Inflight) -> None:
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
        """Send to LM ``lm``: the replica this GM follows. With active-standby LMs an ask for the LM's state
        or a job's tasks (recovery: the followed replica may be the one that failed) goes to both; only the
        active acts on it."""
        if self.replicas and isinstance(msg, (SnapshotRequest, AdoptJob)):
            for dst in self.replicas[lm]:
                self.send(dst, msg)
        else:
            self.send(self.lm_ids[lm], msg)

    # ---- the components' messages --------------------------------------------------------
    on_PreemptFailed = routed("users", "on_preempt_failed")
    on_Preempted = routed("users", "on_preempted")
    on_GangVote = routed("gang", "on_vote")
    on_GangTimer = routed("gang", "due", timer=True)
    on_ConnectionBroken = routed("recovery", "on_connection_broken", timer=True)
    on_Snapshot = routed("recovery", "on_snapshot")
    on_GmTimer = routed("recovery", "due", timer=True)
    on_Resubmit = routed("recovery", "on_resubmit")
    on_JobTasks = routed("recovery", "on_job_tasks")
    on_Ping = routed("recovery", "on_ping")
    on_LaunchAccepted = routed("recovery", "on_launch_accepted")
    on_TaskLost = routed("recovery", "on_task_lost")
    on_NotActive = routed("recovery", "on_not_active")

    def statistics(self) -> GlobalManagerStatistics:
        now = self.fabric.now if self.fabric is not None else self.now
        queued = len(self.queue) + (len(self.waiting) if self.waiting is not None else 0)
        return GlobalManagerStatistics(self.name, self.gm, queued, len(self.inflight),
                                       self.queue.keys(HIGH), self.search.total_free, self.launches,
                                       self.internal, self.external, self.failures, self.passes,
                                       len(self.open_jobs), tuple(now - t for t in self.heard_us))
