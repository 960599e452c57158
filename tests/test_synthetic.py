"""Synthetic workloads: syn_N shape, Poisson determinism, load-to-rate conversion, parameter errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import US_PER_S
from fedemu.scenarios.synthetic import poisson_jobs, poisson_rate, syn_jobs


def test_syn_n_is_the_papers_constant_load_workload():
    jobs = list(syn_jobs(250))
    assert len(jobs) == 2000
    assert [j.job_id for j in jobs[:3]] == [0, 1, 2]
    assert [j.arrival_us for j in jobs[:3]] == [0, US_PER_S, 2 * US_PER_S]
    assert jobs[-1].arrival_us == 1999 * US_PER_S
    assert all(j.durations_us == (US_PER_S,) * 250 for j in jobs)
    assert all(j.constraints == ((),) * 250 for j in jobs)


def test_syn_rounds_each_arrival_without_drift():
    jobs = list(syn_jobs(1, jobs=301, task_s=0.25, interval_s=0.1))
    assert jobs[300].arrival_us == 30_000_000
    assert jobs[3].arrival_us == 300_000
    assert jobs[0].durations_us == (250_000,)


def _take(seed: int, name: str = "load", **kw):
    args = dict(jobs=200, fanout=4, task_s=0.5, rate=10.0)
    args.update(kw)
    return list(poisson_jobs(Stream(seed, name), **args))


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=0, max_value=2**63), st.sampled_from(["exp", "const"]))
def test_poisson_same_seed_same_jobs_other_seed_differs(seed, dist):
    first = _take(seed, task_dist=dist)
    assert first == _take(seed, task_dist=dist)
    assert first != _take(seed + 1, task_dist=dist)
    assert [j.job_id for j in first] == list(range(200))
    assert all(a.arrival_us <= b.arrival_us for a, b in zip(first, first[1:]))
    assert all(j.num_tasks == 4 and min(j.durations_us) >= 1 for j in first)
    if dist == "const":
        assert all(j.durations_us == (500_000,) * 4 for j in first)


def test_task_dist_does_not_change_arrivals():
    exp = _take(3, task_dist="exp")
    const = _take(3, task_dist="const")
    assert [j.arrival_us for j in exp] == [j.arrival_us for j in const]


def test_load_sets_the_mean_arrival_rate_and_task_mean():
    # rho = lambda * F * Te / W  =>  lambda = 0.8 * 100 / (10 * 0.5) = 16 jobs/s
    assert poisson_rate(fanout=10, task_s=0.5, load=0.8, workers=100) == pytest.approx(16.0)
    jobs = list(poisson_jobs(Stream(11, "w"), jobs=4000, fanout=10, task_s=0.5, load=0.8, workers=100))
    rate = (len(jobs) - 1) / ((jobs[-1].arrival_us - jobs[0].arrival_us) / 1e6)
    assert rate == pytest.approx(16.0, rel=0.08)
    tasks = [d for j in jobs for d in j.durations_us]
    assert sum(tasks) / len(tasks) / 1e6 == pytest.approx(0.5, rel=0.05)
    gaps = [b.arrival_us - a.arrival_us for a, b in zip(jobs, jobs[1:])]
    mean = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
    assert cv == pytest.approx(1.0, abs=0.1)  # exponential gaps


def test_load_is_converted_to_the_equivalent_rate():
    # load 0.8 on 20 workers with 4 tasks of 0.5 s: lambda = 0.8 * 20 / (4 * 0.5) = 8 jobs/s
    assert _take(5, rate=8.0) == _take(5, rate=None, load=0.8, workers=20)
    assert _take(5, rate=8.0, workers=20) == _take(5, rate=8.0)  # workers is unused with rate


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"n_tasks": 0}, "n_tasks is 0, expected an integer >= 1"),
        ({"n_tasks": 5, "jobs": 0}, "jobs is 0, expected an integer >= 1"),
        ({"n_tasks": 5, "task_s": 0}, "task_s is 0, expected a finite number > 0"),
        (
            {"n_tasks": 5, "task_s": 1e-9},
            "task_s is 1e-09, which rounds to 0 us; expected at least 0.000001 s",
        ),
        ({"n_tasks": 5, "interval_s": -1.0}, "interval_s is -1.0, expected a finite number >= 0"),
        ({"n_tasks": 5, "interval_s": math.nan}, "interval_s is nan, expected a finite number >= 0"),
    ],
)
def test_syn_parameter_errors(kw, message):
    n = kw.pop("n_tasks")
    with pytest.raises(ConfigError) as info:
        syn_jobs(n, **kw)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"rate": None}, "give exactly one of rate (jobs/s) or load (with workers); got neither"),
        (
            {"load": 0.5},
            "give exactly one of rate (jobs/s) or load (with workers); got both rate=10.0 and load=0.5",
        ),
        ({"rate": None, "load": 0.5}, "load=0.5 needs workers (the number of worker slots), got none"),
        ({"rate": None, "load": 0.0, "workers": 5}, "load is 0.0, expected a finite number > 0"),
        ({"rate": -2.0}, "rate is -2.0, expected a finite number > 0"),
        ({"rate": None, "load": 0.5, "workers": 0}, "workers is 0, expected an integer >= 1"),
        ({"fanout": 0}, "fanout is 0, expected an integer >= 1"),
        ({"jobs": 1.5}, "jobs is 1.5, expected an integer >= 1"),
        ({"task_s": "1"}, "task_s is '1', expected a finite number > 0"),
        ({"task_dist": "pareto"}, "unknown task_dist 'pareto'; known: const, exp"),
    ],
)
def test_poisson_parameter_errors(kw, message):
    args = dict(jobs=10, fanout=2, task_s=1.0, rate=10.0)
    args.update(kw)
    with pytest.raises(ConfigError) as info:
        poisson_jobs(Stream(1, "p"), **args)
    assert str(info.value) == message


def test_poisson_needs_a_stream():
    with pytest.raises(ConfigError, match="stream is int, expected a fabric.rand.Stream"):
        poisson_jobs(42, jobs=1, fanout=1, task_s=1.0, rate=1.0)
