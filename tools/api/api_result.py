"""``fedemu.Result``: one run's results as read-only data (summary, verdict, counters, per-job and per-task
columns), the same whether the run was made just now (``fedemu.run``) or read from a folder the CLI wrote
(``fedemu.load``)."""

from __future__ import annotations

import csv
import math
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedemu.fabric.errors import ConfigError
from fedemu.model import US_PER_S as US

from ..results import metrics, results

Columns = Mapping[str, np.ndarray]
TABLES = ("jobs", "tasks", "utilization")
HEADERS = {"jobs": results.JOBS_HEADER, "tasks": results.TASKS_HEADER, "utilization": results.UTILIZATION_HEADER}
INTEGER = frozenset({"job_id", "num_tasks", "index", "worker", "attempts"})  # the rest are floats, short a bool
PANDAS_HINT = "pip install 'fedemu[pandas]'"


def frozen(value):
    """A read-only copy of a summary's value: dicts as mappings that refuse writes, lists as tuples."""
    if isinstance(value, dict):
        return types.MappingProxyType({k: frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def read_only(columns: dict) -> Columns:
    """Columns whose arrays (and the mapping holding them) refuse writes."""
    out = {}
    for name, column in columns.items():
        column = np.array(column, copy=True)
        column.flags.writeable = False
        out[name] = column
    return types.MappingProxyType(out)


def tables_of(recorder) -> dict[str, dict[str, np.ndarray]]:
    """A finished run's tables as columns (jobs.csv's, tasks.csv's and utilization.csv's, plain arrays: they
    may cross to another process); empty for a scenario without a recorder."""
    if recorder is None:
        return {name: empty(name) for name in TABLES}
    times, util = metrics.utilization_series(recorder, US)
    return {"jobs": results.job_columns(metrics.job_table(recorder)),
            "tasks": results.task_columns(metrics.task_table(recorder)),
            "utilization": {"time_s": times, "utilization": util}}


def _dtype(name: str, table: str):
    if name == "short":
        return bool
    return np.int64 if name in INTEGER and table != "utilization" else np.float64


def empty(table: str) -> dict[str, np.ndarray]:
    """A table with its columns and no rows (a scenario that measures no jobs)."""
    return {name: np.empty(0, dtype=_dtype(name, table)) for name in HEADERS[table]}


def read_table(folder: Path, table: str) -> dict[str, np.ndarray]:
    """``folder/<table>.csv`` as columns: empty cells are NaN (times) or -1 (the worker of a task never
    placed), exactly the arrays a run holds before it writes them (floats' text reads back exactly)."""
    path = folder / f"{table}.csv"
    if not path.is_file():
        return empty(table)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        rows = list(reader)
    if header is None or tuple(header) != HEADERS[table]:
        raise ConfigError(f"{path}: not a {table}.csv fedemu wrote (its header is {header!r})")
    out = {}
    for i, name in enumerate(header):
        cells = [row[i] if i < len(row) else "" for row in rows]
        kind = _dtype(name, table)
        try:
            if kind is bool:
                out[name] = np.array([c == "1" for c in cells], dtype=bool)
            elif kind is np.int64:
                out[name] = np.array([int(c) if c else -1 for c in cells], dtype=np.int64)
            else:
                out[name] = np.array([float(c) if c else math.nan for c in cells], dtype=np.float64)
        except ValueError:
            raise ConfigError(f"{path}: column {name} holds a cell that is not a number") from None
    return out


class Result:
    """One run's results, read-only.

    ``summary`` is what summary.json holds; ``verdict`` is ``ok``, ``violation: ...`` (an invariant broken)
    or ``partial: ...`` (stopped early); ``jobs``, ``tasks`` and ``utilization`` are jobs.csv's, tasks.csv's
    and utilization.csv's columns as numpy arrays (times in seconds, NaN for what has not happened; a
    task's ``worker`` is -1 when it was never placed)."""

    def __init__(self, summary: Mapping, tables: Callable[[], dict[str, dict]], *, path: Path | None = None,
                 journal: Path | None = None) -> None:
        self._summary = frozen(results.plain(dict(summary)))
        self._load = tables
        self._tables: dict[str, Columns] | None = None
        self.path = path
        self.journal = journal

    @property
    def summary(self) -> Mapping[str, Any]:
        """The run's summary (summary.json's keys), read-only."""
        return self._summary

    @property
    def invariants(self) -> Mapping[str, str]:
        """Each invariant checked at the end of the run: ``ok`` or what broke it."""
        return self._summary.get("invariants") or types.MappingProxyType({})

    @property
    def verdict(self) -> str:
        """``ok``; ``violation: <the first invariant broken>``; or ``partial: stopped early by ...``."""
        broken = [line for line in self.invariants.values() if line != "ok"]
        if broken:
            return f"violation: {broken[0]}"
        partial = self._summary.get("partial")
        if partial:
            return f"partial: stopped early by {partial.get('by')} at {partial.get('stopped_at_s', 0):g} s"
        return "ok"

    @property
    def ok(self) -> bool:
        """Whether the run ended by itself with every invariant holding."""
        return self.verdict == "ok"

    @property
    def counters(self) -> Mapping[str, int]:
        """The protocol counters the run kept (e.g. Megha's ``invalid_internal``)."""
        return self._summary.get("counters") or types.MappingProxyType({})

    @property
    def digest(self) -> str | None:
        """The journal digest: the same for the same scenario, parameters and seed, everywhere."""
        return self._summary.get("digest")

    def _table(self, name: str) -> Columns:
        if self._tables is None:
            self._tables = {name: read_only(columns) for name, columns in self._load().items()}
        return self._tables[name]

    @property
    def jobs(self) -> Columns:
        """Per job: job_id, arrival_s, num_tasks, ideal_jrt_s, completion_s, jrt_s, delay_s, short."""
        return self._table("jobs")

    @property
    def tasks(self) -> Columns:
        """Per task: job_id, index, arrival_s, start_s, end_s, worker, allocation_s and its four parts,
        attempts."""
        return self._table("tasks")

    @property
    def utilization(self) -> Columns:
        """Mean utilization per 1 s bucket: time_s, utilization."""
        return self._table("utilization")

    def delays(self, kind: str = "all") -> np.ndarray:
        """The delays (s) of the completed jobs of ``kind``: all, short or long."""
        jobs = self.jobs
        if kind not in metrics.JOB_KINDS:
            raise ConfigError(f"unknown job kind {kind!r}; known: {', '.join(metrics.JOB_KINDS)}")
        keep = ~np.isnan(jobs["delay_s"])
        if kind != "all":
            keep &= jobs["short"] if kind == "short" else ~jobs["short"]
        return jobs["delay_s"][keep]

    def delay_cdf(self, kind: str = "all") -> tuple[np.ndarray, np.ndarray]:
        """The empirical CDF of the job delays: sorted delays (s) and P(delay <= x)."""
        return metrics.cdf(self.delays(kind))

    def label(self) -> str:
        """``scheduler/policy`` (or the scheduler alone), for legends."""
        who = str(self._summary.get("scheduler") or self._summary.get("scenario") or "run")
        return f"{who}/{self._summary['policy']}" if self._summary.get("policy") else who

    def plot_cdf(self, ax=None, *, kind: str = "all", label: str | None = None, log: bool = True):
        """Draw the delay CDF onto the matplotlib axis ``ax`` (a new Agg figure's when None; matplotlib
        is imported only then); returns the axis. Further calls on one axis add curves in new styles."""
        if ax is None:
            ax = results.agg_figure(figsize=(7, 4.8)).add_subplot()
        results.draw_cdfs(ax, {label or self.label(): self.delays(kind)}, "delay in job response time (s)", log)
        return ax

    def to_pandas(self, table: str = "jobs"):
        """One table (jobs, tasks or utilization) as a pandas DataFrame; needs pandas (``fedemu[pandas]``)."""
        if table not in TABLES:
            raise ConfigError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
        return pandas().DataFrame({name: np.array(col) for name, col in self._table(table).items()})

    def __repr__(self) -> str:
        s = self._summary
        done = f"{s.get('jobs_completed')}/{s.get('jobs')} jobs" if "jobs" in s else ""
        return (f"<fedemu.Result {self.label()} seed={s.get('seed')} {done} verdict={self.verdict!r} "
                f"digest={self.digest}>")


def pandas():
    """The pandas module, or an ImportError saying how to install it."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(f"to_pandas() needs pandas, which is not installed: {PANDAS_HINT}") from None
    return pd


def loaded(folder: Path, journal: Path | None = None) -> Result:
    """The Result of the run folder ``folder`` (its summary.json, the CSVs read when first asked for);
    ``journal``: where its journal is, when not in the folder."""
    summary = results.read_summary(folder)
    if summary is None:
        raise ConfigError(f"{folder}: no summary.json a run wrote (a results folder of fedemu run --out)")
    if results.INCOMPLETE in summary:
        raise ConfigError(f"{folder}: {results.INCOMPLETE_TEXT}")
    journal = journal or folder / "messages.log"
    return Result(summary, lambda: {name: read_table(folder, name) for name in TABLES}, path=folder,
                  journal=journal if journal.is_file() else None)
