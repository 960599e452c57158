"""The figures a paper's claims read beyond `fedemu compare`'s row, computed from a run's own files
(jobs.csv, tasks.csv, summary.json): slowdowns, the share of jobs that did not queue, offered load, the
busiest worker, the tail of the allocation time and its parts' medians. One function per figure, gathered
by ``derived``. tasks.csv is read once a run, by numpy's parser (``task_columns``): a paper-scale run has millions of
rows, and a dict a row, five times over, took the report longer than some runs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from . import group_queueing as gq

PARTS = (("fq", "framework_queueing"), ("proc", "processing"), ("wq", "worker_queueing"), ("comm", "communication"))
ZERO_QUEUE_S = 1e-5  # a job "did not queue" when its delay is within 10 us of the run's smallest (rounding)
WARMUP = 0.2  # section 3's figures leave out the jobs of the first fifth of the arrivals (groups start empty)
TASK_COLUMNS = ("job_id", "arrival_s", "start_s", "end_s", "worker", "allocation_s") + \
    tuple(f"{key}_s" for _, key in PARTS)


def task_columns(path: Path) -> dict[str, np.ndarray] | None:
    """tasks.csv's columns that the figures read (those of TASK_COLUMNS it has) as float arrays, NaN for an
    empty cell, or None when there is no file: numpy's C parser over the whole file once, each empty cell
    first written as nan (tasks.csv is ours: numbers, no quotes)."""
    if not path.exists():
        return None
    with open(path, "rb") as f:
        header, _, body = f.read().partition(b"\n")
    names = header.decode().strip().split(",")  # (strip: a \r too)
    wanted = [name for name in TASK_COLUMNS if name in names]
    if not body.strip() or not wanted:
        return {name: np.empty(0) for name in wanted}
    body = body.replace(b"\r\n", b"\n")  # (ours ends lines with \n; a file saved elsewhere may not)
    body = b"\n" + body if body.endswith(b"\n") else b"\n" + body + b"\n"
    for _ in range(2):  # ",,," takes two passes: each replacement consumes the comma after it
        body = body.replace(b",,", b",nan,")
    body = body.replace(b",\n", b",nan\n").replace(b"\n,", b"\nnan,")
    table = np.loadtxt(io.BytesIO(body), delimiter=",", usecols=[names.index(name) for name in wanted],
                       dtype=np.float64, ndmin=2)
    return {name: table[:, i] for i, name in enumerate(wanted)}


def derived(run_dir: Path, summary: dict) -> dict:
    """Figures the claims need beyond compare's row: slowdowns and completion times of short and long jobs,
    the share of jobs that did not queue, the sum of completion times, the parts of the allocation time as
    shares, its tail, and the offered load (Megha 2023, 2.3)."""
    out: dict = {}
    path = run_dir / "jobs.csv"
    if path.exists():
        with open(path, newline="") as f:
            done = [r for r in csv.DictReader(f) if r["jrt_s"] != ""]
        jrt = np.array([float(r["jrt_s"]) for r in done])
        ideal = np.array([float(r["ideal_jrt_s"]) for r in done])
        delay = np.array([float(r["delay_s"]) for r in done])
        short = np.array([r["short"] == "1" for r in done], dtype=bool)
        out["jrt_sum_s"] = float(jrt.sum()) if len(jrt) else None
        # Pigeon (3): a job did not queue when it took its longest task plus communication only: the run's
        # smallest delay (every such job crosses the same hops)
        out["zero_queue_share"] = float((delay <= delay.min() + ZERO_QUEUE_S).mean()) if len(delay) else None
        # Pigeon (3): the mean wait's queueing part, a job's delay less the run's no-queueing floor
        out["queue_mean_s"] = float(delay.mean() - delay.min()) if len(delay) else None
        for name, mask in (("short", short), ("long", ~short)):
            for p in (50, 90, 99):  # the Pigeon paper's slowdown: percentile of JRT over percentile of ideal JRT
                ok = mask.any() and np.percentile(ideal[mask], p) > 0
                out[f"{name}_slowdown_p{p}"] = float(np.percentile(jrt[mask], p) / np.percentile(ideal[mask], p)) \
                    if ok else None
                out[f"{name}_jrt_p{p}_s"] = float(np.percentile(jrt[mask], p)) if mask.any() else None
    tasks = run_dir / "tasks.csv"
    cols = task_columns(tasks)  # read once for the figures below
    out.update(offered_load(tasks, summary.get("total_units") or 0, cols))
    jobs = _jobs_and_work(run_dir, cols)
    out.update(trace_stats(run_dir, summary, jobs))
    out.update(steady_state(run_dir, summary, jobs))
    out.update(group_model(summary, out.get("arrival_load_steady")))
    out.update(busiest_worker(tasks, summary, cols))
    out.update(allocation_tail(tasks, cols))
    alloc = summary.get("allocation_s") or {}
    total = alloc.get("allocation")
    for part, key in PARTS:
        out[f"alloc_{part}_share"] = alloc[key] / total if total and alloc.get(key) is not None else None
    counters = summary.get("counters") or {}
    for name in ("preemptions", "preemption_attempts", "repartitions"):  # fairness (megha-2022, Fig. 11)
        out[name] = counters.get(name, 0)
    jobs = summary.get("jobs") or 0
    out["unschedulable_share"] = (summary.get("unschedulable") or 0) / jobs if jobs else None
    return out


def offered_load(path: Path, units: int, cols: dict | None = None) -> dict:
    """Megha 2023 (2.3, Table 1): per second, the slots the active tasks need over the slots there are, each
    task active from its job's arrival for its run time (as if it never waited): p50, mean, p99 and the
    peak (Megha 2022, Fig. 5: the slots the workload requires over time)."""
    keys = ("offered_load_p50", "offered_load_mean", "offered_load_p99", "offered_load_max")
    cols = task_columns(path) if cols is None else cols
    if cols is None or not units:
        return dict.fromkeys(keys)
    ran = ~(np.isnan(cols["end_s"]) | np.isnan(cols["start_s"]))
    if not ran.any():
        return dict.fromkeys(keys)
    arrival = cols["arrival_s"][ran]
    run = cols["end_s"][ran] - cols["start_s"][ran]
    t0 = arrival.min()
    seconds = int(np.ceil((arrival + run).max() - t0)) + 1
    busy = np.zeros(seconds + 1)
    # exact overlap of [a, a + d) with each 1-s bucket, from the cumulative of starts and ends
    for edge, sign in ((arrival - t0, 1.0), (arrival + run - t0, -1.0)):
        whole = np.floor(edge).astype(int)
        frac = edge - whole
        np.add.at(busy, whole, sign * (1 - frac))
        np.add.at(busy, np.minimum(whole + 1, seconds), sign * frac)
    load = np.cumsum(busy)[:seconds] / units
    return {"offered_load_p50": float(np.percentile(load, 50)), "offered_load_mean": float(load.mean()),
            "offered_load_p99": float(np.percentile(load, 99)), "offered_load_max": float(load.max())}


def busiest_worker(path: Path, summary: dict, cols: dict | None = None) -> dict:
    """The worker with the most work for its time (why a group backs up): its index, its group (a Pigeon
    master's contiguous slice, where the run has ``masters``) and its offered load, the run time of the tasks
    it ran over the span of the arrivals (above 1: its queue grows as long as jobs arrive), and what a fluid
    queue at that load would make the middle job wait."""
    keys = ("busiest_worker", "busiest_group", "busiest_rho", "busiest_fluid_s")
    cols = task_columns(path) if cols is None else cols
    if cols is None:
        return dict.fromkeys(keys)
    ran = ~(np.isnan(cols["end_s"]) | np.isnan(cols["start_s"]) | np.isnan(cols["worker"]))
    arrival = cols["arrival_s"][ran]
    if not len(arrival) or arrival.max() <= arrival.min():
        return dict.fromkeys(keys)
    first, last = float(arrival.min()), float(arrival.max())
    busy: dict[int, float] = {}
    for w, end, start in zip(cols["worker"][ran].astype(np.int64).tolist(), cols["end_s"][ran].tolist(),
                             cols["start_s"][ran].tolist()):
        busy[w] = busy.get(w, 0.0) + end - start
    worker = max(sorted(busy), key=busy.__getitem__)
    masters = int((summary.get("params") or {}).get("masters") or 0)
    workers = int((summary.get("cluster") or {}).get("workers") or 0)
    group = worker // (workers // masters) if masters and workers >= masters else None
    rho = busy[worker] / (last - first)
    # a fluid queue fed at rho for the arrival span: the job arriving halfway waits (rho - 1) x half the span
    return {"busiest_worker": worker, "busiest_group": group, "busiest_rho": rho,
            "busiest_fluid_s": max(0.0, rho - 1) * (last - first) / 2}


def _jobs_and_work(run_dir: Path, cols: dict | None = None) -> dict[str, tuple]:
    """Per job: (fan-out, short, arrival s, delay s or None, run times of its finished tasks)."""
    jobs_path, tasks_path = run_dir / "jobs.csv", run_dir / "tasks.csv"
    if not jobs_path.exists() or not tasks_path.exists():
        return {}
    cols = task_columns(tasks_path) if cols is None else cols
    ran = ~(np.isnan(cols["end_s"]) | np.isnan(cols["start_s"]))
    job = cols["job_id"][ran].astype(np.int64)
    order = np.argsort(job, kind="stable")  # by job, each job's tasks in file order
    job, times = job[order], (cols["end_s"][ran] - cols["start_s"][ran])[order]
    cuts = np.flatnonzero(np.diff(job)) + 1
    run = {int(j[0]): t.tolist() for j, t in zip(np.split(job, cuts), np.split(times, cuts)) if len(j)}
    with open(jobs_path, newline="") as f:
        return {r["job_id"]: (int(r["num_tasks"]), r["short"] == "1", float(r["arrival_s"]),
                              float(r["delay_s"]) if r["delay_s"] != "" else None, run.get(int(r["job_id"]), []))
                for r in csv.DictReader(f)}


def _load(jobs: list[tuple], units: int) -> float | None:
    """The run time of these jobs' tasks over the slots and the span of their arrivals."""
    arrivals = [j[2] for j in jobs]
    span = max(arrivals) - min(arrivals) if arrivals else 0
    work = sum(sum(j[4]) for j in jobs)
    return work / (units * span) if units and span > 0 else None


def trace_stats(run_dir: Path, summary: dict, jobs: dict | None = None) -> dict:
    """The workload as it ran (Pigeon, Table 1): fan-out (max, min, mean over jobs), task run time (max,
    min, mean over tasks, and the mean over jobs of a job's mean task time, the trace's third column), the
    share of the run time in short jobs (Pigeon 2.2 and 4.2: under 20%), and ``arrival_load``, the run time
    over the slots and the span of the arrivals."""
    keys = ("fanout_max", "fanout_min", "fanout_mean", "task_max_s", "task_min_s", "task_mean_s", "job_task_mean_s",
            "short_work_share", "arrival_load")
    jobs = _jobs_and_work(run_dir) if jobs is None else jobs
    ran = [j for j in jobs.values() if j[4]]
    if not ran:
        return dict.fromkeys(keys)
    fanout = np.array([j[0] for j in jobs.values()])
    times = np.concatenate([np.array(j[4]) for j in ran])
    short = sum(sum(j[4]) for j in ran if j[1])
    return {"fanout_max": int(fanout.max()), "fanout_min": int(fanout.min()), "fanout_mean": float(fanout.mean()),
            "task_max_s": float(times.max()), "task_min_s": float(times.min()), "task_mean_s": float(times.mean()),
            "job_task_mean_s": float(np.mean([np.mean(j[4]) for j in ran])),
            "short_work_share": float(short / times.sum()) if times.sum() > 0 else None,
            "arrival_load": _load(ran, summary.get("total_units") or 0)}


def steady_state(run_dir: Path, summary: dict, jobs: dict | None = None) -> dict:
    """Section 3's figures once the groups have warmed up from empty: over the jobs that arrive after the
    first WARMUP of the arrival span, the share that did not queue, the mean queueing part of their delay
    (less the run's no-queueing floor) and the load their arrivals offered (what the model is evaluated at)."""
    keys = ("zero_queue_steady", "queue_mean_steady_s", "arrival_load_steady")
    jobs = [j for j in (_jobs_and_work(run_dir) if jobs is None else jobs).values() if j[3] is not None]
    if len(jobs) < 2:
        return dict.fromkeys(keys)
    floor = min(j[3] for j in jobs)
    first, last = min(j[2] for j in jobs), max(j[2] for j in jobs)
    late = [j for j in jobs if j[2] >= first + WARMUP * (last - first)]
    delay = np.array([j[3] for j in late])
    return {"zero_queue_steady": float((delay <= floor + ZERO_QUEUE_S).mean()),
            "queue_mean_steady_s": float(delay.mean() - floor),
            "arrival_load_steady": _load(late, summary.get("total_units") or 0)}


def group_size(summary: dict) -> int | None:
    """Workers per group: the run's ``masters`` cut every worker into equal groups, else a group is a cluster."""
    cluster, params = summary.get("cluster") or {}, summary.get("params") or {}
    masters = int(params.get("masters") or 0)
    if masters:
        return int(cluster.get("workers") or 0) // masters or None
    return int(cluster.get("workers_per_cluster") or 0) or None


def group_model(summary: dict, arrival_load: float | None) -> dict:
    """Section 3's analytic model (``group_queueing``) for a poisson run of exponential tasks, each group an
    M/M/Nw queue: the job-zero-queuing probability (Eq. 6) and the mean queueing time (Eq. 2) at the load the
    run's arrivals offered once warm (``arrival_load_steady``: a run of a few seconds offers its nominal load
    only to about a percent, which moves Eq. 6 by several points at 90%), and Eq. 6 at the nominal load."""
    keys = ("model_job_zero_queue", "model_wait_s", "model_job_zero_queue_nominal")
    params = summary.get("params") or {}
    nw = group_size(summary)
    if params.get("workload") != "poisson" or params.get("task_dist") != "exp" or not nw:
        return dict.fromkeys(keys)
    out = dict.fromkeys(keys)
    nominal = float(params.get("load") or 0)
    if 0 < nominal < 1:
        out["model_job_zero_queue_nominal"] = gq.job_zero_queue_exp(nw, nominal)
    if arrival_load is not None and 0 < arrival_load < 1:
        out["model_job_zero_queue"] = gq.job_zero_queue_exp(nw, arrival_load)
        out["model_wait_s"] = gq.task_wait(nw, arrival_load, float(params.get("task_s") or 0))
    return out


def allocation_tail(path: Path, cols: dict | None = None) -> dict:
    """Megha 2022 (VI-A, Figs. 3-4; VI-B, Fig. 7): the allocation time of the tasks that started, at p90,
    p99.99 and its maximum ("consistently less than 1.5 s", "max: 100 s"), and each part's median, alone and
    as a share of the four medians' sum (Fig. 7 takes "the median of the delays recorded")."""
    columns = ("allocation_s",) + tuple(f"{key}_s" for _, key in PARTS)
    keys = ("alloc_allocation_p90_s", "alloc_allocation_p9999_s", "alloc_allocation_max_s") + \
        tuple(f"alloc_{key}_p50_s" for _, key in PARTS) + tuple(f"alloc_{part}_median_share" for part, _ in PARTS)
    cols = task_columns(path) if cols is None else cols
    if cols is None or not set(columns) <= set(cols):  # no file, or a scheduler that records no parts
        return dict.fromkeys(keys)
    started = ~np.isnan(cols["start_s"])
    if not started.any():
        return dict.fromkeys(keys)
    values = np.column_stack([cols[c][started] for c in columns])
    alloc = values[:, 0]
    out = {"alloc_allocation_p90_s": float(np.percentile(alloc, 90)),
           "alloc_allocation_p9999_s": float(np.percentile(alloc, 99.99)), "alloc_allocation_max_s": float(alloc.max())}
    medians = np.median(values[:, 1:], axis=0)
    total = float(medians.sum())
    for (part, key), m in zip(PARTS, medians):
        out[f"alloc_{key}_p50_s"] = float(m)
        out[f"alloc_{part}_median_share"] = float(m) / total if total > 0 else None
    return out
