"""The workload figures `fedemu reproduce` derives from a run's files (tools/reproduce/repro_derived.py: Table 1's
statistics, section 3's model), on a hand-made run: exact values worked by hand."""

from __future__ import annotations

import math

import pytest

from fedemu.tools.reproduce import repro_derived as rd

JOBS = """job_id,arrival_s,num_tasks,ideal_jrt_s,completion_s,jrt_s,delay_s,short
0,0.0,2,3.0,3.002,3.002,0.002,1
1,1.0,1,0.5,1.506,0.506,0.006,1
2,4.0,3,5.0,9.002,5.002,0.002,0
"""
TASK_HEADER = "job_id,index,arrival_s,start_s,end_s,worker,allocation_s\n"
# (job, index, arrival, start, run time, worker): job 0 runs 1 s and 3 s, job 1 0.5 s, job 2 2, 2 and 5 s
TASKS = ((0, 0, 0.0, 0.0015, 1.0, 0), (0, 1, 0.0, 0.0015, 3.0, 1), (1, 0, 1.0, 1.0015, 0.5, 0),
         (2, 0, 4.0, 4.0015, 2.0, 0), (2, 1, 4.0, 4.0015, 2.0, 1), (2, 2, 4.0, 4.0015, 5.0, 1))


@pytest.fixture
def run(tmp_path):
    (tmp_path / "jobs.csv").write_text(JOBS)
    (tmp_path / "tasks.csv").write_text(TASK_HEADER + "".join(
        f"{j},{i},{a},{s},{s + d},{w},0.0015\n" for j, i, a, s, d, w in TASKS))
    return tmp_path


def summary(**params) -> dict:
    return {"total_units": 2, "cluster": {"workers": 2, "workers_per_cluster": 2},
            "params": {"workload": "trace", "masters": 0, **params}}


def test_the_workload_as_it_ran(run):
    got = rd.trace_stats(run, summary())
    assert (got["fanout_max"], got["fanout_min"], got["fanout_mean"]) == (3, 1, 2.0)
    assert (got["task_max_s"], got["task_min_s"]) == pytest.approx((5.0, 0.5))
    assert got["task_mean_s"] == pytest.approx(13.5 / 6)  # over tasks
    assert got["job_task_mean_s"] == pytest.approx((2.0 + 0.5 + 3.0) / 3)  # over jobs, of each job's mean
    assert got["short_work_share"] == pytest.approx(4.5 / 13.5)  # jobs 0 and 1 are short
    assert got["arrival_load"] == pytest.approx(13.5 / (2 * 4.0))  # run time over 2 slots and 4 s of arrivals


def test_the_queueing_part_and_the_zero_queue_share(run):
    got = rd.derived(run, summary())
    assert got["queue_mean_s"] == pytest.approx((0.002 + 0.006 + 0.002) / 3 - 0.002)
    assert got["zero_queue_share"] == pytest.approx(2 / 3)


def test_the_model_is_evaluated_at_the_load_the_arrivals_offered():
    s = summary(workload="poisson", task_dist="exp", load=0.4, task_s=0.1)
    got = rd.group_model(s, 0.5)  # groups of 2 workers at rho = 0.5: P_task(0) = 2/3, Tq = Te/3
    assert got["model_job_zero_queue"] == pytest.approx(2 / 3 * math.exp(-1 / 3))
    assert got["model_wait_s"] == pytest.approx(0.1 / 3)
    # at the nominal 0.4: a = 0.8 Erlang, C = (0.32/0.6) / (1.8 + 0.32/0.6) = 8/35, Tq/Te = C / 1.2
    assert got["model_job_zero_queue_nominal"] == pytest.approx(27 / 35 * math.exp(-8 / 35 / 1.2))


def test_the_model_needs_a_poisson_run_of_exponential_tasks_below_saturation():
    assert set(rd.group_model(summary(), 0.5).values()) == {None}
    assert set(rd.group_model(summary(workload="poisson", task_dist="const", load=0.5, task_s=1), 0.5).values()) \
        == {None}
    over = rd.group_model(summary(workload="poisson", task_dist="exp", load=0.5, task_s=1), 1.2)
    assert over["model_job_zero_queue"] is None and over["model_job_zero_queue_nominal"] is not None


def test_a_group_is_a_cluster_or_an_equal_slice():
    assert rd.group_size(summary()) == 2
    assert rd.group_size({"cluster": {"workers": 3000, "workers_per_cluster": 100}, "params": {"masters": 60}}) == 50
    assert rd.group_size({"cluster": {}, "params": {}}) is None


def test_the_steady_state_leaves_out_the_first_fifth_of_the_arrivals(run):
    # arrivals at 0, 1 and 4 s: the first fifth ends at 0.8 s, so jobs 1 and 2 count (delays 6 and 2 ms)
    got = rd.steady_state(run, summary())
    assert got["zero_queue_steady"] == pytest.approx(1 / 2)
    assert got["queue_mean_steady_s"] == pytest.approx((0.006 + 0.002) / 2 - 0.002)  # the floor is the whole run's
    assert got["arrival_load_steady"] == pytest.approx((0.5 + 9.0) / (2 * 3.0))  # their tasks over 3 s of arrivals
