"""Megha's Local Manager: the true, current state of one cluster, and validation of GM requests.

The cluster's workers are split into one partition per GM (contiguous blocks). The LM holds each
worker's free capacity; a GM's launch request is valid when the worker still has the demand free.
A request on another GM's partition is a repartition: a logical node with just the requested
resources moves to the requester for the task's lifetime and returns to its home partition when the
task ends (Megha 2022, IV-B4). Invalid requests are answered with every
change the GM has not seen.

Delta updates (Megha 2023, 4.4) are ``change_log``: every
change is logged with its cause; a heartbeat sends each GM the workers changed since its last one,
leaving out those whose latest change the GM caused itself (its own launches, and completions of its
own tasks, which reach it through ``TaskCompleted``). A launch's reply (a failure's, or with
``launch_replies=delta`` every one's) is a status update too: the next heartbeat carries only what
changed after it. Updates travel on connections, so none is acknowledged or repeated.

Heartbeats tick at multiples of the heartbeat period, but a GM with nothing new is sent nothing and
an LM with no change arms no timer until the next change.

Faults: launches are idempotent by (job, task): the LM keeps each task it launched (worker, owner GM,
demand, expected end) and each task done (and where). A launch of a running task makes its sender the
owner (the completion goes there) and is answered ``LaunchAccepted``; of a done task, with the
completion at once. Either counts ``duplicate_launches_suppressed``. What the LM does when a worker or the
LM itself fails is ``lm_recovery`` (a component, ``recovery``): overdue tasks, probes, workers down and
their tasks handed back, a restarted LM's rebuild.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.actor import Actor
from fedemu.fabric.log import emit
from fedemu.actors.megha.change_log import NO_CAUSE, ChangeLog

from ..common.components import routed, routed_timer
from ..common.protocol import RunTask, TaskFinished
from ..common.recovery import Recovering
from .events import LAUNCH_INVALID, REPARTITION
from .gang import LmGang
from .lm_fairness import LmFairness
from .messages import (AdoptJob, Heartbeat, HeartbeatTick, JobTasks, Launch,
                             LaunchAccepted, LaunchFailed, LaunchOk, NotActive, Snapshot, SnapshotRequest, TaskCompleted)
from .lm_recovery import LmRecovery
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


class LocalManager(Recovering, Actor):
    """The LM of Megha's papers (above), a core in the one role shape (``common.components``): ``recovery``
    (``lm_recovery``) handles failures; what a run adds hangs off it as components, each None when off:
    ``users`` (the preemption protocol of global fairness, ``lm_fairness``), ``standby`` (the
    active/standby role, ``standby``) and ``gang`` (gang holds and commits, ``gang``)."""

    COST_ROLE, COST_UNITS = "lm", ("change",)  # a single server (fabric.service): what it charges
    CORE = frozenset({  # what its components may use (tests/test_role_shape.py)
        "lm", "specs", "capacity", "free", "tasks", "execs", "done", "change_log", "faults", "heartbeat_us",
        "launch_replies", "recorder", "worker_ids", "worker_names", "gm_ids", "local_of", "notify", "active",
        "epoch", "users", "standby", "gang", "recovery", "number", "new_task", "tick_by", "changed", "hold",
        "repeated", "start", "start_task", "finished", "send_snapshot", "handle", "forget_state", "recover"})

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
        self.seq = 0  # numbers the tracked tasks and every nonce (``number``)
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
        self.recovery = LmRecovery(self)
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
        self.recovery.start()
        if self.standby is not None:
            self.standby.start()
            return
        self.epoch = self.incarnation
        if self.incarnation > 0:  # memory lost: ask every worker before validating anything
            self.recovery.rebuild(self.now)

    # ---- timers and the change log --------------------------------------------------
    def number(self) -> int:
        """The next number of the LM's one sequence (a tracked task's, a timer's nonce)."""
        self.seq += 1
        return self.seq

    def tick_by(self, at: int) -> None:
        """Make sure a heartbeat tick comes by ``at`` (the first one after a task is overdue)."""
        if not self.armed or self.tick_at > at:
            self._arm(at - 1)

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

    def on_HeartbeatTick(self, msg, src) -> None:
        """Send every GM with something new its delta; probe the workers of overdue tasks. With nothing
        to send the next tick waits for the next change or the first tick after the next task is overdue."""
        if self.arrived != self.tick_at:  # the tick this timer was set for
            return  # superseded by a sooner tick
        self.armed = False
        if not self.active:
            return
        recovery = self.recovery
        if not recovery.rebuilding:  # (a rebuild ends with a snapshot to every GM)
            for gm, workers, frees, upto in self.change_log.deltas():
                self.told.add(gm)
                self.send(self.gm_ids[gm], Heartbeat(self.lm, self.epoch, workers, frees, upto,
                                                     self.holders(workers)))
                self.charge("change", len(workers))
            self.heartbeats += 1
            recovery.check_overdue()
        at = recovery.next_check()
        if at is not None:
            self._arm(at - 1)

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
        return self.recovery.hold(msg, src)

    def handle(self, msg, src) -> None:
        """Handle a message that waited (a rebuild) as if it arrived now."""
        getattr(self, "on_" + type(msg).__name__)(msg, src)

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
            if task.end_us + self.faults.grace_us <= self.now:
                self.recovery.suspect(w)  # asked again for a task overdue here: its end (or its launch) was lost
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
        if w not in self.recovery.down and (users is None or w not in users.stopping) and \
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
                                                    self.holders(workers), w in self.recovery.down))

    def start_task(self, key, w: int, gm: int, demand: tuple, duration_us: int, user: int = -1,
                    attempt: int = 0) -> None:
        """Run task ``key`` of ``user`` on worker ``w`` (its demand already taken from ``free``) for GM ``gm``."""
        self.launches += 1
        self.recovery.launched(w)
        self.execs[w][key] = demand
        task = self.tasks[key] = LmTask(w, gm, demand, duration_us, self.now + duration_us, 0, user, attempt)
        self.recovery.track(key, task)
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
        self.recovery.heard_finish(w)  # taken for down, it is alive after all: what does it run?

    def finished(self, w: int, key) -> None:
        """An execution of ``key`` on worker ``w`` ended; the first one completes the task."""
        demand = self.execs[w].pop(key)
        free = self.free[w]
        if w not in self.recovery.down:  # a down worker's free stays 0 until it is reconciled
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

    def new_task(self, w: int, owner: int, demand: tuple, duration_us: int, end_us: int, user: int) -> LmTask:
        """The record of a task a worker says it runs that this LM did not know (a restarted LM)."""
        return LmTask(w, owner, demand, duration_us, end_us, 0, user)

    def connection_broke(self, brk) -> None:
        """A notice (``common.recovery.Recovering``): the recovery component's, then the standby's (the peer
        replica's failure makes a standby take over)."""
        self.recovery.broken(brk)
        if self.standby is not None:
            self.standby.broken(brk)

    def forget_state(self) -> None:
        """What only an active holds (the done tasks stay: they are facts the workers reported): a replica
        that takes over or steps down drops it, and so does each component."""
        self.free = [list(c) for c in self.capacity]
        self.change_log = ChangeLog(self.free, len(self.gm_names))
        self.told = set()
        self.tasks.clear()
        for execs in self.execs:
            execs.clear()
        self.recovery.forget()
        if self.users is not None:
            self.users.forget()
        self.armed = False
        if self.gang is not None:
            self.gang.forget()

    # ---- the components' messages --------------------------------------------------------
    on_WorkerStatus = routed("recovery", "on_worker_status")
    on_LmTimer = routed_timer(stop="users", probe="recovery", down="recovery", rebuild="recovery")
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
