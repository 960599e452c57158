"""``master-<g>``: a Pigeon / PigeonC group's first master, the actor that holds the master role of
epoch 0 (``role.MasterCore``: dispatch, its workers, the sync to the second master) and, like every
member, runs the group's membership protocol (``membership.GroupMember``).

The parts, imported one way (each owns its state): ``dispatch`` (the two WFQ queues, the view of the
workers and the matching: the schedulers' algorithm) <- ``role`` (the master role of one epoch) <-
``membership`` (claims, the second master's takeover, suspicion and elections) <- ``master`` and
``worker``; ``failover`` (the master role's recovery: workers lost with a connection, a distributor's list,
a new master's rebuild; ``role`` mixes it in) and ``sync`` (the second master's periodic update);
``group`` the configuration and the order of claims every member shares.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor

from .group import GroupConfig
from .membership import GroupMember
from .role import MasterStatistics


class Master(GroupMember, Actor):
    COST_ROLE, COST_UNITS = "master", ("worker",)  # a single server (fabric.service): what it charges
    """``master-<g>``: the group's first master (rank 0); restarted, it is a member without work."""

    def __init__(self, cfg: GroupConfig) -> None:
        super().__init__()
        self._member_init(cfg, 0)

    def on_start(self) -> None:
        self._member_start()

    def statistics(self) -> MasterStatistics:
        if self.role is not None:
            return self.role.statistics(self.name)
        return MasterStatistics(self.name, self.cfg.group, 0, 0, 0, 0, 0, self.cfg.reserved)
