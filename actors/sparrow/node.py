"""A Sparrow worker node: the generic Worker plus a FIFO queue of probes and the late-binding handshake.

It subclasses ``actors.common.worker.Worker`` (one actor per machine, so a probe, a request and a launch
cost exactly the network hops Sparrow pays, with no extra hop to a separate worker actor). The Worker part
still runs tasks, asserts capacity and sends ``TaskFinished`` (here to the task's scheduler).

Choices where the Sparrow paper leaves room:
- Strict FIFO: the head probe waits until the free capacity not already held for an outstanding request
  covers its demand; later probes never overtake it.
- While a request is out, its demand is held, so the answer can always run; a cancel releases it.

Recovery (``recovery``; nothing is sent or timed without a fault): a request waits for its answer as long
as the connection to its scheduler lives. After a break with a scheduler that is up (a cut outlasted the
connection timeout) the node asks again, with the same number, until answered (``common.recovery.
Retries``); a scheduler that crashed or refuses has forgotten its jobs, so the node drops that
scheduler's probes and requests, and what it held for them.
"""

from __future__ import annotations

import attrs

from ..common.invariants import Violation
from ..common.protocol import RunTask
from ..common.recovery import Break, Recovering, Retries
from ..common.worker import Worker
from .messages import Assign, Cancel, GetTask, Probe
from .recovery import RESEND_US

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


class SparrowNode(Recovering, Worker):
    __slots__ = ("probes", "held", "outstanding", "sequence", "asks")  # one per machine: no dict for these

    def __init__(self, spec, recorder) -> None:
        super().__init__(spec, recorder)
        # (scheduler, job_id, group, demand), oldest first. A list, not a deque: a node's queue is mostly a
        # probe or two, and an empty deque takes 760 bytes (7.6 MB over 10,000 nodes), a short list 60-90
        self.probes: list = []
        self.held = [0] * len(spec.capacity)
        self.outstanding: dict[int, tuple] = {}  # request -> (scheduler, job_id, group, demand)
        self.sequence = 0
        self.asks = self.recover(Retries(self, "requests", RESEND_US, self._ask_again, self._waiting_on))

    # ---- probes and late binding ----------------------------------------------------------
    def on_Probe(self, msg: Probe, src: int) -> None:
        self.probes.append((src, msg.job_id, msg.group, msg.demand))
        self._pump()

    def on_Assign(self, msg: Assign, src: int) -> None:
        if not self._answered(msg.request, src):  # a second answer to a request asked again after a break
            self.recorder.count("duplicate_answers_ignored")
        elif (msg.job_id, msg.index) in self.running:
            self._tell_too(msg, src)
        else:
            self.on_RunTask(RunTask(msg.job_id, msg.index, msg.duration_us, msg.demand, -1, (src,)), src)
        self._pump()

    def _tell_too(self, msg: Assign, src: int) -> None:
        """The task runs here already (placed again after a break, or its job handed to another scheduler
        when its first one crashed): it is not started twice, and its end goes to this scheduler too."""
        key = (msg.job_id, msg.index)
        task = self.running[key]
        self.recorder.count("duplicate_launches_suppressed")
        if src not in task.notify:
            self.running[key] = attrs.evolve(task, notify=task.notify + (src,))

    def on_Cancel(self, msg: Cancel, src: int) -> None:
        self._answered(msg.request, src)
        self._pump()

    def _answered(self, request: int, scheduler: int) -> bool:
        """Release the hold of ``request`` if it is still outstanding (True), else False."""
        entry = self.outstanding.pop(request, None)
        if entry is None:
            return False
        for r, d in enumerate(entry[3]):
            self.held[r] -= d
        if self.asks.breaks:
            self.asks.heard(scheduler)
        return True

    def _pump(self) -> None:
        """Send a request for each head probe that fits what is free and not held."""
        probes = self.probes
        free, held = self.free, self.held
        while probes:
            head = probes[0]
            demand = head[3]
            for r, d in enumerate(demand):
                if free[r] - held[r] < d:
                    return
            del probes[0]
            for r, d in enumerate(demand):
                held[r] += d
            self.sequence += 1
            request = (self.incarnation << REQUEST_BITS) | self.sequence
            self.outstanding[request] = head
            self.send(head[0], GetTask(head[1], head[2], request))

    def on_TaskTimer(self, msg, src: int) -> None:
        super().on_TaskTimer(msg, src)
        self._pump()

    # ---- recovery ---------------------------------------------------------------------------
    def connection_broke(self, brk: Break) -> None:
        """A scheduler that crashed or refuses has forgotten its jobs: drop its probes and requests (a cut
        with one that is up: ``asks`` asks again)."""
        if not brk.peer_lost_state:
            return
        scheduler = brk.peer
        for request in self._waiting_on(scheduler):
            self._answered(request, scheduler)
        if any(p[0] == scheduler for p in self.probes):
            self.probes = [p for p in self.probes if p[0] != scheduler]
        self._pump()

    def _waiting_on(self, scheduler: int) -> list[int]:
        """The requests this node waits on ``scheduler`` to answer, in the order asked."""
        return [r for r, head in self.outstanding.items() if head[0] == scheduler]

    def _ask_again(self, scheduler: int, request: int) -> None:
        entry = self.outstanding[request]
        self.recorder.count("requests_retried")
        self.send(scheduler, GetTask(entry[1], entry[2], request))

    def statistics(self) -> SparrowNodeStatistics:
        return SparrowNodeStatistics(self.name, self.spec.worker_id, tuple(self.free), len(self.running),
                                     self.completed, len(self.probes), len(self.outstanding))


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
    asked for it)."""
    out = []
    for node in _nodes(fabric):
        if not node.probes:
            continue
        job_id, demand = node.probes[0][1], node.probes[0][3]
        if all(f - h >= d for f, h, d in zip(node.free, node.held, demand)):
            out.append(Violation("nodes_not_stuck", node.name, fabric.now,
                                 f"its head probe (job {job_id}) fits what is free and not held, but was never "
                                 "asked for"))
    return out
