"""What a Megha GM does when something fails: a component its ``GlobalManager`` holds (``recovery``).

The papers' protocol (launches, completions, heartbeats, failure replies) runs on connections
(docs/connections.md), on which nothing is lost unless the connection breaks, and then the fabric tells
both ends. So nothing here runs in a fault-free run: each mechanism starts from a broken connection, a
restart, a resubmitted job or a later LM epoch. Our reading of the 2022 paper's high availability
(section IV), with our timers where it gives none:

- **A broken connection with an LM** (a crash, a refused message, or a cut longer than
  ``conn_timeout_s``): what it carried may be lost (launches, completions, failure replies,
  heartbeats). The GM asks that LM for its whole state (``view_resyncs``: at once after a cut, a retry
  period later when the LM is down: a rebuilt LM sends every GM its state unasked), and when the state
  comes it asks again every launch it has in flight there (``launches_retried``); the LM launches
  idempotently by (job, task), so a running task is answered ``LaunchAccepted`` and a done one with its
  completion. While the LM has not answered three asks, each launch there whose task is
  ``launch_timeout_s`` past its expected end is queued again elsewhere (``launches_abandoned``: a task
  running there may run twice, a duplicate execution), and that LM's view is emptied until it is heard
  from; after ``REQUEST_TRIES`` asks, all of them are. The asks go on (backing off to a minute) until the
  state comes: the LM may come back after any outage, and nothing else would ask it again.
- **Stateless GM**: a restarted GM (incarnation > 0) knows nothing. Its view of every LM starts empty
  (it launches nowhere) until that LM's ``Snapshot`` arrives, asked with back-off; the last one ends the
  rebuild (``gm_rebuilds``, and its duration in ``recovery_s``). The asks never run out (they back off
  to a minute): an LM cut off for longer than any bound still comes back, and an idle one sends no
  heartbeat that would prompt another ask. A broken LM's launches are given up as above.
- **A job handed again** (``Resubmit``: it was never reported complete) is first adopted: every LM says
  which of its tasks run or ran there (and makes this GM their owner); the others are queued. An LM that
  has not answered ``REQUEST_TRIES`` asks is taken for gone, the failure detector's choice: its part is
  queued again (a task still running there runs twice, a duplicate execution, counted; its completion
  counts once). A ``TaskLost`` meanwhile takes that task off what the adoption found running.
- **Worker loss**: an LM hands back the tasks of a worker down too long (``TaskLost``): queued again.
- **One chain of asks at a time.** Each retry (an LM's state, the snapshots, a job's adoption) is one
  timer ``GmTimer(what, key, nonce)``; starting a chain again (an LM asked again after its state came, a
  job handed again) supersedes the timer of the one before, which is dropped when it fires. (Without the
  nonce a timer of an ended chain went on asking inside the next one: two chains per LM, each re-asking
  and backing off on its own; ``tests/test_megha_resync.py``.)
- **Active-standby LMs** (``lm_standby``, see ``standby``): an ask for an LM's state or a job's tasks goes
  to both replicas; the GM follows the replica of the latest epoch a heartbeat or snapshot came from (and
  asks it for its state, as after a break), and answers one from an older epoch with ``Fenced``. A
  followed replica that answers ``NotActive`` (it is the standby now) is treated as a broken one.
"""

from __future__ import annotations

from ..common.front_end import Pending
from ..common.recovery import backoff
from ..common.submitter import Pong
from .messages import (RETRIES, AdoptJob, Fenced, GmTimer, JobTasks, LaunchAccepted, NotActive, SnapshotRequest,
                       TaskLost)

REQUEST_TRIES = RETRIES  # unanswered asks of an LM before the GM moves all its work there elsewhere
PATIENCE = 3  # unanswered asks of a broken LM's state before its overdue launches are queued elsewhere


class GmRecovery:
    """The GM's failure handling (above). The GM's own handlers call it at a few points: a heartbeat's
    epoch (``heard``), an answer from a replica (``followed``), a job's arrival (``job_arrived``)."""

    def __init__(self, gm, lms: int) -> None:
        self.core = gm
        self.lm_inc = [0] * lms  # each LM's epoch as last heard (its incarnation without standbys)
        self.rebuilding: set[int] = set()  # LMs whose view is empty until their snapshot comes
        self.snapshot_asks = 0
        self.resyncing: set[int] = set()  # LMs asked for their state (a break, a new epoch)
        self.resync_asks = [0] * lms
        self.asked_at = [-1] * lms  # per LM asked for its state: the launches numbered by then
        self.broken: set[int] = set()  # LMs whose connection broke, until their state comes back
        self.reask: set[int] = set()  # LMs whose launches in flight are asked again when their state comes
        self.adopting: dict[int, list] = {}  # job -> [job, LMs yet to answer, running, done, asks]
        self.started_us = -1  # a restarted GM: when it started to rebuild
        self.armed: dict[tuple[str, int], int] = {}  # (what, key) -> nonce of the one timer wanted for it
        self.nonce = 0

    def start(self) -> None:
        """A restarted (stateless) GM: empty every LM's view, ask for snapshots, and ask the submitter (the
        jobs' owner of record) for its jobs back."""
        gm = self.core
        self.started_us = gm.now
        for lm in range(len(self.lm_inc)):
            self.forget(lm)
        self.ask_snapshots()
        if "submitter" in gm.fabric.names:
            gm.send(gm.fabric.addr("submitter"), Pong(gm.gm, None))

    # ---- the view: emptied, rebuilt, asked again ------------------------------------------
    def forget(self, lm: int) -> None:
        """Treat LM ``lm``'s view as empty (launch nothing there) until its snapshot arrives."""
        gm = self.core
        search = gm.search
        n = search.num_partitions * search.per_partition
        zero = (0,) * search.views[lm][0].num_resources
        search.learn(lm, tuple(range(n)), (zero,) * n)
        self.rebuilding.add(lm)
        if gm.users is not None:
            gm.users.forget_holders(lm)

    def ask_snapshots(self) -> None:
        gm = self.core
        for lm in sorted(self.rebuilding):
            self.ask_state(lm)
        self.snapshot_asks += 1
        self.arm(backoff(gm.request_timeout_us, self.snapshot_asks), "snapshots", -1)

    def arm(self, delay_us: int, what: str, key: int) -> None:
        """Set the one timer of ``what`` for ``key``: one set before for them is superseded (its chain of
        asks ended, and a new one began), and is dropped when it fires."""
        self.nonce += 1
        self.armed[(what, key)] = self.nonce
        self.core.set_timer(delay_us, GmTimer(what, key, self.nonce))

    def on_connection_broken(self, msg) -> None:
        """A connection with an LM broke (docs/connections.md): ask that LM for its whole state (at once
        after a long cut, a retry period later when the LM is down); already asking it, ask again at once
        after a cut (the asks went down with the connection). A break with the replica this GM does not
        follow changes nothing: that one acts on nothing it was sent."""
        gm = self.core
        peer = msg.dst if msg.src == gm.id else msg.src
        lm = gm.lm_of.get(peer)
        if lm is None or (gm.replicas and peer != gm.lm_ids[lm]):
            return
        self.broken.add(lm)
        self.reask.add(lm)
        if (lm in self.resyncing or lm in self.rebuilding) and msg.cause == "timeout":  # the asks sent on it are lost: ask again now, on a new connection
            self.ask_state(lm)
            return
        self.resync(lm, now=msg.cause == "timeout")

    def resync(self, lm: int, now: bool = True) -> None:
        """Ask LM ``lm`` for its whole state (now, or after the first retry period), unless already asking;
        its launches in flight are asked again when the state comes."""
        if lm in self.resyncing or lm in self.rebuilding:
            return  # already asking (an empty view is asked for until its snapshot comes)
        self.resyncing.add(lm)
        self.resync_asks[lm] = 0
        self.core.recorder.count("view_resyncs")
        if now:
            self.ask_resync(lm)
        else:
            self.arm(self.core.request_timeout_us, "resync", lm)

    def refresh(self, lm: int) -> None:
        """``view_refresh=full``: ask LM ``lm`` for its whole state now, unless already asking (counted in
        ``view_refreshes`` by the GM, not as a resync)."""
        if lm in self.resyncing or lm in self.rebuilding:
            return
        self.resyncing.add(lm)
        self.resync_asks[lm] = 0
        self.ask_resync(lm)

    def ask_resync(self, lm: int) -> None:
        gm = self.core
        self.resync_asks[lm] += 1
        self.ask_state(lm)
        self.arm(backoff(gm.request_timeout_us, self.resync_asks[lm]), "resync", lm)

    def ask_state(self, lm: int) -> None:
        """Ask LM ``lm`` for a snapshot, noting which launches it will already have seen."""
        self.asked_at[lm] = self.core.attempts
        self.core.to_lm(lm, SnapshotRequest(self.core.gm))

    def retake(self, lm: int) -> set:
        """A snapshot asked for reflects the launches sent before the ask (the connection is FIFO), not
        those sent since, which its values just undid in the view: take their demand again. Returns them."""
        gm = self.core
        after, self.asked_at[lm] = self.asked_at[lm], -1
        if after < 0:
            return set()
        taken = {key for key, f in gm.inflight.items() if f.lm == lm and f.attempt > after}
        for key in sorted(taken):
            flight = gm.inflight[key]
            gm.search.take_back(lm, flight.worker, flight.task.demand)
        return taken

    def on_snapshot(self, msg, src: int) -> None:
        """An LM's whole state: asked for, or sent unasked by an LM that rebuilt its state (a restart, or a
        standby that took over: a later epoch, which this GM follows from now on)."""
        gm = self.core
        lm = msg.lm
        if not self.follow(lm, msg.incarnation, src):
            return
        self.rebuilding.discard(lm)
        asked = lm in self.reask or msg.incarnation > self.lm_inc[lm]  # (a rebuilt LM)
        self.resyncing.discard(lm)
        self.broken.discard(lm)
        self.reask.discard(lm)
        self.lm_inc[lm] = msg.incarnation
        gm.lm_upto[lm] = msg.upto
        gm.apply(lm, msg.workers, msg.frees, msg.holders)
        taken = self.retake(lm)
        if asked:
            self.ask_launches_again(lm, taken)
        if not self.rebuilding and gm.incarnation > 0 and self.started_us >= 0:
            gm.recorder.count("gm_rebuilds")
            gm.recorder.recovered(gm.now - self.started_us)
            self.started_us = -1
        gm.schedule()

    def ask_launches_again(self, lm: int, taken: set) -> None:
        """Ask LM ``lm`` again for every launch in flight there (their answers may have been lost). The
        snapshot just learnt may not count them (lost, or not there yet): their demand is taken again
        (``taken`` already were), until the answer says what the LM holds."""
        gm = self.core
        for key in sorted(k for k, f in gm.inflight.items() if f.lm == lm):
            flight = gm.inflight[key]
            if key not in taken:
                gm.search.take_back(lm, flight.worker, flight.task.demand)
            gm.recorder.count("launches_retried")
            gm.send_launch(flight)

    def on_not_active(self, msg: NotActive, src: int) -> None:
        """The replica this GM follows is the standby (it restarted or stepped down, and no notice told this
        GM: it may never have had a connection with the replica's earlier life to break), so it runs nothing
        this GM sends it, as if the connection had broken: launch nothing more there, ask both replicas for
        their state (the active's, of a later epoch, is followed, and asked again every launch in flight
        there), and meanwhile queue elsewhere the launches that fall overdue (``give_up``). An answer from
        the replica this GM no longer follows is stale."""
        lm = msg.lm
        if src != self.core.lm_ids[lm]:
            return
        self.broken.add(lm)
        self.reask.add(lm)
        self.resync(lm)
        if lm not in self.rebuilding:
            self.forget(lm)

    def give_up(self, lm: int, asks: int) -> None:
        """A broken LM has not answered ``asks`` asks for its state: past ``PATIENCE``, queue elsewhere
        its launches in flight whose tasks are ``launch_timeout_s`` overdue (all of them once the asks
        have run out), and launch nothing there until its state comes."""
        if lm not in self.broken or asks < PATIENCE:
            return
        gm = self.core
        late = gm.now - gm.launch_timeout_us if asks < REQUEST_TRIES else None
        for key in sorted(k for k, f in gm.inflight.items() if f.lm == lm and (late is None or f.end_us <= late)):
            flight = gm.inflight.pop(key)
            gm.recorder.count("launches_abandoned")
            gm.released(flight.lm, flight.worker, *key)
            gm.requeue(flight.task)
        if lm not in self.rebuilding:
            self.forget(lm)
        gm.schedule()

    def due(self, msg: GmTimer) -> None:
        """A retry timer: dropped unless it is the one wanted for its ``what`` and ``key`` (a chain of asks
        that ended and began again has a later one: two chains would each ask, and back off, on their own)."""
        if self.armed.get((msg.what, msg.key)) != msg.nonce:
            return
        del self.armed[(msg.what, msg.key)]
        if msg.what == "snapshots":
            if self.rebuilding:
                for lm in sorted(self.broken & self.rebuilding):
                    self.give_up(lm, self.snapshot_asks)
                self.ask_snapshots()  # backing off to a minute, for as long as an LM may return
        elif msg.what == "resync":
            lm = msg.key
            if lm in self.resyncing:  # asked again, backing off to a minute, for as long as the LM may return
                self.give_up(lm, self.resync_asks[lm])
                self.ask_resync(lm)
        else:  # "adopt"
            job_id = msg.key
            entry = self.adopting.get(job_id)
            if entry is not None:
                if entry[4] < REQUEST_TRIES:
                    self.ask_adoption(job_id)
                else:
                    self.adopted(job_id)

    # ---- epochs (active-standby LMs) ------------------------------------------------------
    def heard(self, lm: int, epoch: int, src: int) -> bool:
        """A heartbeat of ``epoch`` from ``src``: whether to learn it. A later epoch (a restarted LM, or a
        standby that took over) is followed, and asked for its state."""
        if epoch != self.lm_inc[lm]:
            if not self.follow(lm, epoch, src):
                return False  # from an LM incarnation that has since restarted, or an old active
            self.lm_inc[lm] = epoch
            self.reask.add(lm)  # a rebuilt LM (or the other replica): what it knows of this GM's launches
            self.resync(lm)
        return True

    def follow(self, lm: int, epoch: int, src: int) -> bool:
        """Whether a heartbeat or snapshot of ``epoch`` from ``src`` is current: one from a later epoch
        makes ``src`` the LM this GM follows; one from an older epoch is refused (and, with standbys,
        answered ``Fenced``: an old active that still believes it is one)."""
        gm = self.core
        if epoch < self.lm_inc[lm]:
            if gm.replicas:
                gm.send(src, Fenced(self.lm_inc[lm]))
            return False
        if epoch > self.lm_inc[lm] and gm.replicas and src != gm.lm_ids[lm]:
            gm.lm_ids[lm] = src
            gm.recorder.count("gm_lm_switches")
        return True

    def followed(self, lm: int, src: int) -> bool:
        """Whether an answer's free vectors may be learnt: with standby LMs only the followed replica's
        are. An answer from the other is an old active's, or a new active's this GM has not heard the
        epoch of: ask both for a snapshot, whose epoch says which to follow."""
        if not self.core.replicas or src == self.core.lm_ids[lm]:
            return True
        self.reask.add(lm)
        self.resync(lm)
        return False

    # ---- a job handed again -----------------------------------------------------------------
    def on_resubmit(self, msg, src: int) -> None:
        """A job handed again (its GM failed, or its connection broke): ask the LMs what of it ran."""
        gm = self.core
        job = msg.job
        if not gm.admit(job, src):
            return
        gm.recorder.count("jobs_adopted")
        self.adopting[job.job_id] = [job, set(range(len(gm.lm_ids))), {}, set(), 0]
        self.ask_adoption(job.job_id)

    def ask_adoption(self, job_id: int) -> None:
        gm = self.core
        entry = self.adopting[job_id]
        entry[4] += 1
        for lm in sorted(entry[1]):
            gm.to_lm(lm, AdoptJob(job_id, gm.gm))
        self.arm(backoff(gm.request_timeout_us, entry[4]), "adopt", job_id)

    def on_job_tasks(self, msg: JobTasks, src: int) -> None:
        entry = self.adopting.get(msg.job_id)
        if entry is None or msg.lm not in entry[1]:
            return
        entry[1].discard(msg.lm)
        for index, worker, end_us in msg.running:
            entry[2][index] = (msg.lm, worker, end_us)
        entry[3].update(msg.done)
        if not entry[1]:
            self.adopted(msg.job_id)

    def adopted(self, job_id: int) -> None:
        gm = self.core
        if gm.gang is not None and gm.gang.adopted(job_id):
            return  # a gang again
        job, _, running, done, _ = self.adopting.pop(job_id)
        now = gm.now
        for i, d in enumerate(job.durations_us):
            task = Pending(job_id, i, d, job.constraints[i], job.demand, now)
            if i in done:
                continue
            if i in running:
                lm, worker, end_us = running[i]
                flight = gm.new_flight(task, lm, worker)
                flight.end_us = end_us
                gm.track(flight)
            else:
                gm.enqueue(task)
        for i in sorted(done):
            if job_id in gm.open_jobs:
                gm.task_done(job_id, i)
        gm.schedule()

    def on_ping(self, msg, src: int) -> None:
        """The submitter asks about the jobs it handed here: answer those this GM does not hold."""
        gm = self.core
        unknown = tuple(j for j in msg.jobs if j not in gm.open_jobs and j not in self.adopting)
        gm.send(src, Pong(gm.gm, unknown))

    # ---- answers about one task ------------------------------------------------------------
    def on_launch_accepted(self, msg: LaunchAccepted, src: int) -> None:
        """A launch asked again of a task already running there: wait for its end. (An answer about
        another launch of the task, an earlier one elsewhere, moves nothing but the view.)"""
        gm = self.core
        if not self.followed(msg.lm, src):
            return
        gm.set_free(msg.lm, msg.worker, msg.free)
        flight = gm.inflight.get((msg.job_id, msg.index))
        if flight is not None and flight.lm == msg.lm and flight.worker == msg.worker:
            flight.end_us = msg.end_us
        gm.schedule()

    def on_task_lost(self, msg: TaskLost, src: int) -> None:
        """The task's worker stayed down: schedule it again. A job being adopted forgets that the LM ran
        it (its answer came before the hand-back), so the adoption queues it."""
        gm = self.core
        entry = self.adopting.get(msg.job_id)
        if entry is not None and entry[2].get(msg.index, (-1,))[0] == msg.lm:
            del entry[2][msg.index]
        flight = gm.inflight.pop((msg.job_id, msg.index), None)
        if flight is not None:
            gm.released(flight.lm, flight.worker, msg.job_id, msg.index)
        if flight is not None and msg.job_id in gm.open_jobs:
            gm.requeue(flight.task)
            gm.schedule()
