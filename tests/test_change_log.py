"""ChangeLog (an LM's delta updates) against brute force, and GMs fed by it against the LM's truth.

Updates travel on connections: none is lost unless its connection breaks, and then the GM takes a snapshot."""

from collections import deque

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fedemu.actors.megha.change_log import ChangeLog

SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None)


class LogMachine(RuleBasedStateMachine):
    """The log against the whole history, never trimmed, with each GM's position in it."""

    @initialize(workers=st.integers(1, 6), gms=st.integers(1, 3))
    def build(self, workers, gms):
        self.n, self.gms = workers, gms
        self.free = [[0] for _ in range(workers)]
        self.log = ChangeLog(self.free, gms)
        self.history: list[tuple[int, int]] = []  # (worker, cause) of every change
        self.sent = [0] * gms  # how much of the history each GM's last update was cut from

    def expected(self, gm):
        """Workers changed since ``gm``'s last update, once each in order of first change, minus those
        whose latest change (in the whole history) ``gm`` caused."""
        latest = {w: cause for w, cause in self.history}
        since = dict.fromkeys(w for w, _ in self.history[self.sent[gm]:])
        return [w for w in since if latest[w] != gm], since, latest

    @rule(worker=st.integers(0, 5), cause=st.integers(-1, 2), value=st.integers(0, 9))
    def record(self, worker, cause, value):
        worker %= self.n
        cause = cause % self.gms if cause >= 0 else cause
        self.free[worker][0] = value
        self.log.record(worker, cause)
        self.history.append((worker, cause))

    @rule(gm=st.integers(0, 2), always=st.integers(-1, 5))
    def since(self, gm, always):
        """A launch's reply: the GM's delta, plus the launch's worker for a failure; moves its position."""
        gm %= self.gms
        always = -1 if always < 0 else always % self.n
        workers, since, latest = self.expected(gm)
        if always >= 0 and (always not in since or latest[always] == gm):
            workers.append(always)
        self.sent[gm] = len(self.history)
        got = self.log.since(gm, always)
        assert got == (tuple(workers), tuple((self.free[w][0],) for w in workers))

    @rule()
    def heartbeat(self):
        """A delta to each GM with something new it did not cause; nothing to the others."""
        expected = []
        end = len(self.history)
        for gm in range(self.gms):
            if self.sent[gm] < end:
                workers = self.expected(gm)[0]
                self.sent[gm] = end
                if workers:
                    expected.append((gm, tuple(workers), tuple((self.free[w][0],) for w in workers), end))
        assert self.log.deltas() == expected

    @rule(gm=st.integers(0, 2))
    def snapshot(self, gm):
        gm %= self.gms
        self.log.reset(gm)
        self.sent[gm] = len(self.history)

    @rule(gm=st.integers(0, 2), heard=st.integers(0, 40))
    def unheard(self, gm, heard):
        """What a GM that took an update cut at ``heard`` may not know: latest changes at or after it, not its own."""
        gm %= self.gms
        latest = {}
        for pos, (w, cause) in enumerate(self.history):
            latest[w] = (pos, cause)
        assert self.log.unheard(gm, heard) == {w for w, (pos, cause) in latest.items() if pos >= heard and cause != gm}

    @precondition(lambda self: hasattr(self, "log"))
    @invariant()
    def positions_agree(self):
        assert self.log.base + len(self.log) == len(self.history)
        assert self.log.sent == self.sent
        assert self.log.base <= min(self.sent)
        assert self.log.pending() == (min(self.sent) < len(self.history))


LogMachine.TestCase.settings = SETTINGS
test_log_against_history = LogMachine.TestCase


class ProtocolMachine(RuleBasedStateMachine):
    """One LM and its GMs with messages in flight (FIFO each way), single-resource workers.

    A GM decrements its view when it sends a launch; the LM validates launches, logs changes and
    answers a failed launch with a delta; a finished task's GM gets the worker's value; heartbeats
    carry deltas. Nothing is lost but with a broken connection: everything in flight to that GM, which
    is told and takes a snapshot. Once everything in flight is delivered, every GM's view equals the
    LM's truth but for the workers ``unheard`` names (changed after the last heartbeat it took), and
    after one more heartbeat it equals the truth, except for workers whose latest change was that GM's
    own launch: the GM is never told of those (a heartbeat cut before the LM saw the launch may have
    undone its optimistic decrement).
    """

    @initialize(capacity=st.lists(st.integers(1, 3), min_size=1, max_size=5), gms=st.integers(1, 3))
    def build(self, capacity, gms):
        self.n, self.gms = len(capacity), gms
        self.free = [[c] for c in capacity]  # the LM's truth
        self.log = ChangeLog(self.free, gms)
        self.views = [list(capacity) for _ in range(gms)]
        self.heard = [0] * gms  # the position the last heartbeat or snapshot each GM took was cut at
        self.to_lm = [deque() for _ in range(gms)]  # (worker, demand) launches in flight
        self.inbox = [deque() for _ in range(gms)]  # (workers, free tuples, upto; None: not a heartbeat)
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
        """``reply``: a valid launch is answered with the GM's changes too (launch_replies=delta)."""
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
                workers, frees = self.log.since(gm)
                assert all(self.last[w][1] != gm for w in workers)
                self.inbox[gm].append((workers, frees, None))
        else:
            workers, frees = self.log.since(gm, always=worker)
            assert worker in workers
            self.inbox[gm].append((workers, frees, None))

    @rule(which=st.integers(0, 20))
    def task_finishes(self, which):
        if not self.running:
            return
        gm, worker, demand = self.running.pop(which % len(self.running))
        self.free[worker][0] += demand
        self.log.record(worker, gm)
        self.last[worker] = ("finish", gm)
        self.inbox[gm].append(((worker,), (tuple(self.free[worker]),), None))

    @rule()
    def heartbeat(self):
        for gm, workers, frees, upto in self.log.deltas():
            assert all(self.last[w] is not None and self.last[w][1] != gm for w in workers)
            self.inbox[gm].append((workers, frees, upto))

    @rule(gm=st.integers(0, 2))
    def connection_breaks(self, gm):
        """The LM's connection to ``gm`` breaks: what it carried is lost; the GM is told and asks for a
        snapshot (answered at once here)."""
        gm %= self.gms
        self.inbox[gm].clear()
        self.log.reset(gm)
        self.heard[gm] = self.log.end
        self.views[gm] = [f[0] for f in self.free]

    @rule(gm=st.integers(0, 2))
    def gm_receives(self, gm):
        gm %= self.gms
        if not self.inbox[gm]:
            return
        workers, frees, upto = self.inbox[gm].popleft()
        for w, f in zip(workers, frees):
            self.views[gm][w] = f[0]
        if upto is not None:
            self.heard[gm] = upto

    def deliver(self):
        while any(self.to_lm):
            for gm in range(self.gms):
                self.lm_validates(gm)
        for gm in range(self.gms):
            while self.inbox[gm]:
                self.gm_receives(gm)

    def differ(self, gm):
        truth = [f[0] for f in self.free]
        return {w for w in range(self.n) if self.views[gm][w] != truth[w] and self.last[w] != ("launch", gm)}

    @rule()
    def settle(self):
        """Deliver everything: only what a GM has not heard differs; after a heartbeat, nothing."""
        self.deliver()
        for gm in range(self.gms):
            assert self.differ(gm) <= self.log.unheard(gm, self.heard[gm]), (gm, self.views, self.free, self.last)
        self.heartbeat()
        self.deliver()
        for gm in range(self.gms):
            assert not self.differ(gm), (gm, self.views, self.free, self.last)
        assert not self.log.pending() and len(self.log) == 0

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
    # the failure reply moved GM 0's position: its heartbeat has nothing new; GM 1 hears of worker 0
    assert log.deltas() == [(1, (0,), ((0,),), 2)]
    assert len(log) == 0 and not log.pending() and log.deltas() == []
    assert log.unheard(1, 0) == {0} and log.unheard(1, 2) == set() and log.unheard(0, 0) == {1}


def test_a_gm_with_only_its_own_changes_is_sent_nothing_and_a_snapshot_resets_it():
    free = [[1], [1]]
    log = ChangeLog(free, 2)
    free[0][0] = 0
    log.record(0, 0)
    assert log.deltas() == [(1, (0,), ((0,),), 1)]  # GM 0 has nothing to hear
    assert log.sent == [1, 1] and len(log) == 0
    free[1][0] = 0
    log.record(1, 0)
    log.reset(1)  # GM 1 was sent the whole state
    assert log.sent == [1, 2] and log.pending()
    assert log.deltas() == [] and log.sent == [2, 2] and len(log) == 0
