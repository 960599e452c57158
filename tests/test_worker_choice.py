"""Worker-choice policies: random and min-constraints, determinism, and the name registry."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.fabric.rand import Stream
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.worker_choice import (WORKER_CHOICE_NAMES, MinConstraintsChoice, RandomChoice, among,
                                           get_worker_choice)
from fedemu.model import WorkerSpec


def view_of(constraint_lists):
    return PartitionView([WorkerSpec(100 + i, 0, (1,), tuple(c)) for i, c in enumerate(constraint_lists)])


def test_names_and_unknown_policy_message():
    assert WORKER_CHOICE_NAMES == ("binpack", "d-choices", "min-constraints", "random", "spread", "tebas")
    assert isinstance(get_worker_choice("random"), RandomChoice)
    assert isinstance(get_worker_choice("min-constraints"), MinConstraintsChoice)
    with pytest.raises(ConfigError) as err:
        get_worker_choice("minconstraint")
    assert str(err.value) == "unknown policy 'minconstraint'; known: binpack, d-choices, min-constraints, random, spread, tebas"
    assert isinstance(err.value, FedemuError)


def test_paper_example_min_constraints_keeps_the_versatile_worker():
    # Megha 2023, 4.3.2: worker A (1,2,3,4), worker B (1,2);
    # a task needing (1,2) should go to B.
    view = view_of([(1, 2, 3, 4), (1, 2)])
    candidates = view.suitable((1, 2))
    assert candidates.tolist() == [0, 1]
    assert get_worker_choice("min-constraints").choose(view, candidates, Stream(1, "t")) == 1


def test_min_constraints_returns_a_minimum_and_is_deterministic():
    s = Stream(3, "test/build")
    view = view_of([[c for c in range(21) if s.random() < 0.5] for _ in range(200)])
    policy = get_worker_choice("min-constraints")
    for trial in range(50):
        cands = np.array(sorted(s.sample(range(200), 1 + s.randrange(60))), dtype=np.intp)
        a = policy.choose(view, cands, Stream(trial, "choice"))
        b = policy.choose(view, cands, Stream(trial, "choice"))
        assert a == b and a in cands.tolist() and isinstance(a, int)
        assert view.constraint_counts[a] == view.constraint_counts[cands].min()


def test_min_constraints_breaks_ties_uniformly_with_the_stream():
    view = view_of([(1,), (1, 2), (3,), (4,), (1, 2, 3)])
    cands = np.arange(5)
    stream = Stream(5, "ties")
    picks = [get_worker_choice("min-constraints").choose(view, cands, stream) for _ in range(3000)]
    counts = np.bincount(picks, minlength=5)
    assert counts[[1, 4]].sum() == 0
    assert all(850 < c < 1150 for c in counts[[0, 2, 3]])


def test_unique_minimum_consumes_no_draw():
    view = view_of([(1, 2), (1,), (2, 3)])
    stream = Stream(0, "x")
    assert get_worker_choice("min-constraints").choose(view, np.array([0, 1, 2]), stream) == 1
    assert stream.counter == 0


def test_random_is_uniform_and_reproducible():
    view = view_of([()] * 10)
    cands = np.array([2, 5, 7])
    policy = get_worker_choice("random")
    picks = [policy.choose(view, cands, Stream(9, "r")) for _ in range(2)]
    assert picks[0] == picks[1]
    stream = Stream(9, "uniform")
    many = [policy.choose(view, cands, stream) for _ in range(3000)]
    assert sorted(set(many)) == [2, 5, 7]
    assert all(850 < many.count(w) < 1150 for w in (2, 5, 7))
    assert policy.choose(view, np.array([4]), stream) == 4


@pytest.mark.parametrize("name", WORKER_CHOICE_NAMES)
def test_empty_candidates_is_an_error(name):
    with pytest.raises(ValueError, match="at least one candidate"):
        get_worker_choice(name).choose(view_of([()]), np.empty(0, dtype=np.intp), Stream(0, "e"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sets(st.integers(0, 5)), min_size=1, max_size=150), st.sampled_from(WORKER_CHOICE_NAMES),
       st.integers(0, 1 << 20), st.data())
def test_a_choice_from_bits_is_the_choice_from_the_array(cons, name, seed, data):
    """``among`` (a policy's ``choose_among``, or ``choose`` on the unpacked bits) picks the same worker with
    the same draws as ``choose`` on the ascending candidate array: the streams end in the same state."""
    view = view_of([sorted(c) for c in cons])
    bits = data.draw(st.sets(st.integers(0, len(cons) - 1), min_size=1))
    policy = get_worker_choice(name)
    a, b = Stream(seed, "choice"), Stream(seed, "choice")
    got = among(policy)(view, sum(1 << i for i in bits), a)
    assert got == policy.choose(view, np.array(sorted(bits), dtype=np.intp), b) and got in bits
    assert a.randrange(1 << 30) == b.randrange(1 << 30)


@pytest.mark.parametrize("name", WORKER_CHOICE_NAMES)
def test_no_candidate_bits_is_an_error(name):
    with pytest.raises(ValueError, match="at least one candidate"):
        among(get_worker_choice(name))(view_of([()]), 0, Stream(0, "e"))
