"""Pigeon's failover (2019, "Master Failure Recovery"; our protocol where the paper gives only the idea):
the second master's watch on its master, and a new master's rebuild.

- The master sends its task state to the second master every ``master_sync_s`` while the group has work
  (``sync``); each ``Sync`` says when the next is due. When a due sync has not come half of
  ``master_timeout_s`` later, the second master pings the master (one lost sync is no failure), and takes
  over (a failover, with the synced state) if it has not answered by the other half (``SecondWatch``).
- A new master, by failover or election (``membership``), rebuilds from the members themselves: every
  worker's ``Status`` (what it runs) and every distributor's ``Outstanding`` tasks for the group, plus the
  synced queue for a distributor that does not answer. A member that answers nothing within
  ``RECOVER_ROUNDS`` claims is down until it speaks (``Rebuild``; the master role acts on it).

Both hold state only and decide; the member or master role holding them sends the messages.
"""

from __future__ import annotations

from .sync import SyncedState

RECOVER_ROUNDS = 3  # claims sent to a member that does not answer before a new master gives up on it
PING, TAKE_OVER = "ping", "take over"  # what the second master's watch asks its member to do


class SecondWatch:
    """The second master's side: the group's state as the syncs told it, and the watch on their timing."""

    __slots__ = ("synced", "last_sync_us", "pinged_us", "armed")

    def __init__(self) -> None:
        self.synced: SyncedState | None = None  # (None while this member is not the second master)
        self.last_sync_us = -1
        self.pinged_us = -1  # when the watch pinged a master whose sync did not come (-1: not)
        self.armed = False  # a watchdog timer is pending

    def heard(self, now: int) -> None:
        """A sync of the current epoch came from the master."""
        self.last_sync_us = now
        self.pinged_us = -1

    def apply(self, msg) -> bool:
        """Apply a sync (as second master); False on a gap, when the full state must be asked for."""
        state = self.synced
        if state is None or state.epoch != msg.epoch:
            state = self.synced = SyncedState(msg.epoch)
        return state.apply(msg)

    def arm(self, msg, now: int, timeout_us: int) -> int | None:
        """After a sync: the delay of the watchdog to set (half a timeout past the next sync), or None."""
        if msg.next_us and not self.armed:
            self.armed = True
            return max(0, msg.next_us + timeout_us // 2 - now)
        return None

    def check(self, now: int, timeout_us: int, heard_master_us: int) -> tuple[str | None, int | None]:
        """On the watchdog: what to do (``PING``, ``TAKE_OVER`` or None) and when to look again (a delay,
        or None). A due sync half a timeout late pings the master; no answer by the other half is a
        failover."""
        snap = self.synced
        if snap is None or not snap.next_us:
            return None, None
        half = timeout_us // 2
        due = snap.next_us + half
        if now >= due and self.last_sync_us < snap.next_us:
            pinged = self.pinged_us
            if pinged < 0:  # one lost sync is no failure: ask the master, wait the other half
                self.pinged_us = now
                self.armed = True
                return PING, timeout_us - half
            if heard_master_us >= pinged:  # it answered: alive, the next sync re-arms the watch
                self.pinged_us = -1
            elif now >= pinged + timeout_us - half:
                return TAKE_OVER, None
            return None, None
        if now < due:
            self.armed = True
            return None, due - now
        return None, None


class Rebuild:
    """A new master's rebuild: the members and distributors it still waits to hear from, and what they
    said. ``kind`` is "failover" or "election"; ``since_us`` when the group lost its master."""

    __slots__ = ("since_us", "kind", "workers", "dists", "outstanding", "finished", "seeded")

    def __init__(self, since_us: int, kind: str, workers: set, dists: set) -> None:
        self.since_us = since_us
        self.kind = kind
        self.workers = workers  # worker slots not heard from yet
        self.dists = dists  # distributor ids not heard from yet
        self.outstanding: dict = {}  # distributor -> the (job, index) it says are not done
        self.finished: set = set()  # tasks workers reported done (result unacknowledged) meanwhile
        self.seeded: set = set()  # queued tasks taken from the second master's sync

    def heard_dist(self, src: int, tasks) -> None:
        """Distributor ``src`` listed its tasks for the group that are not done."""
        if src in self.dists:
            self.dists.discard(src)
            self.outstanding[src] = {(t[0], t[3]) for t in tasks}

    def done(self) -> bool:
        """Every member and distributor has answered."""
        return not self.workers and not self.dists

    def synced_but_done(self, key, task) -> bool:
        """A task queued from the sync that its distributor, having answered, no longer lists."""
        known = self.outstanding
        return key in self.seeded and task.distributor in known and key not in known[task.distributor]
