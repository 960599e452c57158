"""The WFQ discipline of a Pigeon master (policies/fair_queue.py): hand-worked service orders."""

import math

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from fedemu.fabric.errors import ConfigError
from fedemu.policies.fair_queue import HIGH, LOW, FairQueue


def drain(fq, accept=None):
    out = []
    while True:
        got = fq.pop(accept)
        if got is None:
            return out
        out.append(got[1])


def loaded(weight, highs=5, lows=3):
    fq = FairQueue(weight)
    for i in range(1, highs + 1):
        fq.push(HIGH, f"H{i}")
    for i in range(1, lows + 1):
        fq.push(LOW, f"L{i}")
    return fq


@pytest.mark.parametrize("weight,expected", [
    # one LOW after every W HIGH while LOW waits; HIGH exhausted -> the rest of LOW
    (2, "H1 H2 L1 H3 H4 L2 H5 L3"),
    (1, "H1 L1 H2 L2 H3 L3 H4 H5"),
    (3, "H1 H2 H3 L1 H4 H5 L2 L3"),
    (20, "H1 H2 H3 H4 H5 L1 L2 L3"),
    (math.inf, "H1 H2 H3 H4 H5 L1 L2 L3"),  # strict priority
])
def test_service_order_hand_worked(weight, expected):
    assert " ".join(drain(loaded(weight))) == expected


def test_strict_priority_never_serves_low_while_high_waits():
    fq = loaded(math.inf, highs=50, lows=5)
    order = drain(fq)
    assert order[:50] == [f"H{i}" for i in range(1, 51)]
    assert fq.served == [50, 5]


def test_high_serves_while_low_is_empty_do_not_count():
    fq = FairQueue(2)
    for i in range(1, 6):
        fq.push(HIGH, f"H{i}")
    assert [fq.pop()[1] for _ in range(2)] == ["H1", "H2"]  # LOW empty: streak stays 0
    assert fq.streak == 0
    fq.push(LOW, "L1")
    assert drain(fq) == ["H3", "H4", "L1", "H5"]


def test_low_only_and_order_reports_the_due_class():
    fq = FairQueue(2)
    fq.push(LOW, "L1")
    assert fq.order() == (HIGH, LOW)  # nothing owed yet, but HIGH is empty: LOW is served anyway
    assert fq.pop() == (LOW, "L1", True)
    fq.push(HIGH, "H1")
    fq.push(HIGH, "H2")
    fq.push(LOW, "L2")
    fq.pop(), fq.pop()
    assert fq.low_due() and fq.order() == (LOW, HIGH)


def test_keys_oldest_accepted_first_and_parking_until_reopen():
    # PigeonC: a constrained head that fits no idle worker does not block later tasks of its class.
    fq = FairQueue(20)
    fq.push(HIGH, "a1", key="a")
    fq.push(HIGH, "b1", key="b")
    fq.push(HIGH, "a2", key="a")
    fq.push(HIGH, "c1", key="c")
    calls = []

    def only_b_and_c(key):
        calls.append(key)
        return None if key == "a" else f"worker-for-{key}"

    assert fq.take(HIGH, only_b_and_c) == ("b1", "worker-for-b")
    assert fq.take(HIGH, only_b_and_c) == ("c1", "worker-for-c")
    assert fq.take(HIGH, only_b_and_c) is None
    assert calls == ["a", "b", "c"]  # 'a' was asked once in the pass, then parked
    assert fq.take(HIGH) is None  # still parked until the pass ends
    fq.reopen()
    assert [fq.take(HIGH)[0] for _ in range(2)] == ["a1", "a2"]
    assert len(fq) == 0


def test_accept_may_return_zero_as_a_placement():
    fq = FairQueue(1)
    fq.push(HIGH, "t", key="k")
    assert fq.take(HIGH, lambda key: 0) == ("t", 0)


def test_fifo_within_a_key_and_sizes():
    fq = FairQueue(5)
    for i in range(4):
        fq.push(LOW, i, key=("x",))
    assert fq.size(LOW) == 4 and fq.size(HIGH) == 0 and len(fq) == 4
    assert drain(fq) == [0, 1, 2, 3]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "20", True, None, float("nan"), -math.inf])
def test_bad_weight_is_a_config_error(bad):
    with pytest.raises(ConfigError) as err:
        FairQueue(bad)
    assert "expected an integer >= 1 or inf" in str(err.value)


def test_integral_float_weight_is_accepted():
    assert FairQueue(4.0).weight == 4


class KeyedQueueMachine(RuleBasedStateMachine):
    """One class of keyed items (a Megha GM's signature queue) against a plain list: each take serves
    the oldest item whose key the caller accepts; a rejected key waits for ``reopen``."""

    def __init__(self):
        super().__init__()
        self.fq = FairQueue(math.inf)
        self.items: list[tuple[int, str]] = []  # (key, item) in push order
        self.parked: set[int] = set()
        self.pushed = self.rejections = 0

    @rule(key=st.integers(0, 4))
    def push(self, key):
        self.pushed += 1
        item = f"t{self.pushed}"
        self.fq.push(HIGH, item, key)
        self.items.append((key, item))

    @rule(accepted=st.sets(st.integers(0, 4)))
    def take(self, accepted):
        asked = []

        def accept(key):
            asked.append(key)
            return f"placed-{key}" if key in accepted else None

        open_keys = dict.fromkeys(k for k, _ in self.items if k not in self.parked)  # oldest head first
        expected = []  # keys asked: each open key once, oldest head first, up to the first accepted
        for key in open_keys:
            expected.append(key)
            if key in accepted:
                break
        got = self.fq.take(HIGH, accept)
        assert asked == expected
        rejected = [k for k in asked if k not in accepted]
        self.parked.update(rejected)
        self.rejections += len(rejected)
        if not asked or asked[-1] not in accepted:
            assert got is None
        else:
            i = next(i for i, (k, _) in enumerate(self.items) if k == asked[-1])
            key, item = self.items.pop(i)
            assert got == (item, f"placed-{key}")

    @rule()
    def reopen(self):
        self.fq.reopen()
        self.parked.clear()

    @rule(still=st.sets(st.integers(0, 4)))
    def reopen_some(self, still):
        """The caller knows it would refuse the keys in ``still`` again: they stay parked."""
        self.fq.reopen(lambda key: key in still)
        self.parked &= still

    @invariant()
    def sizes(self):
        assert len(self.fq) == self.fq.size(HIGH) == len(self.items)
        assert self.fq.keys(HIGH) == len({k for k, _ in self.items})
        assert self.fq.rejected == self.rejections
        assert self.fq.served == [self.pushed - len(self.items), 0]


KeyedQueueMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
test_keyed_queue_against_a_list = KeyedQueueMachine.TestCase
