"""Hawk's crash recovery, beside the protocol (``scheduler``, ``node``, ``long_scheduler``): driven only by the
fabric's ``ConnectionBroken`` notices (``common.recovery``) and ``Lost`` reports, so a fault-free run pays
nothing.

The scheduler's part is Sparrow's (``common.probe_recovery.ProbeRecovery``): a break with a node takes the
reservations counted there and the tasks bound to it for lost, suspects the node, and places again each group
whose unbound tasks outnumber its reservations still waiting (the long-job scheduler by least waiting time, the
others by probing: the scheduler's ``place_group``). Hawk adds: a reservation a thief stole is counted at the
node it was sent to until the thief asks for it; if the thief breaks first, the node that lent it says so
(``Lost``), and it counts as lost (``lost``); and a break with a node tells the scheduler (``node_lost``: the
long-job scheduler clears its view of that node).
"""

from __future__ import annotations

from ..common.probe_recovery import GROUP_SHIFT, ProbeRecovery

__all__ = ["GROUP_SHIFT", "RESEND_US", "PlacementRecovery"]

RESEND_US = 1_000_000  # a node asks again a second after a break with a scheduler that is up, doubling


class PlacementRecovery(ProbeRecovery):
    """A Hawk scheduler's recovery component (registered with its ``recover``)."""

    name = "placements"

    def node_lost(self, node: int) -> None:
        self.s.node_lost(node)

    def lost(self, state, group: int, origin: int, count: int) -> None:
        """A lender says ``count`` reservations of ``group`` sent to ``origin`` were lost with a thief."""
        self.s.uncount(state, group, origin, count)
        self.reprobe(state)
