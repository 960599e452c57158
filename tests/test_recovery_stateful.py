"""``Retries`` and ``Suspects`` (``actors.common.recovery``) against small models, step by step (issue 46).

Each model is written from the docstrings, plainly and another way: the Retries model keeps every arming it
expects as a numbered timer and says which one is live; the Suspects model keeps each peer's history of
notices and computes the backoff from it. Hypothesis drives both with any order of asks, answers, breaks,
hearings, forgets, timers (stale ones too) and clock steps, and compares after every step.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fedemu.actors.common.recovery import RETRY_CAP_US, Break, Retries, Suspects

PEERS = st.integers(0, 1)
KEYS = st.integers(0, 2)
CAUSES = st.sampled_from(["crash", "timeout", "refused"])
BASE_US = 250_000


def model_backoff(base_us: int, k: int) -> int:
    """The k-th wait (k >= 1), as the docs say it: ``base_us``, doubled each time, at most a minute (or
    ``base_us`` when that is longer)."""
    wait = base_us
    for _ in range(k - 1):
        wait *= 2
        if wait >= RETRY_CAP_US:
            break
    return min(wait, max(base_us, RETRY_CAP_US))


class FakeOwner:
    """The actor a Retries belongs to: records the timers it arms and the asks it sends again."""

    def __init__(self) -> None:
        self.now = 0
        self.timers: list[tuple[int, object, int]] = []  # (delay, key, nonce), in the order armed
        self.due: list[int] = []  # when each comes due
        self.resent: list[tuple[int, object]] = []

    def arm(self, component, delay_us: int, key, nonce: int) -> None:
        self.timers.append((delay_us, key, nonce))
        self.due.append(self.now + delay_us)


class RetriesMachine(RuleBasedStateMachine):
    """The owner calls ``asked``/``answered`` (or, with ``OWNER_KEEPS``, keeps its own asks and gives
    ``pending``); the model: per peer, its asks in order, its breaks since heard, and the one armed timer
    that will resend (a forget, or the timer's firing, disarms it)."""

    OWNER_KEEPS = False

    def __init__(self) -> None:
        super().__init__()
        self.owner = FakeOwner()
        self.own: dict[int, list] = {}  # OWNER_KEEPS: the owner's own asks
        pending = (lambda peer: list(self.own.get(peer, []))) if self.OWNER_KEEPS else None
        self.retries = Retries(self.owner, "asks", BASE_US, lambda p, k: self.owner.resent.append((p, k)), pending)
        # the model
        self.asks: dict[int, list] = {}  # peer -> keys asked and not answered, in the order first asked
        self.breaks: dict[int, int] = {}  # peer -> breaks counted since last heard
        self.live: dict[int, int] = {}  # peer -> index (into self.owner.timers) of the timer that will resend
        self.expected_timers: list[tuple[int, int]] = []  # (delay, peer)
        self.expected_resent: list[tuple[int, object]] = []
        self.fired: set[int] = set()

    @rule(peer=PEERS, key=KEYS)
    def ask(self, peer, key):
        if self.OWNER_KEEPS:
            own = self.own.setdefault(peer, [])
            if key not in own:
                own.append(key)
        else:
            self.retries.asked(peer, key)
        if key not in self.asks.setdefault(peer, []):
            self.asks[peer].append(key)

    @rule(peer=PEERS, key=KEYS)
    def answer(self, peer, key):
        """The answer to ``key`` came: the owner stops waiting on it, and has heard from ``peer``."""
        self.heard(peer)
        if self.OWNER_KEEPS:
            if key in self.own.get(peer, []):
                self.own[peer].remove(key)
        else:
            self.retries.answered(peer, key)
        if key in self.asks.get(peer, []):
            self.asks[peer].remove(key)

    def heard(self, peer):
        self.retries.heard(peer)
        self.breaks[peer] = 0

    @rule(peer=PEERS, again=st.lists(KEYS, max_size=2))
    def forget(self, peer, again):
        """The owner moves its work from ``peer`` elsewhere, and may ask ``peer`` something new at once (a
        timer armed before the forget is then stale, though the peer is waited on again)."""
        if self.OWNER_KEEPS:  # an owner that keeps its asks drops them itself when the work moves
            self.own.pop(peer, None)
        got = self.retries.forget(peer)
        if not self.OWNER_KEEPS:
            assert got == self.asks.get(peer, [])
        self.asks.pop(peer, None)
        self.live.pop(peer, None)
        for key in again:
            self.ask(peer, key)

    @rule(peer=PEERS, cause=CAUSES, sent=st.booleans(), at=st.integers(0, 10**9))
    def broken(self, peer, cause, sent, at):
        self.retries.broken(Break(peer, at, cause, sent))
        if peer in self.live or not self.asks.get(peer):
            return  # a resend is armed already, or nothing waits: the break changes nothing
        self.breaks[peer] = self.breaks.get(peer, 0) + 1
        self.live[peer] = len(self.expected_timers)
        self.expected_timers.append((model_backoff(BASE_US, self.breaks[peer]), peer))

    @rule(step=st.sampled_from([0, BASE_US, 3 * BASE_US, RETRY_CAP_US]))
    def tick(self, step):
        """Time passes: every armed timer due by then fires, in the order due (a superseded or forgotten
        one too)."""
        self.owner.now += step
        due = sorted((at, i) for i, at in enumerate(self.owner.due) if at <= self.owner.now and i not in self.fired)
        for _, index in due:
            self.fired.add(index)
            _, key, nonce = self.owner.timers[index]
            self.retries.due(key, nonce)
            peer = self.expected_timers[index][1]
            if self.live.get(peer) == index:
                del self.live[peer]
                self.expected_resent += [(peer, k) for k in self.asks.get(peer, [])]

    @invariant()
    def timers_and_resends_are_the_models(self):
        assert [(d, k) for d, k, _ in self.owner.timers] == self.expected_timers
        assert self.owner.resent == self.expected_resent
        for peer in range(2):
            assert self.retries.waits_on(peer) == bool(self.asks.get(peer))


class OwnerKeepsMachine(RetriesMachine):
    OWNER_KEEPS = True


class SuspectsMachine(RuleBasedStateMachine):
    """The model keeps every notice and hearing of each peer with its time, and reads the answers from that
    history: a peer is usable unless it has notices since it was last heard from and the last of them, the
    k-th, was less than ``backoff(k)`` ago."""

    def __init__(self) -> None:
        super().__init__()
        self.suspects = Suspects(BASE_US)
        self.now = 0
        self.history: dict[int, list[tuple[str, int]]] = {}

    def _since_heard(self, peer: int) -> list[int]:
        downs: list[int] = []
        for what, at in self.history.get(peer, []):
            downs = [] if what == "heard" else downs + [at]
        return downs

    def _until(self, peer: int) -> int | None:
        downs = self._since_heard(peer)
        return downs[-1] + model_backoff(BASE_US, len(downs)) if downs else None

    @rule(step=st.sampled_from([0, 1, BASE_US // 2, BASE_US, 3 * BASE_US, RETRY_CAP_US]))
    def tick(self, step):
        self.now += step

    @rule(peer=PEERS)
    def down(self, peer):
        until = self.suspects.down(peer, self.now)
        self.history.setdefault(peer, []).append(("down", self.now))
        assert until == self._until(peer)

    @rule(peer=PEERS)
    def heard(self, peer):
        self.suspects.heard(peer)
        self.history.setdefault(peer, []).append(("heard", self.now))

    @invariant()
    def usable_is_the_models(self):
        for peer in range(2):
            until = self._until(peer)
            assert self.suspects.usable(peer, self.now) == (until is None or until <= self.now), peer
        assert bool(self.suspects) == any(self._since_heard(p) for p in range(2))


STEPS = settings(max_examples=80, stateful_step_count=40, deadline=None, database=None)
TestRetries = RetriesMachine.TestCase
TestRetries.settings = STEPS
TestRetriesOwnerKeeps = OwnerKeepsMachine.TestCase
TestRetriesOwnerKeeps.settings = STEPS
TestSuspects = SuspectsMachine.TestCase
TestSuspects.settings = STEPS


def test_a_timer_armed_before_a_forget_resends_nothing_though_the_peer_is_asked_again():
    """The one path the machine reaches rarely (ask, break, forget, ask again, break, the first timer due):
    the first timer is stale, and only the second resends."""
    machine = RetriesMachine()
    machine.ask(0, 1)
    machine.broken(0, "crash", True, 0)
    machine.forget(0, [2])
    machine.broken(0, "crash", True, 0)
    machine.tick(BASE_US)  # the first timer (250 ms) is due; the second (500 ms) is not
    machine.timers_and_resends_are_the_models()
    assert machine.owner.resent == []
    machine.tick(BASE_US)
    machine.timers_and_resends_are_the_models()
    assert machine.owner.resent == [(0, 2)]
