"""Job submission: releases the workload's jobs at their arrival times to the schedulers' front ends.

The workload is an iterator read lazily, one job ahead, so a 300k-task trace is never held at once.
Targets (front-end actors, by name) are chosen round robin (default), at random from the actor's seeded
stream, or by the job's task count modulo the number of targets (``task-count``: Megha's ``job_to_gm``);
with ``route`` (Megha's users) a job goes to its user's target.

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
  closed.
A restarted front end that announces itself (``Pong`` with ``unknown`` None) is asked about all it held.

Front ends of a scheduler whose recovery still reacts to the submitter's periodic pings (a front-end
class with ``SUBMITTER_PINGS`` true, the default) are watched as before connections instead: pinged every
``resubmit_us`` while they hold jobs, taken for down after ``PING_MISSES`` pings in a row missed, pinged
at most every ``PING_BACKOFF`` periods while their answers are clean; notices are not acted on.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor
from fedemu.fabric.messages import message
from fedemu.model import Job

from .protocol import SubmitNext
from .recovery import Break, Recovering, Retries, Suspects, backoff

PING_MISSES = 3  # pings in a row a front end may miss before it is taken for down (periodic pings)
PING_BACKOFF = 8  # a front end that keeps answering clean is pinged at most this many periods apart
GIVE_UP_ROUNDS = 30  # ping rounds with every front end down before the periodic pings slow down
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


@message("submit.ping_tick")
class PingTick:
    """Submitter's own timer: ping the front ends holding open jobs (``SUBMITTER_PINGS``)."""


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
        # the periodic pings of front ends whose recovery still reacts to them (``SUBMITTER_PINGS``)
        self.pinging = False
        self.missed = [0] * len(targets)  # pings in a row not answered
        self.every = [1] * len(targets)  # each front end's ping period, in periods (backing off)
        self.due = [0] * len(targets)  # when each front end is pinged next
        self.ticking = False
        self.hopeless = 0  # rounds with every target down

    def on_start(self) -> None:
        self.targets = [self.fabric.addr(name) for name in self.target_names]
        self.index_of = {a: t for t, a in enumerate(self.targets)}
        front_ends = [self.fabric.actor(a) for a in self.targets]
        self.pinging = self.resubmit_us > 0 and any(getattr(type(f), "SUBMITTER_PINGS", True)
                                                    for f in front_ends if f is not None)
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
        if self.pinging and not self.ticking:
            self.ticking = True
            self.set_timer(self.resubmit_us, PingTick())

    def on_JobDone(self, msg: JobDone, src: int) -> None:
        t = self.index_of.get(src)
        if t is not None and self.down[t] and not self.pinging:
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
        if self.pinging:
            clean = self.missed[t] == 1 and not self.down[t] and msg.unknown == ()
            self.every[t] = min(self.every[t] * 2, PING_BACKOFF) if clean else 1
            if not clean:
                self.due[t] = min(self.due[t], self.now + self.resubmit_us)
            self.missed[t] = 0
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
        if t is None or not self.resubmit_us or self.pinging:
            return  # not a front end; or not the owner of record; or its periodic pings watch it
        if brk.peer_lost_state:
            self._taken_down(t)
            self.suspects.down(brk.peer, self.now)
            self.asks.forget(brk.peer)
            self.lost.update(dict.fromkeys(self.held[t]))
            self._rehome()
        elif self.held[t]:
            self.asks.asked(brk.peer, PING)  # ``asks`` pings it after a backoff, and at each break until answered

    def _ping_again(self, front_end: int, key) -> None:
        self.send(front_end, Ping(tuple(self.held[self.index_of[front_end]])))

    def _taken_down(self, t: int) -> None:
        if not self.down[t]:
            self.down[t] = True
            self.recorder.count("front_ends_taken_down")

    def _rehome(self) -> None:
        """Hand the jobs lost with a front end to the others; with every one down, to the ones whose backoff
        is over (one still down refuses them: a new notice), else wait for the first backoff to end."""
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
        lost, self.lost = self.lost, {}
        for k, job_id in enumerate(lost):
            if job_id in self.open:
                self._resubmit(job_id, self._pick(self.open[job_id][0]) if not all(self.down) else
                               usable[k % len(usable)])

    def on_Rehome(self, msg, src) -> None:
        self.rehoming = False
        self._rehome()

    # ---- periodic pings (front ends with ``SUBMITTER_PINGS``) ------------------------------
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
                if not all(self.down):
                    for job_id in list(self.held[t]):
                        self._resubmit(job_id, self._pick(self.open[job_id][0]))
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
