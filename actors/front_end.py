"""What every scheduler front end (Megha GM, Pigeon distributor, Sparrow scheduler) does with jobs:
reject one at submission when a task can never run anywhere, close one when its last task is done,
and end the run once every submitted job is closed."""

from __future__ import annotations


class JobFrontEnd:
    """Mixin for an Actor that has ``self.recorder`` and ``self.feasible(constraints, demand)``."""

    def admit(self, job) -> bool:
        """True when every task can run somewhere; else the job is recorded as unschedulable."""
        bad = tuple(i for i, c in enumerate(job.constraints) if not self.feasible(c, job.demand))
        if not bad:
            return True
        self.recorder.job_unschedulable(job.job_id, bad)
        self.recorder.count("unschedulable_tasks", len(bad))
        self.stop_if_finished()
        return False

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
