"""What a run measures: per-job and per-task records plus named counters.

Actors write into one ``Recorder`` as protocol events happen (a measuring instrument beside the
fabric, not a protocol channel). ``tools.metrics`` turns it into percentiles, CSVs and plots.
Times are integer microseconds of virtual time; -1 means "not yet".
"""

from __future__ import annotations

from bisect import insort

import attrs


@attrs.define(slots=True)
class TaskRecord:
    """One task's life. Allocation time (start - arrival) splits, as in the 2022 Megha paper, into
    framework queuing (waiting in a scheduler queue), processing (scheduler decision cost) and
    communication (the rest: messages in flight)."""

    job_id: int
    index: int
    arrival_us: int
    duration_us: int
    start_us: int = -1
    end_us: int = -1
    worker: int = -1
    queue_us: int = 0
    processing_us: int = 0
    attempts: int = 0

    @property
    def allocation_us(self) -> int:
        return self.start_us - self.arrival_us

    @property
    def communication_us(self) -> int:
        return self.allocation_us - self.queue_us - self.processing_us


@attrs.define(slots=True)
class JobRecord:
    """One job: arrival, ideal JRT (its longest task), completion, and whether it counts as short."""

    job_id: int
    arrival_us: int
    num_tasks: int
    ideal_jrt_us: int
    mean_task_us: float
    short: bool = True
    done: int = 0
    completion_us: int = -1

    @property
    def jrt_us(self) -> int:
        return self.completion_us - self.arrival_us

    @property
    def delay_us(self) -> int:
        """Delay in job response time: actual JRT - ideal JRT (000, Eq. 1)."""
        return self.jrt_us - self.ideal_jrt_us


@attrs.define
class Recorder:
    """Everything a run measures. ``busy`` logs (time, +/-units) so utilization can be rebuilt."""

    total_units: int = 0
    jobs: dict = attrs.Factory(dict)
    tasks: dict = attrs.Factory(dict)
    counters: dict = attrs.Factory(dict)
    busy: list = attrs.Factory(list)
    unschedulable: list = attrs.Factory(list)
    closed: int = 0
    expected: int | None = None

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def job_arrived(self, job, short: bool = True) -> None:
        self.jobs[job.job_id] = JobRecord(
            job.job_id, job.arrival_us, job.num_tasks, job.ideal_jrt_us, job.mean_task_us, short
        )
        for i, d in enumerate(job.durations_us):
            self.tasks[(job.job_id, i)] = TaskRecord(job.job_id, i, job.arrival_us, d)

    def task_started(self, job_id: int, index: int, now: int, worker: int, units: int = 1) -> None:
        rec = self.tasks[(job_id, index)]
        if rec.start_us != -1:
            raise AssertionError(f"task {job_id}.{index} started twice (worker {rec.worker}, then {worker})")
        rec.start_us = now
        rec.worker = worker
        self.busy.append((now, units))

    def task_finished(self, job_id: int, index: int, now: int, units: int = 1) -> None:
        """Record a task's end on its worker."""
        rec = self.tasks[(job_id, index)]
        if rec.end_us != -1:
            raise AssertionError(f"task {job_id}.{index} finished twice")
        if rec.start_us == -1:
            raise AssertionError(f"task {job_id}.{index} finished without starting")
        rec.end_us = now
        self.busy.append((now, -units))

    def job_completed(self, job_id: int, now: int) -> None:
        """The scheduler learnt that the job's last task is done: its response time ends here."""
        job = self.jobs[job_id]
        if job.completion_us != -1:
            raise AssertionError(f"job {job_id} completed twice")
        job.done = job.num_tasks
        job.completion_us = now
        self.closed += 1

    def job_unschedulable(self, job_id: int, tasks: tuple[int, ...]) -> None:
        """A job with tasks no machine can run: rejected at submission, never queued. Kept sorted by
        job id, so the list does not depend on which front end's task trio ran first."""
        insort(self.unschedulable, (job_id, tasks))
        self.closed += 1

    def submitted_all(self, count: int) -> None:
        self.expected = count

    @property
    def finished(self) -> bool:
        """Every submitted job has completed or been rejected."""
        return self.expected is not None and self.closed >= self.expected
