"""Sparrow's crash recovery, beside the paper's protocol (``scheduler``, ``node``): driven only by the
fabric's ``ConnectionBroken`` notices (``common.recovery``), so a fault-free run pays nothing for it.

On a live connection nothing is lost, so the protocol sends each message once. A break with a node
(it crashed, refused a message while down, or a cut outlasted ``conn_timeout_s``) is the only evidence
that work there is lost, and the only time a scheduler probes again:
- the probes this scheduler had queued there are taken for lost (a restarted node starts empty; what was
  undelivered on a broken connection is dropped), and so are the tasks bound to it without a result (a
  crash ends them; after a cut their result may be lost): each such task goes back to its group's queue
  (``tasks_relaunched``). A probe or task that was not lost after all costs only a cancel or a second
  execution (the first result counts).
- the node is suspected (``common.recovery.Suspects``): no probe goes to it until its backoff is over or
  it is heard from, so an outage is not probed into at the rate of the network.
- each group whose unbound tasks now outnumber its probes still waiting is probed again for the
  difference (``probes_resent``), among the nodes not suspected; with none left, when the first
  suspicion ends.
A node keeps what it holds for a request until the answer comes: after a break with a scheduler that is
still up (a cut) it asks again, with the same number, at each break with a backoff (``common.recovery.
Retries``), and the scheduler answers a repeated request with the task still bound to it, else a cancel
(its task went back to the queue at the break); a scheduler that crashed (or refuses) has forgotten its
jobs, so the node drops its probes and requests at once.
"""

from __future__ import annotations

from fedemu.fabric.log import emit

from ..common.events import RELAUNCH
from ..common.recovery import Break, Suspects

GROUP_SHIFT = 32  # a job's probes are counted per (group, node): key group << GROUP_SHIFT | node
SUSPECT_US = 1_000_000  # a node seen down is not probed for a second, doubling per notice, up to a minute
RESEND_US = 1_000_000  # a node asks again a second after a break with a scheduler that is up, doubling


class ProbeRecovery:
    """A scheduler's recovery component (registered with its ``recover``): see the module docstring."""

    name = "probes"

    def __init__(self, scheduler) -> None:
        self.s = scheduler
        self.suspects = Suspects(SUSPECT_US)
        self.waiting: dict[int, int] = {}  # job -> nonce of its pending wait for a node to probe
        self.nonce = 0
        self.nodes: frozenset = frozenset()  # the nodes' actor ids (a break with another peer moves nothing)

    def usable(self, pool: list) -> list:
        """The positions of ``pool`` whose nodes are not suspected now."""
        node_ids, now, usable = self.s.node_ids, self.s.now, self.suspects.usable
        return [p for p in pool if usable(node_ids[p], now)]

    def heard(self, node: int) -> None:
        """``node`` sent something: it is up."""
        self.suspects.heard(node)

    def broken(self, brk: Break) -> None:
        s = self.s
        node = brk.peer
        if not self.nodes:
            self.nodes = frozenset(s.node_ids)
        if node not in self.nodes:
            return
        self.suspects.down(node, s.now)
        for state in list(s.jobs.values()):
            lost = False
            for g in range(len(state.groups)):
                if state.probed.pop(g << GROUP_SHIFT | node, 0):
                    lost = True
            for index, binding in list(state.bound.items()):
                if binding[0] == node:
                    self._requeue(state, index, brk.cause)
                    lost = True
            if lost:
                self.reprobe(state)

    def _requeue(self, state, index: int, why: str) -> None:
        """Task ``index``, bound to a node a break cut off, goes back to its group's queue."""
        s = self.s
        node, _ = state.bound.pop(index)  # the node asking again gets a cancel
        job = state.job
        state.groups[state.group_of[(job.constraints[index], job.demand)]].append(index)
        state.requeued[index] = s.now
        s.recorder.count("tasks_relaunched")
        if s.fabric.event_log is not None:
            emit(s, RELAUNCH, job=job.job_id, task=index, node=s.fabric.name_of(node), why=why)

    def unqueue(self, state, index: int) -> None:
        """Task ``index`` was placed again, but its first execution's result came: it needs no node now."""
        state.requeued.pop(index, None)
        job = state.job
        queue = state.groups[state.group_of[(job.constraints[index], job.demand)]]
        if index in queue:
            queue.remove(index)

    def reprobe(self, state) -> None:
        """Probe again for each group of ``state`` whose unbound tasks outnumber its probes still waiting."""
        s = self.s
        short = False
        for key, g in state.group_of.items():
            waiting = sum(c for k, c in state.probed.items() if k >> GROUP_SHIFT == g)
            deficit = len(state.groups[g]) - waiting
            if deficit <= 0:
                continue
            sent = s.probe(state, g, key, deficit)
            if sent:
                s.recorder.count("probes_resent", sent)
            else:
                short = True
        if short:
            self._wait(state)

    def _wait(self, state) -> None:
        """No node of a group's pool is usable now: probe again when the first suspicion ends."""
        s = self.s
        job_id = state.job.job_id
        if job_id in self.waiting:
            return
        self.nonce += 1
        nonce = self.waiting[job_id] = self.nonce
        now = s.now
        s.arm(self, min(u for u in self.suspects.until.values() if u > now) - now, job_id, nonce)

    def due(self, job_id: int, nonce: int) -> None:
        if self.waiting.get(job_id) != nonce:
            return
        del self.waiting[job_id]
        state = self.s.jobs.get(job_id)
        if state is not None:
            self.reprobe(state)
