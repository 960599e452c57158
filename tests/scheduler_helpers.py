"""What the scheduler tests share: a run's recorder, the run's cluster and jobs rebuilt from its seed and
parameters, and a run that may be refused before it starts because no job at all could run."""

from __future__ import annotations

from pathlib import Path

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.faults import Fault
from fedemu.scenarios import default, federation
from fedemu.tools.run.params import resolve_scenario
from fedemu.tools.run.runner import execute

ROOT = Path(__file__).resolve().parent.parent  # the repository (the fedemu package)


def recorder_of(fabric):
    """The run's recorder (every scheduler actor holds the same one)."""
    return next(a.recorder for a in map(fabric.actor, range(len(fabric.names))) if hasattr(a, "recorder"))


def rebuilt(overrides: dict, seed: int):
    """(cluster, {job_id: Job}) of a default-scenario run, drawn again from the same seed and parameters."""
    params = resolve_scenario(default, overrides)
    cluster, table = federation.build_cluster(params, seed)
    total = sum(w.capacity[0] for w in cluster.workers())
    return cluster, {j.job_id: j for j in federation.build_workload(params, seed, total, table)}


def runnable(job, cluster) -> bool:
    """Brute force: some machine provides each task's constraints and holds the job's demand."""
    return all(any(set(c) <= set(w.constraints) and len(w.capacity) == len(job.demand)
                   and all(d <= k for d, k in zip(job.demand, w.capacity)) for w in cluster.workers())
               for c in job.constraints)


def run_unless_refused(overrides: dict, seed: int):
    """The run's result, or None when it was refused because no job could run (checked by brute force)."""
    try:
        return execute("default", seed=seed, overrides=overrides)
    except ConfigError as e:
        if not str(e).startswith("no job can run"):
            raise
    cluster, jobs = rebuilt(overrides, seed)
    assert not any(runnable(job, cluster) for job in jobs.values()), "refused a workload with a runnable job"
    return None


@attrs.frozen
class EventPlan:
    """A fault plan given as plain Fault event tuples (what ``execute`` reads from a plan file)."""

    events: tuple
    source: str = "test plan"

    def faults(self, names, seed):
        return [Fault(*e) for e in self.events]

    def placed(self, names, seed):
        """``faults``, each named for an error as a plan file's entry would be."""
        return [(f"{self.source}: event {n}", fault) for n, fault in enumerate(self.faults(names, seed), start=1)]
