"""Verdict rules of `fedemu reproduce` (tools/verdict.py): each kind's rule, its symmetries and monotonicity;
ranges, exact examples, absolute tolerances and offsets; per-seed agreement (one lucky seed decides
nothing); "not testable" and "for the wrong reason"."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedemu.tools.evaluate import evaluate, evaluate_all
from fedemu.tools.verdict import (DIFFERS, NOT_MEASURED, NOT_TESTABLE, RANK, REPRODUCES, SAME, SAME_ORDER, TIE,
                                  WRONG_REASON, combine, direction, verdict, wrong_reason)

pos = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
KIND = st.sampled_from(["ratio", "value", "at_least", "at_most"])
VERDICTS = st.sampled_from([REPRODUCES, SAME, DIFFERS])


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


@given(pos, pos)
def test_a_single_value_is_never_said_to_have_a_direction(p, o):
    assert verdict("value", p, o) in (REPRODUCES, SAME_ORDER, DIFFERS)


@given(pos, pos, pos, pos)
def test_at_least_is_monotone_in_ours(p, b, o1, o2):
    lo, hi = sorted((o1, o2))
    assert RANK[verdict("at_least", p, lo, baseline=b)] <= RANK[verdict("at_least", p, hi, baseline=b)]


@given(pos, pos, pos)
def test_at_most_mirrors_at_least(p, b, o):
    assert verdict("at_most", p, o, baseline=b) == verdict("at_least", 1 / p, 1 / o, baseline=1 / b)


@given(pos, pos, pos)
def test_a_range_reproduces_exactly_inside_it(a, b, o):
    lo, hi = sorted((a, b))
    got = verdict("range", [lo, hi], o)
    assert (got == REPRODUCES) == (lo <= o <= hi)
    if got == SAME_ORDER:
        assert o < lo <= 10 * o or hi < o <= 10 * hi


@given(pos, pos)
def test_a_range_is_not_its_lower_bound(lo, factor):
    """Finding 2's "3 to 6 orders of magnitude": 10^7 is above the range, not a reproduction of ">= 10^3"."""
    hi = lo * (1 + factor)
    assert verdict("range", [lo, hi], hi * 11) == DIFFERS
    assert verdict("at_least", lo, hi * 11, baseline=lo / 2) == REPRODUCES


@given(pos, st.floats(min_value=1e-6, max_value=0.5))
def test_an_exact_example_reproduces_only_when_equal(p, off):
    assert verdict("value", p, p, exact=True) == REPRODUCES
    assert verdict("value", p, p * (1 + off), exact=True) == DIFFERS
    assert verdict("ratio", p, p * (1 - off), exact=True) == DIFFERS


@given(st.floats(0, 1), st.floats(0, 1), st.floats(0.01, 0.3))
def test_an_absolute_tolerance_judges_probabilities_by_their_difference(p, o, tol):
    assert (verdict("value", p, o, abs_tol=tol) == REPRODUCES) == (abs(p - o) <= tol + 1e-9)
    assert verdict("value", p, o, abs_tol=tol) in (REPRODUCES, DIFFERS)


@given(st.floats(1.01, 10), st.floats(1.0, 20))
def test_a_slowdown_is_judged_by_its_queueing_part(p, o):
    """With offset 1, slowdowns 1.3 and 2.6 (queueing 0.3 against 1.6) do not reproduce each other."""
    assert verdict("value", p, o, offset=1) == verdict("value", p - 1, o - 1)
    assert verdict("value", 1.3, 2.6, offset=1) != REPRODUCES


@pytest.mark.parametrize("kind,paper,ours,kw,expected", [
    ("ratio", 5.61, 6.0, {}, REPRODUCES),
    ("ratio", 5.61, 1.5, {}, SAME),  # right way, a factor 3.7 short
    ("ratio", 5.61, 1.05, {}, DIFFERS),  # within the tie band: no improvement
    ("ratio", 1.1, 1.08, {"tie": 1.05}, REPRODUCES),
    ("ratio", 1.25, 1.139, {"exact": True}, DIFFERS),  # the worked example's gain is exact
    ("at_least", 10, 25, {}, REPRODUCES),
    ("at_least", 10, 3, {}, SAME),
    ("at_least", 10, 0.5, {}, DIFFERS),
    ("at_least", 1, 1.05, {}, DIFFERS),  # "A exceeds B" needs more than the tie band
    ("at_least", 0.9, 0.7, {"baseline": 0.5}, SAME),
    ("at_most", 0.03, 0.01, {"baseline": 0.5}, REPRODUCES),
    ("at_most", 1.5, 20, {"baseline": 15}, DIFFERS),
    ("value", 0.0015, 0.0029, {}, REPRODUCES),
    ("value", 0.0015, 0.01, {}, SAME_ORDER),
    ("value", 1281.3, 0.003, {}, DIFFERS),
    ("value", 0.7, 0.91, {"abs_tol": 0.1}, DIFFERS),  # a factor 10 would have passed any probability
    ("value", 0.07, 0.29, {"abs_tol": 0.1}, DIFFERS),
    ("value", 0.0015, 0.0, {}, DIFFERS),  # 0 counts as the 1 us floor
    ("value", 1.0, None, {}, NOT_MEASURED),
    ("range", [1e3, 1e6], 1.9e6, {}, SAME_ORDER),
    ("range", [1e3, 1e6], 4.3e7, {}, DIFFERS),
    ("occurs", 36, [46, 46, 30, 36], {}, REPRODUCES),
    ("occurs", 36, [46, 30], {}, DIFFERS),
])
def test_examples_of_each_rule(kind, paper, ours, kw, expected):
    assert verdict(kind, paper, ours, **kw) == expected


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown claim kind 'about'"):
        verdict("about", 1, 1)


@given(st.lists(VERDICTS, min_size=1, max_size=9))
def test_a_verdict_needs_two_thirds_of_the_seeds(seeds):
    got = combine(seeds)
    need = math.ceil(2 * len(seeds) / 3 - 1e-9)
    assert sum(RANK[v] >= RANK[got] for v in seeds) >= need
    better = [v for v in (REPRODUCES, SAME) if RANK[v] > RANK[got]]
    for v in better:  # no better verdict has the support
        assert sum(RANK[x] >= RANK[v] for x in seeds) < need


@given(VERDICTS, VERDICTS)
def test_one_lucky_seed_of_three_decides_nothing(good, bad):
    if RANK[good] > RANK[bad]:
        assert combine([good, bad, bad]) == bad
        assert combine([bad, good, good]) == good


def test_one_seed_is_its_own_verdict_and_no_seed_is_not_measured():
    assert combine([SAME_ORDER]) == SAME_ORDER and combine([]) == NOT_MEASURED
    assert combine([REPRODUCES, SAME_ORDER, DIFFERS]) == SAME_ORDER


@given(st.lists(st.sampled_from([REPRODUCES, SAME, DIFFERS, NOT_MEASURED]), max_size=4))
def test_reproduces_for_the_wrong_reason_only_when_every_measured_mechanism_differs(mechanisms):
    got = wrong_reason(REPRODUCES, mechanisms)
    measured = [m for m in mechanisms if m != NOT_MEASURED]
    assert (got == WRONG_REASON) == (bool(measured) and all(m == DIFFERS for m in measured))
    assert wrong_reason(SAME, mechanisms) == SAME


def _rows(values: dict) -> dict:
    """rows[(experiment, scheduler, policy)] from {(experiment, scheduler): {seed: value}} of metric m."""
    return {(e, s, "random"): [{"seed": k, "m": v} for k, v in seeds.items()] for (e, s), seeds in values.items()}


def test_a_claims_verdict_is_per_seed_and_its_number_the_ratio_of_means():
    """Megha's p99 on syn_500 was 0.062/0.063/1.049 s against PigeonC's 1.0 s: the mean ratio (2.6) would
    say "same direction", seeds 1 and 2 (16x) say "reproduces": two of three decide."""
    rows = _rows({("x", "pigeonc"): {1: 1.0, 2: 1.0, 3: 1.0}, ("x", "megha"): {1: 0.062, 2: 0.063, 3: 1.049}})
    claim = {"id": "c", "kind": "at_least", "paper": 10, "ours": "pigeonc/random@x:m / megha/random@x:m"}
    got = evaluate(claim, rows)
    assert got["verdict"] == REPRODUCES and got["seeds"][3] == DIFFERS
    assert math.isclose(got["ours"], 1.0 / ((0.062 + 0.063 + 1.049) / 3))
    assert verdict("at_least", 10, got["ours"]) == SAME


def test_claims_across_claims_not_testable_and_wrong_reason():
    rows = _rows({("x", "a"): {1: 100.0}, ("x", "b"): {1: 1.0}})
    claims = [{"id": "effect", "kind": "at_least", "paper": 10, "ours": "a/random@x:m / b/random@x:m",
               "mechanism": ["cause"]},
              {"id": "cause", "kind": "value", "paper": 1e5, "ours": "a/random@x:m"},
              {"id": "contradicted", "kind": "value", "paper": 1, "ours": "b/random@x:m", "not_testable": "why"}]
    got = evaluate_all(claims, rows)
    assert got["cause"]["verdict"] == DIFFERS and got["effect"]["verdict"] == WRONG_REASON
    assert got["contradicted"]["verdict"] == NOT_TESTABLE and got["contradicted"]["measured"] == REPRODUCES


def test_up_to_takes_the_largest_expansion_per_seed():
    rows = _rows({("e-1", "a"): {1: 2.0, 2: 9.0}, ("e-2", "a"): {1: 8.0, 2: 3.0}})
    claim = {"id": "u", "kind": "value", "paper": 8.5, "tol": 1.1, "ours": "a/random@e-{k}:m", "over": {"k": [1, 2]}}
    got = evaluate(claim, rows)
    assert got["seeds"] == {1: REPRODUCES, 2: REPRODUCES}
