"""What every member of a Pigeon / PigeonC group shares: its configuration, and the order of the
``Claim``s that say who is its master (later epoch first, then the earliest declaration, then the
lowest rank)."""

from __future__ import annotations

import attrs

from .messages import Claim

NO_KEY = (-1, 0, 0)  # the key of no claim: every claim is better


def claim_key(c: Claim) -> tuple:
    """The order of claims: a later epoch, then the earliest declaration, then the lowest rank."""
    return (c.epoch, -c.declared_us, -c.rank)


@attrs.define(eq=False)
class GroupConfig:
    """What every member of one group is built from (the same object for all of them)."""

    group: int
    workers: tuple  # WorkerSpecs, in rank order 1..n
    member_names: list  # rank 0: master-<g>, then the workers' actor names
    dist_names: list
    policy: object
    weight: object
    reserved: int
    aware: bool
    num_resources: int
    recorder: object
    sync_us: int
    timeout_us: int
    ids: tuple | None = None  # (member ids, distributor ids), resolved once for the whole group

    def addresses(self, fabric) -> tuple:
        """(member ids, distributor ids) in ``fabric``: every member of a large group would otherwise
        resolve all its names itself (a million lookups per 1,000-member group, and a list each)."""
        if self.ids is None:
            self.ids = (tuple(map(fabric.addr, self.member_names)), tuple(map(fabric.addr, self.dist_names)))
        return self.ids
