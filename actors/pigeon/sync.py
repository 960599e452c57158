"""The master -> second master sync of Pigeon's failover: the group's waiting tasks, as deltas on top of
a full state.

Pigeon (2019, "Master Failure Recovery") has the master update its second master periodically with the
group's task state. The update carries the tasks waiting in the group's queues, the state only the master
holds. What each worker runs is not in it: a new master asks every worker its status and every
distributor its list of tasks not done (``failover.MasterRecovery.recover``, as the paper has a new master
do when both are lost), so following every launch and idle notice for the second master would cost every
fault-free run a record per task event and rebuild nothing the takeover does not rebuild anyway.

Sending the whole queue every period costs O(queue) per sync in building, sending and journaling it,
which dominated an overloaded Pigeon run. So each ``Sync`` is numbered (``seq``) and says which sync it
follows (``base``; 0: it is the full state). The master sends the entries of the waiting tasks that
changed since its last sync (upserts, and removals of those the second master holds); it sends the full
state to a second master it has not synced yet, and after its connection to it broke (``reset``: a sync
may have been lost with it). The second master applies a delta only on top of the sync it follows; one
that does not (a sync was lost, or it restarted with nothing) is ignored until the whole state comes.

Entries: (job, index, duration, constraints, demand, since, distributor, class) by (job, index).
"""

from __future__ import annotations

from .messages import Sync


class SyncSender:
    """The master's side: the keys changed since the last sync, the keys the second master holds, and
    whom it last synced."""

    __slots__ = ("seq", "to", "reset", "queued", "held")

    def __init__(self) -> None:
        self.seq = 0  # syncs sent in this epoch
        self.to = -1  # the second master the last sync went to (-1: none yet, the next is full)
        self.reset = False  # the connection to the second master broke: the next sync is the full state
        self.queued: dict = {}  # (job, index) -> None: changed since the last sync, in change order
        self.held: set = set()  # (job, index) the syncs sent so far leave the second master holding

    def forget(self) -> None:
        """There is no second master: drop the changes kept, so the next one is sent the full state."""
        self.to = -1
        self.queued.clear()
        self.held.clear()

    def pending(self) -> bool:
        """Whether anything changed since the last sync (or the next one must be the full state)."""
        return bool(self.queued or self.reset)

    def message(self, queued: dict, second: int, epoch: int) -> Sync:
        """The next sync to ``second`` from the master's ``queued`` tasks ((job, index) -> (task, class));
        a task queued and taken off again between two syncs is not in it at all."""
        held = self.held
        if self.to != second or self.reset:
            self.to, self.reset, base = second, False, 0
            up = tuple(queued_entry(t, cls) for t, cls in queued.values())
            gone = ()
            held.clear()
            held.update(queued)
        else:
            base = self.seq
            up, gone = [], []
            for key in self.queued:
                entry = queued.get(key)
                if entry is not None:
                    up.append(queued_entry(*entry))
                    held.add(key)
                elif key in held:
                    gone.append(key)
                    held.discard(key)
            up, gone = tuple(up), tuple(gone)
        self.queued.clear()
        self.seq += 1
        return Sync(epoch, self.seq, base, up, gone)


def queued_entry(t, cls: int) -> tuple:
    """A waiting task as a sync carries it."""
    return (t.job_id, t.index, t.duration_us, t.constraints, t.demand, t.since_us, t.distributor, cls)


class SyncedState:
    """The second master's side: the group's waiting tasks as of the last sync it could apply."""

    __slots__ = ("epoch", "seq", "queued")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.seq = 0  # the last sync applied (0: none)
        self.queued: dict = {}

    def apply(self, msg: Sync) -> bool:
        """Apply ``msg`` if it follows what this state holds (or is a full state); False on a gap (the
        master sends the full state next: the connection that lost a sync broke)."""
        if msg.seq <= self.seq:
            return True  # a duplicate, or older than what is applied
        if msg.base == 0:
            self.queued.clear()
        elif msg.base != self.seq:
            return False
        queued = self.queued
        for key in msg.gone_queued:
            queued.pop(tuple(key), None)
        for entry in msg.queued:
            queued[(entry[0], entry[1])] = entry
        self.seq = msg.seq
        return True

    def queued_entries(self) -> list:
        """Queued tasks in arrival order (then by job and index)."""
        return sorted(self.queued.values(), key=lambda e: (e[5], e[0], e[1]))
