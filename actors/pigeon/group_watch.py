"""A Pigeon / PigeonC distributor's recovery (``GroupWatch``, the component ``distributor.Distributor`` holds as
``recovery``), beside the paper's split; our protocol, the papers are silent. Batches and results travel on
connections, so none is acknowledged or resent on a timer; the fabric's notice that a connection broke says what
may have been lost, and nothing here runs while nothing fails.

- A connection with a member of a group whose results it waits for broke (a worker's result, or a
  master's, may be lost): it sends the group's master every task of the group it still waits for
  (``Outstanding``); the master queues again those nobody holds (some may run twice, none is lost).
- The connection with the master itself broke (a batch may be lost, and the master may be down): it
  suspects the master and alerts the group (``Suspect`` to its second master and to one worker, and a
  ping to the master), again while no answer comes, the wait doubling from ``dist_retry_s`` up to a
  minute; never given up while it waits for the group. A claim (the master's, or a member's that checked
  it, or a new master's) ends the suspicion, and the list goes to that master.
- On a better ``Claim`` (a new master) it sends the new master the same list, which rebuilds from it.
"""

from __future__ import annotations

from ..common.recovery import backoff
from .group import claim_key
from .messages import Claim, DistWatch, MasterPing, Outstanding, Suspect, TaskBatch


class GroupWatch:
    """The recovery half of a distributor: a component (``actors/common/components.py``) that reaches the
    distributor only through its ``CORE``."""

    def __init__(self, core, n: int) -> None:
        self.core = core
        self.suspected = [False] * n  # the master's connection broke: the group is alerted until a claim comes
        self.unsure = [False] * n  # tasks for the group may be lost: the master gets the Outstanding list
        self.alerts = [0] * n  # alerts of each suspected group so far
        self.watch_armed = False
        self.watch_rounds = 0  # rounds of the watch since no group was suspected
        self.elsewhere = None  # the stream that picks another group for tasks handed back
        self.handed_back: dict = {}  # (job, index) -> the groups that handed the task back (fault-only)

    def on_broken(self, msg, src: int) -> None:
        """A connection with a group member broke: what it carried may be lost (see the module's notes)."""
        mine = msg.src == self.core.id
        peer = msg.dst if mine else msg.src
        g = self.core.group_of.get(peer)
        if g is None or not self.core.waiting[g]:
            return  # not a group's (the submitter's: its own recovery), or nothing awaited there
        if peer == self.core.master_ids[g]:
            self.unsure[g] = True
            if not self.suspected[g]:
                self.suspected[g] = True
                self.alerts[g] = 0
                self._alert(g)
                self._arm()
        elif not mine:  # a member's results to this distributor may be lost
            self.unsure[g] = True
            if not self.suspected[g]:
                self._reconcile(g)

    def on_claim(self, msg: Claim, src: int) -> None:
        g = msg.group
        key = claim_key(msg)
        if key > self.core.keys[g]:
            self.core.claims[g], self.core.keys[g] = msg, key
            self.core.master_ids[g] = msg.master
            self.suspected[g] = False
            self._reconcile(g)  # a new master rebuilds from every distributor's list
        elif key == self.core.keys[g]:
            self.core.claims[g] = msg  # the second master may have changed
            if self.suspected[g] or self.unsure[g] or src == msg.master:
                self.suspected[g] = False  # the master, or a member that checked it, answers
                self._reconcile(g)
        elif self.core.claims[g] is not None:
            self.core.send(src, self.core.claims[g])

    def on_master_ping(self, msg: MasterPing, src: int) -> None:
        """A group member back from a restart asks who its master is."""
        if self.core.claims[msg.group] is not None:
            self.core.send(src, self.core.claims[msg.group])

    def _reconcile(self, g: int) -> None:
        """Send group ``g``'s master every task of the group this distributor still waits for: it queues
        those it does not hold (and a new master rebuilds from the lists)."""
        self.unsure[g] = False
        tasks = []
        for job_id, (job, where) in self.core.split.items():
            done = self.core.open_jobs[job_id][1]
            short = job.mean_task_us <= self.core.short_cutoff_us
            for index, m in enumerate(where):
                if m == g and not done[index]:
                    tasks.append((job_id, short, job.demand, index, job.durations_us[index], job.constraints[index]))
        self.core.send(self.core.master_ids[g], Outstanding(g, self.core.keys[g][0], tuple(tasks)))

    # ---- the watch on suspected groups ----------------------------------------------------
    def _alert(self, g: int) -> None:
        """Group g's master's connection broke: ping it, and alert its second master and one worker."""
        self.alerts[g] += 1
        self.core.send(self.core.master_ids[g], MasterPing(g))
        claim = self.core.claims[g]
        members = self.core.member_ids[g]
        if claim.second >= 0 and claim.second != self.core.master_ids[g]:
            self.core.send(claim.second, Suspect(g))
        if len(members) > 1:
            pick = members[1 + (self.alerts[g] - 1) % (len(members) - 1)]
            if pick not in (claim.second, self.core.master_ids[g]):
                self.core.send(pick, Suspect(g))
        self.core.recorder.count("masters_suspected")

    def _arm(self) -> None:
        if not self.watch_armed:
            self.watch_armed = True
            self.watch_rounds += 1
            self.core.set_timer(backoff(self.core.retry_us, self.watch_rounds), DistWatch(self.watch_rounds))

    def on_watch(self, msg) -> None:
        """Alert again each group still suspected that this distributor waits on."""
        self.watch_armed = False
        busy = False
        for g, suspected in enumerate(self.suspected):
            if suspected:
                if self.core.waiting[g]:
                    self._alert(g)
                    busy = True
                else:
                    self.suspected[g] = False  # nothing awaited there any more
        if busy:
            self._arm()
        else:
            self.watch_rounds = 0

    # ---- tasks a group has no live worker for -----------------------------------------------
    def on_returned(self, msg, src: int) -> None:
        """Group ``msg.group``'s master has no live worker to run these tasks and hands them back: send those this
        distributor still waits for to other groups (PigeonC: weighted by their counts) that have not handed
        them back, or, when none is left, back to this one, which keeps them until a worker comes back."""
        g = msg.group
        if self.elsewhere is None:
            self.elsewhere = self.core.rng.child("elsewhere")
        n = len(self.core.master_ids)
        moved: dict = {}
        for job_id, short, demand, index, duration, constraints in msg.tasks:
            entry = self.core.open_jobs.get(job_id)
            split = self.core.split.get(job_id)
            if entry is None or split is None or entry[1][index] or split[1][index] != g:
                continue  # done, or already elsewhere
            tried = self.handed_back.setdefault((job_id, index), set())
            tried.add(g)
            weights = [1] * n if self.core.counts is None else list(self.core.counts.weights(constraints, demand))
            for h in tried:
                weights[h] = 0
            h = self.elsewhere.weighted_index(weights) if any(weights) else g
            split[1][index] = h
            self.core.waiting[g] -= 1
            self.core.waiting[h] += 1
            moved.setdefault((job_id, h), (short, demand, []))[2].append((index, duration, constraints))
        for (job_id, h), (short, demand, items) in sorted(moved.items()):
            self.core.send(self.core.master_ids[h], TaskBatch(job_id, short, demand, tuple(i for i, _, _ in items),
                                                    tuple(d for _, d, _ in items), tuple(c for _, _, c in items)))
            self.core.recorder.count("tasks_sent_elsewhere", len(items))
