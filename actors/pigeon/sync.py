"""The master -> second master sync of Pigeon's failover, as deltas on top of a full state.

Pigeon (2019, "Master Failure Recovery") has the master update its second master periodically with the
group's task state. Sending the whole state every period costs O(queue) per sync in building, sending
and journaling it, which dominated an overloaded Pigeon run. So each ``Sync`` is numbered (``seq``)
and says which sync it follows (``base``; 0: it is the full state). The master sends the entries of
the tasks that changed since its last sync (upserts and removals); it sends the full state to a second
master it has not synced yet, and after its connection to it broke (``reset``: a sync may have been
lost with it). The second master applies a delta only on top of the sync it follows; one that does not
(a sync was lost, or it restarted with nothing) is ignored until the whole state comes.

Entries: queued (job, index, duration, constraints, demand, since, distributor, class) by (job, index);
running (rank, job, index, duration, constraints, demand, distributor, class) by (rank, job, index).
"""

from __future__ import annotations

from .messages import Sync


class SyncSender:
    """The master's side: the keys changed since the last sync, and whom it last synced."""

    __slots__ = ("seq", "to", "reset", "queued", "running")

    def __init__(self) -> None:
        self.seq = 0  # syncs sent in this epoch
        self.to = -1  # the second master the last sync went to (-1: none yet, the next is full)
        self.reset = False  # the connection to the second master broke: the next sync is the full state
        self.queued: dict = {}  # (job, index) -> None: changed since the last sync, in change order
        self.running: dict = {}  # (worker local, job, index) -> None

    def forget(self) -> None:
        """There is no second master: drop the changes kept, so the next one is sent the full state."""
        self.to = -1
        self.queued.clear()
        self.running.clear()

    def pending(self) -> bool:
        """Whether anything changed since the last sync (or the next one must be the full state)."""
        return bool(self.queued or self.running or self.reset)

    def message(self, queued: dict, running: list, second: int, epoch: int) -> Sync:
        """The next sync to ``second`` from the master's ``queued`` tasks ((job, index) -> (task, class))
        and ``running`` ones (per worker slot: (job, index) -> (task, class, epoch, seq))."""
        if self.to != second or self.reset:
            self.to, self.reset, base = second, False, 0
            up_q = tuple(queued_entry(t, cls) for t, cls in queued.values())
            up_r = tuple(running_entry(local, t, cls) for local in range(len(running))
                         for (t, cls, _, _) in running[local].values() if cls >= 0)
            gone_q = gone_r = ()
        else:
            base = self.seq
            up_q, gone_q, up_r, gone_r = [], [], [], []
            for key in self.queued:
                entry = queued.get(key)
                if entry is None:
                    gone_q.append(key)
                else:
                    up_q.append(queued_entry(*entry))
            for local, job_id, index in self.running:
                entry = running[local].get((job_id, index))
                if entry is None or entry[1] < 0:
                    gone_r.append((local + 1, job_id, index))
                else:
                    up_r.append(running_entry(local, entry[0], entry[1]))
            up_q, gone_q, up_r, gone_r = tuple(up_q), tuple(gone_q), tuple(up_r), tuple(gone_r)
        self.queued.clear()
        self.running.clear()
        self.seq += 1
        return Sync(epoch, self.seq, base, up_q, gone_q, up_r, gone_r)


def queued_entry(t, cls: int) -> tuple:
    """A waiting task as a sync carries it."""
    return (t.job_id, t.index, t.duration_us, t.constraints, t.demand, t.since_us, t.distributor, cls)


def running_entry(local: int, t, cls: int) -> tuple:
    """A running task (on worker slot ``local``) as a sync carries it."""
    return (local + 1, t.job_id, t.index, t.duration_us, t.constraints, t.demand, t.distributor, cls)


class SyncedState:
    """The second master's side: the group's state as of the last sync it could apply."""

    __slots__ = ("epoch", "seq", "queued", "running")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.seq = 0  # the last sync applied (0: none)
        self.queued: dict = {}
        self.running: dict = {}

    def apply(self, msg: Sync) -> bool:
        """Apply ``msg`` if it follows what this state holds (or is a full state); False on a gap (the
        master sends the full state next: the connection that lost a sync broke)."""
        if msg.seq <= self.seq:
            return True  # a duplicate, or older than what is applied
        if msg.base == 0:
            self.queued.clear()
            self.running.clear()
        elif msg.base != self.seq:
            return False
        queued, running = self.queued, self.running
        for key in msg.gone_queued:
            queued.pop(tuple(key), None)
        for entry in msg.queued:
            queued[(entry[0], entry[1])] = entry
        for key in msg.gone_running:
            running.pop(tuple(key), None)
        for entry in msg.running:
            running[(entry[0], entry[1], entry[2])] = entry
        self.seq = msg.seq
        return True

    def queued_entries(self) -> list:
        """Queued tasks in arrival order (then by job and index)."""
        return sorted(self.queued.values(), key=lambda e: (e[5], e[0], e[1]))

    def running_entries(self) -> list:
        return [self.running[k] for k in sorted(self.running)]
