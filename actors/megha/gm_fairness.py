"""The GM's side of Megha's global fairness (Megha 2022, IV-C and Algorithm 2): one queue per user served
round robin, and preemption requests when a user under its share finds no worker.

- **Users and queues.** Each job belongs to a user (``Job.user``); the submitter sends it to its user's GM
  (``FairConfig.user_gm``). A GM keeps one task queue per user it has jobs of, served round robin, one
  task per user per turn (within a user's queue, as without users: oldest signature first). With
  fairness on, each turn serves the users below their share before those at or over it (our addition:
  without it two users of one GM trade a freed worker back and forth by preemption, one per completion).
- **Contention only.** A pass places what the view allows (internal partitions, then repartitions) and
  checks nothing about shares. Only a user none of whose queued tasks finds a worker is "blocked"; with
  ``fairness=on``, for each blocked user in turn, Algorithm 2 (``policies.fair_share.preempt_order``)
  names the users whose tasks may be preempted, most in violation first, and the GM looks, in its view,
  for a worker that satisfies the task's constraints and where the fewest tasks of that user make room
  (``choose_victims``). It sends the LM a ``Preempt`` (victims and the task to launch) and updates its
  view as if it succeeded; a user at or over its share (or that would be with the task) keeps waiting.
- **What a GM knows.** Share consumed is the dominant-resource fraction of the datacenter's total
  capacity that a user's running tasks hold. A GM knows its own users' consumption exactly, as its
  launches in flight (sent, not yet answered by a completion, failure or preemption notice: never below
  the truth), and learns every other user's from the LMs: each heartbeat delta,
  snapshot and launch or preemption reply carries, per changed worker, the tasks running there with
  their user (``holders``): the per-user consumption, at the granularity of the changed workers only.
- **Refusals.** A ``PreemptFailed`` brings the LM's true state; the task goes to the front of its queue
  and the next pass plans again with what was learnt (Algorithm 2's loop over other candidates). After
  ``PREEMPT_TRIES`` refusals in a row no preemption is planned until the next heartbeat. Only a request
  planned after the last refusal was learnt counts: the requests one pass sent on the same stale view
  (tasks that ended together) are one try, not several.
- **Gangs** (``gang=true``, our extension): with users, waiting gangs take turns by user as tasks do
  (``interleave``), and nothing is preempted: Algorithm 2 stops single tasks, and a gang's tasks start
  together and never run alone, so gangs with users need ``fairness=off`` (a one-line error otherwise).
- **Preempted tasks.** A ``Preempted`` notice (from the LM where the task ran) sends the task back to its
  user's queue, from scratch, once: only the notice naming the launch this GM has in flight counts.
"""

from __future__ import annotations

import attrs

from fedemu.policies.fair_queue import HIGH, FairQueue
from fedemu.policies.fair_share import Shares, choose_victims, dominant, preempt_order

from .messages import Preempt

PREEMPT_TRIES = 3  # refused preemption requests in a row before a GM waits for a heartbeat


@attrs.frozen
class FairConfig:
    """A run's users: shares, each user's GM, whether Algorithm 2 runs, the datacenter's total capacity,
    and per LM the constraint set each worker provides (to match a task to a preemption target)."""

    shares: Shares
    user_gm: tuple
    preempt: bool
    total: tuple
    provides: tuple  # provides[lm][w]: frozenset of constraint ids


class UserQueues:
    """One ``FairQueue`` per user, served round robin; the one-class queue interface the GM uses."""

    def __init__(self, user_of, ranked: bool) -> None:
        self.user_of = user_of
        self.ranked = ranked
        self.by_user: dict[int, FairQueue] = {}
        self.sizes = [0, 0]  # items waiting (HIGH only), as FairQueue's
        self.rejected = 0
        self.turn = 0  # the user served first in the next pass

    def __len__(self) -> int:
        return self.sizes[HIGH]

    def _of(self, item) -> FairQueue:
        user = self.user_of(item)
        q = self.by_user.get(user)
        if q is None:
            q = self.by_user[user] = FairQueue(float("inf"), ranked=self.ranked)
        return q

    def push(self, cls, item, key=None, rank: int = 0) -> None:
        self._of(item).push(HIGH, item, key, rank)
        self.sizes[HIGH] += 1

    def push_front(self, cls, item, key=None) -> None:
        self._of(item).push_front(HIGH, item, key)
        self.sizes[HIGH] += 1

    def keys(self, cls) -> int:
        return sum(q.keys(HIGH) for q in self.by_user.values())

    def rotation(self) -> list[int]:
        """Users with queued tasks, from this pass's first turn on."""
        users = sorted(u for u, q in self.by_user.items() if q.sizes[HIGH])
        cut = next((i for i, u in enumerate(users) if u >= self.turn), 0)
        return users[cut:] + users[:cut]

    def take(self, user: int, accept):
        """The user's oldest task that ``accept`` places (see ``FairQueue.take``), or None."""
        q = self.by_user[user]
        before = q.rejected
        got = q.take(HIGH, accept)
        self.rejected += q.rejected - before
        if got is not None:
            self.sizes[HIGH] -= 1
        return got

    def reopen(self) -> None:
        for q in self.by_user.values():
            q.reopen()


class Flights(dict):
    """A GM's launches in flight ((job, index) -> Inflight), keeping each user's units in flight: the GM's
    own, exact view of what its users consume (a launch counts from when it is sent until it is answered)."""

    def __init__(self, user_of, users: int, width: int) -> None:
        super().__init__()
        self.user_of = user_of
        self.units = [[0] * width for _ in range(users)]
        self.changed: set[int] = set()  # the users whose units changed since ``GmFairness._use`` last looked

    def _count(self, flight, sign: int) -> None:
        user = self.user_of(flight.task)
        if 0 <= user < len(self.units):
            self.changed.add(user)
            units = self.units[user]
            for r, d in enumerate(flight.task.demand):
                units[r] += sign * d

    def __setitem__(self, key, flight) -> None:
        old = self.get(key)
        if old is not None:
            self._count(old, -1)
        self._count(flight, 1)
        super().__setitem__(key, flight)

    def __delitem__(self, key) -> None:
        self._count(self[key], -1)
        super().__delitem__(key)

    def pop(self, key, *default):
        if key in self:
            self._count(self[key], -1)
        return super().pop(key, *default)


class GmFairness:
    """User queues, the holders view and Algorithm 2 of one GM: a component its ``GlobalManager`` holds
    (``users``). The GM serves its queue (``queue``) and counts its launches in flight (``flights``)."""

    def __init__(self, gm, fair: FairConfig, ranked: bool) -> None:
        self.core = gm
        self.fair = fair
        self.job_user: dict[int, int] = {}
        self.queue = UserQueues(lambda task: self.job_user.get(task.job_id, 0), ranked)
        n_users = len(fair.shares)
        self.holders = [dict() for _ in gm.lm_names]  # per LM: worker -> ((job, index, user, demand), ...)
        self.usage = [[0] * len(fair.total) for _ in range(n_users)]  # per user: units held, per resource
        self.user_at = [dict() for _ in range(n_users)]  # per user: (lm, worker) -> its tasks there
        self.busy_until: dict[tuple, int] = {}  # (lm, worker) -> a preemption there is in flight until then
        self.refusals = 0
        self.learnt = 0  # ``gm.attempts`` when the last refusal was learnt: requests up to it planned without it
        self.calm = False  # too many refusals in a row: no preemption until the next heartbeat
        self.flights = Flights(self.user_of, n_users, len(fair.total))
        self.mine = frozenset(u for u, g in enumerate(fair.user_gm) if g == gm.gm)  # the users queued here
        self.changed: set[int] = set(range(n_users))  # the users whose ``usage`` changed since ``_use``
        self.use = [0.0] * n_users  # each user's share consumed, as ``_use`` last worked it out
        self.orders: dict = {}  # Algorithm 2's orders over ``use``: (user, demand) -> order
        self.places: dict = {}  # user -> the (lm, worker) places it runs tasks at, in order
        self.gang_turn = 0  # the user whose waiting gang is tried first in the next pass (gang=true)

    def opened(self, job) -> None:
        """The GM opened ``job``: its tasks are its user's."""
        self.job_user[job.job_id] = job.user

    def user_of(self, task) -> int:
        return self.job_user.get(task.job_id, -1)

    # ---- the holders view ----------------------------------------------------------------
    def _set_holders(self, lm: int, w: int, row: tuple) -> None:
        """Worker ``w`` of LM ``lm`` runs ``row`` now; keep each user's consumption in step."""
        old = self.holders[lm].get(w, ())
        for sign, tasks in ((-1, old), (1, row)):
            for _, _, user, demand in tasks:
                if 0 <= user < len(self.usage):
                    self.changed.add(user)
                    units = self.usage[user]
                    for r, d in enumerate(demand):
                        units[r] += sign * d
                    at = self.user_at[user]
                    n = at.get((lm, w), 0) + sign
                    if n:
                        at[(lm, w)] = n
                    else:
                        at.pop((lm, w), None)
        if row:
            self.holders[lm][w] = row
        else:
            self.holders[lm].pop(w, None)

    def learn_holders(self, lm: int, workers: tuple, holders: tuple) -> None:
        for w, row in zip(workers, holders):
            self._set_holders(lm, w, tuple(tuple(t) for t in row))

    def forget_holders(self, lm: int) -> None:
        for w in sorted(self.holders[lm]):
            self._set_holders(lm, w, ())

    def hold_own(self, flight) -> None:
        task = flight.task
        row = self.holders[flight.lm].get(flight.worker, ())
        if not any(t[0] == task.job_id and t[1] == task.index for t in row):
            mine = (task.job_id, task.index, self.user_of(task), task.demand)
            self._set_holders(flight.lm, flight.worker, row + (mine,))

    def release_own(self, lm: int, w: int, job_id: int, index: int) -> None:
        row = self.holders[lm].get(w, ())
        kept = tuple(t for t in row if t[0] != job_id or t[1] != index)
        if len(kept) != len(row):
            self._set_holders(lm, w, kept)

    # ---- scheduling ------------------------------------------------------------------------
    def schedule(self) -> None:
        """One pass: users round robin, one task each per turn, until no user's task fits the view; then,
        with fairness on, Algorithm 2 for each user left blocked."""
        gm = self.core
        queue, search = self.queue, gm.search
        if not queue.sizes[HIGH]:
            return
        gm.passes += 1
        rejected = queue.rejected
        users = queue.rotation()
        turn = users
        while turn and search.total_free > 0:
            if self.fair.preempt:  # users under their share take their turn first (fewer preemptions)
                turn = sorted(turn, key=self._at_share)
            again = []
            for u in turn:
                if search.total_free <= 0 or not queue.by_user[u].sizes[HIGH]:
                    continue
                got = queue.take(u, search.find_key)
                if got is not None:
                    gm.launch(got[0], *got[1])
                    queue.turn = u + 1
                    again.append(u)
            turn = again
        gm.charge("worker", search.take_scanned())
        if queue.rejected != rejected:
            queue.reopen()
            gm.recorder.count("reschedules", queue.rejected - rejected)
        if self.fair.preempt and not self.calm:
            for u in users:
                if self._use()[u] >= self.fair.shares.fractions[u]:
                    continue  # at or over its share: Algorithm 2 preempts nothing for it (preempt_order)
                while queue.by_user[u].sizes[HIGH]:
                    got = queue.take(u, lambda k, u=u: self._plan(u, search.signatures[k]))
                    if got is None:
                        break
                    self._preempt(got[0], *got[1])
            queue.reopen()

    def _at_share(self, user: int) -> bool:
        """Whether one of this GM's users holds its share already (its launches in flight)."""
        fair = self.fair
        return user in self.mine and dominant(self.flights.units[user], fair.total) >= fair.shares.fractions[user]

    def _use(self) -> list[float]:
        """Each user's share consumed (this GM's users: their launches in flight, exact; the others' from
        the LMs' holders), worked out again only for the users whose consumption changed; Algorithm 2's
        orders and the places of those users are dropped then. A pass plans for many tasks over one view:
        with many users, working every user out again for each task dominated the run (docs/fairness)."""
        changed = self.changed | self.flights.changed
        if changed:
            own, total, usage, use = self.flights.units, self.fair.total, self.usage, self.use
            for u in changed:
                use[u] = dominant(own[u] if u in self.mine else usage[u], total)
                self.places.pop(u, None)
            self.changed.clear()
            self.flights.changed.clear()
            self.orders.clear()
        return self.use

    def _places_of(self, user: int) -> list:
        """The (lm, worker) places ``user`` runs tasks at, in order (kept while its consumption is unchanged)."""
        self._use()
        got = self.places.get(user)
        if got is None:
            got = self.places[user] = sorted(self.user_at[user])
        return got

    def _plan(self, user: int, signature: tuple):
        """Algorithm 2 for a task of ``user`` with ``signature``: (lm, worker, victim user, victims), or None."""
        constraints, demand = signature
        fair = self.fair
        use = self._use()
        order = self.orders.get((user, demand))
        if order is None:
            order = self.orders[(user, demand)] = preempt_order(user, use, fair.shares, dominant(demand, fair.total))
        need = frozenset(constraints)
        search = self.core.search
        now = self.core.now
        for victim in order:
            for lm, w in self._places_of(victim):
                if self.busy_until.get((lm, w), -1) > now or not need <= fair.provides[lm][w]:
                    continue
                running = [((j, i), d) for j, i, u, d in self.holders[lm].get(w, ()) if u == victim]
                p, local = divmod(w, search.per_partition)
                victims = choose_victims(running, search.views[lm][p].free_of(local), demand)
                if victims:
                    return lm, w, victim, victims
        return None

    def _preempt(self, task, lm: int, w: int, victim: int, victims: tuple) -> None:
        """Ask LM ``lm`` to stop ``victims`` on worker ``w`` and launch ``task`` there; the view takes it as done."""
        gm = self.core
        user = self.user_of(task)
        gm.recorder.task_dispatched(task.job_id, task.index, task.since_us, gm.now)
        gm.recorder.count("preemption_attempts")
        gm.recorder.count_user("preemption_attempts", user)
        flight = gm.new_flight(task, lm, w)
        gm.attempts += 1
        flight.attempt = gm.attempts
        external = w // gm.search.per_partition != gm.gm
        gm.to_lm(lm, Preempt(task.job_id, task.index, task.duration_us, task.demand, w, gm.gm, external,
                             flight.attempt, user, task.constraints, victim, victims))
        gm.track(flight)
        self.busy_until[(lm, w)] = gm.now + gm.launch_timeout_us
        row = self.holders[lm].get(w, ())
        self._set_holders(lm, w, tuple(t for t in row if (t[0], t[1]) not in victims))
        self.hold_own(flight)

    # ---- answers ------------------------------------------------------------------------------
    def on_preempt_failed(self, msg, src: int) -> None:
        gm = self.core
        if gm.recovery.followed(msg.lm, src):
            gm.apply(msg.lm, msg.workers, msg.frees, msg.holders)
        key = (msg.job_id, msg.index)
        flight = self.flights.get(key)
        if flight is not None and flight.attempt == msg.attempt:
            del self.flights[key]
            self.busy_until.pop((flight.lm, flight.worker), None)
            self.release_own(flight.lm, flight.worker, msg.job_id, msg.index)
            if flight.attempt > self.learnt:  # planned knowing every earlier refusal: a new try
                self.refusals += 1
            self.learnt = gm.attempts
            if self.refusals >= PREEMPT_TRIES:
                self.calm = True
                self.refusals = 0
            gm.requeue(flight.task, front=True)
        gm.schedule()

    def on_preempted(self, msg, src: int) -> None:
        """One of this GM's tasks was preempted: queue it again, from scratch (once per launch)."""
        gm = self.core
        key = (msg.job_id, msg.index)
        flight = self.flights.get(key)
        if flight is None or flight.attempt != msg.attempt or flight.lm != msg.lm or msg.job_id not in gm.open_jobs:
            return
        del self.flights[key]
        self.release_own(msg.lm, msg.worker, msg.job_id, msg.index)
        gm.recorder.task_requeued(msg.job_id, msg.index)
        gm.recorder.count_user("preempted", self.user_of(flight.task))
        gm.requeue(flight.task)
        gm.schedule()

    def interleave(self, jobs) -> list[int]:
        """Waiting gangs (job ids in arrival order), one per user in turn from ``gang_turn`` on, each user's
        in arrival order: gangs take turns by user as tasks do (no preemption: fairness=off)."""
        by_user: dict[int, list] = {}
        for job_id in jobs:
            by_user.setdefault(self.job_user.get(job_id, 0), []).append(job_id)
        users = sorted(by_user)
        cut = next((i for i, u in enumerate(users) if u >= self.gang_turn), 0)
        rows = [by_user[u] for u in users[cut:] + users[:cut]]
        return [row[k] for k in range(max(map(len, rows), default=0)) for row in rows if k < len(row)]

    def gangs_placed(self, jobs: list[int]) -> None:
        """The next pass starts with the user after the one whose gang was placed last."""
        if jobs:
            self.gang_turn = self.job_user.get(jobs[-1], 0) + 1

    def heard_heartbeat(self) -> None:
        self.calm = False
        self.refusals = 0
