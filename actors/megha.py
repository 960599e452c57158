"""Wires Megha onto a fabric: LMs own clusters, GMs own one partition in each, workers run tasks.

The centralized baseline of the 2022 paper is the same code with one GM and one LM.
"""

from __future__ import annotations

from fedemu.policies.partition_view import PartitionView

from .global_manager import GlobalManager
from .local_manager import LocalManager
from .worker import Worker


def build(fabric, cluster, *, gms: int, policy, heartbeat_us: int, recorder, feasible) -> list[int]:
    """Add every Megha actor; returns the GM actor ids (where jobs are submitted)."""
    lms = len(cluster.clusters)
    for spec in cluster.clusters:
        if len(spec.workers) % gms:
            raise ValueError(f"cluster {spec.index} has {len(spec.workers)} workers, not a multiple of {gms} GMs")
    gm_names = [f"gm-{g}" for g in range(gms)]
    lm_names = [f"lm-{c}" for c in range(lms)]
    first_gm = len(fabric.names)
    gm_ids = list(range(first_gm, first_gm + gms))
    lm_ids = list(range(first_gm + gms, first_gm + gms + lms))

    def partitions(spec):
        n = len(spec.workers) // gms
        return [spec.workers[p * n:(p + 1) * n] for p in range(gms)]

    layout = [partitions(spec) for spec in cluster.clusters]

    templates = [[PartitionView(part, num_resources=len(cluster.resources)) for part in row] for row in layout]

    def gm_factory(g):
        def make():
            views = [[view.clone() for view in row] for row in templates]
            return GlobalManager(g, lm_ids, views, policy=policy, feasible=feasible, recorder=recorder)
        return make

    for g in range(gms):
        assert fabric.add(gm_names[g], gm_factory(g)) == gm_ids[g]
    worker_base = first_gm + gms + lms
    for c, spec in enumerate(cluster.clusters):
        ids = list(range(worker_base, worker_base + len(spec.workers)))
        assert fabric.add(lm_names[c], lambda c=c, spec=spec, ids=ids: LocalManager(
            c, spec.workers, ids, gm_ids, heartbeat_us=heartbeat_us, recorder=recorder)) == lm_ids[c]
        worker_base += len(spec.workers)
    for spec in cluster.clusters:
        for w in spec.workers:
            fabric.add(f"w-{w.worker_id}", lambda w=w: Worker(w, recorder))
    return gm_ids
