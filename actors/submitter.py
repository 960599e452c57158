"""Job submission: releases the workload's jobs at their arrival times to the schedulers' front ends.

The workload is an iterator read lazily, one job ahead, so a 300k-task trace is never held at once.
Targets (front-end actors, by name) are chosen round robin (default) or at random from the actor's seeded stream.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor

from .protocol import SubmitNext


class Submitter(Actor):
    def __init__(self, jobs, targets: list[str], recorder, *, short_cutoff_us: float, choice: str = "round-robin"):
        super().__init__()
        self.jobs = iter(jobs)
        self.target_names = targets
        self.targets: list[int] = []  # the front ends' actor ids, resolved from their names at start
        self.recorder = recorder
        self.short_cutoff_us = short_cutoff_us
        self.choice = choice
        self.next_job = None
        self.submitted = 0
        self.rr = 0

    def on_start(self) -> None:
        self.targets = [self.fabric.addr(name) for name in self.target_names]
        self.next_job = next(self.jobs, None)
        self._arm()

    def _arm(self) -> None:
        if self.next_job is None:
            self.recorder.submitted_all(self.submitted)
            if self.recorder.finished:
                self.stop_run()
            return
        self.set_timer(max(0, self.next_job.arrival_us - self.now), SubmitNext())

    def on_SubmitNext(self, msg, src) -> None:
        while self.next_job is not None and self.next_job.arrival_us <= self.now:
            job = self.next_job
            self.recorder.job_arrived(job, short=job.mean_task_us <= self.short_cutoff_us)
            if self.choice == "random":
                target = self.targets[self.rng.randrange(len(self.targets))]
            else:
                target = self.targets[self.rr % len(self.targets)]
                self.rr += 1
            self.send(target, job)
            self.submitted += 1
            self.next_job = next(self.jobs, None)
        self._arm()
