"""The invariants every run must keep, checked at its end from what the recorder saw.

Each check is a small function over the run's ``Recorder`` and the machines (``Cluster``); it returns
the violations it found, each naming the invariant, the job, task or worker, and the virtual time.
They look only at recorded facts (arrivals, starts, ends, workers, closes), never at a scheduler's
own bookkeeping, so a scheduler bug cannot hide itself. Checks that need a scheduler's live state
(views converging, LM state equal to the workers') belong to that scheduler's plug-in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
import numpy as np

from fedemu.model import Cluster, Recorder, run_time_us

STUCK_SHOWN = 5  # tasks named per stuck job in a message


@attrs.frozen
class Violation:
    """One broken invariant: which, about what (``job 3``, ``task 3.1``, ``w-17``), when, and how."""

    invariant: str
    subject: str
    time_us: int
    detail: str

    def line(self) -> str:
        """The one-line form the command line prints."""
        return f"{self.invariant}: {self.subject}: {self.detail} (virtual time {self.time_us / 1e6:.6f} s)"


def _rejected(rec: Recorder) -> set[int]:
    return {job_id for job_id, _ in rec.unschedulable}


def jobs_closed(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """Every submitted job completed or was rejected at submission; a stuck one says where its tasks are."""
    out = []
    rejected = _rejected(rec)
    for job in rec.jobs.values():
        if job.completion_us >= 0 or job.job_id in rejected:
            continue
        tasks = [rec.tasks[(job.job_id, i)] for i in range(job.num_tasks)]
        waiting = [t.index for t in tasks if t.start_us < 0]
        running = [t for t in tasks if t.start_us >= 0 > t.end_us]
        done = sum(1 for t in tasks if t.end_us >= 0)
        parts = [f"{done} of {job.num_tasks} tasks done"]
        if running:
            parts.append("running: " + ", ".join(f"{job.job_id}.{t.index} on w-{t.worker}"
                                                 for t in running[:STUCK_SHOWN]))
        if waiting:
            parts.append("never started: " + ", ".join(f"{job.job_id}.{i}" for i in waiting[:STUCK_SHOWN])
                         + (" …" if len(waiting) > STUCK_SHOWN else ""))
        if done == job.num_tasks:
            parts = [f"all {done} tasks ran, but its front end never learnt that the last one ended"]
        out.append(Violation("jobs_closed", f"job {job.job_id}", end_us,
                             "never completed; " + "; ".join(parts)))
    return out


def _per_row(rec: Recorder, value) -> np.ndarray:
    """``value(job)`` of each task's job, a row per task of ``rec.tasks`` (its rows run job by job)."""
    spans = rec.tasks.spans()
    return np.repeat(np.array([value(rec.jobs[job_id]) for job_id, _ in spans]),
                     np.array([n for _, (_, n) in spans], dtype=np.int64), axis=0)


def tasks_ran_once(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """Every task of a completed job started once, ran for exactly its run time on the machine it ran on
    (its duration, scaled by the Amdahl model for the job's alpha and that machine's speed, computed here
    from the recorded worker and the cluster description), and ended before its job was closed. (A second
    start or end is refused by the recorder as it happens.)"""
    if not len(rec.tasks):
        return []
    cols = rec.tasks.columns(("job_id", "index", "duration_us", "start_us", "end_us", "worker"), copy=False)
    job, index, duration, start, end, worker = cols.values()
    closed = _per_row(rec, lambda j: j.completion_us)
    done = closed >= 0
    never = done & ((start < 0) | (end < 0))
    want = duration.copy()
    alpha = _per_row(rec, lambda j: j.alpha)
    scaled = np.nonzero(done & ~never & (alpha != 0))[0]
    if len(scaled):  # (no speed-up: no look-up)
        speed = {w.worker_id: w.speed for w in cluster.workers()}
        want[scaled] = [run_time_us(int(duration[r]), float(alpha[r]), speed.get(int(worker[r]), 1.0)) for r in scaled]
    wrong = done & ~never & (end - start != want)
    late = done & ~never & ~wrong & (end > closed)
    out = []
    for r in np.nonzero(never | wrong | late)[0]:
        j, i, t0, t1, d, w, c = (int(a[r]) for a in (job, index, start, end, duration, worker, closed))
        if never[r]:
            out.append(Violation("tasks_ran_once", f"task {j}.{i}", c,
                                 f"its job completed but the task {'never started' if t0 < 0 else 'never ended'}"))
        elif wrong[r]:
            note = "" if want[r] == d else f" and its run time on w-{w} is {int(want[r])} us"
            out.append(Violation("tasks_ran_once", f"task {j}.{i}", t1, f"ran {t1 - t0} us, its duration is {d} us{note}"))
        else:
            out.append(Violation("tasks_ran_once", f"task {j}.{i}", c,
                                 f"its job was closed at {c} us, before the task ended at {t1} us"))
    return out


def capacity_respected(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """No worker ever held more than its capacity, in any resource. Ends count before starts at the
    same instant (a worker frees a slot before the next task can take it).

    One row per start and per end, sorted by worker, time and kind, and a running sum; the arrays are
    made one at a time and let go when used (at 10,000 workers this check set the run's peak memory)."""
    specs = {w.worker_id: w for w in cluster.workers()}
    others = rec.other_runs  # every other execution: aborted by a crash, or a duplicate that crossed a partition
    fields = ("job_id", "index", "worker", "start_us", "end_us")  # (an other run's row begins with these)
    cols = rec.tasks.columns(fields, copy=False)
    started = cols["start_us"] >= 0
    if not started.any() and not others:
        return []

    def column(k: str) -> np.ndarray:
        """Field ``k`` of every execution: the tasks' own that started, then the other runs'."""
        own, i = cols[k][started], fields.index(k)
        return np.concatenate([own, np.array([r[i] for r in others], dtype=np.int64)]) if others else own

    resources = len(cluster.resources)
    job, worker = column("job_id"), column("worker")
    known = np.array(sorted(specs), dtype=np.int64)
    ids = np.unique(job)
    odd = (~np.isin(worker, known)) | np.isin(job, [j for j in ids.tolist() if len(rec.jobs[j].demand) != resources])
    if odd.any():
        k = int(np.nonzero(odd)[0][0])
        index, start = column("index"), column("start_us")
        return [Violation("capacity_respected", f"task {job[k]}.{index[k]}", int(start[k]), f"ran on w-{worker[k]}, which "
                          "is not a worker of this cluster or has another number of resources")]
    del odd
    demand = np.array([rec.jobs[j].demand for j in ids.tolist()], dtype=np.int64).reshape(-1, resources)
    demand = demand[np.searchsorted(ids, job)]
    del job
    n = len(worker)
    times = np.concatenate([column("start_us"), column("end_us")])
    ends = times[n:]
    ends[ends < 0] = end_us + 1  # still running at the end: it ends just after
    del ends
    workers = np.concatenate([worker, worker])
    del worker
    order = np.lexsort((np.repeat(np.array([1, 0], dtype=np.int8), n), times, workers))  # by worker, time, ends first
    del times  # (a violation's time is read back from its row)
    workers = workers[order]
    is_end = order >= n
    order[is_end] -= n  # each sorted row's execution
    held = demand[order]
    held[is_end] *= -1
    del demand, is_end
    # Every start has its end in the same worker's run of rows (a task still running at the end ends
    # just after it), so the running sum is back to zero where each worker's rows begin.
    np.cumsum(held, axis=0, out=held)
    capacity = np.zeros((int(known[-1]) + 1, resources), dtype=np.int64)
    for w in specs:
        capacity[w] = specs[w].capacity
    over = np.nonzero((held > capacity[workers]).any(axis=1))[0]
    if not len(over):
        return []
    k = over[0]
    w = int(workers[k])
    # the first row over is a start (an end only lowers the sum, and a worker's first row is a start or
    # an end of a task of no time): the violation's time is that execution's start
    return [Violation("capacity_respected", f"w-{w}", int(column("start_us")[order[k]]),
                      f"held {tuple(int(x) for x in held[k])} of capacity {specs[w].capacity}")]


def constraints_met(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """Every task ran on a worker that provides all of its constraints (constraint-aware schedulers)."""
    provides = {w.worker_id: frozenset(w.constraints) for w in cluster.workers()}
    jobs, nothing = rec.jobs, frozenset()
    t = rec.tasks
    started, worker = t.start_us, t.worker
    for job_id, (first, n) in t.spans():
        needs = jobs[job_id].constraints
        for i in range(min(n, len(needs))):
            need = needs[i]
            r = first + i
            if need and started[r] >= 0 and not provides.get(worker[r], nothing).issuperset(need):  # one C call
                missing = [c for c in need if c not in provides.get(worker[r], ())]
                return [Violation("constraints_met", f"task {job_id}.{i}", started[r],
                                  f"ran on w-{worker[r]}, which lacks constraint(s) {missing}")]
    return []


def preempted_requeued_once(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """A preempted task is queued again exactly once per preemption, and neither lost nor duplicated:
    its owner GM re-queued it at most once per preemption an LM made of it; once its job completed, its
    last execution started after its last preemption (it ran again, from scratch); and no two of its
    executions since its first preemption overlap (nor two of a task a preemption launched). Holds
    trivially for runs without preemptions."""
    if not rec.preemptions and not rec.requeued:
        return []
    out = []
    stops: dict[tuple, list] = {}
    since: dict[tuple, int] = {}  # victims and launched tasks: when the first preemption touched them
    for at, _, _, _, launched, victims, _ in rec.preemptions:
        for key in victims:
            stops.setdefault(tuple(key), []).append(at)
        for key in (*map(tuple, victims), tuple(launched)):
            since[key] = min(since.get(key, at), at)
    runs: dict[tuple, list] = {}
    for job_id, index, _, start, end, _ in rec.other_runs:
        runs.setdefault((job_id, index), []).append((start, end if end >= 0 else end_us + 1))
    for key in sorted(set(since) | set(rec.requeued)):
        subject = f"task {key[0]}.{key[1]}"
        times = sorted(stops.get(key, ()))
        t = rec.tasks.get(key)
        if t is None:
            continue
        if times:
            if rec.requeued.get(key, 0) > len(times):
                out.append(Violation("preempted_requeued_once", subject, times[-1],
                                     f"queued again {rec.requeued[key]} times for {len(times)} preemption(s)"))
                continue
            if rec.jobs[key[0]].completion_us >= 0 and t.start_us < times[-1]:
                out.append(Violation("preempted_requeued_once", subject, times[-1],
                                     "preempted, and never started again although its job completed"))
                continue
        elif rec.requeued.get(key, 0):
            out.append(Violation("preempted_requeued_once", subject, end_us,
                                 f"queued again {rec.requeued[key]} times, never preempted"))
            continue
        first = since.get(key, 0)  # executions still live when the first preemption touched it, and later ones
        spans = sorted(s for s in runs.get(key, []) + [(t.start_us, t.end_us if t.end_us >= 0 else end_us + 1)]
                       if s[0] >= 0 and s[1] > first)
        for (s1, e1), (s2, _) in zip(spans, spans[1:]):
            if s2 < e1:
                out.append(Violation("preempted_requeued_once", subject, s2,
                                     f"ran twice at once around a preemption (executions from {s1} us and {s2} us)"))
                break
    return out


def gangs_whole(rec: Recorder, cluster: Cluster, end_us: int) -> list[Violation]:
    """No partial gang ever runs: no task of a gang job starts (any execution) before the commit that held
    every one of its tasks at once, and a gang with a task started has every task started by the end.
    Jobs that are not gangs pass."""
    runs: dict[int, list] = {}
    for job_id, index, _, start, *_ in rec.other_runs:
        runs.setdefault(job_id, []).append((start, index))
    out = []
    for job in rec.jobs.values():
        if not job.gang:
            continue
        starts = [(t.start_us, i) for i in range(job.num_tasks) if (t := rec.tasks[(job.job_id, i)]).start_us >= 0]
        starts += runs.get(job.job_id, [])
        if not starts:
            continue
        first, index = min(starts)
        if job.committed_us < 0 or first < job.committed_us:
            when = "it was never committed" if job.committed_us < 0 else f"its commit at {job.committed_us} us"
            out.append(Violation("gangs_whole", f"task {job.job_id}.{index}", first,
                                 f"a task of gang job {job.job_id} started before {when} (it started alone)"))
            continue
        never = sorted(set(range(job.num_tasks)) - {i for _, i in starts})
        if never:
            out.append(Violation("gangs_whole", f"job {job.job_id}", end_us,
                                 f"partial gang: {job.num_tasks - len(never)} of {job.num_tasks} tasks started, "
                                 "never started: " + ", ".join(f"{job.job_id}.{i}" for i in never[:STUCK_SHOWN])))
    return out


Check = Callable[[Recorder, Cluster, int], list[Violation]]
CHECKS: dict[str, Check] = {
    "jobs_closed": jobs_closed,
    "tasks_ran_once": tasks_ran_once,
    "capacity_respected": capacity_respected,
    "constraints_met": constraints_met,
    "preempted_requeued_once": preempted_requeued_once,
    "gangs_whole": gangs_whole,
}
# the checks that only a run using a feature can break (a plug-in's ``features`` says which a run uses)
FEATURE_CHECKS = {"gangs": "gangs_whole", "users": "preempted_requeued_once"}


def check_run(rec: Recorder, cluster: Cluster, end_us: int, *, skip: Iterable[str] = ()) -> dict[str, list[Violation]]:
    """Run every check but those in ``skip``; returns each check's violations (empty: it held)."""
    skip = set(skip)
    return {name: fn(rec, cluster, end_us) for name, fn in CHECKS.items() if name not in skip}
