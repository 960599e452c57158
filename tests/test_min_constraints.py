"""What the min-constraints policy promises, checked on whole runs: every placement picked, among the
workers of the view it chose from that could run the task at that moment, one with the fewest machine
constraints (Megha 2023, 4.3.2).

The check rebuilds each chooser's view from the recorder (worker, start and end of every task) and the
cluster description, so it runs where that view is exact: PigeonC's masters (each owns its group) and
Megha with one GM, including the centralized baseline (no other GM changes the LMs under it). With one
slot per machine and a constant latency L, a task placed at time t reached its worker ``out`` hops later
and its worker's release reached the chooser ``back`` hops after it ended; another task on a worker
makes that worker busy at t from its own placement to its release, both ends included. Counting ties as
busy can only hide a candidate (a weaker check), never invent one; the chosen worker was idle (the
Worker asserts its capacity).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.tools.run.runner import execute
from scheduler_helpers import rebuilt, recorder_of

L = 500  # the default 0.5 ms latency, in us
# scheduler settings -> (hops out, hops back, view of a worker); handlers take no time (cost_model=zero),
# so placement and release times follow from the start and end times by whole hops of latency
CASES = {
    "megha": ({"scheduler": "megha", "gms": 1, "lms": 4, "workers_per_partition": 20, "cost_model": "zero"}, 2, 2, "cluster"),
    "centralized": ({"scheduler": "centralized", "gms": 2, "lms": 2, "workers_per_partition": 20, "cost_model": "zero"}, 2, 2, "all"),
    "pigeonc": ({"scheduler": "pigeonc", "gms": 2, "lms": 3, "workers_per_partition": 12, "cost_model": "zero"}, 1, 1, "cluster"),
}


def check_fewest_constraints(result, overrides, seed, out, back, scope) -> int:
    """Assert the promise for every placed task; returns how many placements had a real choice."""
    cluster, jobs = rebuilt(overrides, seed)
    workers = {w.worker_id: w for w in cluster.workers()}
    tasks = [t for t in recorder_of(result.fabric).tasks.values() if t.worker >= 0]
    on = defaultdict(list)  # worker -> (placed at, released at) of each of its tasks
    for t in tasks:
        on[t.worker].append((t.start_us - out * L, t.end_us + back * L))
    contested = 0
    for t in tasks:
        placed = t.start_us - out * L
        need = set(jobs[t.job_id].constraints[t.index])
        chosen = workers[t.worker]
        view = [w for w in workers.values() if scope == "all" or w.cluster == chosen.cluster]
        assert need <= set(chosen.constraints), (t, "the chosen worker lacks a constraint")
        idle = [chosen] + [w for w in view if w is not chosen and need <= set(w.constraints)
                           and not any(a <= placed <= b for a, b in on[w.worker_id])]
        fewest = min(len(set(w.constraints)) for w in idle)
        assert len(set(chosen.constraints)) == fewest, (t.job_id, t.index, chosen, fewest)
        contested += len({len(set(w.constraints)) for w in idle}) > 1
    return contested


@pytest.mark.parametrize("scheduler", sorted(CASES))
def test_min_constraints_places_on_the_fewest_constraints(scheduler):
    settings_, out, back, scope = CASES[scheduler]
    overrides = {**settings_, "policy": "min-constraints", "jobs": 120, "load": 0.9}
    r = execute("default", seed=3, overrides=overrides)
    assert r.summary["counters"].get("invalid_internal", 0) == 0  # one GM: the view is never contradicted
    contested = check_fewest_constraints(r, overrides, 3, out, back, scope)
    assert contested > 50  # the policy had real choices to make, not only ties


def test_the_check_catches_random_choice():
    """The same check fails for the random policy: it is not vacuous."""
    settings_, out, back, scope = CASES["pigeonc"]
    overrides = {**settings_, "policy": "random", "jobs": 120, "load": 0.9}
    r = execute("default", seed=3, overrides=overrides)
    with pytest.raises(AssertionError):
        check_fewest_constraints(r, overrides, 3, out, back, scope)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scheduler=st.sampled_from(sorted(CASES)), seed=st.integers(0, 2**16), load=st.floats(0.3, 1.2),
       fanout=st.integers(1, 12))
def test_min_constraints_property(scheduler, seed, load, fanout):
    settings_, out, back, scope = CASES[scheduler]
    overrides = {**settings_, "policy": "min-constraints", "jobs": 40, "load": load, "fanout": fanout}
    r = execute("default", seed=seed, overrides=overrides)
    check_fewest_constraints(r, overrides, seed, out, back, scope)
