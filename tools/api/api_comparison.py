"""``fedemu.Comparison``: a compare's runs as read-only data: one row per run (compare.csv's), each run's
``Result``, the runs that failed, and the table ``fedemu compare`` prints."""

from __future__ import annotations

import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedemu.fabric.errors import ConfigError

from ..run import compare
from .api_result import TABLES, Result, frozen, pandas, read_table

POOLED = {"delay": ("delays", "delay in job response time (s)", True),
          "utilization": ("utilization", "utilization (1 s buckets)", False)}


def _result(spec: dict, res: dict) -> Result:
    """A finished run's Result: from the tables it brought back, or (run in a folder) read from there."""
    if "tables" in res:
        tables = res["tables"]
        return Result(res["summary"], lambda: tables)
    folder = Path(spec["out_dir"])
    journal = folder / "messages.log"
    return Result(res["summary"], lambda: {name: read_table(folder, name) for name in TABLES}, path=folder,
                  journal=journal if journal.is_file() else None)


class Comparison:
    """Every run of a compare, in plan order (scheduler, policy, seed).

    ``rows`` are compare.csv's rows (``counters`` and ``fairness`` as mappings), ``results`` each finished
    run's ``Result`` by run name, ``failures`` each failed run's ``name``, ``error`` and whether it was
    bad input (``config``)."""

    def __init__(self, plan: list[dict], results: dict[str, dict], *, path: Path | None = None,
                 reused: int = 0) -> None:
        keys = ("name", "scenario", "scheduler", "policy", "seed", "overrides")
        self.runs = tuple(frozen({k: spec[k] for k in keys}) for spec in plan)
        self.scenario = plan[0]["scenario"] if plan else ""
        self.path = path
        self.reused = reused
        finished = [(spec, results[spec["name"]]) for spec in plan if "summary" in results.get(spec["name"], {})]
        self.rows = tuple(frozen(compare.row_of(spec, res["summary"])) for spec, res in finished)
        self.results: Mapping[str, Result] = types.MappingProxyType(
            {spec["name"]: _result(spec, res) for spec, res in finished})
        self.failures = tuple(frozen({k: res[k] for k in ("name", "error", "config")})
                              for spec in plan if "error" in (res := results.get(spec["name"], {})))
        self._labels = {spec["name"]: spec["scheduler"] if spec["policy"] == "-" else
                        f"{spec['scheduler']}/{spec['policy']}" for spec in plan}

    @property
    def ok(self) -> bool:
        """Whether every run finished with its invariants holding."""
        return not self.failures and all(r.ok for r in self.results.values())

    def table(self, mean: bool = False):
        """The rich table ``fedemu compare`` prints (``mean``: one row per scheduler/policy, the mean over
        seeds); a notebook shows it as it is, a terminal with ``rich.print``."""
        rows = compare.mean_rows(list(self.rows)) if mean else list(self.rows)
        title = f"{self.scenario}: mean over seeds" if mean else f"{self.scenario}: every run"
        return compare.build_table(rows, title, with_seed=not mean)

    def to_pandas(self, mean: bool = False):
        """compare.csv as a pandas DataFrame, one row per run (``mean``: per scheduler/policy); needs pandas
        (``fedemu[pandas]``)."""
        pd = pandas()
        rows = compare.mean_rows(list(self.rows)) if mean else list(self.rows)
        header, cells = compare.flat_rows(rows)
        return pd.DataFrame(cells, columns=header)

    def pooled(self, what: str = "delay") -> dict[str, np.ndarray]:
        """Per scheduler (or scheduler/policy), in plan order: every seed's job delays (``delay``, completed
        jobs) or 1 s utilization buckets (``utilization``), pooled."""
        if what not in POOLED:
            raise ConfigError(f"unknown series {what!r}; known: {', '.join(POOLED)}")
        series: dict[str, list[np.ndarray]] = {}
        for run in self.runs:
            result = self.results.get(run["name"])
            if result is None:
                continue
            values = result.delays() if what == "delay" else result.utilization["utilization"]
            series.setdefault(self._labels[run["name"]], []).append(values)
        return {label: np.concatenate(parts) for label, parts in series.items()}

    def plot_cdfs(self, ax=None, what: str = "delay"):
        """Each scheduler's pooled CDF (``pooled``) onto the matplotlib axis ``ax`` (a new Agg figure's when
        None); returns the axis. The curves of compare's delay_cdf.png and utilization_cdf.png."""
        from ..results.results import agg_figure, draw_cdfs

        series = self.pooled(what)
        if ax is None:
            ax = agg_figure(figsize=(7, 4.8)).add_subplot()
        draw_cdfs(ax, series, POOLED[what][1], POOLED[what][2])
        return ax

    def __getitem__(self, name: str) -> Result:
        return self.results[name]

    def __len__(self) -> int:
        return len(self.runs)

    def __repr__(self) -> str:
        failed = f", {len(self.failures)} failed" if self.failures else ""
        return f"<fedemu.Comparison {self.scenario}: {len(self.rows)} of {len(self.runs)} runs{failed}>"


def loaded_comparison(folder: Path) -> Comparison:
    """The Comparison in ``folder`` (its compare.json, each run folder's summary.json); a run without a
    finished summary is a failure saying so."""
    from ..run import outdir
    from ..results.results import finished

    record: Any = outdir.compare_plan(folder)
    if record is None:
        raise ConfigError(f"{folder}: no {outdir.COMPARE_PLAN} (a results folder of fedemu compare --out)")
    plan, results = [], {}
    for run in record["runs"]:
        if not isinstance(run, dict) or not {"name", "scenario", "scheduler", "policy", "seed"} <= set(run):
            raise ConfigError(f"{folder / outdir.COMPARE_PLAN}: a run without name, scenario, scheduler, policy "
                              f"and seed ({run!r:.80})")
        spec = {**run, "overrides": run.get("overrides") or {}, "out_dir": str(folder / str(run["name"]))}
        plan.append(spec)
        summary = finished(spec["out_dir"])
        results[spec["name"]] = {"name": spec["name"], "summary": summary} if summary is not None else \
            {"name": spec["name"], "error": f"no finished summary.json in {spec['out_dir']}", "config": False}
    return Comparison(plan, results, path=folder)
