"""Verdict rules of `fedemu reproduce` (tools/verdict.py): each kind's rule, its symmetries and monotonicity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.tools.verdict import DIFFERS, NOT_MEASURED, RANK, REPRODUCES, SAME, TIE, direction, verdict

pos = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
KIND = st.sampled_from(["ratio", "value", "at_least", "at_most"])


@given(KIND, pos)
def test_ours_equal_to_the_papers_number_reproduces_unless_it_sits_in_the_tie_band(kind, p):
    got = verdict(kind, p, p)
    if kind == "at_least" and p <= TIE or kind == "at_most" and p >= 1 / TIE:
        assert got == DIFFERS  # the paper's own number shows no direction against the baseline 1
    else:
        assert got == REPRODUCES


@given(pos, pos)
def test_a_ratio_and_its_inverse_get_the_same_verdict(p, o):
    assert verdict("ratio", p, o) == verdict("ratio", 1 / p, 1 / o)


@given(pos, pos)
def test_ratios_pointing_opposite_ways_differ(p, o):
    if direction(p) * direction(o) == -1:
        assert verdict("ratio", p, o) == DIFFERS
    if direction(p) == direction(o):
        assert verdict("ratio", p, o) != DIFFERS


@given(pos, pos, st.floats(min_value=1e-2, max_value=1e2))
def test_a_values_verdict_does_not_depend_on_its_unit(p, o, k):
    assert verdict("value", p, o) == verdict("value", p * k, o * k)


@given(pos, pos, pos, pos)
def test_at_least_is_monotone_in_ours(p, b, o1, o2):
    lo, hi = sorted((o1, o2))
    assert RANK[verdict("at_least", p, lo, baseline=b)] <= RANK[verdict("at_least", p, hi, baseline=b)]


@given(pos, pos, pos)
def test_at_most_mirrors_at_least(p, b, o):
    assert verdict("at_most", p, o, baseline=b) == verdict("at_least", 1 / p, 1 / o, baseline=1 / b)


@pytest.mark.parametrize("kind,paper,ours,kw,expected", [
    ("ratio", 5.61, 6.0, {}, REPRODUCES),
    ("ratio", 5.61, 1.5, {}, SAME),  # right way, a factor 3.7 short
    ("ratio", 5.61, 1.05, {}, DIFFERS),  # within the tie band: no improvement
    ("ratio", 1.1, 1.08, {"tie": 1.05}, REPRODUCES),
    ("at_least", 10, 25, {}, REPRODUCES),
    ("at_least", 10, 3, {}, SAME),
    ("at_least", 10, 0.5, {}, DIFFERS),
    ("at_least", 1, 1.05, {}, DIFFERS),  # "A exceeds B" needs more than the tie band
    ("at_least", 0.9, 0.7, {"baseline": 0.5}, SAME),
    ("at_most", 0.03, 0.01, {"baseline": 0.5}, REPRODUCES),
    ("at_most", 1.5, 20, {"baseline": 15}, DIFFERS),
    ("value", 0.0015, 0.0029, {}, REPRODUCES),
    ("value", 0.0015, 0.01, {}, SAME),
    ("value", 1281.3, 0.003, {}, DIFFERS),
    ("value", 36, 40.67, {"tol": 1.001}, SAME),
    ("value", 0.0015, 0.0, {}, DIFFERS),  # 0 counts as the 1 us floor
    ("value", 1.0, None, {}, NOT_MEASURED),
])
def test_examples_of_each_rule(kind, paper, ours, kw, expected):
    assert verdict(kind, paper, ours, **kw) == expected


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown claim kind 'about'"):
        verdict("about", 1, 1)
