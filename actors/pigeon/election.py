"""Who is a Pigeon / PigeonC group's master: the election every member of the group runs (``Election``, the
base of ``master.GroupMember``): the claim it believes, the second master's synced state and its takeover,
suspicion and elections. The master role itself (``master.MasterCore``) is taken through ``_new_role``.

Pigeon (2019, "Master Failure Recovery"): the master updates a second master periodically; "whenever a
master failure is detected, the second master can immediately take the master responsibility" and
tells every worker and scheduler; when both are lost, a worker that detects it takes over, and
concurrent takeovers are ordered by a rule. Our protocol where the paper gives only the idea:
- The master role is an object any group member can hold: ``master-<g>`` holds it first; the second
  master is a WORKER of the group, as the paper suggests, so that any worker can also declare itself
  master when both are lost (one code path for both).
- Failures are detected from the fabric's notices. The second master takes over at once when its
  connection with the master breaks because the master crashed or refuses messages; when a cut broke
  it, it pings the master and takes over if no answer comes within ``master_timeout_s``.
- A distributor whose connection with the master broke alerts the second master and one worker
  (``Suspect``). A member pings the master, and if it does not answer within ``master_timeout_s`` the
  second master takes over, or else, after alerting the second master and waiting as long again, the
  member declares itself master (an election). Concurrent declarations are ordered by (epoch, earliest
  declaration time, lowest rank; ``group.claim_key``); every member and distributor keeps the best
  ``Claim`` it has seen, so exactly one wins and the others step down when they hear it.
"""

from __future__ import annotations

from fedemu.fabric.log import emit

from ..common.events import FAILOVER
from .group import NO_KEY, GroupConfig, claim_key
from .messages import Claim, Hello, MasterPing, Suspect, SuspectTimer, Sync
from .sync import SyncedState


class Election:
    """What one member of a group believes of the group's master, and how it takes the role over."""

    def _member_init(self, cfg: GroupConfig, rank: int) -> None:
        self.cfg = cfg
        self.rank = rank
        self.role = None  # the master role (``master.MasterCore``) while this member holds it
        self.claim: Claim | None = None
        self.key = NO_KEY
        self.member_ids: tuple = ()
        self.dist_ids: tuple = ()
        self.synced: SyncedState | None = None  # as second master: the group's state as the syncs told it
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
                self.role = self._new_role(0)
        else:  # back with nothing: whoever is master takes it up again
            hello = Hello(cfg.group)
            for dst in self.member_ids:
                if dst != self.id:
                    self.send(dst, hello)

    def _new_role(self, epoch: int):
        """The master role of ``epoch`` for this member to hold (``master.GroupMember``)."""
        raise NotImplementedError

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
            for dst in self.dist_ids:  # own claim to one may have been lost with a connection, and that
                self.send(dst, claim)  # distributor, having heard from this master, would wait for it)
        if claim.second != self.id:
            self.synced = None
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
                self.on_master_changed()  # the master asks again (a connection between them broke)
        elif self.claim is not None:
            self.send(src, self.claim)  # a stale claim: tell it who is master now

    def on_MasterPing(self, msg: MasterPing, src: int) -> None:
        if self.claim is not None:
            self.send(src, self.claim)
        elif src in self.dist_ids:  # back from a restart knowing nothing: ask the distributor who is master
            self.send(src, MasterPing(self.cfg.group))

    def new_second(self, down=(), exclude: int = -1, announce: bool = True) -> None:
        """The master picks the next live worker after itself, in rank order, as its second master (not one
        of the worker slots it takes for ``down``)."""
        n = len(self.member_ids)
        second = -1
        for step in range(1, n):
            rank = (self.rank + step - 1) % (n - 1) + 1
            if self.member_ids[rank] not in (self.id, exclude) and (rank - 1) not in down:
                second = self.member_ids[rank]
                break
        c = self.claim
        if second != c.second:
            self._adopt(Claim(c.group, c.epoch, c.declared_us, c.rank, c.master, second))
            if announce:
                self._broadcast(self.claim)

    # ---- the second master -------------------------------------------------------------------
    def on_Sync(self, msg: Sync, src: int) -> None:
        if self.claim is None or src != self.claim.master or msg.epoch != self.key[0]:
            if self.claim is not None and msg.epoch < self.key[0]:
                self.send(src, self.claim)
            return
        self.heard_master_us = self.now
        if self.claim.second != self.id or self.role is not None:
            return
        synced = self.synced
        if synced is None or synced.epoch != msg.epoch:
            synced = self.synced = SyncedState(msg.epoch)
        if not synced.apply(msg):
            self.cfg.recorder.count("syncs_skipped")

    def on_ConnectionBroken(self, msg, src: int) -> None:
        """The fabric's notice that a connection of this member broke."""
        peer = msg.dst if msg.src == self.id else msg.src
        if self.role is not None:
            self.role.recovery.broken(peer, msg.cause)
            return
        claim = self.claim
        if claim is None:  # back from a restart: a Hello lost with a cut is said again (a peer that crashed
            if msg.cause == "timeout" and peer in self.member_ids:  # is not: a new master tells its claim)
                self.send(peer, Hello(self.cfg.group))
            return
        if peer != claim.master or claim.second != self.id:
            return
        if msg.cause == "timeout":  # a cut: the master may be alive; take over if it does not answer
            self.on_Suspect(Suspect(self.cfg.group), -1)
        else:  # it crashed, or refuses messages: a failure detected, the second master takes over now
            self._take_over(self.now, "failover")

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
        failover starts from the waiting tasks synced to it)."""
        snapshot = self.synced if kind == "failover" else None
        old = self.claim
        claim = Claim(self.cfg.group, self.key[0] + 1, self.now, self.rank, self.id, -1)
        self._adopt(claim)
        self.role = role = self._new_role(claim.epoch)
        self.cfg.recorder.count("failovers" if kind == "failover" else "master_elections")
        if self.fabric.event_log is not None:
            emit(self, FAILOVER, group=self.cfg.group, kind=kind, epoch=claim.epoch,
                 failed=self.fabric.name_of(old.master) if old is not None else "?")
        # the next second master: the next live worker after this one, never the failed master (a new role
        # takes no worker for down yet)
        self.new_second(exclude=old.master if old is not None else -1, announce=False)
        self._broadcast(self.claim)
        self.synced = None
        self._suspicion_over()
        role.recovery.recover(since_us, kind, snapshot)
        own = self.status_message()
        if own is not None:
            role.recovery.status(self.rank - 1, own)
