"""TEBAS (Liu et al.): Fitness, RemainCap, the per-task choice and Algorithm 1's whole-job
assignment with beta node groups."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.rand import Stream
from fedemu.model import WorkerSpec
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.tebas import TebasChoice, assign, fitness, groups, remain_cap


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1), st.lists(st.floats(1, 64), min_size=1, max_size=8))
def test_fitness_is_the_formula(alpha, speeds):
    got = fitness(alpha, speeds)
    for f, k in zip(got, speeds):
        assert np.isclose(f, 1 / ((1 - alpha) + alpha / k))
        assert 1 <= f <= k + 1e-9


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=8),
       st.tuples(st.integers(0, 5), st.integers(1, 5)))
def test_remain_cap_is_the_fewest_whole_tasks_any_resource_holds(free, demand):
    got = remain_cap(free, demand)
    for r, f in zip(got, free):
        want = min(x // d for x, d in zip(f, demand) if d > 0)
        assert r == want


@st.composite
def tebas_views(draw):
    n = draw(st.integers(1, 10))
    specs = [WorkerSpec(i, 0, (draw(st.integers(1, 8)), draw(st.integers(1, 16))),
                        speed=draw(st.sampled_from([1.0, 1.5, 2.0]))) for i in range(n)]
    view = PartitionView(specs)
    for i, w in enumerate(specs):
        view.set_free(i, (draw(st.integers(0, w.capacity[0])), draw(st.integers(0, w.capacity[1]))))
    return view


@settings(max_examples=300, deadline=None)
@given(tebas_views(), st.floats(0, 1), st.tuples(st.integers(1, 3), st.integers(1, 4)), st.integers(0, 2**32))
def test_the_choice_takes_the_fittest_then_the_roomiest_and_never_exceeds_remain_cap(view, alpha, demand, seed):
    cand = view.suitable((), demand)
    if not len(cand):
        return
    got = TebasChoice(alpha).choose(view, cand, Stream(seed, "t"), demand)
    fit = fitness(alpha, view.speed[cand])
    room = remain_cap(view.free[cand], demand)
    k = cand.tolist().index(got)
    assert room[k] >= 1  # the assignment fits what the machine has left
    assert fit[k] == fit.max()
    assert room[k] == room[fit == fit.max()].max()


def test_alpha_zero_makes_speed_irrelevant():
    view = PartitionView([WorkerSpec(0, 0, (4,), speed=2.0), WorkerSpec(1, 0, (4,))])
    view.allocate(0, (1,))
    assert TebasChoice(0.0).choose(view, np.arange(2), Stream(1, "t")) == 1  # more room
    assert TebasChoice(0.5).choose(view, np.arange(2), Stream(1, "t")) == 0  # faster


def test_groups_follow_node_division():
    assert [list(g) for g in groups(10, 3)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8, 9]]
    assert [list(g) for g in groups(2, 3)] == [[0, 1]]
    assert [list(g) for g in groups(9, 1)] == [[i] for i in range(9)]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 1.5, 2.0, 3.0]), st.integers(0, 6)), min_size=1, max_size=15),
       st.integers(0, 60), st.integers(1, 5))
def test_assign_never_exceeds_remain_cap_and_places_all_that_fit(nodes, tasks, beta):
    fit = [f for f, _ in nodes]
    cap = [c for _, c in nodes]
    got = assign(fit, cap, tasks, beta)
    assert (got >= 0).all() and (got <= np.array(cap)).all()
    assert got.sum() == min(tasks, sum(cap))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.floats(1, 4), min_size=3, max_size=15), st.integers(1, 40), st.integers(1, 4))
def test_assign_fills_the_fittest_group_first(fit, tasks, beta):
    """With room everywhere, the fittest group takes the tasks but for fewer than one per machine of it
    (the rounding), and no machine outside it takes more than one."""
    got = assign(fit, [tasks] * len(fit), tasks, beta)
    order = np.argsort(-np.asarray(fit), kind="stable")
    first = list(order[list(groups(len(fit), beta)[0])])
    assert got[first].sum() > tasks - len(first)
    rest = [i for i in range(len(fit)) if i not in first]
    assert (got[rest] <= 1).all()


def test_assign_spills_to_the_next_group_when_the_fittest_is_full():
    # six machines, beta 3: groups {fit 3, 3, 2} and {1, 1, 1}; the first group holds 2 + 1 + 1
    got = assign([1, 3, 1, 3, 2, 1], [5, 1, 5, 2, 1, 5], tasks=7, beta=3)
    assert got.tolist()[1] == 1 and got.tolist()[3] == 2 and got.tolist()[4] == 1
    assert got.sum() == 7 and got[[0, 2, 5]].sum() == 3
