"""A federation run's after-life: check it and describe it; the runner writes its result files."""

from __future__ import annotations

import numpy as np

from fedemu.actors import registry
from fedemu.actors.common.invariants import FEATURE_CHECKS, check_run
from fedemu.model import US_PER_S
from fedemu.policies import fair_measure

from . import fault_plan


def recovery_percentiles(durations_us: list[int]) -> dict:
    """Count, p50, p99 and max of recovery times in seconds (None when there were none). Percentiles are
    numpy's default linear interpolation, as every other percentile in summary.json (``tools.results.metrics``)."""
    if not durations_us:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    d = np.array(sorted(durations_us), dtype=np.int64) / US_PER_S
    p50, p99 = np.percentile(d, [50, 99])
    return {"count": len(d), "p50": float(p50), "p99": float(p99), "max": float(d[-1])}


def horizon_line(line: str, horizon: dict) -> str:
    """``jobs_closed``'s ``line`` for a run stopped at its horizon, with why (the faults still in force) and where."""
    return (f"{line}; a fault never healed ({'; '.join(horizon['in_force'])}), so the run was stopped at its "
            f"horizon, {horizon['at_s']:g} s ({horizon['derived']})")


class FederationRun:
    """Holds what ``build`` made; ``finish`` checks the run's invariants and returns the summary."""

    def __init__(self, params: dict, cluster, recorder, workload=None) -> None:
        """``workload()`` makes the run's jobs again (read only for its horizon, by a run with faults)."""
        self.params = params
        self.cluster = cluster
        self.recorder = recorder
        self.workload = workload

    def workload_horizon_us(self) -> int | None:
        """The workload's horizon, its backlog on this cluster counted (``fault_plan.workload_horizon_us``):
        a run whose faults never heal is stopped past it (``fault_plan.run_horizon_us``)."""
        if self.workload is None:
            return None
        return fault_plan.workload_horizon_us(self.workload(), self.recorder.total_units)

    def progress(self) -> tuple[int, int | None]:
        rec = self.recorder
        return rec.closed, rec.expected if rec.expected is not None else len(rec.jobs)

    def verdict(self, end_us: int, *, partial: bool = False, fabric=None, horizon: dict | None = None) -> dict[str, str]:
        """Each end-of-run invariant: "ok", or its first violation as one line ("(+N more)" after it).
        Constraints are checked only for constraint-aware schedulers, and a check of a feature only in a
        run that uses it (no gangs: every gang is whole); a run stopped early (the live view's q) is not
        expected to have closed every job, nor its actors' live state to agree. A run stopped at its
        ``horizon`` with a fault in force is not expected to have settled either: its jobs not done are the
        verdict, with the faults that never healed, after any safety invariant it broke."""
        plugin = registry.get(self.params["scheduler"])
        used = plugin.features(self.params)
        skip = {check for feature, check in FEATURE_CHECKS.items() if feature not in used}
        if not plugin.constraint_aware:
            skip.add("constraints_met")
        if partial:
            skip.add("jobs_closed")
        found = check_run(self.recorder, self.cluster, end_us, skip=skip)
        if fabric is not None and not partial and horizon is None:  # the plug-in's checks of its live, settled
            # actors (views, LM state); a run stopped early has messages in flight: its live state may disagree
            for check in plugin.checks:
                found[check.__name__] = check(fabric)
        lines = {name: "ok" if not v else v[0].line() + (f" (+{len(v) - 1} more)" if len(v) > 1 else "")
                 for name, v in found.items()}
        if horizon is not None and found.get("jobs_closed"):
            lines["jobs_closed"] = horizon_line(lines["jobs_closed"], horizon)
            lines = {**{k: v for k, v in lines.items() if k != "jobs_closed"}, "jobs_closed": lines["jobs_closed"]}
        return lines

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

    def fault_report(self, fabric) -> dict:
        """What faults cost the run: crashes and restarts applied, executions a crash ended, the work they
        lost (``wasted_s``: unit-seconds), and ``recovery_s``: detection plus takeover per failover."""
        stats, rec = fabric.statistics(), self.recorder
        return {"crashes": stats.crashes, "restarts": stats.restarts, "executions_aborted": rec.aborted,
                "wasted_s": rec.wasted_us / US_PER_S, "recovery_s": recovery_percentiles(rec.recoveries_us)}

    def users(self):
        """(shares, each user's front end, preemption on, total capacity) of a run with users, else None."""
        got = registry.get(self.params["scheduler"]).users(self.params)
        if got is None:
            return None
        total = tuple(sum(w.capacity[r] for w in self.cluster.workers()) for r in range(len(self.cluster.resources)))
        return got.shares.fractions, got.front_ends, got.preempts, total

    def fairness(self, end_us: int) -> dict | None:
        """The summary's ``fairness`` block (``policies.fair_measure``), for a run with users."""
        users = self.users()
        if users is None:
            return None
        shares, user_gm, on, total = users
        return fair_measure.report(self.recorder, shares, user_gm, total, end_us, on)

    def shares(self) -> list:
        """(user, share now, target) per user, for the live view."""
        users = self.users()
        if users is None:
            return []
        shares, _, _, total = users
        held = [[0] * len(total) for _ in shares]
        rec = self.recorder
        for t in rec.tasks.values():
            if t.start_us >= 0 > t.end_us:
                job = rec.jobs[t.job_id]
                if 0 <= job.user < len(held):
                    for r, d in enumerate(job.demand):
                        held[job.user][r] += d
        return [(u, max(h / x for h, x in zip(held[u], total) if x), shares[u]) for u in range(len(shares))]

    def finish(self, fabric, info: dict) -> dict:
        """Check the run; returns what the summary says besides the recorder's measurements, with
        ``invariants`` (the runner turns a broken one into the run's verdict)."""
        invariants = self.verdict(fabric.now, partial=bool(info.get("partial")), fabric=fabric,
                                  horizon=info.get("horizon"))
        fairness = self.fairness(fabric.now)
        extra = {"fairness": fairness} if fairness is not None else {}
        return {**extra, "invariants": invariants, "faults": self.fault_report(fabric), "scheduler": self.params["scheduler"], "policy": self.params.get("policy", "-"), "seed": info["seed"],
                **self.describe(), "counters": dict(sorted(self.recorder.counters.items())),
                **{k: v for k, v in info.items() if k not in ("seed", "params")}, "params": info["params"]}
