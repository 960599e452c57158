"""A Hawk worker node: the generic Worker plus a queue of reservations, late binding, and work stealing.

It subclasses ``actors.common.worker.Worker`` (one actor per machine, as Sparrow's node). Reservations come
from the distributed schedulers (short jobs) and from the long-job scheduler (one per long task); the node
serves them in queue order (``choose``: FIFO here, Eagle's order in ``actors/eagle``), each when what is free
and not held covers its demand, by asking its scheduler for a task (``GetTask``). Later reservations never
overtake the one to serve. While a request is out its demand is held.

Stealing (Hawk 2015, 3.4; the Eagle authors' simulator): when the node is left with nothing queued or asked
and room to run a task, it asks a random node of the general partition for short reservations queued behind
long ones (``stealing.stealable``), up to ``steal_attempts`` nodes in turn until one gives some; then it waits
until it is idle again. What it steals keeps its scheduler and its ``origin`` (the node it was sent to), so the
scheduler counts it where it sent it.

A long task's end also goes to the long-job scheduler (when another scheduler placed it), whose view of
waiting times it keeps current; a restarted long-job scheduler asks what long work the node holds (``Load``).

Recovery (nothing is sent or timed without a fault): a request waits for its answer while the connection to
its scheduler lives; after a cut outlasting the connection timeout the node asks again with the same number
(``common.recovery.Retries``); a scheduler that crashed or refuses has forgotten its jobs, so its reservations
and requests are dropped. A node remembers what it lent to each thief; if the connection to that thief breaks
(it crashed, or a cut: the reservations may be lost with it or on the way) it tells each scheduler (``Lost``),
which probes again. A steal whose victim broke counts as a steal that found nothing.
"""

from __future__ import annotations

from collections import deque

import attrs

from fedemu.fabric.log import emit

from ..common.invariants import Violation
from ..common.protocol import RunTask
from ..common.recovery import Break, Recovering, Retries
from ..common.worker import Worker
from .events import STEAL
from .messages import Assign, Cancel, GetTask, Load, LoadAsk, Lost, Probe, StealAsk, Stolen
from .recovery import RESEND_US
from .stealing import runs_on, stealable

REQUEST_BITS = 32  # a request number is (incarnation << REQUEST_BITS) | sequence


class Reservation:
    """A queued reservation: its scheduler, job, probe group, the job's demand, constraints, estimated task
    time and class, and the node it was sent to (``origin``)."""

    __slots__ = ("scheduler", "job_id", "group", "demand", "constraints", "estimate_us", "long", "origin")

    def __init__(self, scheduler, job_id, group, demand, constraints, estimate_us, long, origin):
        self.scheduler = scheduler
        self.job_id = job_id
        self.group = group
        self.demand = demand
        self.constraints = constraints
        self.estimate_us = estimate_us
        self.long = long
        self.origin = origin

    def lent(self) -> tuple:
        """As it travels to a thief (``Stolen``)."""
        return (self.scheduler, self.job_id, self.group, self.demand, self.constraints, self.estimate_us,
                self.origin)


@attrs.frozen
class HawkNodeStatistics:
    name: str
    worker_id: int
    free: tuple
    running: int
    completed: int
    queued_probes: int
    outstanding: int
    long_work: int
    stolen: int


class HawkNode(Recovering, Worker):
    """``victims``: names of the general partition's nodes (whom it steals from; none: no stealing);
    ``long_scheduler``: the long-job scheduler's name."""

    def __init__(self, spec, recorder, *, victims: tuple = (), long_scheduler: str = "", steal_attempts: int = 0,
                 steal_limit: int = 0) -> None:
        super().__init__(spec, recorder)
        self.queue: deque = deque()  # Reservation, in arrival order
        self.held = [0] * len(spec.capacity)
        self.outstanding: dict[int, Reservation] = {}  # request -> the reservation it serves
        self.sequence = 0
        self.long_work = 0  # long reservations queued or asked for, and long tasks running
        self.long_tasks: dict[tuple, tuple] = {}  # (job, index) -> (estimate_us, start_us): long tasks running
        self.victim_names = victims  # resolved one at a time, when drawn
        self.long_scheduler_name = long_scheduler
        self.long_scheduler = -1
        self.steal_attempts = steal_attempts
        self.steal_limit = steal_limit
        self.steal_tries = 0  # victims asked in the current steal (0: not stealing)
        self.steal_spent = False  # a steal gave up: none again until new work comes or a task ends
        self.steal_victim = -1
        self.stolen = 0
        self.lent: dict[int, list] = {}  # thief -> [(scheduler, job, group, origin)] lent to it
        self.asks = self.recover(Retries(self, "requests", RESEND_US, self._ask_again, self._waiting_on))
        self.pick = None

    def on_start(self) -> None:
        if self.long_scheduler_name:
            self.long_scheduler = self.fabric.addr(self.long_scheduler_name)
        self.pick = self.rng.child("steal")

    # ---- reservations and late binding ---------------------------------------------------------
    def on_Probe(self, msg: Probe, src: int) -> None:
        self.enqueue(Reservation(src, msg.job_id, msg.group, msg.demand, msg.constraints, msg.estimate_us, msg.long,
                                 self.id))
        self._pump()

    def enqueue(self, r: Reservation) -> None:
        self.steal_spent = False
        self.queue.append(r)
        if r.long:
            self.long_work += 1

    def choose(self) -> int:
        """The queue position to serve next (-1: none): the head (FIFO)."""
        return 0 if self.queue else -1

    def _pump(self) -> None:
        """Ask for a task for each reservation to serve whose demand fits what is free and not held."""
        free, held = self.free, self.held
        while True:
            i = self.choose()
            if i < 0:
                break
            r = self.queue[i]
            demand = r.demand
            if any(free[k] - held[k] < d for k, d in enumerate(demand)):
                return
            if i:
                del self.queue[i]
            else:
                self.queue.popleft()
            for k, d in enumerate(demand):
                held[k] += d
            self.sequence += 1
            request = (self.incarnation << REQUEST_BITS) | self.sequence
            self.outstanding[request] = r
            self.asking(r, i)
            self.send(r.scheduler, GetTask(r.job_id, r.group, request, r.origin))
        self._maybe_steal()

    def asking(self, r: Reservation, position: int) -> None:
        """Hook: ``r``, taken from queue ``position``, is asked for now."""

    def on_Assign(self, msg: Assign, src: int) -> None:
        r = self._answered(msg.request, src)
        if r is None:  # a second answer to a request asked again after a break
            self.recorder.count("duplicate_answers_ignored")
        elif (msg.job_id, msg.index) in self.running:
            self._tell_too(msg, src, r)
        else:
            notify = (src,) if not r.long or src == self.long_scheduler or self.long_scheduler < 0 else \
                (src, self.long_scheduler)
            self.on_RunTask(RunTask(msg.job_id, msg.index, msg.duration_us, msg.demand, -1, notify), src)
            if r.long:
                self.long_tasks[(msg.job_id, msg.index)] = (r.estimate_us, self.now)
            self.assigned(r, msg)
        self._pump()

    def assigned(self, r: Reservation, msg) -> None:
        """Hook: ``r``'s request got a task."""

    def _tell_too(self, msg: Assign, src: int, r: Reservation) -> None:
        """The task runs here already (placed again after a break, or its job handed to another scheduler):
        nothing starts twice, and its end goes to this scheduler too."""
        key = (msg.job_id, msg.index)
        task = self.running[key]
        self.recorder.count("duplicate_launches_suppressed")
        if r.long:
            self.long_work -= 1  # the reservation ends without a task of its own
        if src not in task.notify:
            self.running[key] = attrs.evolve(task, notify=task.notify + (src,))

    def on_Cancel(self, msg: Cancel, src: int) -> None:
        r = self._answered(msg.request, src)
        if r is not None:
            if r.long:
                self.long_work -= 1
            self.cancelled(r, msg)
        if self.lent:
            self._forget_lent(src, msg.job_id, msg.group)
        self._pump()

    def cancelled(self, r: Reservation, msg) -> None:
        """Hook: ``r``'s request got a cancel."""

    def _answered(self, request: int, scheduler: int) -> Reservation | None:
        """Release the hold of ``request`` if it is still outstanding (its reservation), else None."""
        r = self.outstanding.pop(request, None)
        if r is None:
            return None
        held = self.held
        for k, d in enumerate(r.demand):
            held[k] -= d
        if self.asks.breaks:
            self.asks.heard(scheduler)
        return r

    def on_TaskTimer(self, msg, src: int) -> None:
        self.steal_spent = False
        super().on_TaskTimer(msg, src)
        if self.long_tasks.pop((msg.job_id, msg.index), None) is not None:
            self.long_work -= 1
        self._pump()

    # ---- stealing --------------------------------------------------------------------------------
    def _maybe_steal(self) -> None:
        """Idle (nothing queued or asked for, room for a task) and not stealing yet: ask a first victim."""
        if self.steal_tries or self.steal_spent or self.queue or self.outstanding or not self.steal_attempts:
            return
        names = self.victim_names
        if not names or (len(names) == 1 and names[0] == self.name):
            return
        if not any(f > 0 for f in self.free):
            return
        self.steal_tries = 1
        self._ask_victim()

    def _ask_victim(self) -> None:
        """Ask a node of the general partition drawn at random, never itself."""
        names, name = self.victim_names, self.name
        drawn = names[self.pick.randrange(len(names))]
        while drawn == name:
            drawn = names[self.pick.randrange(len(names))]
        victim = self.steal_victim = self.fabric.addr(drawn)
        self.recorder.count("steal_asks")
        self.send(victim, StealAsk(self.spec.constraints, self.spec.capacity))

    def on_StealAsk(self, msg: StealAsk, src: int) -> None:
        queue = self.queue
        longs = [r.long for r in queue]
        running_long = len(self.long_tasks) > 0
        take = [i for i in stealable(longs, running_long, self.steal_limit or len(queue))
                if runs_on(queue[i].constraints, queue[i].demand, msg.provides, msg.capacity)]
        if not take:
            self.send(src, Stolen(()))
            return
        given = [queue[i] for i in take]
        for i in reversed(take):
            del queue[i]
        self.lent.setdefault(src, []).extend((r.scheduler, r.job_id, r.group, r.origin) for r in given)
        self.send(src, Stolen(tuple(r.lent() for r in given)))

    def on_Stolen(self, msg: Stolen, src: int) -> None:
        if src != self.steal_victim or not self.steal_tries:
            if msg.reservations:  # an answer after its steal was given up (a break): keep what it gives
                self._take(msg.reservations, src)
                self._pump()
            return
        self.steal_victim = -1
        if msg.reservations:
            self.steal_tries = 0
            self._take(msg.reservations, src)
            self._pump()
        else:
            self._steal_failed()

    def _steal_failed(self) -> None:
        if self.steal_tries < self.steal_attempts:
            self.steal_tries += 1
            self._ask_victim()
        else:
            self.steal_tries = 0  # give up until idle again: new work, or a task's end
            self.steal_spent = True

    def _take(self, reservations: tuple, victim: int) -> None:
        for scheduler, job_id, group, demand, constraints, estimate_us, origin in reservations:
            self.enqueue(Reservation(scheduler, job_id, group, demand, constraints, estimate_us, False, origin))
        self.stolen += len(reservations)
        self.recorder.count("steals")
        self.recorder.count("stolen_probes", len(reservations))
        if self.fabric.event_log is not None:
            emit(self, STEAL, count=len(reservations), victim=self.fabric.name_of(victim))

    def _forget_lent(self, scheduler: int, job_id: int, group: int) -> None:
        """Every task of (job, group) is bound: what was lent of it no longer matters to recovery."""
        for thief in list(self.lent):
            kept = [e for e in self.lent[thief] if e[0] != scheduler or e[1] != job_id or e[2] != group]
            if kept:
                self.lent[thief] = kept
            else:
                del self.lent[thief]

    # ---- the long-job scheduler's view -----------------------------------------------------------
    def on_LoadAsk(self, msg: LoadAsk, src: int) -> None:
        work = [(r.job_id, -1, r.estimate_us, -1) for r in self.queue if r.long]
        work += [(r.job_id, -1, r.estimate_us, -1) for r in self.outstanding.values() if r.long]
        work += [(job_id, index, est, start) for (job_id, index), (est, start) in self.long_tasks.items()]
        self.send(src, Load(tuple(work)))

    # ---- recovery ---------------------------------------------------------------------------------
    def connection_broke(self, brk: Break) -> None:
        """A scheduler that crashed or refuses has forgotten its jobs: drop its reservations and requests (a
        cut with one that is up: ``asks`` asks again). A thief that broke may have lost what it was lent: tell
        the schedulers. A victim that broke gave nothing."""
        peer = brk.peer
        lent = self.lent.pop(peer, None)
        if lent:
            self._report_lost(lent)
        if peer == self.steal_victim and self.steal_tries:
            self.steal_victim = -1
            self._steal_failed()
        if not brk.peer_lost_state:
            return
        for request in self._waiting_on(peer):
            r = self._answered(request, peer)
            if r.long:
                self.long_work -= 1
        if any(r.scheduler == peer for r in self.queue):
            kept = deque()
            for r in self.queue:
                if r.scheduler != peer:
                    kept.append(r)
                elif r.long:
                    self.long_work -= 1
            self.queue = kept
        self._pump()

    def _report_lost(self, lent: list) -> None:
        counts: dict[tuple, int] = {}
        for entry in lent:
            counts[entry] = counts.get(entry, 0) + 1
        for (scheduler, job_id, group, origin), count in counts.items():
            self.recorder.count("lent_reported_lost", count)
            self.send(scheduler, Lost(job_id, group, origin, count))

    def _waiting_on(self, scheduler: int) -> list[int]:
        """The requests this node waits on ``scheduler`` to answer, in the order asked."""
        return [q for q, r in self.outstanding.items() if r.scheduler == scheduler]

    def _ask_again(self, scheduler: int, request: int) -> None:
        r = self.outstanding[request]
        self.recorder.count("requests_retried")
        self.send(scheduler, GetTask(r.job_id, r.group, request, r.origin))

    def statistics(self) -> HawkNodeStatistics:
        return HawkNodeStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                  self.completed, len(self.queue), len(self.outstanding), self.long_work, self.stolen)


# ---- end-of-run checks of the live nodes (the plug-in's ``checks``) ----------------------------------
def _nodes(fabric):
    for name in fabric.names:
        node = fabric.actor(fabric.addr(name))
        if isinstance(node, HawkNode):
            yield node


def node_books_balance(fabric) -> list[Violation]:
    """Every live node's books add up: free plus what its tasks use is its capacity; what it holds is the demand
    of its outstanding requests and never more than is free; its count of long work is its long reservations
    queued and asked for and its long tasks running."""
    out = []
    for node in _nodes(fabric):
        capacity = node.spec.capacity
        used = [0] * len(capacity)
        for task in node.running.values():
            used = [u + d for u, d in zip(used, task.demand)]
        held = [0] * len(capacity)
        for r in node.outstanding.values():
            held = [h + d for h, d in zip(held, r.demand)]
        long_work = sum(r.long for r in node.queue) + sum(r.long for r in node.outstanding.values()) + \
            len(node.long_tasks)
        problem = None
        if any(f + u != c for f, u, c in zip(node.free, used, capacity)):
            problem = f"free {tuple(node.free)} plus running {tuple(used)} is not its capacity {capacity}"
        elif held != node.held:
            problem = f"holds {tuple(node.held)} but its outstanding requests need {tuple(held)}"
        elif any(h > f for h, f in zip(node.held, node.free)):
            problem = f"holds {tuple(node.held)} for requests but only {tuple(node.free)} is free"
        elif long_work != node.long_work:
            problem = f"counts {node.long_work} long reservations and tasks but holds {long_work}"
        if problem:
            out.append(Violation("node_books_balance", node.name, node.now, problem))
    return out


def nodes_not_stuck(fabric) -> list[Violation]:
    """No live node is stuck: the reservation it would serve next does not fit what is free and not held (else it
    would have asked for it)."""
    out = []
    for node in _nodes(fabric):
        i = node.choose()
        if i < 0:
            continue
        r = node.queue[i]
        if all(f - h >= d for f, h, d in zip(node.free, node.held, r.demand)):
            out.append(Violation("nodes_not_stuck", node.name, fabric.now,
                                 f"the reservation it would serve next (job {r.job_id}) fits what is free and not "
                                 "held, but was never asked for"))
    return out
