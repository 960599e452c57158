"""The shared recovery parts (``actors.common.recovery``): the backoff, the hook that hands connection notices
to an actor's recovery components, asks sent again only when a connection breaks and never given up while
the peer may come back, and suspects that back off."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors.common.recovery import RETRY_CAP_US, Break, Recovering, Retries, Suspects, backoff
from fedemu.fabric.actor import Actor
from fedemu.fabric.faults import plan as make_plan
from fedemu.fabric.messages import message
from fabric_helpers import run_fabric

S = 1_000_000


@message("rectest.ask")
class Ask:
    key: int


@message("rectest.answer")
class Answer:
    key: int


@message("rectest.go")
class Go:
    pass


class Asker(Recovering, Actor):
    """Asks ``peer`` the questions 0..n-1 at 1 ms (a timer), through a Retries; stops the run once every one
    is answered."""

    def __init__(self, n: int, log: list) -> None:
        super().__init__()
        self.n = n
        self.notes = log
        self.asks = self.recover(Retries(self, "asks", 100_000, self.resend))
        self.peer = -1
        self.sends = 0

    def on_start(self) -> None:
        self.peer = self.fabric.addr("answerer")
        self.set_timer(1000, Go())

    def on_Go(self, msg, src) -> None:
        for k in range(self.n):
            self.asks.asked(self.peer, k)
            self.send(self.peer, Ask(k))
            self.sends += 1

    def resend(self, peer: int, key) -> None:
        self.notes.append(("resend", self.now, key))
        self.sends += 1
        self.send(peer, Ask(key))

    def connection_broke(self, brk: Break) -> None:
        self.notes.append(("break", self.now, brk.cause, brk.sent))

    def on_Answer(self, msg, src) -> None:
        self.asks.heard(src)
        self.asks.answered(src, msg.key)
        self.notes.append(("answer", self.now, msg.key))
        if not self.asks.waiting:
            self.stop_run()


class Answerer(Actor):
    def on_Ask(self, msg, src) -> None:
        self.send(src, Answer(msg.key))


def run(faults=(), n=3, timeout_us=None, until_us=None):
    log = []

    def build(fabric):
        fabric.add("asker", lambda: Asker(n, log))
        fabric.add("answerer", Answerer)
        if timeout_us is not None:
            fabric.network.timeout_us = timeout_us
        if faults:
            fabric.add_faults(make_plan(faults))

    fabric, _ = run_fabric(5, build, until_us=until_us)
    return fabric, log


def answered(log):
    return sorted(e[2] for e in log if e[0] == "answer")


def test_backoff_doubles_up_to_the_cap():
    assert [backoff(1000, k) for k in (1, 2, 3)] == [1000, 2000, 4000]
    assert backoff(S, 60) == RETRY_CAP_US and backoff(2 * RETRY_CAP_US, 5) == 2 * RETRY_CAP_US
    assert backoff(1000, 3, cap_us=2500) == 2500


def test_fault_free_every_ask_is_sent_once_and_nothing_is_timed():
    fabric, log = run()
    assert answered(log) == [0, 1, 2]
    asker = fabric.actor(fabric.addr("asker"))
    assert asker.sends == 3 and not any(e[0] in ("resend", "break") for e in log)
    assert asker._timers == 1  # its own Go: no recovery timer


def test_a_peer_down_for_half_an_hour_is_asked_until_it_is_back():
    """Refused while down, each resend backs off (to a minute); nothing is given up: the restarted peer
    answers every ask once it is back."""
    down_for = 30 * 60 * S
    fabric, log = run([(500, "crash", "answerer"), (500 + down_for, "restart", "answerer")])
    assert answered(log) == [0, 1, 2]
    resends = [e for e in log if e[0] == "resend"]
    assert resends and all(e[1] < 500 + down_for + RETRY_CAP_US + S for e in resends)
    gaps = sorted({b[1] - a[1] for a, b in zip(resends[::3], resends[3::3])})
    assert gaps[-1] <= RETRY_CAP_US + S  # backed off to the cap, never more
    assert min(e[1] for e in log if e[0] == "answer") >= 500 + down_for


def test_a_cut_longer_than_the_connection_timeout_loses_the_asks_and_they_are_sent_again():
    fabric, log = run([(0, "partition", (["asker"], ["answerer"])), (25 * S, "heal", ())], timeout_us=10 * S)
    assert answered(log) == [0, 1, 2]
    causes = {e[2] for e in log if e[0] == "break"}
    assert causes == {"timeout"}
    assert any(e[0] == "resend" for e in log)


def test_a_short_cut_loses_nothing_and_resends_nothing():
    fabric, log = run([(0, "partition", (["asker"], ["answerer"])), (5 * S, "heal", ())], timeout_us=10 * S)
    assert answered(log) == [0, 1, 2] and not any(e[0] in ("resend", "break") for e in log)


def test_a_crash_is_one_break_though_both_directions_break():
    """The answerer answers ask 0 and crashes while the asker's connection to it is open both ways."""

    class Slow(Answerer):
        def on_Ask(self, msg, src) -> None:
            if msg.key == 0:
                self.send(src, Answer(0))

    log = []

    def build(fabric):
        fabric.add("asker", lambda: Asker(2, log))
        fabric.add("answerer", Slow)
        fabric.add_faults(make_plan([(10_000, "crash", "answerer"), (20_000, "restart", "answerer")]))

    run_fabric(5, build)
    breaks = [e for e in log if e[0] == "break"]
    assert breaks[0][2] == "crash" and sum(1 for e in breaks if e[2] == "crash") == 1, breaks


def test_a_forgotten_peer_is_not_asked_again():
    fabric, log = run([(500, "crash", "answerer")], until_us=10 * 60 * S)  # down for good
    asker = fabric.actor(fabric.addr("asker"))
    assert asker.asks.waits_on(asker.peer)  # still waiting: it never gives up on its own
    assert asker.asks.forget(asker.peer) == [0, 1, 2] and not asker.asks.waiting


@settings(max_examples=40, deadline=None, database=None)
@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=20))
def test_suspects_back_off_and_clear_when_heard(times):
    s = Suspects(S)
    now = 0
    for k, step in enumerate(sorted(times), start=1):
        now = max(now, step)
        until = s.down(7, now)
        assert until == now + backoff(S, k) and not s.usable(7, now) and s.usable(7, until)
    assert s.usable(8, now) and bool(s)
    s.heard(7)
    assert s.usable(7, now) and not s and s.down(7, now) == now + S


def test_a_component_name_is_registered_once():
    asker = Asker(1, [])
    with pytest.raises(ValueError, match="registered already"):
        asker.recover(Retries(asker, "asks", 1, lambda p, k: None))


class PendingAsker(Asker):
    """The same asker, but its Retries reads what it waits on from its own record (``pending``)."""

    def __init__(self, n: int, log: list) -> None:
        Actor.__init__(self)
        self.n, self.notes, self.peer, self.sends = n, log, -1, 0
        self.open: dict[int, None] = {}
        self.asks = self.recover(Retries(self, "asks", 100_000, self.resend, lambda peer: list(self.open)))

    def on_Go(self, msg, src) -> None:
        for k in range(self.n):
            self.open[k] = None
            self.send(self.peer, Ask(k))
            self.sends += 1

    def on_Answer(self, msg, src) -> None:
        self.open.pop(msg.key, None)
        self.notes.append(("answer", self.now, msg.key))
        if not self.open:
            self.stop_run()


def test_retries_can_read_what_is_pending_from_the_owner():
    log = []

    def build(fabric):
        fabric.add("asker", lambda: PendingAsker(3, log))
        fabric.add("answerer", Answerer)
        fabric.network.timeout_us = 10 * S
        fabric.add_faults(make_plan([(0, "partition", (["asker"], ["answerer"])), (25 * S, "heal", ())]))

    fabric, _ = run_fabric(5, build)
    asker = fabric.actor(fabric.addr("asker"))
    assert answered(log) == [0, 1, 2] and any(e[0] == "resend" for e in log)
    assert not asker.asks.waiting  # nothing recorded in the component itself
