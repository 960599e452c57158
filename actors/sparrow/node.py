"""A Sparrow worker node: the generic Worker plus a FIFO queue of probes and the late-binding handshake.

It subclasses ``actors.worker.Worker`` (one actor per machine, so a probe, a request and a launch cost
exactly the network hops Sparrow pays, with no extra hop to a separate worker actor). The Worker part
still runs tasks, asserts capacity and sends ``TaskFinished`` (here to the task's scheduler).

Choices where the Sparrow paper leaves room:
- Strict FIFO: the head probe waits until the free capacity not already held for an outstanding request
  covers its demand; later probes never overtake it.
- While a request is out, its demand is held, so the answer can always run; a cancel releases it.

Recovery (no message and almost no timer event without a fault):
- A request unanswered after ``request_timeout`` is asked again (same number: the scheduler answers a
  repeat with its first answer) up to ``request_retries`` times, then given up: its hold is released. A
  hold only matters while it keeps the head probe waiting, so the node only times requests out then (one
  timer, armed for the oldest request, only while the head probe would fit but for the holds); a lost
  ``Assign`` is also resent by the scheduler when it asks about the overdue result (see below).
- A late ``Assign`` for a request given up on (or sent to an earlier incarnation) runs if it fits what is
  free and not held, else it is refused (``Reject``) so the scheduler places the task again. An answer to
  a request already answered (a duplicate) is ignored; a launch of a task that runs here, or whose result
  is not yet acknowledged, starts nothing.
- A result is kept until the scheduler acknowledges it and sent again when the scheduler asks for it
  (``TaskQuery``, which the node answers from what it knows: it runs the task, it is still asking for it,
  or nothing: a restarted node has lost its queue and its tasks, and the scheduler places them again).
"""

from __future__ import annotations

from collections import deque

import attrs

from ..common.deadlines import Deadlines
from ..common.invariants import Violation
from ..common.protocol import RunTask, TaskFinished
from ..common.worker import Worker
from .messages import TICK, Assign, Cancel, GetTask, Probe, Reject, ResultAck, TaskQuery, TaskStatus

REQUEST_BITS = 32  # a request number is (incarnation << REQUEST_BITS) | sequence


@attrs.frozen
class SparrowNodeStatistics:
    name: str
    worker_id: int
    free: tuple
    running: int
    completed: int
    queued_probes: int
    outstanding: int
    unacked: int


class SparrowNode(Worker):
    def __init__(self, spec, recorder, *, request_timeout_us: int = 1_000_000, request_retries: int = 3) -> None:
        super().__init__(spec, recorder)
        self.probes: deque = deque()  # (scheduler, job_id, group, demand)
        self.held = [0] * len(spec.capacity)
        # request -> [scheduler, job_id, group, demand, retries so far, first sent at, last sent at]
        self.outstanding: dict[int, list] = {}
        self.given_up: set[int] = set()  # requests dropped after their retries (an answer may still come)
        self.unacked: dict[tuple[int, int], tuple[int, tuple]] = {}  # (job, index) -> (scheduler, demand)
        self.ends: dict[tuple[int, int], int] = {}  # (job, index) -> when its execution here ends
        self.request_timeout_us = request_timeout_us
        self.request_retries = request_retries
        self.sequence = 0
        self.deadlines = Deadlines(self, 1, TICK)

    # ---- probes and late binding ----------------------------------------------------------
    def on_Probe(self, msg: Probe, src: int) -> None:
        self.probes.append((src, msg.job_id, msg.group, msg.demand))
        self._pump()

    def on_Assign(self, msg: Assign, src: int) -> None:
        r = msg.request
        if self._answered(r):
            self._run(msg, src)
        elif r in self.given_up or r >> REQUEST_BITS != self.incarnation:
            self.given_up.discard(r)
            self._late(msg, src)
        else:  # a duplicate of an answer already taken
            self.recorder.count("duplicate_answers_ignored")
        self._pump()

    def on_Cancel(self, msg: Cancel, src: int) -> None:
        if not self._answered(msg.request):
            self.given_up.discard(msg.request)
        self._pump()

    def _answered(self, request: int) -> bool:
        """Release the hold of ``request`` if it is still outstanding (True), else False."""
        entry = self.outstanding.pop(request, None)
        if entry is None:
            return False
        for r, d in enumerate(entry[3]):
            self.held[r] -= d
        return True

    def _late(self, msg: Assign, src: int) -> None:
        """An answer to a request this incarnation no longer holds room for: run it if it fits, else refuse."""
        key = (msg.job_id, msg.index)
        if key in self.running or key in self.unacked:
            self._run(msg, src)  # starts nothing; a finished one's result goes again
            return
        if all(f - h >= d for f, h, d in zip(self.free, self.held, msg.demand)):
            self.recorder.count("late_answers_run")
            self._run(msg, src)
            return
        self.recorder.count("late_answers_rejected")
        self.send(src, Reject(msg.job_id, msg.index, msg.request))

    def _run(self, msg: Assign, src: int) -> None:
        key = (msg.job_id, msg.index)
        if key in self.unacked:  # it ran here and its result is not acknowledged yet: send that again
            self.recorder.count("duplicate_launches_suppressed")
            self._report(key, src)
            return
        if key not in self.running:
            self.ends[key] = self.now + self.run_us(msg)
        self.on_RunTask(RunTask(msg.job_id, msg.index, msg.duration_us, msg.demand, -1, (src,)), src)

    def _pump(self) -> None:
        """Send a request for each head probe that fits what is free and not held."""
        probes = self.probes
        free, held = self.free, self.held
        while probes:
            scheduler, job_id, group, demand = probes[0]
            for r, d in enumerate(demand):
                if free[r] - held[r] < d:
                    if self.deadlines.armed < 0 and all(f >= x for f, x in zip(free, demand)):
                        self._watch_holds()  # it would fit but for the holds: time them out
                    return
            probes.popleft()
            for r, d in enumerate(demand):
                held[r] += d
            self.sequence += 1
            request = (self.incarnation << REQUEST_BITS) | self.sequence
            self.outstanding[request] = [scheduler, job_id, group, demand, 0, self.now, self.now]
            self.send(scheduler, GetTask(job_id, group, request))

    # ---- results ----------------------------------------------------------------------------
    def on_TaskTimer(self, msg, src: int) -> None:
        key = (msg.job_id, msg.index)
        task = self.running[key]
        super().on_TaskTimer(msg, src)
        del self.ends[key]
        self.unacked[key] = (task.notify[0], task.demand)
        self._pump()

    def on_ResultAck(self, msg: ResultAck, src: int) -> None:
        self.unacked.pop((msg.job_id, msg.index), None)

    def _report(self, key: tuple[int, int], to: int) -> None:
        """Send the unacknowledged result again, to ``to``: the scheduler that asks now (the job may have
        been handed to another one since, or to a restarted one)."""
        demand = self.unacked[key][1]
        self.unacked[key] = (to, demand)
        self.send(to, TaskFinished(key[0], key[1], demand, -1))

    def on_TaskQuery(self, msg: TaskQuery, src: int) -> None:
        key = (msg.job_id, msg.index)
        if key in self.unacked:
            self.recorder.count("results_resent")
            self._report(key, src)
            return
        ends = self.ends.get(key, -1)
        pending = ends < 0 and msg.request in self.outstanding
        self.send(src, TaskStatus(msg.job_id, msg.index, msg.request, ends, pending))

    # ---- timeouts (only while holds keep the head probe waiting) ---------------------------------
    def _watch_holds(self) -> None:
        """Wake up when the oldest outstanding request is due to be asked again."""
        due = min(e[6] for e in self.outstanding.values()) + self.request_timeout_us
        self.deadlines.add(due, 0)

    def on_Tick(self, msg, src: int) -> None:
        self.deadlines.due()
        for request, entry in list(self.outstanding.items()):
            if entry[6] + self.request_timeout_us > self.now:
                continue
            if entry[4] < self.request_retries:
                entry[4] += 1
                entry[6] = self.now
                self.recorder.count("requests_retried")
                self.send(entry[0], GetTask(entry[1], entry[2], request))
            else:
                self._answered(request)
                self.given_up.add(request)
                self.recorder.count("reservations_dropped")
        self._pump()

    def statistics(self) -> SparrowNodeStatistics:
        return SparrowNodeStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                     self.completed, len(self.probes), len(self.outstanding), len(self.unacked))


# ---- end-of-run checks of the live nodes (the plug-in's ``checks``) ----------------------------------
def _nodes(fabric):
    for name in fabric.names:
        node = fabric.actor(fabric.addr(name))
        if isinstance(node, SparrowNode):
            yield node


def node_books_balance(fabric) -> list[Violation]:
    """Every live node's books add up: what is free plus what its tasks use is its capacity, what it holds
    is exactly the demand of its outstanding requests and never more than is free."""
    out = []
    for node in _nodes(fabric):
        capacity = node.spec.capacity
        used = [0] * len(capacity)
        for task in node.running.values():
            used = [u + d for u, d in zip(used, task.demand)]
        held = [0] * len(capacity)
        for entry in node.outstanding.values():
            held = [h + d for h, d in zip(held, entry[3])]
        problem = None
        if any(f + u != c for f, u, c in zip(node.free, used, capacity)):
            problem = f"free {tuple(node.free)} plus running {tuple(used)} is not its capacity {capacity}"
        elif held != node.held:
            problem = f"holds {tuple(node.held)} but its outstanding requests need {tuple(held)}"
        elif any(h > f for h, f in zip(node.held, node.free)):
            problem = f"holds {tuple(node.held)} for requests but only {tuple(node.free)} is free"
        if problem:
            out.append(Violation("node_books_balance", node.name, node.now, problem))
    return out


def nodes_not_stuck(fabric) -> list[Violation]:
    """No live node is stuck: its head probe does not fit what is free and not held (else it would have
    asked), and while it would fit but for the holds, a wake-up is pending by the time the oldest request
    is due to be asked again (no probe waits forever on a lost answer)."""
    out = []
    for node in _nodes(fabric):
        if not node.probes:
            continue
        job_id, demand = node.probes[0][1], node.probes[0][3]
        if all(f - h >= d for f, h, d in zip(node.free, node.held, demand)):
            problem = "fits what is free and not held, but was never asked for"
        elif all(f >= d for f, d in zip(node.free, demand)):
            due = min(e[6] for e in node.outstanding.values()) + node.request_timeout_us
            armed = node.deadlines.armed
            if 0 <= armed <= max(due, fabric.now + 1):
                continue
            problem = (f"waits on holds {tuple(node.held)}; its oldest request is due at {due} us but "
                       + (f"the node wakes at {armed} us" if armed >= 0 else "no wake-up is pending"))
        else:
            continue
        out.append(Violation("nodes_not_stuck", node.name, fabric.now, f"its head probe (job {job_id}) {problem}"))
    return out
