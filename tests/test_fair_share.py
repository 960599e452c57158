"""The fairness decisions of Algorithm 2 (policies.fair_share) against brute force."""

from __future__ import annotations

from itertools import chain, combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.policies.fair_share import Shares, choose_victims, consumed, dominant, preempt_order


def test_shares_parse_percentages_and_refuse_bad_ones_in_one_line():
    assert Shares.parse("10,25,15,50", 4).fractions == (0.10, 0.25, 0.15, 0.50)
    assert Shares.parse("", 4).fractions == (0.25,) * 4
    for text, users, words in (("10,25", 4, "2 shares for 4 users"), ("60,50", 2, "sum to 110%"),
                               ("0,50", 2, "above 0"), ("a,b", 2, "percentages separated by commas"),
                               ("nan,10", 2, "above 0")):
        with pytest.raises(ConfigError, match=words):
            Shares.parse(text, users)


def test_dominant_share_is_the_largest_fraction_over_resources():
    assert dominant((2, 8), (10, 16)) == 0.5 and consumed([(1,), (3,)], (10,)) == [0.1, 0.3]


use_lists = st.lists(st.floats(0, 1), min_size=2, max_size=5)


@given(use_lists, st.data())
def test_preempt_order_is_algorithm_2_with_its_two_guards(use, data):
    n = len(use)
    raw = data.draw(st.lists(st.floats(0.01, 1), min_size=n, max_size=n))
    shares = Shares(tuple(r / sum(raw) for r in raw))
    requester = data.draw(st.integers(0, n - 1))
    need = data.draw(st.floats(0, 0.5))
    got = preempt_order(requester, use, shares, need)
    mine = shares.fractions[requester]
    if use[requester] >= mine or use[requester] + need > mine + 1e-12:
        assert got == ()  # at or over its share (or would be with the task): back to its queue
        return
    for u in range(n):  # exactly the users that stay at or above their share after giving up the demand
        keeps = use[u] - need >= shares.fractions[u] - 1e-12
        assert (u in got) == (u != requester and keeps)
    violation = [use[u] - shares.fractions[u] for u in got]
    assert violation == sorted(violation, reverse=True)  # largest violation first


def _subsets(items):
    return chain.from_iterable(combinations(items, k) for k in range(len(items) + 1))


tasks = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=6)


@given(tasks, st.tuples(st.integers(0, 3), st.integers(0, 3)), st.tuples(st.integers(0, 4), st.integers(0, 4)))
def test_choose_victims_is_the_smallest_set_that_makes_room(demands, free, demand):
    running = [((7, i), d) for i, d in enumerate(demands)]
    got = choose_victims(running, free, demand)

    def fits(combo):
        return all(f + sum(t[1][r] for t in combo) >= d for r, (f, d) in enumerate(zip(free, demand)))

    feasible = [c for c in _subsets(running) if fits(c)]
    if not feasible:
        assert got is None
        return
    fewest = min(len(c) for c in feasible)
    assert got is not None and len(got) == fewest
    chosen = [t for t in running if t[0] in got]
    assert fits(chosen)
    least = min(sum(sum(t[1]) for t in c) for c in feasible if len(c) == fewest)
    assert sum(sum(t[1]) for t in chosen) == least
