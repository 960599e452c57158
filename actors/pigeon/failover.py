"""A new master's rebuild, in Pigeon's failover (2019, "Master Failure Recovery"; our protocol where the
paper gives only the idea).

The second master takes over at once when the fabric tells it that its master crashed (or refuses
messages), and after ``master_timeout_s`` without an answer when a cut broke their connection
(``membership``); a worker declares itself master when both are lost (an election). Either way the new
master starts from what the second master was synced with (a failover only) and rebuilds from the group
itself, as the paper has a new master do when both are lost: every worker's ``Status`` (what it runs)
and every distributor's ``Outstanding`` tasks for the group. It dispatches once each member and
distributor has answered, or its connection has broken (a member that answers later is probed then), or
``RECOVER_ROUNDS`` master timeouts have passed.

It holds state only and decides; the master role (``role``) sends the messages.
"""

from __future__ import annotations

RECOVER_ROUNDS = 3  # master timeouts a new master waits for the members' answers before it dispatches


class Rebuild:
    """A new master's rebuild: the members and distributors it still waits to hear from, and what they
    said. ``kind`` is "failover" or "election"; ``since_us`` when the group lost its master."""

    __slots__ = ("since_us", "kind", "workers", "dists", "outstanding", "seeded")

    def __init__(self, since_us: int, kind: str, workers: set, dists: set) -> None:
        self.since_us = since_us
        self.kind = kind
        self.workers = workers  # worker slots not heard from yet
        self.dists = dists  # distributor ids not heard from yet
        self.outstanding: dict = {}  # distributor -> the (job, index) it says are not done
        self.seeded: set = set()  # queued tasks taken from the second master's sync

    def heard_dist(self, src: int, tasks) -> None:
        """Distributor ``src`` listed its tasks for the group that are not done."""
        if src in self.dists:
            self.dists.discard(src)
            self.outstanding[src] = {(t[0], t[3]) for t in tasks}

    def done(self) -> bool:
        """Every member and distributor has answered (or its connection broke)."""
        return not self.workers and not self.dists

    def synced_but_done(self, key, task) -> bool:
        """A task queued from the sync that its distributor, having answered, no longer lists."""
        known = self.outstanding
        return key in self.seeded and task.distributor in known and key not in known[task.distributor]
