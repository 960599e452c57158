"""The common scenario: one cluster description, one workload, any scheduler, any policy.

``PARAMS`` lists every parameter ``--set`` may change; ``build`` turns them into a cluster (clusters
of workers with constraint profiles, described once so every scheduler maps the same machines onto
its own shape), a streamed workload with task constraints, the scheduler's actors and the network.
Scenario scripts import ``PARAMS`` and ``build`` from here and change the defaults they care about.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.errors import ConfigError, unknown_name
from fedemu.fabric.network import Latency, Link
from fedemu.fabric.rand import Stream
from fedemu.policies.worker_choice import WORKER_CHOICE_NAMES, get_worker_choice
from fedemu.scenarios import constraints as cons
from fedemu.model import seconds_to_us
from fedemu.scenarios.synthetic import poisson_jobs, syn_jobs
from fedemu.scenarios.trace import read_trace

PARAMS = {
    # scheduler
    "scheduler": "megha",
    "policy": "random",
    "heartbeat_s": 10.0,
    # cluster: lms clusters of gms * workers_per_partition workers ("workers" > 0 derives the shape)
    "gms": 3,
    "lms": 4,
    "workers_per_partition": 25,
    "workers": 0,
    "capacity": "1",
    "demand": "1",
    "constraints": True,
    "constraint_table": "",
    # workload: syn_N, poisson or trace
    "workload": "poisson",
    "trace": "",
    "jobs": 500,
    "load": 0.8,
    "rate": 0.0,
    "fanout": 10,
    "task_s": 1.0,
    "task_dist": "exp",
    "short_cutoff_s": 90.5811,
    # network
    "latency_ms": 0.5,
    "jitter_ms": 0.0,
    "loss": 0.0,
    # Pigeon / PigeonC / Sparrow
    "masters": 0,
    "distributors": 3,
    "reserved_fraction": 0.02,
    "fqw": 0,
    "probe_ratio": 2.0,
    "schedulers": 3,
}

SCHEDULERS = ("centralized", "megha", "pigeon", "pigeonc", "sparrow")


def _vector(text, key: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise ConfigError(f"parameter {key!r} is {text!r}; expected whole numbers separated by commas") from None
    if not out or any(v < 0 for v in out):
        raise ConfigError(f"parameter {key!r} is {text!r}; expected non-negative whole numbers")
    return out


def shape(params: dict) -> tuple[int, int, int]:
    """(gms, lms, workers_per_partition) of the cluster description (``workers`` > 0 derives the last).

    The machines are the same for every scheduler: the centralized baseline runs one GM and one LM
    over all of them (``centralize``), not a differently drawn cluster."""
    gms, lms, wpp = int(params["gms"]), int(params["lms"]), int(params["workers_per_partition"])
    total = int(params["workers"])
    for key, value in (("gms", gms), ("lms", lms)):
        if value < 1:
            raise ConfigError(f"parameter {key!r} is {value}; expected at least 1")
    if total > 0:
        if total % (gms * lms):
            raise ConfigError(f"workers={total} is not a multiple of gms*lms={gms * lms}")
        wpp = total // (gms * lms)
    if wpp < 1:
        raise ConfigError(f"workers_per_partition is {wpp}; expected at least 1")
    return gms, lms, wpp


def centralize(cluster):
    """The same machines as one cluster (one LM), keeping every worker's id and constraints."""
    profiles = "+".join(c.profile for c in cluster.clusters)
    workers = tuple(w for c in cluster.clusters for w in c.workers)
    return attrs.evolve(cluster, clusters=(attrs.evolve(cluster.clusters[0], index=0, profile=profiles,
                                                        workers=workers),))


def build_cluster(params: dict, seed: int):
    """The machines: ``lms`` clusters of ``gms * workers_per_partition`` workers each."""
    gms, lms, wpp = shape(params)
    table = cons.ConstraintTable.load(params["constraint_table"] or None)
    capacity = _vector(params["capacity"], "capacity")
    resources = ("slots",) if len(capacity) == 1 else ("cpu", "mem", "disk", "gpu")[: len(capacity)]
    cluster = cons.build_cluster(clusters=lms, workers_per_cluster=gms * wpp, table=table,
                                 stream=Stream(seed, "cluster"), capacity=capacity, resources=resources)
    if not params["constraints"]:
        cluster = attrs.evolve(cluster, clusters=tuple(
            attrs.evolve(c, workers=tuple(attrs.evolve(w, constraints=()) for w in c.workers))
            for c in cluster.clusters))
    return cluster, table


def build_workload(params: dict, seed: int, total_units: int, table):
    """The job stream (lazy), with task constraints drawn from the table when constraints are on."""
    kind = str(params["workload"])
    jobs = int(params["jobs"])
    demand = _vector(params["demand"], "demand")
    if kind.startswith("syn_"):
        try:
            n = int(kind[4:])
        except ValueError:
            raise ConfigError(f"workload {kind!r}: expected syn_N with N a whole number, e.g. syn_100") from None
        stream = syn_jobs(n, jobs=jobs if jobs > 0 else 2000, task_s=float(params["task_s"]))
    elif kind == "poisson":
        rate = float(params["rate"]) or None
        stream = poisson_jobs(Stream(seed, "workload"), jobs=jobs, fanout=int(params["fanout"]),
                              task_s=float(params["task_s"]), task_dist=params["task_dist"], rate=rate,
                              load=None if rate else float(params["load"]), workers=total_units)
    elif kind == "trace":
        if not params["trace"]:
            raise ConfigError("workload 'trace' needs --set trace=PATH")
        stream = read_trace(params["trace"], jobs=jobs if jobs > 0 else None)
    else:
        raise unknown_name("workload", kind, ("syn_N", "poisson", "trace"))
    if demand != (1,):
        stream = (attrs.evolve(j, demand=demand) for j in stream)
    if params["constraints"]:
        stream = cons.assign_task_constraints(stream, table, Stream(seed, "task-constraints"))
    return stream


def network(params: dict) -> Link:
    base = seconds_to_us(float(params["latency_ms"]) / 1000)
    jitter = seconds_to_us(float(params["jitter_ms"]) / 1000)
    latency = Latency.const(base) if jitter == 0 else Latency.uniform(max(0, base - jitter), base + jitter)
    return Link(latency, loss=float(params["loss"]))


def build(fabric, params: dict):
    """Build the whole run onto ``fabric``; returns the Run whose ``finish`` writes results."""
    from fedemu.model import Recorder
    from fedemu.actors.submitter import Submitter

    from .run import FederationRun

    scheduler = params["scheduler"]
    if scheduler not in SCHEDULERS:
        raise unknown_name("scheduler", scheduler, SCHEDULERS)
    if params["policy"] not in WORKER_CHOICE_NAMES:
        raise unknown_name("policy", params["policy"], WORKER_CHOICE_NAMES)
    policy = get_worker_choice(params["policy"])
    cluster, table = build_cluster(params, fabric.seed)
    total_units = sum(w.capacity[0] for w in cluster.workers())
    recorder = Recorder(total_units=total_units)
    fabric.network.default = network(params)
    index = cons.ConstraintIndex(cluster)
    max_cap = tuple(max(w.capacity[r] for w in cluster.workers()) for r in range(len(cluster.resources)))

    def feasible(constraints, demand) -> bool:
        if any(d > c for d, c in zip(demand, max_cap)) or len(demand) != len(max_cap):
            return False
        return index.feasible(constraints)

    targets = _build_scheduler(fabric, scheduler, params, cluster, policy, recorder, feasible)
    jobs = build_workload(params, fabric.seed, total_units, table)
    cutoff = seconds_to_us(float(params["short_cutoff_s"]))
    fabric.add("submitter", lambda: Submitter(jobs, targets, recorder, short_cutoff_us=cutoff))
    return FederationRun(params, cluster, recorder)


def _build_scheduler(fabric, scheduler, params, cluster, policy, recorder, feasible) -> list[int]:
    gms, _, _ = shape(params)
    if scheduler in ("megha", "centralized"):
        from fedemu.actors import megha

        heartbeat = float(params["heartbeat_s"])
        if not heartbeat > 0 or heartbeat == float("inf"):
            raise ConfigError(f"parameter 'heartbeat_s' is {params['heartbeat_s']!r}; expected a finite number > 0")
        if scheduler == "centralized":
            cluster, gms = centralize(cluster), 1
        return megha.build(fabric, cluster, gms=gms, policy=policy, recorder=recorder, feasible=feasible,
                           heartbeat_us=seconds_to_us(float(params["heartbeat_s"])))
    if scheduler in ("pigeon", "pigeonc"):
        from fedemu.actors import pigeon

        return pigeon.build(fabric, cluster, params, policy=policy, recorder=recorder, feasible=feasible,
                            constraint_aware=scheduler == "pigeonc")
    from fedemu.actors import sparrow

    return sparrow.build(fabric, cluster, params, recorder=recorder, feasible=feasible)
