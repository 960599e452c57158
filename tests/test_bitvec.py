"""Packed bit vectors against a plain Python set reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.policies import bitvec

sizes = st.integers(min_value=0, max_value=300)


@st.composite
def size_and_sets(draw, count=1):
    n = draw(sizes)
    idx = st.sets(st.integers(0, n - 1), max_size=n) if n else st.just(set())
    return n, [draw(idx) for _ in range(count)]


@settings(max_examples=150, deadline=None)
@given(size_and_sets(count=1))
def test_from_indices_roundtrip(case):
    n, (bits,) = case
    v = bitvec.from_indices(n, sorted(bits) + sorted(bits)[:3])  # duplicates are harmless
    assert v.dtype == np.uint64 and v.size == bitvec.num_words(n)
    got = bitvec.indices(v)
    assert got.tolist() == sorted(bits)
    assert bitvec.popcount(v) == len(bits)
    assert bitvec.any(v) == bool(bits)
    assert all(bitvec.test_bit(v, i) == (i in bits) for i in range(n))


@settings(max_examples=150, deadline=None)
@given(size_and_sets(count=3))
def test_and_all_is_intersection(case):
    n, sets = case
    vs = [bitvec.from_indices(n, sorted(s)) for s in sets]
    before = [v.copy() for v in vs]
    assert bitvec.indices(bitvec.and_all(vs)).tolist() == sorted(sets[0] & sets[1] & sets[2])
    assert bitvec.indices(bitvec.and_all(vs[:1])).tolist() == sorted(sets[0])
    assert all((a == b).all() for a, b in zip(vs, before))  # inputs untouched


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_set_and_clear_follow_a_set(data):
    n = data.draw(st.integers(1, 260))
    ops = data.draw(st.lists(st.tuples(st.booleans(), st.integers(0, n - 1)), max_size=60))
    v = bitvec.make(n)
    ref = set()
    for on, i in ops:
        if on:
            bitvec.set_bit(v, i)
            ref.add(i)
        else:
            bitvec.clear_bit(v, i)
            ref.discard(i)
        assert bitvec.test_bit(v, i) == on
    assert bitvec.indices(v).tolist() == sorted(ref)
    assert bitvec.popcount(v) == len(ref)


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 128, 10_000])
def test_full_sets_exactly_n_bits(n):
    v = bitvec.full(n)
    assert bitvec.popcount(v) == n
    assert bitvec.indices(v).tolist() == list(range(n))


def test_high_bit_of_a_word_and_large_vectors():
    v = bitvec.from_indices(10_000, [63, 127, 9_999])
    assert bitvec.indices(v).tolist() == [63, 127, 9_999]
    bitvec.clear_bit(v, 63)
    assert bitvec.indices(v).tolist() == [127, 9_999]
    assert not bitvec.any(bitvec.make(10_000))
    assert bitvec.indices(bitvec.make(10_000)).size == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="out of range 0..9"):
        bitvec.from_indices(10, [10])
    with pytest.raises(ValueError, match="at least one vector"):
        bitvec.and_all([])
    with pytest.raises(ValueError, match=">= 0"):
        bitvec.make(-1)


@settings(max_examples=150, deadline=None)
@given(size_and_sets(count=2))
def test_int_form_matches_the_vector(case):
    """to_int / from_int / int_indices agree with the numpy form, sparse (Python loop) and dense (numpy)."""
    n, (a, b) = case
    va, vb = bitvec.from_indices(n, sorted(a)), bitvec.from_indices(n, sorted(b))
    ia, ib = bitvec.to_int(va), bitvec.to_int(vb)
    assert ia == sum(1 << i for i in a)
    assert bitvec.int_indices(ia).tolist() == sorted(a)
    assert bitvec.int_indices(ia & ib).tolist() == sorted(a & b)
    assert bitvec.int_indices(ia).dtype == np.intp
    assert np.array_equal(bitvec.from_int(n, ia), va)


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 1500), min_size=1), st.data())
def test_nth_set_bit_is_the_unpacked_index(bits, data):
    x = sum(1 << i for i in bits)
    k = data.draw(st.integers(0, len(bits) - 1))
    assert bitvec.nth_set_bit(x, k) == sorted(bits)[k] == int(bitvec.int_indices(x)[k])


def test_nth_set_bit_past_the_set_bits_is_an_error():
    with pytest.raises(IndexError, match="bit number 3 of an int with 3 set bits"):
        bitvec.nth_set_bit(0b10110, 3)
