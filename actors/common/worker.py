"""The worker: runs tasks for their run time in virtual time within its capacity vector.

A task's run time on this machine is its duration scaled by TEBAS's Amdahl model (``model.run_time_us``:
the job's parallel fraction alpha runs ``spec.speed`` times faster); alpha = 0 or speed 1 is the duration.
The launch message does not carry alpha: the worker reads the job's alpha from the run's records, so the
schedulers' launch paths and journals stay as they were.

It is told what to run (``RunTask``) and tells the listed actors when a task ends. It never runs more
than its capacity: a launch that would exceed it is a protocol bug and ends the run with an error.
A launch of a task it already runs (a duplicate or a retry) is ignored; a crash loses what it runs.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.actor import Actor
from fedemu.model import run_time_us

from .protocol import RunTask, TaskFinished, TaskTimer


@attrs.frozen
class WorkerStatistics:
    name: str
    worker_id: int
    free: tuple
    running: int
    completed: int


class Worker(Actor):
    """One machine. ``spec`` is its WorkerSpec; ``recorder`` logs task starts and ends."""

    # slots: a run has up to tens of thousands of workers (a subclass's own fields go in a dict unless it
    # names slots too)
    __slots__ = ("spec", "recorder", "free", "running", "completed")

    def __init__(self, spec, recorder) -> None:
        super().__init__()
        self.spec = spec
        self.recorder = recorder
        self.free = list(spec.capacity)
        self.running: dict[tuple[int, int], RunTask] = {}
        self.completed = 0

    def on_RunTask(self, msg: RunTask, src: int) -> None:
        if (msg.job_id, msg.index) in self.running:  # a duplicated or retried launch: it runs once
            self.recorder.count("duplicate_launches_suppressed")
            return
        free = self.free
        demand = msg.demand
        for r, d in enumerate(demand):
            if free[r] < d:
                raise AssertionError(f"{self.name}: task {msg.job_id}.{msg.index} needs {demand} but only "
                                     f"{tuple(free)} of {self.spec.capacity} is free")
        for r, d in enumerate(demand):
            free[r] -= d
        self.running[(msg.job_id, msg.index)] = msg
        self.recorder.task_started(msg.job_id, msg.index, self.now, self.spec.worker_id, demand[0])
        self.set_timer(self.run_us(msg), TaskTimer(msg.job_id, msg.index))

    def run_us(self, msg) -> int:
        """How long ``msg``'s task runs on this machine (its duration with the Amdahl speed-up; on a machine
        of speed 1, as every machine but a heterogeneous scenario's, the duration, without looking up alpha)."""
        speed = self.spec.speed
        if speed == 1:
            return msg.duration_us
        return run_time_us(msg.duration_us, self.recorder.alpha_of(msg.job_id), speed)

    def on_TaskTimer(self, msg: TaskTimer, src: int) -> None:
        task = self.running.pop((msg.job_id, msg.index))
        for r, d in enumerate(task.demand):
            self.free[r] += d
        self.completed += 1
        self.recorder.task_finished(msg.job_id, msg.index, self.now, task.demand[0], self.spec.worker_id)
        done = TaskFinished(msg.job_id, msg.index, task.demand, task.owner)
        for dst in task.notify:
            self.send(dst, done)

    def on_crash(self) -> None:
        """The machine fails: every task it runs is lost (the recorder counts the wasted work)."""
        for (job_id, index), task in sorted(self.running.items()):
            self.recorder.task_aborted(job_id, index, self.spec.worker_id, self.now, task.demand[0])

    def statistics(self) -> WorkerStatistics:
        return WorkerStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                self.completed)
