"""PigeonC's constraint-set counts as the 2023 authors' simulator builds them (cs_counts=subset-merge,
actors/pigeon/constraint_sets.py) against the paper's (cs_counts=paper, ConstraintSetCounts), and the Megha
GM's megha_simulator-style view refresh (view_refresh=full)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors.pigeon.constraint_sets import ConstraintSetCounts, SubsetMergedCounts, subset_merged
from fedemu.model import WorkerSpec
from fedemu.tools.run.runner import execute


def _workers(sets):
    return [WorkerSpec(i, 0, (1,), tuple(s)) for i, s in enumerate(sets)]


def test_the_papers_example_counts_apart_where_the_authors_code_merges():
    """Megha 2023, 4.2: workers (C2, C4), (C4), (C2, C4) give CS = {(C2, C4): 2, (C4): 1}; the authors'
    simulator counts the subset (C4) under (C2, C4): {(C2, C4): 3}."""
    group = _workers([(2, 4), (4,), (2, 4)])
    assert ConstraintSetCounts([group]).tables == [{(2, 4): 2, (4,): 1}]
    assert subset_merged([w.constraints for w in group]) == {0b10100: 3}
    assert ConstraintSetCounts([group]).weights((2,)) == (2,)
    assert SubsetMergedCounts([group]).weights((2,)) == (3,)  # (C4) is counted as if it had C2
    assert SubsetMergedCounts([group]).weights((4,)) == (3,)


def test_the_order_of_machines_matters_to_the_merge():
    """A subset counted before its superset keeps its own entry (it was there first)."""
    assert subset_merged([(4,), (2, 4)]) == {0b10000: 1, 0b10100: 1}
    assert subset_merged([(2, 4), (4,)]) == {0b10100: 2}


sets = st.lists(st.frozensets(st.integers(0, 6), max_size=4), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(sets, min_size=1, max_size=3), st.frozensets(st.integers(0, 6), max_size=3))
def test_merged_weights_are_the_authors_sum_and_never_below_the_papers(groups, task):
    """Per group: the sum of the merged counts of the entries containing the task's constraints (a direct
    recount of the authors' construction); it counts every machine that can run the task at least once,
    so it is never below the paper's count, and the two agree when no machine's set is another's subset."""
    merged = SubsetMergedCounts([_workers(g) for g in groups]).weights(tuple(sorted(task)))
    exact = ConstraintSetCounts([_workers(g) for g in groups]).weights(tuple(sorted(task)))
    for g, got, paper in zip(groups, merged, exact):
        table: list = []
        for s in g:
            hits = [e for e in table if s <= e[0]]
            for e in hits:
                e[1] += 1
            if not hits:
                table.append([s, 1])
        assert got == sum(n for s, n in table if task <= s)
        assert got >= paper
        if all(not (a < b) for a in g for b in g) and len(set(g)) == len(g):
            assert got == paper


def _pigeonc(counts: str):
    return execute("default", overrides={
        "scheduler": "pigeonc", "cs_counts": counts, "constraint_table": "megha-2023", "infeasible": "drop-task",
        "workload": "syn_40", "jobs": 40, "gms": 1, "lms": 4, "workers_per_partition": 100, "masters": 4,
        "cost_model": "zero"}).summary


def test_pigeonc_runs_with_either_count():
    paper, merged = _pigeonc("paper"), _pigeonc("subset-merge")
    for s in (paper, merged):
        assert all(v == "ok" for v in s["invariants"].values()) and s["jobs_completed"] == 40
    assert paper["digest"] != merged["digest"]  # the masters drawn differ


def test_a_full_view_refresh_asks_every_lm_and_keeps_every_invariant():
    common = {"scheduler": "megha", "jobs": 60, "gms": 2, "lms": 3, "workers_per_partition": 10, "load": 0.9,
              "constraints": False}
    delta = execute("default", overrides=common).summary
    full = execute("default", overrides={**common, "view_refresh": "full"}).summary
    assert "view_refreshes" not in delta["counters"] and full["counters"]["view_refreshes"] > 0
    assert full["messages"] > delta["messages"]
    for s in (delta, full):
        assert all(v == "ok" for v in s["invariants"].values()) and s["jobs_completed"] == 60


@settings(max_examples=100, deadline=None)
@given(st.lists(sets, min_size=1, max_size=3), st.frozensets(st.integers(0, 6), max_size=3),
       st.sampled_from([0, 62, 63, 70]))
def test_merged_weights_are_the_same_for_sets_beyond_63_bits(groups, task, shift):
    """Sets that do not fit a 63-bit word are summed with Python ints, to the same weights: the same
    groups with every constraint id moved up by ``shift``."""
    moved = [[frozenset(c + shift for c in s) for s in g] for g in groups]
    got = SubsetMergedCounts([_workers(g) for g in moved]).weights(tuple(sorted(c + shift for c in task)))
    assert got == SubsetMergedCounts([_workers(g) for g in groups]).weights(tuple(sorted(task)))
