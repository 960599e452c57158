"""Wires Pigeon / PigeonC onto a fabric: distributors, one master per group, generic workers.

Choices where the papers are silent:
- A group is one cluster of the cluster description; with ``masters`` set to another count the same
  ordered worker list is cut into ``masters`` equal contiguous groups.
- ``fqw`` 0 means the paper's value: 20 for both (Pigeon's simulations used W = 20, its EC2 runs W = inf;
  PigeonC uses FQW = 20); ``inf`` is strict priority.
- Reserved workers (Pigeon only): round(reserved_fraction * group size), half up, the last ones of each
  group; PigeonC reserves none (so ``reserved_fraction`` does not apply to it).
- Actor ids: distributors, then masters, then workers (``w-<worker id>``) in cluster order.
"""

from __future__ import annotations

import math

from fedemu.fabric.errors import ConfigError
from fedemu.model import seconds_to_us

from .distributor import ConstraintSetCounts, Distributor
from .master import Master
from .worker import Worker

PAPER_FQW = 20


def _whole(params: dict, key: str, minimum: int) -> int:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"parameter {key!r} is {value!r}; expected a whole number >= {minimum}")
    return value


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
    """The WFQ weight from ``fqw``: 0 -> the paper's 20, an integer >= 1, or inf."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ConfigError(f"parameter 'fqw' is {value!r}; expected an integer >= 1, inf, or 0 for the default")
    if value == 0:
        return PAPER_FQW
    if math.isinf(value) and value > 0:
        return math.inf
    if value < 1 or not float(value).is_integer():
        raise ConfigError(f"parameter 'fqw' is {value!r}; expected an integer >= 1, inf, or 0 for the default")
    return int(value)


def reserved_count(fraction, group_size: int) -> int:
    """Reserved high-priority workers of a group: round(fraction * size), half up; at least one stays."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise ConfigError(f"parameter 'reserved_fraction' is {fraction!r}; expected a number in [0, 1)")
    k = math.floor(fraction * group_size + 0.5)
    if k >= group_size:
        raise ConfigError(f"reserved_fraction={fraction} reserves {k} of {group_size} workers per group, "
                          "leaving none for long jobs")
    return k


def build(fabric, cluster, params: dict, *, policy, recorder, feasible, constraint_aware: bool) -> list[int]:
    """Add every Pigeon (or PigeonC) actor; returns the distributor ids (where jobs are submitted)."""
    groups = groups_of(cluster, _whole(params, "masters", 0))
    num_dist = _whole(params, "distributors", 1)
    weight = fair_queue_weight(params["fqw"])
    cutoff_s = params["short_cutoff_s"]
    if isinstance(cutoff_s, bool) or not isinstance(cutoff_s, (int, float)) or not 0 <= cutoff_s < math.inf:
        raise ConfigError(f"parameter 'short_cutoff_s' is {cutoff_s!r}; expected a finite number >= 0")
    cutoff_us = seconds_to_us(float(cutoff_s))
    reserved = 0 if constraint_aware else reserved_count(params["reserved_fraction"], len(groups[0]))
    num_resources = len(cluster.resources)

    first = len(fabric.names)
    dist_ids = list(range(first, first + num_dist))
    master_ids = list(range(first + num_dist, first + num_dist + len(groups)))
    counts = ConstraintSetCounts(groups) if constraint_aware else None
    for d in range(num_dist):
        assert fabric.add(f"dist-{d}", lambda: Distributor(master_ids, counts=counts, short_cutoff_us=cutoff_us,
                                                            recorder=recorder, feasible=feasible)) == dist_ids[d]
    base = master_ids[-1] + 1
    for g, workers in enumerate(groups):
        ids = list(range(base, base + len(workers)))
        assert fabric.add(f"master-{g}", lambda g=g, workers=workers, ids=ids: Master(
            g, workers, ids, policy=policy, weight=weight, reserved=reserved, constraint_aware=constraint_aware,
            num_resources=num_resources, recorder=recorder)) == master_ids[g]
        base += len(workers)
    for workers in groups:
        for w in workers:
            fabric.add(f"w-{w.worker_id}", lambda w=w: Worker(w, recorder))
    return dist_ids
