"""Job submission: releases the workload's jobs at their arrival times to the schedulers' front ends.

The workload is an iterator read lazily, one job ahead, so a 300k-task trace is never held at once.
Targets (front-end actors, by name) are chosen round robin (default), at random from the actor's seeded
stream, or by the job's task count modulo the number of targets (``task-count``: Megha's ``job_to_gm``);
with ``route`` (Megha's users) a job goes to its user's target.

With ``resubmit_us`` > 0 (a scheduler whose front ends report ``JobDone``: Megha's GMs) the submitter
is each job's owner of record: it keeps every job it handed out until its front end reports it done,
and records the job's completion (or rejection) itself, once, whichever front end reports first. So no
job is lost when a front end fails, and a job that two front ends both finish is counted once:
- every ``resubmit_us`` it pings each front end holding jobs handed out at least a period ago, listing
  them; the front end answers (``Pong``) with the ones it does not hold (it restarted and forgot them,
  or the job or its ``JobDone`` was lost), which are handed to it again (``Resubmit``); a restarted
  front end announces itself at once and is pinged about everything it held;
- a front end whose answer was clean (it holds every job asked about) is pinged half as often, down to
  once every ``PING_BACKOFF`` periods; any other answer, or a missed ping, brings it back to every period.
  (A restarted front end announces itself, so the slow pings only bound how late a lost job message
  or a front end that died for good is noticed, and how late an idle GM looks for overdue launches.)
- a front end that misses ``PING_MISSES`` pings in a row is taken for down: its open jobs go to the
  other front ends (``Resubmit``) and it gets no new ones until it answers again.
- while every front end is down it pings each period for ``GIVE_UP_ROUNDS`` rounds, then with the period
  doubling up to a minute (``common.recovery.backoff``), so a front end back from an outage of any length
  is found within a minute; after ``GIVE_UP_US`` of every front end down it stops, so a run whose front
  ends all died for good ends.
The cost is one ping and one answer per front end with open jobs per period.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor
from fedemu.fabric.messages import message
from fedemu.model import Job

from .protocol import SubmitNext
from .recovery import backoff

PING_MISSES = 3  # pings in a row a front end may miss before it is taken for down
PING_BACKOFF = 8  # a front end that keeps answering clean is pinged at most this many periods apart
GIVE_UP_ROUNDS = 30  # ping rounds with every front end down before the submitter slows down
GIVE_UP_US = 6 * 3600 * 10**6  # every front end down this long: the submitter stops (a run whose front ends all
# died for good must end); an outage of every front end up to six hours is survived, as before


@message("submit.job_done")
class JobDone:
    """Front end -> submitter: the job is done (at ``done_us``), or rejected: ``rejected`` lists the tasks
    no machine can run. Idempotent: only the first report of a job counts."""

    job_id: int
    done_us: int
    rejected: tuple


@message("submit.resubmit")
class Resubmit:
    """Submitter -> front end: a job handed out before and not reported done; some of it may have run."""

    job: Job


@message("submit.ping")
class Ping:
    """Submitter -> front end: do you hold these jobs?"""

    jobs: tuple


@message("submit.pong")
class Pong:
    """Front end -> submitter: I am up; these of the pinged jobs I do not hold (None: I have just
    restarted and hold nothing; a restarted front end says so unasked)."""

    gm: int
    unknown: tuple


@message("submit.ping_tick")
class PingTick:
    """Submitter's own timer: ping the front ends holding open jobs."""


class Submitter(Actor):
    def __init__(self, jobs, targets: list[str], recorder, *, short_cutoff_us: float, choice: str = "round-robin",
                 resubmit_us: int = 0, route: tuple | None = None):
        super().__init__()
        self.jobs = iter(jobs)
        self.target_names = targets
        self.targets: list[int] = []  # the front ends' actor ids, resolved from their names at start
        self.recorder = recorder
        self.short_cutoff_us = short_cutoff_us
        self.choice = choice
        self.route = route  # user -> target index (Megha's users: each user's queue lives at one GM)
        self.next_job = None
        self.submitted = 0
        self.rr = 0
        self.resubmit_us = resubmit_us
        self.open: dict[int, list] = {}  # job -> [job, target index, handed at] (owner of record)
        self.held: list[dict] = [{} for _ in targets]  # per target: its open jobs, in hand-out order
        self.missed = [0] * len(targets)  # pings in a row not answered
        self.down = [False] * len(targets)
        self.every = [1] * len(targets)  # each front end's ping period, in periods (backing off)
        self.due = [0] * len(targets)  # when each front end is pinged next
        self.ticking = False
        self.hopeless = 0  # rounds with every target down
        self.all_down_at = -1  # since when every target is down (-1: one is up)

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

    def _pick(self, job) -> int:
        """A target for ``job``: round robin, random or by task count, skipping targets taken for down."""
        n = len(self.targets)
        if self.route is not None and 0 <= job.user < len(self.route):
            t = self.route[job.user]
        elif self.choice == "random":
            t = self.rng.randrange(n)
        elif self.choice == "task-count":
            t = job.num_tasks % n
        else:
            t = self.rr % n
            self.rr += 1
        if self.down[t] and not all(self.down):
            live = [i for i in range(n) if not self.down[i]]
            t = live[(t + self.rr) % len(live)]
        return t

    def on_SubmitNext(self, msg, src) -> None:
        while self.next_job is not None and self.next_job.arrival_us <= self.now:
            job = self.next_job
            self.recorder.job_arrived(job, short=job.mean_task_us <= self.short_cutoff_us)
            target = self._pick(job)
            self.send(self.targets[target], job)
            if self.resubmit_us:
                self._hold(job, target)
            self.submitted += 1
            self.next_job = next(self.jobs, None)
        self._arm()

    # ---- owner of record ----------------------------------------------------------------
    def _hold(self, job, target: int) -> None:
        self.open[job.job_id] = [job, target, self.now]
        self.held[target][job.job_id] = None
        if not self.ticking:
            self.ticking = True
            self.set_timer(self.resubmit_us, PingTick())

    def on_JobDone(self, msg: JobDone, src: int) -> None:
        entry = self.open.pop(msg.job_id, None)
        if entry is None:  # a second report (two front ends, or a duplicate): the first counted
            self.recorder.count("repeated_job_reports")
            return
        del self.held[entry[1]][msg.job_id]
        if msg.rejected:
            self.recorder.job_unschedulable(msg.job_id, msg.rejected)
            self.recorder.count("unschedulable_tasks", len(msg.rejected))
        else:
            self.recorder.job_completed(msg.job_id, msg.done_us)
        if self.recorder.finished:
            self.stop_run()

    def on_PingTick(self, msg, src) -> None:
        self.ticking = False
        if not self.open:
            return
        old = self.now - self.resubmit_us
        for t, held in enumerate(self.held):
            if not held and not self.down[t] or self.due[t] > self.now:
                continue
            if self.missed[t]:
                self.every[t] = 1
            self.due[t] = self.now + self.every[t] * self.resubmit_us
            self.missed[t] += 1
            if self.missed[t] > PING_MISSES and not self.down[t]:
                self._taken_down(t)
            jobs = tuple(j for j in held if self.open[j][2] <= old)
            if jobs or self.down[t]:
                self.send(self.targets[t], Ping(jobs))
            else:
                self.missed[t] = 0  # nothing old enough to ask about
        if all(self.down):
            self.hopeless += 1
            self.all_down_at = self.now if self.all_down_at < 0 else self.all_down_at
        else:
            self.hopeless, self.all_down_at = 0, -1
        if self.hopeless == 0 or self.now - self.all_down_at < GIVE_UP_US:
            self.ticking = True
            self.set_timer(backoff(self.resubmit_us, max(self.hopeless - GIVE_UP_ROUNDS, 0) + 1), PingTick())

    def _taken_down(self, t: int) -> None:
        """Front end ``t`` stopped answering: its open jobs go to the others."""
        self.down[t] = True
        self.recorder.count("front_ends_taken_down")
        if all(self.down):
            return
        for job_id in list(self.held[t]):
            self._resubmit(job_id, self._pick(self.open[job_id][0]))

    def _resubmit(self, job_id: int, target: int) -> None:
        entry = self.open[job_id]
        del self.held[entry[1]][job_id]
        entry[1], entry[2] = target, self.now
        self.held[target][job_id] = None
        self.recorder.count("jobs_resubmitted")
        self.send(self.targets[target], Resubmit(entry[0]))

    def on_Pong(self, msg: Pong, src: int) -> None:
        """A front end's answer; ``unknown`` None: it has just restarted (ping it at once about all it held)."""
        t = self.targets.index(src)
        clean = self.missed[t] == 1 and not self.down[t] and msg.unknown == ()
        self.every[t] = min(self.every[t] * 2, PING_BACKOFF) if clean else 1
        if not clean:
            self.due[t] = min(self.due[t], self.now + self.resubmit_us)
        self.missed[t] = 0
        self.down[t] = False
        if msg.unknown is None:
            if self.held[t]:
                self.send(src, Ping(tuple(self.held[t])))
            return
        for job_id in msg.unknown:
            entry = self.open.get(job_id)
            if entry is not None and entry[1] == t:
                self._resubmit(job_id, t)
