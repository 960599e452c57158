"""The plots of a `fedemu reproduce` report: each seed in a panel of its own (never pooled), with the
paper's numbers marked where a claim gives one for what the plot shows."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..run.atomic import atomic_write
from .evaluate import Expression
from ..results.results import DELAY_FLOOR_S, LINE_STYLES, _ecdf_points, agg_figure

PARTS = (("framework queueing", "framework_queueing_s"), ("processing", "processing_s"),
         ("worker queueing", "worker_queueing_s"), ("communication", "communication_s"))
# the CDF level of each figure a claim may give (a maximum: the top of the CDF), and its name on the plot
PERCENTILE = {"delay_p50_s": (0.5, "p50"), "delay_p90_s": (0.9, "p90"), "delay_p99_s": (0.99, "p99"),
              "alloc_allocation_p50_s": (0.5, "p50"), "alloc_allocation_p90_s": (0.9, "p90"),
              "alloc_allocation_p99_s": (0.99, "p99"), "alloc_allocation_max_s": (1.0, "max")}


def floats(path: Path, columns: tuple[str, ...]) -> dict[str, list[float]]:
    """The named columns of a CSV file as floats, rows with an empty cell left out."""
    out: dict[str, list[float]] = {c: [] for c in columns}
    if not path.exists():
        return out
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if all(r.get(c, "") != "" for c in columns):
                for c in columns:
                    out[c].append(float(r[c]))
    return out


def label(spec: dict) -> str:
    return spec["scheduler"] if spec["policy"] == "-" else f"{spec['scheduler']}/{spec['policy']}"


def paper_marks(claims: list[dict], experiment: str, prefix: str = "delay_") -> list[tuple[str, float, float | None,
                                                                                       str]]:
    """What the paper says about the delays (or, with ``prefix`` alloc_allocation_, the allocation times) of
    ``experiment``'s runs, from the claims that read one such figure of it: (series label, x, CDF level or
    None for a bound drawn as a line, text)."""
    marks = []
    for c in claims:
        if "needs" in c or "ours" not in c or c.get("over") or not isinstance(c.get("paper"), (int, float)):
            continue
        expr = Expression(c["ours"])
        if len(expr.terms) != 1 or expr.text.strip() != "{}/{}@{}:{}".format(*expr.terms[0]):
            continue
        sched, pol, exp, metric = expr.terms[0]
        if exp != experiment or not metric.startswith(prefix):
            continue
        name = sched if pol == "-" else f"{sched}/{pol}"
        if c["kind"] == "value" and metric in PERCENTILE:
            level, what = PERCENTILE[metric]
            marks.append((name, float(c["paper"]), level, f"paper: {name} {what}"))
        elif c["kind"] in ("at_most", "at_least"):
            marks.append((name, float(c["paper"]), None, f"paper's bound ({c['id']})"))
    return marks


def _panels(n: int, title: str):
    fig = agg_figure(figsize=(4.2 * n + 0.6, 4.4))
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    fig.suptitle(title)
    return fig, axes


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=90, metadata={"Software": None})


def plot_cdf_by_seed(path: Path, specs: list[dict], done: set[str], column: tuple[str, str], xlabel: str, *,
                     log: bool, title: str, marks=()) -> bool:
    """One panel per seed, one CDF per scheduler/policy in it, from each run's ``column`` = (file, name);
    ``marks`` are the paper's numbers. False when no run has data."""
    seeds = sorted({s["seed"] for s in specs if s["name"] in done})
    if not seeds:
        return False
    fig, axes = _panels(len(seeds), title)
    names = list(dict.fromkeys(label(s) for s in specs))
    anything = False
    for ax, seed in zip(axes, seeds):
        for spec in (s for s in specs if s["seed"] == seed and s["name"] in done):
            v = np.asarray(floats(Path(spec["out_dir"]) / column[0], (column[1],))[column[1]])
            if not v.size:
                continue
            anything = True
            x, p = _ecdf_points(np.maximum(v, DELAY_FLOOR_S) if log else v)
            style, _, width = LINE_STYLES[names.index(label(spec)) % len(LINE_STYLES)]
            ax.step(x, p, where="post", linestyle=style, linewidth=width, label=label(spec),
                    color=f"C{names.index(label(spec))}")
        for name, x, level, text in marks:
            color = f"C{names.index(name)}" if name in names else "k"
            if level is None:
                ax.axvline(x, color=color, linestyle=(0, (1, 2)), linewidth=1.4, label=text)
            else:
                ax.plot([x], [level], marker="*", markersize=13, color=color, markeredgecolor="k",
                        linestyle="none", label=text, zorder=10)
        if log:
            ax.set_xscale("log")
        ax.set_title(f"seed {seed}")
        ax.set_xlabel(xlabel)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.4)
    axes[0].set_ylabel("CDF")
    handles, labels = axes[0].get_legend_handles_labels()
    if anything:
        axes[-1].legend(handles, labels, loc="lower right", fontsize=7)
    _save(fig, path)
    return anything


def plot_allocation_parts(path: Path, specs: list[dict], done: set[str]) -> dict[str, list[float]]:
    """allocation_parts.png: each part of a task's allocation time per scheduler and seed, on a log axis (a
    part of microseconds stays visible beside one of seconds): a bar for its median over the tasks (the
    statistic of the 2022 paper's Fig. 7, which the claims on the parts' shares read) and a dot for its mean;
    returns, per scheduler, the parts' means and medians (each the mean over its seeds) for the report."""
    per: dict[str, dict[int, list[float]]] = {}
    medians: dict[tuple[str, int], list[float]] = {}
    for s in specs:
        if s["name"] not in done:
            continue
        # the tasks that started (one that never did has no allocation time, and parts of 0)
        cols = floats(Path(s["out_dir"]) / "tasks.csv", ("allocation_s",) + tuple(k for _, k in PARTS))
        per.setdefault(label(s), {})[s["seed"]] = [float(np.mean(cols[k])) if cols[k] else 0.0 for _, k in PARTS]
        medians[(label(s), s["seed"])] = [float(np.median(cols[k])) if cols[k] else 0.0 for _, k in PARTS]
    if not per:
        return {}
    fig, axes = _panels(1, "Parts per seed: bars the median (Fig. 7), dots the mean")
    ax = axes[0]
    groups = [(name, seed) for name, seeds in per.items() for seed in sorted(seeds)]
    width = 0.8 / len(PARTS)
    for i, (part, _) in enumerate(PARTS):
        x = np.arange(len(groups)) + i * width
        ax.bar(x, [max(medians[g][i], DELAY_FLOOR_S) for g in groups], width, label=f"{part} (median)",
               color=f"C{i}")
        ax.plot(x, [max(per[n][s][i], DELAY_FLOOR_S) for n, s in groups], linestyle="none", marker="o",
                markersize=4, color="k", label="mean" if i == 0 else None)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, [f"{n}\ns{s}" for n, s in groups], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("per task (s; below 1 us drawn at 1 us)")
    ax.legend(fontsize=7)
    _save(fig, path)
    return {n: {"mean": list(np.mean(np.array(list(seeds.values())), axis=0)),
                "median": list(np.mean(np.array([medians[(n, s)] for s in seeds]), axis=0))}
            for n, seeds in per.items()}
