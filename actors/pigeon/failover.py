"""A Pigeon / PigeonC master's recovery (``MasterRecovery``, a component of ``master.MasterCore``), beside
the paper's algorithm; our protocol where Pigeon (2019, "Master Failure Recovery") gives only the idea, or is
silent. Nothing here runs while nothing fails: it starts from the fabric's notices of broken connections.

- A worker whose connection with the master broke may have lost launches or idle notices: it is taken for
  down, and what it ran is queued again; it is asked its ``Status`` when it speaks again (or, while a cut
  holds, at each break of a new connection). A restarted worker says ``Hello``.
- A distributor's ``Outstanding`` list (what it still waits for from the group, sent when a connection
  that may have lost a batch or a result broke): the master queues what nobody holds.
- A job handed to another distributor: tasks already queued or running are not queued again; their
  results go to it (the master forwards a running task's result when its idle notice comes).
- A new master (the second master taking over, or an elected worker, ``election``) starts from the
  waiting tasks synced to the second master (a failover only) and rebuilds from the group itself, as the
  paper has a new master do when both are lost: every worker's ``Status`` says what it runs, and every
  distributor's ``Outstanding`` list makes those tasks ones it can relaunch (``Rebuild``). It dispatches once each member and distributor has answered, or its connection has
  broken (a member that answers later is probed then), or ``RECOVER_ROUNDS`` master timeouts have passed.
- A waiting task no live worker of the group could run (every worker down; a long job's task with every
  low-priority worker down, which Pigeon 2019, 2.2 forbids the reserved ones to take; a PigeonC task with
  every machine holding its constraints down): after ``RECOVER_ROUNDS`` master timeouts the master hands
  it back to its distributor (``Returned``), which sends it to another group that has not handed it back;
  when every group that could run it has, it goes back to the last one, which keeps it (``parked``) until a
  worker comes back. Checked only while a worker is down.
"""

from __future__ import annotations

from fedemu.policies.fair_queue import HIGH, LOW

from ..common.front_end import Pending
from ..common.recovery import backoff
from ..common.protocol import TaskFinished
from .messages import Probe, RecoverTimer, Returned, StrandedTimer


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


class MasterRecovery:
    """The master role's recovery component: what it takes for down, asks, owes and waits for. It holds the
    role as ``core`` and uses it only through ``master.MasterCore.CORE``; ``h`` is the member holding the
    role (its clock, sends and timers, and its claim)."""

    def __init__(self, core, host) -> None:
        self.core = core
        self.h = host
        self.cfg = host.cfg
        self.recorder = host.cfg.recorder
        self.down: set[int] = set()  # workers taken for down (a broken connection) until they speak again
        self.probed: set[int] = set()  # workers asked for their status, not answered yet
        self.also: dict = {}  # task -> distributors the master tells its result (besides its launch's)
        self.rebuild: Rebuild | None = None  # a new master's rebuild, while it waits for answers
        self.stranded_armed = False  # the timer of tasks no live worker can run is pending
        self.stranded_rounds = 0  # that timer's rounds since it last found nothing to hand back
        self.handed_back: set = set()  # tasks handed back (a batch bringing one again: nowhere else runs it)
        self.parked: set = set()  # tasks sent here again after a hand-back: kept until a worker comes back

    def repoint(self, key, src: int, handed_again: bool = False) -> None:
        """A task already held is sent again: by a distributor the job was handed to again
        (``handed_again``: a batch), or listed by one. More than one distributor may then hold the job
        open (the submitter handed it again while the first was cut off, or one restarted and forgot it),
        so each gets the result: the worker tells the one its launch names, the master the others
        (``also``). A queued task's launch will name ``src``; a running one's result goes to ``src`` from
        the master, unless the worker tells it and it has not forgotten the job since (a batch sent
        again means it may have)."""
        core = self.core
        entry = core.dispatch.queued.get(key)
        also = self.also
        if entry is None:
            local = core.where[key]
            task = core.running[local][key][0]
            if handed_again or task.distributor != src:  # (also a task an earlier master placed: its
                also.setdefault(key, set()).add(src)    # worker tells a distributor this master does not know)
            return
        task = entry[0]
        if task.distributor != src:
            also.setdefault(key, set()).add(task.distributor)
            task.distributor = src
            also[key].discard(src)
            core.changed(key)

    def tell_others(self, key, task: Pending) -> None:
        """Task ``key`` ended: tell the distributors the master owes its result (``also``, ``repoint``)."""
        for dist in sorted(self.also.pop(key, ())):
            self.h.send(dist, TaskFinished(key[0], key[1], task.demand, self.cfg.group))
            self.recorder.count("results_forwarded")

    def status(self, local: int, msg, refused=None) -> None:
        """A worker's whole state (or a refusal carrying it): believe it, keep launches still on their way,
        queue again what the worker lost, and never count on capacity it does not have."""
        core = self.core
        self.probed.discard(local)
        self.down.discard(local)
        running = core.running[local]
        reported = {(j, i): (d, dist) for j, i, d, dist in msg.running}
        last = tuple(msg.last)
        seen = max(last[1] if last[0] == core.epoch else 0, getattr(msg, "answers", 0))
        in_flight = False
        for key, (task, cls, epoch, seq) in list(running.items()):
            if key in reported:
                continue
            if epoch == core.epoch and seq > seen:
                in_flight = True  # launched after what the worker has seen: still on its way
                continue
            if key == refused:
                core.drop_running(local, key, relaunch=False)
                core.requeue(task, cls)
                continue
            core.drop_running(local, key, relaunch=True)  # lost (or ended, its idle notice lost with a connection)
        for key, (demand, dist) in reported.items():
            if key not in running:  # placed by an earlier master: it holds the worker all the same
                other = core.where.get(key)
                if other is not None and other != local:  # it runs there too (relaunched when this
                    # worker was taken for down): that copy holds its worker until its idle notice, and
                    # is not relaunched if lost
                    task, _, epoch, seq = core.running[other][key]
                    core.running[other][key] = (task, -1, epoch, seq)
                entry = core.dispatch.queued.pop(key, None)
                core.changed(key)
                if entry is None:  # known only by its demand: it cannot be relaunched if lost
                    entry = (Pending(key[0], key[1], 0, (), tuple(demand), self.h.now, dist), -1)
                elif entry[0].distributor != dist:  # the job was handed again: the worker tells the
                    self.also.setdefault(key, set()).add(entry[0].distributor)  # distributor its launch
                    entry[0].distributor = dist                                 # named, the master the other
                running[key] = (entry[0], entry[1], -1, 0)
                core.where[key] = local
        if not in_flight:
            core.mark[local] = last
        self._known(local)

    def _known(self, local: int) -> None:
        """Worker ``local``'s state is known again (or known to be down): recount it, let a rebuild finish,
        dispatch."""
        self.refresh(local)
        if self.rebuild is not None:
            self.rebuild.workers.discard(local)
            self._maybe_recovered()
        self.core.activity()
        self.core.dispatch_pass()

    def refresh(self, local: int) -> None:
        """The view of worker ``local``: its capacity less what the master believes it runs (none if down)."""
        dispatch = self.core.dispatch
        free = [int(c) for c in dispatch.view.capacity[local]]
        if local in self.down:
            free = [0] * len(free)
        else:
            for entry in self.core.running[local].values():
                for r, d in enumerate(entry[0].demand):
                    free[r] -= d
        dispatch.refresh(local, [max(0, f) for f in free])

    def hello(self, local: int) -> None:
        """Worker ``local`` restarted with nothing: what its earlier incarnation ran is lost (queued again
        when its connection broke). Launches this master sent after the restart may have reached the new
        incarnation, so if it still counts some there it asks for the worker's status, which says which
        it runs (until then the worker counts as busy with them)."""
        self.core.mark[local] = (-1, 0)
        self.probed.discard(local)
        self.down.discard(local)
        if self.core.running[local]:
            self.probe(local)
        self._known(local)

    def probe(self, local: int) -> None:
        """Ask worker ``local`` for its Status (once at a time: a broken connection asks again)."""
        if local not in self.probed:
            self.probed.add(local)
            core = self.core
            self.h.send(core.worker_ids[local], Probe(core.epoch, core.seq[local]))

    def mark_down(self, local: int) -> None:
        """Worker ``local`` may have lost launches or idle notices with a connection: its tasks are queued
        again and it gets none until it speaks again."""
        core = self.core
        self.down.add(local)
        for key in sorted(core.running[local]):
            core.drop_running(local, key, relaunch=True)
        self.refresh(local)
        if core.worker_ids[local] == self.h.claim.second:
            self.h.new_second(self.down)
        self.watch_stranded()

    # ---- waiting tasks no live worker can run ---------------------------------------------
    def _stranded(self, items):
        """The waiting tasks of ``items`` ((key, (task, class)) pairs) that no live worker could run: a LOW
        task once every low-priority worker is down (a reserved one may not run it: Pigeon 2019, 2.2), a
        PigeonC task once every machine with its constraints is, any task once every worker is."""
        down, could_run, seen, parked = self.down, self.core.dispatch.could_run, {}, self.parked
        for key, (task, cls) in items:
            if key in parked:
                continue
            shape = (cls, task.constraints, task.demand)
            ok = seen.get(shape)
            if ok is None:
                ok = seen[shape] = could_run(cls, task.constraints, task.demand, down)
            if not ok:
                yield key, task, cls

    def sent_again(self, job_id: int, indices) -> list:
        """A batch's tasks still waiting, as (key, (task, class)) pairs; one this master handed back and
        its distributor sent here again (no other group can run it either) waits here for a worker to come
        back, never handed back again (``parked``): nothing bounces for ever."""
        queued, back, parked = self.core.dispatch.queued, self.handed_back, self.parked
        items = []
        for index in indices:
            key = (job_id, index)
            if key in back:
                back.discard(key)
                parked.add(key)
            elif key in queued:
                items.append((key, queued[key]))
        return items

    def watch_stranded(self, items=None) -> None:
        """While a worker is down and some waiting task (of ``items``, else of the queues) has no live
        worker that could run it, look again after ``RECOVER_ROUNDS`` master timeouts (a worker may come
        back meanwhile); a timer only while it is so, its wait doubling up to a minute while it finds some."""
        if self.stranded_armed or not self.down:
            return
        if next(self._stranded(self.core.dispatch.queued.items() if items is None else items), None) is not None:
            self.stranded_armed = True
            self.stranded_rounds += 1
            self.h.set_timer(backoff(self.cfg.timeout_us * RECOVER_ROUNDS, self.stranded_rounds),
                             StrandedTimer(self.core.epoch))

    def stranded_timer(self) -> None:
        """Hand the waiting tasks that still have no live worker to run them back to their distributors
        (``Returned``; to each the master owes the result, ``also``, too: the one its launch named may have
        forgotten the job), which send them to other groups; a worker that comes back finds them gone."""
        self.stranded_armed = False
        back: dict = {}
        core = self.core
        queued = core.dispatch.queued
        for key, task, cls in list(self._stranded(queued.items())) if self.down else ():
            del queued[key]  # (the fair queue drops it when its turn comes)
            core.changed(key)
            self.handed_back.add(key)
            item = (task.job_id, cls == HIGH, task.demand, task.index, task.duration_us, task.constraints)
            for dist in sorted({task.distributor, *self.also.pop(key, ())}):  # every one that may hold the job
                back.setdefault(dist, []).append(item)  # (one that forgot it in a crash ignores it)
        if not back:
            self.stranded_rounds = 0  # a worker came back: the next wait starts short again
        for dist in sorted(back):
            if dist >= 0:
                self.h.send(dist, Returned(self.cfg.group, tuple(back[dist])))
                self.recorder.count("tasks_returned", len(back[dist]))

    # ---- the fabric's notices -------------------------------------------------------------
    def broken(self, peer: int, cause: str) -> None:
        """A connection with ``peer`` broke (``cause``: crash, refused or timeout)."""
        local = self.core.local_of.get(peer)
        if local is not None:
            if peer == self.h.claim.second:
                self.core.resync()  # a sync may have been lost with it: the next one is the whole state
            self.probed.discard(local)
            self.mark_down(local)
            if cause == "timeout":  # a cut: ask again on a new connection, which breaks too while it holds
                self.probe(local)
            self._known(local)  # known to be down: a rebuild no longer waits for it
        elif peer in self.h.dist_ids:
            rec = self.rebuild
            if rec is not None and peer in rec.dists:
                rec.dists.discard(peer)  # it lists its tasks when it hears this master's claim again
                self._maybe_recovered()
            if cause == "timeout":  # the claim may have been lost: what it waits for is reconciled on it
                self.h.send(peer, self.h.claim)

    # ---- a distributor's list, and a new master's rebuild (``Rebuild``) --------------------
    def outstanding(self, msg, src: int) -> None:
        """A distributor's tasks for the group that are not done: queue those nobody holds."""
        core = self.core
        rec = self.rebuild
        if rec is not None:
            rec.heard_dist(src, msg.tasks)
        dispatch = core.dispatch
        for job_id, short, demand, index, duration, constraints in msg.tasks:
            key = (job_id, index)
            dispatch.admit(demand)
            task, cls = Pending(job_id, index, duration, constraints, demand, self.h.now, src), HIGH if short else LOW
            local = core.where.get(key)
            if local is not None:  # a worker holds it: if a status named it (known by its demand only),
                # the distributor's record makes it one the master can relaunch should the worker lose it
                held, held_cls, epoch, seq = core.running[local][key]
                if held_cls < 0:
                    core.running[local][key] = (task, cls, epoch, seq)
                    if held.distributor != src:  # its worker tells whoever an earlier master named
                        self.also.setdefault(key, set()).add(src)
                        task.distributor = held.distributor
                    continue
            if key in dispatch.queued or local is not None:
                self.repoint(key, src)  # its result goes to this distributor, which holds the job now
                continue
            if rec is None:  # (a new master's rebuild queues the group's tasks from the lists: none lost)
                self.recorder.count("tasks_requeued_from_list")
            core.requeue(task, cls)
        if rec is not None:
            self._maybe_recovered()
        core.activity()
        core.dispatch_pass()
        self.watch_stranded()

    def recover(self, since_us: int, kind: str, snapshot=None) -> None:
        """Start from the waiting tasks synced to the second master, if any, and wait for every other
        member's status (what it runs) and every distributor's list (the claim was just sent); dispatch
        waits."""
        others = {local for local, a in enumerate(self.core.worker_ids) if a != self.h.id}
        self.rebuild = rec = Rebuild(since_us, kind, others, set(self.h.dist_ids))
        if snapshot is not None:
            self._seed(snapshot, rec)
        self.h.set_timer(self.cfg.timeout_us * RECOVER_ROUNDS, RecoverTimer(self.core.epoch))

    def _seed(self, snapshot, rec: Rebuild) -> None:
        core = self.core
        for job_id, index, duration, constraints, demand, since, dist, cls in snapshot.queued_entries():
            core.dispatch.admit(demand)
            core.requeue(Pending(job_id, index, duration, constraints, demand, since, dist), cls)
            rec.seeded.add((job_id, index))

    def recover_timer(self) -> None:
        """The members that have not answered by now are taken for down (and asked again): dispatch."""
        rec = self.rebuild
        if rec is not None:
            self._finish_recovery()
            for local in sorted(rec.workers):
                self.probe(local)

    def _maybe_recovered(self) -> None:
        if self.rebuild is not None and self.rebuild.done():
            self._finish_recovery()

    def _finish_recovery(self) -> None:
        core = self.core
        rec = self.rebuild
        self.rebuild = None
        for local in sorted(rec.workers):  # nobody answered for it
            self.mark_down(local)
        queued = core.dispatch.queued
        for key, (task, _) in list(queued.items()):  # synced tasks whose distributor says they are done
            if rec.synced_but_done(key, task):
                del queued[key]
                core.changed(key)
        self.recorder.recovered(self.h.now - rec.since_us)
        core.activity()
        core.dispatch_pass()
