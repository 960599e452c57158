"""Megha's active-standby LMs (Megha 2022, IV-D), on with ``--set lm_standby=true``.

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

from fedemu.fabric.log import emit

from ..common.events import FAILOVER
from ..common.recovery import backoff
from .messages import RETRIES, Fenced, Join, Joined, LmBeat, LmPing, LmTimer, Takeover


@attrs.frozen
class StandbyTimes:
    """The replicas' settings, in microseconds."""

    beat_us: int
    takeover_us: int


class Standby:
    """The active/standby role of one LM replica: a component its ``LocalManager`` holds. It watches the
    peer (as the standby) or beats to it (as the active), and changes the LM's role and epoch."""

    def __init__(self, lm, peer_name: str, replica: int, times: StandbyTimes) -> None:
        self.lm = lm
        self.peer_name = peer_name
        self.replica = replica  # 0 starts active; replica r only takes epochs with epoch % 2 == r
        self.times = times
        self.peer_id = -1
        self.beating = False
        self.expect_by = -1  # a standby: when the active's next sign of life is due (-1: none is)
        self.expect_nonce = 0
        self.pinged = False
        self.heard_peer_us = 0
        self.joined = False
        self.join_asks = 0

    def start(self) -> None:
        """At start: replica 0 of a fresh run is active in epoch 0; any other start is a standby."""
        lm = self.lm
        self.peer_id = lm.fabric.addr(self.peer_name)
        lm.notify = (lm.id, self.peer_id)
        if lm.incarnation == 0 and self.replica == 0:
            return
        lm.active = False
        if lm.incarnation > 0:  # memory lost: find the active (or take over if none answers)
            self._join()
            self._expect(lm.now + self.times.takeover_us)

    def _next_epoch(self) -> int:
        epoch = self.lm.epoch + 1
        return epoch if epoch % 2 == self.replica else epoch + 1

    # ---- the active side --------------------------------------------------------------
    def _work_in_hand(self) -> bool:
        lm = self.lm
        return bool(lm.tasks or lm.held or lm.rebuilding or lm.change_log.pending())

    def keep_beating(self) -> None:
        """Activity: beat now unless beats are already under way."""
        if not self.beating:
            self.beating = True
            self._beat()

    def _beat(self) -> None:
        lm = self.lm
        if self._work_in_hand():
            lm.send(self.peer_id, LmBeat(lm.epoch, lm.now + self.times.beat_us))
            lm.set_timer(self.times.beat_us, LmTimer("beat", -1, lm.epoch))
        else:
            lm.send(self.peer_id, LmBeat(lm.epoch, 0))
            self.beating = False

    def on_ping(self, msg: LmPing, src: int) -> None:
        lm = self.lm
        if msg.epoch > lm.epoch:
            self._step_down(msg.epoch)
        elif lm.active:
            lm.send(src, LmBeat(lm.epoch, lm.now + self.times.beat_us if self.beating else 0))

    def on_fenced(self, msg: Fenced, src: int) -> None:
        lm = self.lm
        if msg.epoch > lm.epoch:
            self._step_down(msg.epoch)
        elif lm.active and src in lm.local_of and not lm.rebuilding:
            lm.send(src, Takeover(lm.epoch))  # a worker that has not heard of this epoch (it restarted)

    def on_join(self, msg: Join, src: int) -> None:
        lm = self.lm
        if msg.epoch > lm.epoch:
            self._step_down(msg.epoch)
        elif lm.active:
            done = tuple((j, i, w) for (j, i), w in sorted(lm.done.items()))
            lm.send(src, Joined(lm.epoch, done))

    # ---- the standby side -------------------------------------------------------------
    def observe(self, msg, src: int) -> None:
        """A standby sees a request or an update: note done tasks, and expect the active to beat."""
        lm = self.lm
        if type(msg).__name__ == "TaskFinished":
            lm.done[(msg.job_id, msg.index)] = lm.local_of[src]
        if self.expect_by < 0:
            self._expect(lm.now + self.times.takeover_us)

    def _expect(self, at_us: int) -> None:
        lm = self.lm
        self.expect_by = at_us
        self.expect_nonce += 1
        lm.set_timer(max(0, at_us - lm.now), LmTimer("expect", -1, self.expect_nonce))

    def on_beat(self, msg: LmBeat, src: int) -> None:
        lm = self.lm
        if msg.epoch < lm.epoch:
            if lm.active:  # an old active that has not heard of me yet
                lm.send(src, Fenced(lm.epoch))
            return
        if lm.active:
            if msg.epoch == lm.epoch:
                return
            self._step_down(msg.epoch)
        lm.epoch = msg.epoch
        self.heard_peer_us = lm.now
        self.pinged = False
        if msg.next_us:
            self._expect(msg.next_us + self.times.beat_us)
        else:
            self.expect_by = -1
            self.expect_nonce += 1

    def on_joined(self, msg: Joined, src: int) -> None:
        lm = self.lm
        if msg.epoch < lm.epoch or lm.active:
            return
        lm.epoch = msg.epoch
        self.joined = True
        self.heard_peer_us = lm.now
        for job_id, index, w in msg.done:
            lm.done[(job_id, index)] = w

    def _join(self) -> None:
        lm = self.lm
        self.joined = False
        self.join_asks = 1
        lm.send(self.peer_id, Join(lm.epoch))
        lm.set_timer(backoff(self.times.takeover_us, 1), LmTimer("join", -1, 1))

    def on_timer(self, msg: LmTimer) -> None:
        lm = self.lm
        what = msg.what
        if what == "beat":
            if lm.active and msg.nonce == lm.epoch:
                self._beat()
            else:
                self.beating = False
        elif what == "expect":
            if lm.active or msg.nonce != self.expect_nonce:
                return
            if not self.pinged:  # overdue: ask, and wait one takeover timeout for the answer
                self.pinged = True
                lm.send(self.peer_id, LmPing(lm.epoch))
                self._expect(lm.now + self.times.takeover_us)
            else:
                self._take_over()
        elif what == "join":
            if not lm.active and not self.joined and self.join_asks < RETRIES:
                self.join_asks += 1
                lm.send(self.peer_id, Join(lm.epoch))
                lm.set_timer(backoff(self.times.takeover_us, self.join_asks), LmTimer("join", -1, self.join_asks))

    # ---- changes of role --------------------------------------------------------------
    def _take_over(self) -> None:
        """The active does not answer: become it in the next epoch, after asking every worker."""
        lm = self.lm
        lm.active = True
        self.pinged = False
        self.expect_by = -1
        lm.epoch = self._next_epoch()
        lm.recorder.count("failovers")
        if lm.fabric.event_log is not None:
            emit(lm, FAILOVER, kind="standby", epoch=lm.epoch, failed=self.peer_name)
        lm.started_us = self.heard_peer_us  # detection plus takeover, from the last sign of life
        lm.forget_state()
        lm.rebuilding = set(range(len(lm.specs)))
        lm.ask_rebuild(0)
        self.beating = False
        self.keep_beating()  # an old active still up hears of the new epoch

    def _step_down(self, epoch: int) -> None:
        """Someone holds a later epoch: stop enforcing, drop what the active held, rejoin as the standby."""
        lm = self.lm
        lm.epoch = max(lm.epoch, epoch)
        if not lm.active:
            return
        lm.active = False
        lm.recorder.count("lm_step_downs")
        lm.forget_state()
        self.heard_peer_us = lm.now
        self._join()
        self._expect(lm.now + self.times.takeover_us)
