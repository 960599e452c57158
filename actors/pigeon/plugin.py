"""Pigeon and PigeonC as plug-ins: distributors, one master per group, generic workers.

Choices where the papers are silent:
- A group is one cluster of the cluster description; with ``masters`` set to another count the same
  ordered worker list is cut into ``masters`` equal contiguous groups.
- ``fqw`` 0 means the paper's value: 20 for both (Pigeon's simulations used W = 20, its EC2 runs W = inf;
  PigeonC uses FQW = 20); ``inf`` is strict priority.
- Reserved workers (Pigeon only): round(reserved_fraction * group size), half up, the last ones of each
  group; PigeonC reserves none (so ``reserved_fraction`` does not apply to it).
- Actors, in this order: ``dist-<d>``, ``master-<g>``, then ``w-<worker id>`` in cluster order; they
  address each other by these names. Group g's members are ``master-<g>`` (rank 0) and its workers
  (ranks 1..n, cluster order); its first second master is its first worker.
- Faults: connections lose nothing while they are up (docs/connections.md), so nothing is acknowledged
  or resent on a timer; recovery starts from the fabric's notices of broken connections. Masters fail
  over to a second master, which the master updates every ``master_sync_s`` while its group's state
  changes, and, when both are lost, a worker is elected (``election``); a master takes a worker whose
  connection broke for down and relaunches its tasks (``failover``); a distributor sends a group's master
  what it still waits for when a connection that may have lost some of it breaks (``distributor``).
  Timeouts and periods are the ``--set`` keys below; the paper gives none, so the defaults are ours.
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.model import one_of, param, seconds_between, seconds_to_us, typed, whole_at_least
from fedemu.policies.fair_queue import check_weight

from ..common.invariants import Violation
from ..plugin import FRONT_END_COUNTERS, Column, Context, Role, Scheduler, Size, Table
from .events import EVENTS

PAPER_FQW = 20


def groups_of(cluster, masters: int) -> list[tuple]:
    """The worker groups: the clusters, or ``masters`` equal contiguous slices of all workers."""
    if masters in (0, len(cluster.clusters)):
        return [tuple(spec.workers) for spec in cluster.clusters]
    workers = tuple(cluster.workers())
    if len(workers) % masters:
        raise ConfigError(f"masters={masters} does not divide the {len(workers)} workers into equal groups")
    n = len(workers) // masters
    return [workers[g * n:(g + 1) * n] for g in range(masters)]


def fair_queue_weight(value):
    """The WFQ weight from ``fqw``: 0 means the paper's 20, else the fair queue's own rule (an integer
    >= 1, or inf)."""
    if value == 0 and not isinstance(value, bool):
        return PAPER_FQW
    return check_weight(value)


def _valid_fqw(value) -> bool:
    try:
        fair_queue_weight(value)
    except ConfigError:
        return False
    return True


def reserved_count(fraction, group_size: int) -> int:
    """Reserved high-priority workers of a group: round(fraction * size), half up, for a fraction the
    ``reserved_fraction`` Param accepted; at least one worker must stay for long jobs."""
    k = math.floor(fraction * group_size + 0.5)
    if k >= group_size:
        raise ConfigError(f"reserved_fraction={fraction} reserves {k} of {group_size} workers per group, "
                          "leaving none for long jobs")
    return k


_SECONDS = seconds_between(0.001, 3600)


@attrs.frozen
class PigeonBaseParams:
    """The keys Pigeon and PigeonC share: their groups, distributors and fair-queue weight, then the timeouts
    and periods of their failover and retries (the papers give none: the defaults are ours)."""

    masters: int = param(0, "masters (worker groups); 0: one per cluster, else equal slices of all workers",
                         whole_at_least(0))
    distributors: int = param(3, "distributors (front ends jobs are submitted to)", whole_at_least(1))
    fqw: int = param(0, "weighted-fair-queue weight W of short over long tasks; 0: the paper's 20, inf: strict",
                     {"ok": _valid_fqw, "expected": "an integer >= 1, inf, or 0 for the default"})
    master_sync_s: float = param(60.0, "seconds between a master's updates of its second master with what changed "
                                 "in its group's task state (none while nothing changes)", _SECONDS)
    master_timeout_s: float = param(3.0, "seconds a member waits for its master's answer once a cut broke their "
                                    "connection (or a distributor alerted it) before the second master takes over "
                                    "(or, with it lost too, an election); a new master waits at most three times "
                                    "this for its members' answers", _SECONDS)
    dist_retry_s: float = param(1.0, "seconds before a distributor alerts again a group whose master's connection "
                                "broke, doubling while no answer comes (up to a minute)", _SECONDS)
    resubmit_s: float = param(10.0, "the submitter's first backoff after a connection notice for a distributor: one "
                              "that crashed is not handed jobs for this long, one cut off past conn_timeout_s is "
                              "asked what it holds after it (doubling per notice, up to a minute)", _SECONDS)


@attrs.frozen
class PigeonCParams(PigeonBaseParams):
    """PigeonC's keys: the shared ones and how its distributors count each cluster's constraint sets."""

    cs_counts: str = param("paper", "the per-cluster constraint-set counts the distributors weigh clusters by: paper "
                           "(each machine set with its frequency, Megha 2023 4.2) or subset-merge (as the authors' "
                           "simulator builds them: a machine whose set is a subset of sets already counted adds one "
                           "to each of them; actors/pigeon/constraint_sets.py)", one_of(("paper", "subset-merge")))


@attrs.frozen
class PigeonParams(PigeonBaseParams):
    """Pigeon's keys: the shared ones and its reserved workers."""

    reserved_fraction: float = param(0.02, "share of each group's workers reserved for short jobs' tasks",
                                     {"ok": lambda v: not isinstance(v, bool) and isinstance(v, (int, float))
                                      and 0 <= v < 1, "expected": "a number in [0, 1)"})


COUNTERS = FRONT_END_COUNTERS + (
    ("wfq_high", "tasks of short jobs a master dispatched"),
    ("wfq_low", "tasks of long jobs a master dispatched"),
    ("failovers", "second masters that took over from a failed master"),
    ("master_elections", "workers that declared themselves master (both masters lost)"),
    ("syncs_skipped", "syncs a second master could not apply (one before it was lost with a connection): the "
                      "master sends the whole state next"),
    ("tasks_relaunched", "tasks a master queued again: lost with a crashed or cut-off worker"),
    ("tasks_requeued_from_list", "tasks a master queued again from a distributor's list of what it still waits "
                                 "for (lost with a broken connection: some may run twice)"),
    ("tasks_returned", "tasks a master handed back to their distributors: no live worker of its group could run "
                       "them (all down, or every low-priority one for a long job's task) for three master timeouts"),
    ("tasks_sent_elsewhere", "tasks a distributor sent to another group after their group's master handed them back"),
    ("results_forwarded", "results a master sent to a distributor besides the one the task's launch named (the job "
                          "was handed to more than one)"),
    ("jobs_redistributed", "jobs a distributor was handed again by the submitter and split afresh"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a distributor forgot it, or stopped answering)"),
    ("front_ends_taken_down", "times the submitter took a distributor for down (a crash or refusal notice)"),
    ("repeated_job_reports", "job-done reports after the first (two distributors finished the same job)"),
    ("duplicate_jobs_ignored", "job submissions a distributor had already received (handed to it again)"),
    ("masters_suspected", "times a distributor alerted a group whose master's connection broke"),
    ("duplicate_launches_suppressed", "launches a worker ignored: it already runs that task"),
    ("repeated_completions", "task results a distributor had already counted (duplicates, re-executions)"),
    ("results_before_job", "task results a distributor kept for a job it did not hold (it forgot the job in a "
                           "crash), counted done when the job is handed to it again"),
)
VIOLATIONS = (("constraint_violations", "tasks placed on a machine lacking one of their constraints"),)


def master_matches_workers(fabric) -> list[Violation]:
    """Each group's current master (the live member holding the role with the best claim) sees every
    live worker it counts as up with exactly the worker's true free capacity. A worker with a message
    still on its way between the two (a launch, an idle notice, a status), or whose status the master
    asked for, is not compared; nor is a group whose new master is still collecting statuses."""
    from .master import GroupMember  # (a run imports only its own scheduler's actors)

    best: dict[int, GroupMember] = {}
    for idx in range(len(fabric.names)):
        actor = fabric.actor(idx)
        if isinstance(actor, GroupMember) and actor.role is not None:
            g = actor.cfg.group
            if g not in best or actor.key > best[g].key:
                best[g] = actor
    out = []
    flying = {(m[0], m[1]) for m in fabric.in_flight()} if best else set()
    for g in sorted(best):
        master = best[g]
        role = master.role
        recovery = role.recovery
        if recovery.rebuild is not None:
            continue
        free = role.dispatch.view.free
        for local, wid in enumerate(role.worker_ids):
            worker = fabric.actor(wid)
            if worker is None or local in recovery.down or local in recovery.probed or role.mark[local] != worker.last:
                continue
            if (wid, master.id) in flying or (master.id, wid) in flying:
                continue
            seen = tuple(int(x) for x in free[local])
            if seen != tuple(worker.free):
                out.append(Violation("master_matches_workers", worker.name, fabric.now,
                                     f"{master.name} (epoch {role.epoch}) sees {seen} free, the worker has "
                                     f"{tuple(worker.free)}"))
    return out


# what tests/test_pigeon_faults.py proves, for the masters, workers and distributors' links (a crashed
# distributor loses its jobs, and so does a lost submission: the submitter hands a job over once)
SURVIVES = ("crash", "restart", "partition", "heal", "slow", "restore", "loss")


def _build(ctx: Context, *, constraint_aware: bool) -> list[str]:
    """Add every Pigeon (or PigeonC) actor; returns the distributor names."""
    # (imported here: the registry imports every plug-in, and a run only its own scheduler's actors)
    from .constraint_sets import ConstraintSetCounts, SubsetMergedCounts
    from .distributor import Distributor
    from .group import GroupConfig
    from .master import Master
    from .worker import PigeonWorker

    cfg, cluster, recorder = ctx.config, ctx.cluster, ctx.recorder
    groups = groups_of(cluster, cfg.masters)
    weight = fair_queue_weight(cfg.fqw)
    cutoff_us = seconds_to_us(float(ctx.params["short_cutoff_s"]))  # the run's, shared with the submitter
    reserved = 0 if constraint_aware else reserved_count(cfg.reserved_fraction, len(groups[0]))
    num_resources = len(cluster.resources)
    dist_names = [f"dist-{d}" for d in range(cfg.distributors)]
    master_names = [f"master-{g}" for g in range(len(groups))]
    members = [[master_names[g]] + [f"w-{w.worker_id}" for w in workers] for g, workers in enumerate(groups)]
    counts = None if not constraint_aware else \
        SubsetMergedCounts(groups) if cfg.cs_counts == "subset-merge" else ConstraintSetCounts(groups)
    sync_us, timeout_us = seconds_to_us(cfg.master_sync_s), seconds_to_us(cfg.master_timeout_s)
    retry_us = seconds_to_us(cfg.dist_retry_s)
    for d, name in enumerate(dist_names):
        ctx.add(name, lambda d=d: Distributor(master_names, counts=counts, short_cutoff_us=cutoff_us, recorder=recorder,
                                              feasible=ctx.feasible, members=members, retry_us=retry_us, index=d))
    configs = [GroupConfig(g, tuple(workers), members[g], dist_names, ctx.policy, weight, reserved, constraint_aware,
                           num_resources, recorder, sync_us, timeout_us) for g, workers in enumerate(groups)]
    for cfg in configs:
        ctx.add(master_names[cfg.group], lambda cfg=cfg: Master(cfg))
    for cfg in configs:
        for rank, w in enumerate(cfg.workers, 1):
            ctx.add(f"w-{w.worker_id}", lambda w=w, cfg=cfg, rank=rank: PigeonWorker(w, recorder, cfg, rank))
    return dist_names


def build_pigeon(ctx: Context) -> list[str]:
    return _build(ctx, constraint_aware=False)


def build_pigeonc(ctx: Context) -> list[str]:
    return _build(ctx, constraint_aware=True)


ROLES = (Role("master", ("master",), "a group's first master (the second master and elected ones are workers)"),
         Role("dist", ("dist",), "a distributor (a front end)"))
# what a fault search draws: groups, distributors, the WFQ weight (20, 1, strict priority), reserved workers
# (0.4 leaves a long-job worker in any group)
SEARCH = (("masters", (0, 1)), ("distributors", range(1, 4)), ("fqw", (0, 1, float("inf"))))
RESERVED_SEARCH = (("reserved_fraction", (0.02, 0.0, 0.4)),)
PATHS = ("failovers", "master_elections", "syncs_skipped", "tasks_relaunched", "tasks_requeued_from_list",
         "tasks_returned", "duplicate_launches_suppressed", "repeated_completions")
PANELS = (Table("masters", "master", "master", (
    Column("high q", ("queued_high",)), Column("low q", ("queued_low",)),
    Column("served hi/lo", ("served_high", "served_low"), "pair"), Column("idle", ("idle_workers",)),
    Column("idle reserved", ("idle_reserved",), optional=True), Column("idle general", ("idle_general",), optional=True),
    Column("reserved", ("reserved",))), caption_role="dist", caption=(("", "distributors"), ("open_jobs", "open jobs"))),)
# the failover scenario's tour: master-0 fails for good (its second master takes over), dist-0 crashes and
# restarts, dist-1 is cut off from master-1
TOUR = ({"at_s": 2.0, "kind": "crash", "target": "master-0"},
        {"at_s": 3.0, "kind": "crash", "target": "dist-0", "for_s": 1.0},
        {"at_s": 4.0, "kind": "partition", "sides": ["dist-1", "master-1"], "for_s": 2.0})


def size(params: dict) -> Size:
    """The masters (one per group: a cluster's, by default) and the distributors."""
    cfg = typed(PigeonBaseParams, params)
    return Size((cfg.masters or int(params["lms"])) + cfg.distributors, keys=("masters", "distributors"))


def keeps_a_long_job_worker(params: dict, workers: list) -> tuple:
    """Pigeon's reserved workers may not run a long job's task (Pigeon 2019, 2.2), so a run whose every
    low-priority worker died for good could never finish one: a fault search keeps the first worker it
    added, the first of group 0, which is never reserved (the reserved ones are each group's last)."""
    return tuple(workers[:1])


_COMMON = dict(survives=SURVIVES, checks=(master_matches_workers,), roles=ROLES, events=EVENTS, paths=PATHS,
               size=size, panels=PANELS, tour=TOUR)
PIGEON = Scheduler("pigeon", "Pigeon (2019): distributors split jobs evenly over group masters with two WFQ "
                   "classes and reserved workers; ignores constraints", build_pigeon,
                   config=PigeonParams, counters=COUNTERS + VIOLATIONS, constraint_aware=False,
                   search=SEARCH + RESERVED_SEARCH, keeps=keeps_a_long_job_worker, **_COMMON)
PIGEONC = Scheduler("pigeonc", "PigeonC (2023): Pigeon with constraint-aware distribution and matching, no "
                    "reserved workers", build_pigeonc, config=PigeonCParams, counters=COUNTERS, search=SEARCH,
                    **_COMMON)
