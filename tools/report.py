"""Printing results: a run's summary as a short rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

KEYS = ("scenario", "scheduler", "policy", "seed", "jobs", "jobs_completed", "unschedulable", "tasks",
        "utilization_mean", "virtual_end_s", "wall_s", "events", "messages", "digest")
DELAYS = ("delay_s", "delay_short_s", "delay_long_s")


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
    for key in ("counters", "drops_by_cause"):
        if summary.get(key):
            table.add_row(key, ", ".join(f"{k}={v}" for k, v in summary[key].items()))
    console.print(table)
