"""Checks a federation run before anything is built: numbers that make sense, a size that fits in memory,
and at least one job that some worker can run; prints a warning for what is legal but doubtful.

Every refusal is a ConfigError naming the key and its value (and, for sizes, the estimate), raised before
the first actor exists, so a bad configuration costs no time and leaves nothing half-built behind.
"""

from __future__ import annotations

import math
import os
import sys

import attrs

from fedemu.actors import registry
from fedemu.fabric.errors import ConfigError

from .trace import MAX_TRACE_S, count_trace

# What ``jobs = 0`` (the default) means for each workload: the workload's own size.
DEFAULT_POISSON_JOBS = 500
DEFAULT_SYN_JOBS = 2000

# The memory model, fitted to peak RSS of default-scenario runs (every scheduler; 300 to 30,000 workers,
# 5,000 to 200,000 tasks) and rounded up: the recorder keeps a record of every task and job, and every
# worker is an actor with a mailbox (the heaviest workers are about 7 KiB each).
BASE_BYTES = 64 << 20
TASK_BYTES = 1 << 10
JOB_BYTES = 1 << 10
ACTOR_BYTES = 8 << 10
MESSAGE_BYTES = 256  # a message waiting in the fabric's queue: the message, its event and the mailbox slot
LARGE_BYTES = 1 << 30  # above this a run is legal but worth a warning
FALLBACK_MEMORY = 24 << 30
MEMORY_SHARE = 0.8  # of the machine's memory a run may plan to use: the rest is the system's and the neighbours

# Whole-number keys that size the run (and each scheduler's, its ``Size.keys``); inf or nan here would
# reach int() and overflow.
COUNT_KEYS = ("gms", "lms", "workers_per_partition", "workers", "jobs", "fanout")


@attrs.frozen
class Estimate:
    """What a configuration needs: actors, jobs, tasks (all of them: the recorder keeps every one) and bytes."""

    actors: int
    jobs: int
    tasks: int
    bytes: int
    trace_jobs: int | None = None  # the jobs in the whole trace, for workload=trace
    burst: int = 0  # messages one job sends at once (the scheduler's ``Size.burst`` per task)
    keys: tuple[str, ...] = ()  # the scheduler's keys that decide its actors
    burst_key: str = ""  # and its burst

    def text(self) -> str:
        burst = f", {self.burst:,} probes per job" if self.burst else ""
        return (f"{self.actors:,} actors, {self.jobs:,} jobs, {self.tasks:,} tasks{burst}, "
                f"about {_size(self.bytes)} of memory")


def _size(n: float) -> str:
    """Bytes as a short human figure: 512 MiB, 3.2 GiB, 7.3 TiB."""
    if n >= 1 << 70:  # beyond float range for absurd sizes: the order of magnitude says enough
        return f"about 10^{len(str(int(n) >> 40)) - 1} TiB"
    for unit, shift in (("TiB", 40), ("GiB", 30)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):,.1f} {unit}"
    return f"{n / (1 << 20):,.0f} MiB"


def machine_memory() -> int:
    """This machine's physical memory in bytes (24 GiB when the system will not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return FALLBACK_MEMORY


def warn(text: str, level: str = "warning") -> None:
    """One line on stderr for something legal but doubtful (or, as a "note", worth knowing); the run goes on."""
    print(f"fedemu: {level}: {text}", file=sys.stderr)


def _count(params: dict, key: str) -> int:
    """A whole-number parameter >= 0 as an int; inf, nan, fractions and negatives are ConfigErrors."""
    value = params[key]
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value, ok = int(value), True
    if not ok or value < 0:
        raise ConfigError(f"parameter {key!r} is {params[key]!r}; expected a whole number >= 0")
    return value


def _number(params: dict, key: str, *, allow_inf: bool = False) -> float:
    """A number parameter >= 0 (finite unless ``allow_inf``); nan and negatives are ConfigErrors."""
    value = params[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if not ok or value < 0 or (math.isinf(value) and not allow_inf):
        bound = "a number >= 0 (inf allowed)" if allow_inf else "a finite number >= 0"
        raise ConfigError(f"parameter {key!r} is {value!r}; expected {bound}")
    return float(value)


def _workers(params: dict) -> int:
    """The number of workers the cluster description gives (no check of the shape's divisibility)."""
    total = _count(params, "workers")
    return total if total > 0 else _count(params, "gms") * _count(params, "lms") * _count(
        params, "workers_per_partition")


def _workload(params: dict) -> tuple[int, int, int | None]:
    """(jobs the run submits, tasks per job bound or total, jobs in the trace when it is a trace)."""
    kind = str(params["workload"])
    jobs = _count(params, "jobs")
    if kind == "trace" and params["trace"]:
        trace_jobs, trace_tasks = count_trace(params["trace"])
        run_jobs = min(jobs, trace_jobs) if jobs else trace_jobs
        # tasks of the first run_jobs jobs are not counted separately: the whole trace bounds them
        return run_jobs, trace_tasks, trace_jobs
    if kind.startswith("syn_") and kind[4:].isdigit():
        run_jobs = jobs or DEFAULT_SYN_JOBS
        return run_jobs, run_jobs * int(kind[4:]), None
    run_jobs = jobs or DEFAULT_POISSON_JOBS
    return run_jobs, run_jobs * _count(params, "fanout"), None


def _scheduler_size(params: dict):
    """The scheduler's ``Size`` in this run (its keys checked by their own rules first)."""
    scheduler = registry.get(params["scheduler"])
    for p in scheduler.params:
        if p.name in params:
            p.check(params[p.name])
    return scheduler.size(params)


def estimate(params: dict) -> Estimate:
    """What the federation scenario's ``params`` need, before building anything."""
    workers = _workers(params)
    size = _scheduler_size(params)
    jobs, tasks, trace_jobs = _workload(params)
    actors = workers + size.actors + 1  # and the submitter
    burst = 0
    if size.burst:  # a job's messages all leave at once; the largest job bounds them by its tasks
        per_job = tasks if trace_jobs is not None else tasks // max(jobs, 1)
        burst = math.ceil(_number({size.burst_key: size.burst}, size.burst_key) * per_job)
    return Estimate(actors, jobs, tasks, BASE_BYTES + actors * ACTOR_BYTES + jobs * JOB_BYTES + tasks * TASK_BYTES
                    + burst * MESSAGE_BYTES, trace_jobs, burst, size.keys, size.burst_key)


def check_demo(params: dict) -> None:
    """The demo's numbers: peers, period and duration, network; refuse what cannot fit, warn when long."""
    peers = _count(params, "peers")
    if peers < 2:
        raise ConfigError(f"parameter 'peers' is {params['peers']!r}; expected at least 2 (a peer pings another)")
    period = _number(params, "period_ms")
    if period * 1000 < 1:
        raise ConfigError(f"parameter 'period_ms' is {params['period_ms']!r}; expected at least 0.001 (1 us)")
    duration = _number(params, "duration_ms")
    if duration / 1000 > MAX_TRACE_S:
        raise ConfigError(f"parameter 'duration_ms' is {params['duration_ms']!r}; more than the longest time a "
                          f"run may span, {MAX_TRACE_S:.0e} s")
    _check_network(params)
    need = BASE_BYTES + peers * ACTOR_BYTES
    if need > MEMORY_SHARE * machine_memory():
        raise ConfigError(f"peers={params['peers']!r}: the run would need about {_size(need)} of memory, more "
                          f"than {MEMORY_SHARE:.0%} of this machine's {_size(machine_memory())}")
    pings = peers * int(duration // period)
    if pings > 10_000_000:
        warn(f"a large run: about {pings:,} pings ({peers:,} peers, one every {period:g} ms for {duration:g} ms); "
             "it may take a long time")


def _check_network(params: dict) -> None:
    latency = _number(params, "latency_ms")
    jitter = _number(params, "jitter_ms")
    if jitter > latency:
        raise ConfigError(f"jitter_ms={params['jitter_ms']!r} is more than latency_ms={params['latency_ms']!r}; "
                          "delays are drawn uniformly from latency_ms ± jitter_ms and cannot be negative")


def _check_times(params: dict, est: Estimate, workers: int) -> None:
    """Refuse times beyond MAX_TRACE_S (as in traces): a task, a heartbeat period, a network delay, or a
    Poisson workload's span."""
    limit = f"more than the longest time a run may span, {MAX_TRACE_S:.0e} s"
    own = tuple(p.name for p in registry.get(params["scheduler"]).params if p.name.endswith("_s"))
    for key in ("task_s", *own):  # a task's length; the scheduler's periods and timeouts
        if key in params and _number(params, key) > MAX_TRACE_S:
            raise ConfigError(f"parameter {key!r} is {params[key]!r}; {limit}")
    if (_number(params, "latency_ms") + _number(params, "jitter_ms")) / 1000 > MAX_TRACE_S:
        raise ConfigError(f"parameter 'latency_ms' is {params['latency_ms']!r}; {limit}")
    if params["workload"] == "poisson" and workers:
        rate = _number(params, "rate") or _number(params, "load") * workers / (
            _count(params, "fanout") * _number(params, "task_s") or 1)
        span = est.jobs / rate if rate > 0 else 0.0  # a rate of 0 is synthetic.poisson_rate's to refuse
        if span > MAX_TRACE_S:
            given = f"rate={params['rate']!r}" if _number(params, "rate") else f"load={params['load']!r}"
            raise ConfigError(f"{given}: {est.jobs:,} jobs would arrive over about {span:.2g} s, {limit}")


def _check_load(params: dict, workers: int) -> None:
    """Warn when jobs arrive faster than the workers can run them."""
    if params["workload"] != "poisson" or workers == 0:
        return
    fanout, task_s = _count(params, "fanout"), _number(params, "task_s")
    rate = _number(params, "rate")
    load = rate * fanout * task_s / workers if rate else _number(params, "load")
    if load > 1:
        given = f"rate={params['rate']!r} (load {load:.2f})" if rate else f"load={params['load']!r}"
        warn(f"{given} is above 1: jobs arrive faster than the workers can run them, so queues grow "
             "for the whole run and it never reaches a steady state")


def _culprit(params: dict, est: Estimate) -> str:
    """``key=value`` of the parameter that makes the estimate big: the largest of the dominant group."""
    if est.burst * MESSAGE_BYTES >= max(est.tasks * TASK_BYTES, est.actors * ACTOR_BYTES):
        return f"{est.burst_key}={params[est.burst_key]!r}"
    if est.tasks * TASK_BYTES >= est.actors * ACTOR_BYTES:
        if est.trace_jobs is not None:
            return f"trace={params['trace']!r}"
        kind = str(params["workload"])
        if kind.startswith("syn_"):
            return f"workload={kind!r}" if int(kind[4:]) >= est.jobs else f"jobs={params['jobs']!r}"
        keys = ("jobs", "fanout")
    else:
        keys = ("workers",) if _count(params, "workers") else ("gms", "lms", "workers_per_partition")
        keys += est.keys
    key = max(keys, key=lambda k: params[k] if isinstance(params[k], (int, float)) else 0)
    return f"{key}={params[key]!r}"


def check(params: dict) -> Estimate:
    """Check ``params`` of the federation scenario; returns the estimate. Raises ConfigError; may warn."""
    for key in COUNT_KEYS:
        if key in params:  # scheduler keys exist only for the schedulers that declare them
            _count(params, key)
    _number(params, "short_cutoff_s", allow_inf=True)
    _check_network(params)
    est = estimate(params)
    memory = machine_memory()
    if est.bytes > MEMORY_SHARE * memory:
        raise ConfigError(f"{_culprit(params, est)}: the run would need {est.text()}, more than "
                          f"{MEMORY_SHARE:.0%} of this machine's {_size(memory)}")
    if est.bytes > LARGE_BYTES:
        warn(f"a large run: {est.text()}; it may take a long time (the progress bar shows how far it is)")
    if est.trace_jobs is not None and est.jobs < est.trace_jobs:
        warn(f"the trace {params['trace']} has {est.trace_jobs:,} jobs; this run uses the first {est.jobs:,} "
             f"(jobs={params['jobs']}; jobs=0 runs the whole trace)", level="note")
    _check_times(params, est, _workers(params))
    _check_load(params, _workers(params))
    _check_users(params, est)
    return est


def _check_users(params: dict, est: Estimate) -> None:
    """Refuse more users than jobs when the run hands users their jobs (round robin or by share): the rest
    would never have one, and each is still a queue and a share the GMs plan Algorithm 2 over."""
    users = int(params.get("users") or 0)
    if users > est.jobs and params.get("user_assign", "round-robin") != "trace":
        raise ConfigError(f"users={params['users']!r} is more than the {est.jobs:,} jobs of the workload: "
                          f"{users - est.jobs:,} users would never have a job; give at most {est.jobs:,} users, or "
                          "more jobs")


def _why_not(job, max_capacity: tuple[int, ...], resources: tuple[str, ...]) -> str:
    """Why the first job cannot run, in the words of the parameters that decide it."""
    demand = tuple(job.demand)
    if len(demand) != len(max_capacity):
        return (f"demand names {len(demand)} resource(s) {demand} but capacity names {len(max_capacity)} "
                f"({', '.join(resources)}): give demand and capacity the same number of values")
    if any(d > c for d, c in zip(demand, max_capacity)):
        return f"demand {demand} is more than the largest worker's capacity {max_capacity}"
    return ("no worker both holds the demand and has every constraint its tasks ask for (constraints=true with "
            "too few or too small workers, or machine_types with no type that holds every resource of the demand)")


def check_feasible(jobs, feasible, max_capacity: tuple[int, ...], resources: tuple[str, ...]) -> None:
    """Refuse a workload in which no job at all can run (read until the first job that can)."""
    first = None
    count = 0
    for job in jobs:
        count += 1
        if first is None:
            first = job
        if all(feasible(c, job.demand) for c in job.constraints):
            return
    if first is not None:
        raise ConfigError(f"no job can run: every one of the {count:,} jobs has a task no worker can run; "
                          f"{_why_not(first, max_capacity, resources)}")
