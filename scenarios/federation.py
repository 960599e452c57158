"""The common scenario: one cluster description, one workload, any scheduler, any policy.

``COMMON`` declares the keys every run has (scheduler, policy, cluster, workload, network); each
scheduler plug-in (``actors.registry``) declares its own. ``PARAMS`` holds the defaults of all of them,
so scenario scripts import ``PARAMS`` and ``build`` from here and change the defaults they care about;
``declare`` says which keys apply to a run (the common ones and the chosen scheduler's), and a key set
with ``--set`` that does not apply is an error. ``build`` turns the parameters into a cluster (clusters
of workers with constraint profiles, described once so every scheduler maps the same machines onto its
own shape), a streamed workload with task constraints, the scheduler's actors and the network.
"""

from __future__ import annotations

import attrs

from fedemu.actors import registry
from fedemu.actors.common.submitter import Submitter
from fedemu.actors.plugin import COST_MODELS, DEFAULT_COST_MODEL, Context
from fedemu.fabric import costs
from fedemu.fabric.errors import ConfigError, unknown_name
from fedemu.fabric.network import Latency, Link
from fedemu.fabric.rand import Stream
from fedemu.fabric.ties import TIE_ORDERS
from fedemu.model import (ClusterSpec, Param, Recorder, finite_at_least, one_of, probability, seconds_to_us,
                          whole_at_least)
from fedemu.policies.worker_choice import WORKER_CHOICE_NAMES, get_worker_choice
from fedemu.scenarios import constraints as cons
from fedemu.scenarios import fault_plan
from fedemu.scenarios import machines
from fedemu.scenarios import preflight
from fedemu.scenarios.synthetic import TASK_DISTS, poisson_jobs, syn_jobs
from fedemu.scenarios.trace import read_trace

from .run import FederationRun

POLICY = Param("policy", "random", f"worker-choice policy: {', '.join(sorted(WORKER_CHOICE_NAMES))}",
               choices=tuple(sorted(WORKER_CHOICE_NAMES)))  # checked by ``declare`` (its error names the known ones)
# the worker-choice policies' own keys, with the policies they apply to
POLICY_OPTIONS = {
    Param("d", 2, "d-choices: draw among the D least-loaded candidates (1: greedy)", **whole_at_least(1)):
        ("d-choices",),
    Param("beta", 3, "tebas: machines per Fitness group (Algorithm 1's beta) when a gang is placed whole",
          **whole_at_least(1)): ("tebas",),
}
COMMON = (
    Param("scheduler", registry.DEFAULT, f"the scheduler: {', '.join(registry.SCHEDULERS)}"),
    POLICY,
    Param("cost_model", DEFAULT_COST_MODEL, "service times of the scheduler components (every actor but the "
          "workers and the submitter): zero (none), a model in actors/costs/, or a model JSON file"),
    *POLICY_OPTIONS,
    # cluster: lms clusters of gms * workers_per_partition workers ("workers" > 0 derives the shape)
    Param("gms", 3, "partitions per cluster (a scheduler may give each a manager); with lms and "
          "workers_per_partition fixes the machines", **whole_at_least(1)),
    Param("lms", 4, "clusters (a scheduler may give each a manager, or make each a group)", **whole_at_least(1)),
    Param("workers_per_partition", 25, "workers per partition (each cluster has gms * this many)",
          **whole_at_least(1)),
    Param("workers", 0, "total workers; > 0 derives workers_per_partition (a multiple of gms * lms)",
          **whole_at_least(0)),
    Param("capacity", "1", "each worker's capacity vector, e.g. 1 (slots) or 4,16 (cpu,mem)"),
    Param("demand", "1", "each task's demand vector, as long as capacity"),
    Param("demands", "", "per-job demand vectors drawn from a mix DEMAND:SHARE,..., e.g. 1x2:60,2x4:30,4x8:10 "
          "(replaces demand); a trace line's own demand= stands"),
    Param("machine_types", "", "mixed machines CAPACITY@SPEED:SHARE,..., e.g. 4x16@1.0:60,8x32@1.5:40 (replaces "
          "capacity; speed k_n >= 1); empty: every machine has capacity and speed 1"),
    Param("alpha", "0", "jobs' parallel fraction: a run time is duration x ((1-alpha) + alpha/k_n); a number "
          "from 0 to 1 or U(a,b) drawn per job"),
    Param("constraints", True, "draw machine and task constraints from the constraint table"),
    Param("constraint_table", "", "a constraint table JSON file; empty: the built-in stand-in table"),
    Param("constraint_scarcity", 1.0, "how rare constrained machines are: each machine fraction f of the table "
          "becomes min(1, f / this); 1: the table as written, 2: half as many machines provide each constraint",
          **finite_at_least(0, strict=True)),
    # workload
    Param("workload", "poisson", "syn_N (jobs of N 1-s tasks), poisson, or trace"),
    Param("trace", "", "the trace file of workload=trace"),
    Param("jobs", 0, "jobs to submit; 0: the workload's own size (500 poisson jobs, 2000 syn_N jobs, the "
          "whole trace)", **whole_at_least(0)),
    Param("load", 0.8, "poisson: offered load as a share of the slots (when rate is 0)", **finite_at_least(0)),
    Param("rate", 0.0, "poisson: jobs per second; 0 derives it from load", **finite_at_least(0)),
    Param("fanout", 10, "poisson: tasks per job", **whole_at_least(1)),
    Param("task_s", 1.0, "mean task duration in seconds (poisson, syn_N)", **finite_at_least(0, strict=True)),
    Param("task_dist", "exp", f"poisson: task duration distribution: {', '.join(sorted(TASK_DISTS))}"),
    Param("short_cutoff_s", 90.5811, "jobs whose mean task is at most this many seconds count as short",
          **finite_at_least(0)),
    # network
    Param("latency_ms", 0.5, "one-way message latency in milliseconds", **finite_at_least(0)),
    Param("jitter_ms", 0.0, "latency spread: uniform in latency +- jitter", **finite_at_least(0)),
    Param("loss", 0.0, "probability that a message is lost", **probability()),
    Param("dup", 0.0, "probability that a message is delivered twice", **probability()),
    Param("ties", TIE_ORDERS[0], "order of messages due at one time: seeded (a seeded order of the senders that "
          "changes with the time) or sender (lowest sender id first, the older order)",
          **one_of(TIE_ORDERS)),
    # random failure processes (scenarios.fault_plan): exponential times to failure and to repair per actor
    Param("worker_mtbf_s", 0.0, "mean seconds between a worker's failures; 0: workers never fail",
          **finite_at_least(0)),
    Param("worker_mttr_s", 0.0, "mean seconds to repair a failed worker; 0: it stays down", **finite_at_least(0)),
    Param("manager_mtbf_s", 0.0, "the same for managers (every actor of a role but worker: see the roles in "
          "docs/faults.md)", **finite_at_least(0)),
    Param("manager_mttr_s", 0.0, "mean seconds to repair a failed manager; 0: it stays down",
          **finite_at_least(0)),
    Param("fault_horizon_s", 0.0, "failure processes draw crashes up to this virtual time; 0: the last arrival "
          "plus the longest task", **finite_at_least(0)),
)

PARAMS = {p.name: p.default for p in COMMON + tuple(p for s in registry.SCHEDULERS.values() for p in s.params)}


# the workload keys and the workloads that read them: setting one another workload ignores is an error
WORKLOAD_KEYS = {"workload": ("poisson", "syn_N", "trace"), "trace": ("trace",), "load": ("poisson",),
                 "rate": ("poisson",), "fanout": ("poisson",), "task_dist": ("poisson",),
                 "task_s": ("poisson", "syn_N")}


def declare(params: dict, given=()) -> list[tuple[str, tuple[Param, ...]]]:
    """The keys that apply to a run, as (section title, params); ``given`` (the keys set with --set)
    must all apply, else a ConfigError naming the key and what it belongs to (a scheduler, or a
    workload: ``trace`` with workload=poisson would be ignored)."""
    scheduler = registry.get(params["scheduler"])
    common = COMMON if scheduler.takes_policy else tuple(p for p in COMMON
                                                         if p is not POLICY and p not in POLICY_OPTIONS)
    if scheduler.takes_policy and params["policy"] not in WORKER_CHOICE_NAMES:
        raise unknown_name("policy", params["policy"], WORKER_CHOICE_NAMES)
    applies = {p.name for p in common} | set(scheduler.param_names)
    for key in given:
        option = next((p for p in POLICY_OPTIONS if p.name == key), None)
        if (key in applies and option is not None and params["policy"] not in POLICY_OPTIONS[option]
                and params[key] != option.default):  # a replay gives every key, at its default when unused
            raise ConfigError(f"parameter {key!r} applies to policy {'/'.join(POLICY_OPTIONS[option])}, not "
                              f"{params['policy']!r}")
        if key in applies:
            continue
        if key == POLICY.name or key in {p.name for p in POLICY_OPTIONS}:
            raise ConfigError(f"parameter {key!r} does not apply to scheduler {scheduler.name!r}: it takes no "
                              "worker-choice policy")
        owners = [s.name for s in registry.SCHEDULERS.values() if key in s.param_names]
        raise ConfigError(f"parameter {key!r} does not apply to scheduler {scheduler.name!r} (it is "
                          f"{'/'.join(owners)}'s); see fedemu run --help-params --set scheduler={scheduler.name}")
    kind = "syn_N" if str(params["workload"]).startswith("syn_") else str(params["workload"])
    defaults = {p.name: p.default for p in COMMON}
    for key in given:
        readers = WORKLOAD_KEYS.get(key)
        if readers is not None and kind in WORKLOAD_KEYS["workload"] and kind not in readers \
                and params[key] != defaults[key]:  # (a replay gives every key, most at their defaults)
            raise ConfigError(f"parameter {key!r} does not apply to workload {params['workload']!r} (only "
                              f"{' and '.join(readers)} read{'s' if len(readers) == 1 else ''} it)")
    return [("common", common), (f"scheduler {scheduler.name}", scheduler.params)]


def _vector(text, key: str) -> tuple[int, ...]:
    try:
        out = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise ConfigError(f"parameter {key!r} is {text!r}; expected whole numbers separated by commas") from None
    if not out or any(v < 0 or v > 2**31 - 1 for v in out):  # an amount of one resource; numpy holds it in int64
        raise ConfigError(f"parameter {key!r} is {text!r}; expected whole numbers from 0 to 2^31-1")
    return out


def shape(params: dict) -> tuple[int, int, int]:
    """(gms, lms, workers_per_partition) of the cluster description (``workers`` > 0 derives the last).

    The machines are the same for every scheduler: the centralized baseline runs one GM and one LM
    over all of them, not a differently drawn cluster."""
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


def build_cluster(params: dict, seed: int):
    """The machines: ``lms`` clusters of ``gms * workers_per_partition`` workers each."""
    gms, lms, wpp = shape(params)
    table = cons.ConstraintTable.load(params["constraint_table"] or None)
    table = table.with_scarcity(float(params["constraint_scarcity"]))
    types = machines.parse(params["machine_types"]) if params["machine_types"] else None
    if types is not None and str(params["capacity"]) != "1":
        raise ConfigError(f"parameters 'capacity' ({params['capacity']!r}) and 'machine_types' both set; "
                          "machine_types gives every machine's capacity")
    capacity = types[0].capacity if types else _vector(params["capacity"], "capacity")
    resources = machines.resource_names(len(capacity))
    cluster = cons.build_cluster(clusters=lms, workers_per_cluster=gms * wpp, table=table,
                                 stream=Stream(seed, "cluster"), capacity=capacity, resources=resources)
    if types is not None:
        cluster = machines.assign(cluster, types, Stream(seed, "machine-types"))
    if not params["constraints"]:
        cluster = attrs.evolve(cluster, clusters=tuple(
            attrs.evolve(c, workers=tuple(attrs.evolve(w, constraints=()) for w in c.workers))
            for c in cluster.clusters))
    return cluster, table


def _feasibility(cluster, max_cap):
    """feasible(constraints, demand): some machine has the constraints and capacity >= demand. With
    several capacity vectors, one constraint index per vector (a few types: a few indexes)."""
    by_capacity: dict[tuple, list] = {}
    for w in cluster.workers():
        by_capacity.setdefault(tuple(w.capacity), []).append(w)
    if len(by_capacity) == 1:
        index = cons.ConstraintIndex(cluster)

        def feasible_one(constraints, demand) -> bool:
            if any(d > c for d, c in zip(demand, max_cap)) or len(demand) != len(max_cap):
                return False
            return index.feasible(constraints)
        return feasible_one
    indexes = [(cap, cons.ConstraintIndex(attrs.evolve(cluster, clusters=(ClusterSpec(0, "", tuple(ws)),))))
               for cap, ws in sorted(by_capacity.items())]

    def feasible(constraints, demand) -> bool:
        if len(demand) != len(max_cap):
            return False
        return any(all(d <= c for d, c in zip(demand, cap)) and index.feasible(constraints)
                   for cap, index in indexes)
    return feasible


def job_filler(params: dict, seed: int):
    """``fill(job, given=())``: the job with the run's demand (``demand``, or one drawn from the ``demands``
    mix), alpha (drawn per job for ``U(a,b)``) and the scheduler's traits (``job_traits``: a gang flag, say),
    except the keys in ``given`` (a trace line's own)."""
    demand = _vector(params["demand"], "demand")
    mix = machines.parse_demands(params["demands"]) if params["demands"] else None
    if mix is not None and str(params["demand"]) != "1":
        raise ConfigError(f"parameters 'demand' ({params['demand']!r}) and 'demands' both set; demands gives "
                          "every job's demand")
    low, high = machines.parse_alpha(params["alpha"])
    mixes, alphas = Stream(seed, "demands"), Stream(seed, "alpha")
    traits = registry.get(params["scheduler"]).job_traits(params)  # every job's own fields (a gang, say)

    def fill(job, given=frozenset()):
        changes = {}
        d = mix.draw(mixes) if mix is not None else demand
        if d != (1,) and "demand" not in given:
            changes["demand"] = d
        if high > 0:
            a = low if low == high else alphas.uniform(low, high)
            if "alpha" not in given:
                changes["alpha"] = a
        changes.update(traits)
        return attrs.evolve(job, **changes) if changes else job
    return fill


def build_workload(params: dict, seed: int, total_units: int, table):
    """The job stream (lazy), with task constraints drawn from the table when constraints are on."""
    kind = str(params["workload"])
    jobs = int(params["jobs"])
    fill = job_filler(params, seed)
    users = registry.get(params["scheduler"]).users(params)
    if kind.startswith("syn_"):
        try:
            n = int(kind[4:])
        except ValueError:
            raise ConfigError(f"workload {kind!r}: expected syn_N with N a whole number, e.g. syn_100") from None
        stream = syn_jobs(n, jobs=jobs or preflight.DEFAULT_SYN_JOBS, task_s=float(params["task_s"]))
    elif kind == "poisson":
        rate = float(params["rate"]) or None
        stream = poisson_jobs(Stream(seed, "workload"), jobs=jobs or preflight.DEFAULT_POISSON_JOBS,
                              fanout=int(params["fanout"]),
                              task_s=float(params["task_s"]), task_dist=params["task_dist"], rate=rate,
                              load=None if rate else float(params["load"]), workers=total_units)
    elif kind == "trace":
        if not params["trace"]:
            raise ConfigError("workload 'trace' needs --set trace=PATH")
        from_trace = len(users.front_ends) if users is not None and users.assign == "trace" else None
        stream = read_trace(params["trace"], jobs=jobs if jobs > 0 else None, fill=fill, users=from_trace)
    else:
        raise unknown_name("workload", kind, ("syn_N", "poisson", "trace"))
    if kind != "trace":
        if users is not None and users.assign == "trace":
            raise ConfigError(f"user_assign=trace reads each job's user=K from a trace, but the workload is "
                              f"{kind!r}; use workload=trace, or user_assign=round-robin or weighted")
        stream = map(fill, stream)
    if params["constraints"]:
        stream = cons.assign_task_constraints(stream, table, Stream(seed, "task-constraints"))
    if users is not None and users.assign != "trace":
        stream = assign_users(stream, users, seed)
    return stream


def assign_users(jobs, users, seed: int):
    """Each job's user (``users``: the plug-in's ``Users``): round robin over the users, or drawn by share
    (assign "weighted", from the seeded stream "users"; the unassigned rest of 100% is spread evenly)."""
    count = len(users.front_ends)
    if users.assign == "weighted":
        shares = users.shares.fractions
        rest = (1.0 - sum(shares)) / count
        weights = [s + rest for s in shares]
        rng = Stream(seed, "users")
        for job in jobs:
            yield attrs.evolve(job, user=rng.weighted_index(weights))
        return
    for n, job in enumerate(jobs):
        yield attrs.evolve(job, user=n % count)


def network(params: dict) -> Link:
    base = seconds_to_us(float(params["latency_ms"]) / 1000)
    jitter = seconds_to_us(float(params["jitter_ms"]) / 1000)
    latency = Latency.const(base) if jitter == 0 else Latency.uniform(max(0, base - jitter), base + jitter)
    return Link(latency, loss=float(params["loss"]), dup=float(params["dup"]))


def build(fabric, params: dict):
    """Build the whole run onto ``fabric``; returns the Run the runner checks and writes results of."""
    estimate = preflight.check(params)  # numbers, size and warnings, before anything is built
    params = {**params, "jobs": estimate.jobs}  # jobs=0 made definite: the summary's workload says how many
    scheduler = registry.get(params["scheduler"])
    policy = get_worker_choice(params["policy"], d=int(params["d"]), beta=int(params["beta"]),
                               alpha=sum(machines.parse_alpha(params["alpha"])) / 2) if scheduler.takes_policy else None
    cluster, table = build_cluster(params, fabric.seed)
    total_units = sum(w.capacity[0] for w in cluster.workers())
    recorder = Recorder(total_units=total_units, machines={w.worker_id: w.capacity for w in cluster.workers()})
    fabric.network.default = network(params)
    fabric.ties = params["ties"]
    fabric.cost_model = costs.load(params["cost_model"], COST_MODELS)
    if fabric.cost_model is not None:  # components take time: the recorder measures processing
        recorder.timed = True
        fabric.on_served = recorder.served
    if params["demands"]:
        mix = machines.parse_demands(params["demands"])
        if len(mix.vectors[0]) != len(cluster.resources):
            raise ConfigError(f"parameter 'demands' is {params['demands']!r}; its vectors name "
                              f"{len(mix.vectors[0])} resource(s), the machines {len(cluster.resources)} "
                              f"({', '.join(cluster.resources)})")
    max_cap = tuple(max(w.capacity[r] for w in cluster.workers()) for r in range(len(cluster.resources)))
    feasible = _feasibility(cluster, max_cap)

    try:
        preflight.check_feasible(build_workload(params, fabric.seed, total_units, table), feasible, max_cap,
                                 cluster.resources)
    except ConfigError as e:
        if float(params["constraint_scarcity"]) == 1:
            raise
        raise ConfigError(f"{e}; constraint_scarcity={params['constraint_scarcity']:g} divides the share of "
                          "machines providing each constraint by that much") from None
    targets = scheduler.build(Context(fabric, cluster, params, recorder, feasible, policy))
    jobs = build_workload(params, fabric.seed, total_units, table)
    cutoff = seconds_to_us(float(params["short_cutoff_s"]))
    how = scheduler.submission(params)  # how jobs reach its front ends
    fabric.add("submitter", lambda: Submitter(jobs, targets, recorder, short_cutoff_us=cutoff, choice=how.choice,
                                              resubmit_us=how.resubmit_us, route=how.route))
    fabric.add_faults(fault_plan.processes(params, fabric.names, fabric.seed,
                                           lambda: build_workload(params, fabric.seed, total_units, table)))
    run = FederationRun(params, cluster, recorder)
    run.total_jobs = estimate.jobs  # the progress bar's total, known before the jobs are submitted
    return run
