"""Megha's worker: the generic worker, plus the answers the LM's failure detection needs.

- It remembers which tasks it finished (this incarnation), so a probe or a retried launch of a
  finished task is answered, not run again.
- A launch it cannot fit (a stale LM after a restart) is refused with its status, not a crash of the run.
- A probe is answered with what it runs and which of the asked tasks it finished.
- Restarted (incarnation > 0), it registers with its LM (its status: nothing running); the LM then
  relaunches what ran here before the crash (the paper's rule). The registration travels on a connection:
  it is sent again only when that connection breaks (``common.recovery.Retries``, backing off), for as
  long as the LM has not answered: never given up, since an LM always comes back (or its standby answers).
No periodic heartbeat: the LM probes a worker only when one of its tasks is overdue (see local_manager).

With active-standby LMs (``lm_standby``) it follows the LM of the latest epoch it has heard (a
``Takeover``, or the answer to its registration, which goes to both replicas) and answers a launch from
the other replica, or a takeover of an older epoch, with ``Fenced``: the launch does not run. It tells
the LM it follows of each task's end (the replica that launched the task may have failed since).

Preemption (Megha 2022, IV-C; see ``lm_fairness``): ``StopTask`` stops the named tasks at once (their resources are
free again, their work is lost: ``Recorder.task_preempted``) and is answered ``Stopped``, naming those that
had finished already. A stopped execution's timer still fires, and is recognised by its time.
"""

from __future__ import annotations

from ..common.protocol import RunTask, TaskFinished, TaskTimer
from ..common.recovery import Recovering, Retries
from ..common.worker import Worker
from .messages import Fenced, Probe, Registered, Stopped, Takeover, WorkerStatus


class MeghaWorker(Recovering, Worker):
    def __init__(self, spec, recorder, lm_name: str, *, retry_us: int, standby_name: str | None = None) -> None:
        super().__init__(spec, recorder)
        self.lm_name = lm_name
        self.standby_name = standby_name
        self.lm_id = -1  # the LM whose launches run here (the active replica of the latest epoch heard)
        self.lms: tuple = ()  # the LM's replicas: a restarted worker registers with each
        self.epoch = 0
        self.retry_us = retry_us
        self.finished: set[tuple[int, int]] = set()
        self.registered = True
        self.ends: dict[tuple[int, int], int] = {}  # when each running task ends
        self.stopped: set[tuple] = set()  # (key, time) of each stopped execution's timer, yet to fire

    def on_start(self) -> None:
        self.lm_id = self.fabric.addr(self.lm_name)
        self.lms = (self.lm_id,) if self.standby_name is None else (self.lm_id, self.fabric.addr(self.standby_name))
        if self.incarnation > 0:
            self.registered = False
            self.recover(Retries(self, "register", self.retry_us, self._register, self._registering))
            for lm in self.lms:  # which replica is active is not known after a restart: each hears it
                self._register(lm)

    def _register(self, lm: int, key=None) -> None:
        self.send(lm, self._status(()))

    def _registering(self, lm: int) -> list:
        """What LM replica ``lm`` still owes this worker (``Retries``): the answer to its registration."""
        return ["register"] if not self.registered and lm in self.lms else []

    def on_Registered(self, msg: Registered, src: int) -> None:
        if msg.epoch >= self.epoch:
            self.epoch, self.lm_id = msg.epoch, src
            self.registered = True

    def on_Takeover(self, msg: Takeover, src: int) -> None:
        """A replica became the active LM: follow it (unless a later epoch is known) and tell it everything."""
        if msg.epoch < self.epoch:
            self.send(src, Fenced(self.epoch))
            return
        self.epoch, self.lm_id = msg.epoch, src
        self.registered = True
        self.send(src, self._status(None))

    def _status(self, asked) -> WorkerStatus:
        running = tuple((j, i, t.duration_us, t.demand, t.owner, self.ends[(j, i)]) + ((t.user,) if t.user >= 0 else ())
                        for (j, i), t in sorted(self.running.items()))
        done = tuple(sorted(self.finished)) if asked is None else tuple(k for k in asked if k in self.finished)
        return WorkerStatus(self.incarnation, running, done)

    def on_RunTask(self, msg: RunTask, src: int) -> None:
        if src != self.lm_id and len(self.lms) > 1:  # from a replica that is not (or no longer) active
            self.recorder.count("launches_fenced")
            self.send(src, Fenced(self.epoch))
            return
        key = (msg.job_id, msg.index)
        if key in self.running:  # a duplicated or retried launch: it runs once
            self.recorder.count("duplicate_launches_suppressed")
            return
        if key in self.finished:  # a retried launch of a finished task: say so, do not run it again
            self.recorder.count("duplicate_launches_suppressed")
            self.send(src, self._status((key,)))
            return
        free = self.free
        demand = msg.demand
        for r, d in enumerate(demand):
            if free[r] < d:  # a stale LM: refuse, with what this worker runs
                self.recorder.count("launches_refused")
                self.send(src, self._status(()))
                return
        for r, d in enumerate(demand):
            free[r] -= d
        now = self._now
        self.running[key] = msg
        run_us = self.run_us(msg)
        self.ends[key] = now + run_us
        self.recorder.task_started(msg.job_id, msg.index, now, self.spec.worker_id, demand[0])
        self.set_timer(run_us, TaskTimer(msg.job_id, msg.index))

    def on_StopTask(self, msg, src: int) -> None:
        if src != self.lm_id and len(self.lms) > 1:  # from a replica that is not (or no longer) active
            self.send(src, Fenced(self.epoch))
            return
        free = self.free
        for key in msg.keys:
            task = self.running.pop(tuple(key), None)
            if task is None:
                continue
            self.stopped.add((tuple(key), self.ends.pop(tuple(key))))
            for r, d in enumerate(task.demand):
                free[r] += d
            self.recorder.task_preempted(task.job_id, task.index, self.spec.worker_id, self._now, task.demand[0])
        self.send(src, Stopped(msg.keys, tuple(k for k in msg.keys if tuple(k) in self.finished)))

    def on_TaskTimer(self, msg, src) -> None:
        key = (msg.job_id, msg.index)
        if self.stopped and (key, self.arrived) in self.stopped:
            self.stopped.discard((key, self.arrived))  # the timer of an execution a preemption stopped
            return
        task = self.running.pop(key)
        del self.ends[key]
        self.finished.add(key)
        free = self.free
        for r, d in enumerate(task.demand):
            free[r] += d
        self.completed += 1
        self.recorder.task_finished(msg.job_id, msg.index, self._now, task.demand[0], self.spec.worker_id)
        self.send(self.lm_id, TaskFinished(msg.job_id, msg.index, task.demand, task.owner))

    def on_Probe(self, msg: Probe, src: int) -> None:
        if msg.epoch > self.epoch and len(self.lms) > 1:  # a takeover whose announcement it missed: follow it
            self.epoch, self.lm_id = msg.epoch, src
        self.send(src, self._status(None if msg.everything else msg.keys))
