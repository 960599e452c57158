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
from fedemu.actors.plugin import COST_MODELS, Context
from fedemu.fabric import costs
from fedemu.fabric.errors import ConfigError, unknown_name
from fedemu.fabric.network import Latency, Link, Network
from fedemu.fabric.rand import Stream
from fedemu.model import ClusterSpec, Param, Recorder, declared, seconds_to_us, typed
from fedemu.policies.worker_choice import WORKER_CHOICE_NAMES, get_worker_choice
from fedemu.scenarios import constraints as cons
from fedemu.scenarios import fault_plan
from fedemu.scenarios import machines
from fedemu.scenarios import preflight
from fedemu.scenarios.synthetic import poisson_jobs, syn_jobs
from fedemu.scenarios.trace import read_trace

from .run import FederationRun
from .run_params import (ClusterParams, FailureParams, NetworkParams, PoissonParams, RunParams, SynParams,
                         TraceParams, WorkloadParams)

# what each workload reads besides the common workload keys
WORKLOADS = {"poisson": PoissonParams, "syn_N": SynParams, "trace": TraceParams}
_RUN = declared(RunParams)
POLICY = _RUN[1]
POLICY_OPTIONS = {_RUN[3]: ("d-choices",), _RUN[4]: ("tebas",)}  # the policies' own keys, and whose they are
# a run's keys in the order its journal header keeps them (every journal before the parameter classes did)
_WORKLOAD_ORDER = ("workload", "trace", "jobs", "load", "rate", "fanout", "task_s", "task_dist", "short_cutoff_s",
                   "arrival_scale")


def _common() -> tuple[Param, ...]:
    """Every key a federation run has besides its scheduler's, in the journal header's order."""
    workload = {p.name: p for cls in (WorkloadParams, *WORKLOADS.values()) for p in declared(cls)}
    assert set(workload) == set(_WORKLOAD_ORDER), "a workload key is missing from _WORKLOAD_ORDER"
    return (*_RUN, *declared(ClusterParams), *(workload[k] for k in _WORKLOAD_ORDER), *declared(NetworkParams),
            *declared(FailureParams))


COMMON = _common()
PARAMS = {p.name: p.default for p in COMMON + tuple(p for s in registry.SCHEDULERS.values() for p in s.params)}


# the workload keys and the workloads that read them: setting one another workload ignores is an error
WORKLOAD_KEYS = {"workload": tuple(WORKLOADS),
                 **{p.name: tuple(w for w, cls in WORKLOADS.items() if p.name in attrs.fields_dict(cls))
                    for cls in WORKLOADS.values() for p in declared(cls)}}


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
    c = typed(ClusterParams, params)
    gms, lms, wpp, total = c.gms, c.lms, c.workers_per_partition, c.workers
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
    c = typed(ClusterParams, params)
    table = cons.ConstraintTable.load(c.constraint_table or None)
    table = table.with_scarcity(c.constraint_scarcity)
    types = machines.parse(c.machine_types) if c.machine_types else None
    if types is not None and c.capacity != "1":
        raise ConfigError(f"parameters 'capacity' ({c.capacity!r}) and 'machine_types' both set; "
                          "machine_types gives every machine's capacity")
    capacity = types[0].capacity if types else _vector(c.capacity, "capacity")
    resources = machines.resource_names(len(capacity))
    cluster = cons.build_cluster(clusters=lms, workers_per_cluster=gms * wpp, table=table,
                                 stream=Stream(seed, "cluster"), capacity=capacity, resources=resources)
    if types is not None:
        cluster = machines.assign(cluster, types, Stream(seed, "machine-types"))
    if not c.constraints:
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
    c = typed(ClusterParams, params)
    demand = _vector(c.demand, "demand")
    mix = machines.parse_demands(c.demands) if c.demands else None
    if mix is not None and c.demand != "1":
        raise ConfigError(f"parameters 'demand' ({c.demand!r}) and 'demands' both set; demands gives "
                          "every job's demand")
    low, high = machines.parse_alpha(c.alpha)
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


def build_workload(params: dict, seed: int, total_units: int, table, feasible=None, on_drop=None):
    """The job stream (lazy), with task constraints drawn from the table when constraints are on; with
    ``infeasible=drop-task`` and ``feasible`` given, a job's tasks no machine can run are dropped
    (``drop_infeasible``; ``on_drop(job, indices)`` hears of each such job as it is read)."""
    w = typed(WorkloadParams, params)
    kind, jobs = w.workload, w.jobs
    fill = job_filler(params, seed)
    users = registry.get(params["scheduler"]).users(params)
    if kind.startswith("syn_"):
        try:
            n = int(kind[4:])
        except ValueError:
            raise ConfigError(f"workload {kind!r}: expected syn_N with N a whole number, e.g. syn_100") from None
        stream = syn_jobs(n, jobs=jobs or preflight.DEFAULT_SYN_JOBS, task_s=typed(SynParams, params).task_s)
    elif kind == "poisson":
        po = typed(PoissonParams, params)
        rate = po.rate or None
        stream = poisson_jobs(Stream(seed, "workload"), jobs=jobs or preflight.DEFAULT_POISSON_JOBS,
                              fanout=po.fanout, task_s=po.task_s, task_dist=po.task_dist, rate=rate,
                              load=None if rate else po.load, workers=total_units)
    elif kind == "trace":
        trace = typed(TraceParams, params).trace
        if not trace:
            raise ConfigError("workload 'trace' needs --set trace=PATH")
        from_trace = len(users.front_ends) if users is not None and users.assign == "trace" else None
        stream = read_trace(trace, jobs=jobs if jobs > 0 else None, fill=fill, users=from_trace)
    else:
        raise unknown_name("workload", kind, ("syn_N", "poisson", "trace"))
    if kind != "trace":
        if users is not None and users.assign == "trace":
            raise ConfigError(f"user_assign=trace reads each job's user=K from a trace, but the workload is "
                              f"{kind!r}; use workload=trace, or user_assign=round-robin or weighted")
        stream = map(fill, stream)
    if typed(ClusterParams, params).constraints:
        stream = cons.assign_task_constraints(stream, table, Stream(seed, "task-constraints"))
    if users is not None and users.assign != "trace":
        stream = assign_users(stream, users, seed)
    if w.arrival_scale != 1:
        stream = scale_arrivals(stream, w.arrival_scale)
    if typed(ClusterParams, params).infeasible == "drop-task" and feasible is not None:
        stream = drop_infeasible(stream, feasible, on_drop)
    return stream


def scale_arrivals(jobs, scale: float):
    """Each job's arrival moved so the gaps from the first arrival are ``scale`` times as long."""
    first = None
    for job in jobs:
        first = job.arrival_us if first is None else first
        yield attrs.evolve(job, arrival_us=first + round((job.arrival_us - first) * scale))


def drop_infeasible(jobs, feasible, on_drop=None):
    """Each job without the tasks no machine can run (``feasible(constraints, demand)`` false): the 2023
    authors' simulators drop such a task and run the rest of its job (its ideal JRT is then its longest
    remaining task). A job none of whose tasks can run is passed on whole, for the front end to reject."""
    for job in jobs:
        ok = {c: feasible(c, job.demand) for c in dict.fromkeys(job.constraints)}
        if all(ok.values()):
            yield job
            continue
        keep = [i for i, c in enumerate(job.constraints) if ok[c]]
        if not keep:
            yield job
            continue
        if on_drop is not None:
            on_drop(job, tuple(i for i, c in enumerate(job.constraints) if not ok[c]))
        yield attrs.evolve(job, durations_us=tuple(job.durations_us[i] for i in keep),
                           constraints=tuple(job.constraints[i] for i in keep))




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
    n = typed(NetworkParams, params)
    base = seconds_to_us(n.latency_ms / 1000)
    jitter = seconds_to_us(n.jitter_ms / 1000)
    latency = Latency.const(base) if jitter == 0 else Latency.uniform(max(0, base - jitter), base + jitter)
    return Link(latency, loss=n.loss)


def connect(net: Network, params: dict) -> None:
    """Give ``net`` the run's default link and its connections' RTO and timeout (docs/connections.md)."""
    n = typed(NetworkParams, params)
    net.default = network(params)
    net.rto_us = max(1, seconds_to_us(n.rto_ms / 1000))
    net.timeout_us = max(1, seconds_to_us(n.conn_timeout_s))


def build(fabric, params: dict):
    """Build the whole run onto ``fabric``; returns the Run the runner checks and writes results of."""
    estimate = preflight.check(params)  # numbers, size and warnings, before anything is built
    params = {**params, "jobs": estimate.jobs}  # jobs=0 made definite: the summary's workload says how many
    run, c = typed(RunParams, params), typed(ClusterParams, params)
    scheduler = registry.get(run.scheduler)
    policy = get_worker_choice(run.policy, d=run.d, beta=run.beta,
                               alpha=sum(machines.parse_alpha(c.alpha)) / 2) if scheduler.takes_policy else None
    cluster, table = build_cluster(params, fabric.seed)
    total_units = sum(w.capacity[0] for w in cluster.workers())
    recorder = Recorder(total_units=total_units, machines={w.worker_id: w.capacity for w in cluster.workers()})
    connect(fabric.network, params)
    fabric.ties = typed(NetworkParams, params).ties
    fabric.cost_model = costs.load(run.cost_model, COST_MODELS)
    if fabric.cost_model is not None:  # components take time: the recorder measures processing
        recorder.timed = True
        fabric.on_served = recorder.served
    if c.demands:
        mix = machines.parse_demands(c.demands)
        if len(mix.vectors[0]) != len(cluster.resources):
            raise ConfigError(f"parameter 'demands' is {c.demands!r}; its vectors name "
                              f"{len(mix.vectors[0])} resource(s), the machines {len(cluster.resources)} "
                              f"({', '.join(cluster.resources)})")
    max_cap = tuple(max(w.capacity[r] for w in cluster.workers()) for r in range(len(cluster.resources)))
    feasible = _feasibility(cluster, max_cap)

    try:
        preflight.check_feasible(build_workload(params, fabric.seed, total_units, table, feasible), feasible, max_cap,
                                 cluster.resources)
    except ConfigError as e:
        if c.constraint_scarcity == 1:
            raise
        raise ConfigError(f"{e}; constraint_scarcity={c.constraint_scarcity:g} divides the share of "
                          "machines providing each constraint by that much") from None
    targets = scheduler.build(Context(fabric, cluster, params, recorder, feasible, policy,
                                      config=scheduler.config_of(params)))
    jobs = build_workload(params, fabric.seed, total_units, table, feasible, recorder.tasks_dropped)
    cutoff = seconds_to_us(typed(WorkloadParams, params).short_cutoff_s)
    how = scheduler.submission(params)  # how jobs reach its front ends
    fabric.add("submitter", lambda: Submitter(jobs, targets, recorder, short_cutoff_us=cutoff, choice=how.choice,
                                              resubmit_us=how.resubmit_us, route=how.route))
    workload = lambda: build_workload(params, fabric.seed, total_units, table, feasible)  # noqa: E731 (made again)
    fabric.add_faults(fault_plan.processes(params, fabric.names, fabric.seed, workload))
    result = FederationRun(params, cluster, recorder, workload)
    result.total_jobs = estimate.jobs  # the progress bar's total, known before the jobs are submitted
    return result
