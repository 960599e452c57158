"""Sparrow as a plug-in: ``schedulers`` distributed schedulers and one probe-queue node per machine.

Every scheduler sees every machine (Sparrow has no groups); the cluster's grouping only fixes worker ids.
Actors, in this order: ``sparrow-<i>``, then ``w-<worker id>`` in cluster order. Sparrow places tasks by
late binding, so the worker-choice ``policy`` does not apply to it.
"""

from __future__ import annotations

from fedemu.model import Param, finite_at_least, whole_at_least
from fedemu.policies.partition_view import PartitionView

from .plugin import FRONT_END_COUNTERS, Context, Scheduler
from .sparrow_node import SparrowNode
from .sparrow_scheduler import SparrowScheduler

PARAMS = (
    Param("schedulers", 3, "Sparrow schedulers (front ends jobs are submitted to)", **whole_at_least(1)),
    Param("probe_ratio", 2.0, "probes per task (d in the Sparrow paper)", **finite_at_least(1)),
)

COUNTERS = FRONT_END_COUNTERS + (
    ("probes", "probes the schedulers sent"),
    ("cancels", "node requests answered with a cancel (the probe's group was already placed)"),
)


def build(ctx: Context) -> list[str]:
    """Add every Sparrow actor; returns the scheduler names."""
    workers = tuple(ctx.cluster.workers())
    num_resources = len(ctx.cluster.resources)
    ratio = float(ctx.params["probe_ratio"])
    node_names = [f"w-{w.worker_id}" for w in workers]
    names = [f"sparrow-{i}" for i in range(ctx.params["schedulers"])]

    def make():
        view = PartitionView(workers, num_resources=num_resources)
        return SparrowScheduler(node_names, view, probe_ratio=ratio, recorder=ctx.recorder, feasible=ctx.feasible)

    for name in names:
        ctx.add(name, make)
    for w, name in zip(workers, node_names):
        ctx.add(name, lambda w=w: SparrowNode(w, ctx.recorder))
    return names


SPARROW = Scheduler("sparrow", "Sparrow (2013): distributed schedulers, batch probing, late binding",
                    build, params=PARAMS, counters=COUNTERS, takes_policy=False)
