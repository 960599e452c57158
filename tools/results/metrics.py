"""Run metrics from a ``Recorder``: job delays (Eq. 1), utilization (Eq. 2), allocation times.

Equation numbers are those of the Megha 2023 paper.

Pure functions of the recorder. Times come out in seconds (float); percentiles use numpy's default
linear interpolation; statistics of an empty set are ``None`` (JSON null, never NaN). A caller that asks for
several metrics of one finished run passes a ``Tables``, so that each column is read from the records once.
"""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from fedemu.fabric.errors import unknown_name
from fedemu.model import US_PER_S as US
from fedemu.model import Recorder

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))
JOB_KINDS = ("all", "short", "long")

_JOB_FIELDS = ("job_id", "arrival_us", "num_tasks", "ideal_jrt_us", "completion_us", "short")
_TASK_FIELDS = (
    "job_id", "index", "arrival_us", "duration_us", "start_us", "end_us", "worker",
    "queue_us", "attempts", "processing_us", "worker_queue_us", "comm_us",
)
# the parts of a task's allocation time (Megha 2022, III, Eq. 2): summary key, task column
ALLOCATION_PARTS = (("framework_queueing", "queue_us"), ("processing", "processing_us"),
                    ("worker_queueing", "worker_queue_us"), ("communication", "comm_us"))


def _columns(records, fields: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Int64 column arrays of ``fields`` over ``records`` (one C-speed pass)."""
    records = list(records)
    get = operator.attrgetter(*fields)
    flat = np.fromiter(
        itertools.chain.from_iterable(map(get, records)), dtype=np.int64, count=len(records) * len(fields)
    ).reshape(len(records), len(fields))
    return {name: flat[:, i] for i, name in enumerate(fields)}


def job_table(recorder: Recorder) -> dict[str, np.ndarray]:
    """Per-job columns sorted by job_id; ``completion_us`` is -1 for unfinished jobs, ``short`` is bool."""
    cols = _columns(recorder.jobs.values(), _JOB_FIELDS)
    order = np.argsort(cols["job_id"], kind="stable")
    out = {k: v[order] for k, v in cols.items()}
    out["short"] = out["short"].astype(bool)
    return out


def task_table(recorder: Recorder, copy: bool = True) -> dict[str, np.ndarray]:
    """Per-task columns sorted by (job_id, index); start/end/worker are -1 when it has not happened.
    ``copy=False``: where the rows are in order already, read-only views of the recorder's columns
    (``TaskTable.columns``; a finished run's results)."""
    cols = recorder.tasks.columns(_TASK_FIELDS, copy=copy)
    job, index = cols["job_id"], cols["index"]
    step = np.diff(job)
    if ((step > 0) | ((step == 0) & (np.diff(index) > 0))).all():  # rows in arrival order are mostly sorted:
        return cols  # no second copy
    order = np.lexsort((index, job))
    return {k: v[order] for k, v in cols.items()}


class Tables:
    """A finished run's columns and what several metrics derive from them, each computed on first use and
    kept: the results of a whole-trace run read the task columns, the run window and the executions more
    than once, and each read is a pass over a hundred thousand records."""

    def __init__(self, recorder: Recorder):
        self.recorder = recorder

    @functools.cached_property
    def jobs(self) -> dict[str, np.ndarray]:
        return job_table(self.recorder)

    @functools.cached_property
    def tasks(self) -> dict[str, np.ndarray]:
        return task_table(self.recorder, copy=False)  # (a finished run's: its recorder no longer grows)

    @functools.cached_property
    def steps(self) -> tuple[np.ndarray, np.ndarray]:
        return utilization_steps(self.recorder)

    @functools.cached_property
    def window(self) -> tuple[int, int] | None:
        ends = self.tasks["end_us"]
        ends = ends[ends >= 0]
        if not ends.size or not self.jobs["job_id"].size:
            return None
        return int(self.jobs["arrival_us"].min()), int(ends.max())

    @functools.cached_property
    def usage(self) -> tuple:
        return _usage_inputs(self.recorder, self.tasks)


def _kind_mask(jobs: dict[str, np.ndarray], kind: str) -> np.ndarray:
    if kind == "all":
        return np.ones(len(jobs["job_id"]), dtype=bool)
    if kind == "short":
        return jobs["short"]
    if kind == "long":
        return ~jobs["short"]
    raise unknown_name("job kind", kind, JOB_KINDS)


def job_delays_s(recorder: Recorder, kind: str = "all", jobs: dict | None = None) -> np.ndarray:
    """Delay in JRT (actual - ideal, Megha 2023 paper Eq. 1) of completed jobs of ``kind`` (all/short/long), in s."""
    jobs = job_table(recorder) if jobs is None else jobs
    done = (jobs["completion_us"] >= 0) & _kind_mask(jobs, kind)
    delay_us = jobs["completion_us"][done] - jobs["arrival_us"][done] - jobs["ideal_jrt_us"][done]
    return delay_us / US


def summarize(values) -> dict:
    """count, p50, p90, p99, p99.9, max and mean of ``values`` (None when empty)."""
    v = np.asarray(values, dtype=np.float64)
    out: dict = {"count": int(v.size)}
    if v.size == 0:
        out.update({name: None for name, _ in PERCENTILES})
        out.update(max=None, mean=None)
        return out
    qs = np.percentile(v, [q for _, q in PERCENTILES])
    out.update({name: float(x) for (name, _), x in zip(PERCENTILES, qs)})
    out.update(max=float(v.max()), mean=float(v.mean()))
    return out


def delay_stats(recorder: Recorder) -> dict[str, dict]:
    """``summarize`` of the job delays (s) for all, short and long jobs."""
    jobs = job_table(recorder)
    return {kind: summarize(job_delays_s(recorder, kind, jobs)) for kind in JOB_KINDS}


def time_window_us(recorder: Recorder, tables: Tables | None = None) -> tuple[int, int] | None:
    """[first job arrival, last task completion] in us, or None before any task has finished."""
    if tables is not None:
        return tables.window
    last = max(recorder.tasks.end_us, default=-1)
    if last < 0 or not recorder.jobs:
        return None
    start = min(j.arrival_us for j in recorder.jobs.values())
    return start, last


def utilization_steps(recorder: Recorder) -> tuple[np.ndarray, np.ndarray]:
    """The busy-units step function: ``busy[k]`` units are in use from ``times[k]`` until ``times[k+1]``.

    Events at equal times are merged; before ``times[0]`` nothing is busy. Times in us.
    """
    if not recorder.busy:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    ev = np.array(recorder.busy, dtype=np.int64).reshape(-1, 2)  # (time, units) per event (a copy: a view would
    # pin the array's size while a live view reads it mid-run)
    times, inverse = np.unique(ev[:, 0], return_inverse=True)
    delta = np.zeros(times.size, dtype=np.int64)
    np.add.at(delta, inverse.reshape(-1), ev[:, 1])
    return times, np.cumsum(delta)


def _area(times: np.ndarray, busy: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The integral of the step function from -inf to each ``t`` (unit-us)."""
    t = np.asarray(t, dtype=np.int64)
    if times.size == 0:
        return np.zeros(t.shape, dtype=np.float64)
    cum = np.concatenate(([0.0], np.cumsum(busy[:-1].astype(np.float64) * np.diff(times))))
    k = np.searchsorted(times, t, side="right") - 1
    kc = np.maximum(k, 0)
    return np.where(k >= 0, cum[kc] + busy[kc] * (t - times[kc]).astype(np.float64), 0.0)


def mean_utilization(recorder: Recorder, steps: tuple | None = None, tables: Tables | None = None) -> float | None:
    """Time-weighted mean of R_consumed/R_total over [first arrival, last completion] (Megha 2023 paper, Eq. 2)."""
    window = time_window_us(recorder, tables)
    steps = tables.steps if steps is None and tables is not None else steps
    if window is None or recorder.total_units <= 0 or window[1] <= window[0]:
        return None
    times, busy = utilization_steps(recorder) if steps is None else steps
    a0, a1 = _area(times, busy, np.array(window))
    return float((a1 - a0) / ((window[1] - window[0]) * recorder.total_units))


def utilization_series(
    recorder: Recorder, bucket_us: int = US, steps: tuple | None = None, tables: Tables | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean utilization per bucket over the run window: (bucket start times in s, utilization).

    Buckets start at the first arrival; the last one may be shorter and is averaged over its length.
    ``steps`` may pass a precomputed ``utilization_steps`` to save a pass.
    """
    if bucket_us <= 0:
        raise ValueError(f"bucket_us must be > 0, got {bucket_us}")
    window = time_window_us(recorder, tables)
    steps = tables.steps if steps is None and tables is not None else steps
    if window is None or recorder.total_units <= 0 or window[1] <= window[0]:
        return np.empty(0), np.empty(0)
    start, end = window
    edges = np.append(np.arange(start, end, bucket_us, dtype=np.int64), end)
    times, busy = utilization_steps(recorder) if steps is None else steps
    util = np.diff(_area(times, busy, edges)) / (np.diff(edges) * float(recorder.total_units))
    return edges[:-1] / US, util


def cdf(values) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF: sorted values and P(X <= value) = (i + 1) / n."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    return x, np.arange(1, x.size + 1, dtype=np.float64) / max(x.size, 1)


def allocation_components(recorder: Recorder, tasks: dict | None = None) -> dict:
    """Allocation time of started tasks (mean, p50, p99) and the mean of each of its parts, in s.

    Each part is summed per task from intervals between the task's own events (``model.TaskRecord``),
    not derived from the total; they add up to it (``parts_sum``: the mean of their sum, equal to the
    mean allocation unless an execution was aborted and the task ran again)."""
    tasks = task_table(recorder) if tasks is None else tasks
    started = tasks["start_us"] >= 0
    alloc = tasks["start_us"][started] - tasks["arrival_us"][started]
    n = int(started.sum())

    def mean(a):
        return float(a.mean()) / US if n else None

    out = {"count": n, "allocation": mean(alloc),
           "allocation_p50": float(np.percentile(alloc, 50)) / US if n else None,
           "allocation_p99": float(np.percentile(alloc, 99)) / US if n else None}
    total = np.zeros(n, dtype=np.int64)
    for name, column in ALLOCATION_PARTS:
        part = tasks[column][started]
        out[name] = mean(part)
        total += part
    out["parts_sum"] = mean(total)
    return out


MAX_BALANCE_SAMPLES = 2000
BALANCE_SAMPLES = 200  # the summary's balance statistics take at least this many samples while jobs arrive
MAX_BALANCE_CELLS = 250_000  # samples x machines x resources held at once (2 MB of int64)


def _executions(recorder: Recorder, tasks: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(job, worker, start, end) of every recorded execution: each started task's own (in the order of
    ``tasks``, the task table, when given; else the recorder's), then the others (``other_runs``: aborted by
    a crash, or a duplicate); end -1 while running."""
    cols = tasks if tasks is not None else recorder.tasks.columns(("job_id", "worker", "start_us", "end_us"))
    started = cols["start_us"] >= 0
    job, worker, start, end = (cols[k][started] for k in ("job_id", "worker", "start_us", "end_us"))
    if recorder.other_runs:
        others = np.array([(r[0], r[2], r[3], r[4]) for r in recorder.other_runs], dtype=np.int64)
        job, worker, start, end = (np.concatenate([a, others[:, i]]) for i, a in enumerate((job, worker, start, end)))
    return job, worker, start, end


def _job_demands(recorder: Recorder, job_ids: np.ndarray, resources: int) -> np.ndarray:
    """The demand vector of the job of each of ``job_ids``, zero-padded to ``resources`` entries (a row
    each); KeyError for a job the recorder does not hold."""
    keys = np.array(sorted(recorder.jobs), dtype=np.int64)
    table = np.zeros((len(keys), resources), dtype=np.int64)
    for k, job_id in enumerate(keys.tolist()):
        d = recorder.jobs[job_id].demand
        table[k, : len(d)] = d
    pos = np.searchsorted(keys, job_ids)
    bad = pos >= len(keys)
    bad[~bad] = keys[pos[~bad]] != job_ids[~bad]
    if bad.any():
        raise KeyError(int(job_ids[np.argmax(bad)]))
    return table[pos]


def _usage_inputs(recorder: Recorder, tasks: dict | None = None) -> tuple:
    """What ``machine_usage`` needs whatever the sample times: each machine's capacity, and every
    execution's machine (as a row of it), demand, start and end (end: never, while it runs)."""
    ids = sorted(recorder.machines)
    capacity = np.array([recorder.machines[w] for w in ids], dtype=np.int64)
    job, worker, start, end = _executions(recorder, tasks)
    resources = capacity.shape[1]
    demand = _job_demands(recorder, job, resources)
    machine_ids = np.array(ids, dtype=np.int64)
    w = np.searchsorted(machine_ids, worker).astype(np.intp)
    if len(w) and (w.max() >= len(ids) or (machine_ids[np.minimum(w, len(ids) - 1)] != worker).any()):
        raise KeyError("an execution on a worker that is not one of the recorder's machines")
    end = np.where(end >= 0, end, np.iinfo(np.int64).max)
    return capacity, w, demand, start, end


def machine_usage(recorder: Recorder, times_us: np.ndarray, tables: Tables | None = None):
    """(used, capacity) in chunks of samples: ``used`` is what each machine held of each resource at each
    instant of a run of ``times_us`` (an execution counts from its start, inclusive, to its end,
    exclusive), shape (samples, machines, resources), at most ``MAX_BALANCE_CELLS`` cells per chunk;
    from every recorded execution (crash-aborted and duplicate ones too)."""
    capacity, w, demand, start, end = _usage_inputs(recorder) if tables is None else tables.usage
    machines, resources = capacity.shape
    # every start and end as (sample index from which it counts, machine, +-demand), by sample index
    at = np.concatenate([np.searchsorted(times_us, start, side="left"), np.searchsorted(times_us, end, side="left")])
    order = np.argsort(at, kind="stable")
    at, w, delta = at[order], np.concatenate([w, w])[order], np.concatenate([demand, -demand])[order]
    held = np.zeros((machines, resources), dtype=np.int64)
    per = max(1, MAX_BALANCE_CELLS // max(1, machines * resources))
    for a in range(0, len(times_us), per):
        b = min(a + per, len(times_us))
        lo, hi = np.searchsorted(at, a, side="left"), np.searchsorted(at, b, side="left")
        chunk = np.zeros((b - a, machines, resources), dtype=np.int64)
        np.add.at(chunk, (at[lo:hi] - a, w[lo:hi]), delta[lo:hi])
        chunk[0] += held
        np.cumsum(chunk, axis=0, out=chunk)
        held = chunk[-1].copy()
        yield chunk, capacity


def balance_series(recorder: Recorder, bucket_us: int = US, window: tuple[int, int] | None = None,
                   tables: Tables | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times in s, imbalance, utilization variance), sampled every ``bucket_us`` over the run window (or
    ``window``, in us), coarser when that would need more than ``MAX_BALANCE_SAMPLES`` samples.

    Imbalance Im(t) = max load - mean load over machines (Qin: Guan and Ababei, Eq. 1), with a
    machine's load its allocated share in its most-used resource (as ``policies.load_choice.load``).
    Utilization variance (TEBAS, Eqs. 10-12): per resource, the variance over machines of
    used / capacity, averaged over resources (0.5 cpu + 0.5 mem with two)."""
    window = window or time_window_us(recorder, tables)
    if window is None or window[1] <= window[0] or not recorder.machines:
        return np.empty(0), np.empty(0), np.empty(0)
    start, end = window
    step = max(bucket_us, -(-(end - start) // MAX_BALANCE_SAMPLES))
    times = np.arange(start, end, step, dtype=np.int64)
    imbalance, variance = [], []
    for used, capacity in machine_usage(recorder, times, tables):
        share = used / np.maximum(capacity, 1)[None, :, :]
        load = share.max(axis=2)
        imbalance.append(load.max(axis=1) - load.mean(axis=1))
        variance.append(share.var(axis=1).mean(axis=1))
    return times / US, np.concatenate(imbalance), np.concatenate(variance)


def arrival_window_us(recorder: Recorder) -> tuple[int, int] | None:
    """[first arrival, last arrival] in us: while jobs keep coming, the period a placement policy shapes
    (the drain after it holds the last few tasks wherever they happen to run); None with one arrival time."""
    if not recorder.jobs:
        return None
    arrivals = [j.arrival_us for j in recorder.jobs.values()]
    first, last = min(arrivals), max(arrivals)
    return (first, last) if last > first else None


def balance_stats(recorder: Recorder, bucket_us: int = US, series: tuple | None = None,
                  tables: Tables | None = None) -> dict:
    """Mean and max of the imbalance and the utilization variance (None when unknown), over the period jobs
    arrive (``arrival_window_us``; the whole run when they all arrive at once), sampled every ``bucket_us``
    or finer: at least ``BALANCE_SAMPLES`` samples. ``series``: a ``balance_series`` of exactly that, when
    the caller has it.

    Why not the whole run at 1 s: a short run (the heterogeneous scenario's jobs arrive within 2.3 s and
    drain for 9 more) then has a handful of samples, most in the drain, where the metrics reflect the
    machine the last long task happens to run on, not the placement policy."""
    if series is None:
        arriving = arrival_window_us(recorder)  # its last arrival instant included
        window = (arriving[0], arriving[1] + 1) if arriving else time_window_us(recorder, tables)
        if window is None:
            series = (np.empty(0),) * 3
        else:
            step = max(1, min(bucket_us, (window[1] - window[0]) // BALANCE_SAMPLES))
            series = balance_series(recorder, step, window, tables)
    _, imbalance, variance = series
    if not imbalance.size:
        return {"imbalance_mean": None, "imbalance_max": None, "utilization_variance_mean": None}
    return {"imbalance_mean": float(imbalance.mean()), "imbalance_max": float(imbalance.max()),
            "utilization_variance_mean": float(variance.mean())}


def jrt_s(recorder: Recorder, jobs: dict | None = None) -> np.ndarray:
    """Job completion (response) times of completed jobs, completion - arrival, in s."""
    jobs = job_table(recorder) if jobs is None else jobs
    done = jobs["completion_us"] >= 0
    return (jobs["completion_us"][done] - jobs["arrival_us"][done]) / US


def gang_wait_s(recorder: Recorder) -> np.ndarray | None:
    """Per gang job committed: how long it waited from its arrival until all its tasks were held at once
    (its commit), in s; None when no job is a gang."""
    gangs = [j for j in recorder.jobs.values() if j.gang]
    if not gangs:
        return None
    return np.array([j.committed_us - j.arrival_us for j in gangs if j.committed_us >= 0], dtype=np.int64) / US
