"""The cluster, described once: workers grouped into clusters (a Megha LM's cluster = a Pigeon group).

Every scheduler maps these same machines onto its own shape, so comparisons are fair. A worker has a
capacity vector (default one slot) and the sorted machine-constraint ids it satisfies.
"""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class WorkerSpec:
    """One machine: global id, owning cluster, capacity vector, constraint ids it provides."""

    worker_id: int
    cluster: int
    capacity: tuple[int, ...] = (1,)
    constraints: tuple[int, ...] = ()


@attrs.frozen(slots=True)
class ClusterSpec:
    """One cluster (one LM in Megha, one group/master in Pigeon) and its constraint profile."""

    index: int
    profile: str
    workers: tuple[WorkerSpec, ...]


@attrs.frozen(slots=True)
class Cluster:
    """All clusters; ``resources`` names the entries of every capacity vector."""

    clusters: tuple[ClusterSpec, ...]
    resources: tuple[str, ...] = ("slots",)

    @property
    def num_workers(self) -> int:
        return sum(len(c.workers) for c in self.clusters)

    def workers(self):
        """Every worker, cluster by cluster, in id order."""
        for c in self.clusters:
            yield from c.workers
