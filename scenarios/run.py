"""A federation run's after-life: check it and describe it; the runner writes its result files."""

from __future__ import annotations


class FederationRun:
    """Holds what ``build`` made; ``finish`` checks the run's invariants and returns the summary."""

    def __init__(self, params: dict, cluster, recorder) -> None:
        self.params = params
        self.cluster = cluster
        self.recorder = recorder

    def progress(self) -> tuple[int, int | None]:
        rec = self.recorder
        return rec.closed, rec.expected if rec.expected is not None else len(rec.jobs)

    def check(self) -> None:
        """Every task of every completed job ran exactly once, and every job was closed."""
        rec = self.recorder
        rejected = {job_id for job_id, _ in rec.unschedulable}
        for job in rec.jobs.values():
            if job.job_id in rejected:
                continue
            if job.completion_us < 0:
                raise AssertionError(f"job {job.job_id} never completed")
        for key, task in rec.tasks.items():
            if key[0] in rejected:
                continue
            if task.start_us < 0 or task.end_us < 0:
                raise AssertionError(f"task {key[0]}.{key[1]} did not run (start {task.start_us}, end {task.end_us})")
            if task.end_us - task.start_us != task.duration_us:
                raise AssertionError(f"task {key[0]}.{key[1]} ran {task.end_us - task.start_us} us, "
                                     f"expected {task.duration_us}")

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
        """Check the run; returns what the summary says besides the recorder's measurements."""
        if not info.get("partial"):  # a run stopped early (the live view's q) has unfinished jobs
            self.check()
        return {"scheduler": self.params["scheduler"], "policy": self.params.get("policy", "-"), "seed": info["seed"],
                **self.describe(), "counters": dict(sorted(self.recorder.counters.items())),
                **{k: v for k, v in info.items() if k not in ("seed", "params")}, "params": info["params"]}
