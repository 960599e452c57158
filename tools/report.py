"""Printing results: a run's summary as a short rich table."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

KEYS = ("scenario", "scheduler", "policy", "seed", "jobs_completed", "tasks", "delay_p50_s", "delay_p90_s",
        "delay_p99_s", "delay_max_s", "delay_mean_s", "mean_utilization", "virtual_end_s", "wall_s", "events",
        "messages", "digest")


def print_summary(summary: dict, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(show_header=False, box=None)
    for key in KEYS:
        if key in summary:
            value = summary[key]
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
    for key in ("counters", "drops_by_cause"):
        if summary.get(key):
            table.add_row(key, ", ".join(f"{k}={v}" for k, v in summary[key].items()))
    console.print(table)
