"""What every scheduler front end (Megha GM, Pigeon distributor, Sparrow scheduler) does with jobs:
reject one at submission when a task can never run anywhere, close one when its last task is done,
and end the run once every submitted job is closed."""

from __future__ import annotations

from fedemu.fabric.log import emit

from .events import JOB_UNSCHEDULABLE
from .submitter import JobDone, Ping, Pong, Resubmit


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


class ReportingFrontEnd(JobFrontEnd):
    """A front end whose jobs' owner of record is the submitter (Sparrow's, Hawk's and Eagle's schedulers): it
    reports each job done or rejected with ``JobDone``, once per incarnation (``closed`` keeps the report, sent
    again when the job is handed again), takes a job handed again (``Resubmit``) as a new one, and answers the
    submitter's ``Ping`` after a cut. Its per-job state is ``jobs`` (job -> the scheduler's own state), its
    front-end number ``index``."""

    def __init__(self) -> None:
        super().__init__()
        self.source: dict[int, int] = {}  # open job -> who submitted it (told when it is done)
        self.closed: dict[int, JobDone] = {}  # jobs this incarnation closed or rejected: the report sent

    def take_job(self, job, src: int) -> bool:
        """Whether ``job`` from ``src`` is new here and can run: a job open here already is ignored, one closed
        here gets its report again, one with a task no machine can run is reported rejected."""
        if job.job_id in self.jobs:  # handed again while open here
            self.recorder.count("repeated_jobs")
            return False
        done = self.closed.get(job.job_id)
        if done is not None:  # closed here already: its owner did not hear it
            self.recorder.count("repeated_jobs")
            self.send(src, done)
            return False
        bad = self.infeasible(job)
        if bad:
            if self.fabric.event_log is not None:
                emit(self, JOB_UNSCHEDULABLE, job=job.job_id, tasks=bad)
            done = self.closed[job.job_id] = JobDone(job.job_id, self.now, bad)
            self.send(src, done)
            return False
        self.source[job.job_id] = src
        return True

    def close_job(self, job_id: int) -> None:
        """The job's last task is done: tell its owner of record (the submitter), which records it."""
        del self.jobs[job_id]
        done = self.closed[job_id] = JobDone(job_id, self.now, ())
        self.send(self.source.pop(job_id), done)

    def on_Resubmit(self, msg: Resubmit, src: int) -> None:
        """A job handed again (this front end restarted and forgot it, or another one stopped answering)."""
        self.on_Job(msg.job, src)

    def on_Ping(self, msg: Ping, src: int) -> None:
        """The submitter asks about the jobs it handed here (after a cut): report those closed again, name the
        unknown."""
        unknown = []
        for job_id in msg.jobs:
            if job_id in self.jobs:
                continue
            done = self.closed.get(job_id)
            if done is None:
                unknown.append(job_id)
            else:
                self.send(src, done)
        self.send(src, Pong(self.index, tuple(unknown)))


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
