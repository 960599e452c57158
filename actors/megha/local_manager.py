"""Megha's Local Manager: the true, current state of one cluster, and validation of GM requests.

The cluster's workers are split into one partition per GM (contiguous blocks). The LM holds each
worker's free capacity; a GM's launch request is valid when the worker still has the demand free.
A request on another GM's partition is a repartition: a logical node with just the requested
resources moves to the requester for the task's lifetime and returns to its home partition when the
task ends (Megha 2022, IV-B4). Invalid requests are answered with every
change the GM has not seen.

Delta updates (Megha 2023, 4.4) are ``policies.change_log``: every
change is logged with its cause; a heartbeat sends each GM the workers changed since its last one,
leaving out those whose latest change the GM caused itself (its own launches, and completions of its
own tasks, which reach it through ``TaskCompleted``). A launch's reply (a failure's, or with
``launch_replies=delta`` every one's) is a status update too: the next heartbeat carries only what
changed after it. Updates travel on connections, so none is acknowledged or repeated.

Heartbeats tick at multiples of the heartbeat period, but a GM with nothing new is sent nothing and
an LM with no change arms no timer until the next change.

Faults (our reading of the 2022 paper's high availability, section IV):
- Launches are idempotent by (job, task): the LM keeps each task it launched (worker, owner GM,
  demand, expected end) and each task done (and where). A launch of a running task makes its sender the
  owner (the completion goes there) and is answered ``LaunchAccepted``; of a done task, with the
  completion at once. Either counts ``duplicate_launches_suppressed``.
- Worker failure without per-worker heartbeats (their cost: one message per busy worker per period,
  5.6M messages on the yh1-1k bench at 10 s): at its heartbeat tick the LM probes the worker of any
  task overdue by ``worker_grace_s``; no answer after ``worker_probe_retries`` probes of
  ``worker_probe_timeout_s`` marks the worker down (its capacity leaves the GMs' views through the deltas).
  A worker's answer is reconciled with the LM's record: tasks it finished are completed, tasks it does
  not run (a launch lost on the way, or a restart) are relaunched, tasks it runs that the LM did not
  know are counted against its capacity.
- A restarted worker registers; the LM relaunches every task that ran on it (the paper's rule,
  ``tasks_relaunched``). A worker still down after ``worker_down_timeout_s`` has its tasks handed back
  to their GMs for rescheduling (``TaskLost``; our extension, not in the papers) once its launches can no
  longer arrive: a notice said it crashed or refuses, or this LM's connection to it broke (a cut past
  ``conn_timeout_s``). A worker behind a shorter cut is waited for: the launches held on the connection
  would run there after the cut, besides the GM's new launch elsewhere. After the hand-back it is asked once more
  what it runs: a cut that breaks that ask's connection has it sent again after a backoff (the worker may
  be alive behind the cut), for as long as the cut lasts; a worker that crashed registers itself when it
  restarts, so a notice that it crashed or is down ends the asking (one that died for good costs nothing).
- A restarted LM has lost its memory: it asks every worker what it runs and has finished before it
  validates anything (messages meanwhile wait), then sends every GM its whole state.
"""

from __future__ import annotations

import heapq

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit
from fedemu.policies.change_log import NO_CAUSE, ChangeLog

from ..common.events import RELAUNCH
from ..common.protocol import RunTask, TaskFinished
from ..common.recovery import Recovering, Retries, backoff
from .events import LAUNCH_INVALID, REPARTITION
from .gang import LmGang
from .lm_fairness import LmFairness
from .messages import (AdoptJob, Heartbeat, HeartbeatTick, JobTasks, Launch,
                             LaunchAccepted, LaunchFailed, LaunchOk, LmTimer, NotActive, Probe, Registered, Snapshot,
                             SnapshotRequest, Takeover, TaskCompleted, TaskLost, WorkerStatus)
from .standby import Standby

@attrs.frozen
class LocalManagerStatistics:
    """``total_units``/``free_units``: the first resource over the cluster; ``partitions``: (home GM,
    free, total) of that resource per partition."""

    name: str
    lm: int
    free_units: int
    launches: int
    invalid_internal: int
    invalid_external: int
    repartitions: int
    heartbeats: int
    log_length: int
    total_units: int = 0
    partitions: tuple = ()


class LmTask:
    """A task this LM launched and has not seen finish."""

    __slots__ = ("worker", "owner", "demand", "duration_us", "end_us", "seq", "user", "attempt")

    def __init__(self, worker, owner, demand, duration_us, end_us, seq, user=-1, attempt=0):
        self.worker = worker
        self.owner = owner
        self.demand = demand
        self.duration_us = duration_us
        self.end_us = end_us
        self.seq = seq
        self.user = user  # whose task it is (runs with users), and the owner GM's launch number
        self.attempt = attempt


@attrs.frozen
class FaultTimes:
    """The LM's failure-detection settings, in microseconds."""

    grace_us: int
    probe_timeout_us: int
    probe_retries: int
    down_timeout_us: int


def routed(component: str, method: str, timer: bool = False):
    """A handler that hands its message to one of the actor's components (``users``, ``standby``, ``gang``)."""
    if timer:
        def handler(self, msg, src):
            getattr(getattr(self, component), method)(msg)
    else:
        def handler(self, msg, src):
            getattr(getattr(self, component), method)(msg, src)
    handler.__doc__ = f"Handled by the {component} component ({method})."
    return handler


class LocalManager(Recovering, Actor):
    """The LM of Megha's papers (above); what a run adds hangs off it as components, each None when off:
    ``users`` (the preemption protocol of global fairness, ``lm_fairness``), ``standby`` (the
    active/standby role, ``standby``) and ``gang`` (gang holds and commits, ``gang``)."""

    COST_ROLE, COST_UNITS = "lm", ("change",)  # a single server (fabric.service): what it charges

    def __init__(self, lm: int, workers, worker_names: list[str], gm_names: list[str], *, heartbeat_us: int,
                 recorder, faults: FaultTimes, peer_name: str | None = None, replica: int = 0,
                 launch_replies: bool = False, users: bool = False,
                 gang_lease_us: int | None = None) -> None:
        """``worker_names[w]`` names the actor of LM-local worker ``w``; ``gm_names[g]`` GM ``g``'s actor;
        ``peer_name`` the other replica of this LM (active-standby LMs; ``replica`` 0 starts active);
        ``users``: tasks belong to users (global fairness); ``gang_lease_us``: gangs are held this long."""
        super().__init__()
        self.lm = lm
        self.specs = list(workers)
        self.worker_names = worker_names
        self.gm_names = gm_names
        self.worker_ids: list[int] = []  # resolved from the names at start, like the next two
        self.gm_ids: list[int] = []
        self.local_of: dict[int, int] = {}  # worker actor id -> LM-local worker index
        self.gm_of: dict[int, int] = {}  # GM actor id -> GM index
        self.heartbeat_us = heartbeat_us
        self.launch_replies = launch_replies  # answer a valid launch with the GM's unseen changes too
        self.recorder = recorder
        self.faults = faults
        n = len(self.specs)
        self.per_partition = n // len(gm_names)
        self.capacity = [tuple(w.capacity) for w in self.specs]
        self.free = [list(w.capacity) for w in self.specs]
        self.change_log = ChangeLog(self.free, len(gm_names))
        self.tasks: dict[tuple[int, int], LmTask] = {}  # launched, not yet seen finished
        self.execs: list[dict] = [{} for _ in range(n)]  # per worker: (job, index) -> demand it runs
        self.done: dict[tuple[int, int], int] = {}  # (job, index) -> worker of each task seen finished
        self.due: dict[int, list] = {}  # tick time -> [(seq, key)] of tasks overdue by then
        self.due_at: list[int] = []  # the tick times of ``due``, a heap
        self.seq = 0
        self.probing: dict[int, list] = {}  # worker -> [probes sent, nonce]
        self.down: dict[int, int] = {}  # worker -> nonce of its down period
        self.hand_back_at: dict[int, int] = {}  # down worker -> when its tasks go back (the timer is pending)
        self.asking: set[int] = set()  # down workers asked again after the hand-back, until they answer
        self.severed: set[int] = set()  # workers this LM's launches can no longer reach (a notice), until heard
        self.awaiting_cut: set[int] = set()  # down workers whose hand-back waits for such a notice
        self.worker_inc = [0] * n  # each worker's incarnation as last heard
        self.rebuilding: set[int] = set()  # workers a restarted LM still waits for
        self.held: list = []  # messages that arrived while rebuilding
        self.started_us = 0
        self.launches = 0
        self.invalid_internal = 0
        self.invalid_external = 0
        self.repartitions = 0
        self.heartbeats = 0
        self.armed = False
        self.tick_at = 0
        self.notify: tuple = ()  # who workers tell of a task's end: this LM
        self.told: set[int] = set()  # the GMs sent a heartbeat or snapshot of this epoch
        # without a standby this LM is always active, its epoch its incarnation (``standby`` changes both)
        self.active = True
        self.epoch = 0
        if len(worker_names) != n:
            raise ValueError(f"LM {lm}: {len(worker_names)} worker names for {n} workers")
        self.users = LmFairness(self) if users else None
        self.standby = Standby(self, peer_name, replica, faults.probe_timeout_us) if peer_name is not None else None
        self.gang = LmGang(self, gang_lease_us) if gang_lease_us is not None else None

    def on_start(self) -> None:
        addr = self.fabric.addr
        self.worker_ids = [addr(name) for name in self.worker_names]
        self.gm_ids = [addr(name) for name in self.gm_names]
        self.local_of = {actor: w for w, actor in enumerate(self.worker_ids)}
        self.gm_of = {actor: g for g, actor in enumerate(self.gm_ids)}
        self.notify = (self.id,)
        self.asks = self.recover(Retries(self, "down", self.faults.down_timeout_us, self._reask, self._asked))
        if self.standby is not None:
            self.standby.start()
            return
        self.epoch = self.incarnation
        if self.incarnation > 0:  # memory lost: ask every worker before validating anything
            self.started_us = self.now
            self.rebuilding = set(range(len(self.specs)))
            self.ask_rebuild(0)

    # ---- timers and the change log --------------------------------------------------
    def _arm(self, after_us: int = -1) -> None:
        """Tick at the first multiple of the period after ``after_us`` (default: now), unless a tick is
        due sooner; a tick set for later is superseded (``tick_at`` names the live one)."""
        period = self.heartbeat_us
        at = (max(self.now, after_us) // period + 1) * period
        if self.armed and self.tick_at <= at:
            return
        self.tick_at = at
        self.set_timer(at - self.now, HeartbeatTick())
        self.armed = True

    def home_gm(self, worker: int) -> int:
        return worker // self.per_partition

    def changed(self, worker: int, cause: int) -> None:
        """Log a change GM ``cause`` made; an idle LM's heartbeat timer starts again."""
        self.change_log.record(worker, cause)
        if not self.armed or self.tick_at > self.now + self.heartbeat_us:
            self._arm()

    def _track(self, key, task: LmTask) -> None:
        """Check the task at the first tick after it is overdue."""
        self.seq += 1
        task.seq = self.seq
        period = self.heartbeat_us
        at = ((task.end_us + self.faults.grace_us - 1) // period + 1) * period
        bucket = self.due.get(at)
        if bucket is None:
            bucket = self.due[at] = []
            heapq.heappush(self.due_at, at)
        bucket.append((self.seq, key))
        if not self.armed or self.tick_at > at:
            self._arm(at - 1)

    def on_HeartbeatTick(self, msg, src) -> None:
        """Send every GM with something new its delta; probe the workers of overdue tasks. With nothing
        to send the next tick waits for the next change or the first tick after the next task is overdue."""
        if self.arrived != self.tick_at:  # the tick this timer was set for
            return  # superseded by a sooner tick
        self.armed = False
        if not self.active:
            return
        if not self.rebuilding:  # (a rebuild ends with a snapshot to every GM)
            for gm, workers, frees, upto in self.change_log.deltas():
                self.told.add(gm)
                self.send(self.gm_ids[gm], Heartbeat(self.lm, self.epoch, workers, frees, upto,
                                                     self.holders(workers)))
                self.charge("change", len(workers))
            self.heartbeats += 1
            self._check_overdue()
        if self.due_at:
            self._arm(self.due_at[0] - 1)

    # ---- launches and completions -----------------------------------------------------
    def holders(self, workers) -> tuple:
        """With users: per worker of ``workers``, its running tasks as (job, index, user, demand)."""
        return self.users.holders(workers) if self.users is not None else ()

    def hold(self, msg, src) -> bool:
        """Whether the message waits (a rebuild) or is dropped (a standby acts on nothing) instead of handled now.
        A standby answers a GM's request that only the active acts on (``NotActive``): that GM follows this
        replica still (no notice told it of the takeover), and would wait for the answer for ever."""
        if not self.active:
            if src in self.gm_of and not isinstance(msg, (SnapshotRequest, AdoptJob)):  # (those go to both)
                self.send(src, NotActive(self.lm, self.epoch))
            return True
        if self.rebuilding:
            self.held.append((msg, src))
            return True
        return False

    def repeated(self, msg) -> bool:
        """A launch (or preemption request) of a task this LM runs or ran: answered, and True."""
        key = (msg.job_id, msg.index)
        w = msg.worker
        task = self.tasks.get(key)
        if task is not None:  # already running: the sender owns it now, by its launch number, and hears of its end
            task.owner, task.attempt = msg.gm, msg.attempt
            self.recorder.count("duplicate_launches_suppressed")
            self.send(self.gm_ids[msg.gm], LaunchAccepted(msg.job_id, msg.index, self.lm, w, tuple(self.free[w]),
                                                          task.end_us))
            if task.end_us + self.faults.grace_us <= self.now and w not in self.down and w not in self.probing:
                self._probe(w, 0)  # asked again for a task overdue here: its end (or its launch) was lost
            return True
        if key in self.done:  # already done: the completion, at once
            self.recorder.count("duplicate_launches_suppressed")
            self.send(self.gm_ids[msg.gm], TaskCompleted(msg.job_id, msg.index, self.lm, w, tuple(self.free[w])))
            return True
        return False

    def start(self, msg, w: int, cause: int) -> None:
        """Launch ``msg``'s task on worker ``w``, which has its demand free (the change is ``cause``'s)."""
        key = (msg.job_id, msg.index)
        free = self.free[w]
        demand = msg.demand
        for r, d in enumerate(demand):
            free[r] -= d
        self.changed(w, cause)
        if msg.external:
            self.repartitions += 1
            self.recorder.count("repartitions")
            if self.fabric.event_log is not None:
                emit(self, REPARTITION, job=msg.job_id, task=msg.index, worker=self.worker_names[w],
                     gm=self.gm_names[msg.gm], home=self.gm_names[self.home_gm(w)])
        self.start_task(key, w, msg.gm, demand, msg.duration_us, msg.user, msg.attempt)
        if self.launch_replies:
            workers, frees = self.change_log.since(msg.gm)
            self.charge("change", len(workers))
            self.send(self.gm_ids[msg.gm], LaunchOk(msg.job_id, msg.index, self.lm, workers, frees,
                                                    self.holders(workers)))

    def on_Launch(self, msg: Launch, src: int) -> None:
        users = self.users
        if self.hold(msg, src) or self.repeated(msg) or (users is not None and users.stopping and
                                                           users.stop_pending(msg)):
            return
        self.recorder.task_handled(msg.job_id, msg.index, self.arrived, self.now)
        w = msg.worker
        free = self.free[w]
        demand = msg.demand
        if w not in self.down and (users is None or w not in users.stopping) and \
                all(f >= d for f, d in zip(free, demand)):
            self.start(msg, w, msg.gm)
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
        self.charge("change", len(workers))
        self.send(self.gm_ids[msg.gm], LaunchFailed(msg.job_id, msg.index, msg.attempt, self.lm, workers, frees,
                                                    self.holders(workers), w in self.down))

    def start_task(self, key, w: int, gm: int, demand: tuple, duration_us: int, user: int = -1,
                    attempt: int = 0) -> None:
        """Run task ``key`` of ``user`` on worker ``w`` (its demand already taken from ``free``) for GM ``gm``."""
        self.launches += 1
        if self.severed:
            self.severed.discard(w)  # a launch on a new connection: it may yet arrive
        self.execs[w][key] = demand
        task = self.tasks[key] = LmTask(w, gm, demand, duration_us, self.now + duration_us, 0, user, attempt)
        self._track(key, task)
        self.send(self.worker_ids[w], RunTask(key[0], key[1], duration_us, demand, gm, self.notify, user))

    def on_TaskFinished(self, msg: TaskFinished, src: int) -> None:
        if self.hold(msg, src):
            return
        w = self.local_of[src]
        key = (msg.job_id, msg.index)
        if key not in self.execs[w]:  # a duplicate report, or of an execution already reconciled
            self.recorder.count("stale_finishes")
            return
        self.finished(w, key)
        if w in self.down:  # it is alive after all: find out what it runs
            self._probe(w, 0)

    def finished(self, w: int, key) -> None:
        """An execution of ``key`` on worker ``w`` ended; the first one completes the task."""
        demand = self.execs[w].pop(key)
        free = self.free[w]
        if w not in self.down:  # a down worker's free stays 0 until it is reconciled
            for r, d in enumerate(demand):
                free[r] += d
        task = self.tasks.pop(key, None)
        if task is None:
            self.changed(w, NO_CAUSE)
            return
        self.done[key] = w
        self.changed(w, task.owner)
        self.send(self.gm_ids[task.owner], TaskCompleted(key[0], key[1], self.lm, w, tuple(free)))

    # ---- a restarted GM, a resubmitted job -------------------------------------------
    def on_SnapshotRequest(self, msg: SnapshotRequest, src: int) -> None:
        if self.hold(msg, src):
            return
        self.send_snapshot(msg.gm)

    def send_snapshot(self, gm: int) -> None:
        """Send GM ``gm`` the whole state (every worker's free vector): it has heard everything."""
        self.change_log.reset(gm)
        self.told.add(gm)
        n = len(self.free)
        self.send(self.gm_ids[gm], Snapshot(self.lm, self.epoch, tuple(range(n)), tuple(tuple(f) for f in self.free),
                                            self.change_log.end, self.holders(range(n))))

    def on_AdoptJob(self, msg: AdoptJob, src: int) -> None:
        if self.hold(msg, src):
            return  # kept for after a rebuild (it comes back through here), or only observed by a standby
        if self.gang is not None:
            self.gang.adopting(msg.job_id)
        running = []
        for (job_id, index), task in self.tasks.items():
            if job_id == msg.job_id:
                task.owner, task.attempt = msg.gm, 0  # (the adopter's flight has no launch number yet)
                running.append((index, task.worker, task.end_us))
        done = tuple(sorted(index for job_id, index in self.done if job_id == msg.job_id))
        for w in sorted({self.done[(msg.job_id, index)] for index in done}):
            self.changed(w, NO_CAUSE)  # its completion may never have reached the adopter: send the worker
        self.send(self.gm_ids[msg.gm], JobTasks(self.lm, msg.job_id, tuple(sorted(running)), done))

    # ---- worker failure ----------------------------------------------------------------
    def _check_overdue(self) -> None:
        due, due_at, now, tasks = self.due, self.due_at, self.now, self.tasks
        ask = set()
        while due_at and due_at[0] <= now:
            for seq, key in due.pop(heapq.heappop(due_at)):
                task = tasks.get(key)
                if task is not None and task.seq == seq and task.worker not in self.down \
                        and task.worker not in self.probing:
                    ask.add(task.worker)
        for w in sorted(ask):
            self._probe(w, 0)

    def _probe(self, w: int, sent: int) -> None:
        self.seq += 1
        self.probing[w] = [sent + 1, self.seq]
        self._ask(w)
        self.set_timer(self.faults.probe_timeout_us, LmTimer("probe", w, self.seq))

    def _ask(self, w: int) -> None:
        """Probe worker ``w`` for what this LM records there; an active replica names its epoch, which the
        worker follows if it missed the takeover (no answer to ``Takeover`` before the rebuild gave up)."""
        epoch = self.epoch if self.standby is not None and self.active else 0
        self.send(self.worker_ids[w], Probe(tuple(sorted(self.execs[w])), False, epoch))

    def on_LmTimer(self, msg: LmTimer, src: int) -> None:
        w = msg.worker
        if msg.what == "stop":
            self.users.on_timer(msg)
        elif msg.what == "probe":
            probe = self.probing.get(w)
            if probe is None or probe[1] != msg.nonce:
                return
            if probe[0] < self.faults.probe_retries:
                self._probe(w, probe[0])
            else:
                self._mark_down(w)
        elif msg.what == "down":
            if self.down.get(w) == msg.nonce:  # hand its tasks back, then ask it once more (``_asked``)
                del self.hand_back_at[w]
                if w in self.severed:
                    self._hand_back(w)
                else:  # its launches may still arrive: wait for the notice that they cannot
                    self.awaiting_cut.add(w)
                self.asking.add(w)  # (an ask held by the cut breaks the connection: the notice)
                self._ask(w)
        elif msg.what == "rebuild" and self.rebuilding:
            if msg.nonce < self.faults.probe_retries:
                self.ask_rebuild(msg.nonce + 1)
            else:
                for w in sorted(self.rebuilding):
                    self._mark_down(w)
                self._rebuilt()

    def _mark_down(self, w: int) -> None:
        """No answer: the worker's capacity leaves the GMs' views; its tasks wait for it to come back."""
        self.probing.pop(w, None)
        self.seq += 1
        self.down[w] = self.seq
        self.recorder.count("workers_marked_down")
        free = self.free[w]
        for r in range(len(free)):
            free[r] = 0
        self.changed(w, NO_CAUSE)
        self.hand_back_at[w] = self.now + self.faults.down_timeout_us
        self.set_timer(self.faults.down_timeout_us, LmTimer("down", w, self.seq))

    def _hand_back(self, w: int) -> None:
        """The worker stayed down: its tasks go back to their GMs (our extension, not in the papers)."""
        for key in sorted(self.execs[w]):
            task = self.tasks.get(key)
            if task is not None and task.worker == w:
                del self.tasks[key]
                self.recorder.count("tasks_handed_back")
                self.send(self.gm_ids[task.owner], TaskLost(key[0], key[1], self.lm))
        self.execs[w].clear()

    def _asked(self, peer: int) -> list:
        """The ask a down worker still owes an answer to (``Retries``): a cut that broke the probe's connection
        (the worker may be alive behind it) has it sent again, after a backoff, for as long as it lasts."""
        w = self.local_of.get(peer, -1)
        return [w] if w in self.asking and w in self.down else []

    def _reask(self, peer: int, w: int) -> None:
        self._ask(w)

    def connection_broke(self, brk) -> None:
        """A notice: a down worker that crashed or is down (refused) is asked no more (a restarted worker
        registers itself); the launches sent to a worker that crashed, refuses, or whose connection from this
        LM broke can no longer arrive (a hand-back waiting for that happens now); the peer replica's failure
        makes a standby take over."""
        w = self.local_of.get(brk.peer)
        if w is not None and (brk.peer_lost_state or brk.sent):
            if brk.peer_lost_state:
                self.asking.discard(w)
            self.severed.add(w)
            if w in self.awaiting_cut:
                self.awaiting_cut.discard(w)
                self._hand_back(w)
        if self.standby is not None:
            self.standby.broken(brk)

    def on_WorkerStatus(self, msg: WorkerStatus, src: int) -> None:
        if not self.active:
            return  # (a restarted worker registers with both replicas: the active answers)
        w = self.local_of[src]
        self.asks.heard(src)
        if msg.incarnation > self.worker_inc[w]:  # a restarted worker registers (or answers)
            self.worker_inc[w] = msg.incarnation
            self.send(src, Registered(self.epoch))
        elif msg.incarnation < self.worker_inc[w]:
            return  # from an earlier incarnation: stale
        self.reconcile(w, msg)
        if w in self.rebuilding:
            self.rebuilding.discard(w)
            if not self.rebuilding:
                self._rebuilt()

    def reconcile(self, w: int, status: WorkerStatus) -> None:
        """Make the record of worker ``w`` what it says: complete what it finished, count what it runs,
        relaunch what it lost (a lost launch, or a restart), or hand that back when it no longer fits."""
        self.probing.pop(w, None)
        self.down.pop(w, None)
        self.hand_back_at.pop(w, None)
        self.asking.discard(w)
        self.severed.discard(w)
        self.awaiting_cut.discard(w)
        execs, tasks = self.execs[w], self.tasks
        running = {(r[0], r[1]): r for r in status.running}
        done = set(map(tuple, status.done))
        relaunch = []
        # victims of a stop under way stay recorded until it is answered
        stopping = self.users.stopping_keys(w) if self.users is not None else ()
        for key in sorted(execs):
            if key in running or (key in stopping and key not in done):
                continue
            if key in done:
                self.finished(w, key)
                continue
            del execs[key]
            task = tasks.get(key)
            if task is not None and task.worker == w:
                relaunch.append(key)
        for key in sorted(done):  # finished here while this LM did not know (a restarted LM)
            if key not in tasks and key not in self.done:
                self.done[key] = w
        for key, row in sorted(running.items()):
            _, _, duration_us, demand, owner, end_us = row[:6]
            execs.setdefault(key, tuple(demand))
            task = tasks.get(key)
            if task is None and key not in self.done:  # (with users the worker says whose task it is)
                user = row[6] if len(row) > 6 else -1
                task = tasks[key] = LmTask(w, owner, tuple(demand), duration_us, end_us, 0, user)
            if task is not None and task.worker == w:
                task.end_us = end_us
                self._track(key, task)
        free, cap = self.free[w], self.capacity[w]
        before = list(free)
        for r in range(len(cap)):
            free[r] = cap[r] - sum(d[r] for d in execs.values())
        for key in relaunch:
            task = tasks[key]
            if all(f >= d for f, d in zip(free, task.demand)):
                for r, d in enumerate(task.demand):
                    free[r] -= d
                execs[key] = task.demand
                task.end_us = self.now + task.duration_us
                self._track(key, task)
                self.recorder.count("tasks_relaunched")
                if self.fabric.event_log is not None:
                    emit(self, RELAUNCH, job=key[0], task=key[1], worker=self.worker_names[w])
                self.send(self.worker_ids[w], RunTask(key[0], key[1], task.duration_us, task.demand, task.owner,
                                                      self.notify, task.user))
            else:
                del tasks[key]
                self.recorder.count("tasks_handed_back")
                self.send(self.gm_ids[task.owner], TaskLost(key[0], key[1], self.lm))
        if free != before:
            self.changed(w, NO_CAUSE)
        if self.users is not None and w in self.users.stopping:  # it may not have had the stop: ask again
            self.users.ask_stop(w)
        if self.gang is not None:
            self.gang.reconciled(w)

    # ---- a restarted LM -----------------------------------------------------------------
    def ask_rebuild(self, attempt: int) -> None:
        ask = Probe((), True) if self.standby is None else Takeover(self.epoch)
        for w in sorted(self.rebuilding):
            self.send(self.worker_ids[w], ask)
        self.set_timer(backoff(self.faults.probe_timeout_us, attempt + 1), LmTimer("rebuild", -1, attempt))

    def _rebuilt(self) -> None:
        """Every worker answered (or is down): send every GM the whole state, then serve what waited."""
        self.rebuilding.clear()
        self.recorder.count("lm_rebuilds")
        self.recorder.recovered(self.now - self.started_us)
        for gm in range(len(self.gm_ids)):
            self.send_snapshot(gm)
        held, self.held = self.held, []
        for msg, src in held:
            getattr(self, "on_" + type(msg).__name__)(msg, src)

    def forget_state(self) -> None:
        """What only an active holds (the done tasks stay: they are facts the workers reported): a replica
        that takes over or steps down drops it, and so does each component."""
        self.free = [list(c) for c in self.capacity]
        self.change_log = ChangeLog(self.free, len(self.gm_names))
        self.told = set()
        self.tasks.clear()
        for execs in self.execs:
            execs.clear()
        self.due.clear()
        self.due_at.clear()
        self.probing.clear()
        self.down.clear()
        self.hand_back_at.clear()
        self.asking.clear()
        self.severed.clear()
        self.awaiting_cut.clear()
        if self.users is not None:
            self.users.forget()
        self.rebuilding = set()
        self.held = []
        self.armed = False
        if self.gang is not None:
            self.gang.forget()

    # ---- the components' messages --------------------------------------------------------
    on_Preempt = routed("users", "on_preempt")
    on_Stopped = routed("users", "on_stopped")
    on_Fenced = routed("standby", "on_fenced")
    on_Join = routed("standby", "on_join")
    on_Joined = routed("standby", "on_joined")
    on_GangReserve = routed("gang", "on_reserve")
    on_GangCommit = routed("gang", "on_commit")
    on_GangRelease = routed("gang", "on_release")
    on_GangLease = routed("gang", "on_lease", timer=True)

    def statistics(self) -> LocalManagerStatistics:
        gms, per = len(self.gm_names), self.per_partition
        totals, frees = [0] * gms, [0] * gms
        for w, (c, f) in enumerate(zip(self.capacity, self.free)):
            home = min(w // per, gms - 1) if per else 0
            totals[home] += c[0]
            frees[home] += f[0]
        return LocalManagerStatistics(self.name, self.lm, sum(frees), self.launches, self.invalid_internal,
                                      self.invalid_external, self.repartitions, self.heartbeats,
                                      len(self.change_log), sum(totals), tuple(zip(range(gms), frees, totals)))
