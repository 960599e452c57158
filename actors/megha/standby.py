"""Megha's active-standby LMs (Megha 2022, IV-D), on with ``--set lm_standby=true``.

Each LM ``lm-<c>`` has a replica ``lm-<c>-standby``; only the active one acts. The paper has the standby
hear every update; on connections (docs/connections.md) it need not: it is sent nothing while nothing
fails, and rebuilds the state when it takes over, from the workers (what each runs and has finished) and
the GMs (what each has asked). Our reading, where the paper gives no protocol:

- **Epochs.** The active holds an epoch; replica ``r`` only ever takes epochs with ``epoch % 2 == r``,
  so two replicas never hold the same one. Heartbeats and snapshots to the GMs carry it (in place of
  the incarnation), a takeover announces it to every worker, and workers and GMs answer anything from
  an older epoch with ``Fenced``: the sender steps down. A worker runs launches only from the LM of the
  latest epoch it has heard, so even two replicas that both believe they are active (both restarted at
  once, each taking the other's join for the sign that it failed) never have launches that both run:
  the workers fence the older one on its first launch, and the GMs on its first heartbeat.
- **Failure detection.** The standby joins its peer once (``Join``, answered ``Joined``): that opens its
  connection to the active, whose crash the fabric then reports to it (``ConnectionBroken``, cause
  ``crash``), as a TCP reset would. No beats: while nothing fails the pair exchanges nothing more. A
  notice that the active crashed, or refused a message (it is down), is the takeover's trigger; a cut
  that outlasts the connection timeout is not (the active may be alive behind it): the join is asked
  again after a backoff (``common.recovery.Retries``), for as long as it goes unanswered. A ``Join`` that
  reaches a standby means its peer restarted or stepped down, so nobody is active: it takes over.
- **Takeover.** The new active takes the next epoch of its own parity, asks every worker what it runs
  and has finished (``Takeover``; messages meanwhile wait, as for a restarted LM), reconciles, then
  sends every GM its whole state; a GM follows the later epoch and asks it again for every launch it has
  in flight there (a done task is answered with its completion). Detection plus takeover is one
  ``recovery_s`` sample, counted in ``failovers``.
- **Rejoining.** A replica that restarts, or that steps down, is a standby: it joins its peer; a join
  its peer refuses (it is down too) makes it take over itself.
- **A GM that follows the standby** (no notice told it of the takeover, and the new active's snapshot was
  lost to a cut): the standby answers what only the active acts on with ``NotActive`` (``LocalManager.hold``),
  and the GM asks both replicas for their state, as after a break (``gm_recovery``).
"""

from __future__ import annotations

from fedemu.fabric.log import emit

from ..common.events import FAILOVER
from ..common.recovery import Retries
from .messages import Fenced, Join, Joined, Takeover


class Standby:
    """The active/standby role of one LM replica: a component its ``LocalManager`` holds. As the standby it
    joins its peer and takes over when a notice says the peer failed; it changes the LM's role and epoch."""

    def __init__(self, lm, peer_name: str, replica: int, retry_us: int) -> None:
        self.core = lm
        self.peer_name = peer_name
        self.replica = replica  # 0 starts active; replica r only takes epochs with epoch % 2 == r
        self.retry_us = retry_us
        self.peer_id = -1
        self.joined = False  # a standby: its peer answered its join (it is the active)
        self.joins: Retries | None = None

    def start(self) -> None:
        """At start: replica 0 of a fresh run is active in epoch 0; any other start is a standby, which joins."""
        lm = self.core
        self.peer_id = lm.fabric.addr(self.peer_name)
        self.joins = lm.recover(Retries(lm, "join", self.retry_us, self._resend_join, self._join_pending))
        if lm.incarnation == 0 and self.replica == 0:
            return
        lm.active = False
        self._join()

    def _next_epoch(self) -> int:
        epoch = self.core.epoch + 1
        return epoch if epoch % 2 == self.replica else epoch + 1

    # ---- joining: the only messages between the replicas ------------------------------------
    def _join(self) -> None:
        self.joined = False
        self.core.send(self.peer_id, Join(self.core.epoch))

    def _join_pending(self, peer: int) -> list:
        return ["join"] if peer == self.peer_id and not self.core.active and not self.joined else []

    def _resend_join(self, peer: int, key) -> None:
        self.core.send(self.peer_id, Join(self.core.epoch))

    def on_join(self, msg: Join, src: int) -> None:
        lm = self.core
        if lm.active and msg.epoch > lm.epoch:  # the joiner knows a later epoch: this is an old active
            self._step_down(msg.epoch)
            return
        if not lm.active:  # the peer restarted, or stepped down: nobody acts
            lm.epoch = max(lm.epoch, msg.epoch)
            self._take_over(lm.now)
        lm.send(src, Joined(lm.epoch))

    def on_joined(self, msg: Joined, src: int) -> None:
        lm = self.core
        if msg.epoch < lm.epoch:
            if lm.active:
                lm.send(src, Fenced(lm.epoch))
            return
        if lm.active:
            if msg.epoch == lm.epoch:
                return
            self._step_down(msg.epoch)
        lm.epoch = msg.epoch
        self.joined = True
        self.joins.heard(src)

    def broken(self, brk) -> None:
        """A connection with the peer broke: its crash, or its refusal (it is down), makes a standby take over."""
        lm = self.core
        if brk.peer == self.peer_id and brk.peer_lost_state and not lm.active:
            self._take_over(brk.at_us)

    def on_fenced(self, msg: Fenced, src: int) -> None:
        lm = self.core
        if msg.epoch > lm.epoch:
            self._step_down(msg.epoch)
        elif lm.active and src in lm.local_of and not lm.recovery.rebuilding:
            lm.send(src, Takeover(lm.epoch))  # a worker that has not heard of this epoch (it restarted)

    # ---- changes of role --------------------------------------------------------------
    def _take_over(self, failed_us: int) -> None:
        """The active failed at ``failed_us`` (as far as is known): become it in the next epoch, after asking
        every worker."""
        lm = self.core
        lm.active = True
        self.joined = False
        lm.epoch = self._next_epoch()
        lm.recorder.count("failovers")
        if lm.fabric.event_log is not None:
            emit(lm, FAILOVER, kind="standby", epoch=lm.epoch, failed=self.peer_name)
        lm.forget_state()
        lm.recovery.rebuild(failed_us)  # detection plus takeover, from the failure

    def _step_down(self, epoch: int) -> None:
        """Someone holds a later epoch: stop enforcing, drop what the active held, rejoin as the standby."""
        lm = self.core
        lm.epoch = max(lm.epoch, epoch)
        if not lm.active:
            return
        lm.active = False
        lm.recorder.count("lm_step_downs")
        lm.forget_state()
        self._join()
