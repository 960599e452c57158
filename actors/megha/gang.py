"""Gang scheduling in Megha (``--set gang=true``): every job is all-or-nothing, placed whole or not at all.

TEBAS (2023, 4.3) places a gang's tasks together; the Megha workshop paper (2022) names gang scheduling as
future work, so the protocol is ours. A GM's view is stale and a
gang's tasks can span LMs, so the GM cannot decide alone:

- **Placement.** The GM places every task of a waiting gang in its view (the ordinary search, one task
  after the other, allocating as it goes). If one task finds no worker, every allocation is undone and
  the gang stays queued; it is tried again once the view has learnt something new. Gangs are tried in
  arrival order; one that does not fit does not block a later one that does, up to ``GANG_MISSES`` gangs
  that do not fit per pass (a bounded backfill: each try scans the view once per task).
- **One LM** (always so in the centralized scheduler): a local decision. The GM sends the LM one
  ``GangReserve`` with ``commit`` set; the LM checks every task against its true state and launches all
  of them, or none and answers with the changes the GM has not seen.
- **Several LMs**: two phases. The GM sends each LM its part (``GangReserve``). An LM checks its part
  against its true state and holds the resources (a ``hold``, under a lease of ``gang_lease_s``) or holds
  nothing and votes no with the changes the GM has not seen. On every yes the GM commits
  (``GangCommit`` to each LM: the held tasks launch); on a no, or no answer after a few asks, it sends
  ``GangRelease`` to every LM of the attempt and the gang waits again. A yes for an attempt the GM has
  given up is answered with a release.
- **Faults.** A hold that sees neither a commit nor a release within its lease is let go by the LM: an LM
  whose GM died (or was cut off) holds nothing for long. A commit that finds no hold (it expired, or the
  LM restarted or a standby took over and lost it) is checked again against the LM's true state: the
  tasks that fit launch, the others are refused (``LaunchFailed``) and the GM places them again as
  ordinary tasks: the gang was committed whole, so they are its remainder, not a gang that starts alone.
  Committed tasks are asked again like any launch after a break (by resending the commit: the LM answers
  a running or done task as a duplicate). A reserve that finds part of the gang running or done (an old
  active committed an attempt the GM had given up) holds and launches the rest. A restarted (stateless) GM that adopts a resubmitted gang asks the LMs what
  of it runs: if nothing does, the LMs let go of its holds and it waits as a gang again; else the tasks
  not running are placed as the remainder.
- **With users** (``users`` > 0, ``fairness=off``): waiting gangs take turns by user, as tasks do
  (``gm_fairness``); nothing is preempted (Algorithm 2 stops single tasks, and a gang never runs part).
- **Where it lives.** ``GmGang`` and ``LmGang`` are components the GM and the LM hold (their ``gang``),
  called at a few hook points of the GM's and LM's own protocol.
- **What is guaranteed** (``gangs_whole`` in ``invariants``, from recorded facts): no task of a gang
  starts before the commit that held all of them at once, and a gang that has a task started has every
  task started by the end of the run. Tasks may start at different instants (their launches travel
  different links).
"""

from __future__ import annotations

import numpy as np

from fedemu.fabric.log import emit
from fedemu.fabric.messages import message
from fedemu.policies import tebas
from fedemu.actors.megha.change_log import NO_CAUSE

from ..common.events import JOB_UNSCHEDULABLE
from ..common.front_end import Pending
from ..common.recovery import backoff
from ..common.submitter import JobDone
from .messages import LaunchAccepted, LaunchFailed, TaskCompleted


# Asks of a gang's votes before the attempt is given up. Not a give-up of the gang: its holds are released
# and it waits to be placed again from the view, where an LM that does not answer has no room (the GM empties
# its view of an LM it cannot reach), so a dead peer moves the gang elsewhere and the run still ends.
VOTE_ASKS = 10

# ---- messages -------------------------------------------------------------------------------------
@message("megha.gang_reserve")
class GangReserve:
    """GM -> LM: hold every task of this part of gang attempt ``attempt`` (``tasks``: (index, worker,
    duration_us)), or none; ``commit``: the whole gang is here, launch it at once if it fits."""

    job_id: int
    attempt: int
    gm: int
    tasks: tuple
    demand: tuple
    commit: bool


@message("megha.gang_vote")
class GangVote:
    """LM -> GM: the part of ``attempt`` is held (or, with ``commit``, launched): ``ok``; or nothing is
    held, and here is every change that GM has not seen."""

    job_id: int
    attempt: int
    lm: int
    ok: bool
    workers: tuple
    frees: tuple


@message("megha.gang_commit")
class GangCommit:
    """GM -> LM: every part of the gang is held: launch ``tasks`` of attempt ``attempt`` (resent as a
    launch retry, then with the one task asked again)."""

    job_id: int
    attempt: int
    gm: int
    tasks: tuple
    demand: tuple


@message("megha.gang_release")
class GangRelease:
    """GM -> LM: let go of the hold of gang attempt ``attempt`` (another part failed, or the GM gave up)."""

    job_id: int
    attempt: int


@message("megha.gang_lease")
class GangLease:
    """LM's own timer: the hold of (``job_id``, ``attempt``) ends now unless committed or released."""

    job_id: int
    attempt: int


@message("megha.gang_timer")
class GangTimer:
    """GM's own timer: ask the LMs that have not voted on ``attempt`` again, or give it up."""

    job_id: int
    attempt: int
    asks: int


GANG_MISSES = 3  # waiting gangs a GM's pass may find no room for before it stops (the first blocks the rest
# only after these: a bounded backfill)

def gang_order(workers, constraints: tuple, providers: dict | None = None) -> list[int]:
    """The order a gang's tasks are placed in: the most constrained first (more constraints, then fewer
    machines providing them), ties in task order. ``providers`` caches the machine count per constraint set."""
    providers = {} if providers is None else providers
    for need in set(constraints):
        if need not in providers:
            want = frozenset(need)
            providers[need] = sum(1 for w in workers if want <= frozenset(w.constraints))
    return sorted(range(len(constraints)), key=lambda i: (-len(constraints[i]), providers[constraints[i]], i))


def whole_fit(workers, constraints: tuple, demand: tuple) -> bool:
    """Whether every task of a gang (``constraints[i]`` of task i, one ``demand``) fits the empty machines
    ``workers`` (WorkerSpecs) at once: first fit in ``gang_order``. A greedy check: a gang it refuses might
    fit by a cleverer packing (then it is rejected at submission all the same)."""
    left = [list(w.capacity) for w in workers]
    provides = [frozenset(w.constraints) for w in workers]
    start = {}  # per constraint set: the first worker that may still hold one more
    for i in gang_order(workers, constraints):
        need = constraints[i]
        want = frozenset(need)
        k = start.get(want, 0)
        while k < len(left) and not (want <= provides[k] and all(f >= d for f, d in zip(left[k], demand))):
            k += 1
        if k == len(left):
            return False
        start[want] = k
        for r, d in enumerate(demand):
            left[k][r] -= d
    return True


class GangFlight:
    """A gang attempt out for votes: its tasks as (index, lm, worker), the LMs yet to vote, asks."""

    __slots__ = ("job", "attempt", "since_us", "placed", "waiting", "asks")

    def __init__(self, job, attempt, since_us, placed):
        self.job = job
        self.attempt = attempt
        self.since_us = since_us
        self.placed = placed
        self.waiting = sorted({lm for _, lm, _ in placed})
        self.asks = 1

    def part(self, lm: int) -> tuple:
        job = self.job
        return tuple((i, w, job.durations_us[i]) for i, at, w in self.placed if at == lm)


# ---- the GM side ------------------------------------------------------------------------------------
class GmGang:
    """Gang jobs (``Job.gang``) placed whole by the protocol above: a component its ``GlobalManager``
    holds (``gang``), called at the GM's few hook points (a job admitted, a view learnt, a pass, a job
    adopted or closed, a launch resent) and acting through the GM (its view, its messages)."""

    def __init__(self, gm, machines) -> None:
        """``machines``: every worker's WorkerSpec (a gang that cannot fit them all at once is rejected)."""
        self.core = gm
        self.machines = tuple(machines)
        self.providers: dict = {}  # constraint set -> machines that provide it (``gang_order``)
        self.waiting: dict[int, list] = {}  # waiting gangs in arrival order: job -> [job, since_us, tried_at]
        self.flights: dict[int, GangFlight] = {}  # job -> its attempt out for votes
        self.committed: dict[int, int] = {}  # job -> the attempt that committed it (while the job is open)
        self.tentative = 0  # undone trial allocations: they move the search's counters but free nothing

    def admits(self, job, src: int) -> bool:
        """False, with the job rejected, for a gang that can never be held whole, even on idle machines."""
        gm = self.core
        if job.gang and not whole_fit(self.machines, job.constraints, job.demand):
            if gm.fabric.event_log is not None:
                emit(gm, JOB_UNSCHEDULABLE, job=job.job_id, tasks=tuple(range(job.num_tasks)))
            gm.send(src, JobDone(job.job_id, gm.now, tuple(range(job.num_tasks))))
            return False
        return True

    def arrived(self, job) -> None:
        """A gang admitted: it waits, since its arrival, for a pass that can place it whole."""
        self.waiting[job.job_id] = [job, self.core.arrived, -1]

    def learnt(self, lm: int, workers: tuple) -> None:
        """LM ``lm`` sent the values just learnt before it saw this GM's reservations it has not voted on
        yet (its messages come in order): take those reservations from the view again."""
        if not self.flights:
            return
        learnt = set(workers)
        search = self.core.search
        for flight in self.flights.values():
            if lm in flight.waiting:
                for _, at, w in flight.placed:
                    if at == lm and w in learnt:
                        search.take_back(lm, w, flight.job.demand)

    def adopted(self, job_id: int) -> bool:
        """A resubmitted gang the LMs answered for: True, waiting as a gang again, if nothing of it ran;
        else what is missing is its remainder, placed as ordinary tasks (False: the GM does that)."""
        gm = self.core
        job, _, running, done, _ = gm.recovery.adopting[job_id]
        if not job.gang:
            return False
        if not running and not done:  # nothing of it ran: a gang again
            del gm.recovery.adopting[job_id]
            self.waiting[job_id] = [job, gm.now, -1]
            gm.schedule()
            return True
        self.committed.setdefault(job_id, -1)  # it ran somewhere: what is missing is its remainder
        return False

    def closed(self, job_id: int) -> None:
        """The job is done (an earlier attempt ran it, while this GM had given that attempt up): it waits no
        more, and an attempt of it still out for votes is let go, or it would run again after its close."""
        self.committed.pop(job_id, None)
        self.waiting.pop(job_id, None)
        flight = self.flights.get(job_id)
        if flight is not None:
            self._abort(flight)

    def place(self, order=None) -> list[int]:
        """Try the waiting gangs (in ``order``, by default arrival) whose last try saw a view that has
        changed since, until ``GANG_MISSES`` of them did not fit (a try scans the view once per task: a
        pass stays cheap); returns the gangs placed (sent out for votes)."""
        gm = self.core
        search = gm.search
        misses = 0
        placed_jobs = []
        for k, job_id in enumerate(list(self.waiting) if order is None else order):
            if search.total_free <= 0 or misses >= GANG_MISSES:
                break
            entry = self.waiting[job_id]
            if entry[2] == search.gain_total - self.tentative:
                continue
            placed = self._fit(entry[0], k == 0)
            if placed is None:
                entry[2] = search.gain_total - self.tentative
                misses += 1
                continue
            del self.waiting[job_id]
            self._reserve(entry[0], entry[1], placed)
            placed_jobs.append(job_id)
        gm.charge("worker", search.take_scanned())
        return placed_jobs

    def _fit(self, job, head: bool) -> list | None:
        """Every task of ``job`` allocated in the view, as (index, lm, worker); or None, nothing allocated.
        The most constrained tasks go first (``gang_order``), placed by the worker-choice policy; if that
        leaves a task with no worker, the ``head`` of the waiting gangs tries first fit in machine order too
        (on idle machines that is ``whole_fit``: a gang admitted at submission fits once they drain)."""
        search = self.core.search
        if search.policy is not None and search.policy.name == "tebas" and len(set(job.constraints)) == 1:
            return self._tebas(job)
        order = gang_order(self.machines, job.constraints, self.providers)
        placed = self._place(job, order, False)
        if isinstance(placed, int) and placed and head:  # (a first task with no worker has none by first fit)
            placed = self._place(job, order, True)
        return placed if isinstance(placed, list) else None

    def _place(self, job, order: list, first_fit: bool) -> list | int:
        """The placement, or how many tasks were placed before one found no worker (all undone)."""
        search, demand = self.core.search, job.demand
        placed = []
        for i in order:
            signature = (job.constraints[i], demand)
            got = self._first_fit(signature) if first_fit else search.find(signature)
            if got is None:
                for _, lm, w in placed:
                    search.give_back(lm, w, demand)
                self.tentative += len(placed)
                return len(placed)
            lm, p, local = got
            placed.append((i, lm, search.allocate(lm, p, local, demand)))
        return placed

    def _tebas(self, job) -> list | None:
        """TEBAS's Algorithm 1 for the whole gang (policy tebas, one constraint set): every worker of the
        view with room for one task (this GM's partitions first), by Fitness for the job's alpha, in beta
        groups, up to RemainCap each (``policies.tebas.assign``); None when they cannot take every task. (As
        every machine is a candidate, this needs no first-fit fallback: on idle machines it places what
        ``whole_fit`` does.)"""
        search, demand = self.core.search, job.demand
        where, speeds, frees = [], [], []
        own_first = [search.home] + search.external_order  # equal Fitness: this GM's partitions first (Megha's
        for p in own_first:  # internal-first search; GMs that agree on Fitness then collide less)
            for lm, row in enumerate(search.views):
                view = row[p]
                cand = view.suitable(job.constraints[0], demand)
                search.scanned += view.n
                if len(cand):
                    where += [(lm, p, int(local)) for local in cand]
                    speeds.append(view.speed[cand])
                    frees.append(view.free[cand])
        if not where:
            return None
        fit = tebas.fitness(job.alpha, np.concatenate(speeds))
        room = tebas.remain_cap(np.concatenate(frees), demand)
        counts = tebas.assign(fit, room, job.num_tasks, search.policy.beta)
        if int(counts.sum()) < job.num_tasks:
            return None
        placed, index = [], iter(range(job.num_tasks))
        for k in np.nonzero(counts)[0].tolist():
            lm, p, local = where[k]
            for _ in range(int(counts[k])):
                placed.append((next(index), lm, search.allocate(lm, p, local, demand)))
        return placed

    def _first_fit(self, signature: tuple):
        """(lm, partition, local) of the first worker in machine order the view has room on, or None."""
        constraints, demand = signature
        search = self.core.search
        for lm, row in enumerate(search.views):
            for p, view in enumerate(row):
                if view.free_count:
                    cand = view.suitable(constraints, demand)
                    search.scanned += view.n
                    if len(cand):
                        return lm, p, int(cand.min())
        return None

    def _reserve(self, job, since_us: int, placed: list) -> None:
        gm = self.core
        gm.attempts += 1
        flight = self.flights[job.job_id] = GangFlight(job, gm.attempts, since_us, placed)
        gm.recorder.count("gang_attempts")
        now = gm.now
        for i, _, _ in placed:
            gm.recorder.task_dispatched(job.job_id, i, since_us, now)
        gm.launches += len(placed)
        self._ask_votes(flight)

    def _ask_votes(self, flight: GangFlight) -> None:
        gm = self.core
        job, single = flight.job, len({lm for _, lm, _ in flight.placed}) == 1
        for lm in flight.waiting:
            gm.to_lm(lm, GangReserve(job.job_id, flight.attempt, gm.gm, flight.part(lm), job.demand, single))
        gm.set_timer(backoff(gm.request_timeout_us, flight.asks), GangTimer(job.job_id, flight.attempt, flight.asks))

    def due(self, msg: GangTimer) -> None:
        flight = self.flights.get(msg.job_id)
        if flight is None or flight.attempt != msg.attempt or flight.asks != msg.asks:
            return
        if flight.asks < VOTE_ASKS:
            flight.asks += 1
            self._ask_votes(flight)
        else:
            self._abort(flight)
            self.core.schedule()

    def on_vote(self, msg: GangVote, src: int) -> None:
        gm = self.core
        flight = self.flights.get(msg.job_id)
        learn = msg.workers and gm.recovery.followed(msg.lm, src)
        if flight is None or flight.attempt != msg.attempt or msg.lm not in flight.waiting:
            if learn:
                gm.apply(msg.lm, msg.workers, msg.frees)
            given_up = flight is None or flight.attempt != msg.attempt
            if msg.ok and given_up and self.committed.get(msg.job_id) != msg.attempt:
                gm.to_lm(msg.lm, GangRelease(msg.job_id, msg.attempt))  # a yes for an attempt given up
            gm.schedule()
            return
        if not msg.ok:
            self._abort(flight)
            if learn:
                gm.apply(msg.lm, msg.workers, msg.frees)
        else:
            flight.waiting.remove(msg.lm)  # (the vote's values count this LM's part already)
            if learn:
                gm.apply(msg.lm, msg.workers, msg.frees)
            if not flight.waiting:
                self._commit(flight)
        gm.schedule()

    def _abort(self, flight: GangFlight) -> None:
        """Give the attempt up: every LM of it lets go, the view gets its allocations back, the gang waits."""
        gm = self.core
        job = flight.job
        del self.flights[job.job_id]
        gm.recorder.count("gang_aborts")
        for lm in sorted({lm for _, lm, _ in flight.placed}):
            gm.to_lm(lm, GangRelease(job.job_id, flight.attempt))
        for _, lm, w in flight.placed:
            gm.search.give_back(lm, w, job.demand)
        if job.job_id in gm.open_jobs:
            self.waiting[job.job_id] = [job, gm.now, -1]

    def _commit(self, flight: GangFlight) -> None:
        """Every part is held (or, for one LM, launched): the tasks are launches awaiting their end."""
        gm = self.core
        job = flight.job
        del self.flights[job.job_id]
        self.committed[job.job_id] = flight.attempt
        lms = sorted({lm for _, lm, _ in flight.placed})
        if len(lms) > 1:
            gm.recorder.gang_committed(job.job_id, gm.now)  # (a one-LM gang: the LM records its launch)
            for lm in lms:
                gm.to_lm(lm, GangCommit(job.job_id, flight.attempt, gm.gm, flight.part(lm), job.demand))
        left = gm.open_jobs.get(job.job_id)
        for i, lm, w in flight.placed:
            p = w // gm.search.per_partition
            gm.internal += p == gm.gm
            gm.external += p != gm.gm
            if left is None or left[1][i]:  # its completion came first (the vote was lost and asked again)
                continue
            task = Pending(job.job_id, i, job.durations_us[i], job.constraints[i], job.demand, flight.since_us)
            inflight = gm.new_flight(task, lm, w)
            inflight.attempt = flight.attempt
            gm.track(inflight)

    def resend(self, flight) -> bool:
        """A committed gang task asked again: the commit again, for that one task (True); False for any
        other launch."""
        task = flight.task
        if flight.attempt and flight.attempt == self.committed.get(task.job_id):
            self.core.to_lm(flight.lm, GangCommit(task.job_id, flight.attempt, self.core.gm,
                                                ((task.index, flight.worker, task.duration_us),), task.demand))
            return True
        return False


# ---- the LM side ------------------------------------------------------------------------------------
class LmGang:
    """Gang holds under a lease, launched on a commit: a component its ``LocalManager`` holds (``gang``)."""

    def __init__(self, lm, lease_us: int) -> None:
        self.core = lm
        self.lease_us = lease_us
        self.holds: dict[tuple[int, int], list] = {}  # (job, attempt) -> [owner GM, demand, tasks]
        self.ended: set[tuple[int, int]] = set()  # attempts committed or let go here (a late reserve: no)

    def held(self, w: int) -> list[int]:
        """The resources held on worker ``w`` for gangs (the workers do not know of holds)."""
        out = [0] * len(self.core.capacity[w])
        for _, demand, tasks in self.holds.values():
            for _, worker, _ in tasks:
                if worker == w:
                    for r, d in enumerate(demand):
                        out[r] += d
        return out

    def on_reserve(self, msg: GangReserve, src: int) -> None:
        lm = self.core
        if lm.hold(msg, src):
            return
        key = (msg.job_id, msg.attempt)
        gm = lm.gm_ids[msg.gm]
        tasks = tuple(t for t in msg.tasks if (msg.job_id, t[0]) not in lm.tasks and (msg.job_id, t[0]) not in lm.done)
        for index, _, _ in msg.tasks:  # a part that ended while no replica knew it (a takeover): its end, at once
            w = lm.done.get((msg.job_id, index))
            if w is not None:
                lm.send(gm, TaskCompleted(msg.job_id, index, lm.lm, w, tuple(lm.free[w])))
        if key in self.holds or not tasks:
            # a retry (the vote was lost or is late): yes again, with the part's workers as they are now, so
            # the GM's view does not count the reservation twice (values it learnt since may include it)
            workers = tuple(sorted({w for _, w, _ in msg.tasks}))
            lm.charge("change", len(workers))
            lm.send(gm, GangVote(msg.job_id, msg.attempt, lm.lm, True, workers,
                                 tuple(tuple(lm.free[w]) for w in workers)))
            return
        # some of the part run or ran already (another attempt's commit, by a replica the GM did not follow,
        # started the gang): the rest is its remainder, held and launched as the part
        bad = -1 if key not in self.ended else tasks[0][1]
        need: dict[int, list] = {}
        for _, w, _ in tasks:
            need.setdefault(w, [0] * len(msg.demand))
            for r, d in enumerate(msg.demand):
                need[w][r] += d
        for w in sorted(need):
            if bad < 0 and (w in lm.recovery.down or any(f < d for f, d in zip(lm.free[w], need[w]))):
                bad = w
        if bad >= 0:
            lm.recorder.count("gang_refusals")
            workers, frees = lm.change_log.since(msg.gm, always=bad)
            lm.charge("change", len(workers))
            lm.send(gm, GangVote(msg.job_id, msg.attempt, lm.lm, False, workers, frees))
            return
        for w in sorted(need):
            for r, d in enumerate(need[w]):
                lm.free[w][r] -= d
            lm.changed(w, msg.gm)
        self.holds[key] = [msg.gm, msg.demand, tasks]
        if msg.commit:  # the whole gang is here: a local decision
            lm.recorder.gang_committed(msg.job_id, lm.now)
            self._launch_held(key, msg.gm, tasks, msg.demand)
        else:
            lm.set_timer(self.lease_us, GangLease(msg.job_id, msg.attempt))
        workers, frees = lm.change_log.since(msg.gm) if lm.launch_replies else ((), ())
        if len(tasks) < len(msg.tasks):  # the GM took the whole part from its view: the part's workers as they are
            workers = tuple(sorted(set(workers) | {w for _, w, _ in msg.tasks}))
            frees = tuple(tuple(lm.free[w]) for w in workers)
        lm.charge("change", len(workers))
        lm.send(gm, GangVote(msg.job_id, msg.attempt, lm.lm, True, workers, frees))

    def on_commit(self, msg: GangCommit, src: int) -> None:
        if self.core.hold(msg, src):
            return
        self._launch_held((msg.job_id, msg.attempt), msg.gm, msg.tasks, msg.demand)

    def _launch_held(self, key, gm: int, tasks: tuple, demand: tuple) -> None:
        """Launch ``tasks`` of the gang attempt ``key``: from its hold, or checked again when not held."""
        lm = self.core
        hold = self.holds.get(key)
        held = {i for i, _, _ in hold[2]} if hold is not None else set()
        job_id, attempt = key
        for index, w, duration_us in tasks:
            tkey = (job_id, index)
            if tkey in lm.tasks:  # already running: a retried commit
                task = lm.tasks[tkey]
                task.owner = gm
                lm.recorder.count("duplicate_launches_suppressed")
                lm.send(lm.gm_ids[gm], LaunchAccepted(job_id, index, lm.lm, task.worker,
                                                      tuple(lm.free[task.worker]), task.end_us))
                continue
            if tkey in lm.done:
                lm.recorder.count("duplicate_launches_suppressed")
                lm.send(lm.gm_ids[gm], TaskCompleted(job_id, index, lm.lm, w, tuple(lm.free[w])))
                continue
            if index in held and w not in lm.recovery.down:
                held.discard(index)
                hold[2] = tuple(t for t in hold[2] if t[0] != index)  # its resources stay taken: it launches
                lm.recorder.task_handled(job_id, index, lm.arrived, lm.now)
                lm.start_task(tkey, w, gm, demand, duration_us)
                continue
            lm.recorder.count("gang_commits_rechecked")
            free = lm.free[w]
            lm.recorder.task_handled(job_id, index, lm.arrived, lm.now)
            if w not in lm.recovery.down and all(f >= d for f, d in zip(free, demand)):
                for r, d in enumerate(demand):
                    free[r] -= d
                lm.changed(w, gm)
                lm.start_task(tkey, w, gm, demand, duration_us)
            else:
                workers, frees = lm.change_log.since(gm, always=w)
                lm.send(lm.gm_ids[gm], LaunchFailed(job_id, index, attempt, lm.lm, workers, frees))
        if hold is not None and not hold[2]:
            del self.holds[key]
        self.ended.add(key)

    def on_release(self, msg: GangRelease, src: int) -> None:
        if self.core.hold(msg, src):
            return
        self._let_go((msg.job_id, msg.attempt))

    def on_lease(self, msg: GangLease) -> None:
        if self.core.active and (msg.job_id, msg.attempt) in self.holds:
            self.core.recorder.count("gang_leases_expired")
            self._let_go((msg.job_id, msg.attempt))

    def _let_go(self, key) -> None:
        lm = self.core
        self.ended.add(key)
        hold = self.holds.pop(key, None)
        if hold is None:
            return
        _, demand, tasks = hold
        for _, w, _ in tasks:
            if w in lm.recovery.down:
                continue  # a down worker's free stays 0 until it is reconciled (without the hold)
            for r, d in enumerate(demand):
                lm.free[w][r] += d
            lm.changed(w, NO_CAUSE)

    def adopting(self, job_id: int) -> None:
        """A GM adopts the job: the holds of earlier attempts go (it places what did not run afresh)."""
        for key in sorted(k for k in self.holds if k[0] == job_id):
            self._let_go(key)

    def reconciled(self, w: int) -> None:
        """The worker's record was rebuilt from what it runs; the holds on it are taken again (a hold that
        no longer fits is let go: its commit will be checked again)."""
        lm = self.core
        free = lm.free[w]
        for key in sorted(self.holds):
            _, demand, tasks = self.holds[key]
            n = sum(1 for t in tasks if t[1] == w)
            if not n:
                continue
            if all(f >= d * n for f, d in zip(free, demand)):
                for r, d in enumerate(demand):
                    free[r] -= d * n
            else:
                self.holds[key][2] = tuple(t for t in tasks if t[1] != w)
            lm.changed(w, NO_CAUSE)

    def forget(self) -> None:
        self.holds.clear()
