"""Printing results: a run's summary as a short rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

KEYS = ("scenario", "scheduler", "policy", "seed", "jobs", "jobs_completed", "unschedulable", "tasks_dropped", "tasks",
        "utilization_mean", "imbalance_mean", "utilization_variance_mean",
        "virtual_end_s", "wall_s", "events", "messages", "digest")
DELAYS = ("delay_s", "delay_short_s", "delay_long_s", "jrt_s", "gang_wait_s")
# the allocation time's parts as the 2022 Megha paper names them (Megha 2022, III): summary key, short label
PARTS = (("framework_queueing", "framework queueing"), ("processing", "processing"),
         ("worker_queueing", "worker queueing"), ("communication", "communication"))


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(show_header=False, box=None)
    for key in KEYS:
        if key in summary:
            value = summary[key]
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    for key in DELAYS:
        d = summary.get(key)
        if d and d.get("count"):
            table.add_row(key, "  ".join(f"{k}={d[k]:.6g}" for k in ("p50", "p90", "p99", "max", "mean"))
                          + f"  (n={d['count']})")
    allocation = allocation_line(summary.get("allocation_s"))
    if allocation:
        table.add_row("allocation_s", allocation)
    for key in ("counters", "drops_by_cause"):
        if summary.get(key):
            table.add_row(key, ", ".join(f"{k}={v}" for k, v in summary[key].items()))
    for line in fairness_lines(summary.get("fairness")):
        table.add_row("fairness", line)
    faults = fault_line(summary.get("faults"))
    if faults:
        table.add_row("faults", faults)
    horizon = summary.get("horizon")
    if horizon:
        table.add_row("horizon", f"stopped at {horizon['at_s']:g} s ({horizon['derived']}); still in force: "
                      + "; ".join(horizon["in_force"]))
    invariants = summary.get("invariants")
    if invariants:
        broken = [name for name, line in invariants.items() if line != "ok"]
        table.add_row("invariants", f"broken: {', '.join(broken)}" if broken else
                      f"all {len(invariants)} ok ({', '.join(invariants)})")
    console.print(table)


def allocation_line(alloc: dict | None) -> str:
    """The summary's allocation time as one line: mean, p50, p99, and the mean of each measured part."""
    if not alloc or not alloc.get("count"):
        return ""
    head = "  ".join(f"{k}={alloc[k]:.6g}" for k in ("allocation", "allocation_p50", "allocation_p99")
                     if alloc.get(k) is not None).replace("allocation_", "").replace("allocation=", "mean=")
    parts = ", ".join(f"{label} {alloc[k]:.6g}" for k, label in PARTS if alloc.get(k) is not None)
    return f"{head}  (n={alloc['count']}); mean parts: {parts}"


def fault_line(faults: dict | None) -> str:
    """The summary's ``faults`` block as one line; empty when the run saw no fault and no recovery."""
    if not faults:
        return ""
    rec = faults.get("recovery_s") or {}
    if not (faults.get("crashes") or faults.get("restarts") or faults.get("executions_aborted") or rec.get("count")):
        return ""
    parts = [f"{k}={faults[k]:.6g}" if isinstance(faults[k], float) else f"{k}={faults[k]}"
             for k in ("crashes", "restarts", "executions_aborted", "wasted_s") if k in faults]
    if rec.get("count"):
        parts.append(f"recovery_s p50={rec['p50']:.6g} p99={rec['p99']:.6g} max={rec['max']:.6g} (n={rec['count']})")
    return ", ".join(parts)


def fairness_lines(fair: dict | None) -> list[str]:
    """Per user: configured and measured share (overall, contended), preemptions and delays; then the
    contended time."""
    if not fair:
        return []
    out = []
    for row in fair["users"]:
        hot = row["measured_contended"]
        waiting = row.get("measured_waiting")
        d = row["delay_s"]
        delay = f"delay p50={d['p50']:.3g} p99={d['p99']:.3g} s" if d["count"] else "no job done"
        out.append(f"user {row['user']} (gm-{row['gm']}): share {row['share']:.1%}, measured {row['measured']:.1%}"
                   f"{f' ({hot:.1%} contended' if hot is not None else ''}"
                   f"{f', {waiting:.1%} while it waited)' if waiting is not None else (')' if hot is not None else '')}"
                   f", preempted {row['preempted']}, "
                   f"attempts {row['preemption_attempts']} ({row['preemptions_refused']} refused), "
                   f"wasted {row['wasted_s']:.3g} s, {delay}")
    out.append(f"algorithm 2 {fair['algorithm2']}; contended {fair['contended_s']:.3g} s of {fair['span_s']:.3g} s")
    return out
