"""Job submission: releases the workload's jobs at their arrival times to the schedulers' front ends.

The workload is an iterator read lazily, one job ahead, so a 300k-task trace is never held at once.
Targets (front-end actors, by name) are chosen round robin (default), at random from the actor's seeded
stream, by the job's task count modulo the number of targets (``task-count``: Megha's ``job_to_gm``), or by
the job's length (``by-length``: a long job, mean task time above the cutoff, to the last target, a short one
round robin to the others: a hybrid scheduler's long-job scheduler and distributed schedulers); with ``route``
(Megha's users) a job goes to its user's target.

With ``resubmit_us`` > 0 (a scheduler whose front ends report ``JobDone``) the submitter is each job's
owner of record: it keeps every job it handed out until its front end reports it done, and records the
job's completion (or rejection) itself, once, whichever front end reports first. So no job is lost when
a front end fails, and a job that two front ends both finish is counted once.

Jobs and reports travel on connections (docs/connections.md), which lose nothing while up, so a
fault-free run sends a job and its ``JobDone`` and nothing else. A front end's failure reaches the
submitter as a ``ConnectionBroken`` notice (``common.recovery``), and only then does it act, with
timers that run only while something is wrong:
- the front end crashed, or refused a job (it is down): it has forgotten what it held. It is taken for
  down (``front_ends_taken_down``) and its open jobs go to the other front ends (``Resubmit``); new jobs
  avoid it until it is heard from again or its backoff (``resubmit_us``, doubling per notice, up to a
  minute) is over. With every front end down, the jobs wait for the first backoff to end, and are
  handed out then (a front end still down refuses them: another notice, a longer backoff). After
  ``GIVE_UP_US`` of every front end down the submitter stops, so a run whose front ends all died for
  good ends.
- a cut outlasted the connection timeout (the front end is up, but a job or a report may be lost): the
  submitter asks it about the jobs it holds (``Ping``), again at each break after a backoff, until it
  answers (``Pong``); the jobs it does not hold are handed to it again, and it reports again those it
  closed (a Megha GM keeps no record of closed jobs: it names them, and adopts them again from its LMs,
  which say their tasks are done).
A restarted front end that announces itself (``Pong`` with ``unknown`` None) is asked about all it held.
There are no periodic pings: a front end that holds jobs for hours is asked nothing while nothing fails.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor
from fedemu.fabric.messages import message
from fedemu.model import Job

from .protocol import SubmitNext
from .recovery import Break, Recovering, Retries, Suspects

GIVE_UP_US = 6 * 3600 * 10**6  # every front end down this long: the submitter stops (a run whose front ends all
# died for good must end); an outage of every front end up to six hours is survived
PING = "ping"  # the one ask a submitter waits on per front end after a cut: its answer to a Ping


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


@message("submit.rehome")
class Rehome:
    """Submitter's own timer, while every front end is down: hand out their jobs again."""


class Submitter(Recovering, Actor):
    def __init__(self, jobs, targets: list[str], recorder, *, short_cutoff_us: float, choice: str = "round-robin",
                 resubmit_us: int = 0, route: tuple | None = None):
        super().__init__()
        self.jobs = iter(jobs)
        self.target_names = targets
        self.targets: list[int] = []  # the front ends' actor ids, resolved from their names at start
        self.index_of: dict[int, int] = {}  # actor id -> target index
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
        self.down = [False] * len(targets)  # taken for down (and not heard from since)
        self.all_down_at = -1  # since when every target is down (-1: one is up)
        base = max(resubmit_us, 1)
        self.suspects = Suspects(base)  # front ends a notice showed down, until their backoff is over
        self.asks = self.recover(Retries(self, "pings", base, self._ping_again))  # pings after a cut
        self.lost: dict[int, None] = {}  # jobs lost with a front end, to hand out again (in the order lost)
        self.rehoming = False  # a timer is pending to hand out the lost jobs

    def on_start(self) -> None:
        self.targets = [self.fabric.addr(name) for name in self.target_names]
        self.index_of = {a: t for t, a in enumerate(self.targets)}
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
        elif self.choice == "by-length":
            if n > 1 and job.mean_task_us <= self.short_cutoff_us:
                t = self.rr % (n - 1)
                self.rr += 1
            else:
                t = n - 1
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

    def on_JobDone(self, msg: JobDone, src: int) -> None:
        t = self.index_of.get(src)
        if t is not None and self.down[t]:
            self._heard(t)
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

    def _resubmit(self, job_id: int, target: int) -> None:
        entry = self.open[job_id]
        del self.held[entry[1]][job_id]
        entry[1], entry[2] = target, self.now
        self.held[target][job_id] = None
        self.recorder.count("jobs_resubmitted")
        self.send(self.targets[target], Resubmit(entry[0]))

    def on_Pong(self, msg: Pong, src: int) -> None:
        """A front end's answer; ``unknown`` None: it has just restarted (ask it at once about all it held)."""
        t = self.index_of[src]
        self.asks.answered(src, PING)
        self._heard(t)
        if msg.unknown is None:
            if self.held[t]:
                self.send(src, Ping(tuple(self.held[t])))
            return
        for job_id in msg.unknown:
            entry = self.open.get(job_id)
            if entry is not None and entry[1] == t:
                self._resubmit(job_id, t)

    # ---- recovery from connection notices ------------------------------------------------
    def _heard(self, t: int) -> None:
        """Front end ``t`` answered: it is up."""
        self.down[t] = False
        self.all_down_at = -1
        self.suspects.heard(self.targets[t])
        self.asks.heard(self.targets[t])
        if self.lost:
            self._rehome()  # jobs waiting for a front end to be up: one is

    def connection_broke(self, brk: Break) -> None:
        """A front end crashed or refused (down: it forgot its jobs), or a cut outlasted the connection
        timeout (it is up: ask it what it holds, ``asks``)."""
        t = self.index_of.get(brk.peer)
        if t is None or not self.resubmit_us:
            return  # not a front end; or not the owner of record
        if brk.peer_lost_state:
            self._taken_down(t)
            self.suspects.down(brk.peer, self.now)
            self.asks.forget(brk.peer)
            self.lost.update(dict.fromkeys(self.held[t]))
            self._rehome()
        elif self.held[t]:
            self.asks.asked(brk.peer, PING)  # ``asks`` pings it after a backoff, and at each break until answered

    def _ping_again(self, front_end: int, key) -> None:
        """Ask a front end what it holds of its jobs; one taken for down, only about those handed to it since
        (with every front end down, new jobs still go to one): those it held before were lost with its state
        and are handed out when it answers, and one of the later ones may have been lost with a connection
        a cut broke."""
        t = self.index_of[front_end]
        held = self.held[t]
        if self.down[t]:
            lost = self.lost
            held = [job_id for job_id in held if job_id not in lost]
        self.send(front_end, Ping(tuple(held)))

    def _taken_down(self, t: int) -> None:
        if not self.down[t]:
            self.down[t] = True
            self.recorder.count("front_ends_taken_down")

    def _rehome(self) -> None:
        """Hand the jobs lost with a front end to the others. With every one down, ask those whose backoff is
        over whether they are up (a ``Ping``: one still down refuses it, a new notice and a longer backoff;
        the first to answer gets the jobs), else wait for the first backoff to end."""
        if not self.lost:
            return
        n = len(self.targets)
        if all(self.down):
            if self.all_down_at < 0:
                self.all_down_at = self.now
            usable = [t for t in range(n) if self.suspects.usable(self.targets[t], self.now)]
            if not usable:
                if not self.rehoming and self.now - self.all_down_at < GIVE_UP_US:  # else: down for hours, give up
                    self.rehoming = True
                    self.set_timer(max(1, min(self.suspects.until.values()) - self.now), Rehome())
                return
            for t in usable:
                peer = self.targets[t]
                if not self.asks.waits_on(peer):
                    self.asks.asked(peer, PING)
                    self._ping_again(peer, PING)
            return
        lost, self.lost = self.lost, {}
        for job_id in lost:
            if job_id in self.open:
                self._resubmit(job_id, self._pick(self.open[job_id][0]))

    def on_Rehome(self, msg, src) -> None:
        self.rehoming = False
        self._rehome()
