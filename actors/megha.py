"""Megha as plug-ins: LMs own clusters, GMs own one partition in each, workers run tasks.

The centralized baseline of the 2022 paper is the same code over the same machines gathered into
one cluster, with one GM and one LM. Actors, in this order: ``gm-<g>``, ``lm-<c>``, ``w-<worker id>``.
"""

from __future__ import annotations

import attrs

from fedemu.model import Param, finite_at_least, seconds_to_us
from fedemu.policies.partition_view import PartitionView

from .global_manager import GlobalManager
from .local_manager import LocalManager
from .plugin import FRONT_END_COUNTERS, Context, Scheduler
from .worker import Worker

PARAMS = (
    Param("heartbeat_s", 10.0, "LM heartbeat period in seconds (delta updates to the GMs)",
          **finite_at_least(0, strict=True)),
)

COUNTERS = FRONT_END_COUNTERS + (
    ("reschedules", "times a GM's scheduling pass found no worker in its view for a queued signature"),
    ("repartitions", "launches the LM granted on another GM's partition"),
    ("invalid_internal", "launches on the GM's own partition the LM refused (stale view)"),
    ("invalid_external", "repartition requests the LM refused (stale view)"),
)


def centralize(cluster):
    """The same machines as one cluster (one LM), keeping every worker's id and constraints."""
    profiles = "+".join(c.profile for c in cluster.clusters)
    workers = tuple(w for c in cluster.clusters for w in c.workers)
    return attrs.evolve(cluster, clusters=(attrs.evolve(cluster.clusters[0], index=0, profile=profiles,
                                                        workers=workers),))


def add_actors(ctx: Context, cluster, gms: int) -> list[str]:
    """Add every Megha actor over ``cluster`` with ``gms`` GMs; returns the GM names."""
    for spec in cluster.clusters:
        if len(spec.workers) % gms:
            raise ValueError(f"cluster {spec.index} has {len(spec.workers)} workers, not a multiple of {gms} GMs")
    gm_names = [f"gm-{g}" for g in range(gms)]
    lm_names = [f"lm-{c}" for c in range(len(cluster.clusters))]
    heartbeat_us = seconds_to_us(float(ctx.params["heartbeat_s"]))
    num_resources = len(cluster.resources)

    def partitions(spec):
        n = len(spec.workers) // gms
        return [spec.workers[p * n:(p + 1) * n] for p in range(gms)]

    templates = [[PartitionView(part, num_resources=num_resources) for part in partitions(spec)]
                 for spec in cluster.clusters]

    def gm_factory(g):
        def make():
            views = [[view.clone() for view in row] for row in templates]
            return GlobalManager(g, lm_names, views, policy=ctx.policy, feasible=ctx.feasible, recorder=ctx.recorder)
        return make

    for g in range(gms):
        ctx.add(gm_names[g], gm_factory(g))
    for c, spec in enumerate(cluster.clusters):
        workers = [f"w-{w.worker_id}" for w in spec.workers]
        ctx.add(lm_names[c], lambda c=c, spec=spec, workers=workers: LocalManager(
            c, spec.workers, workers, gm_names, heartbeat_us=heartbeat_us, recorder=ctx.recorder))
    for spec in cluster.clusters:
        for w in spec.workers:
            ctx.add(f"w-{w.worker_id}", lambda w=w: Worker(w, ctx.recorder))
    return gm_names


def build_megha(ctx: Context) -> list[str]:
    """Megha over the cluster description: one LM per cluster, ``gms`` GMs."""
    return add_actors(ctx, ctx.cluster, int(ctx.params["gms"]))


def build_centralized(ctx: Context) -> list[str]:
    """The centralized baseline: the same machines as one cluster, one GM and one LM."""
    return add_actors(ctx, centralize(ctx.cluster), 1)


MEGHA = Scheduler("megha", "Megha (2022/2023 papers): GMs with eventually consistent views, LMs that validate",
                  build_megha, params=PARAMS, counters=COUNTERS,
                  invalid_counters=("invalid_internal", "invalid_external"))
CENTRALIZED = Scheduler("centralized", "the 2022 paper's centralized baseline: Megha with one GM and one LM over "
                        "every machine", build_centralized, params=PARAMS, counters=COUNTERS,
                        invalid_counters=("invalid_internal", "invalid_external"))
