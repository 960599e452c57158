"""An Eagle distributed scheduler: Hawk's (``actors/hawk/scheduler``) with Succinct State Sharing's probing rounds
and the answers Eagle's workers need (Eagle 2016, 4.1-4.3; the Eagle authors' simulator, ``send_probes_eagle``).

- A job's probes go out in round 1 (``min_probes`` at least, as the simulator's Eagle mode: 20). A node with long
  work rejects one with its bitmap; the scheduler keeps, per job, the freshest bitmap its rejections brought, and
  sends the probe again (round 2) to a node drawn among the reserved partition and the general nodes whose bit is
  clear. A probe rejected in round 2 goes to a node of the reserved partition (round 3, never rejected; with no
  reserved node that can run it, to any that can, to wait in its queue). Every rejected probe is sent again (as
  the simulator's rounds do), while its group has unbound tasks.
- Sticky Batch Probing: a short job's reservation that got a task stays at its node, so it still counts as
  waiting there until it is cancelled (``Assign.left`` tells the node how many of the job's tasks are unbound).
- Each probe carries its job's estimated remaining work (unbound tasks times the estimate), for the queue order.

The simulator decides a job's rounds at once from the workers' state; here each rejection is a message and its
probe is sent again as it comes back (docs/schedulers.md lists the differences).
"""

from __future__ import annotations

from bisect import bisect_left

from fedemu.fabric.log import emit

from ..hawk.recovery import GROUP_SHIFT
from ..hawk.scheduler import HawkScheduler
from .bitmap import clear_positions
from .events import FALLBACK
from .messages import Assign, Drop, Probe, Reject
from .node import ROUNDS

_CLEAR_CACHE = 64
NODE_MASK = (1 << GROUP_SHIFT) - 1  # the node of a reservation count's key


class EagleScheduler(HawkScheduler):
    """``sticky``: the nodes keep a short reservation that got a task; ``sss``: probes are rejected and sent again."""

    def __init__(self, node_names: list[str], view, *, sticky: bool = True, **kwargs) -> None:
        super().__init__(node_names, view, **kwargs)
        self.sticky = sticky
        self.bitmaps: dict[int, tuple] = {}  # job -> (stamp_us, bitmap): the freshest its rejections brought
        self.clear_cache: dict[tuple, list] = {}

    def probe_message(self, state, g: int, key: tuple, round: int = 1):
        job = state.job
        return Probe(job.job_id, g, job.demand, key[0], state.estimate_us, state.long, 0 if state.long else round,
                     state.unbound() * state.estimate_us)

    def assign_message(self, state, msg, index: int):
        job = state.job
        return Assign(job.job_id, msg.group, index, job.durations_us[index], job.demand, msg.request,
                      state.unbound())

    def group_placed(self, state, group: int, node: int) -> None:
        if not state.long and not state.unbound():  # tell the other nodes holding its reservations to drop them
            drop = Drop(state.job.job_id)
            for other in dict.fromkeys(k & NODE_MASK for k in state.probed):
                if other != node:
                    self.send(other, drop)
            self.recorder.count("drops_sent")
        super().group_placed(state, group, node)

    def consumed(self, state, msg, src: int) -> None:
        if self.sticky and not state.long:
            return  # the reservation stays at its node until it is cancelled
        super().consumed(state, msg, src)

    def cancelled(self, msg, src: int) -> None:
        super().cancelled(msg, src)
        state = self.jobs.get(msg.job_id)
        if self.sticky and state is not None and not state.long:
            super().consumed(state, msg, src)

    def on_Reject(self, msg: Reject, src: int) -> None:
        state = self.jobs.get(msg.job_id)
        if self.suspected:
            self.recovery.heard(src)
        if state is None:
            return
        self.recorder.count("rejected_probes")
        self.uncount(state, msg.group, src)  # the probe is used up where it was sent
        if msg.stamp_us >= 0 and msg.stamp_us > self.bitmaps.get(msg.job_id, (-1, b""))[0]:
            self.bitmaps[msg.job_id] = (msg.stamp_us, msg.bitmap)
        g = msg.group
        if not state.groups[g]:
            return  # its group's tasks are all bound
        key = next(key for key, gg in state.group_of.items() if gg == g)
        pool = self.pool(key, False)  # ascending positions: the reserved ones first
        if msg.round < ROUNDS:
            bitmap = self.bitmaps.get(msg.job_id, (-1, b""))[1]
            candidates = self._clear(key, pool, bitmap)
            round = msg.round + 1
        else:
            candidates = pool[:bisect_left(pool, self.reserved)] or pool
            round = ROUNDS + 1
            self.recorder.count("probe_fallbacks")
            if self.fabric.event_log is not None:
                emit(self, FALLBACK, job=msg.job_id, group=g)
        if self.suspected:
            candidates = self.recovery.usable(candidates) or self.recovery.usable(pool)
        elif not candidates:
            candidates = pool
        if not candidates:
            self.recovery.reprobe(state)  # every node of its pool is suspected: wait for one
            return
        p = candidates[self.pick.randrange(len(candidates))]
        self.recorder.count("probes_sent_again")
        node = self.node_ids[p]
        self.send(node, self.probe_message(state, g, key, round))
        k = g << GROUP_SHIFT | node
        state.probed[k] = state.probed.get(k, 0) + 1
        self.probes += 1
        self.recorder.count("probes")

    def _clear(self, key: tuple, pool: list, bitmap: bytes) -> list:
        """The positions of ``pool`` a second-round probe may go to: the reserved ones and the general ones clear
        in ``bitmap``; kept per (group key, bitmap), since many jobs share a bitmap."""
        found = self.clear_cache.get((key, bitmap))
        if found is None:
            if len(self.clear_cache) >= _CLEAR_CACHE:
                self.clear_cache.clear()
            cut = bisect_left(pool, self.reserved)
            found = self.clear_cache[(key, bitmap)] = pool[:cut] + clear_positions(bitmap, pool[cut:])
        return found

    def close_job(self, job_id: int) -> None:
        self.bitmaps.pop(job_id, None)
        super().close_job(job_id)
