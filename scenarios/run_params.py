"""The keys every federation run has, as parameter classes (``model.param`` fields): the run's scheduler and
policy, the machines, the workload (its common keys, then each workload's own), the network, and random
failure processes. Each scheduler's own keys are its plug-in's class (``actors.registry``).

``federation`` turns them into the scenario's ``PARAMS`` and ``declare``; what builds a run reads their
instances (``model.typed``), never raw ``--set`` text.
"""

from __future__ import annotations

import attrs

from fedemu.actors import registry
from fedemu.actors.plugin import DEFAULT_COST_MODEL
from fedemu.fabric.ties import TIE_ORDERS
from fedemu.model import finite_at_least, one_of, param, probability, whole_at_least
from fedemu.policies.worker_choice import WORKER_CHOICE_NAMES

from .synthetic import TASK_DISTS

INFEASIBLE = ("reject-job", "drop-task")


@attrs.frozen
class RunParams:
    """The run's scheduler, its worker-choice policy and the policies' own keys, and the service-time model."""

    scheduler: str = param(registry.DEFAULT, f"the scheduler: {', '.join(registry.SCHEDULERS)}")
    # (checked by ``federation.declare``, whose error names the known ones)
    policy: str = param("random", f"worker-choice policy: {', '.join(sorted(WORKER_CHOICE_NAMES))}",
                        {"choices": tuple(sorted(WORKER_CHOICE_NAMES))})
    cost_model: str = param(DEFAULT_COST_MODEL, "service times of the scheduler components (every actor but the "
                            "workers and the submitter): zero (none), a model in actors/costs/, or a model JSON file")
    d: int = param(2, "d-choices: draw among the D least-loaded candidates (1: greedy)", whole_at_least(1))
    beta: int = param(3, "tebas: machines per Fitness group (Algorithm 1's beta) when a gang is placed whole",
                      whole_at_least(1))


@attrs.frozen
class ClusterParams:
    """The machines (``lms`` clusters of ``gms * workers_per_partition`` workers, the same for every
    scheduler), their constraints, and what jobs demand of them."""

    gms: int = param(3, "partitions per cluster (a scheduler may give each a manager); with lms and "
                     "workers_per_partition fixes the machines", whole_at_least(1))
    lms: int = param(4, "clusters (a scheduler may give each a manager, or make each a group)", whole_at_least(1))
    workers_per_partition: int = param(25, "workers per partition (each cluster has gms * this many)",
                                       whole_at_least(1))
    workers: int = param(0, "total workers; > 0 derives workers_per_partition (a multiple of gms * lms)",
                         whole_at_least(0))
    capacity: str = param("1", "each worker's capacity vector, e.g. 1 (slots) or 4,16 (cpu,mem)")
    demand: str = param("1", "each task's demand vector, as long as capacity")
    demands: str = param("", "per-job demand vectors drawn from a mix DEMAND:SHARE,..., e.g. 1x2:60,2x4:30,4x8:10 "
                         "(replaces demand); a trace line's own demand= stands")
    machine_types: str = param("", "mixed machines CAPACITY@SPEED:SHARE,..., e.g. 4x16@1.0:60,8x32@1.5:40 (replaces "
                               "capacity; speed k_n >= 1); empty: every machine has capacity and speed 1")
    alpha: str = param("0", "jobs' parallel fraction: a run time is duration x ((1-alpha) + alpha/k_n); a number from "
                       "0 to 1 or U(a,b) drawn per job")
    constraints: bool = param(True, "draw machine and task constraints from the constraint table")
    constraint_table: str = param("", "a constraint table: standin (the built-in stand-in, also empty), megha-2023 "  # plugin-boundary: a table named for the 2023 paper
                                  "(the 2023 paper's authors' inputs), or a table JSON file")
    infeasible: str = param(INFEASIBLE[0], "a task no machine can run: reject-job (its whole job is rejected at "
                            "submission, counted unschedulable) or drop-task (the task is dropped and its job runs "
                            "without it, as the 2023 authors' simulators do; a job left with no task is rejected)",
                            one_of(INFEASIBLE))
    constraint_scarcity: float = param(1.0, "how rare constrained machines are: each machine fraction f of the table "
                                       "becomes min(1, f / this); 1: the table as written, 2: half as many machines "
                                       "provide each constraint", finite_at_least(0, strict=True))


@attrs.frozen
class WorkloadParams:
    """Which workload, how many jobs, and which jobs count as short."""

    workload: str = param("poisson", "syn_N (jobs of N 1-s tasks), poisson, or trace")
    jobs: int = param(0, "jobs to submit; 0: the workload's own size (500 poisson jobs, 2000 syn_N jobs, the whole "
                      "trace)", whole_at_least(0))
    short_cutoff_s: float = param(90.5811, "jobs whose mean task is at most this many seconds count as short",
                                  finite_at_least(0))
    arrival_scale: float = param(1.0, "multiply the gaps between job arrivals by this (0.5: arrivals twice as fast, so "
                                 "twice the workers carry the same load)",
                                 {"ok": lambda v: not isinstance(v, bool) and isinstance(v, (int, float))
                                  and 1e-6 <= v <= 1e6, "expected": "a number from 1e-06 to 1e+06"})


@attrs.frozen
class PoissonParams:
    """The Poisson workload: jobs of ``fanout`` tasks arriving at a rate (or a load)."""

    load: float = param(0.8, "poisson: offered load as a share of the slots (when rate is 0)", finite_at_least(0))
    rate: float = param(0.0, "poisson: jobs per second; 0 derives it from load", finite_at_least(0))
    fanout: int = param(10, "poisson: tasks per job", whole_at_least(1))
    task_s: float = param(1.0, "mean task duration in seconds (poisson, syn_N)", finite_at_least(0, strict=True))
    task_dist: str = param("exp", f"poisson: task duration distribution: {', '.join(sorted(TASK_DISTS))}")


@attrs.frozen
class SynParams:
    """The syn_N workload: jobs of N tasks of ``task_s`` each."""

    task_s: float = param(1.0, "mean task duration in seconds (poisson, syn_N)", finite_at_least(0, strict=True))


@attrs.frozen
class TraceParams:
    """The trace workload: a trace file's jobs."""

    trace: str = param("", "the trace file of workload=trace")


@attrs.frozen
class NetworkParams:
    """The network between every two actors: latency, jitter, loss, the connections' RTO and timeout
    (docs/connections.md), and the order of messages due at one time."""

    latency_ms: float = param(0.5, "one-way message latency in milliseconds", finite_at_least(0))
    jitter_ms: float = param(0.0, "latency spread: uniform in latency +- jitter", finite_at_least(0))
    loss: float = param(0.0, "probability that a transmission is lost; a connection retransmits it after the RTO, "
                        "so loss delays messages (docs/connections.md)", probability())
    rto_ms: float = param(200.0, "a connection's first retransmission timeout, doubling at each try (Linux's "
                          "minimum RTO, 200 ms)", finite_at_least(0, strict=True))
    conn_timeout_s: float = param(60.0, "a message undelivered this long (a partition or total loss) breaks its "
                                  "connection; both ends are told (RabbitMQ's default heartbeat timeout, 60 s)",
                                  finite_at_least(0, strict=True))
    ties: str = param(TIE_ORDERS[0], "order of messages due at one time: seeded (a seeded order of the senders that "
                      "changes with the time) or sender (lowest sender id first, the older order)", one_of(TIE_ORDERS))


@attrs.frozen
class FailureParams:
    """Random failure processes (``scenarios.fault_plan``): exponential times to failure and to repair
    per actor, workers and managers apart."""

    worker_mtbf_s: float = param(0.0, "mean seconds between a worker's failures; 0: workers never fail",
                                 finite_at_least(0))
    worker_mttr_s: float = param(0.0, "mean seconds to repair a failed worker; 0: it stays down", finite_at_least(0))
    manager_mtbf_s: float = param(0.0, "the same for managers (every actor of a role but worker: see the roles in "
                                  "docs/faults.md)", finite_at_least(0))
    manager_mttr_s: float = param(0.0, "mean seconds to repair a failed manager; 0: it stays down", finite_at_least(0))
    fault_horizon_s: float = param(0.0, "failure processes draw crashes up to this virtual time; 0: the last arrival "
                                   "plus the longest task", finite_at_least(0))
