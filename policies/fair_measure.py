"""What Megha's global fairness achieved (Megha 2022, IV-C): each user's measured share of the datacenter over
time, overall and under contention, against its configured share, from the run's recorded facts only.

Definitions (written down as the issue asks):
- A user's **share at time t** is the dominant-resource fraction of the datacenter's total capacity held
  by the executions of its tasks running at t (``fair_share.dominant``); every execution counts, a
  preempted one until it was stopped.
- **Contention**: some task has arrived and waits (neither running nor done) while the datacenter is at
  least ``CONTENDED`` full (its busiest resource). Time-weighted shares are averages over the run (first
  arrival to last event), over the contended time, and, per user, over the contended time while that user
  had a task waiting (``measured_waiting``: the user kept demand, so fairness owes it its share).
- **Wasted work**: unit-seconds the preempted executions had run when they were stopped.
"""

from __future__ import annotations

import numpy as np

from fedemu.model import US_PER_S, Recorder

CONTENDED = 0.9  # the datacenter counts as contended when this full and some task waits


def executions(rec: Recorder, end_us: int):
    """Every execution as arrays (user, start_us, end_us, demand rows); a running one ends at ``end_us``."""
    users, starts, ends, demands = [], [], [], []
    for t in rec.tasks.values():
        if t.start_us >= 0:
            job = rec.jobs[t.job_id]
            users.append(job.user)
            starts.append(t.start_us)
            ends.append(t.end_us if t.end_us >= 0 else end_us)
            demands.append(job.demand)
    for job_id, _, _, start, end, _ in rec.other_runs:
        job = rec.jobs[job_id]
        users.append(job.user)
        starts.append(start)
        ends.append(end if end >= 0 else end_us)
        demands.append(job.demand)
    width = len(demands[0]) if demands else 1
    return (np.array(users, dtype=np.int64), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
            np.array(demands, dtype=np.int64).reshape(-1, width))


def _waiting(times, arrivals, starts, ends, done) -> np.ndarray:
    """Tasks arrived and neither running nor done, at each of ``times``."""
    n = len(times)
    running = np.cumsum(np.bincount(np.searchsorted(times, starts), minlength=n + 1)[:n]
                        - np.bincount(np.searchsorted(times, ends), minlength=n + 1)[:n])
    return (np.searchsorted(np.sort(arrivals), times, side="right") - running
            - np.searchsorted(np.sort(done), times, side="right"))


def share_series(rec: Recorder, users: int, total: tuple, end_us: int):
    """(times_us, shares[users, T], contended[T], waits[users, T]): each step holds from its time to the
    next; ``waits[u]``: user u has a task waiting."""
    user, start, end, demand = executions(rec, end_us)
    total_arr = np.array(total, dtype=np.float64)
    task_user = np.array([rec.jobs[t.job_id].user for t in rec.tasks.values()], dtype=np.int64)
    arrival_all = np.array([t.arrival_us for t in rec.tasks.values()], dtype=np.int64)
    done_all = np.array([t.end_us for t in rec.tasks.values()], dtype=np.int64)
    arrivals = np.sort(arrival_all)
    done = np.sort(done_all[done_all >= 0])
    times = np.unique(np.concatenate([start, end, arrivals, done, [end_us]]))
    held = np.zeros((users, len(times), len(total)), dtype=np.float64)
    for u in range(users):
        mine = user == u
        for r in range(len(total)):
            delta = np.zeros(len(times))
            np.add.at(delta, np.searchsorted(times, start[mine]), demand[mine, r])
            np.add.at(delta, np.searchsorted(times, end[mine]), -demand[mine, r])
            held[u, :, r] = np.cumsum(delta)
    shares = (held / total_arr).max(axis=2) if users else np.zeros((0, len(times)))
    everyone = np.zeros((len(times), len(total)))
    for r in range(len(total)):
        delta = np.zeros(len(times))
        np.add.at(delta, np.searchsorted(times, start), demand[:, r])
        np.add.at(delta, np.searchsorted(times, end), -demand[:, r])
        everyone[:, r] = np.cumsum(delta)
    full = (everyone / total_arr).max(axis=1) >= CONTENDED
    contended = full & (_waiting(times, arrivals, start, end, done) > 0)
    waits = np.zeros((users, len(times)), dtype=bool)
    for u in range(users):
        mine, runs = task_user == u, user == u
        finished = done_all[mine]
        waits[u] = _waiting(times, arrival_all[mine], start[runs], end[runs], finished[finished >= 0]) > 0
    return times, shares, contended, waits


def _percentiles(values_s: list) -> dict:
    if not values_s:
        return {"count": 0, "p50": None, "p90": None, "p99": None}
    d = np.sort(np.array(values_s))

    def rank(q):
        return float(d[max(0, int(-(-len(d) * q // 100)) - 1)])

    return {"count": len(d), "p50": rank(50), "p90": rank(90), "p99": rank(99)}


def report(rec: Recorder, shares: tuple, user_gm: tuple, total: tuple, end_us: int, preempt: bool) -> dict:
    """The summary's ``fairness`` block: per user its configured and measured shares, preemptions, wasted
    work and delays; the contended time."""
    users = len(shares)
    arrivals = [j.arrival_us for j in rec.jobs.values()]
    t0 = min(arrivals) if arrivals else 0
    times, series, contended, waits = share_series(rec, users, total, end_us)
    steps = np.diff(np.append(times, end_us)).astype(np.float64)
    steps[times < t0] = 0
    span = steps.sum()
    hot = steps * contended
    hot_span = hot.sum()
    preempted = [0] * users
    for _, _, _, _, _, victims, _ in rec.preemptions:
        for job_id, _ in victims:
            u = rec.jobs[job_id].user
            if 0 <= u < users:
                preempted[u] += 1
    wasted = [0] * users
    for job_id, _, _, start, stop, units in rec.preempted:
        u = rec.jobs[job_id].user
        if 0 <= u < users:
            wasted[u] += (stop - start) * units
    rows = []
    for u in range(users):
        delays = [j.delay_us / US_PER_S for j in rec.jobs.values() if j.user == u and j.completion_us >= 0]
        rows.append({
            "user": u, "gm": user_gm[u], "share": shares[u],
            "measured": float((series[u] * steps).sum() / span) if span else 0.0,
            "measured_contended": float((series[u] * hot).sum() / hot_span) if hot_span else None,
            # under contention while this user had a task waiting (it kept demand): what fairness promises
            "waiting_s": float((hot * waits[u]).sum() / US_PER_S),
            "measured_waiting": (float((series[u] * hot * waits[u]).sum() / (hot * waits[u]).sum())
                                 if (hot * waits[u]).sum() else None),
            "preempted": preempted[u],
            "preemption_attempts": rec.per_user.get(("preemption_attempts", u), 0),
            "preemptions_refused": rec.per_user.get(("preemptions_refused", u), 0),
            "wasted_s": wasted[u] / US_PER_S,
            "jobs": sum(1 for j in rec.jobs.values() if j.user == u),
            "delay_s": _percentiles(delays),
        })
    return {"algorithm2": "on" if preempt else "off", "total": list(total), "contended_s": float(hot_span / US_PER_S),
            "span_s": float(span / US_PER_S), "users": rows}
