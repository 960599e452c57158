"""ChangeLog (an LM's delta updates) against brute force, and GMs fed by it against the LM's truth."""

from collections import deque

import hypothesis.strategies as st
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fedemu.policies.change_log import ChangeLog

SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None)


class LogMachine(RuleBasedStateMachine):
    """The log against the whole history, never trimmed, with each GM's position in it."""

    @initialize(workers=st.integers(1, 6), gms=st.integers(1, 3))
    def build(self, workers, gms):
        self.n, self.gms = workers, gms
        self.free = [[0] for _ in range(workers)]
        self.log = ChangeLog(self.free, gms)
        self.history: list[tuple[int, int]] = []  # (worker, cause) of every change
        self.heard = [0] * gms  # how much of the history each GM has been sent

    def expected(self, gm):
        """Workers changed since ``gm`` last heard, once each in order of first change, minus those
        whose latest change (in the whole history) ``gm`` caused."""
        latest = {w: cause for w, cause in self.history}
        since = dict.fromkeys(w for w, _ in self.history[self.heard[gm]:])
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
        """A failed launch's reply: the GM's delta, plus the launch's worker in any case."""
        gm %= self.gms
        always = -1 if always < 0 else always % self.n
        workers, since, latest = self.expected(gm)
        if always >= 0 and (always not in since or latest[always] == gm):
            workers.append(always)
        got = self.log.since(gm, always)
        assert got == (tuple(workers), tuple((self.free[w][0],) for w in workers))
        if always >= 0:
            assert always in got[0]
        self.heard[gm] = len(self.history)

    @rule()
    def heartbeat(self):
        expected = []
        for gm in range(self.gms):
            workers = self.expected(gm)[0]
            if workers:
                expected.append((gm, tuple(workers), tuple((self.free[w][0],) for w in workers)))
        assert self.log.deltas() == expected
        self.heard = [len(self.history)] * self.gms
        assert len(self.log) == 0  # every GM has heard everything: all trimmed

    @precondition(lambda self: hasattr(self, "log"))
    @invariant()
    def positions_agree(self):
        assert self.log.base + len(self.log) == len(self.history)
        assert self.log.cursor == self.heard
        assert self.log.base <= min(self.heard)


LogMachine.TestCase.settings = SETTINGS
test_log_against_history = LogMachine.TestCase


class ProtocolMachine(RuleBasedStateMachine):
    """One LM and its GMs with messages in flight (FIFO each way), single-resource workers.

    A GM decrements its view when it sends a launch; the LM validates launches, logs changes and
    answers a failed launch with a delta; a finished task's GM gets the worker's value; heartbeats
    carry deltas. Once everything in flight is delivered and a heartbeat has gone out, every GM's view
    equals the LM's truth, except for workers whose latest change was that GM's own launch: the GM is
    never told of those (a stale message may have undone its optimistic decrement meanwhile).
    """

    @initialize(capacity=st.lists(st.integers(1, 3), min_size=1, max_size=5), gms=st.integers(1, 3))
    def build(self, capacity, gms):
        self.n, self.gms = len(capacity), gms
        self.free = [[c] for c in capacity]  # the LM's truth
        self.log = ChangeLog(self.free, gms)
        self.views = [list(capacity) for _ in range(gms)]
        self.to_lm = [deque() for _ in range(gms)]  # (worker, demand) launches in flight
        self.inbox = [deque() for _ in range(gms)]  # (workers, free tuples) updates in flight
        self.running: list[tuple[int, int, int]] = []  # (owner gm, worker, demand)
        self.last: list = [None] * self.n  # ("launch" | "finish", gm) of each worker's latest change

    @rule(gm=st.integers(0, 2), worker=st.integers(0, 4), demand=st.integers(1, 3))
    def gm_launches(self, gm, worker, demand):
        gm %= self.gms
        worker %= self.n
        if self.views[gm][worker] >= demand:  # the GM only sends what its view says fits
            self.views[gm][worker] -= demand
            self.to_lm[gm].append((worker, demand))

    @rule(gm=st.integers(0, 2))
    def lm_validates(self, gm):
        gm %= self.gms
        if not self.to_lm[gm]:
            return
        worker, demand = self.to_lm[gm].popleft()
        if self.free[worker][0] >= demand:
            self.free[worker][0] -= demand
            self.log.record(worker, gm)
            self.running.append((gm, worker, demand))
            self.last[worker] = ("launch", gm)
        else:
            workers, frees = self.log.since(gm, always=worker)
            assert worker in workers
            self.inbox[gm].append((workers, frees))

    @rule(which=st.integers(0, 20))
    def task_finishes(self, which):
        if not self.running:
            return
        gm, worker, demand = self.running.pop(which % len(self.running))
        self.free[worker][0] += demand
        self.log.record(worker, gm)
        self.last[worker] = ("finish", gm)
        self.inbox[gm].append(((worker,), (tuple(self.free[worker]),)))

    @rule()
    def heartbeat(self):
        for gm, workers, frees in self.log.deltas():
            assert all(self.last[w] is not None and self.last[w][1] != gm for w in workers)
            self.inbox[gm].append((workers, frees))

    @rule(gm=st.integers(0, 2))
    def gm_receives(self, gm):
        gm %= self.gms
        if self.inbox[gm]:
            workers, frees = self.inbox[gm].popleft()
            for w, f in zip(workers, frees):
                self.views[gm][w] = f[0]

    @rule()
    def settle(self):
        """Deliver every launch, send a heartbeat, deliver every update; then compare."""
        while any(self.to_lm):
            for gm in range(self.gms):
                self.lm_validates(gm)
        self.heartbeat()
        for gm in range(self.gms):
            while self.inbox[gm]:
                self.gm_receives(gm)
        truth = [f[0] for f in self.free]
        for gm, view in enumerate(self.views):
            for w in range(self.n):
                if self.last[w] != ("launch", gm):
                    assert view[w] == truth[w], (gm, w, view, truth, self.last)

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
    assert log.deltas() == [(1, (0,), ((0,),))]  # GM 0 has heard everything; GM 1 not its own change
    assert len(log) == 0 and log.base == 2
