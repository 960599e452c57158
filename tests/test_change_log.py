"""ChangeLog (an LM's delta updates) against brute force, and GMs fed by it against the LM's truth.

Cursors move only on a GM's acknowledgement, so a lost heartbeat is repeated by the next one."""

from collections import deque

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fedemu.policies.change_log import BEACON_AFTER, ChangeLog

SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None)


class LogMachine(RuleBasedStateMachine):
    """The log against the whole history, never trimmed, with each GM's three positions in it."""

    @initialize(workers=st.integers(1, 6), gms=st.integers(1, 3))
    def build(self, workers, gms):
        self.n, self.gms = workers, gms
        self.free = [[0] for _ in range(workers)]
        self.log = ChangeLog(self.free, gms)
        self.history: list[tuple[int, int]] = []  # (worker, cause) of every change
        self.sent = [0] * gms  # how much of the history each GM's deltas were cut from
        self.told = [0] * gms  # the position of the last delta each GM was sent
        self.confirmed = [0] * gms  # what each GM confirmed (its cursor)
        self.idle = [0] * gms
        self.replied = [0] * gms  # how much of the history each GM's last launch reply was cut from

    def expected(self, gm):
        """Workers changed since ``gm``'s last delta, once each in order of first change, minus those
        whose latest change (in the whole history) ``gm`` caused."""
        latest = {w: cause for w, cause in self.history}
        since = dict.fromkeys(w for w, _ in self.history[self.sent[gm]:])
        return [w for w in since if latest[w] != gm], since, latest

    @rule(worker=st.integers(0, 5), cause=st.integers(0, 2), value=st.integers(0, 9))
    def record(self, worker, cause, value):
        worker %= self.n
        cause %= self.gms
        self.free[worker][0] = value
        self.log.record(worker, cause)
        self.history.append((worker, cause))

    @rule(gm=st.integers(0, 2), always=st.integers(-1, 5))
    def since(self, gm, always):
        """A failed launch's reply: the GM's delta, plus the launch's worker in any case; moves nothing."""
        gm %= self.gms
        always = -1 if always < 0 else always % self.n
        workers, since, latest = self.expected(gm)
        if always >= 0 and (always not in since or latest[always] == gm):
            workers.append(always)
        got = self.log.since(gm, always)
        assert got == (tuple(workers), tuple((self.free[w][0],) for w in workers))

    @rule(gm=st.integers(0, 2))
    def fresh(self, gm):
        """A valid launch's reply: what changed since the GM's last delta or reply, whichever is later,
        minus what it caused; only the reply position moves."""
        gm %= self.gms
        latest = {w: cause for w, cause in self.history}
        since = dict.fromkeys(w for w, _ in self.history[max(self.sent[gm], self.replied[gm]):])
        workers = [w for w in since if latest[w] != gm]
        self.replied[gm] = len(self.history)
        assert self.log.fresh(gm) == (tuple(workers), tuple((self.free[w][0],) for w in workers))

    @rule()
    def heartbeat(self):
        """A delta to each GM with something new it did not cause; a beacon to each GM whose last delta
        is unconfirmed and BEACON_AFTER ticks old; a GM with only its own changes is confirmed at once."""
        expected = []
        end = len(self.history)
        for gm in range(self.gms):
            if self.sent[gm] < end:
                workers = self.expected(gm)[0]
                self.sent[gm] = end
                if workers:
                    expected.append((gm, tuple(workers), tuple((self.free[w][0],) for w in workers),
                                     self.told[gm], end))
                    self.told[gm], self.idle[gm] = end, 0
                    continue
            if self.confirmed[gm] >= self.told[gm]:
                self.confirmed[gm] = self.sent[gm]
            else:
                self.idle[gm] += 1
                if self.idle[gm] >= BEACON_AFTER:
                    expected.append((gm, (), (), self.told[gm], self.told[gm]))
        assert self.log.deltas() == expected

    @rule(gm=st.integers(0, 2), stale=st.booleans())
    def ack(self, gm, stale):
        """A GM acknowledges the last delta it was told (or an older one: that confirms nothing)."""
        gm %= self.gms
        upto = self.told[gm] - 1 if stale else self.told[gm]
        self.log.ack(gm, upto)
        if upto == self.told[gm] and self.confirmed[gm] < upto:
            self.confirmed[gm] = self.sent[gm]

    @rule(gm=st.integers(0, 2))
    def snapshot(self, gm):
        gm %= self.gms
        self.log.reset(gm)
        self.sent[gm] = self.told[gm] = self.confirmed[gm] = len(self.history)

    @precondition(lambda self: hasattr(self, "log"))
    @invariant()
    def positions_agree(self):
        assert self.log.base + len(self.log) == len(self.history)
        assert (self.log.cursor, self.log.sent, self.log.told) == (self.confirmed, self.sent, self.told)
        assert self.log.base == min(self.confirmed)  # trimmed to the lowest confirmed position
        assert self.log.pending() == (min(self.confirmed) < len(self.history))
        for gm in range(self.gms):
            assert self.log.unsent(gm) == {w for w, _ in self.history[self.confirmed[gm]:]}


LogMachine.TestCase.settings = SETTINGS
test_log_against_history = LogMachine.TestCase


class ProtocolMachine(RuleBasedStateMachine):
    """One LM and its GMs with messages in flight (FIFO each way), single-resource workers.

    A GM decrements its view when it sends a launch; the LM validates launches, logs changes and
    answers a failed launch with a delta; a finished task's GM gets the worker's value; heartbeats
    carry deltas with their positions, and may be lost. A GM that sees a gap in the positions (or a
    beacon past what it heard) takes a snapshot; it acknowledges a beacon that matches. Once everything
    in flight is delivered and BEACON_AFTER + 1 ticks have passed, every GM's view equals the LM's
    truth, except for workers whose latest change was that GM's own launch: the GM is never told of
    those (a stale message may have undone its optimistic decrement meanwhile).
    """

    @initialize(capacity=st.lists(st.integers(1, 3), min_size=1, max_size=5), gms=st.integers(1, 3))
    def build(self, capacity, gms):
        self.n, self.gms = len(capacity), gms
        self.free = [[c] for c in capacity]  # the LM's truth
        self.log = ChangeLog(self.free, gms)
        self.views = [list(capacity) for _ in range(gms)]
        self.heard = [0] * gms  # the position of the last delta each GM took
        self.to_lm = [deque() for _ in range(gms)]  # (worker, demand) launches in flight
        self.inbox = [deque() for _ in range(gms)]  # (workers, free tuples, prev, upto; None: not a delta)
        self.running: list[tuple[int, int, int]] = []  # (owner gm, worker, demand)
        self.last: list = [None] * self.n  # ("launch" | "finish", gm) of each worker's latest change

    @rule(gm=st.integers(0, 2), worker=st.integers(0, 4), demand=st.integers(1, 3))
    def gm_launches(self, gm, worker, demand):
        gm %= self.gms
        worker %= self.n
        if self.views[gm][worker] >= demand:  # the GM only sends what its view says fits
            self.views[gm][worker] -= demand
            self.to_lm[gm].append((worker, demand))

    @rule(gm=st.integers(0, 2), reply=st.booleans())
    def lm_validates(self, gm, reply=False):
        """``reply``: a valid launch is answered with the GM's fresh changes too (launch_replies=delta)."""
        gm %= self.gms
        if not self.to_lm[gm]:
            return
        worker, demand = self.to_lm[gm].popleft()
        if self.free[worker][0] >= demand:
            self.free[worker][0] -= demand
            self.log.record(worker, gm)
            self.running.append((gm, worker, demand))
            self.last[worker] = ("launch", gm)
            if reply:
                workers, frees = self.log.fresh(gm)
                assert all(self.last[w][1] != gm for w in workers)
                self.inbox[gm].append((workers, frees, None, None))
        else:
            workers, frees = self.log.since(gm, always=worker)
            assert worker in workers
            self.inbox[gm].append((workers, frees, None, None))

    @rule(which=st.integers(0, 20))
    def task_finishes(self, which):
        if not self.running:
            return
        gm, worker, demand = self.running.pop(which % len(self.running))
        self.free[worker][0] += demand
        self.log.record(worker, gm)
        self.last[worker] = ("finish", gm)
        self.inbox[gm].append(((worker,), (tuple(self.free[worker]),), None, None))

    @rule()
    def heartbeat(self):
        for gm, workers, frees, prev, upto in self.log.deltas():
            assert all(self.last[w] is not None and self.last[w][1] != gm for w in workers)
            self.inbox[gm].append((workers, frees, prev, upto))

    @rule(gm=st.integers(0, 2))
    def heartbeat_lost(self, gm):
        """The latest heartbeat or beacon to ``gm`` is lost."""
        gm %= self.gms
        if self.inbox[gm] and self.inbox[gm][-1][2] is not None:
            self.inbox[gm].pop()

    @rule(gm=st.integers(0, 2))
    def gm_receives(self, gm):
        gm %= self.gms
        if not self.inbox[gm]:
            return
        workers, frees, prev, upto = self.inbox[gm].popleft()
        for w, f in zip(workers, frees):
            self.views[gm][w] = f[0]
        if prev is None:
            return
        if prev == upto:  # a beacon
            if upto == self.heard[gm]:
                self.log.ack(gm, upto)
            elif upto > self.heard[gm]:
                self.snapshot(gm)
            return
        if upto <= self.heard[gm]:
            return
        gap = prev != self.heard[gm]
        self.heard[gm] = upto
        if gap:
            self.snapshot(gm)

    def snapshot(self, gm):
        """The GM asks for the whole state (delivered at once here): it hears every worker."""
        self.log.reset(gm)
        self.heard[gm] = self.log.end
        self.views[gm] = [f[0] for f in self.free]

    @rule()
    def settle(self):
        """Deliver every launch, then tick and deliver until beacons have had their turn; then compare."""
        while any(self.to_lm):
            for gm in range(self.gms):
                self.lm_validates(gm)
        for _ in range(BEACON_AFTER + 2):
            self.heartbeat()
            for gm in range(self.gms):
                while self.inbox[gm]:
                    self.gm_receives(gm)
        truth = [f[0] for f in self.free]
        for gm, view in enumerate(self.views):
            for w in range(self.n):
                if self.last[w] != ("launch", gm):
                    assert view[w] == truth[w], (gm, w, view, truth, self.last)
        assert not self.log.pending() or all(self.last[w] and self.last[w][0] == "launch"
                                             for w in self.log.changes)

    def teardown(self):
        if hasattr(self, "log"):
            self.settle()


ProtocolMachine.TestCase.settings = SETTINGS
test_gms_fed_by_the_log_agree_with_the_lm = ProtocolMachine.TestCase


def test_own_changes_left_out_and_failure_reply_names_the_worker():
    free = [[1], [1], [1]]
    log = ChangeLog(free, 2)
    free[0][0] = 0
    log.record(0, 0)  # GM 0's launch on worker 0
    free[1][0] = 0
    log.record(1, 1)  # GM 1's launch on worker 1
    assert log.since(0, always=0) == ((1, 0), ((0,), (0,)))  # worker 0 only because it is named
    # GM 0 is sent worker 1 (the failure reply moved nothing); GM 1 worker 0, not its own change
    assert log.deltas() == [(0, (1,), ((0,),), 0, 2), (1, (0,), ((0,),), 0, 2)]
    assert len(log) == 2 and log.pending()
    for _ in range(BEACON_AFTER - 1):
        assert log.deltas() == []  # a pause: no beacon yet
    assert log.deltas() == [(0, (), (), 2, 2), (1, (), (), 2, 2)]  # the burst's end: beacons
    log.ack(0, 2)
    assert log.deltas() == [(1, (), (), 2, 2)]  # GM 1's ack was lost: beaconed again
    log.ack(1, 1)  # an older position confirms nothing
    assert log.pending()
    log.ack(1, 2)
    assert len(log) == 0 and log.base == 2 and not log.pending() and log.deltas() == []


def test_a_gm_with_only_its_own_changes_needs_no_beacon_and_a_snapshot_resets_it():
    free = [[1], [1]]
    log = ChangeLog(free, 2)
    free[0][0] = 0
    log.record(0, 0)
    assert log.deltas() == [(1, (0,), ((0,),), 0, 1)]  # GM 0 has nothing to hear: confirmed at once
    assert log.cursor == [1, 0] and log.unsent(1) == {0} and log.unsent(0) == set()
    free[1][0] = 0
    log.record(1, 0)
    log.reset(1)  # GM 1 was sent the whole state
    assert (log.cursor, log.told) == ([1, 2], [0, 2])
    assert log.deltas() == [] and log.cursor == [2, 2] and len(log) == 0
