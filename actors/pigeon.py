"""Pigeon and PigeonC as plug-ins: distributors, one master per group, generic workers.

Choices where the papers are silent:
- A group is one cluster of the cluster description; with ``masters`` set to another count the same
  ordered worker list is cut into ``masters`` equal contiguous groups.
- ``fqw`` 0 means the paper's value: 20 for both (Pigeon's simulations used W = 20, its EC2 runs W = inf;
  PigeonC uses FQW = 20); ``inf`` is strict priority.
- Reserved workers (Pigeon only): round(reserved_fraction * group size), half up, the last ones of each
  group; PigeonC reserves none (so ``reserved_fraction`` does not apply to it).
- Actors, in this order: ``dist-<d>``, ``master-<g>``, then ``w-<worker id>`` in cluster order; they
  address each other by these names.
"""

from __future__ import annotations

import math

from fedemu.fabric.errors import ConfigError
from fedemu.model import Param, seconds_to_us, whole_at_least
from fedemu.policies.fair_queue import check_weight

from .distributor import ConstraintSetCounts, Distributor
from .master import Master
from .plugin import FRONT_END_COUNTERS, Context, Scheduler
from .worker import Worker

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


COMMON = (
    Param("masters", 0, "masters (worker groups); 0: one per cluster, else equal slices of all workers",
          **whole_at_least(0)),
    Param("distributors", 3, "distributors (front ends jobs are submitted to)", **whole_at_least(1)),
    Param("fqw", 0, "weighted-fair-queue weight W of short over long tasks; 0: the paper's 20, inf: strict",
          ok=_valid_fqw, expected="an integer >= 1, inf, or 0 for the default"),
)
RESERVED = Param("reserved_fraction", 0.02, "share of each group's workers reserved for short jobs' tasks",
                 ok=lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v < 1,
                 expected="a number in [0, 1)")

COUNTERS = FRONT_END_COUNTERS + (
    ("wfq_high", "tasks of short jobs a master dispatched"),
    ("wfq_low", "tasks of long jobs a master dispatched"),
)
VIOLATIONS = (("constraint_violations", "tasks placed on a machine lacking one of their constraints"),)


def _build(ctx: Context, *, constraint_aware: bool) -> list[str]:
    """Add every Pigeon (or PigeonC) actor; returns the distributor names."""
    params, cluster, recorder = ctx.params, ctx.cluster, ctx.recorder
    groups = groups_of(cluster, params["masters"])
    weight = fair_queue_weight(params["fqw"])
    cutoff_us = seconds_to_us(float(params["short_cutoff_s"]))
    reserved = 0 if constraint_aware else reserved_count(params["reserved_fraction"], len(groups[0]))
    num_resources = len(cluster.resources)
    dist_names = [f"dist-{d}" for d in range(params["distributors"])]
    master_names = [f"master-{g}" for g in range(len(groups))]
    counts = ConstraintSetCounts(groups) if constraint_aware else None
    for name in dist_names:
        ctx.add(name, lambda: Distributor(master_names, counts=counts, short_cutoff_us=cutoff_us,
                                          recorder=recorder, feasible=ctx.feasible))
    for g, workers in enumerate(groups):
        names = [f"w-{w.worker_id}" for w in workers]
        ctx.add(master_names[g], lambda g=g, workers=workers, names=names: Master(
            g, workers, names, policy=ctx.policy, weight=weight, reserved=reserved,
            constraint_aware=constraint_aware, num_resources=num_resources, recorder=recorder))
    for workers in groups:
        for w in workers:
            ctx.add(f"w-{w.worker_id}", lambda w=w: Worker(w, recorder))
    return dist_names


def build_pigeon(ctx: Context) -> list[str]:
    return _build(ctx, constraint_aware=False)


def build_pigeonc(ctx: Context) -> list[str]:
    return _build(ctx, constraint_aware=True)


PIGEON = Scheduler("pigeon", "Pigeon (2019): distributors split jobs evenly over group masters with two WFQ "
                   "classes and reserved workers; ignores constraints", build_pigeon,
                   params=COMMON + (RESERVED,), counters=COUNTERS + VIOLATIONS, constraint_aware=False)
PIGEONC = Scheduler("pigeonc", "PigeonC (2023): Pigeon with constraint-aware distribution and matching, no "
                    "reserved workers", build_pigeonc, params=COMMON, counters=COUNTERS)
