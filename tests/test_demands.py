"""Per-job resource demands and alpha in workloads: the ``demands`` mix (seeded), the ``.tr`` extension
(``demand=`` and ``alpha=`` fields, FILE:LINE errors), and every scheduler honouring per-job demand
vectors on mixed machines (the capacity invariant covers every resource)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.scenarios import default, federation, machines
from fedemu.scenarios.trace import TraceError, count_trace, read_trace
from fedemu.tools.run.params import resolve_scenario
from fedemu.tools.run.runner import execute
from scheduler_helpers import recorder_of

MIXED = {"machine_types": "4x16@1.0:60,8x32@1.5:40", "demands": "1x2:60,2x4:30,4x8:8,16x8:2",
         "alpha": "U(0.2,0.9)", "jobs": 120}


def jobs_of(overrides, seed=1):
    params = resolve_scenario(default, overrides)
    cluster, table = federation.build_cluster(params, seed)
    return list(federation.build_workload(params, seed, 300, table))


def test_the_demands_mix_draws_each_job_a_vector_in_its_proportions_from_the_seed():
    overrides = {"capacity": "8,32", "demands": "1x2:60,2x4:30,4x8:10", "jobs": 2000, "constraints": False}
    jobs = jobs_of(overrides)
    counts = Counter(j.demand for j in jobs)
    assert set(counts) == {(1, 2), (2, 4), (4, 8)}
    assert abs(counts[(1, 2)] / 2000 - 0.6) < 0.05 and abs(counts[(4, 8)] / 2000 - 0.1) < 0.03
    assert [j.demand for j in jobs_of(overrides)] == [j.demand for j in jobs]  # same seed, same draws
    assert [j.demand for j in jobs_of(overrides, seed=2)] != [j.demand for j in jobs]


@pytest.mark.parametrize("text, why", [("1x2:60,2:40", "same number of resources"), ("1x0:1", "from 1 to"),
                                       ("1x2:-1", "finite number > 0"), ("ax2", "not whole numbers"),
                                       ("1x2:z", "not a number")])
def test_a_bad_demands_mix_is_one_line_naming_the_key(text, why):
    with pytest.raises(ConfigError, match=f"parameter 'demands' is .*{why}"):
        machines.parse_demands(text)


def test_demands_and_demand_together_or_of_another_length_than_the_machines_are_refused():
    with pytest.raises(ConfigError, match="'demand' .* and 'demands' both set"):
        execute("default", overrides={"capacity": "4,16", "demand": "1,2", "demands": "1x2", "jobs": 5})
    with pytest.raises(ConfigError, match="its vectors name 3 resource"):
        execute("default", overrides={"capacity": "4,16", "demands": "1x2x1", "jobs": 5})


@pytest.mark.parametrize("scheduler", ["megha", "centralized", "pigeon", "pigeonc", "sparrow"])
def test_every_scheduler_honours_per_job_demands_on_mixed_machines(scheduler):
    r = execute("default", overrides={**MIXED, "scheduler": scheduler})
    s = r.summary
    assert set(s["invariants"].values()) == {"ok"}, s["invariants"]
    rec = recorder_of(r.fabric)
    too_big = {j.job_id for j in rec.jobs.values() if j.demand == (16, 8)}
    rejected = {job_id for job_id, _ in rec.unschedulable}
    assert too_big and too_big <= rejected  # no machine has 16 cpus: rejected at submission
    ran = [t for t in rec.tasks.values() if t.start_us >= 0]
    assert len({rec.jobs[t.job_id].demand for t in ran}) == 3
    # brute force, every resource: at each start, the worker's running demands fit its capacity
    cap = {w.worker_id: np.array(w.capacity) for w in _cluster(r).workers()}
    for t in ran:
        held = sum(np.array(rec.jobs[u.job_id].demand) for u in ran
                   if u.worker == t.worker and u.start_us <= t.start_us < u.end_us)
        assert (held <= cap[t.worker]).all()


def _cluster(r):
    params = resolve_scenario(default, {**MIXED})
    return federation.build_cluster(params, r.summary["seed"])[0]


# ---- the .tr extension --------------------------------------------------------------------------------
def write(tmp_path, text):
    p = tmp_path / "t.tr"
    p.write_text(text)
    return p


def test_trace_lines_may_give_their_own_demand_and_alpha_and_plain_lines_take_the_runs(tmp_path):
    p = write(tmp_path, "0 2 1 1 1 demand=2x4 alpha=0.5\n0.5 1 2 2\n1 1 1 1 alpha=1\n")
    assert count_trace(p) == (3, 4)
    plain = list(read_trace(p))
    assert [(j.demand, j.alpha) for j in plain] == [((2, 4), 0.5), ((1,), 0.0), ((1,), 1.0)]
    params = resolve_scenario(default, {"workload": "trace", "trace": str(p), "capacity": "4,16",
                                        "demand": "1,1", "alpha": "0.25"})
    filled = list(read_trace(p, fill=federation.job_filler(params, 1)))
    assert [(j.demand, j.alpha) for j in filled] == [((2, 4), 0.5), ((1, 1), 0.25), ((1, 1), 1.0)]


@pytest.mark.parametrize("line, why", [
    ("0 1 1 1 demnd=2x4", r":1: field 5 \('demnd=2x4'\) has unknown key 'demnd'; known: alpha, demand"),
    ("0 1 1 1 demand=2x0", r":1: field 5 \('demand=2x0'\): demand '2x0': each amount"),
    ("0 1 1 1 alpha=1.5", r":1: field 5 \('alpha=1.5'\): alpha is a number from 0 to 1"),
    ("0 1 1 1 alpha=0.5 alpha=0.5", r":1: field 6 \('alpha=0.5'\) gives alpha a second time"),
    ("0 1 alpha=0.5 1 1", r":1: field 3 \('alpha=0.5'\): key=value fields come after the durations"),
])
def test_a_bad_extension_field_is_a_file_line_error(tmp_path, line, why):
    p = write(tmp_path, "0 1 1 1\n" + line.replace(":1:", ":2:") + "\n")
    with pytest.raises(TraceError, match=why.replace(":1:", ":2:")):
        list(read_trace(p))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=1, max_size=4),
       st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_extension_fields_round_trip(tmp_path_factory, demands, alphas):
    lines = [f"{i} 1 1 1 demand={a}x{b} alpha={alpha!r}" for i, ((a, b), alpha) in enumerate(zip(demands, alphas))]
    p = tmp_path_factory.mktemp("tr") / "t.tr"
    p.write_text("\n".join(lines) + "\n")
    got = [(j.demand, j.alpha) for j in read_trace(p)]
    assert got == [((a, b), alpha) for (a, b), alpha in zip(demands, alphas)]
