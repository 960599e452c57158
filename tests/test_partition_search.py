"""PartitionSearch (a Megha GM's search over partitions, with its memo) against a brute-force model.

The model holds plain free lists and searches every partition in the same order with no memo, so
any match the memo hid, any wrong order and any drift of the free-worker total shows up. Beside it, a
plain memo (per signature, the partitions found empty since they last gained) says which partitions a
search must ask: the workers it examines are a cost model's units, so they must not drift either.
"""

import hypothesis.strategies as st
import pytest
from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from fedemu.fabric.rand import Stream
from fedemu.model import WorkerSpec
from fedemu.actors.megha.partition_search import ORDERS, PartitionSearch
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.worker_choice import MinConstraintsChoice, RandomChoice

CONSTRAINTS = 3


def padded(demand, r):
    return list(demand) + [0] * (r - len(demand))


class SearchMachine(RuleBasedStateMachine):
    """Random learnt updates, matches and optimistic allocations on a small grid of LMs x partitions."""

    @initialize(data=st.data(), lms=st.integers(1, 3), gms=st.integers(1, 3), per=st.integers(1, 4),
                resources=st.integers(1, 2), min_constraints=st.booleans(), order=st.sampled_from(ORDERS),
                sort_ratio=st.sampled_from([0, 8, 10**6]), log_limit=st.sampled_from([0, 3, None]),
                tail_limit=st.sampled_from([0, 2, None]))
    def build(self, data, lms, gms, per, resources, min_constraints, order, sort_ratio, log_limit, tail_limit):
        self.r = resources
        self.order = order
        cap = st.tuples(st.integers(1, 2), *[st.integers(0, 2)] * (resources - 1))
        cons = st.sets(st.integers(0, CONSTRAINTS - 1)).map(lambda s: tuple(sorted(s)))
        self.capacity, self.constraints, views = [], [], []
        for lm in range(lms):
            caps = data.draw(st.lists(cap, min_size=gms * per, max_size=gms * per))
            conss = data.draw(st.lists(cons, min_size=gms * per, max_size=gms * per))
            self.capacity.append(caps)
            self.constraints.append([set(c) for c in conss])
            workers = [WorkerSpec(lm * 1000 + w, lm, caps[w], conss[w]) for w in range(gms * per)]
            views.append([PartitionView(workers[p * per:(p + 1) * per], num_constraints=CONSTRAINTS,
                                        num_resources=resources) for p in range(gms)])
        self.home = data.draw(st.integers(0, gms - 1))
        self.lms, self.gms, self.per = lms, gms, per
        policy = MinConstraintsChoice() if min_constraints else RandomChoice()
        self.search = PartitionSearch(views, self.home, policy, order)
        self.search.sort_ratio = sort_ratio  # always (0), sometimes or never (10**6) sort the dirty ones
        if log_limit is not None:  # fold the gain log often (0: at every gain), or at its usual length
            self.search.log_limit = log_limit
        if tail_limit is not None:  # read a tail longer than this partition by partition (0: always)
            self.search.tail_limit = tail_limit
        self.search.rng = Stream(data.draw(st.integers(0, 99)), "test/search")
        self.free = [[list(c) for c in caps] for caps in self.capacity]  # the model: free[lm][worker]
        self.rr = [0, 0]  # the model's own round-robin pointers (internal, external); fixed: they stay at 0
        # A few signatures used over and over, so memo entries are reused (and could go stale). Demands
        # cover the unit demand (1,), as find requires.
        demand = st.tuples(st.integers(1, 2), *[st.integers(0, 2)] * (resources - 1))
        self.signatures = data.draw(st.lists(st.tuples(cons, demand), min_size=1, max_size=4, unique=True))
        self.clean = {}  # the plain memo: signature -> {(lm, p) found empty and not gained since}

    def suitable(self, lm, p, signature):
        constraints, demand = signature
        need = padded(demand, self.r)
        return [w - p * self.per for w in range(p * self.per, (p + 1) * self.per)
                if set(constraints) <= self.constraints[lm][w]
                and all(f >= d for f, d in zip(self.free[lm][w], need))]

    def brute_find(self, signature):
        """The first partition with a suitable worker, in the search order, and its suitable workers:
        rotate goes from GM home+1 round the others; fixed goes in GM order, skipping home."""
        others = [(self.home + j) % self.gms for j in range(1, self.gms)] if self.order == "rotate" else \
            [p for p in range(self.gms) if p != self.home]
        for k in range(self.lms):
            lm = (self.rr[0] + k) % self.lms
            found = self.suitable(lm, self.home, signature)
            if found:
                return 0, lm, self.home, found
        for k in range(self.lms):
            lm = (self.rr[1] + k) % self.lms
            for p in others:
                found = self.suitable(lm, p, signature)
                if found:
                    return 1, lm, p, found
        return None

    @rule(lm=st.integers(0, 2), workers=st.lists(st.integers(0, 11), unique=True, max_size=4),
          values=st.lists(st.integers(0, 2), min_size=8, max_size=8))
    def learn(self, lm, workers, values):
        """An update message: absolute free vectors of some of one LM's workers (unchanged ones too)."""
        lm %= self.lms
        workers = list(dict.fromkeys(w % (self.gms * self.per) for w in workers))
        frees = [tuple(v % (c + 1) for v, c in zip(values[2 * i:], self.capacity[lm][w])) for i, w in enumerate(workers)]
        self.told(lm, workers, frees)

    @rule(which=st.integers(0, 3), pick=st.integers(0, 1 << 16))
    def refused_then_one_fits(self, which, pick):
        """Every worker having a signature's constraints gets busy and the signature is searched (found
        nowhere); then one of them is freed whole and the signature searched again: only a look at the
        workers gained since (or a search) finds it. (A refusal settled without that look fails here.)"""
        constraints = set(self.signatures[which % len(self.signatures)][0])
        having = [(lm, w) for lm in range(self.lms) for w in range(self.gms * self.per)
                  if constraints <= self.constraints[lm][w]]
        if not having:
            return
        for lm in range(self.lms):
            busy = [w for m, w in having if m == lm]
            self.told(lm, busy, [tuple(0 for _ in self.capacity[lm][w]) for w in busy])
        self.find(which, False)
        lm, w = having[pick % len(having)]
        self.told(lm, [w], [tuple(self.capacity[lm][w])])
        self.find(which, False)

    def told(self, lm, workers, frees):
        """The model and the search learn ``frees`` of LM ``lm``'s ``workers``."""
        for w, free in zip(workers, frees):
            if any(f > h for f, h in zip(free, self.free[lm][w])):  # a gain: every signature looks again
                for clean in self.clean.values():
                    clean.discard((lm, w // self.per))
            self.free[lm][w] = list(free)
        self.search.learn(lm, tuple(workers), tuple(frees))

    def memo_scans(self, signature) -> int:
        """The workers a memoised search examines: the partitions not known empty, in the search order,
        up to the first with a suitable worker; one with no worker free for the unit demand is not
        asked. The empty ones asked become known empty."""
        if not any(row[0] >= 1 for rows in self.free for row in rows):
            return 0
        clean = self.clean.setdefault(signature, set())
        others = [(self.home + j) % self.gms for j in range(1, self.gms)] if self.order == "rotate" else \
            [p for p in range(self.gms) if p != self.home]
        order = [((self.rr[0] + k) % self.lms, self.home) for k in range(self.lms)]
        order += [((self.rr[1] + k) % self.lms, p) for k in range(self.lms) for p in others]
        scanned = 0
        for lm, p in order:
            if (lm, p) in clean:
                continue
            if any(row[0] >= 1 for row in self.free[lm][p * self.per:(p + 1) * self.per]):
                scanned += self.per
                if self.suitable(lm, p, signature):
                    return scanned
            clean.add((lm, p))
        return scanned

    @rule(which=st.integers(0, 3), allocate=st.booleans())
    def find(self, which, allocate):
        signature = self.signatures[which % len(self.signatures)]
        expected = self.brute_find(signature)
        scans = self.memo_scans(signature)
        self.search.take_scanned()
        got = self.search.find(signature)
        assert self.search.take_scanned() == scans, "the search examined other workers than the memo allows"
        if expected is None:
            assert got is None, f"search found {got} where brute force finds nothing"
            return
        assert got is not None, f"the memo hid a match brute force finds: {expected}"
        kind, lm, p, locals_ = expected
        assert got[:2] == (lm, p) and got[2] in locals_
        if self.order == "rotate":
            self.rr[kind] = (lm + 1) % self.lms
        if allocate:
            worker = self.search.allocate(lm, p, got[2], signature[1])
            assert worker == p * self.per + got[2]
            row = self.free[lm][worker]
            for i, d in enumerate(signature[1]):
                row[i] -= d

    @precondition(lambda self: hasattr(self, "search"))
    @invariant()
    def views_and_total_agree_with_the_model(self):
        total = 0
        for lm in range(self.lms):
            for p in range(self.gms):
                rows = self.free[lm][p * self.per:(p + 1) * self.per]
                assert self.search.views[lm][p].free.tolist() == rows
                total += sum(row[0] >= 1 for row in rows)
        assert self.search.total_free == total


SearchMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
test_search_against_brute_force = SearchMachine.TestCase


def counting_search(capacity: int):
    """A search over 2 LMs x 2 one-worker partitions (constraint 0, ``capacity`` slots) whose views
    record every ``suitable_bits`` call in the returned list (and each ``suitable_among``). A refusal settled
    from the workers gained since (the unit demand) asks no view: it reads their constraints."""
    asked = []

    class CountingView(PartitionView):
        def suitable_bits(self, *args):
            asked.append(self)
            return super().suitable_bits(*args)

        def suitable_among(self, *args):
            asked.append(self)
            return super().suitable_among(*args)

    views = [[CountingView([WorkerSpec(10 * lm + p, lm, (capacity,), (0,))]) for p in range(2)] for lm in range(2)]
    search = PartitionSearch(views, 0, RandomChoice())
    search.rng = Stream(1, "test")
    return search, views, asked


def test_a_signature_is_found_by_its_number_as_by_itself():
    """``key`` numbers signatures in the order first seen; ``find_key`` of a number is ``find`` of its signature,
    memo included (a queue keyed by number hands the search ints, which hash at no cost)."""
    search, views, asked = counting_search(1)
    a, b = ((1,), (1,)), ((0,), (1,))
    assert [search.key(a), search.key(b), search.key(((1,), (1,)))] == [0, 1, 0] and search.signatures == [a, b]
    assert search.find_key(0) is None and len(asked) == 4 and search.memo[a] is search._entries[0]
    assert search.find(a) is None and len(asked) == 4  # the same memo entry: nothing changed anywhere
    assert search.find_key(search.key(b)) == (0, 0, 0) and len(asked) == 5


def test_memo_skips_searches_until_something_changes():
    """A signature found nowhere is not searched again (no view asked) until an update arrives."""
    search, views, asked = counting_search(1)
    assert search.find(((1,), (1,))) is None and len(asked) == 4  # no worker has constraint 1
    assert search.find(((1,), (1,))) is None and len(asked) == 4  # memo: nothing changed anywhere
    assert search.find(((0,), (1,))) == (0, 0, 0) and len(asked) == 5  # another signature searches
    for lm, p in ((0, 0), (0, 1), (1, 0), (1, 1)):
        search.allocate(lm, p, 0, (1,))
    assert search.total_free == 0
    search.learn(1, (1,), ((1,),))  # LM 1's worker 1 (partition 1, external) is free again
    asked.clear()
    search.take_scanned()
    assert search.find(((1,), (1,))) is None and asked == []  # it lacks constraint 1: settled from it alone,
    assert search.take_scanned() == 1  # as a search of only the changed partition would
    assert search.find(((0,), (1,))) == (1, 1, 0)
    search.learn(1, (1,), ((1,),))  # the same value again: not a change
    asked.clear()
    assert search.find(((1,), (1,))) is None and asked == []


def test_a_worker_getting_busier_leaves_every_empty_search_standing():
    """Only a learnt gain moves the memo: a worker that ends up with less (busier) cannot make a
    partition suitable, so a signature found nowhere is not searched again."""
    search, views, asked = counting_search(2)
    assert search.find(((1,), (1,))) is None and len(asked) == 4  # no worker has constraint 1
    search.learn(1, (1,), ((1,),))  # busier (2 -> 1 free), still available for the unit demand
    search.learn(0, (0,), ((0,),))
    asked.clear()
    assert search.find(((1,), (1,))) is None and asked == []
    search.learn(1, (1,), ((2,),))  # a gain: that partition is looked at again, and only it
    search.take_scanned()
    assert search.find(((1,), (1,))) is None and asked == [] and search.take_scanned() == 1


def test_a_refusal_settled_from_the_gained_workers_examines_what_a_search_would():
    """Two signatures found nowhere, then two partitions gain: each is refused by a look at the gained
    workers alone, and examines (a cost model's units) what a search of those partitions would, which
    is one fewer once another signature took the last free worker of one of them (whose partition is
    then not looked at)."""
    search, views, asked = counting_search(1)
    a, b, c = ((1,), (1,)), ((0,), (1,)), ((2,), (1,))  # the workers have constraint 0 only
    assert search.find(a) is None and search.find(c) is None and search.take_scanned() == 8
    for lm, p in ((0, 0), (0, 1), (1, 0), (1, 1)):
        search.allocate(lm, p, 0, (1,))
    search.learn(1, (1,), ((1,),))  # LM 1's and LM 0's worker 1 (partition 1) are free again
    search.learn(0, (1,), ((1,),))
    asked.clear()
    assert search.find(a) is None and search.take_scanned() == 2 and asked == []  # (their constraints read)
    found = search.find(b)
    assert found is not None and found[1] == 1
    search.allocate(*found, (1,))  # that partition has no free worker now
    assert search.total_free == 1 and search.take_scanned() == 1
    asked.clear()
    assert search.find(c) is None and search.take_scanned() == 1 and asked == []  # (not the one taken)
    assert search.find(c) is None and search.take_scanned() == 0  # nothing gained since

def visiting_search(order: str, lms: int = 2, gms: int = 3, home: int = 1):
    """A search over ``lms`` LMs x ``gms`` one-worker partitions (constraint 0) that records, as (lm, p),
    every partition it asks."""
    asked = []

    class RecordingView(PartitionView):
        def suitable_bits(self, *args):
            asked.append(self.where)
            return super().suitable_bits(*args)

    views = []
    for lm in range(lms):
        row = []
        for p in range(gms):
            view = RecordingView([WorkerSpec(10 * lm + p, lm, (1,), (0,))])
            view.where = (lm, p)
            row.append(view)
        views.append(row)
    search = PartitionSearch(views, home, RandomChoice(), order)
    search.rng = Stream(1, "test")
    return search, asked


def test_fixed_order_visits_own_partitions_by_lm_then_each_lms_others_in_gm_order():
    """The authors' order (gm_constraints_rand.py l.221, l.252-253): home partition of LM 0, LM 1; then LM
    0's partitions 0, 2, then LM 1's 0, 2. Rotate starts the external ones at GM home+1."""
    for order, expected in (("fixed", [(0, 1), (1, 1), (0, 0), (0, 2), (1, 0), (1, 2)]),
                            ("rotate", [(0, 1), (1, 1), (0, 2), (0, 0), (1, 2), (1, 0)])):
        search, asked = visiting_search(order)
        assert search.find(((1,), (1,))) is None  # no worker has constraint 1: every partition is asked
        assert asked == expected, order


def test_fixed_order_starts_every_search_from_lm_0_where_rotate_moves_on():
    for order, second, spills in (("fixed", (0, 1, 0), [(0, 0, 0), (0, 0, 0)]),
                                  ("rotate", (1, 1, 0), [(0, 2, 0), (1, 2, 0)])):
        search, _ = visiting_search(order)
        assert search.find(((0,), (1,))) == (0, 1, 0)  # LM 0's home partition
        assert search.find(((0,), (1,))) == second, order  # (nothing allocated: it is still free)
        search.allocate(0, 1, 0, (1,))
        search.allocate(1, 1, 0, (1,))  # both home partitions full: external ones
        assert [search.find(((0,), (1,))) for _ in range(2)] == spills, order


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="known: rotate, fixed"):
        visiting_search("sideways")


@pytest.mark.parametrize("log_limit, tail_limit", [(0, 4), (1, 4), (10**6, 4), (10**6, 0), (1, 0)])
def test_a_gain_folded_into_the_memo_is_searched_again(log_limit, tail_limit):
    """A partition found empty for a signature is asked again once it gains, whether the gain log was
    folded into every signature (``_fold``: at once with a limit of 0) or is read at the next search, entry
    by entry or partition by partition (``tail_limit`` 0)."""
    cons = {(0, 0): (0,), (0, 1): (1,), (1, 0): (1,), (1, 1): (1,)}
    views = [[PartitionView([WorkerSpec(10 * lm + p, lm, (1,), cons[lm, p])], num_constraints=2) for p in range(2)]
             for lm in range(2)]
    search = PartitionSearch(views, 0, RandomChoice())
    search.rng = Stream(1, "test")
    search.log_limit = log_limit
    search.tail_limit = tail_limit  # 0: the tail is read partition by partition, from when each last gained
    for lm, p in ((0, 1), (1, 0), (1, 1)):
        search.allocate(lm, p, 0, (1,))
    assert search.find(((1,), (1,))) is None  # the one free worker lacks constraint 1: every partition clean
    search.learn(1, (0,), ((0,),))  # no gain (LM 1's worker 0 stays busy)
    search.learn(1, (1,), ((1,),))  # LM 1's worker 1 (partition 1) is free again: a gain
    assert search.find(((1,), (1,))) == (1, 1, 0)
