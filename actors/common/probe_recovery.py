"""The recovery of a late-binding scheduler (Sparrow's, Hawk's, Eagle's), beside its protocol: driven only by the
fabric's ``ConnectionBroken`` notices (``common.recovery``), so a fault-free run pays nothing for it.

The scheduler keeps, per open job (``jobs``: state with ``job``, ``groups`` (per probe group its unbound task
indices, ``probe_groups``), ``group_of`` ((constraints, demand) -> group), ``bound`` (task -> (node, request)),
``requeued`` and ``probed`` (group << GROUP_SHIFT | node -> reservations waiting there)), and the nodes' actor ids
(``node_ids``). A break with a node (it crashed, refused, or a cut outlasted ``conn_timeout_s``) is the only
evidence that work there is lost:
- the reservations counted there are taken for lost, and so are the tasks bound to it without a result: each
  such task goes back to its group's queue (``tasks_relaunched``); a reservation or task that was not lost after
  all costs only a cancel or a second execution (the first result counts);
- the node is suspected (``common.recovery.Suspects``): nothing goes to it until its backoff is over or it is
  heard from;
- each group whose unbound tasks now outnumber its reservations still waiting gets the difference again
  (``probes_resent``) through the scheduler's ``place_again(state, group, key, count)`` (0 sent: no usable node),
  among the nodes not suspected; with none left, when the first suspicion ends.
"""

from __future__ import annotations

from fedemu.fabric.log import emit

from .events import RELAUNCH
from .probe_groups import requeue
from .recovery import Break, Suspects

GROUP_SHIFT = 32  # a job's reservations are counted per (group, node): key group << GROUP_SHIFT | node
SUSPECT_US = 1_000_000  # a node seen down is not probed for a second, doubling per notice, up to a minute


class ProbeRecovery:
    """A scheduler's recovery component (registered with its ``recover``); ``name`` keys its timers."""

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
        self.node_lost(node)
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

    def node_lost(self, node: int) -> None:
        """Hook: a break with ``node``, before its reservations and tasks are taken for lost."""

    def _requeue(self, state, index: int, why: str) -> None:
        """Task ``index``, bound to a node a break cut off, goes back to its group's queue."""
        s = self.s
        node, _ = state.bound.pop(index)  # the node asking again gets a cancel
        job = state.job
        requeue(state.groups[state.group_of[(job.constraints[index], job.demand)]], index)
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
        """Place again for each group of ``state`` whose unbound tasks outnumber its reservations still waiting."""
        s = self.s
        short = False
        for key, g in state.group_of.items():
            waiting = sum(c for k, c in state.probed.items() if k >> GROUP_SHIFT == g)
            deficit = len(state.groups[g]) - waiting
            if deficit <= 0:
                continue
            sent = s.place_again(state, g, key, deficit)
            if sent:
                s.recorder.count("probes_resent", sent)
            else:
                short = True
        if short:
            self._wait(state)

    def _wait(self, state) -> None:
        """No node of a group's pool is usable now: place again when the first suspicion ends."""
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
