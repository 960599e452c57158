"""Megha's active-standby LMs (2022 paper, shared/papers file 002, IV-D), on with ``--set lm_standby=true``.

Each LM ``lm-<c>`` has a replica ``lm-<c>-standby``. As the paper says, both are sent every update from
the workers (task ends, registrations) and the GMs (launch, snapshot and adoption requests), but only
the active one enforces decisions; the standby keeps the cluster's done tasks and watches the active.
Our reading, where the paper gives no protocol:

- **Epochs.** The active holds an epoch; replica ``r`` only ever takes epochs with ``epoch % 2 == r``,
  so two replicas never hold the same one. Heartbeats and snapshots to the GMs carry it (in place of
  the incarnation), a takeover announces it to every worker, and workers and GMs answer anything from
  an older epoch with ``Fenced``: the sender steps down. A worker runs launches only from the LM of the
  latest epoch it has heard, so a partition between the two replicas can leave an old active that still
  believes it is active, but never two whose launches run: the workers fence the older one on its first
  launch, and the GMs on its first heartbeat.
- **Failure detection.** While it has work in hand (running tasks, unacknowledged changes, held
  messages, a rebuild) the active beats to its standby every ``lm_beat_s``, naming when the next beat
  is due; its last beat says none is due. The standby pings the active when a beat is one period
  overdue, or when it sees a request while no beat is due (an idle active resumes beating on any
  request), and takes over when the ping is not answered within ``lm_takeover_s``.
- **Takeover.** The new active takes the next epoch of its own parity, asks every worker what it runs
  and has finished (``Takeover``; messages meanwhile wait, as for a restarted LM), reconciles, then
  sends every GM its whole state; the GMs follow the epoch. Detection plus takeover is one
  ``recovery_s`` sample, counted in ``failovers``.
- **Rejoining.** A replica that restarts, or that steps down, is a standby: it asks its peer for the
  epoch and the done tasks (``Join``), retried with back-off; with no answer it takes over itself.
"""

from __future__ import annotations

import attrs

from fedemu.policies.change_log import ChangeLog

from .messages import RETRIES, Fenced, Join, Joined, LmBeat, LmPing, LmTimer, Takeover, backoff


@attrs.frozen
class StandbyTimes:
    """The replicas' settings, in microseconds."""

    beat_us: int
    takeover_us: int


class Replica:
    """The active/standby role of a ``LocalManager`` (a mixin: it uses the LM's state and rebuild)."""

    def _start_replica(self) -> None:
        """At start: replica 0 of a fresh run is active in epoch 0; any other start is a standby."""
        self.peer_id = self.fabric.addr(self.peer_name)
        self.notify = (self.id, self.peer_id)
        if self.incarnation == 0 and self.replica == 0:
            return
        self.active = False
        if self.incarnation > 0:  # memory lost: find the active (or take over if none answers)
            self._join()
            self._expect(self.now + self.standby.takeover_us)

    def _next_epoch(self) -> int:
        epoch = self.epoch + 1
        return epoch if epoch % 2 == self.replica else epoch + 1

    # ---- the active side --------------------------------------------------------------
    def _work_in_hand(self) -> bool:
        return bool(self.tasks or self.held or self.rebuilding or self.change_log.pending())

    def _keep_beating(self) -> None:
        """Activity: beat now unless beats are already under way."""
        if not self.beating:
            self.beating = True
            self._beat()

    def _beat(self) -> None:
        if self._work_in_hand():
            self.send(self.peer_id, LmBeat(self.epoch, self.now + self.standby.beat_us))
            self.set_timer(self.standby.beat_us, LmTimer("beat", -1, self.epoch))
        else:
            self.send(self.peer_id, LmBeat(self.epoch, 0))
            self.beating = False

    def on_LmPing(self, msg: LmPing, src: int) -> None:
        if msg.epoch > self.epoch:
            self._step_down(msg.epoch)
        elif self.active:
            self.send(src, LmBeat(self.epoch, self.now + self.standby.beat_us if self.beating else 0))

    def on_Fenced(self, msg: Fenced, src: int) -> None:
        if msg.epoch > self.epoch:
            self._step_down(msg.epoch)
        elif self.active and src in self.local_of and not self.rebuilding:
            self.send(src, Takeover(self.epoch))  # a worker that has not heard of this epoch (it restarted)

    def on_Join(self, msg: Join, src: int) -> None:
        if msg.epoch > self.epoch:
            self._step_down(msg.epoch)
        elif self.active:
            done = tuple((j, i, w) for (j, i), w in sorted(self.done.items()))
            self.send(src, Joined(self.epoch, done))

    # ---- the standby side -------------------------------------------------------------
    def _observe(self, msg, src: int) -> None:
        """A standby sees a request or an update: note done tasks, and expect the active to beat."""
        if type(msg).__name__ == "TaskFinished":
            self.done[(msg.job_id, msg.index)] = self.local_of[src]
        if self.expect_by < 0:
            self._expect(self.now + self.standby.takeover_us)

    def _expect(self, at_us: int) -> None:
        self.expect_by = at_us
        self.expect_nonce += 1
        self.set_timer(max(0, at_us - self.now), LmTimer("expect", -1, self.expect_nonce))

    def on_LmBeat(self, msg: LmBeat, src: int) -> None:
        if msg.epoch < self.epoch:
            if self.active:  # an old active that has not heard of me yet
                self.send(src, Fenced(self.epoch))
            return
        if self.active:
            if msg.epoch == self.epoch:
                return
            self._step_down(msg.epoch)
        self.epoch = msg.epoch
        self.heard_peer_us = self.now
        self.pinged = False
        if msg.next_us:
            self._expect(msg.next_us + self.standby.beat_us)
        else:
            self.expect_by = -1
            self.expect_nonce += 1

    def on_Joined(self, msg: Joined, src: int) -> None:
        if msg.epoch < self.epoch or self.active:
            return
        self.epoch = msg.epoch
        self.joined = True
        self.heard_peer_us = self.now
        for job_id, index, w in msg.done:
            self.done[(job_id, index)] = w

    def _join(self) -> None:
        self.joined = False
        self.join_asks = 1
        self.send(self.peer_id, Join(self.epoch))
        self.set_timer(backoff(self.standby.takeover_us, 1), LmTimer("join", -1, 1))

    def _replica_timer(self, msg: LmTimer) -> None:
        what = msg.what
        if what == "beat":
            if self.active and msg.nonce == self.epoch:
                self._beat()
            else:
                self.beating = False
        elif what == "expect":
            if self.active or msg.nonce != self.expect_nonce:
                return
            if not self.pinged:  # overdue: ask, and wait one takeover timeout for the answer
                self.pinged = True
                self.send(self.peer_id, LmPing(self.epoch))
                self._expect(self.now + self.standby.takeover_us)
            else:
                self._take_over()
        elif what == "join":
            if not self.active and not self.joined and self.join_asks < RETRIES:
                self.join_asks += 1
                self.send(self.peer_id, Join(self.epoch))
                self.set_timer(backoff(self.standby.takeover_us, self.join_asks), LmTimer("join", -1, self.join_asks))

    # ---- changes of role --------------------------------------------------------------
    def _take_over(self) -> None:
        """The active does not answer: become it in the next epoch, after asking every worker."""
        self.active = True
        self.pinged = False
        self.expect_by = -1
        self.epoch = self._next_epoch()
        self.recorder.count("failovers")
        self.started_us = self.heard_peer_us  # detection plus takeover, from the last sign of life
        self._forget_state()
        self.rebuilding = set(range(len(self.specs)))
        self._ask_rebuild(0)
        self.beating = False
        self._keep_beating()  # an old active still up hears of the new epoch

    def _step_down(self, epoch: int) -> None:
        """Someone holds a later epoch: stop enforcing, drop what the active held, rejoin as the standby."""
        self.epoch = max(self.epoch, epoch)
        if not self.active:
            return
        self.active = False
        self.recorder.count("lm_step_downs")
        self._forget_state()
        self.heard_peer_us = self.now
        self._join()
        self._expect(self.now + self.standby.takeover_us)

    def _forget_state(self) -> None:
        """What only an active holds (the done tasks stay: they are facts the workers reported)."""
        self.free = [list(c) for c in self.capacity]
        self.change_log = ChangeLog(self.free, len(self.gm_names))
        self.tasks.clear()
        for execs in self.execs:
            execs.clear()
        self.due.clear()
        self.due_at.clear()
        self.probing.clear()
        self.down.clear()
        self.down_asks.clear()
        self.stopping = {}  # a stop under way is forgotten: the rebuild learns what still runs
        self.rebuilding = set()
        self.held = []
        self.quiet = 0
        self.armed = False
