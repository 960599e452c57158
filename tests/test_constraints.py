"""Constraint table validation, constrained machines and tasks, and the feasibility index."""

from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import Cluster, ClusterSpec, Job, WorkerSpec
from fedemu.scenarios.constraints import (
    DEFAULT_TABLE,
    NUM_CONSTRAINTS,
    ConstraintIndex,
    ConstraintTable,
    assign_task_constraints,
    build_cluster,
)
from fedemu.scenarios.synthetic import syn_jobs

TABLE = ConstraintTable.load()


def _raw() -> dict:
    return json.loads(DEFAULT_TABLE.read_text())


# ------------------------------------------------------------------------------------- default table


def test_default_table_design():
    assert TABLE.profiles == ("A", "B", "C")
    assert len(TABLE.task_probability) == NUM_CONSTRAINTS
    assert "stand-in" in TABLE.description.lower()
    assert TABLE.max_task_constraints == 3
    assert 0.45 <= TABLE.constrained_share <= 0.55
    # every constraint is provided somewhere
    assert all(max(TABLE.fractions(p)[c] for p in TABLE.profiles) > 0 for c in range(NUM_CONSTRAINTS))
    # contention: some constraints are requested at least as often as 3% of tasks yet provided by < 10%
    # of machines on average, so their demand/supply ratio is far above the data center's average
    mean_supply = [sum(TABLE.fractions(p)[c] for p in TABLE.profiles) / 3 for c in range(NUM_CONSTRAINTS)]
    contended = [
        c for c in range(NUM_CONSTRAINTS) if TABLE.task_probability[c] >= 0.03 and mean_supply[c] < 0.1
    ]
    assert len(contended) >= 3
    assert TABLE.source == str(DEFAULT_TABLE)


def test_load_from_a_path_equals_default(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(DEFAULT_TABLE.read_text())
    table = ConstraintTable.load(path)
    assert table.task_probability == TABLE.task_probability
    assert table.machine_fraction == TABLE.machine_fraction


# -------------------------------------------------------------------------------- table validation


def _edit_error(tmp_path, edit) -> str:
    data = _raw()
    edit(data)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        ConstraintTable.load(path)
    return str(info.value).replace(str(path), "T")


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def edit(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return edit


def _delete(*keys):
    def edit(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            _set("constraints", 7, "task_probability", 1.4),
            "T: constraint 7: task_probability 1.4 is not in [0, 1]",
        ),
        (
            _set("constraints", 2, "task_probability", "x"),
            "T: constraint 2: task_probability 'x' is not a number in [0, 1]",
        ),
        (
            _set("constraints", 2, "task_probability", True),
            "T: constraint 2: task_probability True is not a number in [0, 1]",
        ),
        (
            _set("constraints", 4, "machine_fraction", "B", -0.1),
            "T: constraint 4: machine_fraction['B'] -0.1 is not in [0, 1]",
        ),
        (
            _set("constraints", 4, "machine_fraction", "D", 0.1),
            "T: constraint 4: machine_fraction has unknown profile 'D'; known: A, B, C",
        ),
        (
            _delete("constraints", 4, "machine_fraction", "C"),
            "T: constraint 4: machine_fraction is missing profile 'C'",
        ),
        (
            _set("constraints", 4, "machine_fraction", [0.1, 0.2, 0.3]),
            "T: constraint 4: machine_fraction is [0.1, 0.2, 0.3], expected an object with profiles A, B, C",
        ),
        (
            _set("constraints", 20, "machine_fraction", {"A": 0, "B": 0.0, "C": 0}),
            "T: constraint 20: no profile provides it (every machine_fraction is 0); "
            "tasks requesting it could never run",
        ),
        (
            _set("constraints", 9, "prob", 0.1),
            "T: constraint 9: unknown key 'prob'; known: id, label, machine_fraction, task_probability",
        ),
        (_delete("constraints", 9, "task_probability"), "T: constraint 9: missing key 'task_probability'"),
        (_set("constraints", 9, "label", 5), "T: constraint 9: label is 5, expected a string"),
        (_set("constraints", 3, "id", 5), "T: constraints[3] has id 5, expected 3 (ids 0-20 in order)"),
        (_set("constraints", 3, "id", "3"), "T: constraints[3] has id '3', expected 3 (ids 0-20 in order)"),
        (_delete("constraints", 3, "id"), "T: constraints[3]: missing key 'id'"),
        (_set("constraints", 3, 17), "T: constraints[3] is 17, expected an object"),
        (_delete("constraints", 20), "T: constraints has 20 entries, expected 21 (ids 0-20)"),
        (_set("constraints", {}), "T: constraints is dict, expected a list of 21 objects"),
        (_set("max_task_constraints", 0), "T: max_task_constraints is 0, expected an integer in 1..21"),
        (_set("max_task_constraints", 2.5), "T: max_task_constraints is 2.5, expected an integer in 1..21"),
        (
            _set("extra", 1),
            "T: unknown key 'extra'; known: constraints, description, max_task_constraints, profiles, task_model",
        ),
        (_delete("description"), "T: missing key 'description'"),
        (_set("description", None), "T: description is None, expected a string"),
        (
            _set("profiles", ["A", "B", "C"]),
            "T: profiles is ['A', 'B', 'C'], expected an object of profile name -> description",
        ),
        (_set("profiles", "D", "extra"), "T: constraint 0: machine_fraction is missing profile 'D'"),
        (_set("profiles", "A", 3), "T: profile 'A' has description 3, expected a string"),
    ],
)
def test_table_validation_errors_are_pinned(tmp_path, edit, message):
    assert _edit_error(tmp_path, edit) == message


def test_table_file_errors(tmp_path):
    missing = tmp_path / "none.json"
    with pytest.raises(ConfigError) as info:
        ConstraintTable.load(missing)
    assert str(info.value) == f"{missing}: no such file; expected a constraint table JSON file"
    bad = tmp_path / "bad.json"
    bad.write_text('{"description": "x",\n  "profiles": }')
    with pytest.raises(ConfigError) as info:
        ConstraintTable.load(bad)
    assert str(info.value) == f"{bad}: not valid JSON: Expecting value (line 2, column 15)"
    dup = tmp_path / "dup.json"
    dup.write_text('{"description": "x", "description": "y"}')
    with pytest.raises(ConfigError) as info:
        ConstraintTable.load(dup)
    assert str(info.value) == f"{dup}: duplicate key 'description'"
    with pytest.raises(ConfigError) as info:
        ConstraintTable.from_mapping([1, 2], source="S")
    assert str(info.value) == "S: the table is a list, expected a JSON object"


def test_custom_profiles_are_allowed():
    data = _raw()
    data["profiles"] = {"X": "only one"}
    for row in data["constraints"]:
        row["machine_fraction"] = {"X": 0.5}
    table = ConstraintTable.from_mapping(data)
    assert table.profiles == ("X",)
    assert table.fractions("X") == (0.5,) * NUM_CONSTRAINTS
    with pytest.raises(ConfigError, match=r"^unknown profile 'A'; known: X$"):
        table.fractions("A")


# ------------------------------------------------------------------------------------------ machines


def test_build_cluster_shape_and_ids():
    cluster = build_cluster(clusters=4, workers_per_cluster=5, table=TABLE, stream=Stream(1, "m"))
    assert [c.profile for c in cluster.clusters] == ["A", "B", "C", "A"]
    assert [w.worker_id for w in cluster.workers()] == list(range(20))
    assert [w.cluster for w in cluster.workers()] == [i // 5 for i in range(20)]
    assert all(w.capacity == (1,) for w in cluster.workers())
    assert cluster.resources == ("slots",)
    for w in cluster.workers():
        assert list(w.constraints) == sorted(set(w.constraints))
        assert all(0 <= c < NUM_CONSTRAINTS for c in w.constraints)


def test_build_cluster_is_deterministic_and_clusters_are_independent():
    a = build_cluster(clusters=3, workers_per_cluster=50, table=TABLE, stream=Stream(9, "m"))
    assert a == build_cluster(clusters=3, workers_per_cluster=50, table=TABLE, stream=Stream(9, "m"))
    assert a != build_cluster(clusters=3, workers_per_cluster=50, table=TABLE, stream=Stream(10, "m"))
    more = build_cluster(clusters=5, workers_per_cluster=50, table=TABLE, stream=Stream(9, "m"))
    assert more.clusters[:3] == a.clusters


def _machines_drawn_one_by_one(clusters, per_cluster, table, stream):
    """The model: each worker of cluster i, in turn, draws once per constraint its profile gives to some
    machines and not all (in constraint order) from ``cluster-{i}``, and has it when the draw is below
    the fraction; a constraint of fraction 1 it always has."""
    out = []
    for i in range(clusters):
        fractions = table.fractions(table.profiles[i % len(table.profiles)])
        draws = stream.child(f"cluster-{i}")
        for _ in range(per_cluster):
            out.append(tuple(c for c, f in enumerate(fractions) if f >= 1.0 or (0.0 < f < 1.0 and draws.random() < f)))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), clusters=st.integers(1, 5), per_cluster=st.integers(1, 60),
       scarcity=st.sampled_from([0.05, 0.3, 1.0, 4.0]))
def test_build_cluster_draws_as_a_draw_per_constraint_would(seed, clusters, per_cluster, scarcity):
    """The machines' constraints, drawn a cluster at a time, are those of a draw per worker and constraint
    (a scarcity under 1 makes some fractions 1: those constraints are had without a draw)."""
    table = TABLE.with_scarcity(scarcity)
    cluster = build_cluster(clusters=clusters, workers_per_cluster=per_cluster, table=table, stream=Stream(seed, "m"))
    got = [w.constraints for w in cluster.workers()]
    assert got == _machines_drawn_one_by_one(clusters, per_cluster, table, Stream(seed, "m"))


def test_build_cluster_explicit_profiles_and_capacity():
    cluster = build_cluster(
        clusters=2,
        workers_per_cluster=3,
        table=TABLE,
        stream=Stream(1, "m"),
        profiles=["C", "C"],
        capacity=(4, 8),
        resources=("cpu", "mem"),
    )
    assert [c.profile for c in cluster.clusters] == ["C", "C"]
    assert cluster.resources == ("cpu", "mem")
    assert all(w.capacity == (4, 8) for w in cluster.workers())
    # constraint 20 is provided only by profile A
    assert all(20 not in w.constraints for w in cluster.workers())


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"clusters": 0}, "clusters is 0, expected an integer >= 1"),
        ({"workers_per_cluster": -1}, "workers_per_cluster is -1, expected an integer >= 1"),
        ({"profiles": ["A"]}, "profiles has 1 entries, expected one per cluster (2)"),
        ({"profiles": ["A", "Z"]}, "unknown profile 'Z'; known: A, B, C"),
        ({"profiles": "AB"}, "profiles is 'AB', expected a sequence of 2 profile names"),
        ({"capacity": (0,)}, "capacity is (0,), expected a non-empty tuple of integers >= 1"),
        ({"capacity": ()}, "capacity is (), expected a non-empty tuple of integers >= 1"),
        ({"capacity": (1, 2)}, "capacity (1, 2) has 2 entries; pass resources=(...) naming each"),
        (
            {"capacity": (1, 2), "resources": ("cpu",)},
            "resources is ('cpu',), expected 2 non-empty names, one per capacity entry",
        ),
        ({"table": {}}, "table is dict, expected a ConstraintTable"),
        ({"stream": 3}, "stream is int, expected a fabric.rand.Stream"),
    ],
)
def test_build_cluster_errors(kw, message):
    args = dict(clusters=2, workers_per_cluster=3, table=TABLE, stream=Stream(1, "m"))
    args.update(kw)
    with pytest.raises(ConfigError) as info:
        build_cluster(**args)
    assert str(info.value) == message


@settings(max_examples=10, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_machines_follow_their_profile_fractions(seed):
    n = 600
    cluster = build_cluster(clusters=3, workers_per_cluster=n, table=TABLE, stream=Stream(seed, "machines"))
    for spec in cluster.clusters:
        fractions = TABLE.fractions(spec.profile)
        for c, f in enumerate(fractions):
            share = sum(c in w.constraints for w in spec.workers) / n
            if f in (0.0, 1.0):
                assert share == f
            else:
                assert abs(share - f) <= 5 * math.sqrt(f * (1 - f) / n) + 1e-9, (spec.profile, c, f, share)


# --------------------------------------------------------------------------------------------- tasks


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=0, max_value=2**63), st.integers(min_value=1, max_value=60))
def test_task_constraints_properties(seed, fanout):
    jobs = list(syn_jobs(fanout, jobs=max(1, 12_000 // fanout)))
    out = list(assign_task_constraints(jobs, TABLE, Stream(seed, "tasks")))
    assert [(j.job_id, j.arrival_us, j.durations_us) for j in out] == [
        (j.job_id, j.arrival_us, j.durations_us) for j in jobs
    ]
    tasks = [c for j in out for c in j.constraints]
    assert all(len(j.constraints) == j.num_tasks for j in out)
    for c in tasks:
        assert list(c) == sorted(set(c))
        assert len(c) <= TABLE.max_task_constraints
        assert all(0 <= x < NUM_CONSTRAINTS for x in c)
    share = sum(1 for c in tasks if c) / len(tasks)
    assert share == pytest.approx(0.5, abs=0.04)
    constrained = [c for c in tasks if c]
    assert sum(1 for c in constrained if len(c) <= 2) / len(constrained) > 0.85


def _assigned_a_draw_at_a_time(jobs, table, stream):
    """The assignment as written before its uniforms were drawn in batches: one ``stream.random()`` a gap."""
    import heapq

    def gap(log_q):
        return 0 if log_q == -math.inf else int(math.log(1.0 - stream.random()) / log_q)

    cap = stream.child("cap")
    log_q = [math.log1p(-p) if p < 1.0 else -math.inf for p in table.task_probability]
    heap = [(gap(log_q[c]), c) for c, p in enumerate(table.task_probability) if p > 0.0]
    heapq.heapify(heap)
    first, out = 0, []
    for job in jobs:
        per_task = [()] * job.num_tasks
        while heap and heap[0][0] < first + job.num_tasks:
            t, chosen = heap[0][0], []
            while heap and heap[0][0] == t:
                c = heap[0][1]
                chosen.append(c)
                heapq.heapreplace(heap, (t + 1 + gap(log_q[c]), c))
            if len(chosen) > table.max_task_constraints:
                chosen = sorted(cap.sample(chosen, table.max_task_constraints))
            per_task[t - first] = tuple(chosen)
        out.append(per_task)
        first += job.num_tasks
    return out


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=0, max_value=2**64 - 1), st.integers(min_value=1, max_value=80),
       st.sampled_from([None, 1.0, 0.5]))
def test_task_constraints_drawn_in_batches_are_those_drawn_one_at_a_time(seed, fanout, every):
    """Batches of ``Stream.randoms`` across job boundaries (and tables with a certain constraint, which draws
    no gap) give the assignment a draw per gap gives."""
    table = TABLE
    if every is not None:
        data = _raw()
        data["max_task_constraints"] = 2
        data["constraints"][4]["task_probability"] = every
        table = ConstraintTable.from_mapping(data)
    jobs = list(syn_jobs(fanout, jobs=max(1, 3_000 // fanout)))
    out = [list(j.constraints) for j in assign_task_constraints(jobs, table, Stream(seed, "tasks"))]
    assert out == _assigned_a_draw_at_a_time(jobs, table, Stream(seed, "tasks"))


def test_per_constraint_request_rates_match_the_table():
    jobs = syn_jobs(100, jobs=1000)
    tasks = [c for j in assign_task_constraints(jobs, TABLE, Stream(5, "tasks")) for c in j.constraints]
    n = len(tasks)
    for c, p in enumerate(TABLE.task_probability):
        share = sum(c in t for t in tasks) / n
        assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-9, (c, p, share)


def test_task_constraints_are_deterministic_and_streaming():
    def run(seed):
        return list(assign_task_constraints(syn_jobs(30, jobs=100), TABLE, Stream(seed, "t")))

    assert run(1) == run(1)
    assert run(1) != run(2)

    def endless():
        i = 0
        while True:
            yield Job(job_id=i, arrival_us=i, durations_us=(1, 1))
            i += 1

    it = assign_task_constraints(endless(), TABLE, Stream(1, "t"))
    assert [next(it).job_id for _ in range(3)] == [0, 1, 2]


def test_cap_and_extreme_probabilities():
    data = _raw()
    data["max_task_constraints"] = 2
    for row in data["constraints"]:
        row["task_probability"] = 0.0
    for c in (3, 5, 9, 14):
        data["constraints"][c]["task_probability"] = 1.0
    table = ConstraintTable.from_mapping(data)
    out = list(assign_task_constraints(syn_jobs(50, jobs=20), table, Stream(1, "t")))
    tasks = [c for j in out for c in j.constraints]
    assert all(len(c) == 2 and set(c) <= {3, 5, 9, 14} for c in tasks)
    assert len(set(tasks)) > 1  # the kept subset is random
    for row in data["constraints"]:
        row["task_probability"] = 0.0
    none = ConstraintTable.from_mapping(data)
    out = assign_task_constraints(syn_jobs(5, jobs=5), none, Stream(1, "t"))
    assert all(c == () for j in out for c in j.constraints)


def test_assign_rejects_non_jobs():
    with pytest.raises(ConfigError, match="assign_task_constraints got a str, expected a model.Job"):
        list(assign_task_constraints(["job"], TABLE, Stream(1, "t")))
    with pytest.raises(ConfigError, match="table is NoneType, expected a ConstraintTable"):
        assign_task_constraints([], None, Stream(1, "t"))


# --------------------------------------------------------------------------------------- feasibility


def _tiny() -> Cluster:
    def w(i, cl, cons):
        return WorkerSpec(worker_id=i, cluster=cl, constraints=cons)

    return Cluster(
        clusters=(
            ClusterSpec(index=0, profile="A", workers=(w(0, 0, (1, 2)), w(1, 0, (2,)))),
            ClusterSpec(index=1, profile="B", workers=(w(2, 1, (2, 3)), w(3, 1, ()), w(4, 1, (1, 2, 3)))),
        )
    )


def test_constraint_index_answers():
    index = ConstraintIndex(_tiny())
    assert index.feasible(()) and index.count(()) == 5
    assert index.count((2,)) == 4 and index.workers((2,)) == (0, 1, 2, 4)
    assert index.clusters((1, 2)) == (0, 1)
    assert index.clusters((2, 3)) == (1,) and index.workers((1, 3)) == (4,)
    assert not index.feasible((0,)) and index.clusters((0,)) == () and index.count((0,)) == 0
    assert not index.feasible((1, 2, 3, 20))
    job = Job(job_id=0, arrival_us=0, durations_us=(1, 1, 1), constraints=((2,), (7,), (1, 3)))
    assert index.unschedulable(job) == (1,)
    with pytest.raises(ConfigError, match=r"^constraint id 21 is not in 0\.\.20$"):
        index.feasible((2, 21))


def test_constraint_index_agrees_with_a_scan():
    cluster = build_cluster(clusters=3, workers_per_cluster=40, table=TABLE, stream=Stream(4, "m"))
    index = ConstraintIndex(cluster)
    out = assign_task_constraints(syn_jobs(50, jobs=40), TABLE, Stream(4, "t"))
    for job in out:
        for cons in job.constraints:
            match = [w.worker_id for w in cluster.workers() if set(cons) <= set(w.constraints)]
            assert index.workers(cons) == tuple(match)
            assert index.feasible(cons) == bool(match)
            assert index.clusters(cons) == tuple(sorted({w // 40 for w in match}))


def test_constraint_index_rejects_bad_workers():
    spec = ClusterSpec(index=0, profile="A", workers=(WorkerSpec(0, 0, constraints=(30,)),))
    bad = Cluster(clusters=(spec,))
    with pytest.raises(ConfigError, match=r"^worker 0 provides constraint 30, expected an id in 0\.\.20$"):
        ConstraintIndex(bad)


def test_deepcopy_of_raw_table_is_untouched_by_loading():
    data = _raw()
    before = copy.deepcopy(data)
    ConstraintTable.from_mapping(data)
    assert data == before
