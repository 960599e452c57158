"""What every scheduler front end (Megha GM, Pigeon distributor, Sparrow scheduler) does with jobs:
reject one at submission when a task can never run anywhere, close one when its last task is done,
and end the run once every submitted job is closed."""

from __future__ import annotations

from fedemu.fabric.log import emit

from .events import JOB_UNSCHEDULABLE


class JobFrontEnd:
    """Mixin for an Actor that has ``self.recorder`` and ``self.feasible(constraints, demand)``.

    ``open_jobs`` holds, per admitted job, how many tasks are not yet reported done and which are."""

    def __init__(self) -> None:
        super().__init__()
        self.open_jobs: dict[int, int] = {}

    def infeasible(self, job) -> tuple:
        """The indexes of the job's tasks that no machine can ever run (each distinct constraint set is
        checked once: a job's tasks mostly share one)."""
        feasible, demand = self.feasible, job.demand
        ok = {c: feasible(c, demand) for c in dict.fromkeys(job.constraints)}
        if all(ok.values()):
            return ()
        return tuple(i for i, c in enumerate(job.constraints) if not ok[c])

    def admit(self, job) -> bool:
        """True when every task can run somewhere; else the job is recorded as unschedulable."""
        bad = self.infeasible(job)
        if not bad:
            return True
        self.recorder.job_unschedulable(job.job_id, bad)
        self.recorder.count("unschedulable_tasks", len(bad))
        if self.fabric.event_log is not None:
            emit(self, JOB_UNSCHEDULABLE, job=job.job_id, tasks=bad)
        self.stop_if_finished()
        return False

    def open_job(self, job_id: int, tasks: int) -> None:
        """Start counting down the job's ``tasks``."""
        self.open_jobs[job_id] = [tasks, bytearray(tasks)]

    def task_done(self, job_id: int, index: int) -> bool:
        """Task ``index`` of the job is done; the last one closes the job (returns True). A task's
        second report (a duplicate, or a second execution) and a report for a closed job count
        nothing: executions may repeat, completions may not."""
        entry = self.open_jobs.get(job_id)
        if entry is None or entry[1][index]:
            self.recorder.count("repeated_completions")
            return False
        entry[1][index] = 1
        entry[0] -= 1
        if entry[0]:
            return False
        del self.open_jobs[job_id]
        self.close_job(job_id)
        return True

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: its response time ends now."""
        self.recorder.job_completed(job_id, self.now)
        self.stop_if_finished()

    def stop_if_finished(self) -> None:
        if self.recorder.finished:
            self.stop_run()


class Pending:
    """One task waiting in a scheduler's queue (``distributor``: who to tell, where that applies)."""

    __slots__ = ("job_id", "index", "duration_us", "constraints", "demand", "since_us", "distributor")

    def __init__(self, job_id, index, duration_us, constraints, demand, since_us, distributor=-1):
        self.job_id = job_id
        self.index = index
        self.duration_us = duration_us
        self.constraints = constraints
        self.demand = demand
        self.since_us = since_us
        self.distributor = distributor
