"""Wires Sparrow onto a fabric: ``schedulers`` distributed schedulers and one probe-queue node per machine.

Every scheduler sees every machine (Sparrow has no groups); the cluster's grouping only fixes worker ids.
Actor ids: schedulers (``sparrow-<i>``), then nodes (``w-<worker id>``) in cluster order.
"""

from __future__ import annotations

import math

from fedemu.fabric.errors import ConfigError
from fedemu.policies.partition_view import PartitionView

from .sparrow_node import SparrowNode
from .sparrow_scheduler import SparrowScheduler


def build(fabric, cluster, params: dict, *, recorder, feasible) -> list[int]:
    """Add every Sparrow actor; returns the scheduler ids (where jobs are submitted)."""
    count = params["schedulers"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"parameter 'schedulers' is {count!r}; expected a whole number >= 1")
    ratio = params["probe_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 1 <= ratio < math.inf:
        raise ConfigError(f"parameter 'probe_ratio' is {ratio!r}; expected a finite number >= 1")
    workers = tuple(cluster.workers())
    num_resources = len(cluster.resources)
    first = len(fabric.names)
    sched_ids = list(range(first, first + count))
    node_ids = list(range(first + count, first + count + len(workers)))

    def make():
        view = PartitionView(workers, num_resources=num_resources)
        return SparrowScheduler(node_ids, view, probe_ratio=float(ratio), recorder=recorder, feasible=feasible)

    for i in range(count):
        assert fabric.add(f"sparrow-{i}", make) == sched_ids[i]
    for w in workers:
        fabric.add(f"w-{w.worker_id}", lambda w=w: SparrowNode(w, recorder))
    return sched_ids
