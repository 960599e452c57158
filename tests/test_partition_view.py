"""PartitionView: Algorithm 1 matching against brute force, capacity bookkeeping, bad input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.policies import bitvec
from fedemu.policies.partition_view import PartitionView
from fedemu.model import WorkerSpec

constraint_sets = st.sets(st.integers(0, 20), max_size=8).map(lambda s: tuple(sorted(s)))


@st.composite
def clusters(draw):
    r = draw(st.integers(1, 2))
    caps = st.tuples(*[st.integers(0, 3)] * r)
    rows = draw(st.lists(st.tuples(caps, constraint_sets), max_size=140))
    return r, [WorkerSpec(1000 + i, 0, cap, cons) for i, (cap, cons) in enumerate(rows)]


def brute(free, workers, constraints, demand):
    """Indices of ``workers`` having every constraint and ``free`` rows (one per worker) >= demand."""
    need = list(demand) + [0] * (len(free[0]) - len(demand)) if len(free) else []
    return [
        i
        for i, w in enumerate(workers)
        if set(constraints) <= set(w.constraints) and all(f >= d for f, d in zip(free[i], need))
    ]


def brute_free_count(view):
    return int((view.free >= np.array([1] + [0] * (view.num_resources - 1))).all(axis=1).sum())


@settings(max_examples=120, deadline=None)
@given(clusters(), st.data())
def test_suitable_matches_brute_force(cluster, data):
    r, workers = cluster
    view = PartitionView(workers, num_resources=r)
    n = len(workers)
    # Random free states: set_free on some workers, allocate on others.
    hows = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    seeds = data.draw(st.lists(st.integers(0, 1 << 30), min_size=n, max_size=n))
    for i, (how, seed) in enumerate(zip(hows, seeds)):
        if how == 1:
            view.set_free(i, [seed % (c + 1) for c in workers[i].capacity])
        elif how == 2 and view.free[i, 0] > 0:
            view.allocate(i, (1,))
    assert view.free_count == brute_free_count(view)
    for _ in range(4):
        constraints = data.draw(constraint_sets)
        demand = tuple(data.draw(st.integers(0, 3)) for _ in range(data.draw(st.integers(1, r))))
        if not any(demand):
            demand = (1,)
        got = view.suitable(constraints, demand)
        assert got.tolist() == brute(view.free.tolist(), workers, constraints, demand)
        assert bitvec.int_indices(view.suitable_bits(constraints, demand)).tolist() == got.tolist()
        assert view.any_suitable(constraints, demand) == bool(got.size)
        among = data.draw(st.sets(st.integers(0, max(n - 1, 0)))) if n else set()
        bits = sum(1 << i for i in among)
        assert view.suitable_among(bits, constraints, demand) == bool(among & set(got.tolist()))
        assert view.covers_unit(demand) == (demand[0] >= 1)
        assert view.is_unit(demand) == (demand[0] == 1 and not any(demand[1:]))
        having = [i for i, w in enumerate(workers) if set(constraints) <= set(w.constraints)]
        need = view.constraint_bits(constraints)  # a worker has them all: its bits cover these
        assert [i for i in range(n) if not need & ~view.worker_constraints[i]] == having
    avail = view.available_bits
    assert {i for i in range(n) if avail >> i & 1} == {i for i in range(n) if view.free[i, 0] >= 1}


def spec(i, constraints=(), cap=(1,)):
    return WorkerSpec(i, 0, cap, constraints)


def test_allocate_release_keep_free_count():
    view = PartitionView([spec(10, (1, 2)), spec(11, (1,)), spec(12, (), (2,))])
    assert view.free_count == 3
    view.allocate(0)
    assert view.free_count == 2 and not view.is_available(0)
    view.allocate(2)
    assert view.free_count == 2  # one slot left on worker 12
    view.allocate(2)
    assert view.free_count == 1
    assert view.suitable().tolist() == [1]
    assert view.suitable((1,)).tolist() == [1]
    assert view.suitable((2,)).size == 0
    view.release(2)
    view.release(0)
    assert view.free_count == 3
    assert view.suitable((1,)).tolist() == [0, 1]
    view.release(2)
    assert view.suitable((), (2,)).tolist() == [2]


def test_over_allocation_and_over_release_raise_and_change_nothing():
    view = PartitionView([spec(0), spec(1, cap=(2,))])
    view.allocate(0)
    with pytest.raises(AssertionError, match="over-allocation of worker 0"):
        view.allocate(0)
    with pytest.raises(AssertionError, match="over-allocation of worker 1"):
        view.allocate(1, (3,))
    assert view.free.tolist() == [[0], [2]] and view.free_count == 1
    with pytest.raises(AssertionError, match="release beyond capacity"):
        view.release(1)
    with pytest.raises(AssertionError, match="not within"):
        view.set_free(0, [2])


def test_multi_resource_allocation():
    view = PartitionView([spec(0, cap=(4, 8)), spec(1, cap=(2, 2))])
    view.allocate(0, (3, 6))
    assert view.free[0].tolist() == [1, 2]
    assert view.suitable((), (2, 2)).tolist() == [1]
    assert view.suitable((), (1,)).tolist() == [0, 1]
    with pytest.raises(AssertionError, match="over-allocation"):
        view.allocate(0, (1, 3))
    assert view.free[0].tolist() == [1, 2]
    view.allocate(1, (2, 0))
    assert view.free_count == 1
    view.release(0, (3, 6))
    view.release(1, (2, 0))
    assert view.free.tolist() == [[4, 8], [2, 2]] and view.free_count == 2


def test_replace_free_rebuilds_availability():
    view = PartitionView([spec(i, cap=(2,)) for i in range(130)])
    free = np.zeros((130, 1), dtype=np.int64)
    free[[3, 64, 129]] = 1
    view.replace_free(free)
    assert view.free_count == 3
    assert view.suitable().tolist() == [3, 64, 129]
    view.release(3)
    assert view.free[3, 0] == 2


def test_constraint_counts_ids_and_read_only_arrays():
    view = PartitionView([spec(7, (0, 3, 20)), spec(9, (5,)), spec(8)])
    assert view.constraint_counts.tolist() == [3, 1, 0]
    assert view.worker_ids.tolist() == [7, 9, 8]
    assert view.local_of(8) == 2
    with pytest.raises(KeyError, match="worker 99"):
        view.local_of(99)
    with pytest.raises(ValueError):
        view.constraint_counts[0] = 5
    assert view.suitable((0, 20)).tolist() == [0]
    assert view.suitable((20, 0)).tolist() == [0]


def test_empty_partition():
    view = PartitionView([])
    assert view.free_count == 0
    assert view.suitable((3,)).size == 0
    assert not view.any_suitable()


def test_bad_input_is_a_config_error():
    with pytest.raises(ConfigError, match=r"worker 4: constraint id 21 out of range; expected 0..20"):
        PartitionView([spec(4, (21,))])
    with pytest.raises(ConfigError, match=r"capacity \(1, 1\) has 2 entries; expected 1"):
        PartitionView([spec(0), spec(1, cap=(1, 1))])
    with pytest.raises(ConfigError, match="duplicate worker ids"):
        PartitionView([spec(0), spec(0)])
    view = PartitionView([spec(0)])
    with pytest.raises(ConfigError, match=r"task constraint id 25 out of range; expected 0..20"):
        view.suitable((25,))
    with pytest.raises(ConfigError, match=r"task constraint id -1 out of range; expected 0..20"):
        view.constraint_bits((3, -1))
    with pytest.raises(ConfigError, match=r"task demand \(1, 1\) is invalid; expected 1..1"):
        view.suitable((), (1, 1))
    with pytest.raises(ConfigError, match=r"task demand \(0,\) is invalid"):
        view.allocate(0, (0,))


def test_large_cluster_against_brute_force():
    from fedemu.fabric.rand import Stream

    s = Stream(7, "test/large")
    workers = [
        spec(i, tuple(c for c in range(21) if s.random() < 0.3), (1 + s.randrange(2),)) for i in range(3000)
    ]
    view = PartitionView(workers)
    free = [list(w.capacity) for w in workers]  # the model: plain lists, kept beside the view
    for _ in range(4000):
        i = s.randrange(3000)
        if free[i][0] > 0:
            view.allocate(i)
            free[i][0] -= 1
        elif s.random() < 0.3:
            view.release(i)
            free[i][0] += 1
    assert view.free.tolist() == free
    assert view.free_count == sum(f[0] >= 1 for f in free) == brute_free_count(view)
    for _ in range(40):
        cons = tuple(sorted(s.sample(range(21), s.randrange(4))))
        for demand in ((1,), (2,)):
            assert view.suitable(cons, demand).tolist() == brute(free, workers, cons, demand)


def test_clone_is_independent_but_shares_machine_data():
    from fedemu.model import WorkerSpec

    view = PartitionView([WorkerSpec(i, 0, (1,), (i % 3,)) for i in range(70)])
    twin = view.clone()
    twin.allocate(5)
    assert view.is_available(5) and not twin.is_available(5)
    assert view.free_count == 70 and twin.free_count == 69
    assert view.constraint_vectors is twin.constraint_vectors
    assert 5 not in twin.suitable((2,)).tolist() and 5 in view.suitable((2,)).tolist()


def test_update_reports_the_availability_change():
    from fedemu.model import WorkerSpec

    view = PartitionView([WorkerSpec(i, 0, (2,), ()) for i in range(3)])
    assert view.update(1, (1,)) == 0 and view.update(1, (0,)) == -1
    assert view.update(1, (0,)) is None and view.update(1, (2,)) == 1
    assert view.free_count == 3
    wide = PartitionView([WorkerSpec(i, 0, (2, 4), ()) for i in range(2)])
    assert wide.update(0, (2, 4)) is None and wide.update(0, (0, 4)) == -1 and wide.update(0, (0, 4)) is None
