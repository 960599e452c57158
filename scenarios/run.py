"""A federation run's after-life: check it and describe it; the runner writes its result files."""

from __future__ import annotations

from fedemu.actors import registry
from fedemu.actors.invariants import check_run


class FederationRun:
    """Holds what ``build`` made; ``finish`` checks the run's invariants and returns the summary."""

    def __init__(self, params: dict, cluster, recorder) -> None:
        self.params = params
        self.cluster = cluster
        self.recorder = recorder

    def progress(self) -> tuple[int, int | None]:
        rec = self.recorder
        return rec.closed, rec.expected if rec.expected is not None else len(rec.jobs)

    def verdict(self, end_us: int, *, partial: bool = False) -> dict[str, str]:
        """Each end-of-run invariant: "ok", or its first violation as one line ("(+N more)" after it).
        Constraints are checked only for constraint-aware schedulers; a run stopped early (the live
        view's q) is not expected to have closed every job."""
        skip = set()
        if not registry.get(self.params["scheduler"]).constraint_aware:
            skip.add("constraints_met")
        if partial:
            skip.add("jobs_closed")
        found = check_run(self.recorder, self.cluster, end_us, skip=skip)
        return {name: "ok" if not v else v[0].line() + (f" (+{len(v) - 1} more)" if len(v) > 1 else "")
                for name, v in found.items()}

    def describe(self) -> dict:
        p = self.params
        clusters = self.cluster.clusters
        return {
            "cluster": {"workers": self.cluster.num_workers, "clusters": len(clusters),
                        "workers_per_cluster": len(clusters[0].workers), "resources": list(self.cluster.resources),
                        "profiles": [c.profile for c in clusters]},
            "workload": {k: p[k] for k in ("workload", "trace", "jobs", "load", "rate", "fanout", "task_s",
                                           "task_dist", "constraints")},
        }

    def finish(self, fabric, info: dict) -> dict:
        """Check the run; returns what the summary says besides the recorder's measurements, with
        ``invariants`` (the runner turns a broken one into the run's verdict)."""
        invariants = self.verdict(fabric.now, partial=bool(info.get("partial")))
        return {"invariants": invariants, "scheduler": self.params["scheduler"], "policy": self.params.get("policy", "-"), "seed": info["seed"],
                **self.describe(), "counters": dict(sorted(self.recorder.counters.items())),
                **{k: v for k, v in info.items() if k not in ("seed", "params")}, "params": info["params"]}
