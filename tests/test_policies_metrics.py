"""Balance metrics: Qin's imbalance Im(t) (Guan and Ababei, Eq. 1) and TEBAS's utilization variance (Liu et al.,
Eqs. 10-12), checked against a plain-Python recount of random placements; and job completion times."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.model import US_PER_S, Job, Recorder
from fedemu.tools.results import metrics
from fedemu.tools.run.runner import execute


def _recorder(capacities, runs, demand=(1,)):
    """Machines ``capacities`` (id -> vector); ``runs``: (worker, start_us, duration_us) of one job's tasks."""
    rec = Recorder(total_units=sum(c[0] for c in capacities.values()), machines=dict(capacities))
    rec.job_arrived(Job(0, 0, tuple(d for _, _, d in runs), demand=demand))
    for i, (w, start, d) in enumerate(runs):
        rec.task_started(0, i, start, w, demand[0])
        rec.task_finished(0, i, start + d, demand[0])
    return rec


def test_one_busy_machine_of_two():
    rec = _recorder({0: (2,), 1: (4,)}, [(0, 0, 10 * US_PER_S)])
    times, im, var = metrics.balance_series(rec)
    assert times.tolist() == list(range(10))
    assert np.allclose(im, 0.25)  # loads 0.5 and 0: max 0.5 - mean 0.25
    assert np.allclose(var, 0.0625)  # variance of (0.5, 0)
    stats = metrics.balance_stats(rec)
    assert np.isclose(stats["imbalance_mean"], 0.25) and np.isclose(stats["utilization_variance_mean"], 0.0625)


def test_two_resources_average_their_variances_and_load_takes_the_most_used():
    rec = _recorder({0: (4, 8), 1: (4, 8)}, [(0, 0, 5 * US_PER_S)], demand=(1, 4))
    _, im, var = metrics.balance_series(rec)
    # machine 0 uses 1/4 cpu and 4/8 mem: load 0.5; machine 1 idle
    assert np.allclose(im, 0.25)
    assert np.allclose(var, 0.5 * np.var([0.25, 0]) + 0.5 * np.var([0.5, 0]))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 20), st.integers(1, 8)), min_size=1, max_size=12))
def test_the_series_matches_a_recount_at_every_sample(tasks):
    caps = {0: (3,), 1: (5,), 2: (8,)}
    rec = _recorder(caps, [(w, s * US_PER_S, d * US_PER_S) for w, s, d in tasks])
    times, im, var = metrics.balance_series(rec)
    for t, got_im, got_var in zip(times, im, var):
        share = [sum(1 for w2, s, d in tasks if w2 == w and s <= t < s + d) / caps[w][0] for w in caps]
        assert np.isclose(got_im, max(share) - np.mean(share))
        assert np.isclose(got_var, np.var(share))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 20), st.integers(1, 8), st.booleans()), min_size=1,
                max_size=12))
def test_the_shared_tables_give_every_metric_bit_for_bit(tasks):
    """``metrics.Tables`` (the columns read once for all of a run's results) changes no figure: each metric
    equals the one computed from the recorder alone, on runs with tasks still running at the end."""
    caps = {0: (3,), 1: (5,), 2: (8,)}
    rec = Recorder(total_units=16, machines=dict(caps))
    rec.job_arrived(Job(0, 0, tuple(d * US_PER_S for _, _, d, _ in tasks)))
    for i, (w, s, d, ends) in enumerate(tasks):
        rec.task_started(0, i, s * US_PER_S, w, 1)
        if ends:
            rec.task_finished(0, i, (s + d) * US_PER_S, 1)
    tables = metrics.Tables(rec)
    assert metrics.time_window_us(rec, tables) == metrics.time_window_us(rec)
    assert metrics.mean_utilization(rec, tables=tables) == metrics.mean_utilization(rec)
    for a, b in zip(metrics.utilization_series(rec, tables=tables), metrics.utilization_series(rec)):
        assert np.array_equal(a, b)
    for a, b in zip(metrics.balance_series(rec, tables=tables), metrics.balance_series(rec)):
        assert np.array_equal(a, b)
    assert metrics.balance_stats(rec, tables=tables) == metrics.balance_stats(rec)


def test_a_run_reports_balance_and_completion_times():
    summary = execute("default", overrides={"jobs": 30, "machine_types": "4@1:1,8@2:1", "alpha": "0.5",
                                            "policy": "d-choices"}).summary
    assert summary["imbalance_mean"] is not None and 0 <= summary["imbalance_mean"] <= 1
    assert summary["imbalance_max"] >= summary["imbalance_mean"]
    assert 0 <= summary["utilization_variance_mean"] <= 0.25
    assert summary["jrt_s"]["count"] == summary["jobs_completed"]


def test_chunks_of_samples_give_the_same_series(monkeypatch):
    """Held in chunks of 3 samples (the memory bound), the series equals the one computed at once."""
    rec = _recorder({0: (2,), 1: (4,), 2: (3,)}, [(0, 0, 7 * US_PER_S), (1, 2 * US_PER_S, 9 * US_PER_S),
                                                   (0, 3 * US_PER_S, 2 * US_PER_S), (2, 5 * US_PER_S, 4 * US_PER_S)])
    whole = metrics.balance_series(rec)
    monkeypatch.setattr(metrics, "MAX_BALANCE_CELLS", 9)
    chunked = metrics.balance_series(rec)
    assert len(whole[0]) == 11
    for a, b in zip(whole, chunked):
        assert np.array_equal(a, b)


def test_balance_statistics_look_at_the_arrival_period_not_the_drain():
    """Two equal machines share the work of jobs arriving at 0 s and 4 s evenly; then one long task runs
    alone on machine 0 until 20 s. While jobs arrive the machines are balanced (imbalance 0); the drain's
    lone task would otherwise make the mean imbalance about 0.4."""
    rec = Recorder(total_units=2, machines={0: (1,), 1: (1,)})
    rec.job_arrived(Job(0, 0, (5 * US_PER_S, 5 * US_PER_S)))
    rec.job_arrived(Job(1, 4 * US_PER_S, (16 * US_PER_S,)))
    rec.task_started(0, 0, 0, 0)
    rec.task_started(0, 1, 0, 1)
    rec.task_finished(0, 0, 5 * US_PER_S)
    rec.task_finished(0, 1, 5 * US_PER_S)
    rec.task_started(1, 0, 5 * US_PER_S, 0)
    rec.task_finished(1, 0, 21 * US_PER_S)
    assert metrics.balance_stats(rec)["imbalance_mean"] == 0
    _, whole, _ = metrics.balance_series(rec)
    assert whole.mean() > 0.35
