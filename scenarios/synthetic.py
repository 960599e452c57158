"""Synthetic workloads: the 2023 Megha paper's constant-load syn_N, and Poisson arrivals at a target load.

Times are integer microseconds and every task lasts at least 1 us; random draws come from the caller's
stream, so the same seed always gives the same jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from fedemu.fabric.errors import ConfigError, unknown_name
from fedemu.fabric.rand import Stream
from fedemu.model import Job, positive_int, seconds_to_us

TASK_DISTS = ("const", "exp")


def _number(value, name: str, *, positive: bool) -> float:
    """Return ``value`` as a float if it is finite and > 0 (or >= 0), else raise a ConfigError."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{name} is {value!r}, expected a finite number {bound}")
    return float(value)


def _task_us(task_s, name: str = "task_s") -> int:
    """A validated task duration in whole microseconds (at least 1 us)."""
    seconds = _number(task_s, name, positive=True)
    us = seconds_to_us(seconds)
    if us < 1:
        raise ConfigError(f"{name} is {task_s!r}, which rounds to 0 us; expected at least 0.000001 s")
    return us


def syn_jobs(
    n_tasks: int, *, jobs: int = 2000, task_s: float = 1.0, interval_s: float = 1.0
) -> Iterator[Job]:
    """The paper's syn_N: ``jobs`` jobs of ``n_tasks`` tasks of ``task_s``; job i arrives at i*interval_s."""
    positive_int(n_tasks, "n_tasks")
    positive_int(jobs, "jobs")
    duration = _task_us(task_s)
    interval = _number(interval_s, "interval_s", positive=False)
    return _syn(n_tasks, jobs, duration, interval)


def _syn(n_tasks: int, jobs: int, duration_us: int, interval_s: float) -> Iterator[Job]:
    """The generator behind ``syn_jobs``; each arrival is rounded on its own, so no drift accumulates."""
    durations = (duration_us,) * n_tasks
    for i in range(jobs):
        yield Job(job_id=i, arrival_us=seconds_to_us(i * interval_s), durations_us=durations)


def poisson_rate(*, fanout: int, task_s: float, rate=None, load=None, workers=None) -> float:
    """Job arrival rate (jobs/s): ``rate`` as given, or from load = rate * fanout * task_s / workers."""
    positive_int(fanout, "fanout")
    task_s = _number(task_s, "task_s", positive=True)
    if (rate is None) == (load is None):
        got = "neither" if rate is None else f"both rate={rate!r} and load={load!r}"
        raise ConfigError(f"give exactly one of rate (jobs/s) or load (with workers); got {got}")
    if workers is not None:
        positive_int(workers, "workers")
    if rate is not None:
        return _number(rate, "rate", positive=True)
    rho = _number(load, "load", positive=True)
    if workers is None:
        raise ConfigError(f"load={load!r} needs workers (the number of worker slots), got none")
    return rho * workers / (fanout * task_s)


def poisson_jobs(
    stream: Stream,
    *,
    jobs: int,
    fanout: int,
    task_s: float,
    task_dist: str = "exp",
    rate: float | None = None,
    load: float | None = None,
    workers: int | None = None,
) -> Iterator[Job]:
    """``jobs`` jobs of ``fanout`` tasks with Poisson arrivals, at ``rate`` jobs/s or at target ``load``.

    Task durations are exponential ("exp") or constant ("const") with mean ``task_s``.
    """
    if not isinstance(stream, Stream):
        raise ConfigError(f"stream is {type(stream).__name__}, expected a fabric.rand.Stream")
    positive_int(jobs, "jobs")
    positive_int(fanout, "fanout")
    duration = _task_us(task_s)
    if task_dist not in TASK_DISTS:
        raise unknown_name("task_dist", task_dist, TASK_DISTS)
    lam = poisson_rate(fanout=fanout, task_s=float(task_s), rate=rate, load=load, workers=workers)
    return _poisson(stream, jobs, fanout, float(task_s), duration, task_dist, lam)


def _poisson(stream, jobs, fanout, task_s, const_us, task_dist, lam) -> Iterator[Job]:
    """The generator behind ``poisson_jobs``: arrivals and durations use separate child streams.

    Arrival times accumulate in float seconds and are rounded one by one, so they never drift.
    """
    gaps = stream.child("arrivals")
    sizes = stream.child("durations")
    mean_gap = 1.0 / lam
    t = 0.0
    for i in range(jobs):
        t += gaps.expovariate(mean_gap)
        if task_dist == "const":
            durations = (const_us,) * fanout
        else:
            durations = tuple(max(1, seconds_to_us(sizes.expovariate(task_s))) for _ in range(fanout))
        yield Job(job_id=i, arrival_us=seconds_to_us(t), durations_us=durations)
