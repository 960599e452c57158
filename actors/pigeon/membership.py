"""The membership protocol every member of a Pigeon / PigeonC group runs (``GroupMember``, mixed into the
``Master`` actor and ``PigeonWorker``): the claim it believes, suspicion and elections, the second
master's watch (``failover.SecondWatch``), and the master role (``role.MasterCore``) while it holds it.

Our protocol where Pigeon (2019, "Master Failure Recovery") gives only the idea:
- The master role is an object any group member can hold: ``master-<g>`` holds it first; the second
  master is a WORKER of the group, as the paper suggests, so that any worker can also declare itself
  master when both are lost (one code path for both).
- A distributor whose master stops answering (``Suspect``) alerts the second master and one worker; a
  member pings the master, and if it does not answer within ``master_timeout_s`` the second master
  takes over, or else, after alerting the second master and waiting as long again, the member declares
  itself master (an election). Concurrent declarations are ordered by (epoch, earliest declaration
  time, lowest rank; ``group.claim_key``); every member and distributor keeps the best ``Claim`` it has
  seen, so exactly one wins and the others step down when they hear it.
"""

from __future__ import annotations

from fedemu.fabric.log import emit

from ..common.events import FAILOVER
from .failover import PING, TAKE_OVER, SecondWatch
from .group import NO_KEY, GroupConfig, claim_key
from .messages import Claim, Hello, MasterPing, MasterTick, RecoverTimer, Suspect, SuspectTimer, Sync, SyncReset, \
    Watchdog
from .role import MasterCore


class GroupMember:
    """One member of a group: what it believes of the group's master, and the role while it holds it."""

    def _member_init(self, cfg: GroupConfig, rank: int) -> None:
        self.cfg = cfg
        self.rank = rank
        self.role: MasterCore | None = None
        self.claim: Claim | None = None
        self.key = NO_KEY
        self.member_ids: tuple = ()
        self.dist_ids: tuple = ()
        self.watch = SecondWatch()  # the second master's synced state and watch
        self.heard_master_us = -1
        self.suspecting = None  # (stage, since) while checking a suspected master
        self.suspecters: list[int] = []

    def _member_start(self) -> None:
        cfg = self.cfg
        self.member_ids, self.dist_ids = cfg.addresses(self.fabric)
        if self.incarnation == 0:
            second = self.member_ids[1] if len(self.member_ids) > 1 else -1
            self._adopt(Claim(cfg.group, 0, 0, 0, self.member_ids[0], second))
            if self.rank == 0:
                self.role = MasterCore(self, 0)
        else:  # back with nothing: whoever is master requeues what this member ran
            hello = Hello(cfg.group, self.told_now())
            for dst in self.member_ids:
                if dst != self.id:
                    self.send(dst, hello)

    def told_now(self) -> int:
        return 0

    def on_master_changed(self) -> None:
        """A better claim was adopted (workers answer it with their status)."""

    def status_message(self):
        return None

    # ---- claims --------------------------------------------------------------------------
    def _adopt(self, claim: Claim) -> None:
        self.claim = claim
        self.key = claim_key(claim)
        if self.role is not None and claim.master != self.id:
            self.role = None  # a better master exists: step down, and tell the distributors who it is (its
            for dst in self.dist_ids:  # own claims to one may all have been lost, and that distributor,
                self.send(dst, claim)  # hearing this master answer, would wait for it for good)
        if claim.second != self.id:
            self.watch.synced = None
        self.heard_master_us = self.now

    def _broadcast(self, claim: Claim) -> None:
        for dst in self.member_ids:
            if dst != self.id:
                self.send(dst, claim)
        for dst in self.dist_ids:
            self.send(dst, claim)

    def on_Claim(self, msg: Claim, src: int) -> None:
        key = claim_key(msg)
        if key > self.key:
            self._adopt(msg)
            self._suspicion_over()
            if msg.master == self.id and (self.role is None or self.role.declared_us != msg.declared_us):
                # a claim from before this member restarted names it master: it holds nothing of that
                # claim (and others hold it better than the one it has since declared), so it takes the
                # role again in a new epoch and rebuilds from the members and distributors
                self._take_over(self.now, "election")
                return
            self.on_master_changed()
        elif key == self.key:
            if src == msg.master:
                self.heard_master_us = self.now
                if msg.second != self.claim.second:
                    self._adopt(msg)
                self.on_master_changed()  # a new master asking again
        elif self.claim is not None:
            self.send(src, self.claim)  # a stale claim: tell it who is master now

    def on_MasterPing(self, msg: MasterPing, src: int) -> None:
        if self.claim is not None:
            self.send(src, self.claim)
        elif src in self.dist_ids:  # back from a restart knowing nothing: ask the distributor who is master
            self.send(src, MasterPing(self.cfg.group))

    def new_second(self, exclude: int = -1, announce: bool = True) -> None:
        """The master picks the next live worker after itself, in rank order, as its second master."""
        role = self.role
        n = len(self.member_ids)
        second = -1
        for step in range(1, n):
            rank = (self.rank + step - 1) % (n - 1) + 1
            if self.member_ids[rank] not in (self.id, exclude) and (rank - 1) not in role.down:
                second = self.member_ids[rank]
                break
        c = self.claim
        if second != c.second:
            self._adopt(Claim(c.group, c.epoch, c.declared_us, c.rank, c.master, second))
            if announce:
                self._broadcast(self.claim)

    # ---- the second master's watch (failover.SecondWatch) --------------------------------
    def on_Sync(self, msg: Sync, src: int) -> None:
        if self.claim is None or src != self.claim.master or msg.epoch != self.key[0]:
            if self.claim is not None and msg.epoch < self.key[0]:
                self.send(src, self.claim)
            return
        watch = self.watch
        self.heard_master_us = self.now
        watch.heard(self.now)
        if self.claim.second != self.id or self.role is not None:
            return
        if not watch.apply(msg):
            self.send(src, SyncReset(msg.epoch))
            self.cfg.recorder.count("syncs_reset")
        delay = watch.arm(msg, self.now, self.cfg.timeout_us)
        if delay is not None:
            self.set_timer(delay, Watchdog(msg.epoch))

    def on_Watchdog(self, msg: Watchdog, src: int) -> None:
        watch = self.watch
        watch.armed = False
        if self.role is not None or watch.synced is None or msg.epoch != self.key[0] or self.claim.second != self.id:
            return
        act, delay = watch.check(self.now, self.cfg.timeout_us, self.heard_master_us)
        if act == PING:
            self.send(self.claim.master, MasterPing(self.cfg.group))
        elif act == TAKE_OVER:
            self._take_over(watch.last_sync_us, "failover")
        if delay is not None:
            self.set_timer(delay, Watchdog(msg.epoch))

    # ---- suspicion and elections --------------------------------------------------------
    def on_Suspect(self, msg: Suspect, src: int) -> None:
        if self.role is not None:
            if src >= 0:
                self.send(src, self.claim)
            return
        if src >= 0 and src not in self.suspecters:
            self.suspecters.append(src)
        if self.suspecting is not None:
            return
        self.suspecting = (1, self.now)
        if self.claim is not None and self.claim.master != self.id:
            self.send(self.claim.master, MasterPing(self.cfg.group))
        self.set_timer(self.cfg.timeout_us, SuspectTimer(1, self.key))

    def on_SuspectTimer(self, msg: SuspectTimer, src: int) -> None:
        if self.suspecting is None:
            return
        since = self.suspecting[1]
        if self.role is not None or msg.key != self.key or self.heard_master_us >= since:
            self._suspicion_over()
            return
        claim = self.claim
        if msg.stage == 1 and claim is not None:
            if claim.second == self.id:
                self._take_over(since, "failover")
                return
            if claim.second >= 0:
                self.suspecting = (2, since)
                self.send(claim.second, Suspect(self.cfg.group))
                if claim.master != self.id:
                    self.send(claim.master, MasterPing(self.cfg.group))  # it may be back: its answer ends this
                self.set_timer(self.cfg.timeout_us, SuspectTimer(2, self.key))
                return
        self._take_over(since, "election")

    def _suspicion_over(self) -> None:
        """Tell whoever alerted this member who the master is now."""
        if self.suspecting is None:
            return
        self.suspecting = None
        if self.claim is not None:
            for dst in self.suspecters:
                self.send(dst, self.claim)
        self.suspecters = []

    def _take_over(self, since_us: int, kind: str) -> None:
        """Become master of the next epoch: claim it, rebuild from the members and distributors (a
        failover starts from the synced state)."""
        snapshot = self.watch.synced if kind == "failover" else None
        old = self.claim
        claim = Claim(self.cfg.group, self.key[0] + 1, self.now, self.rank, self.id, -1)
        self._adopt(claim)
        self.role = role = MasterCore(self, claim.epoch)
        self.cfg.recorder.count("failovers" if kind == "failover" else "master_elections")
        if self.fabric.event_log is not None:
            emit(self, FAILOVER, group=self.cfg.group, kind=kind, epoch=claim.epoch,
                 failed=self.fabric.name_of(old.master) if old is not None else "?")
        # the next second master: the next live worker after this one, never the failed master
        self.new_second(exclude=old.master if old is not None else -1, announce=False)
        self._broadcast(self.claim)
        self.watch.synced = None
        self._suspicion_over()
        role.recover(since_us, kind, snapshot)
        own = self.status_message()
        if own is not None:
            role.status(self.rank - 1, own)

    # ---- the master role's messages -----------------------------------------------------
    def _redirect(self, src: int) -> None:
        """A message for the master reached a member that is not: say who is, or, back from a restart
        knowing nothing, ask the sender (its answering ``Claim`` may name this member master again)."""
        if self.claim is None:
            self.send(src, MasterPing(self.cfg.group))
        elif self.claim.master != self.id:
            self.send(src, self.claim)

    def on_TaskBatch(self, msg, src: int) -> None:
        if self.role is None:
            self._redirect(src)
            return
        self.role.batch(msg, src)

    def _worker_local(self, src: int) -> int:
        """The sender's worker slot, while this member is master; else -1, and the sender is redirected."""
        local = -1 if self.role is None else self.role.local_of.get(src, -1)
        if local < 0:
            self._redirect(src)
        return local

    def on_Idle(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.idle(local, msg)

    def on_Status(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.status(local, msg)

    def on_Refused(self, msg, src: int) -> None:
        local = self._worker_local(src)
        if local >= 0:
            self.role.status(local, msg, refused=(msg.job_id, msg.index))

    def on_Hello(self, msg, src: int) -> None:
        if self.role is None:
            return
        local = self.role.local_of.get(src, -1)
        if local >= 0:
            self.role.hello(local, msg.told)
        self.send(src, self.claim)

    def on_Outstanding(self, msg, src: int) -> None:
        if self.role is None or msg.epoch != self.role.epoch:
            self._redirect(src)
            return
        self.role.outstanding(msg, src)

    def on_SyncReset(self, msg: SyncReset, src: int) -> None:
        """The second master missed a sync: the next one is the full state."""
        if self.role is not None and msg.epoch == self.role.epoch and src == self.claim.second:
            self.role.sync.reset = True

    def on_MasterTick(self, msg: MasterTick, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.tick()

    def on_RecoverTimer(self, msg: RecoverTimer, src: int) -> None:
        if self.role is not None and msg.epoch == self.role.epoch:
            self.role.recover_timer(msg.round)

    def on_BatchAck(self, msg, src: int) -> None:
        """The ack of tasks a stepping-down master handed on: nothing to do."""

    def on_ResultAck(self, msg, src: int) -> None:
        """A distributor got a result this master resent for a dead worker."""
        if self.role is not None:
            self.role.orphans.pop((msg.job_id, msg.index), None)
